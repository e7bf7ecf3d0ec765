/*
 * Multi-process tests of what keeps TCP jobs apart and what they are told
 * when they do not fit: a rank that disagrees with rank 0 learns why.
 */
#include "wireup/bootstrap.h"
#include "wireup_test_util.h"

#include <gtest/gtest.h>

#include <string>

using namespace ucxp2p;
using wtest::code;
using wtest::job_env;

namespace {

constexpr uint64_t kWaitMs = 20000;  // harness bound per test

class BootstrapJobs : public ::testing::Test {
protected:
    wtest::EnvGuard guard_;
};

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

TEST_F(BootstrapJobs, WorldSizeMismatchIsNamed) {
    // No token: the derived one must not hide the real disagreement.
    uint16_t port = wtest::free_port_block(1);
    wtest::TempPath log0, log1;
    std::vector<int> pids;
    pids.push_back(wtest::spawn(job_env(0, 2, port, "1500", ""),
                                [] { return tagged_job("x"); }, log0.path()));
    pids.push_back(wtest::spawn(job_env(1, 3, port, "5000", ""),
                                [] { return tagged_job("x"); }, log1.path()));
    std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    EXPECT_EQ(code(P2P_ERR_TIMEOUT), codes[0]);
    EXPECT_EQ(code(P2P_ERR_BOOTSTRAP), codes[1]);
    const std::string why = "world size 3, rank 0 has 2";
    EXPECT_NE(std::string::npos, log0.read().find(why)) << log0.read();
    EXPECT_NE(std::string::npos, log1.read().find(why)) << log1.read();
    EXPECT_EQ(std::string::npos, log1.read().find("token")) << log1.read();
}

TEST_F(BootstrapJobs, MasterAddrSpellingDoesNotMatter) {
    uint16_t port = wtest::free_port_block(1);
    std::vector<int> pids;
    for (uint32_t r = 0; r < 3; ++r) {
        wtest::Env e = job_env(r, 3, port, "10000", "");
        e[2].second = r == 1 ? "localhost" : "127.0.0.1";  // MASTER_ADDR
        pids.push_back(wtest::spawn(e, [] { return tagged_job("y"); }));
    }
    std::vector<int> codes = wtest::wait_all(pids, kWaitMs);
    for (uint32_t r = 0; r < 3; ++r) {
        EXPECT_EQ(0, codes[r]) << "rank " << r;
    }
}

} // namespace
