/*
 * Multi-process tests of what keeps TCP jobs apart and what they are told
 * when they do not fit: ranks scanning a port range need a job token, two
 * jobs scanning one range (or sharing one fixed port) on one host never
 * mix, MASTER_PORT is left to
 * torchrun's store, a rank that disagrees
 * with rank 0 learns why, and rank 0 copes with a low open file limit.
 */
#include "wireup/bootstrap.h"
#include "wireup/tcp_socket.h"
#include "wireup_test_util.h"
#include "../open_fds.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include <string>

using namespace ucxp2p;
using wtest::code;
using wtest::job_env;

namespace {

constexpr uint64_t kWaitMs = 20000;  // harness bound per test

void set(const char *k, const std::string &v) { ::setenv(k, v.c_str(), 1); }

class BootstrapJobs : public ::testing::Test {
protected:
    wtest::EnvGuard guard_;
};

/** Wait for the ranks (pids in rank order); each must have succeeded. */
void expect_all_ok(const std::vector<int> &pids, const char *what) {
    std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    for (size_t i = 0; i < codes.size(); ++i) {
        EXPECT_EQ(0, codes[i]) << what << ": process " << i;
    }
}

/** Create, allgather "job:rank", check every blob names our job. */
int tagged_job(const std::string &job) {
    std::unique_ptr<Bootstrap> b;
    p2p_status_t st = bootstrap_create(P2P_BOOTSTRAP_TCP, &b);
    if (st != P2P_OK) {
        return code(st);
    }
    std::string mine = job + ":" + std::to_string(b->rank());
    std::vector<std::vector<uint8_t>> all;
    if ((st = b->allgather(std::vector<uint8_t>(mine.begin(), mine.end()),
                           &all)) != P2P_OK) {
        return code(st);
    }
    for (uint32_t r = 0; r < b->size(); ++r) {
        std::string want = job + ":" + std::to_string(r);
        CHILD_CHECK(std::string(all[r].begin(), all[r].end()) == want);
    }
    return code(b->barrier());
}

TEST_F(BootstrapJobs, ScanningWithoutTokenIsRefused) {
    set("P2P_PORT_RANGE", "56800-56810");
    set("P2P_BOOTSTRAP_TIMEOUT_MS", "3000");
    for (const char *rank : {"0", "1"}) {
        set("RANK", rank);
        set("WORLD_SIZE", "2");
        std::unique_ptr<Bootstrap> b;
        wtest::StderrCapture cap;
        uint64_t t0 = wtest::now_ms();
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, bootstrap_create(P2P_BOOTSTRAP_TCP, &b))
            << "rank " << rank;
        EXPECT_LT(wtest::now_ms() - t0, 1500u) << "not refused upfront";  // vs the 3 s timeout
        std::string log = cap.text();
        EXPECT_NE(std::string::npos, log.find("P2P_JOB_TOKEN")) << log;
        EXPECT_NE(std::string::npos, log.find("TORCHELASTIC_RUN_ID")) << log;
        EXPECT_NE(std::string::npos, log.find("MASTER_PORT")) << log;
    }
    // One rank needs no port, hence no token.
    set("RANK", "0");
    set("WORLD_SIZE", "1");
    std::unique_ptr<Bootstrap> b;
    EXPECT_EQ(P2P_OK, bootstrap_create(P2P_BOOTSTRAP_TCP, &b));
}

TEST_F(BootstrapJobs, ConcurrentScansOnOneRangeDoNotMix) {
    // Four 3-rank jobs, same host, same range, same world size, each named
    // its own way (required: see above; a token derived from the address
    // and the size let each rank 0 admit the other jobs' ranks): a, its
    // P2P_JOB_TOKEN; b, its TORCHELASTIC_RUN_ID; c and d, torchrun's
    // default run id "none" and each its MASTER_PORT.
    const uint32_t n = 3;
    uint16_t base = wtest::free_port_block(6);
    ASSERT_NE(0, base);
    std::string range = std::to_string(base) + "-" + std::to_string(base + 3);
    const std::string pid = std::to_string(getpid());
    const std::string jobs[] = {"job-a-" + pid, "job-b-" + pid, "job-c-" + pid, "job-d-" + pid};
    std::vector<int> pids;
    for (uint32_t r = 0; r < n; ++r) {
        for (int j = 0; j < 4; ++j) {
            const std::string job = jobs[j];
            wtest::Env e = job_env(r, n, 0, "15000", "");
            e.push_back({"P2P_PORT_RANGE", range});
            if (j == 0) {
                e.push_back({"P2P_JOB_TOKEN", job});
            } else if (j == 1) {
                e.push_back({"TORCHELASTIC_RUN_ID", job});
            } else {
                e.push_back({"TORCHELASTIC_RUN_ID", "none"});
                e.push_back({"MASTER_PORT", std::to_string(base + 2 + j)});
            }
            pids.push_back(wtest::spawn(e, [job] { return tagged_job(job); }));
        }
    }
    expect_all_ok(pids, "jobs a to d, interleaved by rank");
}

// Under torchrun the agent's store listens on MASTER_PORT (and PyTorch's
// init_process_group binds it in rank 0): the rendezvous must leave it
// alone, finding rank 0 in P2P_PORT_RANGE with the job named by that port.
TEST_F(BootstrapJobs, MasterPortHeldByTorchrunsStoreIsLeftAlone) {
    const uint32_t n = 3;
    uint16_t base = wtest::free_port_block(3);
    ASSERT_NE(0, base);
    tcp::Fd store;
    ASSERT_EQ(0, wtest::listen_any(base, &store));
    std::string range = std::to_string(base + 1) + "-" + std::to_string(base + 2);
    std::vector<int> pids;
    for (uint32_t r = 0; r < n; ++r) {
        wtest::Env e = job_env(r, n, 0, "15000", "");
        e.push_back({"P2P_PORT_RANGE", range});
        e.push_back({"MASTER_PORT", std::to_string(base)});
        e.push_back({"TORCHELASTIC_RUN_ID", "none"});
        e.push_back({"TORCHELASTIC_RESTART_COUNT", "0"});
        pids.push_back(wtest::spawn(e, [] { return tagged_job("torchrun"); }));
    }
    expect_all_ok(pids, "a job beside its launcher's store");
    pollfd p{store.get(), POLLIN, 0};
    EXPECT_EQ(0, ::poll(&p, 1, 0)) << "a rank connected to the store's port";
}

// A fixed P2P_MASTER_PORT is held by rank 0 only while its job wires up:
// a second job on the same port whose rank 0 could not bind it must not
// send its other ranks into the first job. What names each job (here its
// MASTER_PORT) goes into the token beside the port.
TEST_F(BootstrapJobs, FixedPortJobsNamedApartDoNotMix) {
    uint16_t port = wtest::free_port_block(3);
    ASSERT_NE(0, port);
    auto named = [&](uint32_t r, int job, const char *timeout_ms) {
        wtest::Env e = job_env(r, 2, port, timeout_ms, "");
        e.push_back({"MASTER_PORT", std::to_string(port + 1 + job)});
        return e;
    };
    p2ptest::TempDir logs;
    std::vector<int> a0{wtest::spawn(named(0, 0, "15000"), [] { return tagged_job("a"); })};
    // Job b's rank 1 (its rank 0 found the port taken): rejected by a's rank 0.
    std::vector<int> b1{wtest::spawn(named(1, 1, "3000"), [] { return tagged_job("b"); },
                                     logs.file("b1"))};
    std::vector<int> codes = wtest::wait_all(b1, kWaitMs);
    EXPECT_NE(0, codes[0]) << "job b's rank joined job a";
    EXPECT_NE(std::string::npos, logs.read("b1").find("job token mismatch")) << logs.read("b1");
    a0.push_back(wtest::spawn(named(1, 0, "15000"), [] { return tagged_job("a"); }));
    expect_all_ok(a0, "job a after job b's rank was turned away");
}

TEST_F(BootstrapJobs, WorldSizeMismatchIsNamed) {
    // No token: the derived one must not hide the real disagreement.
    uint16_t port = wtest::free_port_block(1);
    p2ptest::TempDir logs;
    std::vector<int> pids;
    // Rank 0 listens 4 s: time enough for rank 1 to reach it on a loaded
    // machine (it must, to be refused).
    pids.push_back(wtest::spawn(job_env(0, 2, port, "4000", ""),
                                [] { return tagged_job("x"); }, logs.file("0")));
    pids.push_back(wtest::spawn(job_env(1, 3, port, "6000", ""),
                                [] { return tagged_job("x"); }, logs.file("1")));
    std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    EXPECT_EQ(code(P2P_ERR_TIMEOUT), codes[0]);
    EXPECT_EQ(code(P2P_ERR_BOOTSTRAP), codes[1]);
    const std::string why = "world size 3, rank 0 has 2";
    EXPECT_NE(std::string::npos, logs.read("0").find(why)) << logs.read("0");
    EXPECT_NE(std::string::npos, logs.read("1").find(why)) << logs.read("1");
    EXPECT_EQ(std::string::npos, logs.read("1").find("token")) << logs.read("1");
}

// Scanning a range, the refusal is kept for the final error: the connect
// errors of the other ports in the range used to bury it ("connection
// refused" was all rank 1 said).
TEST_F(BootstrapJobs, WorldSizeMismatchIsNamedWhenScanning) {
    uint16_t base = wtest::free_port_block(3);
    ASSERT_NE(0, base);
    const std::string range = std::to_string(base) + "-" + std::to_string(base + 2);
    p2ptest::TempDir logs;
    std::vector<int> pids;
    for (uint32_t r = 0; r < 2; ++r) {
        // Rank 0 listens 4 s (rank 1 must reach it on a loaded machine);
        // rank 1 scans for 5 s.
        wtest::Env e = job_env(r, r == 0 ? 2 : 3, 0, r == 0 ? "4000" : "5000", "");
        e.push_back({"P2P_PORT_RANGE", range});
        e.push_back({"P2P_JOB_TOKEN", "scan-mismatch-" + std::to_string(getpid())});
        pids.push_back(wtest::spawn(e, [] { return tagged_job("x"); },
                                    logs.file(std::to_string(r))));
    }
    std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    EXPECT_EQ(code(P2P_ERR_TIMEOUT), codes[0]);
    EXPECT_EQ(code(P2P_ERR_TIMEOUT), codes[1]);
    const std::string why = "world size 3, rank 0 has 2";
    EXPECT_NE(std::string::npos, logs.read("0").find(why)) << logs.read("0");
    const std::string err1 = logs.read("1");
    EXPECT_NE(std::string::npos, err1.find("waited 5000 ms")) << err1;
    EXPECT_NE(std::string::npos, err1.find(why)) << err1;
}

TEST_F(BootstrapJobs, MasterAddrSpellingDoesNotMatter) {
    uint16_t port = wtest::free_port_block(1);
    std::vector<int> pids;
    for (uint32_t r = 0; r < 3; ++r) {
        wtest::Env e = job_env(r, 3, port, "10000", "");
        e[2].second = r == 1 ? "localhost" : "127.0.0.1";  // MASTER_ADDR
        pids.push_back(wtest::spawn(e, [] { return tagged_job("y"); }));
    }
    expect_all_ok(pids, "rank 1 says localhost");
}

/** Rank 0 of an n-rank job whose open file limit leaves about `room` free
 *  descriptors (new ones take the lowest free numbers, which must be below
 *  the limit); hard_too: the hard limit is lowered as well. */
int rank0_with_few_fds(int room, bool hard_too, uint32_t n) {
    const int open = p2ptest::open_fds();
    rlimit rl;
    CHILD_CHECK(open >= 3 && ::getrlimit(RLIMIT_NOFILE, &rl) == 0);
    rl.rlim_cur = static_cast<rlim_t>(open + room);
    if (hard_too) {
        rl.rlim_max = rl.rlim_cur;
    } else {  // room to raise it to
        CHILD_CHECK(rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= rl.rlim_cur + n);
    }
    CHILD_CHECK(::setrlimit(RLIMIT_NOFILE, &rl) == 0);
    return tagged_job("fd");
}

TEST_F(BootstrapJobs, RankZeroRaisesItsSoftFdLimit) {
    const uint32_t n = 16;
    uint16_t port = wtest::free_port_block(1);
    std::vector<int> pids;
    pids.push_back(wtest::spawn(job_env(0, n, port, "15000", ""),
                                [] { return rank0_with_few_fds(4, false, n); }));
    for (uint32_t r = 1; r < n; ++r) {
        pids.push_back(wtest::spawn(job_env(r, n, port, "15000", ""),
                                    [] { return tagged_job("fd"); }));
    }
    expect_all_ok(pids, "rank 0 with a low soft limit");
}

TEST_F(BootstrapJobs, RankZeroOutOfFdsFailsAtOnceAndSaysWhy) {
    // Used to spin on the readable listener at 100% CPU, logging each
    // failed accept, until the deadline blamed the ranks.
    const uint32_t n = 12;
    uint16_t port = wtest::free_port_block(1);
    p2ptest::TempDir logs;
    std::vector<int> pids;
    uint64_t t0 = wtest::now_ms();
    pids.push_back(wtest::spawn(job_env(0, n, port, "15000", ""), [] {
        uint64_t t = wtest::now_ms();
        int rc = rank0_with_few_fds(4, true, n);
        return wtest::now_ms() - t < 5000 ? rc : wtest::kTooSlow;
    }, logs.file("0")));
    for (uint32_t r = 1; r < n; ++r) {
        pids.push_back(wtest::spawn(job_env(r, n, port, "3000", ""),
                                    [] { return tagged_job("fd"); }));
    }
    std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    EXPECT_EQ(code(P2P_ERR_BOOTSTRAP), codes[0]);
    for (uint32_t r = 1; r < n; ++r) {
        EXPECT_TRUE(codes[r] == code(P2P_ERR_BOOTSTRAP) ||
                    codes[r] == code(P2P_ERR_TIMEOUT))
            << "rank " << r << ": " << codes[r];
    }
    EXPECT_LT(wtest::now_ms() - t0, 10000u);
    std::string log = logs.read("0");
    EXPECT_NE(std::string::npos, log.find("RLIMIT_NOFILE")) << log;
    EXPECT_NE(std::string::npos, log.find("out of file descriptors")) << log;
    EXPECT_LT(std::count(log.begin(), log.end(), '\n'), 10) << log;
}

} // namespace
