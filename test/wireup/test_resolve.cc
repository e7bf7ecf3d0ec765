/* resolve_ipv4 (wireup/tcp_socket.h): MASTER_ADDR's lookup ends by the
 * bootstrap's deadline even when getaddrinfo does not (a slow or
 * unreachable DNS server). The lookup is injected: a fake getaddrinfo
 * stands in for the resolver. */
#include "wireup/tcp_socket.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netdb.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

using ucxp2p::tcp::Deadline;
using ucxp2p::tcp::resolve_ipv4;

namespace {

std::atomic<int> g_calls{0};
std::atomic<bool> g_release{false};  // lets fake_slow answer
std::atomic<int> g_slow_done{0};

/** 10.1.2.3 for any name, at once. */
int fake_found(const char *, const char *, const addrinfo *, addrinfo **res) {
    ++g_calls;
    auto *ai = static_cast<addrinfo *>(std::calloc(1, sizeof(addrinfo) + sizeof(sockaddr_in)));
    auto *sa = reinterpret_cast<sockaddr_in *>(ai + 1);
    sa->sin_family = AF_INET;
    inet_pton(AF_INET, "10.1.2.3", &sa->sin_addr);
    ai->ai_family = AF_INET;
    ai->ai_addr = reinterpret_cast<sockaddr *>(sa);
    ai->ai_addrlen = sizeof(*sa);
    *res = ai;
    return 0;
}

int fake_unknown(const char *, const char *, const addrinfo *, addrinfo **res) {
    ++g_calls;
    *res = nullptr;
    return EAI_NONAME;
}

/** A resolver that answers only once g_release is set (30 s at most). */
int fake_slow(const char *, const char *, const addrinfo *, addrinfo **res) {
    ++g_calls;
    for (int i = 0; i < 3000 && !g_release.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    *res = nullptr;
    ++g_slow_done;
    return EAI_AGAIN;
}

} // namespace

// freeaddrinfo frees what fake_found allocated with calloc: glibc's
// freeaddrinfo frees each node (and its ai_canonname) with free().
TEST(Resolve, NameFoundThroughTheLookup) {
    g_calls = 0;
    in_addr ip{};
    EXPECT_EQ("", resolve_ipv4("master.example", &ip, Deadline(5000), fake_found));
    char buf[INET_ADDRSTRLEN];
    EXPECT_STREQ("10.1.2.3", inet_ntop(AF_INET, &ip, buf, sizeof(buf)));
    EXPECT_EQ(1, g_calls.load());
}

TEST(Resolve, DottedAddressNeedsNoLookup) {
    g_calls = 0;
    in_addr ip{};
    EXPECT_EQ("", resolve_ipv4("127.0.0.1", &ip, Deadline(5000), fake_slow));
    EXPECT_EQ(htonl(INADDR_LOOPBACK), ip.s_addr);
    EXPECT_EQ(0, g_calls.load());
}

TEST(Resolve, UnknownNameSaysWhy) {
    in_addr ip{};
    EXPECT_EQ(gai_strerror(EAI_NONAME),
              resolve_ipv4("nosuch.example", &ip, Deadline(5000), fake_unknown));
}

// Before, getaddrinfo ran in the caller: the bootstrap waited as long as
// the resolver took, whatever P2P_BOOTSTRAP_TIMEOUT_MS said.
TEST(Resolve, SlowLookupEndsAtTheDeadline) {
    g_slow_done = 0;
    g_release = false;
    in_addr ip{};
    EXPECT_EQ(ucxp2p::tcp::kResolveTimedOut,
              resolve_ipv4("slow.example", &ip, Deadline(200), fake_slow));
    EXPECT_EQ(0, g_slow_done.load()) << "returned only once the lookup answered";
    // The abandoned lookup finishes on its own (and frees its state).
    g_release = true;
    for (int i = 0; i < 3000 && g_slow_done.load() == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(1, g_slow_done.load());
}
