#include "core/fence.h"

#include "core/log.h"

#include <cerrno>
#include <cstring>
#include <mutex>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ucxp2p {

namespace fence_detail {
std::atomic<bool> g_asymmetric{false};
std::atomic<int> g_fence_word{0};
}

namespace {

long membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }

bool register_expedited() {
    long cmds = membarrier(MEMBARRIER_CMD_QUERY);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) {
        P2P_LOG(P2P_LOG_DEBUG, "fence: membarrier private expedited not offered "
                "(%s); completion queues use full fences",
                cmds < 0 ? strerror(errno) : "not in the query");
        return false;
    }
    if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0) {
        P2P_LOG(P2P_LOG_DEBUG, "fence: membarrier registration failed: %s; "
                "completion queues use full fences", strerror(errno));
        return false;
    }
    return true;
}

} // namespace

void fence_init() {
    static std::once_flag once;
    std::call_once(once, [] {
        if (register_expedited()) {
            fence_detail::g_asymmetric.store(true, std::memory_order_seq_cst);
        }
    });
}

void heavy_fence() {
    full_fence();
    if (!fence_detail::g_asymmetric.load(std::memory_order_seq_cst)) {
        return;  // the other side fences fully
    }
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
        return;
    }
    // Registration is per address space and survives fork; an exec'd image
    // starts unregistered but also loads the library anew. Re-register once
    // in case; if that fails too, go back to full fences for good. A push
    // racing with this very wait may then go unnoticed: waiters block in
    // bounded slices (p2p_comm_wait re-checks every 100 ms), so that costs
    // time once, never a hang.
    int err = errno;
    if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
        membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
        return;
    }
    fence_detail::g_asymmetric.store(false, std::memory_order_seq_cst);
    full_fence();
    P2P_LOG(P2P_LOG_WARN, "fence: membarrier failed (%s); completion queues "
            "use full fences from now on", strerror(err));
}

} // namespace ucxp2p
