/*
 * The handle registries and the id sequence they share (core/handles.h).
 */
#include "core/api_handles.h"

#include "core/log.h"

#include <pthread.h>

namespace ucxp2p {

uint64_t handle_next_id() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1);
}

namespace api {

// Never destroyed: objects the application did not release before exit()
// are left to the OS instead of being torn down in static-destructor order
// (UCX would assert on registrations outliving their context).
Registry<ContextEntry> &g_contexts = *new Registry<ContextEntry>();
Registry<BootstrapEntry> &g_bootstraps = *new Registry<BootstrapEntry>();
Registry<CommEntry> &g_comms = *new Registry<CommEntry>();
Registry<MemEntry> &g_mems = *new Registry<MemEntry>();

namespace {

// fork(): the child starts without the parent's objects (p2p.h).
void registries_lock_for_fork() {
    g_contexts.lock_for_fork();
    g_bootstraps.lock_for_fork();
    g_comms.lock_for_fork();
    g_mems.lock_for_fork();
}

void registries_unlock_in_parent() {
    g_mems.unlock_after_fork();
    g_comms.unlock_after_fork();
    g_bootstraps.unlock_after_fork();
    g_contexts.unlock_after_fork();
}

void registries_abandon_in_child() {
    registries_unlock_in_parent();
    g_contexts.abandon_in_child();
    g_bootstraps.abandon_in_child();
    g_comms.abandon_in_child();
    g_mems.abandon_in_child();
}

// After the registries above (one translation unit: in order).
const bool g_fork_handlers = [] {
    return pthread_atfork(registries_lock_for_fork, registries_unlock_in_parent,
                          registries_abandon_in_child) == 0;
}();

}  // namespace

p2p_bootstrap_h bootstrap_handle(std::unique_ptr<Bootstrap> bs) {
    auto e = std::make_unique<BootstrapEntry>();
    e->info.rank = bs->rank();
    e->info.size = bs->size();
    e->info.local_rank = bs->local_rank();
    e->info.local_size = bs->local_size();
    e->info.name = bs->name();
    e->bs = std::move(bs);
    return handle_from_id<p2p_bootstrap_h>(g_bootstraps.add(std::move(e)));
}

/** At exit, stop progress threads of contexts the application did not
 *  destroy, before UCX's own library destructors run. */
void stop_all_progress() {
    g_contexts.for_each([](const ContextEntry &e) { e.ctx->stop_progress(); });
}

void destroy_mem(Registry<MemEntry>::Ref &ref) {
    MemEntry &e = *ref;
    std::lock_guard<Mutex> lock(e.ctx->worker_mu());
    e.mem.dead = true;  // a post still holding a lookup now fails
    if (e.mem.inflight != 0) {
        // Only after a communicator's shutdown gave up waiting, or an
        // operation naming a failed peer was completed without UCX
        // (Comm::abandon_stuck; both logged there): UCX may still use the
        // mapping and an operation will still release this record. Keep
        // both rather than free them under it.
        P2P_LOG(P2P_LOG_ERROR, "mem: registration at %p still used by %lld "
                "operations at context destroy: left mapped",
                reinterpret_cast<void *>(e.mem.base),
                static_cast<long long>(e.mem.inflight));
        ref.leak();  // deliberately (allocates nothing: teardown must not fail)
        return;
    }
    ucp_mem_unmap(e.ctx->ucp(), e.mem.memh);
}

}  // namespace api
}  // namespace ucxp2p
