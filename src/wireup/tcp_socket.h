/*
 * Small socket layer for the TCP bootstrap: an RAII file descriptor, a
 * deadline, and blocking-with-deadline send/receive on non-blocking sockets
 * (poll(), EINTR and partial I/O handled, MSG_NOSIGNAL so a dead peer never
 * raises SIGPIPE). IPv4 only.
 */
#ifndef UCXP2P_WIREUP_TCP_SOCKET_H
#define UCXP2P_WIREUP_TCP_SOCKET_H

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ucxp2p {
namespace tcp {

/** Owns one file descriptor; closes it on destruction. */
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() { reset(); }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    Fd(Fd &&o) noexcept : fd_(o.release()) {}
    Fd &operator=(Fd &&o) noexcept {
        if (this != &o) {
            reset(o.release());
        }
        return *this;
    }

    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    int release() {
        int f = fd_;
        fd_ = -1;
        return f;
    }
    void reset(int fd = -1);

private:
    int fd_ = -1;
};

/** A point in time after which a blocking step gives up. */
class Deadline {
public:
    explicit Deadline(uint64_t ms);
    /** The earlier of this deadline and now + ms. */
    Deadline capped(uint64_t ms) const;
    /** This deadline pushed back by ms. */
    Deadline extended(uint64_t ms) const;
    bool expired() const;
    /** Remaining time for poll(): >= 0, rounded up. */
    int poll_ms() const;
    uint64_t elapsed_ms() const;

private:
    using Clock = std::chrono::steady_clock;
    Deadline(Clock::time_point start, Clock::time_point end)
        : start_(start), end_(end) {}
    Clock::time_point start_;
    Clock::time_point end_;
};

enum class Io {
    OK,
    TIMEOUT,
    CLOSED,   /**< orderly EOF from the peer */
    ERROR,    /**< errno in *err (ECONNRESET, EPIPE, ...) */
    READABLE  /**< send_all: the peer sent something first (stop_if_readable) */
};

const char *io_string(Io io);

/** Send len bytes. With stop_if_readable, return READABLE as soon as the
 *  socket has data to read (the peer aborted) instead of waiting to send. */
Io send_all(int fd, const void *buf, size_t len, const Deadline &dl,
            bool stop_if_readable, int *err);
/** Receive exactly len bytes. */
Io recv_all(int fd, void *buf, size_t len, const Deadline &dl, int *err);

/** Wait for events on one fd; 1 ready, 0 deadline passed, -1 error. */
int wait_fd(int fd, short events, const Deadline &dl);

/** poll() that does not sleep, for up to us microseconds, yielding the
 *  CPU between tries: poll's result as soon as it is not 0 (> 0 ready, -1
 *  error in errno, EINTR included), 0 when nothing became ready in that
 *  time (at once when us is 0). A wait expected to end within
 *  microseconds skips the sleep and the wake-up. */
int spin_poll(struct pollfd *fds, nfds_t n, unsigned us);

/** Non-blocking, close-on-exec IPv4 listening socket (SO_REUSEADDR).
 *  Returns 0 or an errno (EADDRINUSE, ...). */
int tcp_listen(const in_addr &ip, uint16_t port, Fd *out);

/** Non-blocking connect with a deadline; TCP_NODELAY set. A socket that
 *  connected to itself (Linux's simultaneous open when nothing listens on
 *  a local port the kernel also picked as our source port) is refused:
 *  Io::ERROR with ECONNREFUSED, so the caller retries as if nobody
 *  listened. from: bind to it first (tests; nullptr: the kernel picks). */
Io tcp_connect(const sockaddr_in &to, const Deadline &dl, Fd *out, int *err,
               const sockaddr_in *from = nullptr);

/** Accept one connection (non-blocking, close-on-exec, TCP_NODELAY).
 *  Returns 0 or an errno (EAGAIN when none is pending). */
int tcp_accept(int listen_fd, Fd *out, std::string *peer);

/** getaddrinfo's signature: what resolve_ipv4 calls (tests pass a slow one). */
using GetAddrInfo = int (*)(const char *, const char *, const struct addrinfo *,
                            struct addrinfo **);

/** Resolve a host name or dotted address to IPv4 within dl; "" on success,
 *  else why. A name is looked up on a helper thread, since getaddrinfo has
 *  no timeout of its own (a slow or unreachable DNS server can hold it for
 *  tens of seconds): past dl the call returns kResolveTimedOut, and the
 *  lookup finishes, and frees what it holds, on its own. */
std::string resolve_ipv4(const std::string &host, in_addr *out, const Deadline &dl,
                         GetAddrInfo lookup = nullptr);
extern const char kResolveTimedOut[];

/** The first IPv4 address of a network interface; false if none. */
bool ifname_ipv4(const std::string &ifname, in_addr *out);

std::string addr_string(const in_addr &ip, uint16_t port);

/** Portable strerror. */
std::string errno_string(int err);

} // namespace tcp
} // namespace ucxp2p

#endif
