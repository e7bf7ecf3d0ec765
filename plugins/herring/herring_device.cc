/*
 * Machine facts for the herring API: RDMA device names and the number of
 * visible CUDA devices.
 *
 * CUDA is probed through the driver API loaded with dlopen("libcuda.so.1")
 * rather than by linking libcudart: there is exactly one driver library per
 * system, so this never loads a second copy of anything the application
 * (e.g. PyTorch with its own, possibly different, cudart) already has, adds
 * no link dependency, and degrades to "no GPU" on machines without a driver.
 */
#include "herring_internal.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <dlfcn.h>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace herring {

namespace {

constexpr const char *kSysfsRoot = "/sys/class/infiniband";

struct DirCloser {
    void operator()(DIR *d) const { closedir(d); }
};

int probe_cuda_devices() {
    // RTLD_LOCAL: the driver's symbols stay out of the global scope.
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        log(P2P_LOG_DEBUG, "local device: no cuda driver (%s)", dlerror());
        return 0;
    }
    using init_fn = int (*)(unsigned);
    using count_fn = int (*)(int *);
    auto cu_init = reinterpret_cast<init_fn>(dlsym(lib, "cuInit"));
    auto cu_count = reinterpret_cast<count_fn>(dlsym(lib, "cuDeviceGetCount"));
    int count = 0;
    if (cu_init == nullptr || cu_count == nullptr) {
        log(P2P_LOG_WARN, "local device: libcuda.so.1 lacks cuInit/cuDeviceGetCount");
    } else if (int rc = cu_init(0); rc != 0) {
        log(P2P_LOG_DEBUG, "local device: cuInit failed (%d): no cuda devices", rc);
    } else if (int rc2 = cu_count(&count); rc2 != 0 || count < 0) {
        log(P2P_LOG_DEBUG, "local device: cuDeviceGetCount failed (%d)", rc2);
        count = 0;
    }
    // The driver stays loaded: unloading it under a CUDA application is unsafe.
    return count;
}

bool parse_u32(const char *s, uint32_t *out) {
    if (s == nullptr || *s == '\0') {
        return false;
    }
    char *end = nullptr;
    unsigned long v = std::strtoul(s, &end, 10);
    if (*end != '\0' || v > UINT32_MAX) {
        return false;
    }
    *out = static_cast<uint32_t>(v);
    return true;
}

} // namespace

void list_rdma_devices(const char *sysfs_root, void (*add)(const char *, void *), void *arg) {
    if (sysfs_root == nullptr) {
        const char *env = std::getenv("P2P_HERRING_SYSFS_ROOT");
        sysfs_root = (env != nullptr && *env != '\0') ? env : kSysfsRoot;
    }
    std::vector<std::string> names;
    try {
        std::unique_ptr<DIR, DirCloser> dir(opendir(sysfs_root));
        if (!dir) {
            log(P2P_LOG_DEBUG, "rdma devices: %s not readable: none", sysfs_root);
            return;
        }
        while (const dirent *e = readdir(dir.get())) {
            if (e->d_name[0] != '.') {
                names.emplace_back(e->d_name);
            }
        }
        std::sort(names.begin(), names.end());
    } catch (...) {
        log(P2P_LOG_ERROR, "rdma devices: out of memory listing %s", sysfs_root);
        return;
    }
    for (const std::string &n : names) {
        add(n.c_str(), arg);
    }
}

int cuda_device_count() {
    static std::once_flag once;
    static int count = 0;
    std::call_once(once, [] { count = probe_cuda_devices(); });
    return count;
}

/** The variables naming a local rank that the core's rail planner reads,
 *  in its order of preference (p2p_local_rank_query): only for a launcher
 *  that names a rank without a size, which the planner does not accept. */
const char *const kLocalRankVars[] = {
    "P2P_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID", "SLURM_LOCALID", "PMIX_LOCAL_RANK"};

uint32_t env_local_rank() {
    // The rail planner's own reading, so that the GPU and its NICs agree.
    uint32_t rank = 0, size = 0;
    if (p2p_local_rank_query(&rank, &size) == P2P_OK && size > 0) {
        return rank;
    }
    // None it accepts (a launcher that sets a local rank alone, with no
    // size): the GPU still follows that rank, in the planner's order of
    // sources; the planner logged why it plans as rank 0 of 1.
    for (const char *v : kLocalRankVars) {
        uint32_t r;
        if (parse_u32(std::getenv(v), &r)) {
            return r;
        }
    }
    return 0;
}

} // namespace herring
