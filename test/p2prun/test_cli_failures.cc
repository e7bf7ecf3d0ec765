// p2prun, driven as a binary: which failures it reports when several ranks
// end before it looks, or while it is ending the job.
#include "run_p2prun.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace p2prun_test;

// Ranks that end while p2prun is not running (a busy machine) are reaped in
// one batch. Each was reported only if it came first in a hash map's order,
// and that one's status was the job's: a crash could go unreported behind a
// peer's "exited with status 1". Now every failure of the batch is
// reported, the crash first, and its status is the job's.
TEST(P2prunFailures, RanksEndingTogetherAreAllReportedTheCrashFirst) {
    TempDir dir;
    // Ranks 1-3 wait for `go`; rank 1 crashes, then 2 and 3 fail in turn;
    // rank 0 would run on.
    const std::string go = dir.file("go");
    // Each rank writes its pid before it says it is ready.
    std::string script = "ulimit -c 0; echo $$ > " + dir.path() + "/pid.$RANK; touch " +
                         dir.path() + "/ready.$RANK; "
                         "while [ ! -e " + go + " ]; do sleep 0.01; done; case $RANK in "
                         "1) kill -SEGV $$;; 2) sleep 0.2; exit 5;; 3) sleep 0.4; exit 6;; "
                         "*) sleep 30;; esac";
    P2prun p(dir, {"-n", "4", "sh", "-c", script});
    ASSERT_TRUE(wait_for_files({dir.file("ready.0"), dir.file("ready.1"), dir.file("ready.2"),
                                dir.file("ready.3")},
                               10));
    ASSERT_EQ(0, ::kill(p.pid(), SIGSTOP));
    std::ofstream(go).close();
    // Ranks 1-3 have all ended (zombies: p2prun, stopped, reaps nothing)
    // before p2prun goes on, whatever the machine's load.
    for (int rank = 1; rank <= 3; ++rank) {
        const pid_t pid = read_pid(dir.file("pid." + std::to_string(rank)));
        const double t0 = now_s();
        while (process_state(pid) != 'Z') {
            ASSERT_LT(now_s() - t0, 10.0) << "rank " << rank << " did not end";
            ::usleep(10 * 1000);
        }
    }
    ASSERT_EQ(0, ::kill(p.pid(), SIGCONT));
    Result r = p.wait(15);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(128 + SIGSEGV, r.code) << r.err;
    const std::vector<std::string> lines = split_lines(r.err);
    ASSERT_GE(lines.size(), 3u) << r.err;
    EXPECT_EQ(0u, lines[0].find("p2prun: rank 1 killed by signal 11")) << r.err;
    EXPECT_EQ("p2prun: rank 2 exited with status 5", lines[1]) << r.err;
    EXPECT_EQ("p2prun: rank 3 exited with status 6", lines[2]) << r.err;
    EXPECT_EQ(std::string::npos, r.err.find("rank 0 ")) << "killed by p2prun: " << r.err;
}

// A rank that crashes while p2prun is ending the job (here in its SIGTERM
// handler) died of a signal p2prun never sent: that is reported, though the
// job's status stays the first failure's. Ranks that SIGTERM ended are not.
TEST(P2prunFailures, CrashWhileTheJobEndsIsReported) {
    TempDir dir;
    std::string script = "ulimit -c 0; case $RANK in 0) while [ ! -e " + dir.path() +
                         "/ready.1 ] || [ ! -e " + dir.path() + "/ready.2 ]; do sleep 0.01; "
                         "done; exit 3;; 1) trap 'kill -SEGV $$' TERM; sleep 30 & touch " +
                         dir.path() + "/ready.1; wait;; *) sleep 30 & touch " + dir.path() +
                         "/ready.2; wait;; esac";
    Result r = run(dir, {"-n", "3", "sh", "-c", script});
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(3, r.code) << r.err;
    EXPECT_NE(std::string::npos, r.err.find("p2prun: rank 0 exited with status 3\n")) << r.err;
    EXPECT_NE(std::string::npos, r.err.find("p2prun: rank 1 killed by signal 11")) << r.err;
    EXPECT_EQ(std::string::npos, r.err.find("rank 2")) << r.err;
    EXPECT_LT(r.seconds, 5.0);
}

// `p2prun ... | head`: once the reader has closed the pipe, the job ends as
// a program writing there would, by SIGPIPE (the ranks never write to that
// pipe: p2prun relays their output, and only dropped it, so they ran on).
TEST(P2prunFailures, StdoutReaderGoneEndsTheJob) {
    TempDir dir;
    StdoutPipe pipe;
    ASSERT_GE(pipe.r, 0);
    P2prun p(dir,
             {"-n", "2", "sh", "-c",
              "echo $$ > " + dir.path() + "/tmp.$RANK && mv " + dir.path() + "/tmp.$RANK " +
                  dir.path() + "/pid.$RANK; while :; do echo line; sleep 0.01; done"},
             {}, {}, pipe.w);
    pipe.close_write();
    // Both ranks have written their pids (mv: the file appears whole) before
    // the reader leaves; else the job may end before rank 1 wrote its pid.
    ASSERT_TRUE(wait_for_files({dir.file("pid.0"), dir.file("pid.1")}, 10));
    char buf[16];
    ASSERT_GT(::read(pipe.r, buf, sizeof(buf)), 0);  // like head: a few bytes, then close
    pipe.close_read();
    Result r = p.wait(15);
    ASSERT_FALSE(r.timed_out) << "the ranks ran on after the reader left";
    EXPECT_EQ(128 + SIGPIPE, r.code) << r.err;
    EXPECT_LT(r.seconds, 5.0);
    EXPECT_NE(std::string::npos, r.err.find("p2prun: stdout closed by its reader, ending the job"))
        << r.err;
    for (const char *f : {"pid.0", "pid.1"}) {
        const std::string s = read_file(dir.file(f));
        ASSERT_FALSE(s.empty()) << f;
        EXPECT_TRUE(process_gone(static_cast<pid_t>(std::stol(s)))) << f;
    }
}

// Ctrl-C while p2prun is ending a job a rank failed: p2prun dies of SIGINT
// (it exited with the rank's status, so the shell running it went on with
// its script; see P2prunSignalShell for why the difference matters).
TEST(P2prunFailures, SignalAfterAFailureStillEndsP2prunBySignal) {
    TempDir dir;
    std::string script = "case $RANK in 0) while [ ! -e " + dir.path() +
                         "/ready.1 ]; do sleep 0.01; done; touch " + dir.path() +
                         "/failed.0; exit 3;; *) trap '' TERM; touch " + dir.path() +
                         "/ready.1; sleep 30;; esac";
    P2prun p(dir, {"--grace", "20", "-n", "2", "sh", "-c", script});
    ASSERT_TRUE(wait_for_files({dir.file("failed.0")}, 10));
    // p2prun reaped rank 0 and sent SIGTERM (ignored); a fixed pause was
    // not always long enough on a loaded machine.
    ASSERT_TRUE(p.wait_for_err("rank 0 exited with status 3", 10)) << p.err_so_far();
    ASSERT_EQ(0, ::kill(p.pid(), SIGINT));
    Result r = p.wait(15);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(128 + SIGINT, r.code) << r.err;
    EXPECT_NE(std::string::npos, r.err.find("p2prun: rank 0 exited with status 3\n")) << r.err;
    EXPECT_LT(r.seconds, 10.0) << "the ranks waited for the grace period";
}

// A rank that cannot be started because fork() fails (a process limit)
// is named as such, exit 1, not "cannot run 'sleep'" with 127 as if the
// program were missing. RLIMIT_NPROC binds only an unprivileged user:
// root runs p2prun as nobody with a limit of 4 processes.
TEST(P2prunFailures, ForkFailureNamesTheRank) {
    if (::geteuid() != 0 || std::system("command -v setpriv prlimit >/dev/null 2>&1") != 0) {
        GTEST_SKIP() << "needs root, setpriv and prlimit";
    }
    // A build tree nobody may not enter (mktemp -d: mode 0700, as CI's
    // sanitizer builds) cannot be tested this way.
    const std::string can_run = "cd / && setpriv --reuid=nobody --regid=nogroup "
                                "--clear-groups test -x " + p2prun_path();
    if (std::system(can_run.c_str()) != 0) {
        GTEST_SKIP() << "user nobody cannot run " << p2prun_path();
    }
    TempDir dir;
    const std::string err = dir.file("err");
    const std::string cmd = "cd / && timeout 20 setpriv --reuid=nobody --regid=nogroup "
                            "--clear-groups prlimit --nproc=4 " + p2prun_path() +
                            " -n 6 -- sleep 1 2>" + err;
    const int st = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(st)) << st;
    std::ifstream in(err);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (WEXITSTATUS(st) == 0) {
        GTEST_SKIP() << "the process limit did not bind here: " << text;
    }
    EXPECT_EQ(1, WEXITSTATUS(st)) << text;
    EXPECT_NE(std::string::npos, text.find(": fork: ")) << text;
    EXPECT_NE(std::string::npos, text.find("p2prun: cannot start rank ")) << text;
}
