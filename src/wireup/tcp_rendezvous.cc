#include "wireup/tcp_rendezvous.h"

#include "core/log.h"
#include "wireup/tcp_proto.h"

#include <algorithm>
#include <cerrno>
#include <dirent.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <thread>

namespace ucxp2p {

using namespace tcp;

namespace {

/** Connections not yet authenticated; more are refused at once. */
constexpr size_t kMaxPending = 256;
constexpr uint64_t kAbortSendMs = 500;
constexpr uint64_t kConnectTryMs = 1000;
constexpr uint64_t kMaxBackoffMs = 500;
/** Descriptors rank 0 wants beyond its open ones and one per rank: the
 *  listener, connections not yet admitted, the library's own needs. */
constexpr uint64_t kFdMargin = 64;

/** A connection whose hello has not fully arrived yet. */
struct Pending {
    Fd fd;
    std::string peer;
    Deadline hello_dl;
    std::vector<uint8_t> buf;
};

class RootAdmission {
public:
    RootAdmission(const TcpConfig &cfg, TcpRendezvous *rv)
        : cfg_(cfg), rv_(rv) {}

    /** Read what is there; true when the connection is done with
     *  (admitted, rejected or dropped; p.fd is then moved or closed). */
    bool feed(Pending &p);

    uint32_t joined = 1;

private:
    void reject(Pending &p, const std::string &why, bool reply);
    void admit(Pending &p, const Hello &h);
    void process(Pending &p);

    const TcpConfig &cfg_;
    TcpRendezvous *rv_;
};

void RootAdmission::reject(Pending &p, const std::string &why, bool reply) {
    P2P_LOG(P2P_LOG_WARN, "tcp bootstrap: rank 0 rejected connection from %s: %s",
            p.peer.c_str(), why.c_str());
    if (reply) {
        std::vector<uint8_t> f = frame_encode(
            Msg::REJECT, std::vector<uint8_t>(why.begin(), why.end()));
        // Never wait for a stranger: what the socket buffer takes, it gets.
        (void)::send(p.fd.get(), f.data(), f.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    p.fd.reset();
}

void RootAdmission::admit(Pending &p, const Hello &h) {
    std::vector<uint8_t> f = frame_encode(Msg::WELCOME, u32_encode(cfg_.size));
    int err = 0;
    Io io = send_all(p.fd.get(), f.data(), f.size(), p.hello_dl, false, &err);
    if (io != Io::OK) {
        P2P_LOG(P2P_LOG_WARN, "tcp bootstrap: rank 0 could not welcome rank %u "
                "from %s: %s", h.rank, p.peer.c_str(), io_string(io));
        p.fd.reset();
        return;
    }
    P2P_LOG(P2P_LOG_DEBUG, "tcp bootstrap: rank 0 admitted rank %u from %s (%s)",
            h.rank, p.peer.c_str(), h.host.c_str());
    rv_->peers[h.rank] = std::move(p.fd);
    rv_->hosts[h.rank] = h.host;
    ++joined;
}

void RootAdmission::process(Pending &p) {
    Hello h;
    if (!hello_decode(p.buf.data() + kHeaderSize, p.buf.size() - kHeaderSize,
                      &h)) {
        reject(p, "malformed hello", true);
    } else if (!tokens_equal(h.token, cfg_.token)) {
        reject(p, "job token mismatch", true);
    } else if (h.size != cfg_.size) {
        reject(p, "world size " + std::to_string(h.size) + ", rank 0 has " +
                      std::to_string(cfg_.size), true);
    } else if (h.rank == 0 || h.rank >= cfg_.size) {
        reject(p, "rank " + std::to_string(h.rank) + " out of range [1, " +
                      std::to_string(cfg_.size) + ")", true);
    } else if (rv_->peers[h.rank].valid()) {
        reject(p, "rank " + std::to_string(h.rank) + " already connected", true);
    } else {
        admit(p, h);
    }
}

bool RootAdmission::feed(Pending &p) {
    for (;;) {
        size_t want;
        if (p.buf.size() < kHeaderSize) {
            want = kHeaderSize - p.buf.size();
        } else {
            Header hdr = header_decode(p.buf.data());
            if (hdr.magic != kMagic) {
                reject(p, "bad magic (not a ucxp2p bootstrap client)", false);
                return true;
            }
            if (hdr.version != kVersion) {
                reject(p, "protocol version " + std::to_string(hdr.version) +
                              ", rank 0 speaks " + std::to_string(kVersion),
                       true);
                return true;
            }
            if (hdr.type != static_cast<uint16_t>(Msg::HELLO) ||
                hdr.len > kMaxControl) {
                reject(p, "first frame is not a hello of at most " +
                              std::to_string(kMaxControl) + " bytes", true);
                return true;
            }
            want = kHeaderSize + hdr.len - p.buf.size();
            if (want == 0) {
                process(p);
                return true;
            }
        }
        uint8_t tmp[512];
        ssize_t n = ::recv(p.fd.get(), tmp, std::min(want, sizeof(tmp)),
                           MSG_DONTWAIT);
        if (n > 0) {
            p.buf.insert(p.buf.end(), tmp, tmp + n);
        } else if (n == 0) {
            P2P_LOG(P2P_LOG_WARN, "tcp bootstrap: rank 0: connection from %s "
                    "closed before its hello", p.peer.c_str());
            p.fd.reset();
            return true;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return false;
        } else if (errno != EINTR) {
            P2P_LOG(P2P_LOG_WARN, "tcp bootstrap: rank 0: connection from %s: %s",
                    p.peer.c_str(), errno_string(errno).c_str());
            p.fd.reset();
            return true;
        }
    }
}

p2p_status_t root_listen(const TcpConfig &cfg, Fd *lfd, uint16_t *port) {
    in_addr ip;
    p2p_status_t st = tcp_listen_addr(cfg, &ip);
    if (st != P2P_OK) {
        return st;
    }
    uint16_t lo = cfg.has_port ? cfg.port : cfg.port_lo;
    uint16_t hi = cfg.has_port ? cfg.port : cfg.port_hi;
    int rc = 0;
    for (uint32_t p = lo; p <= hi; ++p) {
        rc = tcp_listen(ip, static_cast<uint16_t>(p), lfd);
        if (rc == 0) {
            *port = static_cast<uint16_t>(p);
            P2P_LOG(P2P_LOG_INFO, "tcp bootstrap: rank 0 listening on %s for %u "
                    "ranks", addr_string(ip, *port).c_str(), cfg.size);
            return P2P_OK;
        }
        if (rc != EADDRINUSE && rc != EACCES) {
            break;
        }
    }
    const char *why = cfg.has_port ? "P2P_MASTER_PORT" : "no free port in P2P_PORT_RANGE";
    if (rc == EADDRNOTAVAIL) {
        why = "not an address of this host: see P2P_IF_IP / P2P_IFNAME";
    } else if (rc != EADDRINUSE && rc != EACCES) {
        why = "the listening socket failed";
    }
    P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: rank 0 cannot listen on %s (%s): %s",
            addr_string(ip, lo).c_str(), why, errno_string(rc).c_str());
    return P2P_ERR_BOOTSTRAP;
}

void abort_joined(TcpRendezvous *rv, p2p_status_t st, const std::string &why) {
    for (Fd &fd : rv->peers) {
        abort_send(fd.get(), st, why, kAbortSendMs);
    }
}

/** Descriptors this process has open (0 when /proc is not there). */
uint64_t open_fd_count() {
    DIR *d = ::opendir("/proc/self/fd");
    if (d == nullptr) {
        return 0;
    }
    uint64_t n = 0;
    while (const dirent *e = ::readdir(d)) {
        n += e->d_name[0] != '.' ? 1 : 0;
    }
    ::closedir(d);
    return n > 0 ? n - 1 : 0;  // not the directory's own
}

/** Rank 0 keeps a socket per rank: raise the soft RLIMIT_NOFILE toward the
 *  hard one when it may be too low for the job (warn when even that is). */
void raise_fd_limit(uint32_t size) {
    rlimit rl;
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) {
        return;
    }
    const rlim_t need = open_fd_count() + size + kFdMargin;
    if (rl.rlim_cur >= need) {
        return;
    }
    const rlim_t old = rl.rlim_cur;
    rl.rlim_cur = (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need)
                      ? need : rl.rlim_max;
    if (rl.rlim_cur > old && ::setrlimit(RLIMIT_NOFILE, &rl) == 0) {
        P2P_LOG(P2P_LOG_INFO, "tcp bootstrap: rank 0 raised its open file "
                "limit (RLIMIT_NOFILE) from %llu to %llu for %u ranks",
                static_cast<unsigned long long>(old),
                static_cast<unsigned long long>(rl.rlim_cur), size);
    } else {
        rl.rlim_cur = old;
    }
    if (rl.rlim_cur < need) {
        P2P_LOG(P2P_LOG_WARN, "tcp bootstrap: rank 0 may need %llu file "
                "descriptors for %u ranks, above its open file limit "
                "(RLIMIT_NOFILE %llu, hard %llu): raise it (ulimit -n)",
                static_cast<unsigned long long>(need), size,
                static_cast<unsigned long long>(rl.rlim_cur),
                static_cast<unsigned long long>(rl.rlim_max));
    }
}

/** Why accept() failed with an error that does not go away by itself (the
 *  listener stays readable: retrying would spin), or "" for one that only
 *  concerned the connection it took (man accept: treat as EAGAIN). */
std::string accept_fatal(int err) {
    switch (err) {
    case ECONNABORTED: case EPROTO: case EPERM: case ENETDOWN:
    case ENOPROTOOPT: case EHOSTDOWN: case ENONET: case EHOSTUNREACH:
    case EOPNOTSUPP: case ENETUNREACH:
        return std::string();
    case EMFILE: {
        rlimit rl = {0, 0};
        (void)::getrlimit(RLIMIT_NOFILE, &rl);
        return "out of file descriptors (RLIMIT_NOFILE " +
               std::to_string(rl.rlim_cur) + ", hard " +
               std::to_string(rl.rlim_max) +
               "): raise the open file limit (ulimit -n) above WORLD_SIZE + " +
               std::to_string(kFdMargin);
    }
    case ENFILE:
        return "the system-wide limit of open files is reached (fs.file-max)";
    default:
        return errno_string(err);
    }
}

} // namespace

std::string tcp_rank_list(const std::vector<uint32_t> &ranks) {
    std::string s;
    for (size_t i = 0; i < ranks.size() && i < 16; ++i) {
        s += (i ? "," : "") + std::to_string(ranks[i]);
    }
    if (ranks.size() > 16) {
        s += ",... (" + std::to_string(ranks.size()) + " in all)";
    }
    return s;
}

p2p_status_t tcp_rendezvous_root(const TcpConfig &cfg, TcpRendezvous *out) {
    if (cfg.size == 1) {  // nobody to wait for: do not take a port
        in_addr ip;
        p2p_status_t st = tcp_listen_addr(cfg, &ip);
        out->peers.resize(1);
        out->hosts.assign(1, cfg.host);
        return st;
    }
    raise_fd_limit(cfg.size);
    Fd lfd;
    uint16_t port = 0;
    p2p_status_t st = root_listen(cfg, &lfd, &port);
    if (st != P2P_OK) {
        return st;
    }
    Deadline dl(cfg.timeout_ms);
    out->peers.clear();
    out->peers.resize(cfg.size);
    out->hosts.assign(cfg.size, std::string());
    out->hosts[0] = cfg.host;
    RootAdmission adm(cfg, out);
    std::vector<Pending> pending;
    std::vector<pollfd> pfds;
    std::vector<uint32_t> joined_ranks;

    while (adm.joined < cfg.size) {
        if (dl.expired()) {
            std::vector<uint32_t> missing;
            for (uint32_t r = 1; r < cfg.size; ++r) {
                if (!out->peers[r].valid()) {
                    missing.push_back(r);
                }
            }
            std::string why = "rank 0 waited " + std::to_string(cfg.timeout_ms) +
                              " ms for " + (missing.size() > 1 ? "ranks " : "rank ") +
                              tcp_rank_list(missing) + " to connect";
            P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: %s", why.c_str());
            abort_joined(out, P2P_ERR_TIMEOUT, why);
            return P2P_ERR_TIMEOUT;
        }
        pfds.clear();
        joined_ranks.clear();
        pfds.push_back({lfd.get(), POLLIN, 0});
        int tmo = dl.poll_ms();
        for (Pending &p : pending) {
            pfds.push_back({p.fd.get(), POLLIN, 0});
            tmo = std::min(tmo, p.hello_dl.poll_ms());
        }
        for (uint32_t r = 1; r < cfg.size; ++r) {
            if (out->peers[r].valid()) {
                pfds.push_back({out->peers[r].get(), POLLIN, 0});
                joined_ranks.push_back(r);
            }
        }
        if (::poll(pfds.data(), pfds.size(), tmo) < 0 && errno != EINTR) {
            P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: rank 0: poll: %s",
                    errno_string(errno).c_str());
            abort_joined(out, P2P_ERR_BOOTSTRAP, "rank 0 failed to poll");
            return P2P_ERR_BOOTSTRAP;
        }
        size_t npending = pending.size();
        for (size_t i = 0; i < npending; ++i) {
            Pending &p = pending[i];
            if (pfds[1 + i].revents != 0 && adm.feed(p)) {
                continue;  // fd moved or closed
            }
            if (p.fd.valid() && p.hello_dl.expired()) {
                // Capped by rank 0's own deadline: say how long it really had.
                P2P_LOG(P2P_LOG_WARN, "tcp bootstrap: rank 0 dropped connection "
                        "from %s: no hello within %llu ms", p.peer.c_str(),
                        static_cast<unsigned long long>(p.hello_dl.elapsed_ms()));
                p.fd.reset();
            }
        }
        for (size_t j = 0; j < joined_ranks.size(); ++j) {
            if (pfds[1 + npending + j].revents != 0) {
                // Nothing is due from an admitted rank before the roster:
                // it left (or broke the protocol). Free its slot.
                uint32_t r = joined_ranks[j];
                P2P_LOG(P2P_LOG_WARN, "tcp bootstrap: rank %u dropped its "
                        "connection during rendezvous; waiting for it again", r);
                out->peers[r].reset();
                --adm.joined;
            }
        }
        pending.erase(std::remove_if(pending.begin(), pending.end(),
                                     [](const Pending &p) { return !p.fd.valid(); }),
                      pending.end());
        if (pfds[0].revents != 0) {
            for (;;) {
                Pending p{Fd(), std::string(), dl.capped(kTcpHelloTimeoutMs), {}};
                int rc = tcp_accept(lfd.get(), &p.fd, &p.peer);
                if (rc == EAGAIN || rc == EWOULDBLOCK) {
                    break;
                }
                if (rc != 0) {
                    std::string fatal = accept_fatal(rc);
                    if (fatal.empty()) {
                        P2P_LOG(P2P_LOG_DEBUG, "tcp bootstrap: rank 0: accept: "
                                "%s", errno_string(rc).c_str());
                        continue;  // that connection is gone; the next one
                    }
                    std::string why = "rank 0 cannot accept connections (" +
                                      std::to_string(adm.joined) + " of " +
                                      std::to_string(cfg.size) +
                                      " ranks joined): " + fatal;
                    P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: %s", why.c_str());
                    for (Pending &w : pending) {
                        abort_send(w.fd.get(), P2P_ERR_BOOTSTRAP, why, kAbortSendMs);
                    }
                    abort_joined(out, P2P_ERR_BOOTSTRAP, why);
                    return P2P_ERR_BOOTSTRAP;
                }
                if (pending.size() >= kMaxPending) {
                    P2P_LOG(P2P_LOG_WARN, "tcp bootstrap: rank 0 refused %s: %zu "
                            "connections already waiting for their hello",
                            p.peer.c_str(), pending.size());
                    continue;
                }
                pending.push_back(std::move(p));
            }
        }
    }
    lfd.reset();  // late strangers now get "connection refused"

    std::vector<std::vector<uint8_t>> names;
    for (const std::string &h : out->hosts) {
        names.emplace_back(h.begin(), h.end());
    }
    std::vector<uint8_t> roster = frame_encode(Msg::ALL, all_encode(0, names));
    for (uint32_t r = 1; r < cfg.size; ++r) {
        int err = 0;
        Io io = send_all(out->peers[r].get(), roster.data(), roster.size(), dl,
                         false, &err);
        if (io != Io::OK) {
            std::string why = "rank 0 could not send the roster to rank " +
                              std::to_string(r) + ": " + io_string(io);
            P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: %s", why.c_str());
            abort_joined(out, P2P_ERR_BOOTSTRAP, why);
            return io == Io::TIMEOUT ? P2P_ERR_TIMEOUT : P2P_ERR_BOOTSTRAP;
        }
    }
    P2P_LOG(P2P_LOG_INFO, "tcp bootstrap: rank 0: all %u ranks joined in %llu ms",
            cfg.size, static_cast<unsigned long long>(dl.elapsed_ms()));
    return P2P_OK;
}

namespace {

enum class Try { JOINED, NEXT, FAIL };

/** One attempt at one port. */
Try client_try(const TcpConfig &cfg, const sockaddr_in &sa, const Deadline &dl,
               Fd *out, std::string *last_err, std::string *rejected, p2p_status_t *st) {
    std::string where = addr_string(sa.sin_addr, ntohs(sa.sin_port));
    Fd fd;
    int err = 0;
    Io io = tcp_connect(sa, dl.capped(kConnectTryMs), &fd, &err);
    if (io != Io::OK) {
        *last_err = "connect to " + where + ": " + errno_string(err);
        return Try::NEXT;
    }
    Hello h;
    h.rank = cfg.rank;
    h.size = cfg.size;
    h.token = cfg.token;
    h.host = cfg.host;
    std::vector<uint8_t> f = frame_encode(Msg::HELLO, hello_encode(h));
    io = send_all(fd.get(), f.data(), f.size(), dl.capped(kConnectTryMs), false,
                  &err);
    if (io != Io::OK) {
        *last_err = "hello to " + where + ": " + io_string(io);
        return Try::NEXT;
    }
    // Scanning a range, a silent listener must not hold us: wait briefly.
    Deadline wdl = cfg.has_port ? dl : dl.capped(kTcpHelloTimeoutMs);
    Header hdr;
    std::vector<uint8_t> payload;
    FrameResult fr = frame_read(fd.get(), wdl, kMaxControl, &hdr, &payload, &err);
    if (fr != FrameResult::OK) {
        *last_err = "waiting for welcome from " + where + ": " +
                    frame_result_string(fr);
        return Try::NEXT;
    }
    uint32_t size = 0;
    if (hdr.type == static_cast<uint16_t>(Msg::WELCOME) &&
        u32_decode(payload.data(), payload.size(), &size) && size == cfg.size) {
        *out = std::move(fd);
        return Try::JOINED;
    }
    std::string text(payload.begin(), payload.end());
    if (hdr.type == static_cast<uint16_t>(Msg::ABORT)) {
        abort_decode(payload.data(), payload.size(), st, &text);
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: rank %u: rank 0 at %s aborted: %s",
                cfg.rank, where.c_str(), text.c_str());
        return Try::FAIL;
    }
    *last_err = where + " rejected rank " + std::to_string(cfg.rank) + ": " +
                (hdr.type == static_cast<uint16_t>(Msg::REJECT) ? text
                                                                : "bad welcome");
    if (cfg.has_port) {
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: %s", last_err->c_str());
        *st = P2P_ERR_BOOTSTRAP;
        return Try::FAIL;
    }
    // Scanning: another job's rank 0, or ours disagreeing (world size,
    // token). Kept apart: the next port's connect error would bury it.
    *rejected = *last_err;
    return Try::NEXT;
}

} // namespace

p2p_status_t tcp_rendezvous_client(const TcpConfig &cfg, TcpRendezvous *out) {
    Deadline dl(cfg.timeout_ms);
    uint32_t lo = cfg.has_port ? cfg.port : cfg.port_lo;
    uint32_t hi = cfg.has_port ? cfg.port : cfg.port_hi;
    std::string last_err = "no attempt";
    std::string rejected;  // the last rank 0 in the range that refused us
    bool resolve_failed = false;  // a lookup of master_addr answered with an error
    uint64_t backoff = 10;
    Fd fd;
    for (bool joined = false; !joined;) {
        in_addr ip;
        std::string why = resolve_ipv4(cfg.master_addr, &ip, dl);
        // A lookup cut short by the deadline says less than the answer an
        // earlier one got (a name that fails at once often runs into the
        // deadline on the last try): keep that.
        if (!why.empty() && (why != kResolveTimedOut || !resolve_failed)) {
            last_err = "resolve '" + cfg.master_addr + "': " + why;
        }
        resolve_failed |= !why.empty() && why != kResolveTimedOut;
        for (uint32_t p = lo; why.empty() && p <= hi && !dl.expired(); ++p) {
            sockaddr_in sa = {};
            sa.sin_family = AF_INET;
            sa.sin_port = htons(static_cast<uint16_t>(p));
            sa.sin_addr = ip;
            p2p_status_t st = P2P_ERR_BOOTSTRAP;
            Try t = client_try(cfg, sa, dl, &fd, &last_err, &rejected, &st);
            if (t == Try::FAIL) {
                return st;
            }
            if (t == Try::JOINED) {
                joined = true;
                break;
            }
        }
        if (joined) {
            break;
        }
        if (dl.expired()) {
            const std::string refusal =
                rejected.empty() || rejected == last_err ? "" : "; last refusal: " + rejected;
            P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: rank %u waited %llu ms for "
                    "rank 0 at %s (last error: %s%s)", cfg.rank,
                    static_cast<unsigned long long>(cfg.timeout_ms),
                    cfg.master_string().c_str(), last_err.c_str(), refusal.c_str());
            return P2P_ERR_TIMEOUT;
        }
        P2P_LOG(P2P_LOG_DEBUG, "tcp bootstrap: rank %u retrying in %llu ms: %s",
                cfg.rank, static_cast<unsigned long long>(backoff),
                last_err.c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(
            std::min<uint64_t>(backoff, static_cast<uint64_t>(dl.poll_ms()))));
        backoff = std::min(backoff * 2, kMaxBackoffMs);
    }

    Header hdr;
    std::vector<uint8_t> payload;
    int err = 0;
    uint64_t max = 8 + uint64_t(cfg.size) * (8 + kMaxHostname);
    FrameResult fr = frame_read(fd.get(), dl.extended(cfg.grace_ms()), max,
                                &hdr, &payload, &err);
    if (fr == FrameResult::TIMEOUT) {
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: rank %u waited %llu ms for the "
                "other ranks to join rank 0", cfg.rank,
                static_cast<unsigned long long>(cfg.timeout_ms));
        return P2P_ERR_TIMEOUT;
    }
    if (fr == FrameResult::OK && hdr.type == static_cast<uint16_t>(Msg::ABORT)) {
        p2p_status_t st;
        std::string why;
        abort_decode(payload.data(), payload.size(), &st, &why);
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: rank %u: rank 0 aborted the "
                "rendezvous: %s", cfg.rank, why.c_str());
        return st;
    }
    uint64_t seq = 1;
    std::vector<std::vector<uint8_t>> names;
    if (fr != FrameResult::OK || hdr.type != static_cast<uint16_t>(Msg::ALL) ||
        !all_decode(payload.data(), payload.size(), cfg.size, &seq, &names) ||
        seq != 0) {
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: rank %u: no roster from rank 0: "
                "%s", cfg.rank, fr == FrameResult::OK ? "unexpected frame"
                                                      : frame_result_string(fr));
        return P2P_ERR_BOOTSTRAP;
    }
    out->hosts.clear();
    for (const auto &n : names) {
        out->hosts.emplace_back(n.begin(), n.end());
    }
    out->root = std::move(fd);
    return P2P_OK;
}

} // namespace ucxp2p
