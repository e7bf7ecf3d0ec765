/*
 * Shutdown's steps around Comm::shutdown (core/comm.cc): hellos and
 * goodbyes, the endpoints whose sends only a forced close ends (flushed
 * first), and the drain of messages nobody will receive; and the receives
 * the application takes back before that (cancel_recv).
 */
#include "core/comm.h"
#include "core/context.h"
#include "core/log.h"

namespace ucxp2p {

void Comm::say_closing(uint32_t r, ucp_ep_h ep) {
    if (ep == nullptr || peers_[r].ep_error || r == rank_) return;
    ucs_status_t st = Context::send_note(ep, {Context::kClosingMagic, id_, gen_, rank_});
    if (st != UCS_OK) {
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: closing note to rank %u failed: %s", id_, r,
                ucs_status_string(st));
    }
}

void Comm::say_note(uint32_t r, ucp_ep_h ep, uint32_t magic) {
    if (ep == nullptr || peers_[r].failed || r == rank_) return;
    ucs_status_t st = Context::send_note(ep, {magic, id_, gen_, rank_});
    if (st != UCS_OK) {
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: %s to rank %u failed: %s", id_,
                magic == Context::kHelloMagic ? "hello" : "goodbye", r,
                ucs_status_string(st));
    }
}

void Comm::goodbye_to_watcher(uint32_t r) {
    Peer &p = peers_[r];
    if (p.ep != nullptr || p.failed || p.closed_at_shutdown || r == rank_) return;
    ucp_ep_h ep = nullptr;
    if (connect_ep(r, &ep, /*quiet=*/true) == P2P_OK) {
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: goodbye to rank %u, which said hello", id_, r);
        say_goodbye(r, ep);
    }
}

void Comm::on_hello_flushed(uint32_t peer, ucs_status_t st) {
    if (st != UCS_OK) return;  // the endpoint failed or was closed
    hellos_due_.push_back(peer);  // within the capacity reserved at create
    ctx_->request_deferred();  // say_hellos after this progress call
}

void Comm::say_hellos() {
    if (!said_goodbye_) {
        for (uint32_t r : hellos_due_) say_note(r, peers_[r].ep, Context::kHelloMagic);
    }
    hellos_due_.clear();
}

void Comm::answer_late_hellos() {
    for (uint32_t r : late_hellos_) goodbye_to_watcher(r);
    late_hellos_.clear();
}

void Comm::on_peer_hello(uint32_t peer) {
    Peer &p = peers_[peer];
    if (p.watcher) return;
    p.watcher = true;
    // Our goodbyes went out already, and not to it (no endpoint then):
    // connect and say it after this progress call (not inside UCX's
    // callback), in handle_failures.
    if (said_goodbye_ && p.ep == nullptr && !p.failed) {
        late_hellos_.push_back(peer);  // within the capacity reserved at create
        ctx_->request_deferred();
    }
}

std::vector<Context::UnnamedPeer> Comm::unnamed_peers() noexcept {
    std::vector<Context::UnnamedPeer> out;
    try {
        for (uint32_t r = 0; r < size_; ++r) {
            const Peer &p = peers_[r];
            // The others heard our goodbye, left, failed, or are us.
            if (r == rank_ || p.ep != nullptr || p.parked_ep != nullptr || p.failed ||
                p.left || p.watcher || p.closed_at_shutdown || addrs_[r].empty()) {
                continue;
            }
            out.push_back({r, std::move(addrs_[r])});  // not connected from now on
        }
    } catch (const std::bad_alloc &) {
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: out of memory: a late hello will go "
                "unanswered", id_);
    }
    return out;
}

void Comm::send_goodbyes() {
    if (said_goodbye_) return;
    said_goodbye_ = true;
    for (uint32_t r = 0; r < size_; ++r) {
        if (peers_[r].ep != nullptr) {
            say_goodbye(r, peers_[r].ep);
        } else if (peers_[r].watcher) {
            goodbye_to_watcher(r);  // it may wait on us; we never named it
        }
    }
}

bool Comm::close_sending_eps(bool anyway) {
    // UCX cannot cancel a send; closing its endpoint by force does. Which
    // endpoints first: closing one may complete (and unlink) its sends
    // inside the call, so the walk over ops_ must be over by then.
    constexpr uint8_t kUcxSend = 1, kOther = 2;
    for (Op *op = ops_; op != nullptr; op = op->next) {
        peers_[op->entry.peer].shut_ops |= is_ucx_send(*op) ? kUcxSend : kOther;
    }
    bool waiting = false;
    for (uint32_t r = 0; r < size_; ++r) {
        Peer &p = peers_[r];
        const uint8_t ops = p.shut_ops;
        p.shut_ops = 0;
        if ((ops & kUcxSend) == 0 || p.ep == nullptr) continue;
        // A closed endpoint tells the peer nothing until its keepalive
        // notices, and then as a failure: say goodbye first, before the
        // sends it follows are cut off. Not while something else of ours
        // names the peer (a split receive the peer writes into, a receive
        // UCX is moving, a single-copy answer to send): that still needs
        // this endpoint, and the peer must not stop waiting for us before
        // it ended (see shutdown). The next round looks again.
        const bool goodbye = (ops & kOther) == 0;
        if (!goodbye && !anyway) {
            waiting = true;
            continue;
        }
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: closing the endpoint to rank %u by force: "
                "sends in flight%s", id_, r, goodbye ? ", goodbye said" :
                ", its other operations still running at the deadline");
        p.closed_at_shutdown = true;  // send_goodbyes: not again on a new one
        force_close_flushed(&p.ep, r, goodbye);
    }
    return waiting;
}

void Comm::force_close_flushed(ucp_ep_h *ep, uint32_t peer, bool goodbye) {
    ucp_ep_h e = *ep;
    if (e == nullptr) return;
    *ep = nullptr;
    // A flush completes once the endpoint is connected and its lanes
    // drained; it does not wait for a rendezvous nobody receives.
    ucp_request_param_t prm = {};
    void *req = ucp_ep_flush_nbx(e, &prm);
    if (UCS_PTR_IS_PTR(req)) {
        const int64_t timeout_ns = ctx_->settings().peer_timeout_ms * 1000000LL;
        try {
            flushing_.push_back({e, req, now_ns() + timeout_ns, peer, goodbye});
            ctx_->request_deferred();  // close_flushed after this progress call
            return;
        } catch (const std::bad_alloc &) {
            ucp_request_free(req);  // out of memory: close at once instead
        }
    }
    if (goodbye) say_goodbye(peer, e);
    say_closing(peer, e);
    close_ep(&e, true);
}

void Comm::close_flushed() {
    if (flushing_.empty()) return;
    const int64_t now = now_ns();
    size_t kept = 0;
    for (size_t i = 0; i < flushing_.size(); ++i) {
        Flushing f = flushing_[i];
        if (ucp_request_check_status(f.flush) == UCS_INPROGRESS) {
            if (now < f.deadline_ns) {
                flushing_[kept++] = f;
                continue;
            }
            P2P_LOG(P2P_LOG_WARN, "comm %u: endpoint to rank %u not flushed after "
                    "%u ms: closing it anyway", id_, f.peer,
                    ctx_->settings().peer_timeout_ms);
        }
        ucp_request_free(f.flush);  // UCX frees an unfinished one when it ends
        if (f.goodbye) say_goodbye(f.peer, f.ep);
        say_closing(f.peer, f.ep);
        close_ep(&f.ep, true);
    }
    flushing_.resize(kept);  // shrinks: no allocation
    if (kept != 0) ctx_->request_deferred();  // look again after the next call
}

void Comm::drain_unexpected() {
    // Messages sent to this communicator and never received (or answers to
    // operations shutdown canceled): each is received into nothing (a
    // truncation, which also answers a rendezvous sender) so UCX frees it.
    // The next communicator with this id has another generation and would
    // not match them, but they would stay queued for the worker's life.
    // Later ones are the context's (Context::drop_late_messages).
    const size_t n = Context::drop_unexpected(ctx_->worker(), tag_base_, kCommIdMask);
    if (n != 0) {
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: dropped %zu messages nobody received",
                id_, n);
    }
}

size_t Comm::cancel_recv(uint32_t peer, uint32_t tensor_id) {
    // A user receive still in UCX's expected queue is PLAIN; one a message
    // matched is PLAIN only while UCX moves its data (rendezvous), which
    // ucp_request_cancel leaves be, and past a single-copy request it is in
    // a later stage. UCX completes each receive it removes inside the call
    // (recv_cb -> complete_error: P2P_ERR_CANCELED).
    auto waiting = [&](const Op &op) {
        return !op.is_send && op.stage == Op::PLAIN && op.entry.peer == peer &&
               op.entry.tensor_id == tensor_id;
    };
    std::lock_guard<Mutex> lock(ctx_->worker_mu());
    auto count = [&] {
        size_t n = 0;
        for (const Op *op = ops_; op != nullptr; op = op->next) n += waiting(*op);
        return n;
    };
    const size_t before = count();
    if (before == 0) return 0;
    cancel_receives(waiting);
    const size_t canceled = before - count();
    P2P_LOG(P2P_LOG_DEBUG, "comm %u: canceled %zu of %zu receive(s) from rank %u "
            "tensor %u", id_, canceled, before, peer, tensor_id);
    return canceled;
}

} // namespace ucxp2p
