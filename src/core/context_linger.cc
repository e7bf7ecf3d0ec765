/*
 * The close handshake's other half (core/context.h, Context::Lingering):
 * endpoints of destroyed communicators kept open until their peers close
 * their own, and the forced closes that end them.
 */
#include "core/cma.h"
#include "core/context.h"
#include "core/log.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

namespace ucxp2p {

namespace {

/** Close ep by force: the request to wait on, or nullptr if it ended. */
void *force_close_req(ucp_ep_h ep) noexcept {
    ucp_request_param_t prm = {};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void *req = ucp_ep_close_nbx(ep, &prm);
    return UCS_PTR_IS_PTR(req) ? req : nullptr;
}

/** Room for need elements in v, growing geometrically (reserve alone grows
 *  to exactly need, so destroys adding a few each would copy every entry
 *  every time). Throws std::bad_alloc. */
template <typename T> void reserve_for(std::vector<T> &v, size_t need) {
    if (need > v.capacity()) v.reserve(std::max(need, 2 * v.capacity()));
}

} // namespace

bool Context::linger_locked(const std::vector<Lingering> &eps,
                            const std::shared_ptr<void> &owner) noexcept {
    if (eps.empty()) return true;
    try {
        reserve_for(lingering_, lingering_.size() + eps.size());
        // Room to move every lingering endpoint to linger_closes_.
        reserve_for(linger_closes_, linger_closes_.size() + lingering_.size() + eps.size());
    } catch (const std::bad_alloc &) {
        return false;
    }
    for (const Lingering &l : eps) {
        lingering_.push_back({l, owner});  // within the reserve: no throw
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: endpoint to rank %u lingers until the rank "
                "closes its own", l.comm_id, l.rank);
    }
    return true;
}

bool Context::closing_for_lingering(const Note &g) noexcept {
    bool found = false;
    for (LingerEntry &e : lingering_) {
        if (e.l.comm_id == g.comm_id && e.l.gen == g.gen && e.l.rank == g.rank) {
            e.l.due = Lingering::kClosingCame;
            found = true;
        }
    }
    if (found) request_deferred();  // close_lingering after this progress call
    return found;
}

void Context::on_lingering_error(ucp_ep_h ep) noexcept {
    for (LingerEntry &e : lingering_) {
        if (e.l.ep == ep) {
            e.l.due = Lingering::kFailed;
            request_deferred();
        }
    }
}

void Context::close_lingering(bool all) noexcept {
    if (periodic_run_ && !all) {
        for (LingerEntry &e : lingering_) {
            if (e.l.due == Lingering::kNotDue && cma::process_gone(e.l.pid)) {
                e.l.due = Lingering::kGone;
            }
        }
    }
    size_t kept = 0;
    for (size_t i = 0; i < lingering_.size(); ++i) {
        LingerEntry &e = lingering_[i];
        if (!all && e.l.due == Lingering::kNotDue) {
            if (kept != i) lingering_[kept] = std::move(e);
            ++kept;
            continue;
        }
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: closing the lingering endpoint to rank %u: %s",
                e.l.comm_id, e.l.rank,
                e.l.due == Lingering::kClosingCame ? "the rank closed its own"
                : e.l.due == Lingering::kFailed    ? "it failed"
                : e.l.due == Lingering::kGone      ? "its process is gone"
                                                   : "the context is destroyed");
        void *req = force_close_req(e.l.ep);
        if (req != nullptr) {
            // Capacity reserved by linger_locked: no throw.
            linger_closes_.push_back({req, std::move(e.owner)});
        }
    }
    lingering_.resize(kept);  // shrinks: no allocation
    kept = 0;
    for (size_t i = 0; i < linger_closes_.size(); ++i) {
        LingerClose &c = linger_closes_[i];
        if (c.req == nullptr || ucp_request_check_status(c.req) == UCS_INPROGRESS) {
            if (kept != i) linger_closes_[kept] = std::move(c);
            ++kept;
            continue;
        }
        ucp_request_free(c.req);
        c.owner.reset();  // nothing of UCX's names its error handler's argument
    }
    linger_closes_.resize(kept);  // shrinks: no allocation
    if (kept != 0 && !all) request_deferred();  // look again after the next call
    if (all) {
        // Teardown: the worker ends the closes still running and may call
        // back until then; their owners stay until it is gone (see
        // context.h).
        for (LingerClose &c : linger_closes_) {
            if (c.req != nullptr) ucp_request_free(c.req);  // UCX frees it when it ends
            c.req = nullptr;
        }
    }
}

void Context::flush_lingering() noexcept {
    struct Flush {
        void *req;
        uint32_t pid;  // the peer's process, if a same-host one (else 0)
    };
    std::vector<Flush> flushes;
    try {
        flushes.reserve(lingering_.size());
    } catch (const std::bad_alloc &) {
        return;  // out of memory: closed by force as before
    }
    for (const LingerEntry &e : lingering_) {
        // Only those whose peer still holds its own: one that closed its
        // own (kClosingCame) takes nothing more from us; a failed or gone
        // one cannot.
        if (e.l.due != Lingering::kNotDue) continue;
        ucp_request_param_t prm = {};
        void *req = ucp_ep_flush_nbx(e.l.ep, &prm);
        if (UCS_PTR_IS_PTR(req)) flushes.push_back({req, e.l.pid});
    }
    if (flushes.empty()) return;
    const int64_t t0 = now_ns();
    const int64_t deadline = t0 + settings_.peer_timeout_ms * 1000000LL;
    size_t waiting = flushes.size();
    for (unsigned round = 0;; ++round) {
        while (ucp_worker_progress(worker_.get()) != 0) {
        }
        waiting = 0;
        for (Flush &f : flushes) {
            if (f.req == nullptr) continue;
            // A process that is gone reads nothing more; one we cannot see
            // (another host) is bounded by the deadline and UCX's keepalive.
            const bool gone = round % 64 == 63 && f.pid != 0 && cma::process_gone(f.pid);
            if (ucp_request_check_status(f.req) != UCS_INPROGRESS || gone) {
                ucp_request_free(f.req);  // UCX frees an unfinished one when it ends
                f.req = nullptr;
            } else {
                ++waiting;
            }
        }
        if (waiting == 0 || now_ns() > deadline) break;
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    for (Flush &f : flushes) {
        if (f.req != nullptr) ucp_request_free(f.req);
    }
    if (waiting != 0) {
        P2P_LOG(P2P_LOG_WARN, "context: %zu lingering endpoint(s) not flushed after %u ms: "
                "closing them anyway", waiting, settings_.peer_timeout_ms);
    } else {
        P2P_LOG(P2P_LOG_DEBUG, "context: %zu lingering endpoint(s) flushed in %.3f ms",
                flushes.size(), (now_ns() - t0) / 1e6);
    }
}

} // namespace ucxp2p
