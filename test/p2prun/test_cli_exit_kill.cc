// p2prun, driven as a binary: exit status, killing ranks, timeout, signals.
#include "run_p2prun.h"

#include <gtest/gtest.h>

#include <signal.h>

#include <string>

using namespace p2prun_test;

namespace {

pid_t read_pid(const std::string &path) {
    std::string s = read_file(path);
    return s.empty() ? -1 : static_cast<pid_t>(std::stol(s));
}

// Script for `sh -c`: runs `sleep 30` in the background of the rank (a
// grandchild of p2prun), records its pid in DIR/sleep.RANK, and waits.
std::string sleeper(const TempDir &dir) {
    return "sleep 30 & echo $! > " + dir.path() + "/sleep.$RANK.tmp && mv " + dir.path() +
           "/sleep.$RANK.tmp " + dir.path() + "/sleep.$RANK; wait";
}

} // namespace

TEST(P2prunExit, AllZeroIsZero) {
    TempDir dir;
    Result r = run(dir, {"-n", "3", "true"});
    EXPECT_EQ(0, r.code) << r.err;
    EXPECT_EQ("", r.err);
}

TEST(P2prunExit, FirstFailureDecidesAndOthersAreKilledPromptly) {
    TempDir dir;
    // Rank 2 fails once rank 0's and 1's sleepers are running; rank 3 would
    // fail later with another status, but must be killed first.
    std::string script = "case $RANK in 2) while [ ! -e " + dir.file("sleep.1") +
                         " ] || [ ! -e " + dir.file("sleep.0") +
                         " ]; do sleep 0.02; done; exit 3;; 3) sleep 20; exit 4;; *) " +
                         sleeper(dir) + ";; esac";
    Result r = run(dir, {"-n", "4", "sh", "-c", script});
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(3, r.code);
    EXPECT_NE(std::string::npos, r.err.find("p2prun: rank 2 exited with status 3\n")) << r.err;
    EXPECT_EQ(std::string::npos, r.err.find("rank 3")) << r.err;
    EXPECT_LT(r.seconds, 5.0) << "sleeping ranks were not killed promptly";
    for (const char *f : {"sleep.0", "sleep.1"}) {
        pid_t pid = read_pid(dir.file(f));
        ASSERT_GT(pid, 0) << f;
        EXPECT_TRUE(process_gone(pid)) << "grandchild " << pid << " survived";
    }
}

TEST(P2prunExit, RankOutputComesBeforeTheReportOnIt) {
    TempDir dir;
    Result r = run(dir, {"-n", "1", "sh", "-c", "echo out; printf 'last words' >&2; exit 7"});
    EXPECT_EQ(7, r.code);
    EXPECT_EQ("[0] out\n", r.out);
    EXPECT_EQ("[0] last words\np2prun: rank 0 exited with status 7\n", r.err);
}

TEST(P2prunExit, KeepGoingWaitsForAllAndReturnsFirstFailure) {
    TempDir dir;
    std::string done = dir.file("done");
    std::string script = "case $RANK in 0) exit 3;; 1) sleep 0.6; exit 5;; *) sleep 1; touch " +
                         done + ";; esac";
    Result r = run(dir, {"--keep-going", "-n", "3", "sh", "-c", script});
    EXPECT_EQ(3, r.code);
    EXPECT_TRUE(file_exists(done)) << "rank 2 was killed despite --keep-going";
    EXPECT_GE(r.seconds, 0.9);
    EXPECT_NE(std::string::npos, r.err.find("p2prun: rank 0 exited with status 3\n")) << r.err;
    EXPECT_NE(std::string::npos, r.err.find("p2prun: rank 1 exited with status 5\n")) << r.err;
}

TEST(P2prunExit, RankKilledBySignalGives128PlusSigno) {
    TempDir dir;
    Result r = run(dir, {"-n", "2", "sh", "-c", "if [ $RANK = 1 ]; then kill -9 $$; fi; sleep 30"});
    EXPECT_EQ(137, r.code);
    EXPECT_NE(std::string::npos, r.err.find("p2prun: rank 1 killed by signal 9")) << r.err;
    EXPECT_LT(r.seconds, 5.0);
}

TEST(P2prunExit, TimeoutKillsAllAndExits124) {
    TempDir dir;
    Result r = run(dir, {"-n", "2", "--timeout", "0.4", "sh", "-c", sleeper(dir)});
    EXPECT_EQ(124, r.code);
    EXPECT_NE(std::string::npos, r.err.find("p2prun: timeout after 0.4 s\n")) << r.err;
    EXPECT_GE(r.seconds, 0.35);
    EXPECT_LT(r.seconds, 4.0);
    for (const char *f : {"sleep.0", "sleep.1"}) {
        pid_t pid = read_pid(dir.file(f));
        if (pid > 0) {  // may not have been written yet on a loaded machine
            EXPECT_TRUE(process_gone(pid)) << f;
        }
    }
}

TEST(P2prunExit, RanksIgnoringSigtermAreKilledAfterGrace) {
    TempDir dir;
    // The ignored disposition is inherited by the sleep: only SIGKILL helps.
    Result r = run(dir, {"-n", "2", "--timeout", "0.3", "--grace", "0.5", "sh", "-c",
                         "trap '' TERM; " + sleeper(dir)});
    EXPECT_EQ(124, r.code);
    EXPECT_GE(r.seconds, 0.75);
    EXPECT_LT(r.seconds, 4.0);
    EXPECT_NE(std::string::npos, r.err.find("sending SIGKILL")) << r.err;
    for (const char *f : {"sleep.0", "sleep.1"}) {
        pid_t pid = read_pid(dir.file(f));
        if (pid > 0) {
            EXPECT_TRUE(process_gone(pid)) << f;
        }
    }
}

TEST(P2prunExit, LeftoverBackgroundProcessOfASuccessfulRankIsKilled) {
    TempDir dir;
    std::string script = "sleep 30 & echo $! > " + dir.file("bg.$RANK") + "; exit 0";
    Result r = run(dir, {"-n", "2", "sh", "-c", script});
    EXPECT_EQ(0, r.code) << r.err;
    EXPECT_LT(r.seconds, 4.0);
    for (const char *f : {"bg.0", "bg.1"}) {
        pid_t pid = read_pid(dir.file(f));
        ASSERT_GT(pid, 0) << f;
        EXPECT_TRUE(process_gone(pid)) << "orphan " << pid << " left behind";
    }
}

class P2prunSignal : public ::testing::TestWithParam<int> {};

TEST_P(P2prunSignal, ForwardedToRanksAndExitIs128PlusSigno) {
    const int sig = GetParam();
    const std::string name = sig == SIGINT ? "INT" : sig == SIGTERM ? "TERM" : "HUP";
    TempDir dir;
    const int kRanks = 3;
    std::string script = "trap 'echo " + name + " > " + dir.path() +
                         "/got.$RANK; exit 0' " + name + "; " + sleeper(dir);
    P2prun p(dir, {"-n", std::to_string(kRanks), "sh", "-c", script});
    std::vector<std::string> ready;
    for (int r = 0; r < kRanks; ++r) {
        ready.push_back(dir.file("sleep." + std::to_string(r)));
    }
    ASSERT_TRUE(wait_for_files(ready, 10)) << "ranks did not start";
    double sent = now_s();
    ASSERT_EQ(0, ::kill(p.pid(), sig));
    Result r = p.wait(15);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(128 + sig, r.code) << r.err;
    // Well under the 3 s grace: leftovers get SIGTERM as soon as the ranks exit.
    EXPECT_LT(now_s() - sent, 2.5);
    for (int rank = 0; rank < kRanks; ++rank) {
        EXPECT_EQ(name + "\n", read_file(dir.file("got." + std::to_string(rank))))
            << "rank " << rank << " did not see the signal";
        pid_t pid = read_pid(ready[rank]);
        EXPECT_TRUE(process_gone(pid)) << "rank " << rank << "'s sleep survived";
    }
    EXPECT_NE(std::string::npos, r.err.find("received signal " + std::to_string(sig))) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Signals, P2prunSignal, ::testing::Values(SIGTERM, SIGINT, SIGHUP),
                         [](const ::testing::TestParamInfo<int> &info) {
                             return std::string(info.param == SIGINT    ? "SIGINT"
                                                : info.param == SIGTERM ? "SIGTERM"
                                                                        : "SIGHUP");
                         });

TEST(P2prunSignalTwice, SecondSignalKillsWithoutWaitingForGrace) {
    TempDir dir;
    // Ranks ignore SIGINT and SIGTERM: only SIGKILL ends them.
    P2prun p(dir, {"-n", "2", "--grace", "20", "sh", "-c", "trap '' INT TERM; " + sleeper(dir)});
    ASSERT_TRUE(wait_for_files({dir.file("sleep.0"), dir.file("sleep.1")}, 10));
    ASSERT_EQ(0, ::kill(p.pid(), SIGINT));
    ::usleep(200000);
    double second = now_s();
    ASSERT_EQ(0, ::kill(p.pid(), SIGINT));
    Result r = p.wait(15);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(130, r.code) << r.err;
    EXPECT_LT(now_s() - second, 3.0);
    EXPECT_TRUE(process_gone(read_pid(dir.file("sleep.0"))));
    EXPECT_TRUE(process_gone(read_pid(dir.file("sleep.1"))));
}
