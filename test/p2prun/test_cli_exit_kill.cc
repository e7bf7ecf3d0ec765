// p2prun, driven as a binary: exit status, killing ranks, timeout, signals.
#include "run_p2prun.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

using namespace p2prun_test;

namespace {

// Script for `sh -c`: runs `sleep 30` in the background of the rank (a
// grandchild of p2prun), records its pid in DIR/sleep.RANK once it has
// exec'd sleep, and waits. Before the exec, the forked shell would take a
// signal as its trap's and lose it, and the sleep would outlive the rank.
std::string sleeper(const TempDir &dir) {
    return "sleep 30 & until read c < /proc/$!/comm && [ \"$c\" = sleep ]; do sleep 0.01; "
           "done; echo $! > " + dir.path() + "/sleep.$RANK.tmp && mv " + dir.path() +
           "/sleep.$RANK.tmp " + dir.path() + "/sleep.$RANK; wait";
}

// "INT" for SIGINT, as sh's trap spells it.
std::string signal_name(int sig) {
    switch (sig) {
    case SIGINT: return "INT";
    case SIGTERM: return "TERM";
    case SIGHUP: return "HUP";
    case SIGQUIT: return "QUIT";
    case SIGALRM: return "ALRM";
    case SIGUSR1: return "USR1";
    case SIGUSR2: return "USR2";
    default: return std::to_string(sig);
    }
}

// Once all `ready` files exist, sends sig to p2prun and waits for it to exit;
// *took: seconds from the signal to then.
Result signal_when_ready(P2prun &p, const std::vector<std::string> &ready, int sig,
                         double *took) {
    EXPECT_TRUE(wait_for_files(ready, 10)) << "ranks did not start";
    double sent = now_s();
    EXPECT_EQ(0, ::kill(p.pid(), sig));
    Result r = p.wait(15);
    *took = now_s() - sent;
    return r;
}

std::string signal_test_name(const ::testing::TestParamInfo<int> &info) {
    return "SIG" + signal_name(info.param);
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

TEST(P2prunExit, AStoppedRankIsContinuedToActOnTheTerm) {
    // Rank 1 stops itself (as under a debugger): at the timeout, the TERM
    // must end it within the grace period, not wait for the SIGKILL.
    TempDir dir;
    Result r = run(dir, {"-n", "2", "--timeout", "0.5", "--grace", "8", "sh", "-c",
                         "[ \"$RANK\" = 1 ] && kill -STOP $$; sleep 20"});
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(124, r.code) << r.err;
    EXPECT_LT(r.seconds, 5.0) << r.err;
    EXPECT_EQ(std::string::npos, r.err.find("sending SIGKILL")) << r.err;
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
    const std::string name = signal_name(sig);
    TempDir dir;
    const int kRanks = 3;
    std::string script = "trap 'echo " + name + " > " + dir.path() +
                         "/got.$RANK; exit 0' " + name + "; " + sleeper(dir);
    P2prun p(dir, {"-n", std::to_string(kRanks), "sh", "-c", script});
    std::vector<std::string> ready;
    for (int r = 0; r < kRanks; ++r) {
        ready.push_back(dir.file("sleep." + std::to_string(r)));
    }
    double took = 0;
    Result r = signal_when_ready(p, ready, sig, &took);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(128 + sig, r.code) << r.err;
    // Well under the 3 s grace: leftovers get SIGTERM as soon as the ranks exit.
    EXPECT_LT(took, 2.5);
    for (int rank = 0; rank < kRanks; ++rank) {
        EXPECT_EQ(name + "\n", read_file(dir.file("got." + std::to_string(rank))))
            << "rank " << rank << " did not see the signal";
        pid_t pid = read_pid(ready[rank]);
        EXPECT_TRUE(process_gone(pid)) << "rank " << rank << "'s sleep survived";
    }
    EXPECT_NE(std::string::npos, r.err.find("received signal " + std::to_string(sig))) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Signals, P2prunSignal,
                         ::testing::Values(SIGTERM, SIGINT, SIGHUP, SIGALRM),
                         signal_test_name);

TEST(P2prunSignalQuit, ForwardedThenRanksAreTerminated) {
    TempDir dir;
    // The ranks only note SIGQUIT (as a program dumping its threads would);
    // the SIGTERM that follows ends them.
    P2prun p(dir, {"-n", "2", signal_rank_path(), dir.path()});
    double took = 0;
    Result r = signal_when_ready(p, {dir.file("ready.0"), dir.file("ready.1")}, SIGQUIT, &took);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(128 + SIGQUIT, r.code) << r.err;
    EXPECT_LT(took, 2.5) << "the ranks did not get SIGTERM";
    for (int rank = 0; rank < 2; ++rank) {
        EXPECT_EQ("QUIT\nTERM\n", read_file(dir.file("got." + std::to_string(rank))))
            << "rank " << rank;
    }
}

// Started with SIGHUP ignored (nohup): a hang-up neither ends the job nor
// reaches the ranks, which inherit the ignored disposition as across exec.
TEST(P2prunSignalIgnored, HangupIgnoredAtStartStaysIgnoredForTheJob) {
    TempDir dir;
    std::string script = "touch " + dir.path() + "/ready.$RANK; while [ ! -e " + dir.path() +
                         "/go ]; do sleep 0.05; done; kill -HUP $$; echo survived";
    P2prun p(dir, {"-n", "2", "sh", "-c", script}, {}, {}, -1, {SIGHUP});
    ASSERT_TRUE(wait_for_files({dir.file("ready.0"), dir.file("ready.1")}, 10));
    ASSERT_EQ(0, ::kill(p.pid(), SIGHUP));
    ::usleep(200 * 1000);  // p2prun would have acted on it by now
    { std::ofstream go(dir.file("go")); }
    Result r = p.wait(15);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(0, r.code) << r.err;
    EXPECT_NE(std::string::npos, r.out.find("[0] survived\n")) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("[1] survived\n")) << r.out;
    EXPECT_EQ(std::string::npos, r.err.find("received signal")) << r.err;
}

class P2prunSignalUser : public ::testing::TestWithParam<int> {};

TEST_P(P2prunSignalUser, ForwardedAndTheJobGoesOn) {
    const int sig = GetParam();
    TempDir dir;
    // After the signal each rank still works a while, then succeeds.
    std::string got = dir.path() + "/got.$RANK";
    std::string script = "trap 'echo " + signal_name(sig) + " > " + got + "' " +
                         signal_name(sig) + "; touch " + dir.path() +
                         "/ready.$RANK; while [ ! -e " + got +
                         " ]; do sleep 0.05; done; sleep 0.3; echo after";
    P2prun p(dir, {"-n", "2", "sh", "-c", script});
    double took = 0;
    Result r = signal_when_ready(p, {dir.file("ready.0"), dir.file("ready.1")}, sig, &took);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(0, r.code) << r.err;
    EXPECT_NE(std::string::npos, r.out.find("[0] after\n")) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("[1] after\n")) << r.out;
    EXPECT_NE(std::string::npos, r.err.find("received signal " + std::to_string(sig)))
        << r.err;
}

INSTANTIATE_TEST_SUITE_P(Signals, P2prunSignalUser, ::testing::Values(SIGUSR1, SIGUSR2),
                         signal_test_name);

TEST(P2prunExit, ProcessThatLeftTheRanksGroupIsKilledAtTheEnd) {
    TempDir dir;
    // setsid: out of the rank's group, still a descendant of p2prun.
    Result r = run(dir, {"-n", "1", "sh", "-c",
                         "setsid sleep 41 & echo $! > " + dir.file("bg") + "; exit 0"});
    EXPECT_EQ(0, r.code) << r.err;
    EXPECT_LT(r.seconds, 4.0);
    pid_t pid = read_pid(dir.file("bg"));
    ASSERT_GT(pid, 0);
    EXPECT_TRUE(process_gone(pid)) << "pid " << pid << " outlived p2prun";
}

// SIGKILL cannot be handled: the ranks end through their parent-death
// signal, not through anything p2prun does.
TEST(P2prunExit, RanksDieWithAP2prunKilledByForce) {
    TempDir dir;
    // exec: the recorded pid is the sleeping rank itself.
    const std::string script = "echo $$ > " + dir.file("rank.$RANK.tmp") + " && mv " +
                               dir.file("rank.$RANK.tmp") + " " + dir.file("rank.$RANK") +
                               " && exec sleep 43";
    P2prun p(dir, {"-n", "2", "sh", "-c", script});
    ASSERT_TRUE(wait_for_files({dir.file("rank.0"), dir.file("rank.1")}, 10));
    const pid_t ranks[] = {read_pid(dir.file("rank.0")), read_pid(dir.file("rank.1"))};
    ASSERT_EQ(0, ::kill(p.pid(), SIGKILL));
    Result r = p.wait(5);
    EXPECT_EQ(128 + SIGKILL, r.code);
    for (pid_t pid : ranks) {
        ASSERT_GT(pid, 0);
        double t0 = now_s();
        while (!process_gone(pid) && now_s() - t0 < 5) ::usleep(10000);
        EXPECT_TRUE(process_gone(pid)) << "rank pid " << pid << " outlived p2prun";
        if (!process_gone(pid)) ::kill(pid, SIGKILL);  // leave no orphan behind
    }
}

namespace {

// Sends sig to pid from a process of its own, as a second `kill` command
// would (a second request, not the first one repeated).
void kill_from_another_process(pid_t pid, int sig) {
    pid_t k = ::fork();
    ASSERT_GE(k, 0);
    if (k == 0) ::_exit(::kill(pid, sig) == 0 ? 0 : 1);
    int status = 0;
    ASSERT_EQ(k, ::waitpid(k, &status, 0));
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// The second SIGINT comes from another process (second_after_s == 0), or
// from the same one after more than a second: either is a second request.
void expect_second_signal_kills(double second_after_s) {
    TempDir dir;
    // Ranks ignore SIGINT and SIGTERM: only SIGKILL ends them.
    P2prun p(dir, {"-n", "2", "--grace", "20", "sh", "-c", "trap '' INT TERM; " + sleeper(dir)});
    ASSERT_TRUE(wait_for_files({dir.file("sleep.0"), dir.file("sleep.1")}, 10));
    ASSERT_EQ(0, ::kill(p.pid(), SIGINT));
    // Once p2prun reports the first, it has taken it: a second sent before
    // that could merge with it in the kernel (a fixed 200 ms pause was
    // not always enough on a loaded machine), and the repeat window counts
    // from when p2prun took it.
    ASSERT_TRUE(p.wait_for_err("received signal 2", 10)) << p.err_so_far();
    double second = 0;
    if (second_after_s > 0) {
        ::usleep(static_cast<useconds_t>(second_after_s * 1e6));
        second = now_s();
        ASSERT_EQ(0, ::kill(p.pid(), SIGINT));
    } else {
        second = now_s();
        kill_from_another_process(p.pid(), SIGINT);
    }
    Result r = p.wait(15);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(130, r.code) << r.err;
    EXPECT_LT(now_s() - second, 3.0);
    // The report says why SIGKILL came early, not that the grace ran out.
    EXPECT_EQ(std::string::npos, r.err.find("after 20 s")) << r.err;
    EXPECT_NE(std::string::npos, r.err.find("on a second signal, sending SIGKILL")) << r.err;
    EXPECT_TRUE(process_gone(read_pid(dir.file("sleep.0"))));
    EXPECT_TRUE(process_gone(read_pid(dir.file("sleep.1"))));
}

} // namespace

TEST(P2prunSignalTwice, SecondSignalKillsWithoutWaitingForGrace) {
    expect_second_signal_kills(0);
}

TEST(P2prunSignalTwice, SameProcessSignallingAgainLaterIsASecondSignal) {
    // Past the 1 s repeat window, counted from when p2prun reported the
    // first signal.
    expect_second_signal_kills(1.5);
}

// timeout(1) sends SIGTERM to p2prun, then to its own process group, which
// p2prun is in: one request, which must not cut the grace period short.
TEST(P2prunSignalTwice, OneRequestDeliveredTwiceIsOneSignal) {
    TempDir dir;
    const std::string got = dir.path() + "/got.$RANK";
    const std::string script = "trap 'touch " + got + "; sleep 1; echo finished; exit 3' TERM; " +
                               sleeper(dir);
    P2prun p(dir, {"-n", "2", "--grace", "20", "sh", "-c", script}, {}, {}, -1, {}, true);
    ASSERT_TRUE(wait_for_files({dir.file("sleep.0"), dir.file("sleep.1")}, 10));
    ASSERT_EQ(0, ::kill(p.pid(), SIGTERM));
    // Once p2prun reports it, it has taken the first delivery: the second
    // cannot merge with it in the kernel. (Not the ranks' files: a loaded
    // machine may take longer than the 1 s repeat window to run their
    // traps, and the second delivery must come within it.)
    ASSERT_TRUE(p.wait_for_err("received signal 15", 10)) << p.err_so_far();
    ASSERT_EQ(0, ::kill(-p.pid(), SIGTERM));  // p2prun's group: p2prun alone
    Result r = p.wait(15);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(128 + SIGTERM, r.code) << r.err;
    EXPECT_EQ(std::string::npos, r.err.find("second signal")) << r.err;
    EXPECT_EQ(r.err.find("received signal 15"), r.err.rfind("received signal 15")) << r.err;
    EXPECT_NE(std::string::npos, r.out.find("[0] finished\n")) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("[1] finished\n")) << r.out;
}

// Ctrl-Z: the shell stops p2prun's group, which the ranks, in groups of their
// own, are not part of. p2prun stops them with itself and resumes them when it
// is continued, as a job run in the foreground would be.
TEST(P2prunSignalStop, SuspendsAndResumesTheRanks) {
    TempDir dir;
    // exec: the recorded pid is the sleeping rank, which forks nothing (a
    // shell stopped in vfork would show 'D', not 'T').
    const std::string script = "echo $$ > " + dir.file("rank.$RANK.tmp") + " && mv " +
                               dir.file("rank.$RANK.tmp") + " " + dir.file("rank.$RANK") +
                               " && exec sleep 60";
    P2prun p(dir, {"-n", "2", "sh", "-c", script}, {}, {}, -1, {}, true);
    ASSERT_TRUE(wait_for_files({dir.file("rank.0"), dir.file("rank.1")}, 10));
    const pid_t procs[] = {p.pid(), read_pid(dir.file("rank.0")), read_pid(dir.file("rank.1"))};
    // Waits (bounded) until every one of procs is stopped (or none is).
    auto wait_all = [&](bool stopped) {
        double t0 = now_s();
        for (;;) {
            bool all = true;
            for (pid_t pid : procs) {
                all = all && (process_state(pid) == 'T') == stopped;
            }
            if (all || now_s() - t0 > 10) return all;
            ::usleep(10000);
        }
    };
    ASSERT_EQ(0, ::kill(p.pid(), SIGTSTP));
    EXPECT_TRUE(wait_all(true)) << "p2prun " << process_state(procs[0]) << ", ranks "
                                << process_state(procs[1]) << process_state(procs[2]);
    ASSERT_EQ(0, ::kill(p.pid(), SIGCONT));
    EXPECT_TRUE(wait_all(false)) << "p2prun " << process_state(procs[0]) << ", ranks "
                                 << process_state(procs[1]) << process_state(procs[2]);
    ASSERT_EQ(0, ::kill(p.pid(), SIGTERM));
    Result r = p.wait(20);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(128 + SIGTERM, r.code) << r.err;
}

// A terminal's Ctrl-C sends SIGINT to its foreground group: the shell running
// a script and the p2prun it waits for. bash then goes on with the script
// unless that child died of the signal (it takes an exit status of 130 for a
// program that handled SIGINT and went on), so p2prun must end by the
// signal itself for Ctrl-C to stop a script that runs jobs in a loop.
TEST(P2prunSignalShell, CtrlCStopsTheScriptThatRunsP2prun) {
    TempDir dir;
    const std::string script =
        "for i in 1 2; do I=$i \"$P\" -n 1 sh -c 'touch \"$D/started.$I\"; exec sleep 5'; "
        "done; touch \"$D/after\"";
    pid_t bash = ::fork();
    ASSERT_GE(bash, 0);
    if (bash == 0) {
        ::setpgid(0, 0);  // the terminal's foreground job
        ::setenv("P", p2prun_path().c_str(), 1);
        ::setenv("D", dir.path().c_str(), 1);
        for (int sig : {SIGINT, SIGQUIT}) signal(sig, SIG_DFL);
        ::execlp("bash", "bash", "-c", script.c_str(), static_cast<char *>(nullptr));
        ::_exit(127);
    }
    bool started = wait_for_files({dir.file("started.1")}, 10);
    if (started) {
        ::kill(-bash, SIGINT);  // Ctrl-C
    }
    int status = 0;
    double t0 = now_s();
    while (::waitpid(bash, &status, WNOHANG) == 0) {
        if (now_s() - t0 > 20) {
            ::kill(-bash, SIGKILL);
            ::waitpid(bash, &status, 0);
            break;
        }
        ::usleep(10000);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        GTEST_SKIP() << "no bash";
    }
    ASSERT_TRUE(started) << "the first job did not start";
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT)
        << "bash did not end by SIGINT: status " << status;
    EXPECT_FALSE(file_exists(dir.file("started.2"))) << "the loop went on after Ctrl-C";
    EXPECT_FALSE(file_exists(dir.file("after"))) << "the script went on after Ctrl-C";
}

// p2prun raises its own soft limit on open files to hold two pipes per rank;
// the ranks get the user's limit, not p2prun's (a program using select()
// relies on a soft limit of at most 1024, FD_SETSIZE).
TEST(P2prunLimits, RanksKeepTheOpenFileLimitP2prunWasGiven) {
    TempDir dir;
    struct rlimit saved;
    ASSERT_EQ(0, ::getrlimit(RLIMIT_NOFILE, &saved));
    const int kRanks = 60;  // p2prun needs more than 2 * 60 descriptors
    if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < 2 * kRanks + 64) {
        GTEST_SKIP() << "hard limit on open files too low";
    }
    struct rlimit low = saved;
    low.rlim_cur = 64;
    ASSERT_EQ(0, ::setrlimit(RLIMIT_NOFILE, &low));  // inherited by p2prun
    P2prun p(dir, {"-n", std::to_string(kRanks), "--no-prefix", "sh", "-c", "ulimit -n"});
    ASSERT_EQ(0, ::setrlimit(RLIMIT_NOFILE, &saved));
    Result r = p.wait(60);
    ASSERT_FALSE(r.timed_out);
    ASSERT_EQ(0, r.code) << r.err;
    std::string expected;
    for (int i = 0; i < kRanks; ++i) {
        expected += "64\n";
    }
    EXPECT_EQ(expected, r.out);
}

// A zombie is dead: one left in a rank's group by a parent that moved out
// of the group (setsid) and never reaps it is no process to wait for.
TEST(P2prunExit, ZombieLeftInARanksGroupDoesNotHoldTheJob) {
    TempDir dir;
    const std::string d = dir.path();
    // The rank's child forks `sleep 30` (in the rank's group), leaves the
    // group with setsid and sleeps on without reaping it; once it has left,
    // the rank exits. The group's sleep, killed, stays a zombie.
    const std::string script =
        "sh -c 'sleep 30 & echo $! > " + d + "/b; exec setsid sh -c \"echo \\$\\$ > " + d +
        "/a.tmp && mv " + d + "/a.tmp " + d + "/a; exec sleep 60\"' & until [ -e " + d +
        "/a ]; do sleep 0.02; done; exit 0";
    P2prun p(dir, {"-n", "1", "--grace", "20", "sh", "-c", script});
    Result r = p.wait(60);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(0, r.code) << r.err;
    EXPECT_LT(r.seconds, 15.0) << "waited out the grace period for a zombie";
    EXPECT_EQ(std::string::npos, r.err.find("did not die")) << r.err;
    for (const char *f : {"a", "b"}) {
        pid_t pid = read_pid(dir.file(f));
        ASSERT_GT(pid, 0) << f;
        EXPECT_TRUE(process_gone(pid)) << f << " (pid " << pid << ") outlived p2prun";
    }
}
