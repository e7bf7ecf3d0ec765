// p2prun, driven as a binary: environment of the ranks, output relay, usage.
#include "run_p2prun.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace p2prun_test;

namespace {

bool all_digits(const std::string &s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// Splits "[r] rest" into r and rest; false when the line has no prefix.
// (std::regex is avoided: GCC 12 warns inside it under the sanitizers.)
bool parse_prefixed(const std::string &line, int *rank, std::string *rest) {
    size_t close = line.find("] ");
    if (line.empty() || line[0] != '[' || close == std::string::npos || close < 2 ||
        !all_digits(line.substr(1, close - 1))) {
        return false;
    }
    *rank = std::stoi(line.substr(1, close - 1));
    *rest = line.substr(close + 2);
    return true;
}

bool is_hex_token(const std::string &s) {
    return s.size() == 32 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

const char kPrintEnv[] =
    "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT "
    "$P2P_JOB_TOKEN $P2P_BOOTSTRAP ${P2P_RANK-unset} ${P2P_MASTER_PORT-unset}\"";

struct RankEnv {
    std::string rank, world, local_rank, local_world, addr, port, token, bootstrap,
        p2p_rank, p2p_port;
};

std::map<int, RankEnv> env_by_rank(const std::string &out) {
    std::map<int, RankEnv> m;
    for (const auto &line : split_lines(out)) {
        int r = -1;
        std::string rest;
        if (!parse_prefixed(line, &r, &rest)) {
            ADD_FAILURE() << "line without prefix: " << line;
            continue;
        }
        std::istringstream in(rest);
        RankEnv e;
        in >> e.rank >> e.world >> e.local_rank >> e.local_world >> e.addr >> e.port >>
            e.token >> e.bootstrap >> e.p2p_rank >> e.p2p_port;
        m[r] = e;
    }
    return m;
}

// Expects `ranks` lines of output, each "[r] " + rest.
void expect_every_line(const std::string &out, size_t ranks, const std::string &rest) {
    auto lines = split_lines(out);
    EXPECT_EQ(ranks, lines.size()) << out;
    for (const auto &line : lines) {
        int rank;
        std::string got;
        EXPECT_TRUE(parse_prefixed(line, &rank, &got)) << line;
        EXPECT_EQ(rest, got);
    }
}

} // namespace

TEST(P2prunEnv, EachRankGetsBootstrapVariables) {
    TempDir dir;
    // Inherited overrides must not reach the ranks (the library prefers them).
    Result r = run(dir, {"-n", "4", "sh", "-c", kPrintEnv},
                   {"P2P_RANK=99", "P2P_MASTER_PORT=1", "RANK=77"});
    ASSERT_FALSE(r.timed_out);
    ASSERT_EQ(0, r.code) << r.err;
    auto m = env_by_rank(r.out);
    ASSERT_EQ(4u, m.size()) << r.out;
    std::set<std::string> tokens;
    for (const auto &kv : m) {
        const RankEnv &e = kv.second;
        EXPECT_EQ(std::to_string(kv.first), e.rank);
        EXPECT_EQ("4", e.world);
        EXPECT_EQ(e.rank, e.local_rank);
        EXPECT_EQ("4", e.local_world);
        EXPECT_EQ("127.0.0.1", e.addr);
        EXPECT_EQ(m[0].port, e.port);
        int port = std::stoi(e.port);
        EXPECT_GT(port, 0);
        EXPECT_LT(port, 65536);
        EXPECT_TRUE(is_hex_token(e.token)) << e.token;
        EXPECT_EQ("tcp", e.bootstrap);
        EXPECT_EQ("unset", e.p2p_rank);
        // The rendezvous port; MASTER_PORT is another one, for PyTorch.
        EXPECT_EQ(m[0].p2p_port, e.p2p_port);
        EXPECT_NE("1", e.p2p_port) << "inherited P2P_MASTER_PORT kept";
        EXPECT_NE(e.port, e.p2p_port);
        EXPECT_GT(std::stoi(e.p2p_port), 0);
        EXPECT_LT(std::stoi(e.p2p_port), 65536);
        tokens.insert(e.token);
    }
    EXPECT_EQ(1u, tokens.size()) << "token differs between ranks";

    Result r2 = run(dir, {"-n", "1", "sh", "-c", kPrintEnv});
    ASSERT_EQ(0, r2.code) << r2.err;
    auto m2 = env_by_rank(r2.out);
    ASSERT_EQ(1u, m2.size());
    EXPECT_NE(*tokens.begin(), m2[0].token) << "token reused across runs";
}

TEST(P2prunEnv, InheritedListenAddressIsReplacedByLoopback) {
    // An inherited P2P_IF_IP or P2P_IFNAME would make rank 0 listen where the
    // others (told MASTER_ADDR=127.0.0.1) cannot reach it.
    TempDir dir;
    const char *script = "echo \"$P2P_IF_IP ${P2P_IFNAME-unset} $MASTER_ADDR\"";
    Result r = run(dir, {"-n", "2", "sh", "-c", script},
                   {"P2P_IF_IP=10.11.12.13", "P2P_IFNAME=eth9"});
    ASSERT_EQ(0, r.code) << r.err;
    expect_every_line(r.out, 2, "127.0.0.1 unset 127.0.0.1");
    // -x still chooses.
    Result x = run(dir, {"-n", "1", "-x", "P2P_IF_IP=10.1.1.1", "-x", "P2P_IFNAME=lo", "sh",
                         "-c", script},
                   {"P2P_IFNAME=eth9"});
    ASSERT_EQ(0, x.code) << x.err;
    EXPECT_EQ("[0] 10.1.1.1 lo 127.0.0.1\n", x.out);
}

TEST(P2prunEnv, MasterPortOption) {
    TempDir dir;
    Result r = run(dir, {"-n", "2", "--master-port", "4321", "sh", "-c", kPrintEnv});
    ASSERT_EQ(0, r.code) << r.err;
    auto m = env_by_rank(r.out);
    ASSERT_EQ(2u, m.size());
    EXPECT_EQ("4321", m[0].p2p_port);
    EXPECT_EQ("4321", m[1].p2p_port);
    EXPECT_NE("4321", m[0].port) << "MASTER_PORT is left to PyTorch";
    EXPECT_EQ(m[0].port, m[1].port);
}

TEST(P2prunEnv, DashXAddsAndOverridesVariables) {
    TempDir dir;
    Result r = run(dir,
                   {"-n", "2", "-x", "FOO=bar baz", "-x", "EMPTY=", "-x", "P2P_BOOTSTRAP=single",
                    "-x", "FROM_PARENT", "-x", "EQ=a=b", "--", "sh", "-c",
                    "echo \"$FOO|${EMPTY-unset}|$P2P_BOOTSTRAP|$FROM_PARENT|$EQ\""},
                   {"FROM_PARENT=inherited"});
    ASSERT_EQ(0, r.code) << r.err;
    expect_every_line(r.out, 2, "bar baz||single|inherited|a=b");
}

TEST(P2prunEnv, ProgramIsSearchedInTheRanksPath) {
    TempDir dir;
    const std::string prog = dir.file("p2prun-path-probe");
    {
        std::ofstream f(prog);
        f << "#!/bin/sh\necho found-in-rank-path\n";
    }
    ASSERT_EQ(0, ::chmod(prog.c_str(), 0755));
    // Not in p2prun's own PATH: found only through the rank's.
    Result r = run(dir, {"-n", "2", "-x", "PATH=" + dir.path() + ":/usr/bin:/bin",
                         "p2prun-path-probe"});
    ASSERT_EQ(0, r.code) << r.err;
    expect_every_line(r.out, 2, "found-in-rank-path");
    // And a rank PATH without it does not find it, though p2prun's has it.
    Result r2 = run(dir, {"-n", "1", "-x", "PATH=/usr/bin:/bin", "p2prun-path-probe"},
                    {"PATH=" + dir.path() + ":/usr/bin:/bin"});
    EXPECT_EQ(127, r2.code) << r2.out;
    EXPECT_NE(std::string::npos, r2.err.find("cannot run 'p2prun-path-probe'")) << r2.err;
}

TEST(P2prunOutput, PrefixesStdoutAndStderrSeparatelyAndFlushesPartialLine) {
    TempDir dir;
    Result r = run(dir, {"-n", "1", "sh", "-c",
                         "printf 'one\\ntw'; printf 'o\\npartial'; printf 'e1\\ne2' >&2"});
    ASSERT_EQ(0, r.code) << r.err;
    EXPECT_EQ("[0] one\n[0] two\n[0] partial\n", r.out);
    EXPECT_EQ("[0] e1\n[0] e2\n", r.err);
}

TEST(P2prunOutput, ManyRanksNeverTearLines) {
    TempDir dir;
    const int kRanks = 6, kLines = 150;
    // Each line is written in three pieces (three write() calls): a relay
    // that does not buffer whole lines would interleave the pieces.
    std::string script =
        "i=0; while [ $i -lt " + std::to_string(kLines) +
        " ]; do printf 'rank %s ' $RANK; printf 'line %s ' $i; "
        "printf 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\\n'; i=$((i+1)); done";
    Result r = run(dir, {"-n", std::to_string(kRanks), "sh", "-c", script});
    ASSERT_EQ(0, r.code) << r.err;
    std::map<int, int> next_line;
    for (const auto &line : split_lines(r.out)) {
        int rank;
        std::string rest;
        ASSERT_TRUE(parse_prefixed(line, &rank, &rest)) << line;
        // Expected body: "rank R line I " followed by exactly 50 'x'.
        std::istringstream in(rest);
        std::string w_rank, r_s, w_line, i_s, xs, extra;
        in >> w_rank >> r_s >> w_line >> i_s >> xs;
        bool ok = w_rank == "rank" && all_digits(r_s) && w_line == "line" && all_digits(i_s) &&
                  xs == std::string(50, 'x') && !(in >> extra) &&
                  rest == "rank " + r_s + " line " + i_s + " " + xs;
        ASSERT_TRUE(ok) << "torn line: " << line;
        ASSERT_EQ(rank, std::stoi(r_s)) << line;
        ASSERT_EQ(next_line[rank], std::stoi(i_s)) << "out of order: " << line;
        ++next_line[rank];
    }
    ASSERT_EQ(static_cast<size_t>(kRanks), next_line.size());
    for (const auto &kv : next_line) {
        EXPECT_EQ(kLines, kv.second) << "rank " << kv.first;
    }
}

// `2>&1` into a pipe read slowly: stdout and stderr lines share one pipe,
// and neither may cut into the other's lines (two queues, each written in
// PIPE_BUF pieces as the reader makes room, tore ~0.5% of them).
TEST(P2prunOutput, StdoutAndStderrIntoOnePipeNeverTearLines) {
    const int kRanks = 2, kLines = 3000;
    const std::string pad(60, 'o');
    const std::string loop = "while [ $i -lt " + std::to_string(kLines) + " ]; do echo \"";
    const std::string script = "i=0; (" + loop + "O $RANK $i " + pad + "\"; i=$((i+1)); done) & " +
                               loop + "E $RANK $i " + pad + "\" >&2; i=$((i+1)); done; wait";
    const std::string cmd = "exec '" + p2prun_path() + "' -n " + std::to_string(kRanks) +
                            " sh -c '" + script + "' 2>&1";
    FILE *f = ::popen(cmd.c_str(), "r");
    ASSERT_NE(nullptr, f);
    std::string out;
    char buf[1000];
    ssize_t n;
    while ((n = ::read(::fileno(f), buf, sizeof(buf))) > 0) {
        out.append(buf, static_cast<size_t>(n));
        ::usleep(100);  // slower than the ranks write: the pipe fills
    }
    int status = ::pclose(f);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    std::map<std::string, int> next;  // "rank stream" -> next line number
    size_t lines = 0;
    for (const auto &line : split_lines(out)) {
        ++lines;
        int rank;
        std::string rest, stream, r_s, i_s, body, extra;
        ASSERT_TRUE(parse_prefixed(line, &rank, &rest)) << "torn line: " << line;
        std::istringstream in(rest);
        in >> stream >> r_s >> i_s >> body;
        ASSERT_TRUE((stream == "O" || stream == "E") && r_s == std::to_string(rank) &&
                    all_digits(i_s) && body == pad && !(in >> extra))
            << "torn line: " << line;
        int &want = next[std::to_string(rank) + " " + stream];
        ASSERT_EQ(want, std::stoi(i_s)) << "out of order: " << line;
        ++want;
    }
    EXPECT_EQ(static_cast<size_t>(2 * kRanks * kLines), lines);
}

TEST(P2prunOutput, TimeoutFiresWhileStdoutIsNotRead) {
    TempDir dir;
    StdoutPipe pipe;
    P2prun p(dir, {"-n", "2", "--timeout", "1", "yes"}, {}, {}, pipe.w);
    pipe.close_write();
    Result r = p.wait(15);
    ASSERT_FALSE(r.timed_out) << "p2prun hung on its stdout";
    EXPECT_EQ(124, r.code) << r.err;
    EXPECT_LT(r.seconds, 4.0);
    EXPECT_NE(std::string::npos, r.err.find("p2prun: timeout after 1 s\n")) << r.err;
    EXPECT_NE(std::string::npos, r.err.find("bytes of output dropped")) << r.err;
}

TEST(P2prunOutput, SignalIsForwardedWhileStdoutIsNotRead) {
    TempDir dir;
    StdoutPipe pipe;
    P2prun p(dir, {"-n", "1", "sh", "-c", "touch " + dir.file("ready") + "; exec yes"}, {}, {},
             pipe.w);
    pipe.close_write();
    ASSERT_TRUE(wait_for_files({dir.file("ready")}, 10));
    ::usleep(300000);  // the pipe and p2prun's buffer fill up
    double sent = now_s();
    ASSERT_EQ(0, ::kill(p.pid(), SIGTERM));
    Result r = p.wait(15);
    ASSERT_FALSE(r.timed_out) << "p2prun hung on its stdout";
    EXPECT_EQ(128 + SIGTERM, r.code) << r.err;
    EXPECT_LT(now_s() - sent, 3.0);
}

TEST(P2prunOutput, SlowReaderGetsEverything) {
    TempDir dir;
    StdoutPipe pipe;
    // Over a MiB per rank: more than the pipes and p2prun's buffer hold.
    const int kLines = 200000;
    P2prun p(dir, {"-n", "2", "seq", std::to_string(kLines)}, {}, {}, pipe.w);
    pipe.close_write();
    ::usleep(1500000);  // the ranks block meanwhile (backpressure)
    EXPECT_EQ(2u * kLines, pipe.count_lines());
    Result r = p.wait(30);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(0, r.code) << r.err;
    EXPECT_EQ("", r.err);
}

TEST(P2prunOutput, NoPrefixPassesOutputThrough) {
    TempDir dir;
    Result r = run(dir, {"--no-prefix", "-n", "1", "sh", "-c",
                         "printf 'a\\nb'; printf 'err\\n' >&2"});
    ASSERT_EQ(0, r.code) << r.err;
    EXPECT_EQ("a\nb", r.out);
    EXPECT_EQ("err\n", r.err);

    Result r2 = run(dir, {"--no-prefix", "-n", "3", "sh", "-c", "echo hello"});
    ASSERT_EQ(0, r2.code) << r2.err;
    EXPECT_EQ("hello\nhello\nhello\n", r2.out);
}

TEST(P2prunOutput, NoPrefixKeepsLongOutputWithoutNewlinesExact) {
    // Binary data, or a progress bar redrawn with '\r' for a long time: over
    // 64 KiB without a newline must not come out with newlines added.
    TempDir dir;
    Result r = run(dir, {"--no-prefix", "-n", "1", "head", "-c", "300000", "/dev/zero"});
    ASSERT_EQ(0, r.code) << r.err;
    EXPECT_EQ(300000u, r.out.size());
    EXPECT_EQ(std::string::npos, r.out.find('\n'));
}

TEST(P2prunOutput, AWriteErrorOnStdoutFailsTheJob) {
    // As `echo hi > /dev/full` fails (ENOSPC): the output is lost, so the
    // job cannot exit 0; stderr says why, once.
    TempDir dir;
    int full = ::open("/dev/full", O_WRONLY);
    ASSERT_GE(full, 0);
    P2prun p(dir, {"-n", "2", "sh", "-c", "echo hello; echo again"}, {}, {}, full);
    ::close(full);
    Result r = p.wait();
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(1, r.code) << r.err;
    const std::string want = "p2prun: cannot write to stdout: No space left on device";
    EXPECT_NE(std::string::npos, r.err.find(want)) << r.err;
    EXPECT_EQ(r.err.find(want), r.err.rfind(want)) << r.err;
}

TEST(P2prunOutput, ProgramArgumentsAreNotParsedAsOptions) {
    TempDir dir;
    Result r = run(dir, {"-n", "1", "sh", "-c", "echo \"$0 $1\"", "-n", "--timeout"});
    ASSERT_EQ(0, r.code) << r.err;
    EXPECT_EQ("[0] -n --timeout\n", r.out);
}

TEST(P2prunUsage, BadCommandLinesExitTwoWithUsage) {
    TempDir dir;
    const std::vector<std::vector<std::string>> cases = {
        {},
        {"-n"},
        {"true"},
        {"-n", "0", "true"},
        {"-n", "abc", "true"},
        {"-n", "-3", "true"},
        {"-n", "1025", "true"},
        {"-n", "99999999999999999999", "true"},
        {"-n", "2"},
        {"-n", "2", "--"},
        {"--bogus", "-n", "1", "true"},
        {"-n", "1", "--timeout", "0", "true"},
        {"-n", "1", "--timeout", "x", "true"},
        {"-n", "1", "--grace", "-1", "true"},
        {"-n", "1", "--grace", "0x10", "true"},
        {"-n", "1", "--timeout", "1e", "true"},
        {"-n", "1", "--master-port", "70000", "true"},
        {"-n", "1", "-x", "=v", "true"},
        {"-n", "1", "-x", "P2PRUN_SURELY_UNSET_VAR", "true"},
        {"-n", "1", "--keep-going=yes", "true"},
    };
    for (const auto &args : cases) {
        std::string joined;
        for (const auto &a : args) {
            joined += a + " ";
        }
        Result r = run(dir, args);
        ASSERT_FALSE(r.timed_out) << joined;
        EXPECT_EQ(2, r.code) << joined;
        EXPECT_EQ(0u, r.err.rfind("p2prun: ", 0)) << joined << ": " << r.err;
        EXPECT_NE(std::string::npos, r.err.find("usage: p2prun")) << joined;
        EXPECT_EQ("", r.out) << joined;
    }
}

TEST(P2prunUsage, HelpPrintsUsageAndSucceeds) {
    TempDir dir;
    for (const char *opt : {"--help", "-h"}) {
        Result r = run(dir, {opt});
        EXPECT_EQ(0, r.code) << opt;
        EXPECT_EQ(0u, r.out.rfind("usage: p2prun", 0)) << r.out;
        EXPECT_EQ("", r.err);
    }
}

TEST(P2prunUsage, ProgramThatCannotRunExits127) {
    TempDir dir;
    Result r = run(dir, {"-n", "3", "/nonexistent/p2prun-prog"});
    EXPECT_EQ(127, r.code);
    EXPECT_EQ("p2prun: cannot run '/nonexistent/p2prun-prog': No such file or directory\n",
              r.err);
    Result r2 = run(dir, {"-n", "2", "p2prun-no-such-program-in-path"});
    EXPECT_EQ(127, r2.code);
    EXPECT_NE(std::string::npos, r2.err.find("cannot run 'p2prun-no-such-program-in-path'"))
        << r2.err;
}
