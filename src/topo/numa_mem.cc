/*
 * p2p_mem_alloc / p2p_mem_free / p2p_mem_numa_node (include/ucxp2p/p2p_mem.h):
 * shared mappings of a memfd bound to a NUMA node with mbind, registered
 * with the memfd named (core/mem.h) so same-host receivers may map it once
 * and copy with memcpy (core/shm_region.h); anonymous memory when no memfd
 * can be made. The mappings we made are remembered (address -> length,
 * registration, fd) so p2p_mem_free can check its input.
 */
#include <ucxp2p/p2p_mem.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/rails.h"

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

constexpr int kMpolBind = 2;           // MPOL_BIND (linux/mempolicy.h)
constexpr int kMaxNodes = 1024;        // bits in our node mask
constexpr size_t kSamplePages = 64;

struct Mapping {
    size_t length;
    p2p_mem_h mem;
    int fd;  // the memfd, or -1
};

/** Map len bytes: a memfd shared mapping (fd, inode set) or, failing that,
 *  anonymous memory (fd -1). MAP_FAILED on failure. */
void *map_memory(size_t len, int *fd_p, uint64_t *ino_p) {
    *fd_p = -1;
    *ino_p = 0;
    int fd = memfd_create("ucxp2p", MFD_CLOEXEC);
    struct stat sb;
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(len)) == 0 && fstat(fd, &sb) == 0) {
        void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            *fd_p = fd;
            *ino_p = static_cast<uint64_t>(sb.st_ino);
            return p;
        }
    }
    if (fd >= 0) close(fd);
    P2P_LOG(P2P_LOG_DEBUG, "mem alloc: no shareable memory (%s); anonymous "
            "memory instead", std::strerror(errno));
    return mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                -1, 0);
}

void unmap_memory(void *p, size_t len, int fd) {
    munmap(p, len);
    if (fd >= 0) close(fd);
}

std::mutex &maps_mu() {
    static std::mutex *m = new std::mutex();
    return *m;
}

std::map<uintptr_t, Mapping> &maps() {
    static auto *m = new std::map<uintptr_t, Mapping>();
    return *m;
}

bool node_exists(int node) {
    struct stat sb;
    std::string p = "/sys/devices/system/node/node" + std::to_string(node);
    return stat(p.c_str(), &sb) == 0;
}

/** mbind(MPOL_BIND) of [addr, addr + len) to node; 0 or errno. */
int bind_to_node(void *addr, size_t len, int node) {
    unsigned long mask[kMaxNodes / (8 * sizeof(unsigned long))] = {};
    mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
    long rc = syscall(SYS_mbind, addr, len, kMpolBind, mask,
                      static_cast<unsigned long>(kMaxNodes + 1), 0UL);
    return rc == 0 ? 0 : errno;
}

p2p_status_t mem_alloc(p2p_context_h context, size_t length, int numa_node,
                       void **address_p, p2p_mem_h *mem_p) {
    if (length == 0 || address_p == nullptr || mem_p == nullptr ||
        numa_node < -1 || numa_node >= kMaxNodes) {
        P2P_LOG(P2P_LOG_ERROR, "mem alloc: bad arguments (length %zu, numa %d)",
                length, numa_node);
        return P2P_ERR_INVALID_PARAM;
    }
    if (context == nullptr) {
        return P2P_ERR_INVALID_HANDLE;
    }
    if (numa_node >= 0 && !node_exists(numa_node)) {
        P2P_LOG(P2P_LOG_ERROR, "mem alloc: numa node %d does not exist", numa_node);
        return P2P_ERR_INVALID_PARAM;
    }
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    if (length > SIZE_MAX - page) {
        return P2P_ERR_NO_MEMORY;
    }
    size_t len = (length + page - 1) / page * page;
    int node = numa_node >= 0 ? numa_node : ucxp2p::rails_numa();
    int fd = -1;
    uint64_t ino = 0;
    void *p = map_memory(len, &fd, &ino);
    if (p == MAP_FAILED) {
        P2P_LOG(P2P_LOG_ERROR, "mem alloc: mmap of %zu bytes failed: %s", len,
                std::strerror(errno));
        return P2P_ERR_NO_MEMORY;
    }
    if (node >= 0) {
        int err = bind_to_node(p, len, node);
        if (err != 0) {
            unmap_memory(p, len, fd);
            P2P_LOG(P2P_LOG_ERROR, "mem alloc: mbind to numa node %d failed: %s",
                    node, std::strerror(err));
            return P2P_ERR_UNSUPPORTED;
        }
    }
    p2p_mem_h mem = nullptr;
    p2p_status_t st = ucxp2p::mem_register(context, p, len, fd, ino, &mem);
    if (st != P2P_OK) {
        unmap_memory(p, len, fd);
        return st;
    }
    {
        std::lock_guard<std::mutex> lock(maps_mu());
        maps()[reinterpret_cast<uintptr_t>(p)] = Mapping{len, mem, fd};
    }
    P2P_LOG(P2P_LOG_DEBUG, "mem alloc: %zu bytes at %p on numa %d", len, p, node);
    *address_p = p;
    *mem_p = mem;
    return P2P_OK;
}

p2p_status_t mem_free(void *address, p2p_mem_h mem) {
    std::lock_guard<std::mutex> lock(maps_mu());
    auto it = maps().find(reinterpret_cast<uintptr_t>(address));
    if (address == nullptr || it == maps().end() || it->second.mem != mem) {
        P2P_LOG(P2P_LOG_ERROR, "mem free: %p is not memory from p2p_mem_alloc "
                "with this registration", address);
        return P2P_ERR_INVALID_PARAM;
    }
    p2p_status_t st = p2p_mem_deregister(mem);
    if (st == P2P_ERR_BUSY) {
        return st;
    }
    // INVALID_HANDLE: the user deregistered it already (or the context is
    // gone); the mapping is still ours to release.
    unmap_memory(address, it->second.length, it->second.fd);
    maps().erase(it);
    return P2P_OK;
}

} // namespace

extern "C" p2p_status_t p2p_mem_alloc(p2p_context_h context, size_t length,
                                      int numa_node, void **address_p,
                                      p2p_mem_h *mem_p) {
    try {
        return mem_alloc(context, length, numa_node, address_p, mem_p);
    } catch (...) {
        return P2P_ERR_NO_MEMORY;  // bookkeeping allocation failed
    }
}

extern "C" p2p_status_t p2p_mem_free(void *address, p2p_mem_h mem) {
    try {
        return mem_free(address, mem);
    } catch (...) {
        return P2P_ERR_NO_MEMORY;
    }
}

extern "C" int p2p_mem_numa_node(const void *address, size_t length) {
    if (address == nullptr || length == 0) {
        return -1;
    }
    uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    uintptr_t first = reinterpret_cast<uintptr_t>(address) / page * page;
    uintptr_t last = (reinterpret_cast<uintptr_t>(address) + length - 1) / page * page;
    size_t npages = (last - first) / page + 1;
    size_t n = npages < kSamplePages ? npages : kSamplePages;
    void *pages[kSamplePages];
    int status[kSamplePages];
    for (size_t i = 0; i < n; ++i) {
        size_t k = n == 1 ? 0 : i * (npages - 1) / (n - 1);
        pages[i] = reinterpret_cast<void *>(first + k * page);
    }
    if (syscall(SYS_move_pages, 0, n, pages, nullptr, status, 0) != 0) {
        return -1;
    }
    int node = -1;
    for (size_t i = 0; i < n; ++i) {
        if (status[i] < 0) {
            continue;  // not present
        }
        if (node >= 0 && status[i] != node) {
            return -1;
        }
        node = status[i];
    }
    return node;
}
