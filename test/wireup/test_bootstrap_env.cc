/*
 * In-process tests: bootstrap selection, the single bootstrap, malformed
 * environment values, a one-rank TCP job, and the wire format.
 */
#include "ucxp2p_config.h"
#include "core/log.h"
#include "wireup/bootstrap.h"
#include "wireup/pmix_bootstrap.h"
#include "wireup/tcp_proto.h"
#include "wireup_test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

using namespace ucxp2p;

namespace {

void set(const char *k, const std::string &v) { ::setenv(k, v.c_str(), 1); }

class BootstrapEnv : public ::testing::Test {
protected:
    wtest::EnvGuard guard_;
};

TEST_F(BootstrapEnv, AutoWithoutVariablesIsSingle) {
    EXPECT_FALSE(tcp_bootstrap_env_present());
    std::unique_ptr<Bootstrap> b;
    const p2p_log_level_t level = log_level();
    log_set_level(P2P_LOG_INFO);
    wtest::StderrCapture cap;
    p2p_status_t st = bootstrap_create(P2P_BOOTSTRAP_AUTO, &b);
    const std::string log = cap.text();
    log_set_level(level);
    ASSERT_EQ(P2P_OK, st);
    ASSERT_NE(nullptr, b);
    // At info, which bootstrap was chosen (README, "Launching").
    EXPECT_NE(std::string::npos, log.find("bootstrap: single, rank 0 of 1")) << log;
    EXPECT_STREQ("single", b->name());
    EXPECT_EQ(0u, b->rank());
    EXPECT_EQ(1u, b->size());
    EXPECT_EQ(0u, b->local_rank());
    EXPECT_EQ(1u, b->local_size());
    std::vector<std::vector<uint8_t>> all;
    std::vector<uint8_t> mine = {1, 2, 3};
    ASSERT_EQ(P2P_OK, b->allgather(mine, &all));
    ASSERT_EQ(1u, all.size());
    EXPECT_EQ(mine, all[0]);
    EXPECT_EQ(P2P_OK, b->barrier());
    b->abort("nothing to tell");
    EXPECT_EQ(P2P_OK, b->barrier());
}

// A launcher without PMIx (MPICH's Hydra, mpirun with a build lacking
// PMIx, srun without --mpi=pmix) starts several ranks: each must not become
// a silent rank 0 of 1 (every transfer to the others would fail later).
TEST_F(BootstrapEnv, AutoUnderAnMpiLauncherWithoutPmixIsAnError) {
    if (pmix_bootstrap_launched()) GTEST_SKIP() << "run under a PMIx server";
    for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
        SCOPED_TRACE(var);
        set(var, "4");
        std::unique_ptr<Bootstrap> b;
        EXPECT_EQ(P2P_ERR_UNSUPPORTED, bootstrap_create(P2P_BOOTSTRAP_AUTO, &b));
        EXPECT_EQ(nullptr, b);
        // Asked for by name, a single process is still what it says.
        set("P2P_BOOTSTRAP", "single");
        ASSERT_EQ(P2P_OK, bootstrap_create(P2P_BOOTSTRAP_AUTO, &b));
        EXPECT_STREQ("single", b->name());
        ::unsetenv("P2P_BOOTSTRAP");
        b.reset();
        set(var, "1");  // one rank launched: single is right
        ASSERT_EQ(P2P_OK, bootstrap_create(P2P_BOOTSTRAP_AUTO, &b));
        EXPECT_STREQ("single", b->name());
        ::unsetenv(var);
    }
}

TEST_F(BootstrapEnv, HalfSetEnvironmentIsAnError) {
    // Used to run as a single process, silently.
    const char *const cases[][3] = {{"RANK", "0", "WORLD_SIZE (or P2P_WORLD_SIZE) is not"},
                                    {"P2P_RANK", "1", "WORLD_SIZE (or P2P_WORLD_SIZE) is not"},
                                    {"WORLD_SIZE", "2", "RANK (or P2P_RANK) is not"},
                                    {"P2P_WORLD_SIZE", "4", "RANK (or P2P_RANK) is not"}};
    for (const auto &c : cases) {
        wtest::EnvGuard inner;
        set(c[0], c[1]);
        EXPECT_FALSE(tcp_bootstrap_env_present());
        std::unique_ptr<Bootstrap> b;
        wtest::StderrCapture cap;
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, bootstrap_create(P2P_BOOTSTRAP_AUTO, &b))
            << c[0];
        EXPECT_EQ(nullptr, b);
        std::string log = cap.text();
        EXPECT_NE(std::string::npos, log.find(c[2])) << c[0] << ": " << log;
        // Asked for explicitly, TCP names the missing variable too.
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, bootstrap_create(P2P_BOOTSTRAP_TCP, &b));
        // ... and an explicit single bootstrap ignores them.
        set("P2P_BOOTSTRAP", "single");
        EXPECT_EQ(P2P_OK, bootstrap_create(P2P_BOOTSTRAP_AUTO, &b));
    }
}

TEST_F(BootstrapEnv, ZeroTimeoutIsInvalidForEveryBootstrap) {
    set("P2P_BOOTSTRAP_TIMEOUT_MS", "0");
    uint64_t ms = 7;
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, bootstrap_timeout_ms(&ms));
    set("RANK", "0");
    set("WORLD_SIZE", "1");
    std::unique_ptr<Bootstrap> b;
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, bootstrap_create(P2P_BOOTSTRAP_TCP, &b));
#ifdef HAVE_PMIX
    // Rejected before PMIx_Init: PMIx used to round 0 up to 1 s.
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, bootstrap_create(P2P_BOOTSTRAP_PMIX, &b));
#endif
    set("P2P_BOOTSTRAP_TIMEOUT_MS", "1");
    EXPECT_EQ(P2P_OK, bootstrap_timeout_ms(&ms));
    EXPECT_EQ(1u, ms);
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, bootstrap_create(P2P_BOOTSTRAP_PMIX, &b));
}

TEST_F(BootstrapEnv, AutoWithVariablesIsTcp) {
    uint16_t port = wtest::free_port_block(1);
    ASSERT_NE(0, port);
    set("RANK", "0");
    set("WORLD_SIZE", "1");
    set("MASTER_PORT", std::to_string(port));
    set("P2P_BOOTSTRAP_TIMEOUT_MS", "5000");
    EXPECT_TRUE(tcp_bootstrap_env_present());
    std::unique_ptr<Bootstrap> b;
    ASSERT_EQ(P2P_OK, bootstrap_create(P2P_BOOTSTRAP_AUTO, &b));
    EXPECT_STREQ("tcp", b->name());
    EXPECT_EQ(0u, b->rank());
    EXPECT_EQ(1u, b->size());
    EXPECT_EQ(0u, b->local_rank());
    EXPECT_EQ(1u, b->local_size());
    std::vector<std::vector<uint8_t>> all;
    ASSERT_EQ(P2P_OK, b->allgather({9, 8}, &all));
    ASSERT_EQ(1u, all.size());
    EXPECT_EQ((std::vector<uint8_t>{9, 8}), all[0]);
    EXPECT_EQ(P2P_OK, b->barrier());
}

TEST_F(BootstrapEnv, P2PVariablesWinOverTorchrunOnes) {
    uint16_t port = wtest::free_port_block(1);
    set("RANK", "junk");
    set("WORLD_SIZE", "junk");
    set("MASTER_PORT", "junk");
    set("P2P_RANK", "0");
    set("P2P_WORLD_SIZE", "1");
    set("P2P_MASTER_PORT", std::to_string(port));
    set("LOCAL_RANK", "junk");
    set("P2P_LOCAL_RANK", "0");
    std::unique_ptr<Bootstrap> b;
    ASSERT_EQ(P2P_OK, bootstrap_create(P2P_BOOTSTRAP_TCP, &b));
    EXPECT_EQ(1u, b->size());
    // ... and a malformed P2P_ value is not rescued by a good fallback.
    set("RANK", "0");
    set("P2P_RANK", "zero");
    b.reset();
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, bootstrap_create(P2P_BOOTSTRAP_TCP, &b));
}

TEST_F(BootstrapEnv, SelectionErrors) {
    std::unique_ptr<Bootstrap> b;
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, bootstrap_create(P2P_BOOTSTRAP_AUTO, nullptr));
    // What a C caller passing 42 hands over (no out-of-range enum cast).
    for (int bad : {42, -1, 4}) {
        p2p_bootstrap_type_t t;
        std::memcpy(&t, &bad, sizeof(t));
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, bootstrap_create(t, &b)) << bad;
    }
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, bootstrap_create(P2P_BOOTSTRAP_PMIX, &b));
    set("P2P_BOOTSTRAP", "bogus");
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, bootstrap_create(P2P_BOOTSTRAP_AUTO, &b));
    EXPECT_EQ(nullptr, b);
    set("P2P_BOOTSTRAP", "pmix");
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, bootstrap_create(P2P_BOOTSTRAP_AUTO, &b));
    // An explicit type ignores P2P_BOOTSTRAP; P2P_BOOTSTRAP=single wins
    // over the TCP variables.
    set("P2P_BOOTSTRAP", "bogus");
    EXPECT_EQ(P2P_OK, bootstrap_create(P2P_BOOTSTRAP_SINGLE, &b));
    set("P2P_BOOTSTRAP", "SINGLE");
    set("RANK", "3");
    set("WORLD_SIZE", "8");
    b.reset();
    ASSERT_EQ(P2P_OK, bootstrap_create(P2P_BOOTSTRAP_AUTO, &b));
    EXPECT_STREQ("single", b->name());
}

#ifdef HAVE_PMIX
TEST_F(BootstrapEnv, FullTorchrunEnvironmentWinsOverPmix) {
    // A torchrun worker in an srun/mpirun task: the task's PMIx variables
    // and the worker's own. Each worker used to join PMIx as the task.
    set("PMIX_RANK", "0");
    set("PMIX_NAMESPACE", "wireup-test-not-a-job");
    ASSERT_TRUE(pmix_bootstrap_launched());
    set("RANK", "0");
    set("WORLD_SIZE", "1");
    set("MASTER_ADDR", "127.0.0.1");
    const p2p_log_level_t level = log_level();
    log_set_level(P2P_LOG_INFO);
    std::unique_ptr<Bootstrap> b;
    wtest::StderrCapture cap;
    p2p_status_t st = bootstrap_create(P2P_BOOTSTRAP_AUTO, &b);
    std::string log = cap.text();
    log_set_level(level);
    ASSERT_EQ(P2P_OK, st);
    EXPECT_STREQ("tcp", b->name());
    EXPECT_NE(std::string::npos, log.find("using tcp/env, the innermost")) << log;
    // Without MASTER_ADDR it is not a torchrun environment: PMIx, and a
    // warning (this PMIx is fake: its init fails).
    ::unsetenv("MASTER_ADDR");
    b.reset();
    wtest::StderrCapture cap2;
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, bootstrap_create(P2P_BOOTSTRAP_AUTO, &b));
    log = cap2.text();
    EXPECT_NE(std::string::npos, log.find("MASTER_ADDR is not: using PMIx")) << log;
}
#endif

struct BadEnv {
    const char *var;
    const char *value;
};

TEST_F(BootstrapEnv, MalformedValuesAreInvalidParam) {
    const BadEnv cases[] = {
        {"RANK", "abc"},        {"RANK", "2"},          {"RANK", "-1"},
        {"RANK", "1x"},         {"WORLD_SIZE", "0"},    {"WORLD_SIZE", "-2"},
        {"WORLD_SIZE", "two"},  {"MASTER_PORT", "70000"}, {"MASTER_PORT", "0"},
        {"MASTER_PORT", "http"}, {"P2P_MASTER_PORT", "1.5"},
        {"P2P_PORT_RANGE", "x"}, {"P2P_PORT_RANGE", "9000-8000"},
        {"P2P_PORT_RANGE", "0-10"}, {"P2P_PORT_RANGE", "10-70000"},
        {"P2P_PORT_RANGE", "100"}, {"P2P_BOOTSTRAP_TIMEOUT_MS", "soon"},
        {"P2P_BOOTSTRAP_TIMEOUT_MS", " 5"},
        {"P2P_BOOTSTRAP_TIMEOUT_MS", "0"}, {"P2P_BOOTSTRAP_MAX_MSG", "-5"},
        {"P2P_BOOTSTRAP_MAX_MSG", "0"}, {"P2P_BOOTSTRAP_MAX_MSG", "2147483649"},
        {"LOCAL_WORLD_SIZE", "0"}, {"LOCAL_WORLD_SIZE", "3"},
        {"LOCAL_RANK", "2"},    {"P2P_IF_IP", "999.1.1.1"},
        {"P2P_IFNAME", "nosuchif0"}, {"MASTER_ADDR", "::1"},
        {"P2P_MASTER_ADDR", "fe80::1"}, {"MASTER_ADDR", "[::1]"},
        {"MASTER_ADDR", "fe80::1%eth0"}, {"MASTER_ADDR", "127.0.0.1:29500"},
        {"MASTER_ADDR", "127.0.0.1 "}, {"MASTER_ADDR", "[10.0.0.1]"}};
    uint16_t port = wtest::free_port_block(1);
    for (const BadEnv &c : cases) {
        wtest::EnvGuard inner;
        set("RANK", "1");
        set("WORLD_SIZE", "2");
        set("LOCAL_WORLD_SIZE", "2");
        set("MASTER_PORT", std::to_string(port));
        // A value accepted by mistake would wait this long; the bound below
        // leaves a loaded machine seconds of slack.
        set("P2P_BOOTSTRAP_TIMEOUT_MS", "5000");
        if (std::string(c.var) == "P2P_IFNAME") {
            set("RANK", "0");  // only rank 0 listens
        }
        set(c.var, c.value);
        std::unique_ptr<Bootstrap> b;
        uint64_t t0 = wtest::now_ms();
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, bootstrap_create(P2P_BOOTSTRAP_AUTO, &b))
            << c.var << "=" << c.value;
        EXPECT_EQ(nullptr, b) << c.var;
        EXPECT_LT(wtest::now_ms() - t0, 2500u) << c.var << ": not rejected upfront";
    }
}

// An interface address this host does not have: said so, not blamed on
// the port range.
TEST_F(BootstrapEnv, ListenOnAForeignAddressSaysWhy) {
    set("RANK", "0");
    set("WORLD_SIZE", "2");
    set("P2P_MASTER_PORT", std::to_string(wtest::free_port_block(1)));
    set("P2P_IF_IP", "192.0.2.77");  // TEST-NET-1: never configured here
    std::unique_ptr<Bootstrap> b;
    wtest::StderrCapture cap;
    EXPECT_EQ(P2P_ERR_BOOTSTRAP, bootstrap_create(P2P_BOOTSTRAP_AUTO, &b));
    const std::string log = cap.text();
    EXPECT_NE(std::string::npos, log.find("not an address of this host")) << log;
}

TEST_F(BootstrapEnv, AbsentRankZeroTimesOut) {
    uint16_t port = wtest::free_port_block(1);
    set("RANK", "1");
    set("WORLD_SIZE", "2");
    set("MASTER_ADDR", "127.0.0.1");
    set("MASTER_PORT", std::to_string(port));
    set("P2P_BOOTSTRAP_TIMEOUT_MS", "600");
    std::unique_ptr<Bootstrap> b;
    uint64_t t0 = wtest::now_ms();
    EXPECT_EQ(P2P_ERR_TIMEOUT, bootstrap_create(P2P_BOOTSTRAP_TCP, &b));
    uint64_t dt = wtest::now_ms() - t0;
    EXPECT_GE(dt, 550u);
    EXPECT_LT(dt, 3000u);
}

TEST_F(BootstrapEnv, RankZeroCannotBindBusyPort) {
    // A fixed P2P_MASTER_PORT that is taken: fail at once, do not wait.
    uint16_t port = wtest::free_port_block(1);
    tcp::Fd holder;
    ASSERT_EQ(0, wtest::listen_any(port, &holder));
    set("RANK", "0");
    set("WORLD_SIZE", "2");
    set("P2P_MASTER_PORT", std::to_string(port));
    std::unique_ptr<Bootstrap> b;
    EXPECT_EQ(P2P_ERR_BOOTSTRAP, bootstrap_create(P2P_BOOTSTRAP_TCP, &b));
}

TEST(TcpProto, HelloRoundTripAndTruncation) {
    tcp::Hello h;
    h.rank = 3;
    h.size = 8;
    h.token = "secret";
    h.host = "node-7";
    std::vector<uint8_t> p = tcp::hello_encode(h);
    tcp::Hello d;
    ASSERT_TRUE(tcp::hello_decode(p.data(), p.size(), &d));
    EXPECT_EQ(3u, d.rank);
    EXPECT_EQ(8u, d.size);
    EXPECT_EQ("secret", d.token);
    EXPECT_EQ("node-7", d.host);
    for (size_t n = 0; n < p.size(); ++n) {
        EXPECT_FALSE(tcp::hello_decode(p.data(), n, &d)) << n;
    }
    p.push_back(0);
    EXPECT_FALSE(tcp::hello_decode(p.data(), p.size(), &d)) << "trailing byte";
}

TEST(TcpProto, AllRoundTrip) {
    std::vector<std::vector<uint8_t>> blobs = {{}, {1}, {2, 3, 4}};
    std::vector<uint8_t> p = tcp::all_encode(77, blobs);
    uint64_t seq = 0;
    std::vector<std::vector<uint8_t>> out;
    ASSERT_TRUE(tcp::all_decode(p.data(), p.size(), 3, &seq, &out));
    EXPECT_EQ(77u, seq);
    EXPECT_EQ(blobs, out);
    EXPECT_FALSE(tcp::all_decode(p.data(), p.size(), 4, &seq, &out));
    EXPECT_FALSE(tcp::all_decode(p.data(), p.size(), 2, &seq, &out));
    EXPECT_FALSE(tcp::all_decode(p.data(), p.size() - 1, 3, &seq, &out));
}

TEST(TcpProto, HeaderAndTokens) {
    uint8_t raw[tcp::kHeaderSize];
    tcp::header_encode(tcp::Msg::DATA, 0x123456789aull, raw);
    tcp::Header h = tcp::header_decode(raw);
    EXPECT_EQ(tcp::kMagic, h.magic);
    EXPECT_EQ(tcp::kVersion, h.version);
    EXPECT_EQ(static_cast<uint16_t>(tcp::Msg::DATA), h.type);
    EXPECT_EQ(0x123456789aull, h.len);
    EXPECT_TRUE(tcp::tokens_equal("abc", "abc"));
    EXPECT_FALSE(tcp::tokens_equal("abc", "abd"));
    EXPECT_FALSE(tcp::tokens_equal("abc", "abcd"));
    EXPECT_FALSE(tcp::tokens_equal("", "a"));
}

} // namespace
