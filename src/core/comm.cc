#include "core/comm.h"
#include "core/comm_wireup.h"
#include "core/log.h"
#include "core/status.h"
#include "core/tcp_bulk_config.h"
#include "wireup/bootstrap.h"

#include <algorithm>
#include <cstring>
#include <thread>

namespace ucxp2p {

void orphan_done(Op *op, void *request) {
    ucp_request_free(request);
    Context *ctx = op->mem->ctx;
    if (op->offered) ctx->bulk_withdraw(op->seq);
    if (op->abandoned) ctx->forget_orphan(op);  // if watched (context_orphans.cc)
    op->mem->release();  // deregistration stops saying "busy"
    if (!op->abandoned) ctx->progress().op_completed();  // else counted then
    delete op;
}

void send_cb(void *request, ucs_status_t st, void *user_data) {
    Op *op = static_cast<Op *>(user_data);
    if (op->posting) {  // inside ucp_tag_send_nbx: the poster finishes it
        op->done_in_post = true;
        op->post_status = st;
        op->post_bytes = op->entry.bytes;
        return;
    }
    if (op->comm == nullptr) {  // orphaned by a communicator torn down early
        orphan_done(op, request);
        return;
    }
    if (st == UCS_OK && op->comm->send_unreceived(op)) {
        st = UCS_ERR_CONNECTION_RESET;  // reported as P2P_ERR_PEER_FAILURE
    }
    op->comm->complete(op, st, op->entry.bytes);
    ucp_request_free(request);
}

void recv_cb(void *request, ucs_status_t st, const ucp_tag_recv_info_t *info,
             void *user_data) {
    Op *op = static_cast<Op *>(user_data);
    size_t length = (st == UCS_OK && info != nullptr) ? info->length : 0;
    if (op->posting) {  // inside ucp_tag_recv_nbx: the poster finishes it
        op->done_in_post = true;
        op->post_status = st;
        op->post_bytes = length;
        return;
    }
    if (op->comm == nullptr) {
        orphan_done(op, request);
        return;
    }
    op->comm->recv_done(op, st, length);
    ucp_request_free(request);
}

namespace {

/** Progress the worker until done() or the deadline; returns done().
 *  Runs the copies its progress calls queued (core/copy_queue.h). */
template <class Done>
bool progress_until(Context &ctx, Done done, int64_t deadline_ns) {
    for (;;) {
        CopyJob *copies;
        {
            std::lock_guard<Mutex> lock(ctx.worker_mu());
            ctx.progress().progress_locked();
            copies = ctx.progress().claim_copies_locked();
            if (copies == nullptr && done()) {
                return true;
            }
        }
        if (copies != nullptr) {
            ctx.progress().copies().run(copies);
            if (now_ns() <= deadline_ns) continue;  // concluded by the next round
            std::lock_guard<Mutex> lock(ctx.worker_mu());
            ctx.progress().progress_locked();  // concludes them
            return done();
        }
        if (now_ns() > deadline_ns) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
}

} // namespace

p2p_status_t Comm::create(std::shared_ptr<Context> ctx, uint64_t ctx_id,
                          Bootstrap &bs, std::unique_ptr<Comm> *out) {
    std::unique_ptr<Comm> c(new Comm());
    c->ctx_ = ctx;
    c->ctx_id_ = ctx_id;
    c->rank_ = bs.rank();
    c->size_ = bs.size();
    c->local_rank_ = bs.local_rank();
    c->local_size_ = bs.local_size();
    if (c->size_ == 0 || c->size_ > kMaxRanks || c->rank_ >= c->size_) {
        P2P_LOG(P2P_LOG_ERROR, "comm: bootstrap gave rank %u of %u (at most %u ranks)",
                c->rank_, c->size_, kMaxRanks);
        return P2P_ERR_UNSUPPORTED;
    }

    cma::Identity host = cma::local_identity();
    if (ctx->ucx_cuda() && host.enabled) {
        // Single copy reads and writes with the CPU; a receive or send
        // buffer may be device memory that only UCX can move. Off on both
        // sides: the peers see enabled == 0.
        P2P_LOG(P2P_LOG_INFO, "comm: single copy off: UCX moves CUDA memory here");
        host.enabled = 0;
    }
    // Large messages to peers UCX reaches over tcp (core/tcp_bulk.h): a
    // server of ours, published; port 0 when off (single copy's CPU reads
    // rule out UCX-moved CUDA memory here too).
    tcpb::Address bulk{};
    if (tcpb::scope() != 0 && !ctx->ucx_cuda() && c->size_ > 1) {
        if (tcpb::Server *srv = ctx->bulk_server()) {
            bulk = srv->address();
            bulk.scope = tcpb::scope();
        }
    }
    const int64_t t0 = now_ns();
    Wireup w;
    p2p_status_t st = comm_wireup(*ctx, bs, c->rank_, c->size_, host, bulk, &w);
    if (st != P2P_OK) return st;
    const std::vector<cma::Identity> &hosts = w.hosts;
    c->addrs_ = std::move(w.addrs);
    const unsigned id = w.id;
    const uint32_t gen = w.gen;
    c->id_ = static_cast<uint32_t>(id);
    c->gen_ = gen;
    c->tag_base_ = comm_tag_base(c->id_, gen);
    c->id_claimed_ = true;
    c->peers_.reset(new Peer[c->size_]);
    // DATA tags from their value for 0 (tag_with_low): make_tag's offset
    // (two divisions) once per rank, not per message.
    for (uint32_t r = 0; r < c->size_; ++r) {
        c->peers_[r].data_tag0 = make_tag(c->tag_base_, r, 0);
    }
    c->send_tag0_ = make_tag(c->tag_base_, c->rank_, 0);
    c->refs_.reset(new PeerRef[c->size_]);  // shared_ptr<T[]>: delete[]
    c->refs_keeper_.reset(new std::shared_ptr<PeerRef[]>());
    c->free_ops_.reserve(kMaxCachedOps);  // free_op runs in UCX callbacks
    // Appended to inside UCX callbacks and progress, where nothing may
    // throw: a peer is queued at most twice (it left, its endpoint failed)
    // and each endpoint is closed once.
    c->failed_pending_.reserve(2 * size_t(c->size_));
    c->late_hellos_.reserve(c->size_);  // a peer says hello once
    c->hellos_due_.reserve(c->size_);   // one flush per new endpoint
    c->watched_.reserve(c->size_);
    c->closing_.reserve(c->size_);
    c->flushing_.reserve(c->size_);  // one per peer: pushed inside callbacks
    uint32_t ncma = 0, ntcp = 0;
    for (uint32_t r = 0; r < c->size_; ++r) {
        c->refs_[r].comm = c.get();
        c->refs_[r].rank = r;
        c->peers_[r].cma = cma::peer_eligible(hosts[c->rank_], hosts[r]);
        c->peers_[r].pid = hosts[r].pid;
        c->peers_[r].pid_visible = r != c->rank_ && cma::same_pid_space(hosts[c->rank_], hosts[r]);
        c->peers_[r].epoch_fd = hosts[r].epoch_fd;
        c->peers_[r].epoch_ino = hosts[r].epoch_ino;
        ncma += c->peers_[r].cma ? 1 : 0;
        // Both sides decide alike: same scope bits, same host test.
        const bool same_host =
            std::memcmp(hosts[r].boot_id, hosts[c->rank_].boot_id, sizeof(host.boot_id)) == 0;
        const uint32_t want = same_host ? tcpb::kSameHost : tcpb::kOtherHosts;
        if (!c->peers_[r].cma && r != c->rank_ && bulk.port != 0 && w.bulk[r].port != 0 &&
            (bulk.scope & w.bulk[r].scope & want) != 0) {
            c->peers_[r].cma = c->peers_[r].tcp = true;
            c->peers_[r].bulk.reset(new tcpb::Client(w.bulk[r], same_host, tcpb::lanes(),
                                                     static_cast<int>(ctx->settings().peer_timeout_ms)));
            ++ntcp;
        }
    }
    if (ctx->settings().thread_mode == P2P_THREAD_SERIALIZED) {
        c->cq_[0].disable_lock();  // one call at a time (p2p_thread_mode_t)
        c->cq_[1].disable_lock();
    }
    // P2P_CMA_THRESH=auto, P2P_TCP_BULK_THRESH=auto: a chooser per peer
    // the rendezvous serves (Peer::chooser), with its kind's band.
    const bool automatic = cma::threshold_auto();
    const bool tcp_auto = tcpb::threshold_auto();
    c->cma_thresh_ = automatic ? PathChooser::kMinBytes : cma::threshold();
    c->mapped_thresh_ = cma::mapped_threshold();
    c->split_thresh_ = cma::split_threshold();
    c->tcp_thresh_ = tcp_auto ? size_t(1) << PathChooser::kTcpBand.min_shift
                              : tcpb::threshold();
    for (uint32_t r = 0; r < c->size_; ++r) {
        Peer &p = c->peers_[r];
        p.choose = p.cma && (p.tcp ? tcp_auto : automatic);
    }
    if (ntcp > 0) {
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: payloads of %zu bytes or more to %u peers "
                "read over tcp%s, %u connections each", c->id_, c->tcp_thresh_, ntcp,
                tcp_auto ? " while faster than ucx (measured per size)" : "",
                tcpb::lanes());
    }
    if (ncma > 0 && automatic) {
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: single copy to %u same-host peers "
                "for messages of %zu bytes or more, chosen per size below %zu "
                "(%zu from p2p_mem_alloc memory)", c->id_, ncma, c->cma_thresh_,
                PathChooser::kMaxBytes, c->mapped_thresh_);
    } else if (ncma > 0) {
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: single copy to %u same-host peers "
                "for messages of %zu bytes or more (%zu from p2p_mem_alloc "
                "memory)", c->id_, ncma, c->cma_thresh_, c->mapped_thresh_);
    }
    Comm *raw = c.get();
    ctx->add_deferred_hook(raw, [raw] {
        raw->write_due_tails();  // first: it may take in a goodbye
        raw->handle_failures();
    });
    ctx->set_note_handler(c->id_, gen, [raw](uint32_t r, uint32_t magic) {
        if (r >= raw->size_ || r == raw->rank_) return;
        if (magic == Context::kHelloMagic) {
            raw->on_peer_hello(r);
        } else if (magic == Context::kGoodbyeMagic) {
            raw->on_peer_left(r);
        } else {
            raw->peers_[r].peer_closed = true;  // kClosingMagic: see ~Comm
        }
    });
    P2P_LOG(P2P_LOG_INFO, "comm %u: rank %u of %u ready in %.3f ms (%u exchange%s)",
            c->id_, c->rank_, c->size_, (now_ns() - t0) / 1e6, w.rounds,
            w.rounds == 1 ? "" : "s");
    *out = std::move(c);
    return P2P_OK;
}

Comm::~Comm() {
    if (!peers_) {  // creation failed before anything was set up
        if (id_claimed_) ctx_->release_comm_id(id_);
        return;
    }
    shutdown();  // says goodbye
    // Close endpoints gracefully: flush first (eager data already completed
    // locally may still be on its way; over tcp the flush ends when the
    // peer acknowledged every byte), then close by force. UCX never frees
    // an endpoint closed without force while its connection stays up (a
    // tcp connection each way, per communicator, for the life of the
    // process). A dead peer makes the flush fail within the keepalive
    // bound, and force_close_flushed bounds it too. An endpoint whose peer
    // still holds its own is not closed here but handed to the context,
    // which closes it when the peer closes that one (the close handshake,
    // Context::Lingering).
    {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        // From here on the context takes this id's notes, and says goodbye
        // to a peer that connects only now (none of ours would).
        ctx_->retire_comm_locked(id_, gen_, rank_, unnamed_peers());
        drain_unexpected();  // what arrived since shutdown's drain
        // Hellos that came after our goodbyes and before the handler went
        // (none can come now): answer them here, so their endpoints close
        // below with the others.
        answer_late_hellos();
        for (Flushing &f : flushing_) {  // only if shutdown gave up waiting
            ucp_request_free(f.flush);
            close_ep(&f.ep, true);
        }
        flushing_.clear();
        // An operation still in flight may want an endpoint later (a split
        // receive's answer, send_ack): none is made, nothing would close it.
        eps_closed_ = true;
        // The close handshake (Context::Lingering): an endpoint whose peer
        // has not said it closes its own stays open, in the context, until
        // it does; the others close now, each saying so right before.
        std::vector<Context::Lingering> linger;
        try {
            if (ctx_->settings().close_handshake) linger.reserve(size_);
        } catch (const std::bad_alloc &) {
            // none linger: all close now
        }
        for (uint32_t r = 0; r < size_; ++r) {
            Peer &p = peers_[r];
            if (p.ep_error) {
                close_ep(&p.ep, true);
                close_ep(&p.parked_ep, true);
                continue;
            }
            if (!p.peer_closed && r != rank_ && linger.capacity() != 0) {
                ucp_ep_h e = p.ep != nullptr ? p.ep : p.parked_ep;
                if (e != nullptr) {
                    say_closing(r, e);
                    linger.push_back({id_, gen_, r, e, Context::Lingering::kNotDue,
                                      p.pid_visible ? p.pid : 0});
                }
            }
        }
        if (ctx_->linger_locked(linger, refs_)) {
            for (const Context::Lingering &l : linger) {
                Peer &p = peers_[l.rank];
                (p.ep == l.ep ? p.ep : p.parked_ep) = nullptr;
                refs_[l.rank].comm = nullptr;  // its callbacks go to the context
                refs_[l.rank].lingers = ctx_.get();
            }
        }
        for (uint32_t r = 0; r < size_; ++r) {
            if (peers_[r].ep_error) continue;
            force_close_flushed(&peers_[r].ep, r, false);
            force_close_flushed(&peers_[r].parked_ep, r, false);
        }
    }
    int64_t deadline = now_ns() + (2LL * ctx_->settings().peer_timeout_ms + 1000) * 1000000LL;
    bool closed = progress_until(*ctx_, [this] {
        close_flushed();  // the flushed ones move to closing_
        if (!flushing_.empty()) return false;
        for (auto it = closing_.begin(); it != closing_.end();) {
            if (ucp_request_check_status(*it) != UCS_INPROGRESS) {
                ucp_request_free(*it);
                it = closing_.erase(it);
            } else {
                ++it;
            }
        }
        return closing_.empty();
    }, deadline);
    if (!closed) {
        P2P_LOG(P2P_LOG_WARN, "comm %u: %zu endpoints did not close in time",
                id_, closing_.size() + flushing_.size());
        // UCX may still call back once they do (a hello's flush, an error
        // handler): those callbacks find their refs detached, which the
        // context keeps until its worker is gone (16 bytes a peer), and
        // the closes free their own requests when they end.
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        for (Flushing &f : flushing_) {  // past their own deadline: not expected
            ucp_request_free(f.flush);
            close_ep(&f.ep, true);
        }
        flushing_.clear();
        for (void *req : closing_) ucp_request_free(req);
        closing_.clear();
        for (uint32_t r = 0; r < size_; ++r) refs_[r].comm = nullptr;
        *refs_keeper_ = std::move(refs_);  // allocated at create: no throw here
        ctx_->keep_until_worker_gone(refs_keeper_.release(), [](void *p) {
            delete static_cast<std::shared_ptr<PeerRef[]> *>(p);
        });
    }
    ctx_->remove_deferred_hook(this);
    {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        for (Op *op = ops_; op != nullptr; op = op->next) {
            op->comm = nullptr;  // orphan: UCX still owns the request
        }
    }
    for (Op *op : free_ops_) {
        delete op;
    }
    delete spare_;
    spare_ = nullptr;
    free_ops_.clear();
    ctx_->release_comm_id(id_);
    cq_[0].close();
    cq_[1].close();
}

void Comm::link(Op *op) {
    op->prev = nullptr;
    op->next = ops_;
    if (ops_ != nullptr) ops_->prev = op;
    ops_ = op;
    ++nops_;
}

void Comm::unlink(Op *op) {
    if (op->prev != nullptr) op->prev->next = op->next;
    else ops_ = op->next;
    if (op->next != nullptr) op->next->prev = op->prev;
    op->prev = op->next = nullptr;
    --nops_;
}

/** The flush connect_ep issued on a new endpoint ended. */
static void hello_flush_cb(void *request, ucs_status_t st, void *arg) {
    Comm::PeerRef *p = static_cast<Comm::PeerRef *>(arg);
    if (p->comm != nullptr) {
        p->comm->on_hello_flushed(p->rank, st);
    } else {
        P2P_LOG(P2P_LOG_DEBUG, "comm gone: hello flush to rank %u ended after its "
                "destroy (%s)", p->rank, ucs_status_string(st));
    }
    ucp_request_free(request);
}

static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t st) {
    Comm::PeerRef *p = static_cast<Comm::PeerRef *>(arg);
    if (p->comm != nullptr) {
        p->comm->on_peer_error(p->rank, st);
    } else if (p->lingers != nullptr) {
        P2P_LOG(P2P_LOG_DEBUG, "comm gone: lingering endpoint to rank %u failed (%s)",
                p->rank, ucs_status_string(st));
        p->lingers->on_lingering_error(ep);
    } else {
        P2P_LOG(P2P_LOG_DEBUG, "comm gone: endpoint to rank %u failed after its "
                "destroy (%s)", p->rank, ucs_status_string(st));
    }
}

p2p_status_t Comm::connect_ep(uint32_t peer, ucp_ep_h *ep_p, bool quiet) {
    Peer &p = peers_[peer];
    if (p.failed) {
        return P2P_ERR_PEER_FAILURE;
    }
    if (eps_closed_) {
        return P2P_ERR_SHUTDOWN;
    }
    if (p.pid_visible && peer != rank_ && cma::process_gone(p.pid)) {
        // A same-host peer that is gone already (it may have sent to us and
        // left before we first named it, its goodbye still unread):
        // connecting would fail (its shared memory is gone), and over tcp
        // UCX 1.13 can abort when the connection it sets up is refused.
        on_peer_error(peer, UCS_ERR_CONNECTION_RESET);
        return P2P_ERR_PEER_FAILURE;
    }
    ucp_ep_params_t ep_params = {};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                           UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep_params.address = reinterpret_cast<const ucp_address_t *>(addrs_[peer].data());
    ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep_params.err_handler.cb = ep_error_cb;
    ep_params.err_handler.arg = &refs_[peer];
    ucs_status_t st = ucp_ep_create(ctx_->worker(), &ep_params, &p.ep);
    if (st != UCS_OK) {
        p.ep = nullptr;
        P2P_LOG(quiet ? P2P_LOG_DEBUG : P2P_LOG_ERROR,
                "comm %u: cannot create endpoint to rank %u: %s",
                id_, peer, ucs_status_string(st));
        return status_from_ucs(st) == P2P_ERR_PEER_FAILURE ? P2P_ERR_PEER_FAILURE
                                                           : P2P_ERR_TRANSPORT;
    }
    *ep_p = p.ep;
    if (p.pid_visible) {
        watched_.push_back(peer);  // one endpoint per peer: within capacity
    }
    // Tell the peer we may now wait on it, so that its shutdown says
    // goodbye to us even if it never names us (on_peer_hello). Not from
    // our own shutdown (send_goodbyes): we are the one leaving. Only once
    // the endpoint is wired up (a flush says so): an active message on a
    // tcp endpoint still connecting held the first message back by 1-3 ms.
    if (peer != rank_ && !said_goodbye_) {
        ucp_request_param_t fp = {};
        fp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        fp.cb.send = hello_flush_cb;
        fp.user_data = &refs_[peer];  // as the error handler's
        void *req = ucp_ep_flush_nbx(p.ep, &fp);
        if (req == nullptr) {
            say_note(peer, p.ep, Context::kHelloMagic);  // wired up already
        }  // else the callback (an error: the handler reports the failure)
    }
    return P2P_OK;
}

void Comm::complete_error(Op *op, ucs_status_t st) {
    p2p_status_t ps;
    if (st == UCS_ERR_MESSAGE_TRUNCATED) {
        ps = P2P_ERR_TRUNCATED;
    } else if (peers_[op->entry.peer].failed || op->peer_lost) {
        ps = P2P_ERR_PEER_FAILURE;
    } else if (st == UCS_ERR_CANCELED || (op->is_send && shut_.load())) {
        // Also a send our own shutdown ended by closing its endpoint by
        // force: UCX reports an endpoint status there (ENDPOINT_TIMEOUT
        // when the receiver had begun to pull it), but nothing failed.
        ps = P2P_ERR_CANCELED;
    } else {
        ps = status_from_ucs(st);
    }
    P2P_LOG(P2P_LOG_DEBUG, "comm %u: %s to/from rank %u tensor %u failed: %s",
            id_, op->is_send ? "send" : "recv", op->entry.peer,
            op->entry.tensor_id, ucs_status_string(st));
    finish(op, ps, 0);
}

void Comm::close_ep(ucp_ep_h *ep, bool force) {
    if (*ep == nullptr) return;
    ucp_request_param_t prm = {};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void *req = ucp_ep_close_nbx(*ep, &prm);
    *ep = nullptr;
    if (!UCS_PTR_IS_PTR(req)) return;
    try {
        closing_.push_back(req);  // within the capacity reserved at create
    } catch (const std::bad_alloc &) {
        ucp_request_free(req);  // the close goes on; nobody waits for it
    }
}

void Comm::shutdown() {
    {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        // Raised under the lock, which a post holds from its check of the
        // flag until its entry is queued or counted pending: a wait that
        // sees the flag sees every entry still to come (comm_wait.cc).
        shut_.store(true);
        // A single-copy send waits on a receive (its ACK): cancel that.
        // A split receive whose tail the sender may be writing is left to
        // finish (core/cma.h): its WDONE comes, or the sender is gone.
        cancel_receives([](const Op &op) {
            return op.stage != Op::RECV_SPLIT && waits_on_receive(op);
        });
    }
    // A second shutdown takes one look: what did not end then will not now.
    const bool waited = shutdown_waited_.load();
    const int64_t timeout_ns = ctx_->settings().peer_timeout_ms * 1000000LL;
    const int64_t deadline = waited ? now_ns() : now_ns() + 2 * timeout_ns + 1000000000LL;
    bool eps_wait = true;  // close_sending_eps has peers to look at again
    bool gave_up = false;
    if (!progress_until(*ctx_, [&] {
            if (eps_wait) eps_wait = close_sending_eps();
            return !eps_wait && nops_ == 0 && flushing_.empty();
        }, deadline)) {
        gave_up = true;
        if (eps_wait) {
            // Another exchange with a peer we send to never ended (a split
            // receive whose sender stalls): end those sends all the same.
            {
                std::lock_guard<Mutex> lock(ctx_->worker_mu());
                close_sending_eps(/*anyway=*/true);
            }
            progress_until(*ctx_, [this] {
                if (!flushing_.empty()) return false;
                for (const Op *op = ops_; op != nullptr; op = op->next) {
                    if (is_ucx_send(*op)) return false;  // its callback is to come
                }
                return true;
            }, waited ? now_ns() : now_ns() + timeout_ns + 1000000000LL);
        }
    }
    // A copy outside the lock (comm_copy.cc) always ends, and it uses this
    // communicator until concluded: wait for it, deadline or not.
    progress_until(*ctx_, [this] { return copies_ == 0; }, INT64_MAX);
    shutdown_waited_.store(true);
    if (gave_up) {
        // What is still in flight (a split receive whose sender stalls, a
        // UCX transfer with a stopped peer) completes now, P2P_ERR_TIMEOUT:
        // shutdown returns with every operation completed. UCX keeps its
        // request; the registration stays busy (p2p_mem_deregister:
        // P2P_ERR_BUSY) until the peer lets go of the buffer or is gone.
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        const size_t n = abandon_in_flight();
        if (n != 0) {
            P2P_LOG(P2P_LOG_WARN, "comm %u: %zu operation(s) not ended by shutdown's "
                    "deadline: completed as P2P_ERR_TIMEOUT, their memory stays "
                    "registered until the peer lets go", id_, n);
        }
    }
    {
        // Only now, with nothing of ours in flight (no single-copy write
        // into a peer's buffer can follow): peers stop waiting for us. The
        // drain then answers their sends that would wait for us forever
        // (they report them unreceived: the goodbye came first).
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        send_goodbyes();
        drain_unexpected();
    }
    // Waiters recheck: nothing more can arrive. (A notify alone woke none:
    // their wait's condition held them until the 100 ms recheck.)
    cq_[0].close();
    cq_[1].close();
}

} // namespace ucxp2p
