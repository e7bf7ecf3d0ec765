/*
 * A memory registration (ucp_mem_map of a user buffer). Operations in
 * flight hold a reference count so deregistration while they run is refused
 * (P2P_ERR_BUSY) rather than unmapping memory UCX is still using.
 */
#ifndef UCXP2P_CORE_MEM_H
#define UCXP2P_CORE_MEM_H

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ucxp2p {

class Context;

struct Mem {
    Context *ctx = nullptr;       // owning context (outlived by it)
    uint64_t ctx_id = 0;
    uintptr_t base = 0;
    size_t length = 0;
    ucp_mem_h memh = nullptr;
    std::atomic<int64_t> inflight{0};
    std::atomic<bool> dead{false};

    /** True when [p, p + len) lies inside the registration. */
    bool contains(const void *p, size_t len) const {
        uintptr_t a = reinterpret_cast<uintptr_t>(p);
        return a >= base && a - base <= length && len <= length - (a - base);
    }

    /** Take a reference for an operation; false if being deregistered. */
    bool acquire() {
        inflight.fetch_add(1);
        if (dead.load()) {
            inflight.fetch_sub(1);
            return false;
        }
        return true;
    }
    void release() { inflight.fetch_sub(1); }
};

} // namespace ucxp2p

#endif
