/*
 * A memory registration (ucp_mem_map of a user buffer). Operations in
 * flight hold a reference count so deregistration while they run is refused
 * (P2P_ERR_BUSY) rather than unmapping memory UCX is still using.
 *
 * inflight and dead are read and written only with the owning context's
 * worker lock held (operations are posted and completed under it, and
 * deregistration checks under it), so they need no atomic read-modify-write
 * on the per-operation path.
 */
#ifndef UCXP2P_CORE_MEM_H
#define UCXP2P_CORE_MEM_H

#include "core/staging.h"

#include <ucp/api/ucp.h>
#include <ucxp2p/p2p.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ucxp2p {

class Context;

struct Mem {
    Context *ctx = nullptr;       // owning context (outlived by it)
    uint64_t ctx_id = 0;
    uintptr_t base = 0;
    size_t length = 0;
    ucp_mem_h memh = nullptr;
    // From p2p_mem_alloc: the memfd same-host peers may map (-1: none).
    int shm_fd = -1;
    uint64_t shm_ino = 0;
    int64_t inflight = 0;   // worker lock held
    bool dead = false;      // worker lock held
    // Device memory UCX cannot move: UCX maps and moves this host copy
    // (core/staging.h); base and length stay the device range.
    std::unique_ptr<memtype::Shadow> shadow;
    // Host memory mapped read-only when registered: receives refused.
    bool writable = true;

    /** True when [p, p + len) lies inside the registration. */
    bool contains(const void *p, size_t len) const {
        uintptr_t a = reinterpret_cast<uintptr_t>(p);
        return a >= base && a - base <= length && len <= length - (a - base);
    }

    /** Take a reference for an operation; false if being deregistered.
     *  Worker lock held. */
    bool acquire() {
        if (dead) {
            return false;
        }
        ++inflight;
        return true;
    }
    /** Worker lock held. */
    void release() { --inflight; }
};

/** p2p_mem_register with the memfd (shm_fd, its inode shm_ino) that holds
 *  the range, so same-host peers may map it (core/shm_region.h); -1: none.
 *  The fd must stay open until the registration is released. */
p2p_status_t mem_register(p2p_context_h context, void *address, size_t length,
                          int shm_fd, uint64_t shm_ino, p2p_mem_h *mem_p);

/** A memfd named to mem_register was closed (after its registration was
 *  released): same-host peers that mapped it unmap it when they next read
 *  from this process by mapping (core/cma.h, kClosedWord). */
void mem_region_closed();

/** context names a live context (p2p_mem_alloc looks before it maps). */
bool context_alive(p2p_context_h context);

/** How many registrations of context are alive (0 for an unknown context):
 *  for tests that check a failed call registered nothing. */
size_t mem_registrations(p2p_context_h context);

} // namespace ucxp2p

#endif
