/*
 * One posted operation of a communicator (Comm, core/comm.h): what the UCX
 * callbacks, the single-copy protocol (core/cma.h) and the copies made
 * outside the worker lock (core/comm_copy.cc) keep about it.
 */
#ifndef UCXP2P_CORE_OP_H
#define UCXP2P_CORE_OP_H

#include "core/cma.h"
#include "core/copy_queue.h"
#include "core/mem.h"

#include <ucxp2p/p2p.h>
#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace ucxp2p {

class Comm;

/** One posted operation; lives until its completion is queued. A single
 *  post that finishes inside the call (Comm::send_single, Comm::recv_now)
 *  needs none: its completion is queued directly. */
struct Op {
    Comm *comm = nullptr;
    Mem *mem = nullptr;
    void *request = nullptr;     // UCX request while in flight
    Op *prev = nullptr, *next = nullptr;
    p2p_completion_t entry{};
    bool is_send = false;
    // Single copy (core/cma.h): a send waiting for its ACK, or either side
    // moving the payload through UCX after a FALLBACK answer.
    // A split send waits for the CTS (SEND_RTS), writes its part, then waits
    // for the final ACK (SEND_SPLIT); a split receive waits for WDONE
    // (RECV_SPLIT). Copies made outside the worker lock (comm_copy.cc):
    // a receive reading a whole message, or a split receive whose WDONE
    // came during its head's copy (RECV_READ), and a split send writing
    // its part (SEND_WRITE); no UCX request then (request: a placeholder).
    enum Stage : uint8_t { PLAIN, SEND_RTS, SEND_SPLIT, SEND_PUSH, RECV_PUSH,
                           RECV_SPLIT, RECV_READ, SEND_WRITE } stage = PLAIN;
    // Its copy outside the worker lock (comm_copy.cc): queued, copying or
    // copied, until concluded; nothing else ends the op meanwhile.
    // COPY_REST: a split receive reads the sender's part too (WDONE
    // NOT_ALLOWED). COPY_PUSH: a staged receive's bytes to the device
    // (core/staging.h).
    enum CopyKind : uint8_t { NO_COPY, COPY_WHOLE, COPY_HEAD, COPY_REST, COPY_TAIL,
                              COPY_PUSH };
    CopyKind copy = NO_COPY;
    bool wdone_pending = false;  // COPY_HEAD: its WDONE came meanwhile
    bool bounced = false;        // small receive landed in bounce[] first
    uint8_t chosen = 0;          // a send ending a PathChooser block: 1 + path
    uint32_t seq = 0;
    uint64_t split = 0;          // split send: where the sender's part starts
    cma::ReadResult head = cma::ReadResult::OK;  // split receive: head read
    int head_err = 0;
    ucs_status_t rts_status = UCS_OK;  // RTS send failed synchronously
    void *buffer = nullptr;      // the user's buffer and length
    size_t length = 0;
    // UCX may run the callback inside the posting call (e.g. a receive that
    // matches a message already here); the callback then only records the
    // result and the poster completes the operation after the call returns.
    bool posting = false;
    bool done_in_post = false;
    bool cancel_asked = false;   // Comm::cancel_receives' slow path
    bool abandoned = false;      // completed by Comm::abandon_op; UCX holds it
    bool peer_lost = false;      // cancel_waits_from: an error ends it as a peer failure
    bool offered = false;        // a send on the tcp bulk server (core/tcp_bulk.h)
    ucs_status_t post_status = UCS_OK;
    size_t post_bytes = 0;

    // Scratch, always written before it is read, so a recycled Op is not
    // cleared past here (Comm::alloc_op resets the fields above only: the
    // message-rate path pays for ~120 bytes, not the whole record).
    cma::Rts rts{};              // split receive: the sender's request
    int64_t block_start_ns = 0;  // when chosen: its block (PathChooser::Pick)
    uint64_t block_bytes = 0;
    cma::Ack ack{};              // control receives land here
    // A copy outside the worker lock (see copy): its queue link, where it
    // reads (a peer's region mapped here, else process_vm_readv), what it
    // writes to, and its result. copy_remote is also where a split send's
    // part goes when it is written under the lock (Comm::write_part: below
    // 256 KiB, by write_due_tails; once shut down, inside the callback).
    CopyJob job{};
    // While copy != NO_COPY: on Comm::copying_ (queued copies) or, a
    // small split part to write, on Comm::tails_due_ (copy_next only).
    Op *copy_prev = nullptr, *copy_next = nullptr;
    const uint8_t *copy_src = nullptr;
    const uint8_t *copy_epochs = nullptr;
    uint64_t copy_remote = 0;
    size_t copy_bytes = 0;           // COPY_PUSH: the bytes received
    cma::ReadResult copy_result = cma::ReadResult::OK;
    int copy_err = 0;
    ucs_status_t wdone_st = UCS_OK;  // see wdone_pending
    alignas(8) uint8_t bounce[sizeof(cma::Rts)];  // small receive, see bounced
};
/** op waits on a UCX receive: a user receive, or a single-copy send's
 *  answer (ACK, CTS). ucp_request_cancel ends it. */
inline bool waits_on_receive(const Op &op) {
    return (!op.is_send && op.stage != Op::RECV_READ) || op.stage == Op::SEND_RTS ||
           op.stage == Op::SEND_SPLIT;
}
/** op is a send whose bytes UCX moves: only closing its endpoint by force
 *  ends it early. */
inline bool is_ucx_send(const Op &op) {
    return op.is_send && (op.stage == Op::PLAIN || op.stage == Op::SEND_PUSH);
}

/** Bytes of Op that Comm::alloc_op resets on reuse. */
constexpr size_t kOpResetBytes = offsetof(Op, rts);
static_assert(std::is_trivially_copyable<Op>::value, "Op is reset by copy");
/** What alloc_op copies into a recycled Op. */
inline const Op kFreshOp{};
/** Recycled Op records a communicator keeps. */
constexpr size_t kMaxCachedOps = 1024;

} // namespace ucxp2p

#endif
