/*
 * Large payloads between hosts that UCX reaches over tcp, moved on sockets
 * of our own (P2P_TCP_BULK).
 *
 * Why: endpoints are created with peer error handling (a dead peer's
 * operations must complete), and UCX 1.13 then moves a tcp rendezvous
 * through one active-message lane whose receiver copies every fragment out
 * of UCX's receive segments: 0.7-0.8x of what the same UCX moves without
 * error handling at 512 KiB - 4 MiB (docs/PERFORMANCE.md; openucx/ucx
 * #11929). The rendezvous stays the single-copy one of core/cma.h (RTS and
 * ACK ride the UCX endpoints, so ordering, matching, cancel and peer
 * failure keep their rules); only the payload read changes: instead of
 * process_vm_readv, the receiver asks the sender's Server for the bytes
 * and reads them straight into the posted buffer, split over a few
 * connections (one loopback or NIC connection is bound by one core's
 * copy; UCX itself splits over two tcp devices).
 *
 *   receiver (Client)                         sender (Server)
 *   HELLO {token}                  ---->      (once per connection)
 *                                  <----      HELLO_OK
 *   REQUEST {seq, addr, off, len}  ---->      offered? in range?
 *                                  <----      HEADER {status, len, pad}
 *                                  <----      pad zero bytes (tcp_bulk_wire.h)
 *                                  <----      len payload bytes
 *                                  <----      TRAILER {status}
 *
 * The sender offers a send's buffer (offer) before its RTS leaves, and
 * withdraws it (withdraw) before the send completes, whichever way. The
 * Server serves only offered bytes, and the trailer says whether the offer
 * was withdrawn while they were written (the user may own the buffer again
 * then: the receiver discards them, as a moved epoch does for
 * process_vm_readv). A write from a buffer the user already unmapped fails
 * with EFAULT in the kernel, never in our process: the rest of the part is
 * sent as zeros and the trailer says WITHDRAWN.
 *
 * Threads: the Server runs one accepting thread and one thread per
 * accepted connection (blocking I/O; a connection's requests are served in
 * order). A Client's read runs in the caller's thread (the copy queue of
 * core/copy_queue.h), but inside the UCX callback that matched it, with
 * the worker lock held, when another receive is posted over its buffer
 * (Comm::read_payload, Comm::settle_copies_into); it takes connections
 * from a per-peer pool; every blocking step has a deadline.
 *
 * Failures: a Client read that cannot connect, is refused, times out or
 * loses its connection returns NOT_ALLOWED: the receiver answers FALLBACK
 * and the sender pushes the payload through UCX (core/cma.h), where a dead
 * peer is reported by UCX's error handling as for any message.
 */
#ifndef UCXP2P_CORE_TCP_BULK_H
#define UCXP2P_CORE_TCP_BULK_H

#include "core/cma.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ucxp2p {
namespace tcpb {

/** What a rank publishes at p2p_comm_create (part of the wireup blob). */
struct Address {
    uint32_t ipv4[4];  // network byte order; naddr of them are set
    uint16_t port;     // host byte order; 0: this rank runs no Server
    uint16_t naddr;
    uint32_t scope;    // tcpb::kSameHost | kOtherHosts (tcp_bulk_config.h)
    uint64_t token;    // a HELLO must carry it
};
static_assert(sizeof(Address) == 32, "wire size");

class Server {
public:
    /** Listen on every IPv4 address, on a port the kernel picks, and start
     *  the accepting thread. nullptr (errno in *err, logged) when the
     *  socket or the thread cannot be made. devices: the interfaces whose
     *  addresses address() publishes (a UCX_NET_DEVICES value; "": all). */
    static std::unique_ptr<Server> start(int io_timeout_ms, int *err,
                                         const std::string &devices = "");
    /** Stops: closes the listener and every connection, joins every
     *  thread. Offers still standing are dropped. */
    ~Server();
    Server(const Server &) = delete;
    Server &operator=(const Server &) = delete;

    /** port, token and this host's IPv4 addresses (up, not loopback, among
     *  start's devices, at most 4; none when there are none). */
    const Address &address() const;

    /** Bytes [addr, addr + len) of send seq may be read until
     *  withdraw(seq). An offer for a seq already offered replaces it. */
    void offer(uint32_t seq, const void *addr, uint64_t len);
    /** From now on requests for seq are answered WITHDRAWN, and a part of
     *  it being written ends with a WITHDRAWN trailer. Never waits for I/O. */
    void withdraw(uint32_t seq);

    /** Connections accepted and still open (tests). */
    size_t connections() const;

    /** Some send is offered (a hint, one load): a request may wake a
     *  thread of ours any moment, which a caller spinning on its core
     *  delays (Context::bulk_serving). */
    bool serving() const;

    struct Impl;

private:
    explicit Server(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

class Client {
public:
    /** A client of the Server at peer. same_host: connect to 127.0.0.1
     *  first. lanes: connections one read is split over (>= 1; a part is
     *  at least kMinPart bytes). io_timeout_ms: how long a read waits
     *  without a byte moving, and a connect, before it gives up. */
    Client(const Address &peer, bool same_host, unsigned lanes, int io_timeout_ms);
    /** Closes every pooled connection. No read may be running. */
    ~Client();
    Client(const Client &) = delete;
    Client &operator=(const Client &) = delete;

    // Smaller parts lose more to the extra connection than they gain
    // (loopback, docs/PERFORMANCE.md 2026-11-29 09:20: one connection
    // moved 512 KiB - 2 MiB messages 1.2-1.3x faster than two).
    static constexpr uint64_t kMinPart = uint64_t(2) << 20;
    /** The most connections one read uses (P2P_TCP_BULK_LANES' bound;
     *  a read's state lives on the stack). */
    static constexpr unsigned kMaxLanes = 16;

    /** Read bytes [off, off + len) of send seq, whose buffer starts at
     *  addr in the sender, into dst + off. Any thread; concurrent reads
     *  use different connections.
     *  OK: all read, the offer stood throughout. CANCELLED: the offer was
     *  withdrawn (before or during the read): dst holds garbage.
     *  NOT_ALLOWED: no connection, refused (token), timed out or lost
     *  (*err: errno, or EPROTO for a malformed answer): use the fallback.
     *  FAILED: the Server refused the range (a bug: *err = EINVAL). */
    cma::ReadResult read(uint32_t seq, uint64_t addr, uint64_t off, uint64_t len,
                         void *dst, int *err);

    /** Send the requests of a read() to come (same arguments but dst) on
     *  connections of its own, so that its bytes flow while the caller
     *  reads an earlier message; that read() then takes them. One read
     *  ahead at most (a second prefetch does nothing until it is read);
     *  a failed prefetch leaves the read to ask again, and so do answers
     *  lost while they waited (the sender gave up on them). */
    void prefetch(uint32_t seq, uint64_t addr, uint64_t off, uint64_t len);
    /** Close the connections of a prefetch whose read will not come. */
    void drop_prefetch();

    /** Connections this client holds, idle or in use (tests). */
    size_t connections() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace tcpb
}  // namespace ucxp2p

#endif
