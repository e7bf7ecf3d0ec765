/*
 * The Server of core/tcp_bulk.h: the offers, the accepting thread, and one
 * thread per connection that answers its requests in order, writing the
 * payload straight from the offered memory (no copy of ours).
 */
#include "core/tcp_bulk.h"

#include "core/log.h"
#include "core/tcp_bulk_config.h"
#include "core/tcp_bulk_wire.h"
#include "wireup/tcp_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <list>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>

namespace ucxp2p {
namespace tcpb {

namespace wire {
std::atomic<void (*)(uint32_t)> g_test_before_payload{nullptr};
}  // namespace wire

namespace {

// Payload bytes per send(): how often a withdraw is looked for mid-part
// (once seen, the rest is sent as zeros instead of read from user memory).
constexpr size_t kSendChunk = size_t(1) << 20;
// What keeps a stream framed once the offered memory is withdrawn or gone.
const char kZeros[64 * 1024] = {};

struct Offer {
    uint64_t addr;
    uint64_t len;
    uint64_t gen;  // unique per offer(): a replaced offer is a withdrawn one
};

struct Conn {
    tcp::Fd fd;
    std::string peer;
    std::thread thread;
    bool done = false;  // under Impl::mu: its thread is returning (join it)
};

/** Send [p, p + len), waiting for room at most timeout_ms at a time: a slow
 *  reader is served, one that stopped reading is given up on. 0, or the
 *  errno that stopped it (ETIMEDOUT, EPIPE, EFAULT, ...); *sent: bytes
 *  sent either way. */
int send_bytes(int fd, const char *p, size_t len, int flags, int timeout_ms,
               size_t *sent) {
    *sent = 0;
    while (*sent < len) {
        ssize_t n = ::send(fd, p + *sent, len - *sent, flags | MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            *sent += static_cast<size_t>(n);
            continue;
        }
        if (n == 0) {
            return EPIPE;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int rc = tcp::wait_fd(fd, POLLOUT, tcp::Deadline(static_cast<uint64_t>(timeout_ms)));
            if (rc == 0) {
                return ETIMEDOUT;
            }
            if (rc < 0) {
                return errno;
            }
            continue;
        }
        return errno;
    }
    return 0;
}

}  // namespace

struct Server::Impl {
    static constexpr int kMaxGreeting = 64;

    int io_timeout_ms = 1;
    unsigned spin_us = tcpb::spin_us();  // next_request polls this long before it sleeps
    Address addr{};
    tcp::Fd listener;
    tcp::Fd wake;  // eventfd: stopping, or a connection ended (reap it)
    std::thread acceptor;

    mutable std::mutex mu;
    std::unordered_map<uint32_t, Offer> offers;  // under mu
    uint64_t next_gen = 1;                       // under mu
    bool offers_lost = false;  // under mu: an offer could not be recorded
    std::list<std::unique_ptr<Conn>> conns;      // under mu
    bool stopping = false;                       // under mu
    // Bumped by every withdraw and replacing offer (under mu): a part being
    // written looks its offer up again only when this moved.
    std::atomic<uint64_t> changes{0};
    std::atomic<size_t> offered{0};  // offers.size() (Server::serving)
    std::atomic<int> greeting{0};    // connections before their HELLO

    ~Impl() { stop(); }
    void stop();
    void poke();
    void accept_loop();
    void accept_ready();
    void add(tcp::Fd fd, std::string peer);
    void reap();
    void serve(Conn *c);
    bool hello(Conn *c);
    bool next_request(Conn *c, wire::Request *r);
    bool answer(Conn *c, const wire::Request &r);
    bool write_payload(Conn *c, const wire::Request &r, uint64_t gen, uint64_t seen,
                       bool *withdrawn);
    bool still_offered(uint32_t seq, uint64_t gen) const;
};

void Server::Impl::poke() {
    uint64_t one = 1;
    if (wake.valid()) {
        ssize_t n = ::write(wake.get(), &one, sizeof(one));
        (void)n;  // EAGAIN: the counter is already non-zero, the poll wakes anyway
    }
}

void Server::Impl::stop() {
    {
        std::lock_guard<std::mutex> lock(mu);
        stopping = true;
    }
    poke();
    if (acceptor.joinable()) {
        acceptor.join();
    }
    listener.reset();  // connections not yet accepted are refused now
    std::list<std::unique_ptr<Conn>> all;
    {
        std::lock_guard<std::mutex> lock(mu);
        // Wakes a thread blocked waiting for a request or for room to write;
        // the fd itself stays open until its thread is joined.
        for (auto &c : conns) {
            ::shutdown(c->fd.get(), SHUT_RDWR);
        }
        all.swap(conns);
        offers.clear();
    }
    for (auto &c : all) {
        if (c->thread.joinable()) {
            c->thread.join();
        }
    }
}

void Server::Impl::accept_loop() {
    for (;;) {
        struct pollfd p[2] = {{listener.get(), POLLIN, 0}, {wake.get(), POLLIN, 0}};
        int rc = ::poll(p, 2, -1);
        if (rc < 0) {
            if (errno != EINTR) {
                // ENOMEM: nothing to do but wait a little and try again.
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            continue;
        }
        if (p[1].revents & POLLIN) {
            uint64_t v;
            ssize_t n = ::read(wake.get(), &v, sizeof(v));
            (void)n;
        }
        {
            std::lock_guard<std::mutex> lock(mu);
            if (stopping) {
                return;
            }
        }
        reap();
        if (p[0].revents != 0) {
            accept_ready();
        }
    }
}

void Server::Impl::accept_ready() {
    for (;;) {
        tcp::Fd fd;
        std::string peer;
        int rc = 0;
        try {
            rc = tcp::tcp_accept(listener.get(), &fd, &peer);
            if (rc == 0) {
                add(std::move(fd), std::move(peer));
                continue;
            }
        } catch (const std::exception &) {  // bad_alloc: drop this connection
            P2P_LOG(P2P_LOG_INFO, "tcp bulk: server port %u: no memory for a connection",
                    unsigned(addr.port));
            continue;
        }
        if (rc == EAGAIN || rc == EWOULDBLOCK) {
            return;
        }
        if (rc == ECONNABORTED || rc == EPROTO || rc == EPERM) {
            continue;  // that connection is gone; others may be queued
        }
        // EMFILE, ENFILE, ENOBUFS: the pending connection stays queued and
        // the listener readable; wait a little rather than spin (a stop
        // still interrupts the wait).
        P2P_LOG(P2P_LOG_INFO, "tcp bulk: server port %u: accept failed: %s",
                unsigned(addr.port), tcp::errno_string(rc).c_str());
        struct pollfd w = {wake.get(), POLLIN, 0};
        (void)::poll(&w, 1, 100);
        return;
    }
}

void Server::Impl::add(tcp::Fd fd, std::string peer) {
    // Each connection gets a thread before its HELLO: strangers (no token)
    // must not pile them up (fd closed here).
    if (greeting.load(std::memory_order_relaxed) >= kMaxGreeting) {
        P2P_LOG(P2P_LOG_DEBUG, "tcp bulk: server port %u: %s refused: %d connections "
                "wait for their hello", unsigned(addr.port), peer.c_str(), kMaxGreeting);
        return;
    }
    std::unique_ptr<Conn> c(new Conn());
    c->fd = std::move(fd);
    c->peer = std::move(peer);
    Conn *raw = c.get();
    std::lock_guard<std::mutex> lock(mu);
    conns.push_back(std::move(c));
    greeting.fetch_add(1, std::memory_order_relaxed);
    try {
        raw->thread = std::thread([this, raw] { serve(raw); });
    } catch (const std::exception &e) {  // system_error (EAGAIN), bad_alloc
        P2P_LOG(P2P_LOG_INFO, "tcp bulk: server port %u: no thread for %s: %s",
                unsigned(addr.port), raw->peer.c_str(), e.what());
        greeting.fetch_sub(1, std::memory_order_relaxed);
        conns.pop_back();
    }
}

void Server::Impl::reap() {
    std::list<std::unique_ptr<Conn>> dead;  // splice: no allocation
    {
        std::lock_guard<std::mutex> lock(mu);
        for (auto it = conns.begin(); it != conns.end();) {
            auto next = std::next(it);
            if ((*it)->done) {
                dead.splice(dead.end(), conns, it);
            }
            it = next;
        }
    }
    for (auto &c : dead) {
        if (c->thread.joinable()) {
            c->thread.join();
        }
    }
}

void Server::Impl::serve(Conn *c) {
    const bool greeted = hello(c);
    greeting.fetch_sub(1, std::memory_order_relaxed);
    if (greeted) {
        wire::Request r;
        while (next_request(c, &r) && answer(c, r)) {
        }
    }
    // The peer sees the end now, not at the reap; the fd is closed there.
    ::shutdown(c->fd.get(), SHUT_RDWR);
    {
        std::lock_guard<std::mutex> lock(mu);
        c->done = true;
    }
    poke();
}

bool Server::Impl::hello(Conn *c) {
    wire::Hello h;
    int err = 0;
    tcp::Io io = tcp::recv_all(c->fd.get(), &h, sizeof(h),
                               tcp::Deadline(static_cast<uint64_t>(io_timeout_ms)), &err);
    if (io != tcp::Io::OK) {
        P2P_LOG(P2P_LOG_DEBUG, "tcp bulk: server port %u: no hello from %s: %s",
                unsigned(addr.port), c->peer.c_str(), tcp::io_string(io));
        return false;
    }
    if (h.magic != wire::kHelloMagic) {
        P2P_LOG(P2P_LOG_INFO, "tcp bulk: server port %u: %s sent no hello (magic 0x%x)",
                unsigned(addr.port), c->peer.c_str(), h.magic);
        return false;
    }
    wire::HelloOk ok = {wire::kHelloOkMagic, wire::kOk};
    if (h.version != wire::kVersion) {
        ok.status = wire::kBadVersion;
    } else if (h.token != addr.token) {
        ok.status = wire::kBadToken;
    }
    size_t sent;
    if (send_bytes(c->fd.get(), reinterpret_cast<const char *>(&ok), sizeof(ok), 0,
                   io_timeout_ms, &sent) != 0) {
        return false;
    }
    if (ok.status != wire::kOk) {
        P2P_LOG(P2P_LOG_INFO, "tcp bulk: server port %u: refused %s (%s)", unsigned(addr.port),
                c->peer.c_str(),
                ok.status == wire::kBadVersion ? "protocol version" : "wrong token");
        return false;
    }
    return true;
}

bool Server::Impl::next_request(Conn *c, wire::Request *r) {
    // An idle pooled connection waits here for as long as the client likes
    // (a stop wakes it with shutdown); the rest of a request has a deadline.
    // While sends are offered, the next request is usually microseconds
    // away (the client finishing the last part): wait for it awake first.
    // A spin that found the request (or the connection's end) needs no
    // blocking poll after it; one that found nothing leaves it to poll.
    int rc = 0;
    if (offered.load(std::memory_order_relaxed) > 0) {
        struct pollfd p = {c->fd.get(), POLLIN, 0};
        rc = tcp::spin_poll(&p, 1, spin_us);
    }
    while (rc <= 0) {
        struct pollfd p = {c->fd.get(), POLLIN, 0};
        rc = ::poll(&p, 1, -1);
        if (rc < 0 && errno != EINTR) {
            return false;
        }
    }
    int err = 0;
    tcp::Io io = tcp::recv_all(c->fd.get(), r, sizeof(*r),
                               tcp::Deadline(static_cast<uint64_t>(io_timeout_ms)), &err);
    if (io != tcp::Io::OK) {
        P2P_LOG(P2P_LOG_DEBUG, "tcp bulk: server port %u: connection from %s ends: %s",
                unsigned(addr.port), c->peer.c_str(), tcp::io_string(io));
        return false;
    }
    if (r->magic != wire::kRequestMagic) {
        P2P_LOG(P2P_LOG_INFO, "tcp bulk: server port %u: malformed request from %s (magic 0x%x)",
                unsigned(addr.port), c->peer.c_str(), r->magic);
        return false;
    }
    return true;
}

bool Server::Impl::answer(Conn *c, const wire::Request &r) {
    wire::Header h = {wire::kHeaderMagic, wire::kOk, 0, 0, 0};
    uint64_t gen = 0, seen = 0;
    {
        std::lock_guard<std::mutex> lock(mu);
        auto it = offers.find(r.seq);
        if (it == offers.end()) {
            h.status = offers_lost ? wire::kUnavailable : wire::kWithdrawn;
        } else if (r.addr != it->second.addr || r.off > it->second.len ||
                   r.len > it->second.len - r.off) {
            h.status = wire::kRefused;
        } else {
            h.len = r.len;
            gen = it->second.gen;
            seen = changes.load(std::memory_order_relaxed);
        }
    }
    if (h.status == wire::kRefused) {
        P2P_LOG(P2P_LOG_DEBUG, "tcp bulk: server port %u: seq %u: refused [%llu, +%llu) of 0x%llx",
                unsigned(addr.port), r.seq, (unsigned long long)r.off,
                (unsigned long long)r.len, (unsigned long long)r.addr);
    }
    const bool payload = h.status == wire::kOk;
    // The header and its pad in one send (wire::kMaxPad says why the pad).
    char head[sizeof(h) + wire::kMaxPad];
    if (payload && r.len > 0) h.pad = wire::payload_pad(r.addr + r.off);
    std::memcpy(head, &h, sizeof(h));
    std::memset(head + sizeof(h), 0, h.pad);
    size_t sent;
    // MSG_MORE: the header leaves in the payload's first segment.
    int rc = send_bytes(c->fd.get(), head, sizeof(h) + h.pad,
                        payload && r.len > 0 ? MSG_MORE : 0, io_timeout_ms, &sent);
    if (rc != 0 || !payload) {
        return rc == 0;
    }
    void (*hook)(uint32_t) = wire::g_test_before_payload.load(std::memory_order_acquire);
    if (hook != nullptr) {
        hook(r.seq);
    }
    bool withdrawn = false;
    if (!write_payload(c, r, gen, seen, &withdrawn)) {
        return false;
    }
    // The payload's bytes were all copied out of the user's buffer above:
    // if the offer still stands now, they are the offered ones.
    wire::Trailer t = {wire::kTrailerMagic,
                       withdrawn || !still_offered(r.seq, gen) ? wire::kWithdrawn : wire::kOk};
    return send_bytes(c->fd.get(), reinterpret_cast<const char *>(&t), sizeof(t), 0,
                      io_timeout_ms, &sent) == 0;
}

bool Server::Impl::write_payload(Conn *c, const wire::Request &r, uint64_t gen,
                                 uint64_t seen, bool *withdrawn) {
    const char *src = reinterpret_cast<const char *>(static_cast<uintptr_t>(r.addr + r.off));
    uint64_t left = r.len;
    bool zeros = false;
    while (left > 0) {
        if (!zeros) {
            uint64_t now = changes.load(std::memory_order_acquire);
            if (now != seen) {
                seen = now;
                zeros = !still_offered(r.seq, gen);
            }
        }
        size_t n = static_cast<size_t>(
            std::min<uint64_t>(left, zeros ? sizeof(kZeros) : kSendChunk));
        size_t sent = 0;
        // MSG_MORE: the trailer goes out with the payload's last bytes.
        int rc = send_bytes(c->fd.get(), zeros ? kZeros : src, n, MSG_MORE, io_timeout_ms,
                            &sent);
        left -= sent;
        src += sent;
        if (rc == EFAULT && !zeros) {
            // The user unmapped the buffer (it was withdrawn): the kernel
            // says so instead of our process faulting.
            P2P_LOG(P2P_LOG_DEBUG, "tcp bulk: server port %u: seq %u: buffer gone mid-part",
                    unsigned(addr.port), r.seq);
            zeros = true;
            continue;
        }
        if (rc != 0) {
            P2P_LOG(rc == ETIMEDOUT ? P2P_LOG_INFO : P2P_LOG_DEBUG,
                    "tcp bulk: server port %u: seq %u: writing to %s failed: %s; closing",
                    unsigned(addr.port), r.seq, c->peer.c_str(),
                    rc == ETIMEDOUT ? "the reader stopped reading"
                                    : tcp::errno_string(rc).c_str());
            return false;
        }
    }
    *withdrawn = zeros;
    return true;
}

bool Server::Impl::still_offered(uint32_t seq, uint64_t gen) const {
    std::lock_guard<std::mutex> lock(mu);
    auto it = offers.find(seq);
    return it != offers.end() && it->second.gen == gen;
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() = default;  // ~Impl stops

std::unique_ptr<Server> Server::start(int io_timeout_ms, int *err,
                                      const std::string &devices) {
    int dummy = 0;
    if (err == nullptr) {
        err = &dummy;
    }
    std::unique_ptr<Server> s;
    try {
        std::unique_ptr<Impl> impl(new Impl());
        impl->io_timeout_ms = io_timeout_ms > 0 ? io_timeout_ms : 1;
        s.reset(new Server(std::move(impl)));
    } catch (const std::bad_alloc &) {
        *err = ENOMEM;
        P2P_LOG(P2P_LOG_INFO, "tcp bulk: server: no memory");
        return nullptr;
    }
    Impl &m = *s->impl_;
    in_addr any;
    any.s_addr = htonl(INADDR_ANY);
    int rc = tcp::tcp_listen(any, 0, &m.listener);
    sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    if (rc == 0 &&
        ::getsockname(m.listener.get(), reinterpret_cast<sockaddr *>(&sa), &sl) != 0) {
        rc = errno;
    }
    if (rc != 0) {
        *err = rc;
        P2P_LOG(P2P_LOG_INFO, "tcp bulk: server: cannot listen: %s",
                tcp::errno_string(rc).c_str());
        return nullptr;
    }
    int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0) {
        *err = errno;
        P2P_LOG(P2P_LOG_INFO, "tcp bulk: server: no eventfd: %s",
                tcp::errno_string(*err).c_str());
        return nullptr;
    }
    m.wake.reset(efd);
    m.addr.port = ntohs(sa.sin_port);
    m.addr.token = wire::random_token();
    wire::local_addresses(&m.addr, devices);
    try {
        Impl *p = &m;
        m.acceptor = std::thread([p] { p->accept_loop(); });
    } catch (const std::exception &e) {
        *err = EAGAIN;
        P2P_LOG(P2P_LOG_INFO, "tcp bulk: server: no thread: %s", e.what());
        return nullptr;
    }
    P2P_LOG(P2P_LOG_DEBUG, "tcp bulk: server port %u: listening (%u addresses)",
            unsigned(m.addr.port), unsigned(m.addr.naddr));
    return s;
}

const Address &Server::address() const { return impl_->addr; }

void Server::offer(uint32_t seq, const void *addr, uint64_t len) {
    Impl &m = *impl_;
    std::lock_guard<std::mutex> lock(m.mu);
    Offer o = {static_cast<uint64_t>(reinterpret_cast<uintptr_t>(addr)), len, m.next_gen++};
    auto it = m.offers.find(seq);
    if (it != m.offers.end()) {
        it->second = o;
        m.changes.fetch_add(1, std::memory_order_release);
        return;
    }
    try {
        m.offers.emplace(seq, o);
        m.offered.store(m.offers.size(), std::memory_order_relaxed);
    } catch (const std::bad_alloc &) {
        // Requests for seqs we do not know are answered "unavailable" from
        // now on (the reader falls back) instead of "withdrawn" (it would
        // discard a send that stands).
        m.offers_lost = true;
        P2P_LOG(P2P_LOG_INFO, "tcp bulk: server port %u: no memory for the offer of seq %u",
                unsigned(m.addr.port), seq);
    }
}

void Server::withdraw(uint32_t seq) {
    Impl &m = *impl_;
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.offers.erase(seq) != 0) {
        m.changes.fetch_add(1, std::memory_order_release);
        m.offered.store(m.offers.size(), std::memory_order_relaxed);
    }
}

size_t Server::connections() const {
    const Impl &m = *impl_;
    std::lock_guard<std::mutex> lock(m.mu);
    return static_cast<size_t>(std::count_if(
        m.conns.begin(), m.conns.end(), [](const std::unique_ptr<Conn> &c) { return !c->done; }));
}

bool Server::serving() const {
    return impl_->offered.load(std::memory_order_relaxed) != 0;
}

}  // namespace tcpb
}  // namespace ucxp2p
