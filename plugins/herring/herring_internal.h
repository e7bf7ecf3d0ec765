/*
 * Internals of libucxp2p_herring.so (never exported: the library is built
 * with -fvisibility=hidden and a version script). The exported herring*
 * functions are thin wrappers over these; nothing here calls back into the
 * exported names.
 */
#ifndef UCXP2P_HERRING_INTERNAL_H
#define UCXP2P_HERRING_INTERNAL_H

#include "herring.hpp"

#include <ucxp2p/p2p.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace herring {

/* ---- logging: "[ucxp2p:PID herring] level: message" on stderr, filtered
 * by P2P_LOG_LEVEL like the core's log. */
void log(p2p_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool log_enabled(p2p_log_level_t level);

/** One call site's burst count (a static per site), as the core's log
 *  keeps: at warn or error, and when P2P_LOG_LEVEL is warn or error, a site
 *  writes at most kBurst lines per kWindowNs; the next line written says
 *  how many were muted meanwhile. info and below write every line. */
struct Burst {
    static constexpr unsigned kBurst = 10;
    static constexpr int64_t kWindowNs = 10LL * 1000 * 1000 * 1000;
    std::atomic<int> busy{0};  // a spin flag: never waits on a lock
    int64_t window_start = 0;
    unsigned count = 0;
    uint64_t dropped = 0;
};
void log_burst(Burst &site, p2p_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- devices (herring_device.cc) */

/** Call add(name, arg) for each RDMA device under sysfs_root (NULL:
 *  /sys/class/infiniband, or P2P_HERRING_SYSFS_ROOT when set), sorted by
 *  name. A missing directory lists nothing. Never throws. */
void list_rdma_devices(const char *sysfs_root, void (*add)(const char *name, void *arg),
                       void *arg);

/** Visible CUDA devices through the driver API (libcuda.so.1 via dlopen);
 *  0 without a driver or GPU. Computed once. */
int cuda_device_count();

/** Local rank for herringLocalDevice: the one the core's rail planner
 *  reads (p2p_local_rank_query), else a launcher variable that names a rank
 *  without a size, else 0. */
uint32_t env_local_rank();

/* ---- runtime (herring_runtime.cc): one per process */

void initialize();
void shutdown();
void *register_memory(void *buff, int len);
void post(p2p_queue_t queue, int rank, void *buffer, void *mr, uint64_t length, int tensor_id,
          const void *context);
CompletionEntry pop_completion(p2p_queue_t queue);
/** Local rank once initialized, else from the environment. */
uint32_t local_rank();

/** ucxp2p status of a completion -> vendor code. */
herringP2PMessageErrorCode_t map_status(p2p_status_t status);

} // namespace herring

#endif /* UCXP2P_HERRING_INTERNAL_H */
