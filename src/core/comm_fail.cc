/*
 * A peer that failed (UCX's error handler, or watch_peers finding a
 * same-host peer's process gone) or left (its goodbye): what the
 * communicator does about it, once per peer, after the progress call that
 * learnt it (Comm::handle_failures, a deferred hook of the context); and, a
 * peer timeout later, the operations naming it that UCX never ended
 * (Comm::abandon_stuck).
 */
#include "core/comm.h"
#include "core/log.h"

namespace ucxp2p {

void Comm::on_peer_left(uint32_t peer) {
    Peer &p = peers_[peer];
    if (p.left) return;
    p.left = true;
    P2P_LOG(P2P_LOG_DEBUG, "comm %u: rank %u said goodbye", id_, peer);
    // Park its endpoint: new posts naming it fail from now on.
    if (!p.ep_error) {
        p.parked_ep = p.ep;
        p.ep = nullptr;
    }
    if (p.failed) return;  // its failure is handled already
    p.failed = true;
    p.gone.store(true, std::memory_order_release);
    failed_pending_.push_back(peer);
    ctx_->request_deferred();  // handle_failures after this progress call
}

void Comm::on_peer_error(uint32_t peer, ucs_status_t st) {
    Peer &p = peers_[peer];
    if (p.ep_error) return;
    p.ep_error = true;
    p.failed = true;
    p.gone.store(true, std::memory_order_release);
    // While shutting down, peers leaving first is expected, not a warning.
    if (p.left) {
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: peer rank %u left (%s)", id_, peer,
                ucs_status_string(st));
    } else {
        P2P_LOG(shut_.load() ? P2P_LOG_DEBUG : P2P_LOG_WARN,
                "comm %u: peer rank %u failed: %s", id_, peer,
                ucs_status_string(st));
    }
    failed_pending_.push_back(peer);
    ctx_->request_deferred();  // handle_failures after this progress call
}

void Comm::cancel_waits_from(uint32_t peer) {
    // Receives from a dead peer would wait forever: cancel them (their
    // completion reports P2P_ERR_PEER_FAILURE, also where the peer is not
    // marked failed: one no endpoint can be created to, see post_locked).
    // One already matched (its data arriving) is not in UCX's expected
    // queue: cancel leaves it be.
    for (Op *op = ops_; op != nullptr; op = op->next) {
        if (waits_on_receive(*op) && op->entry.peer == peer) op->peer_lost = true;
    }
    cancel_receives([peer](const Op &op) {
        return waits_on_receive(op) && op.entry.peer == peer;
    });
}

bool Comm::ucx_sends_to(uint32_t peer) const {
    for (const Op *op = ops_; op != nullptr; op = op->next) {
        if (is_ucx_send(*op) && op->entry.peer == peer) return true;
    }
    return false;
}

void Comm::watch_peers() {
    if (watched_.empty() || !ctx_->periodic_run()) return;
    for (size_t i = 0; i < watched_.size();) {
        const uint32_t r = watched_[i];
        Peer &p = peers_[r];
        if (p.failed || p.left) {
            watched_[i] = watched_.back();  // UCX or its goodbye told us
            watched_.pop_back();
            continue;
        }
        if (cma::process_gone(p.pid)) {
            // Its last messages (answers to our sends, its goodbye) may
            // have arrived after this progress call took in what it found
            // and before the process ended: a process that is gone sends
            // nothing more, so take in what is here, then decide. Its
            // goodbye (on_peer_left) makes it a peer that left, and our
            // sends it answered complete OK.
            ctx_->take_in_from_hook();
            if (!p.failed && !p.left) {
                P2P_LOG(P2P_LOG_DEBUG, "comm %u: rank %u (pid %u) is gone", id_, r,
                        p.pid);
                on_peer_error(r, UCS_ERR_CONNECTION_RESET);
            }
        }
        ++i;
    }
}

void Comm::handle_failures() {
    watch_peers();
    close_flushed();
    say_hellos();
    answer_late_hellos();
    // By index, not by swapping the vector away: its capacity (2 entries
    // per peer, reserved at create) is what lets the UCX callbacks that
    // append to it never allocate.
    for (size_t i = 0; i < failed_pending_.size(); ++i) {
        const uint32_t peer = failed_pending_[i];
        cancel_waits_from(peer);
        Peer &p = peers_[peer];
        // Our mappings of its regions would keep their memory alive while
        // this communicator lives, its process gone or done with us. (A
        // request of it still unreceived maps again, or reads with
        // process_vm_readv, or finds it gone.)
        if (p.maps.size() != 0) {
            P2P_LOG(P2P_LOG_DEBUG, "comm %u: unmapping %zu region(s) of rank %u",
                    id_, p.maps.size(), peer);
            p.maps.clear();
        }
        // A failed endpoint is closed by force: sends still queued on it
        // fail now. One that said goodbye stays open (parked) while only
        // its last messages may still be arriving, but not while sends to
        // it wait in UCX: its drain answers those only if they reached it
        // before it drained (an endpoint still being wired up may deliver
        // later), so closing by force (once flushed: force_close_flushed)
        // is what ends them. (The one cost: on
        // a multi-lane endpoint, a fragment it sent before the goodbye on
        // another lane could still be in flight and is cut off.)
        if (p.ep_error) {
            close_ep(&p.ep, true);
            close_ep(&p.parked_ep, true);
            start_abandon_clock(&p);
        } else if (ucx_sends_to(peer)) {
            force_close_flushed(&p.parked_ep, peer, false);
        }
    }
    failed_pending_.clear();
    abandon_stuck();
}

void Comm::abandon_stuck() {
    if (!dead_watch_) return;
    const int64_t now = now_ns();
    const uint32_t timeout_ms = ctx_->settings().peer_timeout_ms;
    const int64_t grace_ns = static_cast<int64_t>(timeout_ms) * 1000000LL;
    bool waiting = false;  // an op naming a dead peer is still in its grace
    uint32_t last_peer = UINT32_MAX;
    size_t count = 0;  // abandoned ops naming last_peer, for its one warning
    auto warn = [&]() {
        if (count == 0) return;
        P2P_LOG(P2P_LOG_WARN, "comm %u: %zu operation(s) naming failed rank %u "
                "not ended by UCX %u ms after the failure: completed now as peer "
                "failures, their memory stays registered until UCX lets go", id_,
                count, last_peer, timeout_ms);
        count = 0;
    };
    for (Op *op = ops_, *next; op != nullptr; op = next) {
        next = op->next;  // op leaves the list below
        const uint32_t peer = op->entry.peer;
        const Peer &p = peers_[peer];
        if (!p.ep_error || p.dead_since_ns == 0) continue;
        if (op->copy != Op::NO_COPY) {  // ends with its copy (comm_copy.cc),
            waiting = true;               // or goes on waiting: look again
            continue;
        }
        if (now - p.dead_since_ns < grace_ns) {
            waiting = true;
            continue;
        }
        if (peer != last_peer) {
            warn();
            last_peer = peer;
        }
        ++count;
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: %s rank %u tensor %u (%zu bytes, stage %d) "
                "abandoned to UCX", id_, op->is_send ? "send to" : "recv from", peer,
                op->entry.tensor_id, op->length, static_cast<int>(op->stage));
        abandon_op(op, P2P_ERR_PEER_FAILURE);
    }
    warn();
    dead_watch_ = waiting;
}

void Comm::abandon_op(Op *op, p2p_status_t st) {
    if (op->is_send && op->stage != Op::PLAIN) {
        cma::bump_epoch(op->seq);  // its buffer may be reused: no more reads
    }
    if (op->offered) {
        ctx_->bulk_withdraw(op->seq);  // nor over tcp
        op->offered = false;
    }
    if (op->chosen != 0) report_choice(op, false);
    unlink(op);
    op->abandoned = true;
    op->comm = nullptr;  // UCX's callback, if it ever comes, frees it
    ctx_->progress().op_completed();
    p2p_completion_t e = op->entry;
    e.status = st;
    e.bytes = 0;
    cq_[op->is_send ? P2P_QUEUE_SEND : P2P_QUEUE_RECV].push(e);
}

size_t Comm::abandon_in_flight() {
    size_t n = 0;
    for (Op *op = ops_, *next; op != nullptr; op = next) {
        next = op->next;  // op leaves the list below
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: %s rank %u tensor %u (%zu bytes, stage %d) "
                "not ended by shutdown's deadline: P2P_ERR_TIMEOUT", id_,
                op->is_send ? "send to" : "recv from", op->entry.peer,
                op->entry.tensor_id, op->length, static_cast<int>(op->stage));
        const Peer &p = peers_[op->entry.peer];
        const bool watch = !op->is_send && op->stage == Op::RECV_SPLIT && p.pid_visible;
        abandon_op(op, P2P_ERR_TIMEOUT);
        // Its WDONE receive stays in UCX: if the sender dies instead of
        // answering, nothing else would ever end it.
        if (watch) ctx_->watch_orphan(op, p.pid);
        ++n;
    }
    return n;
}

} // namespace ucxp2p
