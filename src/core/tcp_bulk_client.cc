/*
 * The Client of core/tcp_bulk.h: a pool of connections to one peer's
 * Server, and reads split over a few of them, each part received straight
 * into the caller's buffer (no copy of ours), all driven by one poll().
 */
#include "core/tcp_bulk.h"

#include "core/log.h"
#include "core/tcp_bulk_config.h"
#include "core/tcp_bulk_wire.h"
#include "wireup/tcp_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

namespace ucxp2p {
namespace tcpb {

namespace {

// Each connect attempt gives up after this even with a longer io timeout:
// a published address that does not answer must not hold the next one.
constexpr uint64_t kConnectCapMs = 2000;
// Bytes received from one connection before the others get their turn.
constexpr uint64_t kVisitBytes = uint64_t(8) << 20;

int io_errno(tcp::Io io, int err) {
    switch (io) {
    case tcp::Io::TIMEOUT: return ETIMEDOUT;
    case tcp::Io::CLOSED:  return ECONNRESET;
    default:               return err != 0 ? err : EIO;
    }
}

struct AddrText {
    char s[32];
    explicit AddrText(const sockaddr_in &sa) {
        char ip[INET_ADDRSTRLEN] = "?";
        ::inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
        std::snprintf(s, sizeof(s), "%s:%u", ip, unsigned(ntohs(sa.sin_port)));
    }
};

/** One part of a read, on one connection. */
struct Lane {
    enum Phase { HEADER, PAD, PAYLOAD, TRAILER, DONE };
    enum Outcome { PENDING, OK, WITHDRAWN, REFUSED, LOST };
    int fd = -1;
    uint64_t off = 0, len = 0;  // the part: bytes [off, off + len)
    Phase phase = HEADER;
    uint64_t got = 0;  // of the current phase
    wire::Header hdr{};
    wire::Trailer trl{};
    Outcome outcome = PENDING;
    int err = 0;        // LOST: why
    bool asked = false;  // its request was sent

    void lose(int e) {
        outcome = LOST;
        err = e;
        phase = DONE;
    }
    /** Never asked, or answered in full: nothing of this read is left
     *  unread on it. */
    bool reusable() const {
        return !asked || outcome == OK || outcome == WITHDRAWN || outcome == REFUSED;
    }
    void finish_phase();
    void receive(char *dst, bool *moved);
};

void Lane::finish_phase() {
    got = 0;
    if (phase == HEADER) {
        if (hdr.magic != wire::kHeaderMagic) {
            lose(EPROTO);
            return;
        }
        switch (hdr.status) {
        case wire::kOk:
            if (hdr.len != len || hdr.pad >= wire::kMaxPad) {
                lose(EPROTO);
                return;
            }
            phase = hdr.pad > 0 ? PAD : len > 0 ? PAYLOAD : TRAILER;
            return;
        case wire::kRefused:   outcome = REFUSED; break;
        case wire::kWithdrawn: outcome = WITHDRAWN; break;
        case wire::kUnavailable: lose(ENOMEM); return;
        default:               lose(EPROTO); return;
        }
        phase = DONE;
    } else if (phase == PAD) {
        phase = len > 0 ? PAYLOAD : TRAILER;
    } else if (phase == PAYLOAD) {
        phase = TRAILER;
    } else if (phase == TRAILER) {
        if (trl.magic != wire::kTrailerMagic ||
            (trl.status != wire::kOk && trl.status != wire::kWithdrawn)) {
            lose(EPROTO);
            return;
        }
        outcome = trl.status == wire::kOk ? OK : WITHDRAWN;
        phase = DONE;
    }
}

/** Take what the socket holds (up to kVisitBytes) without blocking. */
void Lane::receive(char *dst, bool *moved) {
    uint64_t budget = kVisitBytes;
    while (phase != DONE && budget > 0) {
        char *p;
        size_t want;
        char sink[wire::kMaxPad];  // the pad, dropped
        if (phase == HEADER) {
            p = reinterpret_cast<char *>(&hdr) + got;
            want = sizeof(hdr) - got;
        } else if (phase == PAD) {
            p = sink;
            want = hdr.pad - got;
        } else if (phase == PAYLOAD) {
            p = dst + off + got;  // straight into the caller's buffer
            want = static_cast<size_t>(std::min(len - got, budget));
        } else {
            p = reinterpret_cast<char *>(&trl) + got;
            want = sizeof(trl) - got;
        }
        ssize_t n = ::recv(fd, p, want, MSG_DONTWAIT);
        if (n > 0) {
            *moved = true;
            got += static_cast<uint64_t>(n);
            budget -= std::min<uint64_t>(budget, static_cast<uint64_t>(n));
            uint64_t size = phase == HEADER    ? sizeof(hdr)
                            : phase == PAD     ? hdr.pad
                            : phase == PAYLOAD ? len
                                               : sizeof(trl);
            if (got == size) {
                finish_phase();
            }
            continue;
        }
        if (n == 0) {
            lose(ECONNRESET);
            return;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            lose(errno);
        }
        return;
    }
}

}  // namespace

struct Client::Impl {
    Address peer;
    bool same_host;
    unsigned lanes;
    int io_timeout_ms;
    unsigned spin_us = tcpb::spin_us();  // drive() polls this long before it sleeps

    /** A read whose requests went out before its turn (prefetch). */
    struct Ahead {
        bool set = false;
        uint32_t seq = 0;
        uint64_t addr = 0, off = 0, len = 0;
        unsigned k = 0;
        tcp::Fd fds[kMaxLanes];
        Lane lane[kMaxLanes];
    };

    mutable std::mutex mu;
    Ahead ahead;                // under mu
    std::vector<tcp::Fd> idle;  // under mu
    size_t held = 0;            // under mu: idle and in use
    bool routed = false;        // under mu: route is the address that worked
    sockaddr_in route{};
    std::atomic<bool> told{false};  // a failure was logged at info once

    Impl(const Address &a, bool same, unsigned l, int io)
        : peer(a), same_host(same), lanes(std::min(std::max(l, 1u), kMaxLanes)),
          io_timeout_ms(io > 0 ? io : 1) {}

    p2p_log_level_t fail_level() {
        return told.exchange(true, std::memory_order_relaxed) ? P2P_LOG_DEBUG : P2P_LOG_INFO;
    }
    unsigned take(unsigned want, tcp::Fd *out, int *err);
    void give_back(tcp::Fd *fds, const Lane *lane, unsigned k);
    bool open(tcp::Fd *out, int *err);
    bool open_at(const sockaddr_in &sa, tcp::Fd *out, int *err);
    void drive(Lane *lane, unsigned k, char *dst);
    unsigned ask(uint32_t seq, uint64_t addr, uint64_t off, uint64_t len, tcp::Fd *fds,
                 Lane *lane, int *err);
    void prefetch(uint32_t seq, uint64_t addr, uint64_t off, uint64_t len);
    void drop_ahead();
    int receive(Lane *lane, tcp::Fd *fds, unsigned k, char *dst, int *lost_err);
    cma::ReadResult read(uint32_t seq, uint64_t addr, uint64_t off, uint64_t len, char *dst,
                         int *err);
};

bool Client::Impl::open_at(const sockaddr_in &sa, tcp::Fd *out, int *err) {
    tcp::Fd fd;
    int e = 0;
    tcp::Io io = tcp::tcp_connect(
        sa, tcp::Deadline(std::min<uint64_t>(uint64_t(io_timeout_ms), kConnectCapMs)), &fd, &e);
    const char *step = "connect";
    wire::HelloOk ok{};
    if (io == tcp::Io::OK) {
        step = "hello";
        tcp::Deadline dl(static_cast<uint64_t>(io_timeout_ms));
        wire::Hello h = {wire::kHelloMagic, wire::kVersion, peer.token};
        io = tcp::send_all(fd.get(), &h, sizeof(h), dl, false, &e);
        if (io == tcp::Io::OK) {
            io = tcp::recv_all(fd.get(), &ok, sizeof(ok), dl, &e);
        }
    }
    if (io != tcp::Io::OK) {
        *err = io_errno(io, e);
    } else if (ok.magic != wire::kHelloOkMagic) {
        *err = EPROTO;
    } else if (ok.status != wire::kOk) {
        *err = EACCES;  // not our peer's Server (wrong token), or another version
    } else {
        *out = std::move(fd);
        return true;
    }
    P2P_LOG(P2P_LOG_DEBUG, "tcp bulk: client of %s: %s failed: %s", AddrText(sa).s, step,
            tcp::errno_string(*err).c_str());
    return false;
}

bool Client::Impl::open(tcp::Fd *out, int *err) {
    sockaddr_in sa[5];
    unsigned n = 0;
    {
        std::lock_guard<std::mutex> lock(mu);
        if (routed) {
            sa[n++] = route;
        }
    }
    if (n == 1) {
        return open_at(sa[0], out, err);
    }
    std::memset(sa, 0, sizeof(sa));
    if (same_host) {
        sa[n++].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    for (unsigned i = 0; i < std::min<unsigned>(peer.naddr, 4); ++i) {
        sa[n++].sin_addr.s_addr = peer.ipv4[i];
    }
    *err = peer.port == 0 ? ECONNREFUSED : EHOSTUNREACH;
    for (unsigned i = 0; i < n && peer.port != 0; ++i) {
        sa[i].sin_family = AF_INET;
        sa[i].sin_port = htons(peer.port);
        if (open_at(sa[i], out, err)) {
            std::lock_guard<std::mutex> lock(mu);
            if (!routed) {
                route = sa[i];
                routed = true;
            }
            return true;
        }
    }
    P2P_LOG(fail_level(), "tcp bulk: client of port %u: no address of %u answered: %s",
            unsigned(peer.port), n, tcp::errno_string(*err).c_str());
    return false;
}

unsigned Client::Impl::take(unsigned want, tcp::Fd *out, int *err) {
    unsigned got = 0;
    {
        std::lock_guard<std::mutex> lock(mu);
        while (got < want && !idle.empty()) {
            out[got++] = std::move(idle.back());
            idle.pop_back();
        }
    }
    // A connection that cannot be made leaves the read fewer parts, not none.
    while (got < want && open(&out[got], err)) {
        ++got;
        std::lock_guard<std::mutex> lock(mu);
        ++held;
    }
    return got;
}

void Client::Impl::give_back(tcp::Fd *fds, const Lane *lane, unsigned k) {
    std::lock_guard<std::mutex> lock(mu);
    for (unsigned i = 0; i < k; ++i) {
        if (lane[i].reusable()) {
            try {
                idle.push_back(std::move(fds[i]));
                continue;
            } catch (const std::bad_alloc &) {
                // fds[i] still holds it (push_back had no effect): closed below
            }
        }
        fds[i].reset();
        --held;
    }
}

void Client::Impl::drive(Lane *lane, unsigned k, char *dst) {
    // The deadline counts from the last byte that moved on any connection.
    tcp::Deadline dl(static_cast<uint64_t>(io_timeout_ms));
    for (;;) {
        struct pollfd pf[kMaxLanes];
        unsigned at[kMaxLanes];
        nfds_t n = 0;
        for (unsigned i = 0; i < k; ++i) {
            if (lane[i].outcome == Lane::PENDING) {
                pf[n] = {lane[i].fd, POLLIN, 0};
                at[n++] = i;
            } else if (lane[i].outcome != Lane::OK) {
                return;  // the read's result is not OK whatever the rest says
            }
        }
        if (n == 0) {
            return;
        }
        // The next bytes are usually microseconds away (the server is
        // writing, or answering our request): wait for them awake first.
        int rc = tcp::spin_poll(pf, n, spin_us);
        if (rc == 0) {
            rc = ::poll(pf, n, dl.poll_ms());
        }
        if (rc < 0 && errno == EINTR) {
            continue;
        }
        if (rc < 0 || (rc == 0 && dl.expired())) {
            int e = rc < 0 ? errno : ETIMEDOUT;
            for (nfds_t j = 0; j < n; ++j) {
                lane[at[j]].lose(e);
            }
            return;
        }
        bool moved = false;
        for (nfds_t j = 0; j < n; ++j) {
            if (pf[j].revents != 0) {
                lane[at[j]].receive(dst, &moved);
            }
        }
        if (moved) {
            dl = tcp::Deadline(static_cast<uint64_t>(io_timeout_ms));
        }
    }
}

unsigned Client::Impl::ask(uint32_t seq, uint64_t addr, uint64_t off, uint64_t len,
                           tcp::Fd *fds, Lane *lane, int *err) {
    const unsigned want =
        static_cast<unsigned>(std::min<uint64_t>(lanes, std::max<uint64_t>(1, len / kMinPart)));
    int e = 0;
    const unsigned k = take(want, fds, &e);
    if (k == 0) {
        *err = e;
        return 0;
    }
    const uint64_t base = len / k, extra = len % k;
    uint64_t at = off;
    for (unsigned i = 0; i < k; ++i) {
        lane[i] = Lane();  // a second ask (read) reuses the array
        lane[i].fd = fds[i].get();
        lane[i].off = at;
        lane[i].len = base + (i < extra ? 1 : 0);
        at += lane[i].len;
        wire::Request r = {wire::kRequestMagic, seq, addr, lane[i].off, lane[i].len};
        tcp::Io io = tcp::send_all(lane[i].fd, &r, sizeof(r),
                                   tcp::Deadline(static_cast<uint64_t>(io_timeout_ms)), false, &e);
        lane[i].asked = true;
        if (io != tcp::Io::OK) {
            lane[i].lose(io_errno(io, e));
            break;  // the read fails: the other parts need not be asked for
        }
    }
    return k;
}

void Client::Impl::prefetch(uint32_t seq, uint64_t addr, uint64_t off, uint64_t len) {
    {
        std::lock_guard<std::mutex> lock(mu);
        if (ahead.set) return;  // one read ahead at most
        ahead.set = true;       // ours to fill, outside the lock
        ahead.seq = 0;          // no read takes it meanwhile (seqs are never 0)
        ahead.k = 0;
    }
    Ahead a;
    int err = 0;
    a.k = ask(seq, addr, off, len, a.fds, a.lane, &err);
    std::lock_guard<std::mutex> lock(mu);
    ahead.seq = seq;
    ahead.addr = addr;
    ahead.off = off;
    ahead.len = len;
    ahead.k = a.k;
    for (unsigned i = 0; i < a.k; ++i) {
        ahead.fds[i] = std::move(a.fds[i]);
        ahead.lane[i] = a.lane[i];
    }
}

int Client::Impl::receive(Lane *lane, tcp::Fd *fds, unsigned k, char *dst, int *lost_err) {
    drive(lane, k, dst);
    // NOT_ALLOWED (3) over FAILED (2) over CANCELLED (1) over OK (0).
    int worst = 0;
    bool pending = false;
    for (unsigned i = 0; i < k; ++i) {
        switch (lane[i].outcome) {
        case Lane::LOST:
            if (worst < 3) {
                worst = 3;
                *lost_err = lane[i].err;
            }
            break;
        case Lane::REFUSED:   worst = std::max(worst, 2); break;
        case Lane::WITHDRAWN: worst = std::max(worst, 1); break;
        case Lane::PENDING:   pending = true; break;
        case Lane::OK:        break;
        }
    }
    // Parts left unread (the read stopped at another's failure) are closed
    // with their connections: none goes back to the pool mid-answer.
    give_back(fds, lane, k);
    if (worst == 0 && pending) {  // cannot happen: drive stops only at a failure
        worst = 3;
        *lost_err = EIO;
    }
    return worst;
}

void Client::Impl::drop_ahead() {
    std::lock_guard<std::mutex> lock(mu);
    if (!ahead.set || ahead.seq == 0) return;  // none, or being filled
    for (unsigned i = 0; i < ahead.k; ++i) {
        ahead.fds[i].reset();  // its answer unread: not reusable
        --held;
    }
    ahead.set = false;
}

cma::ReadResult Client::Impl::read(uint32_t seq, uint64_t addr, uint64_t off, uint64_t len,
                                   char *dst, int *err) {
    tcp::Fd fds[kMaxLanes];
    Lane lane[kMaxLanes];
    unsigned k = 0;
    bool asked = false;
    {
        std::lock_guard<std::mutex> lock(mu);
        if (ahead.set && ahead.seq == seq && ahead.addr == addr && ahead.off == off &&
            ahead.len == len) {
            k = ahead.k;  // its requests went out: the answers may be here
            for (unsigned i = 0; i < k; ++i) {
                fds[i] = std::move(ahead.fds[i]);
                lane[i] = ahead.lane[i];
            }
            ahead.set = false;
            asked = k != 0;
        }
    }
    if (!asked) {
        k = ask(seq, addr, off, len, fds, lane, err);
        if (k == 0) return cma::ReadResult::NOT_ALLOWED;
    }
    int lost_err = 0;
    int worst = receive(lane, fds, k, dst, &lost_err);
    if (worst == 3 && asked) {
        // Its answers waited unread behind another read, long enough for
        // the sender to give up on them (no bytes taken for its timeout):
        // ask once more, on connections of its own.
        P2P_LOG(P2P_LOG_DEBUG, "tcp bulk: client of port %u: seq %u: asked ahead, lost "
                "(%s); asking again", unsigned(peer.port), seq,
                tcp::errno_string(lost_err).c_str());
        k = ask(seq, addr, off, len, fds, lane, err);
        if (k == 0) return cma::ReadResult::NOT_ALLOWED;
        worst = receive(lane, fds, k, dst, &lost_err);
    }
    switch (worst) {
    case 3:
        *err = lost_err;
        P2P_LOG(fail_level(), "tcp bulk: client of port %u: seq %u: read lost: %s",
                unsigned(peer.port), seq, tcp::errno_string(lost_err).c_str());
        return cma::ReadResult::NOT_ALLOWED;
    case 2:
        *err = EINVAL;
        P2P_LOG(P2P_LOG_DEBUG, "tcp bulk: client of port %u: seq %u: range refused",
                unsigned(peer.port), seq);
        return cma::ReadResult::FAILED;
    case 1:
        return cma::ReadResult::CANCELLED;
    default:
        return cma::ReadResult::OK;
    }
}

Client::Client(const Address &peer, bool same_host, unsigned lanes, int io_timeout_ms)
    : impl_(new (std::nothrow) Impl(peer, same_host, lanes, io_timeout_ms)) {}

Client::~Client() = default;

cma::ReadResult Client::read(uint32_t seq, uint64_t addr, uint64_t off, uint64_t len,
                             void *dst, int *err) {
    int dummy = 0;
    if (err == nullptr) {
        err = &dummy;
    }
    if (len == 0) {
        return cma::ReadResult::OK;
    }
    if (!impl_) {  // constructed without memory
        *err = ENOMEM;
        return cma::ReadResult::NOT_ALLOWED;
    }
    return impl_->read(seq, addr, off, len, static_cast<char *>(dst), err);
}

void Client::prefetch(uint32_t seq, uint64_t addr, uint64_t off, uint64_t len) {
    if (len != 0 && impl_) impl_->prefetch(seq, addr, off, len);
}

void Client::drop_prefetch() {
    if (impl_) impl_->drop_ahead();
}

size_t Client::connections() const {
    if (!impl_) {
        return 0;
    }
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->held;
}

}  // namespace tcpb
}  // namespace ucxp2p
