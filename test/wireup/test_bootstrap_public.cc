/*
 * The bootstrap's failures as the public API reports them: the statuses
 * p2p.h documents for p2p_bootstrap_create, p2p_bootstrap_barrier and
 * p2p_comm_create's address exchange (the other wireup tests call the
 * internal bootstrap_create). Multi-rank cases fork one child per rank on
 * a free loopback port (wireup_test_util.h).
 */
#include "wireup/pmix_bootstrap.h"
#include "wireup_test_util.h"

#include "../fail_each.h"

#include <ucxp2p/p2p.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

using wtest::code;

namespace {

constexpr uint64_t kWaitMs = 20000;  // harness bound per test

void set(const char *k, const std::string &v) { ::setenv(k, v.c_str(), 1); }

class BootstrapPublic : public ::testing::Test {
protected:
    wtest::EnvGuard guard_;
    const std::string token_ = "wireup-public-" + std::to_string(getpid());
};

/** Descriptors open in this process. */
uint64_t open_fds() {
    uint64_t n = 0;
    for (int fd = 0; fd < 4096; ++fd) n += ::fcntl(fd, F_GETFD) != -1 ? 1 : 0;
    return n;
}

/** A handle value the calls must leave as it is when they fail. */
p2p_bootstrap_h untouched() { return reinterpret_cast<p2p_bootstrap_h>(0x5eed); }

} // namespace

TEST_F(BootstrapPublic, CreateUnsupportedOutsidePmixLaunch) {
    p2p_bootstrap_h bs = untouched();
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, p2p_bootstrap_create(P2P_BOOTSTRAP_PMIX, &bs));
    set("P2P_BOOTSTRAP", "pmix");
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, p2p_bootstrap_create(P2P_BOOTSTRAP_AUTO, &bs));
    EXPECT_EQ(untouched(), bs);
}

// An MPI launcher's ranks without PMIx or the torchrun variables: AUTO
// refuses rather than make each a rank 0 of 1 (the documented status, as
// the C caller sees it; test_bootstrap_env.cc covers every variable).
TEST_F(BootstrapPublic, AutoUnderAnMpiLauncherWithoutPmixIsUnsupported) {
    if (ucxp2p::pmix_bootstrap_launched()) GTEST_SKIP() << "run under a PMIx server";
    set("OMPI_COMM_WORLD_SIZE", "4");
    p2p_bootstrap_h bs = untouched();
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, p2p_bootstrap_create(P2P_BOOTSTRAP_AUTO, &bs));
    EXPECT_EQ(untouched(), bs);
    set("OMPI_COMM_WORLD_SIZE", "1");  // a launcher's single rank is fine
    ASSERT_EQ(P2P_OK, p2p_bootstrap_create(P2P_BOOTSTRAP_AUTO, &bs));
    p2p_bootstrap_info_t info{};
    EXPECT_EQ(P2P_OK, p2p_bootstrap_query(bs, &info));
    EXPECT_EQ(1u, info.size);
    EXPECT_EQ(P2P_OK, p2p_bootstrap_destroy(bs));
}

TEST_F(BootstrapPublic, CreateTimesOutWithoutRankZero) {
    set("RANK", "1");
    set("WORLD_SIZE", "2");
    set("MASTER_ADDR", "127.0.0.1");
    set("MASTER_PORT", std::to_string(wtest::free_port_block(1)));
    set("P2P_BOOTSTRAP_TIMEOUT_MS", "300");
    p2p_bootstrap_h bs = untouched();
    const uint64_t t0 = wtest::now_ms();
    EXPECT_EQ(P2P_ERR_TIMEOUT, p2p_bootstrap_create(P2P_BOOTSTRAP_TCP, &bs));
    EXPECT_LT(wtest::now_ms() - t0, 5000u);
    EXPECT_EQ(untouched(), bs);
}

TEST_F(BootstrapPublic, CreateFailsOnABusyRendezvousPort) {
    const uint16_t port = wtest::free_port_block(1);
    const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(holder, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(port);
    ASSERT_EQ(0, ::bind(holder, reinterpret_cast<sockaddr *>(&a), sizeof(a)));
    ASSERT_EQ(0, ::listen(holder, 1));
    set("RANK", "0");
    set("WORLD_SIZE", "2");
    set("P2P_MASTER_PORT", std::to_string(port));
    p2p_bootstrap_h bs = untouched();
    EXPECT_EQ(P2P_ERR_BOOTSTRAP, p2p_bootstrap_create(P2P_BOOTSTRAP_TCP, &bs));
    EXPECT_EQ(untouched(), bs);
    ::close(holder);
}

namespace {

/** What rank 0 calls after rank 1 is gone or late. */
enum class Call { kBarrier, kCommCreate };

/** A 2-rank job: both create the bootstrap and pass a barrier; then rank 1
 *  exits (`late` false) or stays, silent, until rank 0's call has returned
 *  (`late` true: a pipe, not a fixed sleep, since a context create slower
 *  than the sleep on a loaded machine would let rank 0 see a rank that had
 *  left), and rank 0 makes `call`. Rank 0's exit code is code(status) of
 *  that call; rank 1's is 0. */
std::vector<int> run_job(const std::string &token, Call call, bool late) {
    const uint16_t port = wtest::free_port_block(1);
    int done[2];
    if (::pipe(done) != 0) return {-1, -1};
    std::vector<int> pids;
    for (uint32_t r = 0; r < 2; ++r) {
        pids.push_back(wtest::spawn(
            wtest::job_env(r, 2, port, late ? "800" : "20000", token), [=] {
                p2p_bootstrap_h bs = nullptr;
                p2p_status_t st = p2p_bootstrap_create(P2P_BOOTSTRAP_TCP, &bs);
                if (st != P2P_OK) return 100 + code(st);
                if (p2p_bootstrap_barrier(bs) != P2P_OK) return 120;
                if (r == 1) {
                    ::close(done[1]);
                    if (late) {  // until rank 0 writes or exits (EOF)
                        char c;
                        while (::read(done[0], &c, 1) < 0 && errno == EINTR) {
                        }
                    }
                    ::_exit(0);  // without a word
                }
                ::close(done[0]);
                p2p_context_h ctx = nullptr;
                if (p2p_context_create(nullptr, &ctx) != P2P_OK) return 121;
                const uint64_t t0 = wtest::now_ms();
                if (call == Call::kBarrier) {
                    st = p2p_bootstrap_barrier(bs);
                } else {
                    p2p_comm_h comm = nullptr;
                    st = p2p_comm_create(ctx, bs, &comm);
                    CHILD_CHECK(comm == nullptr);
                }
                const uint64_t took = wtest::now_ms() - t0;
                if (late) CHILD_CHECK(::write(done[1], "x", 1) == 1);  // rank 1 reads
                if (took > 10000) return wtest::kTooSlow;
                // The failed call leaves everything destroyable.
                CHILD_CHECK(p2p_bootstrap_destroy(bs) == P2P_OK);
                CHILD_CHECK(p2p_context_destroy(ctx) == P2P_OK);
                return code(st);
            }));
    }
    ::close(done[0]);
    ::close(done[1]);
    return wtest::wait_all(pids, kWaitMs);
}

struct JobCase {
    const char *name;
    Call call;
    bool late;
    p2p_status_t want;
};

class BootstrapPublicJob : public BootstrapPublic,
                           public ::testing::WithParamInterface<JobCase> {};

} // namespace

TEST_P(BootstrapPublicJob, RankZeroGetsTheDocumentedStatus) {
    const JobCase &c = GetParam();
    const std::vector<int> codes = run_job(token_ + "-" + c.name, c.call, c.late);
    EXPECT_EQ(code(c.want), codes[0]) << p2p_status_string(c.want) << " expected";
    EXPECT_EQ(0, codes[1]);
}

INSTANTIATE_TEST_SUITE_P(
    Wireup, BootstrapPublicJob,
    ::testing::Values(
        JobCase{"BarrierFailsWhenARankLeaves", Call::kBarrier, false, P2P_ERR_BOOTSTRAP},
        JobCase{"CommCreateFailsWhenARankLeaves", Call::kCommCreate, false, P2P_ERR_BOOTSTRAP},
        JobCase{"BarrierTimesOutWhenARankIsLate", Call::kBarrier, true, P2P_ERR_TIMEOUT},
        JobCase{"CommCreateTimesOutWhenARankIsLate", Call::kCommCreate, true, P2P_ERR_TIMEOUT}),
    [](const ::testing::TestParamInfo<JobCase> &i) { return std::string(i.param.name); });

namespace {

/** A rank 1 that is not of rank 0's job: another job's token (`token`), or
 *  the same token and another world size. */
struct Stranger {
    const char *name;
    bool token;
};

class BootstrapPublicStranger : public BootstrapPublic,
                                public ::testing::WithParamInterface<Stranger> {};

} // namespace

// p2p.h: P2P_ERR_BOOTSTRAP for a bad token or a disagreement with rank 0.
// The stranger is turned away at its hello and fails at once, long before
// its own 20 s timeout; rank 0, whose rank 1 never came, times out (4 s:
// long enough that the stranger, started after it, reaches it on a loaded
// machine; had rank 0 left first, the stranger would time out instead).
TEST_P(BootstrapPublicStranger, IsRefusedAndRankZeroTimesOut) {
    const Stranger &c = GetParam();
    const uint16_t port = wtest::free_port_block(1);
    std::vector<int> pids;
    for (uint32_t r = 0; r < 2; ++r) {
        const bool stranger = r == 1;
        const uint32_t size = stranger && !c.token ? 3 : 2;
        const std::string token = token_ + "-" + c.name + (stranger && c.token ? "-other" : "");
        pids.push_back(wtest::spawn(
            wtest::job_env(r, size, port, stranger ? "20000" : "4000", token), [] {
                p2p_bootstrap_h bs = untouched();
                const uint64_t t0 = wtest::now_ms();
                const p2p_status_t st = p2p_bootstrap_create(P2P_BOOTSTRAP_TCP, &bs);
                const uint64_t took = wtest::now_ms() - t0;
                if (st == P2P_OK) {
                    CHILD_CHECK(p2p_bootstrap_destroy(bs) == P2P_OK);
                } else {
                    CHILD_CHECK(bs == untouched());
                }
                if (took > 10000) return wtest::kTooSlow;
                return code(st);
            }));
    }
    const std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    EXPECT_EQ(code(P2P_ERR_TIMEOUT), codes[0]) << "rank 0";
    EXPECT_EQ(code(P2P_ERR_BOOTSTRAP), codes[1]) << "the stranger";
}

INSTANTIATE_TEST_SUITE_P(Wireup, BootstrapPublicStranger,
                         ::testing::Values(Stranger{"AnotherJobsToken", true},
                                           Stranger{"AnotherWorldSize", false}),
                         [](const ::testing::TestParamInfo<Stranger> &i) {
                             return std::string(i.param.name);
                         });

// p2p_bootstrap_query answers from what creation fixed: a thread querying
// while another waits in a barrier for a late rank gets its answer at once
// (it used to wait for the barrier, up to the bootstrap timeout).
TEST_F(BootstrapPublic, QueryDoesNotWaitForABarrierInProgress) {
    const uint16_t port = wtest::free_port_block(1);
    std::vector<int> pids;
    for (uint32_t r = 0; r < 2; ++r) {
        pids.push_back(wtest::spawn(wtest::job_env(r, 2, port, "20000", token_ + "-query"), [=] {
            p2p_bootstrap_h bs = nullptr;
            if (p2p_bootstrap_create(P2P_BOOTSTRAP_TCP, &bs) != P2P_OK) return 100;
            if (r == 1) {  // late to the second barrier
                std::this_thread::sleep_for(std::chrono::milliseconds(2000));
                return p2p_bootstrap_barrier(bs) == P2P_OK ? 0 : 101;
            }
            p2p_status_t bst = P2P_IN_PROGRESS;
            std::thread waiter([&] { bst = p2p_bootstrap_barrier(bs); });
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            const uint64_t t0 = wtest::now_ms();
            p2p_bootstrap_info_t info{};
            const p2p_status_t qst = p2p_bootstrap_query(bs, &info);
            const uint64_t took = wtest::now_ms() - t0;
            waiter.join();
            CHILD_CHECK(qst == P2P_OK && info.rank == 0 && info.size == 2);
            CHILD_CHECK(std::string(info.name) == "tcp");
            if (took > 1000) return wtest::kTooSlow;  // vs the 1.8 s the barrier waits
            CHILD_CHECK(bst == P2P_OK);
            return p2p_bootstrap_destroy(bs) == P2P_OK ? 0 : 102;
        }));
    }
    const std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    EXPECT_EQ(0, codes[0]);
    EXPECT_EQ(0, codes[1]);
}

// A one-rank TCP job (rank 0 listens on MASTER_PORT) with each allocation
// of p2p_bootstrap_create failing in turn: NO_MEMORY each time, and no
// descriptor kept -- a listening socket left open would make the next try
// fail to bind the same port.
TEST_F(BootstrapPublic, EachAllocationOfTcpCreateFailsCleanly) {
    set("RANK", "0");
    set("WORLD_SIZE", "1");
    set("MASTER_ADDR", "127.0.0.1");
    set("P2P_MASTER_PORT", std::to_string(wtest::free_port_block(1)));
    set("P2P_JOB_TOKEN", token_ + "-oom");
    const uint64_t fds = open_fds();
    p2p_bootstrap_h bs = untouched();
    p2p_status_t st = P2P_ERR_NO_MEMORY;
    const unsigned k = p2ptest::fail_each_allocation(
        [&] { return p2p_bootstrap_create(P2P_BOOTSTRAP_TCP, &bs); },
        [&](p2p_status_t last) {
            st = last;
            if (st == P2P_OK) return;
            EXPECT_EQ(untouched(), bs);
            EXPECT_EQ(fds, open_fds()) << "an allocation failed";
        });
    ASSERT_EQ(P2P_OK, st) << "after " << k << " failed tries";
    EXPECT_GT(k, 0u) << "nothing was failed";
    // The barrier too (an allgather): NO_MEMORY, and the bootstrap still works.
    const unsigned kb = p2ptest::fail_each_allocation(
        [&] { return p2p_bootstrap_barrier(bs); }, [](p2p_status_t) {});
    EXPECT_GT(kb, 0u) << "the barrier allocated nothing";
    EXPECT_EQ(P2P_OK, p2p_bootstrap_barrier(bs));
    EXPECT_EQ(P2P_OK, p2p_bootstrap_destroy(bs));
    EXPECT_EQ(fds, open_fds());
}

// A communicator whose address exchange would carry more than this rank's
// P2P_BOOTSTRAP_MAX_MSG: p2p_comm_create refuses its own contribution with
// P2P_ERR_INVALID_PARAM (a setting too small for it; another rank's too
// large frame is P2P_ERR_BOOTSTRAP) and makes no communicator.
TEST_F(BootstrapPublic, CommCreateWithAnAddressAboveMaxMsgIsInvalidParam) {
    set("RANK", "0");
    set("WORLD_SIZE", "1");
    set("MASTER_ADDR", "127.0.0.1");
    set("P2P_MASTER_PORT", std::to_string(wtest::free_port_block(1)));
    set("P2P_JOB_TOKEN", token_ + "-maxmsg");
    set("P2P_BOOTSTRAP_MAX_MSG", "16");  // a worker address is far longer
    p2p_bootstrap_h bs = nullptr;
    ASSERT_EQ(P2P_OK, p2p_bootstrap_create(P2P_BOOTSTRAP_TCP, &bs));
    p2p_context_h ctx = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    p2p_comm_h comm = reinterpret_cast<p2p_comm_h>(0x5eed);
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_comm_create(ctx, bs, &comm));
    EXPECT_EQ(reinterpret_cast<p2p_comm_h>(0x5eed), comm);
    EXPECT_EQ(P2P_OK, p2p_bootstrap_destroy(bs));
    // The single bootstrap keeps the same bound (it ignored it), and
    // refuses a malformed one at create as the others do.
    ASSERT_EQ(P2P_OK, p2p_bootstrap_create(P2P_BOOTSTRAP_SINGLE, &bs));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_comm_create(ctx, bs, &comm));
    EXPECT_EQ(reinterpret_cast<p2p_comm_h>(0x5eed), comm);
    EXPECT_EQ(P2P_OK, p2p_bootstrap_destroy(bs));
    set("P2P_BOOTSTRAP_MAX_MSG", "0");
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_bootstrap_create(P2P_BOOTSTRAP_SINGLE, &bs));
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
}
