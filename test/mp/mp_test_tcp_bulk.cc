/*
 * Large messages over ucxp2p's own tcp path (src/core/tcp_bulk.h), in the
 * mp_test runs with UCX_TLS=tcp (where P2P_TCP_BULK=auto turns it on for
 * messages of P2P_TCP_BULK_THRESH bytes or more: 256 KiB in those runs
 * (mp_test.h), so every other tcp run of mp_test with such messages goes
 * through it too).
 */
#include "mp_test.h"

using namespace mpt;

namespace {

const char kTcpLine[] = "read over tcp";

}  // namespace

// Random mixed traffic with the tcp path from 16 KiB: most large messages
// take it, repeated tensor ids, batches, both kinds of memory; the soak
// checks every byte. Each rank's communicator says it uses the path, and
// the servers say whom they served.
TEST_P(MpTest, SoakOverTcpBulk3Ranks) {
    if (!is_tcp(GetParam())) GTEST_SKIP() << "the tcp path is for UCX_TLS=tcp";
    RunSpec s;
    s.ranks = 3;
    s.args = {"soak", "20", "3", "16"};
    s.env = {"P2P_TCP_BULK_THRESH=16384", "P2P_LOG_LEVEL=debug"};
    const std::string out = expect_pass(s, "soak ok");
    EXPECT_EQ(3u, count(out, kTcpLine)) << out;
    // Their servers served connections (logged as each ends).
    EXPECT_GE(count(out, "connection from"), 3u) << out;
}

// P2P_TCP_BULK_THRESH=auto (the default): a stream of 512 KiB messages on
// one tensor id starts through UCX, then (from its 512th message) the
// sender times a run of them on the tcp path (and may switch); the
// receiver checks every message and their order, and the sender's log
// says it decided.
TEST_P(MpTest, TcpBulkAutoChoiceKeepsOrder2Ranks) {
    if (!is_tcp(GetParam())) GTEST_SKIP() << "the tcp path is for UCX_TLS=tcp";
    RunSpec s;
    s.args = {"cma-auto-order", "524288"};
    s.env = {"P2P_LOG_LEVEL=debug", "P2P_TCP_BULK_THRESH=auto"};
    const std::string out = expect_pass(s, "cma-auto-order ok");
    EXPECT_EQ(2u, count(out, "while faster than ucx (measured per size)")) << out;
    EXPECT_GE(count(out, "measuring tcp bulk for sends to rank 1 of 524288 bytes"), 1u) << out;
    EXPECT_GE(count(out, "sends to rank 1 of 524288 bytes and their size class still go") +
                  count(out, "sends to rank 1 of 524288 bytes and their size class now go"),
              1u)
        << out;
}

// And sends nobody receives, then the sender's shutdown: each completes
// once, whichever path the choice had them take.
TEST_P(MpTest, TcpBulkAutoChoiceUnreceivedSendsEndAtShutdown2Ranks) {
    if (!is_tcp(GetParam())) GTEST_SKIP() << "the tcp path is for UCX_TLS=tcp";
    RunSpec s;
    s.args = {"cma-auto-order", "unreceived", "524288"};
    s.env = {"P2P_TCP_BULK_THRESH=auto"};
    const std::string out = expect_pass(s, "cma-auto-order ok");
    EXPECT_NE(std::string::npos, out.find("unreceived sends cancelled")) << out;
}

// The shm runs never use it (UCX moves same-host bytes through shared
// memory there), and P2P_TCP_BULK=off turns it off over tcp.
TEST_P(MpTest, NoTcpBulkWhereUcxUsesSharedMemoryOrWhenOff2Ranks) {
    RunSpec s;
    s.args = {"alltoall"};
    s.env = {"P2P_LOG_LEVEL=debug"};
    if (is_tcp(GetParam())) s.env.push_back("P2P_TCP_BULK=off");
    const std::string out = expect_pass(s, "alltoall ok");
    EXPECT_EQ(0u, count(out, kTcpLine)) << out;
    EXPECT_EQ(0u, count(out, "tcp bulk: server") + count(out, "tcp bulk server")) << out;
}

// Ranks that disagree (rank 1 has it off) both leave it off: a sender
// using it towards a receiver that does not expect its requests would
// never be answered. Every size of alltoall still arrives.
TEST_P(MpTest, TcpBulkOnlyWhereBothRanksHaveIt2Ranks) {
    if (!is_tcp(GetParam())) GTEST_SKIP() << "the tcp path is for UCX_TLS=tcp";
    RunSpec s;
    s.args = {"alltoall"};
    s.env = {"P2P_LOG_LEVEL=debug"};
    s.wrap = {"sh", "-c", "[ \"$RANK\" = 1 ] && export P2P_TCP_BULK=off; exec \"$0\" \"$@\""};
    const std::string out = expect_pass(s, "alltoall ok");
    EXPECT_EQ(0u, count(out, kTcpLine)) << out;
}

// A tcp sender that stops (SIGSTOP) with 16 payloads requested: a read
// waits up to a peer timeout for bytes, but only the first; the rest, and
// anything a shutdown would read, fall back at once, so the receiver's
// shutdown keeps its bound (mp_scen_stop.cc, stalled-bulk). Before, the
// reads waited in turn: 16 peer timeouts.
TEST_P(MpTest, ShutdownKeepsItsBoundWithAStalledTcpSender2Ranks) {
    if (!is_tcp(GetParam())) GTEST_SKIP() << "the tcp path is for UCX_TLS=tcp";
    RunSpec s;
    s.args = {"stalled-bulk"};
    s.timeout_s = 120;
    const std::string out = expect_pass(s, "stalled-bulk ok");
    EXPECT_EQ(1u, count(out, "shutdown with a stalled tcp sender took")) << out;
}
