/*
 * mp_test: runs the mp_rank scenarios through p2prun, with UCX_TLS=shm,self
 * and with UCX_TLS=tcp (loopback only), each in both thread modes
 * (P2P_THREAD_MODE), bounded by p2prun --timeout and by a driver deadline.
 */
#include "mp_launch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <ostream>
#include <regex>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

using mptest::Launch;

namespace {

struct Transport {
    const char *name;
    std::vector<std::string> env; // NAME=VALUE passed with -x
};

// gtest prints parameters of failing tests with this.
void PrintTo(const Transport &t, std::ostream *os) { *os << t.name; }

const Transport kShm = {"shm", {"UCX_TLS=shm,self"}};
const Transport kTcp = {"tcp", {"UCX_TLS=tcp", "UCX_NET_DEVICES=lo"}};
// P2P_THREAD_SERIALIZED: no progress thread; every scenario but `threads`
// makes one call at a time, so its own polls and waits must move the data
// (and detect dead peers).
const Transport kShmSerial = {"shm_serialized",
                              {"UCX_TLS=shm,self", "P2P_THREAD_MODE=serialized"}};
const Transport kTcpSerial = {"tcp_serialized", {"UCX_TLS=tcp", "UCX_NET_DEVICES=lo",
                                                 "P2P_THREAD_MODE=serialized"}};

bool is_tcp(const Transport &t) { return std::string(t.name).rfind("tcp", 0) == 0; }
bool is_serialized(const Transport &t) {
    return std::string(t.name).find("serialized") != std::string::npos;
}

std::string p2prun_path() { return mptest::top_builddir() + "/tools/p2prun/p2prun"; }
std::string mp_rank_path() { return mptest::top_builddir() + "/test/mp/mp_rank"; }

bool executable(const std::string &p) { return access(p.c_str(), X_OK) == 0; }

struct RunSpec {
    int ranks = 2;
    int timeout_s = 90;
    std::vector<std::string> args;     // after "mp_rank"
    std::vector<std::string> env;      // extra -x NAME=VALUE
    bool keep_going = false;
};

class MpTest : public ::testing::TestWithParam<Transport> {
protected:
    void SetUp() override {
        ASSERT_TRUE(executable(p2prun_path())) << p2prun_path() << " not built";
        ASSERT_TRUE(executable(mp_rank_path())) << mp_rank_path() << " not built";
    }

    std::vector<std::string> command(const RunSpec &s) const {
        std::vector<std::string> argv = {p2prun_path(), "-n",
                                         std::to_string(s.ranks), "--timeout",
                                         std::to_string(s.timeout_s)};
        if (s.keep_going) {
            argv.push_back("--keep-going");
        }
        // The harness's default first: a later -x of the same name wins, so
        // a test's own setting (s.env) takes effect.
        std::vector<std::string> env = {"P2P_PEER_TIMEOUT_MS=2000"};
        env.insert(env.end(), GetParam().env.begin(), GetParam().env.end());
        env.insert(env.end(), s.env.begin(), s.env.end());
        for (const std::string &e : env) {
            argv.push_back("-x");
            argv.push_back(e);
        }
        argv.push_back("--");
        argv.push_back(mp_rank_path());
        argv.insert(argv.end(), s.args.begin(), s.args.end());
        return argv;
    }

    static std::string joined(const std::vector<std::string> &v) {
        std::string s;
        for (const std::string &a : v) {
            s += (s.empty() ? "" : " ") + a;
        }
        return s;
    }

    /** Run to the end; returns p2prun's status, output in *out. */
    int run(const RunSpec &s, std::string *out) {
        std::vector<std::string> argv = command(s);
        Launch l(argv);
        EXPECT_TRUE(l.started()) << joined(argv);
        auto t0 = std::chrono::steady_clock::now();
        int st = l.wait(s.timeout_s + 30);
        double took = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - t0).count();
        *out = l.output();
        RecordProperty("seconds", std::to_string(took));
        std::printf("[ mp_test  ] %s: status %d in %.1f s\n", joined(s.args).c_str(),
                    st, took);
        return st;
    }

    /** The scenario must exit 0 and print `ok_word` once per rank.
     *  Returns the output for further checks. */
    std::string expect_pass(const RunSpec &s, const std::string &ok_word) {
        std::string out;
        int st = run(s, &out);
        EXPECT_EQ(0, st) << joined(command(s)) << "\n" << out;
        EXPECT_EQ(static_cast<size_t>(s.ranks), count(out, ok_word))
            << "expected '" << ok_word << "' from every rank:\n" << out;
        return out;
    }

    static size_t count(const std::string &text, const std::string &word) {
        size_t n = 0;
        for (size_t p = text.find(word); p != std::string::npos;
             p = text.find(word, p + word.size())) {
            ++n;
        }
        return n;
    }
};

std::string tcp_or(const char *shm_value, const char *tcp_value,
                   const Transport &t) {
    return is_tcp(t) ? tcp_value : shm_value;
}

} // namespace

TEST_P(MpTest, Alltoall2Ranks) {
    RunSpec s;
    s.ranks = 2;
    s.args = {"alltoall"};
    expect_pass(s, "alltoall ok");
}

TEST_P(MpTest, Alltoall8Ranks) {
    RunSpec s;
    s.ranks = 8;
    s.timeout_s = 150;
    // 8 ranks on 2 cores: the largest tensor only where it stays quick.
    s.args = {"alltoall", tcp_or("4194304", "1048579", GetParam())};
    expect_pass(s, "alltoall ok");
}

// UCX spells shared memory "sm" as well as "shm": both must keep the shared
// memory transports (which need peer-failure support turned on).
TEST_P(MpTest, ShmAliasSm) {
    if (std::string(GetParam().name) != "shm") {
        GTEST_SKIP() << "a shared memory spelling of UCX_TLS";
    }
    RunSpec s;
    s.args = {"alltoall"};
    s.env = {"UCX_TLS=sm,self"};
    expect_pass(s, "alltoall ok");
}

TEST_P(MpTest, Unexpected3Ranks) {
    RunSpec s;
    s.ranks = 3;
    s.args = {"unexpected"};
    expect_pass(s, "unexpected ok");
}

TEST_P(MpTest, Shuffle4Ranks) {
    RunSpec s;
    s.ranks = 4;
    s.args = {"shuffle"};
    expect_pass(s, "shuffle ok");
}

TEST_P(MpTest, Batch2Ranks) {
    RunSpec s;
    s.ranks = 2;
    s.args = {"batch", "128"};
    expect_pass(s, "batch ok");
}

TEST_P(MpTest, Batch3Ranks) {
    RunSpec s;
    s.ranks = 3;
    s.args = {"batch", "32"};
    expect_pass(s, "batch ok");
}

TEST_P(MpTest, Truncate2Ranks) {
    RunSpec s;
    s.ranks = 2;
    s.args = {"truncate"};
    expect_pass(s, "truncate ok");
}

TEST_P(MpTest, Threads2Ranks) {
    if (is_serialized(GetParam())) {
        GTEST_SKIP() << "threads post and poll at once: P2P_THREAD_MULTI only";
    }
    RunSpec s;
    s.ranks = 2;
    s.args = {"threads", "8", "6"};
    expect_pass(s, "threads ok");
}

TEST_P(MpTest, Shutdown3Ranks) {
    RunSpec s;
    s.ranks = 3;
    s.args = {"shutdown"};
    expect_pass(s, "shutdown ok");
}

// Same-host single copy (src/core/cma.h) applies to the shm runs only:
// UCX_TLS=tcp turns it off.
bool single_copy(const Transport &t) { return !is_tcp(t); }

TEST_P(MpTest, SingleCopyFallback2Ranks) {
    RunSpec s;
    s.args = {"cma-fallback"};
    s.env = {"P2P_LOG_LEVEL=info"};
    const std::string out = expect_pass(s, "cma-fallback ok");
    // Rank 1 cannot read rank 0 and says so once; rank 0 switches to pushing.
    // Rank 1 cannot write rank 0 either (split copies): it says so once and
    // rank 0 reads those messages whole.
    const size_t refused = count(out, "cannot read rank 0's memory");
    const size_t switched = count(out, "rank 1 cannot read this process");
    const size_t unwritable = count(out, "cannot write rank 0's memory");
    if (single_copy(GetParam())) {
        EXPECT_EQ(1u, refused) << out;
        EXPECT_EQ(1u, switched) << out;
        EXPECT_EQ(1u, unwritable) << out;
        EXPECT_EQ(0u, count(out, "cannot read rank 1's memory")) << out;
        EXPECT_EQ(0u, count(out, "cannot write rank 1's memory")) << out;
    } else {
        EXPECT_EQ(0u, refused + switched + unwritable) << out;
    }
}

TEST_P(MpTest, SingleCopyWithdrawnSends2Ranks) {
    if (!single_copy(GetParam())) {
        GTEST_SKIP() << "single copy is off with UCX_TLS=tcp";
    }
    RunSpec s;
    s.args = {"cma-withdraw"};
    expect_pass(s, "cma-withdraw ok");
}

TEST_P(MpTest, SingleCopyFallbackWithoutSplit2Ranks) {
    RunSpec s;
    s.args = {"cma-fallback"};
    s.env = {"P2P_LOG_LEVEL=info", "P2P_CMA_SPLIT=0"};
    const std::string out = expect_pass(s, "cma-fallback ok");
    // The receiver reads whole messages: nobody tries to write.
    EXPECT_EQ(0u, count(out, "cannot write rank")) << out;
    EXPECT_EQ(single_copy(GetParam()) ? 1u : 0u,
              count(out, "cannot read rank 0's memory")) << out;
}

// Application buffers of 16 KiB and up by single copy (the default starts
// at 256 KiB): the split copy at every size the alltoall has.
TEST_P(MpTest, SingleCopyLowThresholdAlltoall3Ranks) {
    RunSpec s;
    s.ranks = 3;
    s.args = {"alltoall"};
    s.env = {"P2P_CMA_THRESH=16384"};
    expect_pass(s, "alltoall ok");
}

// Buffers from p2p_mem_alloc (MP_ALLOC=lib): same-host receivers map the
// sender's memfd once and memcpy from it (core/shm_region.h).
TEST_P(MpTest, SingleCopyMappedAlltoall3Ranks) {
    RunSpec s;
    s.ranks = 3;
    s.args = {"alltoall"};
    s.env = {"MP_ALLOC=lib", "P2P_LOG_LEVEL=info"};
    const std::string out = expect_pass(s, "alltoall ok");
    const size_t mapped = count(out, "-byte region of rank");
    if (single_copy(GetParam())) {
        EXPECT_GE(mapped, 6u) << "every rank maps its two peers' regions\n" << out;
    } else {
        EXPECT_EQ(0u, mapped) << out;
    }
    EXPECT_EQ(0u, count(out, "cannot map")) << out;
}

TEST_P(MpTest, SingleCopyMappedFallback2Ranks) {
    RunSpec s;
    s.args = {"cma-fallback"};
    s.env = {"MP_ALLOC=lib", "P2P_LOG_LEVEL=info"};
    const std::string out = expect_pass(s, "cma-fallback ok");
    if (single_copy(GetParam())) {
        // Rank 1 may neither map nor read rank 0: rank 0 pushes through UCX.
        EXPECT_EQ(1u, count(out, "cannot map rank 0's memory")) << out;
        EXPECT_EQ(1u, count(out, "cannot read rank 0's memory")) << out;
        EXPECT_EQ(1u, count(out, "rank 1 cannot read this process")) << out;
        // Rank 0 maps rank 1's buffers; shareable buffers are never split.
        EXPECT_EQ(0u, count(out, "cannot map rank 1's memory")) << out;
        EXPECT_EQ(0u, count(out, "cannot write rank")) << out;
        EXPECT_GE(count(out, "-byte region of rank 1"), 1u) << out;
    } else {
        EXPECT_EQ(0u, count(out, "cannot ")) << out;
    }
}

TEST_P(MpTest, SingleCopyMappedWithdrawnSends2Ranks) {
    if (!single_copy(GetParam())) {
        GTEST_SKIP() << "single copy is off with UCX_TLS=tcp";
    }
    RunSpec s;
    s.args = {"cma-withdraw"};
    s.env = {"MP_ALLOC=lib", "P2P_LOG_LEVEL=info"};
    const std::string out = expect_pass(s, "cma-withdraw ok");
    // The receives read the reused buffers through the mapping and found
    // the sender's epoch moved.
    EXPECT_GE(count(out, "-byte region of rank 0"), 1u) << out;
}

// P2P_CMA_THRESH=auto: a stream of 64 KiB messages on one tensor id starts
// through UCX, then the sender probes single copy (and may switch); the
// receiver checks every message and their order.
TEST_P(MpTest, SingleCopyAutoChoiceKeepsOrder2Ranks) {
    if (!single_copy(GetParam())) {
        GTEST_SKIP() << "single copy is off with UCX_TLS=tcp";
    }
    RunSpec s;
    s.args = {"cma-auto-order"};
    s.env = {"P2P_LOG_LEVEL=debug", "P2P_CMA_THRESH=auto"};
    const std::string out = expect_pass(s, "cma-auto-order ok");
    EXPECT_GE(count(out, "measuring single copy for sends to rank 1 of 65536 bytes"), 1u)
        << out;
}

// And sends nobody receives, then the sender's shutdown: each completes
// once, the synchronous sends that end the chooser's blocks included.
TEST_P(MpTest, SingleCopyAutoChoiceUnreceivedSendsEndAtShutdown2Ranks) {
    if (!single_copy(GetParam())) {
        GTEST_SKIP() << "single copy is off with UCX_TLS=tcp";
    }
    RunSpec s;
    s.args = {"cma-auto-order", "unreceived"};
    s.env = {"P2P_CMA_THRESH=auto"};
    const std::string out = expect_pass(s, "cma-auto-order ok");
    EXPECT_NE(std::string::npos, out.find("unreceived sends cancelled")) << out;
}

TEST_P(MpTest, SingleCopySplitReceiverShutdownWaits2Ranks) {
    if (!single_copy(GetParam())) {
        GTEST_SKIP() << "single copy is off with UCX_TLS=tcp";
    }
    RunSpec s;
    s.args = {"cma-split-wait"};
    expect_pass(s, "cma-split-wait ok");
}

// As above with a UCX send to the stopped rank in flight at shutdown: the
// forced close that ends it waits until the split receive is over (its ACK
// needs the endpoint), then follows a goodbye. It used to close at once
// with no goodbye; the ACK reopened an endpoint.
TEST_P(MpTest, SingleCopySplitReceiverShutdownWithASendInFlight2Ranks) {
    if (!single_copy(GetParam())) {
        GTEST_SKIP() << "single copy is off with UCX_TLS=tcp";
    }
    RunSpec s;
    s.args = {"cma-split-wait", "sending"};
    s.env = {"P2P_LOG_LEVEL=debug"};
    const std::string out = expect_pass(s, "cma-split-wait ok");
    EXPECT_NE(std::string::npos, out.find("closing the endpoint to rank 0 by force: "
                                          "sends in flight, goodbye said")) << out;
}

// And when the stopped rank outlasts the shutdown's deadline (2 x 300 ms
// + 1 s here): shutdown stops waiting for the split receive, but the send
// it was keeping open for it is ended (P2P_ERR_CANCELED) before it returns.
TEST_P(MpTest, SingleCopySplitReceiverShutdownDeadlineEndsTheSend2Ranks) {
    if (!single_copy(GetParam())) {
        GTEST_SKIP() << "single copy is off with UCX_TLS=tcp";
    }
    RunSpec s;
    s.args = {"cma-split-wait", "stall"};
    s.env = {"P2P_PEER_TIMEOUT_MS=300"};
    expect_pass(s, "cma-split-wait ok");
}

// A send to a rank that stopped before we ever connected to it: shutdown
// ends it once (P2P_OK or P2P_ERR_CANCELED) within its bound, and destroy
// returns although, over tcp with UCX 1.13, the endpoint's close usually
// outlasts destroy's bound ("did not close in time": UCX may still call
// back on that endpoint after the communicator is freed, which the
// sanitizer build watches once the rank resumes).
TEST_P(MpTest, SendToAStoppedPeerEndsAtShutdown2Ranks) {
    RunSpec s;
    s.args = {"stopped-peer"};
    expect_pass(s, "stopped-peer ok");
}

TEST_P(MpTest, DepartureIsNotAFailure3Ranks) {
    RunSpec s;
    s.ranks = 3;
    s.args = {"depart"};
    const std::string out = expect_pass(s, "depart ok");
    EXPECT_EQ(0u, count(out, "failed:")) << "rank 0 left after destroying its "
        "communicator; the others must not report it as failed:\n" << out;
    EXPECT_EQ(0u, count(out, "UCX  WARN")) << out;
}

// A rank that shuts its communicator down (or destroys it) while its
// process lives on says goodbye: the other side's operations naming it stop
// waiting (they used to wait until that process ended).
TEST_P(MpTest, OperationsNamingARankThatLeftFail) {
    for (const char *how : {"destroy", "shutdown"}) {
        SCOPED_TRACE(how);
        RunSpec s;
        s.ranks = 2;
        s.args = {"leave", how};
        expect_pass(s, "leave ok");
    }
}

// Also to a peer it never named (no endpoint of its own to it): the peer's
// hello, sent when it connected, puts it on the goodbye list -- before the
// leaver shuts down, or after (the shut communicator answers late hellos),
// or after it destroyed the communicator (its context answers, over an
// endpoint of its own to the address the communicator kept). Before, rank 0's operations waited for as long
// as rank 1's process lived, and a rendezvous send rank 1's drain answered
// read P2P_OK.
TEST_P(MpTest, RankThatNeverNamedAPeerSaysGoodbyeToIt) {
    for (const char *how : {"silent-destroy", "silent-shutdown", "silent-late",
                            "silent-gone"}) {
        SCOPED_TRACE(how);
        RunSpec s;
        s.ranks = 2;
        s.args = {"leave", how};
        s.env = {"P2P_LOG_LEVEL=debug"};
        const std::string out = expect_pass(s, "leave ok");
        const char *said = std::string(how) == "silent-gone"
                               ? "said hello after the communicator was destroyed; "
                                 "goodbye: Success"
                               : "goodbye to rank 0, which said hello";
        EXPECT_NE(std::string::npos, out.find(said))
            << "rank 1 connected to rank 0 some other way:\n" << out;
        EXPECT_EQ(0u, count(out, "cannot create endpoint")) << out;
    }
}

// Also when the leaving rank's shutdown closes the endpoint by force (a
// send still in flight there): it says goodbye first, so rank 0 sees a
// departure at once, not a failure when its keepalive notices. And the
// forced close waits for the endpoint's wireup: UCX 1.13 aborted the
// leaving rank about every other run over tcp in serialized mode (a
// pending wireup request purged; see Comm::force_close_flushed), so three
// runs each.
TEST_P(MpTest, RankLeavingWithSendsInFlightSaysGoodbye) {
    for (int run = 0; run < 3; ++run) {
        RunSpec s;
        s.ranks = 2;
        s.args = {"leave", "shutdown-sending"};
        s.env = {"P2P_LOG_LEVEL=debug"};
        const std::string out = expect_pass(s, "leave ok");
        EXPECT_NE(std::string::npos, out.find("closing the endpoint to rank 0 by force: "
                                              "sends in flight, goodbye said"))
            << "the scenario no longer has a send in flight at shutdown:\n" << out;
        EXPECT_EQ(0u, count(out, "peer rank 1 failed")) << out;
    }
}

// The receiver takes the leaver's in-flight send (its RTS came before the
// goodbye) while the leaver's shutdown closes that endpoint by force: the
// send is still reported P2P_ERR_CANCELED, as shutdown documents (UCX
// reports the forced close of a rendezvous the receiver began to pull as
// an endpoint timeout, which read P2P_ERR_PEER_FAILURE: every run in
// serialized mode over shared memory), and the receive ends once.
TEST_P(MpTest, SendPulledDuringShutdownIsCanceled) {
    for (int run = 0; run < 3; ++run) {
        RunSpec s;
        s.ranks = 2;
        s.args = {"leave", "shutdown-pulled"};
        expect_pass(s, "leave ok");
    }
}

// The goodbye's handling allocates nothing that can fail it: with every
// C++ allocation failing on rank 0, its receives still end (before, the
// bad_alloc escaped into UCX's callback and aborted the rank).
TEST_P(MpTest, PeerLeavingWhileAllocationsFail) {
    RunSpec s;
    s.ranks = 2;
    s.args = {"leave-oom"};
    expect_pass(s, "leave-oom ok");
}

TEST_P(MpTest, KillNineSurvivors) {
    RunSpec s;
    s.ranks = 3;
    s.keep_going = true;
    s.timeout_s = 90;
    s.args = {"killee", "2"};
    std::string out;
    int st = run(s, &out);
    EXPECT_EQ(137, st) << "p2prun must report the victim's SIGKILL\n" << out;
    EXPECT_NE(std::string::npos, out.find("survivor ok rank=0")) << out;
    EXPECT_NE(std::string::npos, out.find("survivor ok rank=1")) << out;
    EXPECT_EQ(std::string::npos, out.find("FAIL")) << out;
    // A crash, unlike a departure, is reported.
    EXPECT_LE(2u, count(out, "peer rank 2 failed")) << out;
}

TEST_P(MpTest, ReceiveWhatADeadRankSentOncePerMessage) {
    RunSpec s;
    s.ranks = 2;
    s.keep_going = true;
    s.timeout_s = 90;
    s.args = {"dead-arrived"};
    std::string out;
    int st = run(s, &out);
    EXPECT_EQ(137, st) << "p2prun must report rank 1's SIGKILL\n" << out;
    EXPECT_NE(std::string::npos, out.find("dead-arrived ok")) << out;
    EXPECT_EQ(std::string::npos, out.find("FAIL")) << out;
}

TEST_P(MpTest, Idle8RanksUseNoCpu) {
    const int kRanks = 8;
    char dir_tmpl[] = "/tmp/mp_test_idle.XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir_tmpl));
    const std::string go = std::string(dir_tmpl) + "/go";
    RunSpec s;
    s.ranks = kRanks;
    s.timeout_s = 120;
    s.args = {"idle", "90"};
    s.env = {"P2P_MP_GO_FILE=" + go};
    std::vector<std::string> argv = command(s);
    Launch l(argv);
    ASSERT_TRUE(l.started());

    // Every rank prints "pid=<n>" once it passed the first barrier.
    std::map<std::string, pid_t> pids; // by "mp_rank[r]"
    const std::regex re("(mp_rank\\[[0-9]+\\]) idle: pid=([0-9]+)");
    std::string line;
    auto t0 = std::chrono::steady_clock::now();
    while (pids.size() < static_cast<size_t>(kRanks)) {
        double left = 100 - std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - t0).count();
        if (left <= 0 || !l.read_line(&line, left)) {
            break;
        }
        std::smatch m;
        if (std::regex_search(line, m, re)) {
            pids[m[1]] = static_cast<pid_t>(std::stol(m[2]));
        }
    }
    if (pids.size() != static_cast<size_t>(kRanks)) {
        std::FILE *f = std::fopen(go.c_str(), "w");
        if (f != nullptr) {
            std::fclose(f);
        }
        l.wait(30);
        ADD_FAILURE() << "only " << pids.size() << " ranks reached the idle phase:\n"
                      << l.output();
        unlink(go.c_str());
        rmdir(dir_tmpl);
        return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300)); // settle
    std::map<std::string, long long> before;
    for (const auto &p : pids) {
        before[p.first] = mptest::cpu_ticks(p.second);
    }
    auto m0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(3));
    const double wall = std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - m0).count();
    std::map<std::string, long long> after;
    for (const auto &p : pids) {
        after[p.first] = mptest::cpu_ticks(p.second);
    }
    const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
    std::FILE *f = std::fopen(go.c_str(), "w");
    ASSERT_NE(nullptr, f);
    std::fclose(f);
    for (const auto &p : pids) {
        ASSERT_GE(before[p.first], 0) << p.first << " vanished";
        ASSERT_GE(after[p.first], 0) << p.first << " vanished";
        double share = (after[p.first] - before[p.first]) / hz / wall;
        std::printf("[ mp_test  ] %s pid %d idle cpu %.2f%% of a core\n",
                    p.first.c_str(), static_cast<int>(p.second), share * 100);
        EXPECT_LT(share, 0.05) << p.first << " (pid " << p.second
                               << ") used " << share * 100
                               << "% of a core while idle";
    }
    int st = l.wait(60);
    EXPECT_EQ(0, st) << "traffic after the idle phase failed:\n" << l.output();
    EXPECT_EQ(static_cast<size_t>(kRanks),
              [&] {
                  size_t n = 0;
                  const std::string &o = l.output();
                  for (size_t p = o.find("idle ok"); p != std::string::npos;
                       p = o.find("idle ok", p + 1)) {
                      ++n;
                  }
                  return n;
              }())
        << l.output();
    unlink(go.c_str());
    rmdir(dir_tmpl);
}

INSTANTIATE_TEST_SUITE_P(Transports, MpTest,
                         ::testing::Values(kShm, kTcp, kShmSerial, kTcpSerial),
                         [](const ::testing::TestParamInfo<Transport> &i) {
                             return std::string(i.param.name);
                         });
