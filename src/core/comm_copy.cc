/*
 * Comm's large single-copy payloads (core/cma.h) copied outside the
 * worker lock (core/copy_queue.h): a receiver's read of a whole message or
 * of a split message's head, and a split sender's write of its part; and
 * a large staged receive's copy to the device (core/staging.h). A split
 * sender's part below kUnlockedCopyMin is written under the lock, but
 * after the progress call that took up the answer (write_due_tails), never
 * inside its callback; it counts as a copy meanwhile (COPY_TAIL).
 *
 * While its copy is queued, running or waiting to be concluded, an op is
 * ended by nothing else: one reading a whole message (or the sender's part
 * of a split one), a split receive whose WDONE came meanwhile or a staged
 * receive copied to the device has no UCX request (RECV_READ), and a
 * writing send neither (SEND_WRITE), so no cancel selects them;
 * abandon_stuck skips them; shutdown waits for them. A split receive
 * copying its head still waits on its WDONE receive, which a peer failure
 * or shutdown may cancel: wdone_done keeps that answer for head_read. The
 * peer's mapped region a copy reads, and its epoch table, stay mapped
 * (PeerMaps::pin) until the copy is concluded.
 */
#include "core/comm.h"
#include "core/log.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>

#include <sched.h>

namespace ucxp2p {

namespace {

/** Smaller copies are made inside the callback: the hand-off costs a
 *  lock round trip and a few microseconds of latency, about what 16-32
 *  KiB take to copy; from here on a copy holds the lock for tens of
 *  microseconds or more. */
constexpr uint64_t kUnlockedCopyMin = 256 * 1024;

Op *op_of(CopyJob *j) {
    return reinterpret_cast<Op *>(reinterpret_cast<char *>(j) - offsetof(Op, job));
}

/** The bytes [*off, *off + *len) of rts a read of this kind copies. */
void read_span(Op::CopyKind kind, const cma::Rts &rts, uint64_t *off, uint64_t *len) {
    *off = kind == Op::COPY_REST ? rts.split : 0;
    *len = kind == Op::COPY_WHOLE ? rts.length
           : kind == Op::COPY_HEAD ? rts.split
                                   : rts.length - rts.split;
}

} // namespace

bool Comm::read_payload(Op *op, Op::CopyKind kind, cma::ReadResult *r, int *err) {
    const uint32_t peer = op->entry.peer;
    const cma::Rts &rts = op->rts;
    const uint8_t *base = nullptr, *epochs = nullptr;
    *err = 0;
    const bool tcp = peers_[peer].tcp;  // no mapping, no pid: its server
    if (!tcp && !read_source(peer, rts, &base, &epochs, r)) {
        return false;  // answered without reading (*r: withdrawn)
    }
    uint64_t off = 0, len = 0;
    read_span(kind, rts, &off, &len);
    // A tcp read waits on the network: never under the lock but where it
    // must (shutdown, a receive overlapping), each step bounded by the
    // peer timeout.
    if ((len < kUnlockedCopyMin && !tcp) || shut_.load(std::memory_order_relaxed) ||
        lands_on_a_receive(op, static_cast<const uint8_t *>(op->buffer) + off, len)) {
        // Shut down: its wait for copies is over or under way (a tcp read
        // reads nothing then: Comm::pull). A receive posted over this one's
        // buffer (benchmarks reusing one buffer for a window of receives
        // do): a tcp read waits on the network here, inside a UCX callback
        // with the worker lock held, bounded by the peer timeout; falling
        // back to UCX instead cost such a run a quarter of its bandwidth
        // (p2p_perftest bw at 4 MiB: 2997 against 4020 MiB/s, bw_ab.sh).
        *r = pull(op, base, epochs, off, len, err);
        return false;
    }
    op->copy_src = base;
    op->copy_epochs = epochs;
    if (base != nullptr) {
        peers_[peer].maps.pin(base);
        peers_[peer].maps.pin(epochs);
    }
    if (kind != Op::COPY_HEAD) {
        if (op->request == nullptr) link(op);  // matched inside post()
        op->request = op;  // its receive (or WDONE receive) ended
        op->stage = Op::RECV_READ;
    }
    // COPY_HEAD: RECV_SPLIT, its WDONE receive stays in UCX.
    queue_copy(op, kind);
    return true;
}

bool Comm::write_part(Op *op, uint64_t remote, cma::ReadResult *r, int *err) {
    op->copy_remote = remote;
    if (shut_.load(std::memory_order_relaxed)) {
        *r = write_tail(op, err);
        return false;
    }
    op->copy_src = op->copy_epochs = nullptr;
    op->stage = Op::SEND_WRITE;
    op->request = op;  // its ACK receive ended (linked since its post)
    if (op->length - op->split >= kUnlockedCopyMin) {
        queue_copy(op, Op::COPY_TAIL);
        return true;
    }
    // Small: written under the lock, but after this progress call took in
    // what arrived behind the answer (write_due_tails), as a queued copy
    // is: a goodbye from a receiver that gave up on the receive.
    op->copy = Op::COPY_TAIL;
    ++copies_;
    op->copy_next = nullptr;
    *tails_last_ = op;
    tails_last_ = &op->copy_next;
    ctx_->request_deferred();
    return true;
}

void Comm::write_due_tails() {
    if (tails_due_ == nullptr) return;
    ctx_->take_in_from_hook();  // may answer more (appended)
    while (Op *op = tails_due_) {
        tails_due_ = op->copy_next;
        if (tails_due_ == nullptr) tails_last_ = &tails_due_;
        op->copy_next = nullptr;
        int err = 0;
        const cma::ReadResult r = write_tail(op, &err);
        op->copy = Op::NO_COPY;
        --copies_;
        op->stage = Op::SEND_RTS;  // where on_cts left it
        tail_written(op, r, err);
    }
}

bool Comm::defer_push(Op *op, p2p_status_t ps, size_t bytes) {
    if (op->is_send || ps != P2P_OK || bytes < kUnlockedCopyMin ||
        shut_.load(std::memory_order_relaxed)) {
        return false;
    }
    if (op->request == nullptr) link(op);  // finished inside post()
    op->request = op;  // its UCX part is over
    op->stage = Op::RECV_READ;
    op->copy_src = nullptr;
    op->copy_bytes = bytes;
    queue_copy(op, Op::COPY_PUSH);
    return true;
}

namespace {

bool overlap(const uint8_t *a, uint64_t alen, const uint8_t *b, uint64_t blen) {
    return a < b + blen && b < a + alen;
}

/** Where a posted receive's single-copy request (an RTS) would land: the
 *  first bytes of its buffer (small receives land in their own bounce[]). */
uint64_t landing_bytes(const Op &op) {
    return op.bounced ? 0 : std::min<uint64_t>(op.length, sizeof(cma::Rts));
}

/** [*dst, *dst + *len): what op's copy writes here (reads of a peer's
 *  payload into op->buffer); false for kinds that write elsewhere. */
bool copy_target(const Op &op, const uint8_t **dst, uint64_t *len) {
    if (op.copy != Op::COPY_WHOLE && op.copy != Op::COPY_HEAD && op.copy != Op::COPY_REST) {
        return false;
    }
    uint64_t off = 0;
    read_span(op.copy, op.rts, &off, len);
    *dst = static_cast<const uint8_t *>(op.buffer) + off;
    return true;
}

} // namespace

bool Comm::lands_on_a_receive(const Op *self, const uint8_t *dst, uint64_t len) const {
    for (const Op *o = ops_; o != nullptr; o = o->next) {
        if (o != self && !o->is_send && o->stage == Op::PLAIN && peers_[o->entry.peer].cma &&
            overlap(dst, len, static_cast<const uint8_t *>(o->buffer), landing_bytes(*o))) {
            return true;
        }
    }
    return false;
}

void Comm::settle_copies_into(const void *buffer, size_t length) {
    const uint8_t *b = static_cast<const uint8_t *>(buffer);
    const uint64_t n = std::min<uint64_t>(length, sizeof(cma::Rts));
    for (Op *o = copying_; o != nullptr; o = o->copy_next) {
        const uint8_t *dst;
        uint64_t len;
        if (!copy_target(*o, &dst, &len) || !overlap(dst, len, b, n) ||
            o->job.ran.load(std::memory_order_acquire)) {
            continue;
        }
        // Not claimed yet: nobody runs it while we hold the lock; run the
        // queued copies here (concluded by the next progress call). Else
        // another thread is copying without the lock: it ends soon.
        Progress &pr = ctx_->progress();
        if (CopyJob *due = pr.claim_copies_locked()) pr.copies().run(due);
        while (!o->job.ran.load(std::memory_order_acquire)) sched_yield();
    }
}

void Comm::queue_copy(Op *op, Op::CopyKind kind) {
    op->copy = kind;
    op->job.copy = copy_job_run;
    op->job.conclude = copy_job_conclude;
    op->job.prefetch = peers_[op->entry.peer].tcp && kind == Op::COPY_WHOLE
                           ? copy_job_prefetch : nullptr;
    uint64_t off = 0, len = 0;
    if (kind == Op::COPY_PUSH) {
        len = op->copy_bytes;
    } else if (kind == Op::COPY_TAIL) {
        len = op->length - op->split;
    } else {
        read_span(kind, op->rts, &off, &len);
    }
    op->job.bytes = len;
    ++copies_;
    op->copy_prev = nullptr;
    op->copy_next = copying_;
    if (copying_ != nullptr) copying_->copy_prev = op;
    copying_ = op;
    ctx_->progress().copy_due_locked(&op->job);
}

cma::ReadResult Comm::pull(Op *op, const uint8_t *base, const uint8_t *epochs,
                           uint64_t off, uint64_t len, int *err) {
    Peer &p = op->comm->peers_[op->entry.peer];
    if (p.tcp) {
        // A read blocks its caller's progress until bytes come or the peer
        // timeout passes. After one failed (a stalled or dead sender; the
        // sender stops using the path on our FALLBACK), the reads of what it
        // sent meanwhile fall back at once instead of waiting in turn; a
        // shutdown reads nothing more either (it cancels what waits).
        if (p.bulk_failed.load(std::memory_order_relaxed) ||
            op->comm->shut_.load(std::memory_order_relaxed)) {
            p.bulk->drop_prefetch();  // if it asked ahead for this one
            *err = ECONNABORTED;
            return cma::ReadResult::NOT_ALLOWED;
        }
        const cma::ReadResult r =
            p.bulk->read(op->rts.seq, op->rts.addr, off, len, op->buffer, err);
        if (r == cma::ReadResult::NOT_ALLOWED) {
            p.bulk_failed.store(true, std::memory_order_relaxed);
        }
        return r;
    }
    return cma::copy_in(static_cast<pid_t>(p.pid), op->rts, base, epochs, off, len,
                        op->buffer, err);
}

cma::ReadResult Comm::write_tail(Op *op, int *err) {
    // A receiver that left (its goodbye) or failed has given up on the
    // receive (its shutdown completed it): write nothing into its memory,
    // which it may be using for something else by now.
    if (op->comm->peers_[op->entry.peer].gone.load(std::memory_order_acquire)) {
        *err = 0;
        return cma::ReadResult::CANCELLED;
    }
    return cma::write(static_cast<pid_t>(op->comm->peers_[op->entry.peer].pid),
                      static_cast<uint8_t *>(op->buffer) + op->split,
                      op->length - op->split, op->copy_remote + op->split, err);
}

void Comm::copy_job_run(CopyJob *j) {
    Op *op = op_of(j);
    int err = 0;
    if (op->copy == Op::COPY_PUSH) {
        err = op->mem->shadow->push(op->buffer, op->copy_bytes);
    } else if (op->copy == Op::COPY_TAIL) {
        op->copy_result = write_tail(op, &err);
    } else {
        uint64_t off = 0, len = 0;
        read_span(op->copy, op->rts, &off, &len);
        op->copy_result = pull(op, op->copy_src, op->copy_epochs, off, len, &err);
    }
    op->copy_err = err;
}

void Comm::copy_job_prefetch(CopyJob *j) {
    Op *op = op_of(j);
    if (op->comm->peers_[op->entry.peer].bulk_failed.load(std::memory_order_relaxed) ||
        op->comm->shut_.load(std::memory_order_relaxed)) {
        return;  // its read asks nothing either (pull)
    }
    uint64_t off = 0, len = 0;
    read_span(op->copy, op->rts, &off, &len);
    op->comm->peers_[op->entry.peer].bulk->prefetch(op->rts.seq, op->rts.addr, off, len);
}

void Comm::copy_job_conclude(CopyJob *j) {
    Op *op = op_of(j);
    Comm *c = op->comm;
    const Op::CopyKind kind = op->copy;
    op->copy = Op::NO_COPY;
    --c->copies_;
    if (op->copy_prev != nullptr) op->copy_prev->copy_next = op->copy_next;
    else c->copying_ = op->copy_next;
    if (op->copy_next != nullptr) op->copy_next->copy_prev = op->copy_prev;
    op->copy_prev = op->copy_next = nullptr;
    if (op->copy_src != nullptr) {
        c->peers_[op->entry.peer].maps.unpin(op->copy_src);
        c->peers_[op->entry.peer].maps.unpin(op->copy_epochs);
    }
    const cma::ReadResult r = op->copy_result;
    const int err = op->copy_err;
    switch (kind) {
    case Op::COPY_WHOLE:
    case Op::COPY_REST: {
        const cma::Rts rts = op->rts;  // conclude_read recycles the op
        c->conclude_read(op, rts, r, err);
        return;
    }
    case Op::COPY_HEAD:
        c->head_read(op, r, err);
        return;
    case Op::COPY_TAIL:
        op->stage = Op::SEND_RTS;  // where on_cts left it
        c->tail_written(op, r, err);
        return;
    case Op::COPY_PUSH:
        c->report(op, static_cast<p2p_status_t>(err), op->copy_bytes);
        return;
    case Op::NO_COPY:
        break;
    }
}

} // namespace ucxp2p
