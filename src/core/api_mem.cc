/*
 * The C entry points of memory registration.
 */
#include "core/api_handles.h"
#include "core/guard.h"
#include "core/log.h"
#include "core/memtype.h"
#include "core/vm_range.h"

#include <new>

using namespace ucxp2p;
using namespace ucxp2p::api;

namespace {

/** Register [address, address + length) with ce's context; shm_fd/shm_ino
 *  name its memfd when same-host peers may map it (-1: not shareable). */
p2p_status_t register_mem(Registry<ContextEntry>::Ref &ce, void *address,
                          size_t length, int shm_fd, uint64_t shm_ino,
                          std::unique_ptr<memtype::Shadow> shadow, bool writable,
                          p2p_mem_h *mem_p) {
    ucp_mem_map_params_t mp = {};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = shadow ? shadow->host() : address;
    mp.length = length;
    // Allocated before the registration: a throw after ucp_mem_map would
    // leak the UCX handle (guarded() only turns it into NO_MEMORY).
    auto e = std::make_unique<MemEntry>();
    ucp_mem_h memh = nullptr;
    ucs_status_t st;
    {
        std::lock_guard<Mutex> lock(ce->ctx->worker_mu());
        st = ucp_mem_map(ce->ctx->ucp(), &mp, &memh);
    }
    if (st != UCS_OK) {
        P2P_LOG(P2P_LOG_ERROR, "mem: ucp_mem_map of %zu bytes at %p failed: %s",
                length, address, ucs_status_string(st));
        return st == UCS_ERR_NO_MEMORY ? P2P_ERR_NO_MEMORY : P2P_ERR_TRANSPORT;
    }
    e->ctx = ce->ctx;
    e->mem.ctx = ce->ctx.get();
    e->mem.ctx_id = ce->id;
    e->mem.base = reinterpret_cast<uintptr_t>(address);
    e->mem.length = length;
    e->mem.memh = memh;
    e->mem.shm_fd = shm_fd;
    e->mem.shm_ino = shm_ino;
    e->mem.shadow = std::move(shadow);
    e->mem.writable = writable;
    uint64_t id = 0;
    try {
        id = g_mems.add(std::move(e));  // may allocate a chunk of slots
    } catch (const std::bad_alloc &) {
        id = 0;  // undone below, as when every slot is taken
    }
    if (id == 0) {
        std::lock_guard<Mutex> lock(ce->ctx->worker_mu());
        ucp_mem_unmap(ce->ctx->ucp(), memh);
        return P2P_ERR_NO_MEMORY;
    }
    // The context may have been destroyed meanwhile (after it collected its
    // registrations): then undo, or this one would outlive it.
    if (!g_contexts.get(ce->id)) {
        Registry<MemEntry>::Ref m = g_mems.remove(id);
        if (m) destroy_mem(m);
        return P2P_ERR_INVALID_HANDLE;
    }
    *mem_p = handle_from_id<p2p_mem_h>(id);
    return P2P_OK;
}

}  // namespace

/** Validate and register; see p2p_mem_register. */
p2p_status_t ucxp2p::mem_register(p2p_context_h context, void *address, size_t length,
                          int shm_fd, uint64_t shm_ino, p2p_mem_h *mem_p) {
    return guarded("mem", [&]() -> p2p_status_t {
        Registry<ContextEntry>::Ref ce = g_contexts.get(handle_id(context));
        if (!ce) return P2P_ERR_INVALID_HANDLE;
        if (address == nullptr || length == 0 || mem_p == nullptr) {
            return P2P_ERR_INVALID_PARAM;
        }
        if (reinterpret_cast<uintptr_t>(address) + length < reinterpret_cast<uintptr_t>(address)) {
            return P2P_ERR_INVALID_PARAM;  // wraps around the address space
        }
        memtype::Kind kind;
        const memtype::Admit how = memtype::check_registration(
            address, ce->ctx->ucx_cuda(), ce->ctx->settings().cuda_staging, &kind);
        if (how == memtype::Admit::REFUSED) return P2P_ERR_UNSUPPORTED;
        std::unique_ptr<memtype::Shadow> shadow;
        if (how == memtype::Admit::STAGED) {
            p2p_status_t st = memtype::Shadow::create(address, length, &shadow);
            if (st != P2P_OK) return st;
        }
        // Host memory must be mapped here: UCX registers it without touching
        // it, and would fault in the middle of a transfer instead.
        bool writable = true;
        if (how == memtype::Admit::DIRECT && kind != memtype::Kind::DEVICE) {
            const vm::Access a = vm::range_access(address, length);
            if (a == vm::Access::UNMAPPED || a == vm::Access::NO_ACCESS) {
                P2P_LOG(P2P_LOG_ERROR, "mem: [%p, %p) is %s in this process: not registered",
                        address, static_cast<void *>(static_cast<char *>(address) + length),
                        vm::access_name(a));
                return P2P_ERR_INVALID_PARAM;
            }
            writable = a != vm::Access::READ_ONLY;
        }
        return register_mem(ce, address, length, shm_fd, shm_ino, std::move(shadow),
                            writable, mem_p);
    });
}

bool ucxp2p::context_alive(p2p_context_h context) {
    return static_cast<bool>(g_contexts.get(handle_id(context)));
}

size_t ucxp2p::mem_registrations(p2p_context_h context) {
    Registry<ContextEntry>::Ref ce = g_contexts.get(handle_id(context));
    if (!ce) return 0;
    const uint64_t id = ce->id;
    size_t n = 0;
    g_mems.for_each([&](const MemEntry &m) { n += m.mem.ctx_id == id ? 1 : 0; });
    return n;
}

extern "C" {

p2p_status_t p2p_mem_register(p2p_context_h context, void *address, size_t length,
                              p2p_mem_h *mem_p) {
    return mem_register(context, address, length, -1, 0, mem_p);
}

p2p_status_t p2p_mem_deregister(p2p_mem_h mem) {
    return guarded("mem", [&]() -> p2p_status_t {
        Registry<MemEntry>::Ref e = g_mems.get(handle_id(mem));
        if (!e) return P2P_ERR_INVALID_HANDLE;
        // Busy in serialized mode: progress once and look again. There only
        // the application's calls progress while it keeps calling (the
        // backstop stays out), and one that polls this call alone must let
        // what the context's own work frees (a receive whose sender is
        // gone, looked for by the periodic work) come free too. Not in
        // multi mode: the progress thread runs that work, and a user's
        // progress call makes it step aside for 2 ms (a deregister poll
        // loop would slow every transfer of the context).
        const bool serialized = e->ctx->progress().serialized();
        for (int look = 0;; ++look) {
            {
                // Posts take their reference under the worker lock: once
                // dead is set here with nothing in flight, no operation
                // can start.
                std::lock_guard<Mutex> lock(e->ctx->worker_mu());
                if (e->mem.dead) return P2P_ERR_INVALID_HANDLE;  // racing deregister
                if (e->mem.inflight == 0) {
                    e->mem.dead = true;
                    break;
                }
            }
            if (look == 1 || !serialized) return P2P_ERR_BUSY;
            e->ctx->progress().try_progress_from_user();
        }
        if (!g_mems.remove(handle_id(mem))) return P2P_ERR_INVALID_HANDLE;
        destroy_mem(e);
        return P2P_OK;
    });
}

} // extern "C"
