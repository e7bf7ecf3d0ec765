#include "wireup/tcp_socket.h"

#include <arpa/inet.h>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <system_error>
#include <thread>
#include <unistd.h>

namespace ucxp2p {
namespace tcp {

void Fd::reset(int fd) {
    if (fd_ >= 0) {
        ::close(fd_);  // never retried on EINTR: the fd is gone either way
    }
    fd_ = fd;
}

Deadline::Deadline(uint64_t ms)
    : start_(Clock::now()), end_(start_ + std::chrono::milliseconds(ms)) {}

Deadline Deadline::capped(uint64_t ms) const {
    Clock::time_point now = Clock::now();
    Clock::time_point end = now + std::chrono::milliseconds(ms);
    return Deadline(now, end < end_ ? end : end_);
}

Deadline Deadline::extended(uint64_t ms) const {
    return Deadline(start_, end_ + std::chrono::milliseconds(ms));
}

bool Deadline::expired() const { return Clock::now() >= end_; }

int Deadline::poll_ms() const {
    auto left = end_ - Clock::now();
    if (left <= Clock::duration::zero()) {
        return 0;
    }
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(left).count();
    long long ms = (us + 999) / 1000;
    return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

uint64_t Deadline::elapsed_ms() const {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() -
                                                              start_)
            .count());
}

const char *io_string(Io io) {
    switch (io) {
    case Io::OK:       return "ok";
    case Io::TIMEOUT:  return "timed out";
    case Io::CLOSED:   return "connection closed by peer";
    case Io::ERROR:    return "socket error";
    case Io::READABLE: return "peer sent data first";
    }
    return "?";
}

int wait_fd(int fd, short events, const Deadline &dl) {
    for (;;) {
        struct pollfd p = {fd, events, 0};
        int rc = ::poll(&p, 1, dl.poll_ms());
        if (rc > 0) {
            return 1;
        }
        if (rc == 0) {
            if (dl.expired()) {
                return 0;
            }
            continue;  // woke early (rounding): wait the rest
        }
        if (errno != EINTR) {
            return -1;
        }
    }
}

int spin_poll(struct pollfd *fds, nfds_t n, unsigned us) {
    if (us == 0) {
        return 0;
    }
    // The clock only once a first poll found nothing: while bytes flow,
    // the first poll usually answers and the spin costs one system call.
    int rc = ::poll(fds, n, 0);
    if (rc != 0) {
        return rc;
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    for (;;) {
        sched_yield();  // another thread on this core (a sender, ranks sharing it) goes first
        rc = ::poll(fds, n, 0);
        if (rc != 0 || std::chrono::steady_clock::now() >= end) {
            return rc;
        }
    }
}

Io send_all(int fd, const void *buf, size_t len, const Deadline &dl,
            bool stop_if_readable, int *err) {
    const char *p = static_cast<const char *>(buf);
    while (len > 0) {
        if (stop_if_readable) {
            struct pollfd pf = {fd, POLLIN, 0};
            if (::poll(&pf, 1, 0) > 0 && (pf.revents & (POLLIN | POLLHUP))) {
                return Io::READABLE;
            }
        }
        ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            short ev = POLLOUT | (stop_if_readable ? POLLIN : 0);
            int rc = wait_fd(fd, ev, dl);
            if (rc == 0) {
                return Io::TIMEOUT;
            }
            if (rc < 0) {
                *err = errno;
                return Io::ERROR;
            }
            continue;
        }
        *err = (n < 0) ? errno : EPIPE;
        return (*err == EPIPE) ? Io::CLOSED : Io::ERROR;
    }
    return Io::OK;
}

Io recv_all(int fd, void *buf, size_t len, const Deadline &dl, int *err) {
    char *p = static_cast<char *>(buf);
    while (len > 0) {
        ssize_t n = ::recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= static_cast<size_t>(n);
            continue;
        }
        if (n == 0) {
            return Io::CLOSED;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int rc = wait_fd(fd, POLLIN, dl);
            if (rc == 0) {
                return Io::TIMEOUT;
            }
            if (rc < 0) {
                *err = errno;
                return Io::ERROR;
            }
            continue;
        }
        *err = errno;
        return Io::ERROR;
    }
    return Io::OK;
}

namespace {

int make_socket(Fd *out) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return errno;
    }
    out->reset(fd);
    return 0;
}

void set_nodelay(int fd) {
    int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/** Connected to itself: its own address is its peer's. */
bool self_connected(int fd) {
    sockaddr_in me = {}, peer = {};
    socklen_t ml = sizeof(me), pl = sizeof(peer);
    return ::getsockname(fd, reinterpret_cast<sockaddr *>(&me), &ml) == 0 &&
           ::getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &pl) == 0 &&
           me.sin_port == peer.sin_port && me.sin_addr.s_addr == peer.sin_addr.s_addr;
}

} // namespace

int tcp_listen(const in_addr &ip, uint16_t port, Fd *out) {
    Fd fd;
    int rc = make_socket(&fd);
    if (rc != 0) {
        return rc;
    }
    int one = 1;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
        return errno;
    }
    sockaddr_in sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr = ip;
    if (::bind(fd.get(), reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) != 0 ||
        ::listen(fd.get(), SOMAXCONN) != 0) {
        return errno;
    }
    *out = std::move(fd);
    return 0;
}

Io tcp_connect(const sockaddr_in &to, const Deadline &dl, Fd *out, int *err,
               const sockaddr_in *from) {
    Fd fd;
    *err = make_socket(&fd);
    if (*err != 0) {
        return Io::ERROR;
    }
    if (from != nullptr &&
        ::bind(fd.get(), reinterpret_cast<const sockaddr *>(from), sizeof(*from)) != 0) {
        *err = errno;
        return Io::ERROR;
    }
    int rc;
    do {
        rc = ::connect(fd.get(), reinterpret_cast<const sockaddr *>(&to),
                       sizeof(to));
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        if (errno != EINPROGRESS) {
            *err = errno;
            return Io::ERROR;
        }
        int w = wait_fd(fd.get(), POLLOUT, dl);
        if (w == 0) {
            *err = ETIMEDOUT;
            return Io::TIMEOUT;
        }
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (w < 0 ||
            ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0) {
            *err = errno;
            return Io::ERROR;
        }
        if (soerr != 0) {
            *err = soerr;
            return Io::ERROR;
        }
    }
    if (self_connected(fd.get())) {
        *err = ECONNREFUSED;  // our own hello would come back as the answer
        return Io::ERROR;
    }
    set_nodelay(fd.get());
    *out = std::move(fd);
    return Io::OK;
}

int tcp_accept(int listen_fd, Fd *out, std::string *peer) {
    sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int fd;
    do {
        fd = ::accept4(listen_fd, reinterpret_cast<sockaddr *>(&sa), &sl,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        return errno;
    }
    out->reset(fd);
    set_nodelay(fd);
    *peer = (sa.sin_family == AF_INET) ? addr_string(sa.sin_addr, ntohs(sa.sin_port))
                                       : std::string("?");
    return 0;
}

namespace {

/** One lookup, shared by the caller and its helper thread (whichever is
 *  last frees it). */
struct Lookup {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int rc = 0;
    bool found = false;
    in_addr addr = {};
};

void run_lookup(const std::shared_ptr<Lookup> &l, const std::string &host,
                GetAddrInfo lookup) {
    addrinfo hints;
    std::memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    const int rc = lookup(host.c_str(), nullptr, &hints, &res);
    std::lock_guard<std::mutex> lock(l->mu);
    l->rc = rc;
    if (rc == 0 && res != nullptr) {
        l->found = true;
        l->addr = reinterpret_cast<sockaddr_in *>(res->ai_addr)->sin_addr;
    }
    if (res != nullptr) ::freeaddrinfo(res);
    l->done = true;
    l->cv.notify_all();
}

} // namespace

const char kResolveTimedOut[] = "no answer by the deadline";

std::string resolve_ipv4(const std::string &host, in_addr *out, const Deadline &dl,
                         GetAddrInfo lookup) {
    if (::inet_pton(AF_INET, host.c_str(), out) == 1) {
        return "";
    }
    if (lookup == nullptr) lookup = ::getaddrinfo;
    auto l = std::make_shared<Lookup>();
    try {
        std::thread([l, host, lookup] { run_lookup(l, host, lookup); }).detach();
    } catch (const std::system_error &) {
        run_lookup(l, host, lookup);  // no thread to spare: look up here
    }
    std::unique_lock<std::mutex> lock(l->mu);
    if (!l->cv.wait_for(lock, std::chrono::milliseconds(dl.poll_ms()),
                        [&] { return l->done; })) {
        return kResolveTimedOut;
    }
    if (l->rc != 0 || !l->found) {
        return l->rc != 0 ? gai_strerror(l->rc) : "no address";
    }
    *out = l->addr;
    return "";
}

bool ifname_ipv4(const std::string &ifname, in_addr *out) {
    ifaddrs *list = nullptr;
    if (::getifaddrs(&list) != 0) {
        return false;
    }
    bool found = false;
    for (ifaddrs *i = list; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET &&
            ifname == i->ifa_name) {
            *out = reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr;
            found = true;
            break;
        }
    }
    ::freeifaddrs(list);
    return found;
}

std::string addr_string(const in_addr &ip, uint16_t port) {
    char buf[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &ip, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(port);
}

std::string errno_string(int err) {
    char buf[128];
    // GNU strerror_r returns the message pointer (may not use buf).
    return ::strerror_r(err, buf, sizeof(buf));
}

} // namespace tcp
} // namespace ucxp2p
