/*
 * Operations a communicator's shutdown gave up on (Comm::abandon_in_flight)
 * that still wait on a UCX receive from a same-host peer: a split receive
 * waiting for its sender's WDONE. Its registration stays busy while the
 * sender may still write; a sender that dies instead never answers, and
 * UCX does not end a tag receive when a peer dies. The context watches the
 * sender's process and cancels the receive once it is gone, which frees
 * the operation (orphan_done) and its registration -- also after the
 * communicator was destroyed.
 */
#include "core/context.h"
#include "core/cma.h"
#include "core/log.h"
#include "core/op.h"

#include <new>

namespace ucxp2p {

void Context::watch_orphan(Op *op, uint32_t pid) noexcept {
    try {
        watched_orphans_.push_back({op, pid});
    } catch (const std::bad_alloc &) {
        // out of memory: unwatched, its registration stays busy until the
        // worker goes, as before this watch existed
    }
}

void Context::forget_orphan(const Op *op) noexcept {
    for (size_t i = 0; i < watched_orphans_.size(); ++i) {
        if (watched_orphans_[i].op == op) {
            watched_orphans_[i] = watched_orphans_.back();
            watched_orphans_.pop_back();
            return;
        }
    }
}

void Context::reap_orphans() noexcept {
    if (watched_orphans_.empty() || !periodic_run_) return;
    bool any_gone = false;
    for (const WatchedOrphan &w : watched_orphans_) {
        if (cma::process_gone(w.pid)) {
            any_gone = true;
            break;
        }
    }
    if (!any_gone) return;
    // A sender that wrote its part, answered and exited: its WDONE may
    // still wait in the worker. Taken in, it ends its receive as usual
    // (orphan_done forgets it) instead of staying unexpected for good.
    take_in_from_hook();
    for (size_t i = 0; i < watched_orphans_.size();) {
        const WatchedOrphan w = watched_orphans_[i];
        if (!cma::process_gone(w.pid)) {
            ++i;
            continue;
        }
        // Unwatched first: the cancel may run its callback at once
        // (orphan_done, which frees it and forgets nothing more).
        watched_orphans_[i] = watched_orphans_.back();
        watched_orphans_.pop_back();
        P2P_LOG(P2P_LOG_DEBUG, "context: process %u is gone: cancelling the receive "
                "from it a shutdown gave up on (its registration comes free)", w.pid);
        ucp_request_cancel(worker(), w.op->request);
    }
}

} // namespace ucxp2p
