/*
 * Multi-process tests of the TCP bootstrap: each rank is a forked child on a
 * free loopback port, reporting through its exit code (0 = all checks passed,
 * -status for an expected failure status, see wireup_test_util.h).
 */
#include "wireup/bootstrap.h"
#include "wireup/tcp_proto.h"
#include "wireup_test_util.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

using namespace ucxp2p;
using wtest::code;

namespace {

constexpr uint64_t kWaitMs = 20000;  // harness bound per test

std::string g_token_base = "wireup-test-" + std::to_string(getpid());

using wtest::job_env;

std::vector<uint8_t> blob_of(uint32_t r, size_t len) {
    std::vector<uint8_t> b(len);
    for (size_t i = 0; i < len; ++i) {
        b[i] = static_cast<uint8_t>(r * 31 + i * 7 + (i >> 12));
    }
    return b;
}

size_t blob_len(uint32_t r) {
    if (r == 0) {
        return 0;
    }
    return r == 1 ? (1u << 20) + 3 : 100 * r + 7;
}

class BootstrapTcp : public ::testing::Test {
protected:
    void SetUp() override {
        static int n = 0;
        token_ = g_token_base + "-" + std::to_string(++n);
    }
    wtest::EnvGuard guard_;
    std::string token_;
};

/** The main job: identity, variable-size allgather (0 B .. 1 MiB), repeated
 *  barriers, a second allgather with other sizes. */
int full_job(uint32_t n) {
    std::unique_ptr<Bootstrap> b;
    p2p_status_t st = bootstrap_create(P2P_BOOTSTRAP_AUTO, &b);
    if (st != P2P_OK) {
        return code(st);
    }
    uint32_t me = b->rank();
    CHILD_CHECK(std::string("tcp") == b->name());
    CHILD_CHECK(b->size() == n);
    CHILD_CHECK(b->local_rank() == me);  // one host
    CHILD_CHECK(b->local_size() == n);
    std::vector<std::vector<uint8_t>> all;
    if ((st = b->allgather(blob_of(me, blob_len(me)), &all)) != P2P_OK) {
        return code(st);
    }
    CHILD_CHECK(all.size() == n);
    for (uint32_t r = 0; r < n; ++r) {
        CHILD_CHECK(all[r] == blob_of(r, blob_len(r)));
    }
    for (int i = 0; i < 20; ++i) {
        if ((st = b->barrier()) != P2P_OK) {
            return code(st);
        }
    }
    if ((st = b->allgather(blob_of(me + 100, 3 * me), &all)) != P2P_OK) {
        return code(st);
    }
    for (uint32_t r = 0; r < n; ++r) {
        CHILD_CHECK(all[r] == blob_of(r + 100, 3 * r));
    }
    return 0;
}

class BootstrapTcpSizes : public BootstrapTcp,
                          public ::testing::WithParamInterface<uint32_t> {};

TEST_P(BootstrapTcpSizes, AllgatherAndBarriers) {
    uint32_t n = GetParam();
    uint16_t port = wtest::free_port_block(1);
    ASSERT_NE(0, port);
    std::vector<int> pids;
    for (uint32_t r = 0; r < n; ++r) {
        pids.push_back(wtest::spawn(job_env(r, n, port, "10000", token_),
                                    [n] { return full_job(n); }));
    }
    std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    for (uint32_t r = 0; r < n; ++r) {
        EXPECT_EQ(0, codes[r]) << "rank " << r;
    }
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapTcpSizes, ::testing::Values(1u, 2u, 5u));

TEST_F(BootstrapTcp, LocalRankFromHostIdsAndEnv) {
    const uint32_t n = 5;
    uint16_t port = wtest::free_port_block(1);
    std::vector<int> pids;
    for (uint32_t r = 0; r < n; ++r) {
        wtest::Env e = job_env(r, n, port, "10000", token_);
        e.push_back({"P2P_HOST_ID", r % 2 ? "host-b" : "host-a"});
        if (r == 3) {  // given by the launcher: used as is
            e.push_back({"LOCAL_RANK", "2"});
            e.push_back({"P2P_LOCAL_WORLD_SIZE", "4"});
        }
        pids.push_back(wtest::spawn(e, [r] {
            std::unique_ptr<Bootstrap> b;
            p2p_status_t st = bootstrap_create(P2P_BOOTSTRAP_TCP, &b);
            if (st != P2P_OK) {
                return code(st);
            }
            // host-a: ranks 0,2,4; host-b: ranks 1,3 (3 overridden).
            const uint32_t lr[] = {0, 0, 1, 2, 2};
            const uint32_t ls[] = {3, 2, 3, 4, 3};
            CHILD_CHECK(b->local_rank() == lr[r]);
            CHILD_CHECK(b->local_size() == ls[r]);
            st = b->barrier();
            return code(st);
        }));
    }
    std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    for (uint32_t r = 0; r < n; ++r) {
        EXPECT_EQ(0, codes[r]) << "rank " << r;
    }
}

/* A given LOCAL_RANK without LOCAL_WORLD_SIZE (or the reverse) meets a
 * computed size (rank): the pair reported must still be a rank on its host,
 * since p2p_config_t takes it as is (and refuses local_rank >= local_size). */
TEST_F(BootstrapTcp, MixedLocalRankAndSizeStayConsistent) {
    const uint32_t n = 3;
    uint16_t port = wtest::free_port_block(1);
    std::vector<int> pids;
    for (uint32_t r = 0; r < n; ++r) {
        wtest::Env e = job_env(r, n, port, "10000", token_);
        // host-a: ranks 0 and 1, host-b: rank 2.
        e.push_back({"P2P_HOST_ID", r < 2 ? "host-a" : "host-b"});
        if (r == 1) {
            e.push_back({"LOCAL_WORLD_SIZE", "1"});  // computed rank is 1
        } else if (r == 2) {
            e.push_back({"LOCAL_RANK", "2"});  // computed size is 1
        }
        pids.push_back(wtest::spawn(e, [r] {
            std::unique_ptr<Bootstrap> b;
            p2p_status_t st = bootstrap_create(P2P_BOOTSTRAP_TCP, &b);
            if (st != P2P_OK) {
                return code(st);
            }
            const uint32_t lr[] = {0, 1, 0};
            const uint32_t ls[] = {2, 2, 1};
            CHILD_CHECK(b->local_rank() < b->local_size());
            CHILD_CHECK(b->local_rank() == lr[r]);
            CHILD_CHECK(b->local_size() == ls[r]);
            return code(b->barrier());
        }));
    }
    std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    for (uint32_t r = 0; r < n; ++r) {
        EXPECT_EQ(0, codes[r]) << "rank " << r;
    }
}

TEST_F(BootstrapTcp, RankZeroListensOnIfnameOrIfIp) {
    const wtest::Env variants[] = {{{"P2P_IFNAME", "lo"}},
                                   {{"P2P_IF_IP", "127.0.0.1"},
                                    {"P2P_IFNAME", "nosuchif0"}}};
    for (const wtest::Env &extra : variants) {
        uint16_t port = wtest::free_port_block(1);
        std::vector<int> pids;
        for (uint32_t r = 0; r < 2; ++r) {
            wtest::Env e = job_env(r, 2, port, "10000", token_);
            e.insert(e.end(), extra.begin(), extra.end());
            pids.push_back(wtest::spawn(e, [] { return full_job(2); }));
        }
        std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
        EXPECT_EQ(0, codes[0]) << extra[0].first;
        EXPECT_EQ(0, codes[1]) << extra[0].first;
    }
}

TEST_F(BootstrapTcp, PortRangeScanSkipsBusyAndSilentPorts) {
    const uint32_t n = 3;
    uint16_t base = wtest::free_port_block(4);
    ASSERT_NE(0, base);
    // A stranger listens on the first port and never answers.
    tcp::Fd silent;
    ASSERT_EQ(0, wtest::listen_any(base, &silent));
    std::string range = std::to_string(base) + "-" + std::to_string(base + 3);
    std::vector<int> pids;
    for (uint32_t r = 0; r < n; ++r) {
        wtest::Env e = job_env(r, n, 0, "15000", token_);
        e.push_back({"P2P_PORT_RANGE", range});
        pids.push_back(wtest::spawn(e, [n] { return full_job(n); }));
    }
    std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    for (uint32_t r = 0; r < n; ++r) {
        EXPECT_EQ(0, codes[r]) << "rank " << r;
    }
}

/** Connect to rank 0 (retrying while it starts), send raw bytes, return
 *  the first frame's type (REJECT text in *text) or -1 for EOF/error. */
int stray(uint16_t port, const std::vector<uint8_t> &bytes, std::string *text) {
    sockaddr_in sa = wtest::loopback(port);
    tcp::Deadline dl(5000);
    tcp::Fd fd;
    int err = 0;
    while (tcp::tcp_connect(sa, dl, &fd, &err) != tcp::Io::OK) {
        if (dl.expired()) {
            return -2;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (tcp::send_all(fd.get(), bytes.data(), bytes.size(), dl, false, &err) !=
        tcp::Io::OK) {
        return -1;
    }
    tcp::Header h;
    std::vector<uint8_t> payload;
    if (tcp::frame_read(fd.get(), dl, tcp::kMaxControl, &h, &payload, &err) !=
        tcp::FrameResult::OK) {
        return -1;
    }
    text->assign(payload.begin(), payload.end());
    return h.type;
}

std::vector<uint8_t> hello_frame(uint32_t rank, uint32_t size,
                                 const std::string &token) {
    tcp::Hello h;
    h.rank = rank;
    h.size = size;
    h.token = token;
    h.host = "stray";
    return tcp::frame_encode(tcp::Msg::HELLO, tcp::hello_encode(h));
}

TEST_F(BootstrapTcp, StrayConnectionsAreRejectedAndJobCompletes) {
    const uint32_t n = 3;
    uint16_t port = wtest::free_port_block(1);
    std::vector<int> pids;
    for (uint32_t r = 0; r < 2; ++r) {  // rank 2 comes after the strays
        pids.push_back(wtest::spawn(job_env(r, n, port, "10000", token_),
                                    [n] { return full_job(n); }));
    }
    uint64_t t0 = wtest::now_ms();
    const int reject = static_cast<int>(tcp::Msg::REJECT);
    std::string text;
    EXPECT_EQ(reject, stray(port, hello_frame(1, n, "wrong-token"), &text));
    EXPECT_NE(std::string::npos, text.find("token")) << text;
    EXPECT_EQ(reject, stray(port, hello_frame(1, n + 1, token_), &text));
    EXPECT_NE(std::string::npos, text.find("world size")) << text;
    EXPECT_EQ(reject, stray(port, hello_frame(7, n, token_), &text));
    EXPECT_NE(std::string::npos, text.find("out of range")) << text;
    EXPECT_EQ(reject, stray(port, hello_frame(0, n, token_), &text));
    // Another protocol version, an oversized hello, plain garbage.
    std::vector<uint8_t> v2 = hello_frame(1, n, token_);
    v2[5] = 99;
    EXPECT_EQ(reject, stray(port, v2, &text));
    EXPECT_NE(std::string::npos, text.find("version")) << text;
    std::vector<uint8_t> huge(tcp::kHeaderSize);
    tcp::header_encode(tcp::Msg::HELLO, 1ull << 40, huge.data());
    EXPECT_EQ(reject, stray(port, huge, &text));
    const char http[] = "GET / HTTP/1.0\r\n\r\n";
    EXPECT_EQ(-1, stray(port, std::vector<uint8_t>(http, http + sizeof(http) - 1),
                        &text));
    // Rank 1 took its slot long ago: a second rank 1 is refused.
    while (wtest::now_ms() - t0 < 1000) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(reject, stray(port, hello_frame(1, n, token_), &text));
    EXPECT_NE(std::string::npos, text.find("already connected")) << text;
    // A connection that never says hello, held open during the whole job.
    sockaddr_in sa = wtest::loopback(port);
    tcp::Fd mute;
    int err = 0;
    ASSERT_EQ(tcp::Io::OK, tcp::tcp_connect(sa, tcp::Deadline(2000), &mute, &err));
    pids.push_back(wtest::spawn(job_env(2, n, port, "10000", token_),
                                [n] { return full_job(n); }));
    std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    for (uint32_t r = 0; r < n; ++r) {
        EXPECT_EQ(0, codes[r]) << "rank " << r;
    }
}

// A mute stray dropped because rank 0's own deadline (shorter than the
// hello timeout) passed: the warning must not claim a longer wait.
TEST_F(BootstrapTcp, MuteStrayDropIsLoggedWithTheTimeWaited) {
    uint16_t port = wtest::free_port_block(1);
    p2ptest::TempDir logs;
    // 1500 ms: shorter than the hello timeout (2000), long enough for this
    // thread to connect on a loaded machine.
    int pid = wtest::spawn(job_env(0, 2, port, "1500", token_),
                           [] { return full_job(2); }, logs.file("0"));
    sockaddr_in sa = wtest::loopback(port);
    tcp::Fd mute;
    int err = 0;
    tcp::Deadline dl(5000);
    while (tcp::tcp_connect(sa, tcp::Deadline(100), &mute, &err) != tcp::Io::OK &&
           !dl.expired()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(mute.valid());
    std::vector<int> codes = wtest::wait_all({pid}, kWaitMs);
    EXPECT_EQ(code(P2P_ERR_TIMEOUT), codes[0]);
    const std::string log = logs.read("0");
    EXPECT_NE(std::string::npos, log.find("dropped connection")) << log;
    EXPECT_EQ(std::string::npos, log.find("within 2000 ms")) << log;
}

// With nothing listening on a local port that the kernel also hands out as
// a source port, Linux may connect a socket to itself: a rank would read
// its own hello back as rank 0's answer ("bad welcome") and fail at once.
// Forced here by binding the source port first; it must look refused.
TEST(TcpSocket, ConnectionToItselfIsRefused) {
    uint16_t port = wtest::free_port_block(2);
    ASSERT_NE(0, port);
    sockaddr_in sa = wtest::loopback(port);
    tcp::Fd fd;
    int err = 0;
    EXPECT_EQ(tcp::Io::ERROR, tcp::tcp_connect(sa, tcp::Deadline(2000), &fd, &err, &sa));
    EXPECT_EQ(ECONNREFUSED, err) << std::strerror(err);
    EXPECT_FALSE(fd.valid());
    // A real listener (on the next port: the closed self-connection holds
    // this one a while): connected, from another source port.
    sa.sin_port = htons(port + 1);
    tcp::Fd listener;
    ASSERT_EQ(0, wtest::listen_any(port + 1, &listener));
    EXPECT_EQ(tcp::Io::OK, tcp::tcp_connect(sa, tcp::Deadline(2000), &fd, &err));
}

// spin_poll: ready at once, nothing ready within the spin, the bytes that
// arrive while it spins, and 0 microseconds (no poll at all).
TEST(TcpSocket, SpinPollReturnsWhatIsReadyOrZeroWhenTheSpinEnds) {
    int sv[2];
    ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    tcp::Fd a(sv[0]), b(sv[1]);
    struct pollfd p = {a.get(), POLLIN, 0};
    using Clock = std::chrono::steady_clock;
    auto t0 = Clock::now();
    EXPECT_EQ(0, tcp::spin_poll(&p, 1, 2000));  // nothing sent: the whole spin
    EXPECT_GE(Clock::now() - t0, std::chrono::microseconds(2000));
    ASSERT_EQ(1, ::write(b.get(), "x", 1));
    EXPECT_EQ(0, tcp::spin_poll(&p, 1, 0));  // 0: does not look
    EXPECT_EQ(1, tcp::spin_poll(&p, 1, 2000));
    EXPECT_TRUE(p.revents & POLLIN);
    char c;
    ASSERT_EQ(1, ::read(a.get(), &c, 1));
    // Bytes written while it spins end the spin (well before its 10 s).
    std::thread late([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        EXPECT_EQ(1, ::write(b.get(), "y", 1));
    });
    t0 = Clock::now();
    p.revents = 0;
    EXPECT_EQ(1, tcp::spin_poll(&p, 1, 10000000));
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
    EXPECT_TRUE(p.revents & POLLIN);
    late.join();
}

TEST_F(BootstrapTcp, MissingRankTimesOut) {
    const uint32_t n = 3;
    uint16_t port = wtest::free_port_block(1);
    std::vector<int> pids;
    uint64_t t0 = wtest::now_ms();
    for (uint32_t r = 0; r < n - 1; ++r) {  // rank 2 never starts
        pids.push_back(wtest::spawn(job_env(r, n, port, "1500", token_), [] {
            std::unique_ptr<Bootstrap> b;
            return code(bootstrap_create(P2P_BOOTSTRAP_TCP, &b));
        }));
    }
    std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    uint64_t dt = wtest::now_ms() - t0;
    for (uint32_t r = 0; r < n - 1; ++r) {
        EXPECT_EQ(code(P2P_ERR_TIMEOUT), codes[r]) << "rank " << r;
    }
    EXPECT_GE(dt, 1400u);
    EXPECT_LT(dt, 8000u);
}

/** A 3-rank job (deadline 2000 ms: creation must fit in it on a loaded
 *  machine) in which rank `late` enters its first barrier 3.5 s after the
 *  others. Each rank's exit code: the others' the
 *  status of their barrier (which must take about the deadline), the late
 *  rank's what late_check returns after its own barrier. */
std::vector<int> run_late_barrier(const std::string &token, uint32_t late,
                                  int (*late_check)(Bootstrap &, p2p_status_t)) {
    const uint32_t n = 3;
    uint16_t port = wtest::free_port_block(1);
    std::vector<int> pids;
    for (uint32_t r = 0; r < n; ++r) {
        pids.push_back(wtest::spawn(job_env(r, n, port, "2000", token), [=] {
            std::unique_ptr<Bootstrap> b;
            p2p_status_t st = bootstrap_create(P2P_BOOTSTRAP_TCP, &b);
            if (st != P2P_OK) {
                return 100 + code(st);
            }
            if (r == late) {  // busy elsewhere past the deadline
                std::this_thread::sleep_for(std::chrono::milliseconds(3500));
                return late_check(*b, b->barrier());
            }
            uint64_t t = wtest::now_ms();
            st = b->barrier();
            uint64_t dt = wtest::now_ms() - t;
            CHILD_CHECK(dt >= 1900 && dt < 8000);
            return code(st);
        }));
    }
    return wtest::wait_all(pids, kWaitMs);
}

TEST_F(BootstrapTcp, RankMissingFromCollectiveTimesOut) {
    std::vector<int> codes = run_late_barrier(token_, 2, [](Bootstrap &, p2p_status_t st) {
        return st == P2P_OK ? wtest::kCheckFailed : 0;
    });
    EXPECT_EQ(code(P2P_ERR_TIMEOUT), codes[0]);
    EXPECT_EQ(code(P2P_ERR_TIMEOUT), codes[1]);
    EXPECT_EQ(0, codes[2]);
}

// And when rank 0 is the late one: the others give up at their deadline
// and say so, and rank 0, arriving after it, must fail that collective too
// (it used to succeed on the blobs already queued: a split outcome) -- and
// the next one at once, not after its own deadline.
TEST_F(BootstrapTcp, LateRankZeroFailsTheCollectiveTheOthersGaveUpOn) {
    std::vector<int> codes = run_late_barrier(token_, 0, [](Bootstrap &b, p2p_status_t st) {
        if (st != P2P_ERR_BOOTSTRAP) {
            return st == P2P_OK ? wtest::kCheckFailed : 110 + code(st);
        }
        uint64_t t = wtest::now_ms();
        CHILD_CHECK(b.barrier() == P2P_ERR_BOOTSTRAP);
        CHILD_CHECK(wtest::now_ms() - t < 1000);
        return 0;
    });
    EXPECT_EQ(0, codes[0]) << "rank 0";
    EXPECT_EQ(code(P2P_ERR_TIMEOUT), codes[1]);
    EXPECT_EQ(code(P2P_ERR_TIMEOUT), codes[2]);
}

/** Ranks 0..n-1 create the job; `victim` then leaves (exit, or abort()),
 *  the others call barrier and must fail fast with P2P_ERR_BOOTSTRAP. */
void run_failure(const std::string &token, uint32_t n, uint32_t victim,
                 bool use_abort) {
    uint16_t port = wtest::free_port_block(1);
    std::vector<int> pids;
    for (uint32_t r = 0; r < n; ++r) {
        pids.push_back(wtest::spawn(job_env(r, n, port, "20000", token), [=] {
            std::unique_ptr<Bootstrap> b;
            p2p_status_t st = bootstrap_create(P2P_BOOTSTRAP_TCP, &b);
            if (st != P2P_OK) {
                return 100 + code(st);
            }
            if (b->barrier() != P2P_OK) {
                return 120;
            }
            if (r == victim) {
                if (!use_abort) {
                    ::_exit(0);  // dies without a word
                }
                b->abort("test abort");
                // After abort, this object is unusable, at once.
                uint64_t t = wtest::now_ms();
                st = b->barrier();
                CHILD_CHECK(wtest::now_ms() - t < 1000);
                return st == P2P_ERR_BOOTSTRAP ? 0 : wtest::kCheckFailed;
            }
            uint64_t t = wtest::now_ms();
            std::vector<std::vector<uint8_t>> all;
            st = b->allgather(blob_of(r, 4096), &all);
            if (wtest::now_ms() - t > 5000) {
                return wtest::kTooSlow;
            }
            if (st != P2P_ERR_BOOTSTRAP) {
                return code(st);
            }
            // ... and stays failed.
            return b->barrier() == P2P_ERR_BOOTSTRAP ? 0 : wtest::kCheckFailed;
        }));
    }
    std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    for (uint32_t r = 0; r < n; ++r) {
        EXPECT_EQ(0, codes[r]) << "rank " << r << " (victim " << victim << ")";
    }
}

TEST_F(BootstrapTcp, RankExitingMidJobFailsOthersFast) {
    run_failure(token_ + "-a", 3, 2, false);
    run_failure(token_ + "-b", 3, 0, false);  // rank 0 itself
}

TEST_F(BootstrapTcp, AbortReachesEveryRank) {
    run_failure(token_ + "-a", 3, 1, true);
    run_failure(token_ + "-b", 3, 0, true);
}

/** Rank 1 contributes 2 KiB. own_limit: rank 1's P2P_BOOTSTRAP_MAX_MSG. */
void run_oversize(const std::string &token, const char *own_limit,
                  int expect_rank1) {
    const uint32_t n = 3;
    uint16_t port = wtest::free_port_block(1);
    std::vector<int> pids;
    for (uint32_t r = 0; r < n; ++r) {
        wtest::Env e = job_env(r, n, port, "10000", token);
        e.push_back({"P2P_BOOTSTRAP_MAX_MSG", r == 1 ? own_limit : "1024"});
        pids.push_back(wtest::spawn(e, [r] {
            std::unique_ptr<Bootstrap> b;
            p2p_status_t st = bootstrap_create(P2P_BOOTSTRAP_TCP, &b);
            if (st != P2P_OK) {
                return 100 + code(st);
            }
            std::vector<std::vector<uint8_t>> all;
            return code(b->allgather(blob_of(r, r == 1 ? 2048 : 16), &all));
        }));
    }
    std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    EXPECT_EQ(code(P2P_ERR_BOOTSTRAP), codes[0]);
    EXPECT_EQ(expect_rank1, codes[1]);
    EXPECT_EQ(code(P2P_ERR_BOOTSTRAP), codes[2]);
}

TEST_F(BootstrapTcp, OversizeBlobIsRefused) {
    // Refused by the sender itself...
    run_oversize(token_ + "-a", "1024", code(P2P_ERR_INVALID_PARAM));
    // ... or, when the sender allows more, by rank 0 on receipt.
    run_oversize(token_ + "-b", "1048576", code(P2P_ERR_BOOTSTRAP));
}

} // namespace
