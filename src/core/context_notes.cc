/*
 * Hellos and goodbyes at the context (core/context.h, Context::Note): the
 * active-message handler, the hand-over to each communicator's handler,
 * the ring of notes that came before it, and the goodbyes the context says
 * for communicators already destroyed here.
 */
#include "core/context.h"
#include "core/comm_tag.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/send_small.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace ucxp2p {

namespace {

/** A peer's hello or goodbye (UCP active message); runs inside worker progress,
 *  under the worker lock. */
ucs_status_t note_am_cb(void *arg, const void *header, size_t header_length,
                        void *, size_t, const ucp_am_recv_param_t *) {
    Context::Note g;
    if (header_length == sizeof(g)) {
        std::memcpy(&g, header, sizeof(g));
        static_cast<Context *>(arg)->on_note(g);
    }
    return UCS_OK;
}

/** The endpoint of a goodbye for a retired communicator is closed once
 *  the goodbye left; an error before that changes nothing. */
void gone_ep_error_cb(void *, ucp_ep_h, ucs_status_t st) {
    P2P_LOG(P2P_LOG_DEBUG, "context: endpoint of a late goodbye failed: %s",
            ucs_status_string(st));
}

/** A goodbye's endpoint is flushed: close it after this progress call
 *  (Context::close_gone_eps). */
void gone_flushed_cb(void *, ucs_status_t, void *arg) {
    static_cast<Context *>(arg)->request_deferred();
}

/** Close ep by force; nobody waits for the close (UCX ends it itself). */
void force_close(ucp_ep_h ep) {
    ucp_request_param_t prm = {};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void *req = ucp_ep_close_nbx(ep, &prm);
    if (UCS_PTR_IS_PTR(req)) ucp_request_free(req);
}

} // namespace

ucs_status_t Context::send_note(ucp_ep_h ep, const Note &n) noexcept {
    return send_small(n, [&](const Note *buf, const ucp_request_param_t *prm) {
        return ucp_am_send_nbx(ep, kAmNote, buf, sizeof(*buf), nullptr, 0, prm);
    });
}

ucs_status_t Context::listen_for_notes() {
    ucp_am_handler_param_t am = {};
    am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    am.id = kAmNote;
    am.cb = note_am_cb;
    am.arg = this;
    return ucp_worker_set_am_recv_handler(worker_.get(), &am);
}

void Context::set_note_handler(unsigned comm_id, uint32_t gen, NoteHandler h) {
    std::lock_guard<Mutex> lock(worker_mu_);
    if (comm_id >= notes_.size()) return;
    notes_[comm_id] = std::move(h);
    note_gen_[comm_id] = gen;
    if (!notes_[comm_id]) return;
    // Hand over the notes kept for this id, oldest first; drop those of
    // its earlier generations.
    size_t kept = 0;
    const size_t first = (early_next_ + kEarlyNotes - early_count_) % kEarlyNotes;
    for (size_t i = 0; i < early_count_; ++i) {
        const Note g = early_[(first + i) % kEarlyNotes];
        if (g.comm_id == comm_id) {
            if (g.gen == gen) notes_[comm_id](g.rank, g.magic);
            continue;
        }
        early_[(first + kept++) % kEarlyNotes] = g;
    }
    early_count_ = kept;
    early_next_ = (first + kept) % kEarlyNotes;
}

void Context::on_note(const Note &g) {
    if (g.magic != kGoodbyeMagic && g.magic != kHelloMagic && g.magic != kClosingMagic) {
        return;
    }
    if (g.comm_id >= notes_.size()) return;
    if (notes_[g.comm_id] && g.gen == note_gen_[g.comm_id]) {
        notes_[g.comm_id](g.rank, g.magic);
        return;
    }
    if (g.magic == kClosingMagic && closing_for_lingering(g)) return;
    const Gone &gone = gone_[g.comm_id];
    if (g.magic == kHelloMagic && gone.valid && gone.gen == g.gen) {
        // A peer connected to a communicator destroyed here; answered
        // after this progress call (no endpoint is created in a callback).
        if (answers_count_ < kGoneAnswers) {
            answers_[answers_count_++] = g;
            request_deferred();
        } else {
            P2P_LOG(P2P_LOG_WARN, "comm %u: rank %u said hello after the communicator "
                    "was destroyed; %zu such hellos wait already, this one goes "
                    "unanswered", g.comm_id, g.rank, kGoneAnswers);
        }
        return;
    }
    early_[early_next_] = g;  // the oldest goes when full
    early_next_ = (early_next_ + 1) % kEarlyNotes;
    if (early_count_ < kEarlyNotes) ++early_count_;
}

void Context::retire_comm_locked(unsigned comm_id, uint32_t gen, uint32_t rank,
                                 std::vector<UnnamedPeer> &&unnamed) noexcept {
    if (comm_id >= notes_.size()) return;
    notes_[comm_id] = nullptr;
    Gone &g = gone_[comm_id];
    g.valid = true;
    g.gen = gen;
    g.rank = rank;
    g.unnamed = std::move(unnamed);  // frees the previous generation's
    if (g.drop_until_ns == 0) ++dropping_;  // not still looking for the last one's
    g.drop_until_ns = now_ns() + 4 * int64_t(settings_.peer_timeout_ms) * 1000000;
}

size_t Context::drop_unexpected(ucp_worker_h worker, uint64_t tag, uint64_t mask) noexcept {
    size_t n = 0;
    ucp_tag_recv_info_t info;
    ucp_tag_message_h msg;
    while ((msg = ucp_tag_probe_nb(worker, tag, mask, 1, &info)) != nullptr) {
        ucp_request_param_t prm = {};
        void *r = ucp_tag_msg_recv_nbx(worker, nullptr, 0, msg, &prm);
        if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);  // released once done
        ++n;
    }
    return n;
}

void Context::drop_late_messages() noexcept {
    if (!periodic_run_ || dropping_ == 0) return;
    // Ids in use or reserved by a creation under way are skipped: their
    // new communicator's messages (another generation, but for the
    // wrap-around rule of next_comm_gen) may be arriving already.
    CommIdSet busy;
    {
        std::lock_guard<std::mutex> lock(ids_mu_);  // a leaf lock
        for (size_t i = 0; i < busy.size(); ++i) busy[i] = used_ids_[i] | reserved_ids_[i];
    }
    const int64_t now = now_ns();
    for (unsigned id = 0; id < gone_.size(); ++id) {
        Gone &g = gone_[id];
        if (g.drop_until_ns == 0) continue;  // never retired, or done looking
        if (now > g.drop_until_ns) {
            g.drop_until_ns = 0;
            --dropping_;
            continue;
        }
        if (!g.valid || notes_[id] || (busy[id / 8] >> (id % 8)) & 1u) continue;
        const size_t n = drop_unexpected(worker_.get(), comm_tag_base(id, g.gen),
                                         kCommGenMask);
        if (n != 0) {
            P2P_LOG(P2P_LOG_DEBUG, "comm %u: dropped %zu messages that came after "
                    "it was destroyed", id, n);
        }
    }
}

void Context::answer_gone_hellos() noexcept {
    const int64_t timeout_ns = settings_.peer_timeout_ms * 1000000LL;
    for (size_t i = 0; i < answers_count_; ++i) {
        const Note h = answers_[i];
        Gone &gone = gone_[h.comm_id];
        if (!gone.valid || gone.gen != h.gen) continue;  // retired again since
        auto it = std::lower_bound(gone.unnamed.begin(), gone.unnamed.end(), h.rank,
                                   [](const UnnamedPeer &p, uint32_t r) { return p.rank < r; });
        if (it == gone.unnamed.end() || it->rank != h.rank || it->address.empty()) {
            continue;  // we had an endpoint to it (it got our goodbye then), or answered
        }
        std::vector<uint8_t> address = std::move(it->address);  // once a peer
        it->address.clear();
        ucp_ep_params_t ep_params = {};
        ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                               UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                               UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep_params.address = reinterpret_cast<const ucp_address_t *>(address.data());
        ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
        ep_params.err_handler.cb = gone_ep_error_cb;
        ep_params.err_handler.arg = nullptr;
        ucp_ep_h ep = nullptr;
        ucs_status_t st = ucp_ep_create(worker_.get(), &ep_params, &ep);
        if (st == UCS_OK) {
            // The goodbye, and that this endpoint closes (the peer's
            // communicator then closes its own at destroy, not lingering
            // for a closing note that would never come).
            st = send_note(ep, {kGoodbyeMagic, h.comm_id, h.gen, gone.rank});
            if (st == UCS_OK) st = send_note(ep, {kClosingMagic, h.comm_id, h.gen, gone.rank});
            // Closed by force once a flush says the goodbye left (and the
            // wireup is over: UCX 1.13 aborts when a forced close purges a
            // tcp endpoint's pending wireup request, see
            // Comm::force_close_flushed).
            ucp_request_param_t fp = {};
            fp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
            fp.cb.send = gone_flushed_cb;
            fp.user_data = this;
            void *flush = ucp_ep_flush_nbx(ep, &fp);
            bool queued = false;
            if (UCS_PTR_IS_PTR(flush)) {
                try {
                    gone_eps_.push_back({ep, flush, now_ns() + timeout_ns});
                    queued = true;
                    request_deferred();  // close_gone_eps after the next call
                } catch (const std::bad_alloc &) {
                    ucp_request_free(flush);  // out of memory: close at once
                }
            }
            if (!queued) force_close(ep);
        }
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: rank %u said hello after the communicator was "
                "destroyed; goodbye: %s", h.comm_id, h.rank, ucs_status_string(st));
    }
    answers_count_ = 0;
}

void Context::close_gone_eps(bool all) noexcept {
    if (gone_eps_.empty()) return;
    const int64_t now = now_ns();
    size_t kept = 0;
    for (size_t i = 0; i < gone_eps_.size(); ++i) {
        const GoneEp g = gone_eps_[i];
        if (!all && ucp_request_check_status(g.flush) == UCS_INPROGRESS && now < g.deadline_ns) {
            gone_eps_[kept++] = g;
            continue;
        }
        P2P_LOG(P2P_LOG_DEBUG, "context: closing the endpoint of a late goodbye (%s)",
                ucp_request_check_status(g.flush) == UCS_INPROGRESS ? "not flushed in time"
                                                                    : "flushed");
        ucp_request_free(g.flush);  // UCX frees an unfinished one when it ends
        force_close(g.ep);
    }
    gone_eps_.resize(kept);  // shrinks: no allocation
    if (kept != 0) request_deferred();  // look again after the next call
}

} // namespace ucxp2p
