// p2prun internals: option parsing, line relay, rank environment.
#include "job_env.h"
#include "line_relay.h"
#include "options.h"
#include "output_sink.h"
#include "signal_pipe.h"
#include "unique_fd.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

using namespace p2prun;

namespace {

ParseResult parse(std::vector<std::string> args, Options *o, std::string *err) {
    args.insert(args.begin(), "p2prun");
    std::vector<const char *> argv;
    for (auto &a : args) {
        argv.push_back(a.c_str());
    }
    return parse_options(static_cast<int>(argv.size()), argv.data(), o, err);
}

// An unlinked temporary file.
UniqueFd temp_file() {
    char path[] = "/tmp/p2prun_sink.XXXXXX";
    UniqueFd fd(::mkstemp(path));
    EXPECT_TRUE(fd.valid());
    ::unlink(path);
    return fd;
}

// Collects what a LineRelay queues, written to a temporary file.
struct Sink {
    UniqueFd w = temp_file();
    OutputSink out{w.get()};
    off_t pos = 0;
    std::string take() {
        out.flush();
        std::string s;
        char buf[4096];
        ssize_t n;
        while ((n = ::pread(w.get(), buf, sizeof(buf), pos)) > 0) {
            s.append(buf, static_cast<size_t>(n));
            pos += n;
        }
        return s;
    }
};

} // namespace

TEST(P2prunOptions, ParsesAllOptions) {
    Options o;
    std::string err;
    ASSERT_EQ(ParseResult::kRun,
              parse({"-n", "4", "-x", "A=1", "-xB=2", "--master-port=999", "--timeout", "1.5",
                     "--grace=0", "--keep-going", "--no-prefix", "prog", "-n", "7"},
                    &o, &err))
        << err;
    EXPECT_EQ(4, o.nranks);
    ASSERT_EQ(2u, o.env.size());
    EXPECT_EQ("A", o.env[0].first);
    EXPECT_EQ("1", o.env[0].second);
    EXPECT_EQ("B", o.env[1].first);
    EXPECT_EQ(999, o.master_port);
    EXPECT_DOUBLE_EQ(1.5, o.timeout_s);
    EXPECT_DOUBLE_EQ(0.0, o.grace_s);
    EXPECT_TRUE(o.keep_going);
    EXPECT_FALSE(o.prefix);
    EXPECT_EQ((std::vector<std::string>{"prog", "-n", "7"}), o.argv);

    Options d;
    ASSERT_EQ(ParseResult::kRun, parse({"--np=2", "--", "--prog"}, &d, &err)) << err;
    EXPECT_EQ(2, d.nranks);
    EXPECT_EQ(0, d.master_port);
    EXPECT_DOUBLE_EQ(3.0, d.grace_s);
    EXPECT_DOUBLE_EQ(0.0, d.timeout_s);
    EXPECT_FALSE(d.keep_going);
    EXPECT_TRUE(d.prefix);
    EXPECT_EQ(std::vector<std::string>{"--prog"}, d.argv);
}

// mpirun's spelling: read as "-n" with the value "p" it was rejected as an
// invalid number of ranks 'p'.
TEST(P2prunOptions, AcceptsMpirunsDashNp) {
    Options o;
    std::string err;
    ASSERT_EQ(ParseResult::kRun, parse({"-np", "3", "prog"}, &o, &err)) << err;
    EXPECT_EQ(3, o.nranks);
    EXPECT_EQ(std::vector<std::string>{"prog"}, o.argv);
}

TEST(P2prunOptions, RejectsBadInputWithoutTouchingOutput) {
    for (auto args : std::vector<std::vector<std::string>>{
             {"-n", "1025", "p"}, {"-n", "4x", "p"}, {"-n", " 4", "p"}, {"--grace", "nan", "-n", "1", "p"},
             {"--timeout", "inf", "-n", "1", "p"}, {"-x", "1A=b", "-n", "1", "p"},
             {"-x", "A-B=c", "-n", "1", "p"}, {"--master-port", "0", "-n", "1", "p"},
             {"-n", "1", "--no-prefix=1", "p"}, {"-n", "1", "-q", "p"}}) {
        Options o;
        o.nranks = 42;
        std::string err;
        EXPECT_EQ(ParseResult::kError, parse(args, &o, &err)) << args[0] << " " << args[1];
        EXPECT_FALSE(err.empty());
        EXPECT_EQ(42, o.nranks) << "options written on error";
    }
    Options o;
    std::string err;
    EXPECT_EQ(ParseResult::kHelp, parse({"-n", "1", "--help", "p"}, &o, &err));
}

TEST(P2prunLineRelay, WholeLinesWithPrefixAcrossChunks) {
    Sink sink;
    LineRelay relay(&sink.out, "[7] ");
    relay.feed("ab", 2);
    EXPECT_EQ("", sink.take());
    EXPECT_EQ("ab", relay.pending());
    relay.feed("c\nde\n\nf", 7);
    EXPECT_EQ("[7] abc\n[7] de\n[7] \n", sink.take());
    relay.finish();
    EXPECT_EQ("[7] f\n", sink.take());
    relay.finish();  // nothing left: writes nothing
    EXPECT_EQ("", sink.take());
}

TEST(P2prunLineRelay, NoPrefixKeepsBytesExact) {
    Sink sink;
    LineRelay relay(&sink.out, "");
    relay.feed("x\ny", 3);
    relay.finish();
    EXPECT_EQ("x\ny", sink.take());
}

TEST(P2prunLineRelay, OverlongPartialLineIsSplit) {
    Sink sink;
    LineRelay relay(&sink.out, "[0] ");
    std::string big(LineRelay::kMaxLine + 10, 'z');
    relay.feed(big.data(), big.size());
    std::string out = sink.take();
    EXPECT_EQ("[0] " + big + "\n", out);
    EXPECT_TRUE(relay.pending().empty());
}

TEST(P2prunLineRelay, NewlineRightAfterASplitEndsTheCutLine) {
    // The rank wrote 64 KiB + 10 bytes, then (another read) its newline:
    // the cut line got its '\n' already; no empty "[0] " line may follow.
    Sink sink;
    LineRelay relay(&sink.out, "[0] ");
    std::string big(LineRelay::kMaxLine + 10, 'z');
    relay.feed(big.data(), big.size());
    relay.feed("\n", 1);
    relay.feed("next\n", 5);
    relay.finish();
    EXPECT_EQ("[0] " + big + "\n[0] next\n", sink.take());
    // Only the one newline right after the cut is folded into it.
    relay.feed(big.data(), big.size());
    relay.feed("\n\nafter\n", 8);
    EXPECT_EQ("[0] " + big + "\n[0] \n[0] after\n", sink.take());
}

TEST(P2prunLineRelay, OverlongPartialLineWithoutPrefixKeepsBytesExact) {
    Sink sink;
    LineRelay relay(&sink.out, "");
    std::string big(LineRelay::kMaxLine + 10, 'z');
    relay.feed(big.data(), big.size());
    relay.feed("tail", 4);
    relay.finish();
    std::string out = sink.take();
    EXPECT_EQ(big.size() + 4, out.size());
    EXPECT_EQ(std::string::npos, out.find('\n'));
    EXPECT_TRUE(out == big + "tail");
}

TEST(P2prunOutputSink, NeverBlocksOnAFullPipeAndResumesWhenRead) {
    UniqueFd r, w;
    ASSERT_TRUE(make_pipe(&r, &w));  // both ends blocking
    OutputSink sink(w.get());
    std::string data(OutputSink::kLimit + 300000, 'q');
    sink.append(data);
    EXPECT_TRUE(sink.full());
    sink.flush();  // writes what the pipe holds, then returns
    size_t left = sink.pending();
    EXPECT_GT(left, 0u);
    EXPECT_LT(left, data.size());
    std::string got(data.size(), '\0');
    size_t have = 0;
    while (have < data.size()) {
        ssize_t n = ::read(r.get(), &got[have], data.size() - have);
        ASSERT_GT(n, 0);
        have += static_cast<size_t>(n);
        sink.flush();
    }
    EXPECT_EQ(0u, sink.pending());
    EXPECT_EQ(data, got);
}

TEST(P2prunOutputSink, ClosedReaderDropsOutput) {
    UniqueFd r, w;
    ASSERT_TRUE(make_pipe(&r, &w));
    struct sigaction ign {}, old {};
    ign.sa_handler = SIG_IGN;
    ASSERT_EQ(0, ::sigaction(SIGPIPE, &ign, &old));
    OutputSink sink(w.get());
    r.reset();
    sink.append("lost\n");
    sink.flush();
    EXPECT_EQ(0u, sink.pending());
    sink.append("also lost\n");
    EXPECT_EQ(0u, sink.pending());
    ::sigaction(SIGPIPE, &old, nullptr);
}

TEST(P2prunJobEnv, TokenAndPort) {
    std::string err;
    std::string a = make_job_token(&err), b = make_job_token(&err);
    EXPECT_EQ(32u, a.size());
    EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](char c) { return std::strchr("0123456789abcdef", c) != nullptr; })) << a;
    EXPECT_NE(a, b);
    int port = pick_free_loopback_port(&err);
    EXPECT_GT(port, 0) << err;
    EXPECT_LT(port, 65536);
    // Outside the ephemeral range, where nothing binding port 0 or
    // connecting can take it before rank 0 listens.
    FILE *f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    int lo = 0, hi = 0;
    if (f != nullptr && std::fscanf(f, "%d %d", &lo, &hi) == 2 && lo >= 11024) {
        EXPECT_GE(port, 10000);
        EXPECT_LT(port, std::min(lo, 20000));
    }
    if (f != nullptr) std::fclose(f);
}

TEST(P2prunJobEnv, RankEnvironmentScrubsOverridesAndAppliesExtrasLast) {
    const char *base[] = {"PATH=/bin", "P2P_RANK=9", "P2P_MASTER_ADDR=10.0.0.1", "RANK=8",
                          "P2P_MASTER_PORT=9",
                          "P2P_LOG_LEVEL=debug", "WEIRD", "P2P_IF_IP=10.0.0.1",
                          "P2P_IFNAME=eth9", nullptr};
    JobInfo job;
    job.world_size = 4;
    job.master_port = 1234;
    job.store_port = 5678;
    job.job_token = std::string(32, 'a');
    auto env = rank_environment(base, job, 2, {{"FOO", "x=y"}, {"RANK", "5"}});
    auto has = [&](const std::string &e) { return std::count(env.begin(), env.end(), e) == 1; };
    EXPECT_TRUE(has("PATH=/bin"));
    EXPECT_TRUE(has("P2P_LOG_LEVEL=debug"));
    EXPECT_TRUE(has("WORLD_SIZE=4"));
    EXPECT_TRUE(has("LOCAL_RANK=2"));
    EXPECT_TRUE(has("LOCAL_WORLD_SIZE=4"));
    EXPECT_TRUE(has("MASTER_ADDR=127.0.0.1"));
    EXPECT_TRUE(has("P2P_MASTER_PORT=1234")) << "the rendezvous port";
    EXPECT_TRUE(has("MASTER_PORT=5678")) << "PyTorch's, not the rendezvous";
    EXPECT_TRUE(has("P2P_IF_IP=127.0.0.1")) << "rank 0 must listen where MASTER_ADDR points";
    EXPECT_TRUE(has("P2P_JOB_TOKEN=" + job.job_token));
    EXPECT_TRUE(has("P2P_BOOTSTRAP=tcp"));
    EXPECT_TRUE(has("FOO=x=y"));
    EXPECT_TRUE(has("RANK=5")) << "-x must win";
    for (const auto &e : env) {
        EXPECT_NE(0u, e.rfind("P2P_RANK=", 0) == 0 ? 0u : 1u) << e;
        EXPECT_NE(0u, e.rfind("P2P_MASTER_ADDR=", 0) == 0 ? 0u : 1u) << e;
        EXPECT_NE(0u, e.rfind("P2P_IFNAME=", 0) == 0 ? 0u : 1u) << e;
        EXPECT_NE("WEIRD", e);
    }
    EXPECT_EQ(1, std::count_if(env.begin(), env.end(),
                               [](const std::string &e) { return e.rfind("RANK=", 0) == 0; }));
}

TEST(P2prunSignalPipe, SameRequestIsOneSignalFromOneProcessWithinTheWindow) {
    const Received first{SIGTERM, 4242, 1000};
    Received again = first;
    again.at_ns = first.at_ns + kRepeatWindowNs - 1;
    EXPECT_TRUE(same_request(first, again));
    Received late = first;
    late.at_ns = first.at_ns + kRepeatWindowNs;
    EXPECT_FALSE(same_request(first, late));
    Received other_sender = again;
    other_sender.sender = 4243;
    EXPECT_FALSE(same_request(first, other_sender));
    Received other_signal = again;
    other_signal.signo = SIGINT;
    EXPECT_FALSE(same_request(first, other_signal));
    // The kernel (a tty's Ctrl-C) has no sender: each press is a request.
    const Received tty{SIGINT, 0, 1000};
    EXPECT_FALSE(same_request(tty, Received{SIGINT, 0, 1001}));
}

