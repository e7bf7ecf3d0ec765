/*
 * Helpers of the tcp bulk tests (core/tcp_bulk.h): a Server, patterns, a
 * raw connection speaking the wire (core/tcp_bulk_wire.h), the test hook.
 */
#ifndef UCXP2P_TEST_CORE_TCP_BULK_UTIL_H
#define UCXP2P_TEST_CORE_TCP_BULK_UTIL_H

#include "core/tcp_bulk.h"
#include "core/tcp_bulk_wire.h"
#include "wireup/tcp_socket.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace tbtest {

using namespace ucxp2p;
using cma::ReadResult;
using tcpb::Address;
using tcpb::Client;
using tcpb::Server;
namespace wire = tcpb::wire;

constexpr int kIo = 20000;  // ms: "never" on any machine, yet not a hang

inline std::unique_ptr<Server> start_server(int io_ms = kIo) {
    int err = 0;
    std::unique_ptr<Server> s = Server::start(io_ms, &err);
    EXPECT_TRUE(s != nullptr) << std::strerror(err);
    return s;
}

inline std::vector<uint8_t> pattern(size_t n, uint64_t salt) {
    std::vector<uint8_t> v(n);
    uint64_t x = salt * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v[i] = static_cast<uint8_t>(x >> 24);
    }
    return v;
}

inline uint64_t addr_of(const void *p) { return reinterpret_cast<uintptr_t>(p); }

inline bool wait_until(const std::function<bool()> &done, int ms = kIo) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (!done()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

/** Bytes a server can have written before its reader reads anything more,
 *  over a socket whose receive buffer is small: its send buffer, at most
 *  tcp_wmem's maximum (autotuning), plus the reader's window. A part
 *  larger than twice that is mid-write whenever the reader stops. 0: the
 *  sysctl is unreadable. */
inline uint64_t unbufferable_bytes() {
    std::ifstream f("/proc/sys/net/ipv4/tcp_wmem");
    uint64_t lo = 0, def = 0, max = 0;
    if (!(f >> lo >> def >> max)) return 0;
    return std::max<uint64_t>(16 << 20, 2 * max + (8 << 20));
}

/** Read and drop what fd receives until EOF (true) or the io timeout. */
inline bool wait_eof(int fd) {
    std::vector<char> sink(64 << 10);
    tcp::Deadline dl(kIo);
    for (;;) {
        ssize_t n = ::recv(fd, sink.data(), sink.size(), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
        if (n > 0 || errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
        if (tcp::wait_fd(fd, POLLIN, dl) != 1) return false;
    }
}

/** A raw connection to a Server on 127.0.0.1 (rcvbuf: SO_RCVBUF, 0: leave). */
struct Raw {
    tcp::Fd fd;
    explicit Raw(uint16_t port, int rcvbuf = 0) {
        fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (rcvbuf > 0) {
            ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
        }
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(port);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        EXPECT_EQ(0, ::connect(fd.get(), reinterpret_cast<sockaddr *>(&sa), sizeof(sa)));
    }
    template <class T> bool put(const T &m) {
        int err = 0;
        return tcp::send_all(fd.get(), &m, sizeof(m), tcp::Deadline(kIo), false, &err) ==
               tcp::Io::OK;
    }
    tcp::Io get(void *p, size_t n) {
        int err = 0;
        return tcp::recv_all(fd.get(), p, n, tcp::Deadline(kIo), &err);
    }
    template <class T> bool get(T *m) { return get(m, sizeof(*m)) == tcp::Io::OK; }
    /** A header and the pad after it (checked: below a page, zeros). */
    bool get(wire::Header *h) {
        if (get(h, sizeof(*h)) != tcp::Io::OK || h->pad >= wire::kMaxPad) return false;
        std::vector<char> pad(h->pad);
        return get(pad.data(), pad.size()) == tcp::Io::OK &&
               std::all_of(pad.begin(), pad.end(), [](char c) { return c == 0; });
    }
    /** HELLO; the HELLO_OK's status (-1: none came). */
    int hello(uint64_t token, uint32_t magic = wire::kHelloMagic,
              uint32_t version = wire::kVersion) {
        wire::Hello h = {magic, version, token};
        wire::HelloOk ok{};
        if (!put(h) || !get(&ok)) return -1;
        EXPECT_EQ(wire::kHelloOkMagic, ok.magic);
        return static_cast<int>(ok.status);
    }
    bool request(uint32_t seq, uint64_t addr, uint64_t off, uint64_t len) {
        return put(wire::Request{wire::kRequestMagic, seq, addr, off, len});
    }
    /** The peer closed (EOF) within the io timeout, whatever came before. */
    bool closed_by_peer() { return wait_eof(fd.get()); }
};

/** Sets the server's before-payload hook for a scope. */
struct Hook {
    explicit Hook(void (*fn)(uint32_t)) { wire::g_test_before_payload.store(fn); }
    ~Hook() { wire::g_test_before_payload.store(nullptr); }
};

}  // namespace tbtest

#endif
