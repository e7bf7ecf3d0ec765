// p2prun, driven as a binary: what it signals once ranks have been reaped
// (process group ids reused by the kernel).
#include "run_p2prun.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <string>

using namespace p2prun_test;

namespace {

const char kLastPid[] = "/proc/sys/kernel/ns_last_pid";

// A process in a session (so a process group) of its own, not started by
// p2prun; killed and reaped on destruction.
class Stranger {
public:
    ~Stranger() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    // Tries to be given pid `want` (free now) by setting ns_last_pid before
    // each fork; false when other processes kept taking it.
    bool start_as(pid_t want) {
        for (int tries = 0; tries < 200; ++tries) {
            std::ofstream last(kLastPid);
            last << want - 1;
            last.close();
            pid_t pid = ::fork();
            if (pid == 0) {
                ::setsid();
                ::execl("/bin/sleep", "sleep", "30", static_cast<char *>(nullptr));
                ::_exit(127);
            }
            if (pid == want) {
                pid_ = pid;
                return wait_session();
            }
            if (pid > 0) {
                ::kill(pid, SIGKILL);
                ::waitpid(pid, nullptr, 0);
            }
            ::usleep(5000);
        }
        return false;
    }
    pid_t pid() const { return pid_; }
    bool alive() const { return pid_ > 0 && !process_gone(pid_); }

private:
    // Until setsid made it the leader of a group with its pid as id.
    bool wait_session() const {
        for (int i = 0; i < 1000; ++i) {
            if (::getpgid(pid_) == pid_) {
                return true;
            }
            ::usleep(1000);
        }
        return false;
    }
    pid_t pid_ = -1;
};

bool can_set_last_pid() {
    std::ofstream last(kLastPid);
    return last.good();
}

// Until `pid` is reaped by its parent (not even a zombie).
bool wait_reaped(pid_t pid, double deadline_s) {
    double end = now_s() + deadline_s;
    while (!(::kill(pid, 0) != 0 && errno == ESRCH)) {
        if (now_s() > end) {
            return false;
        }
        ::usleep(2000);
    }
    return true;
}

} // namespace

// Rank 0 exits with an empty group, an unrelated process is given its pid
// (the id of rank 0's old group) and starts a group; then rank 1 ends the job
// (a failure: p2prun kills the groups; success: p2prun looks for leftovers).
// The stranger must neither be signalled nor waited for.
class P2prunPidReuse : public ::testing::TestWithParam<int> {};

TEST_P(P2prunPidReuse, StrangerWithTheIdOfAReapedRanksGroupIsLeftAlone) {
    if (!can_set_last_pid()) {
        GTEST_SKIP() << kLastPid << " is not writable";
    }
    const int rank1_code = GetParam();
    TempDir dir;
    std::string fifo = dir.file("go");
    ASSERT_EQ(0, ::mkfifo(fifo.c_str(), 0600));
    // Rank 1 waits on the fifo without starting processes (no pid churn).
    std::string script = "case $RANK in 0) echo $$ > " + dir.file("pid0.tmp") + " && mv " +
                         dir.file("pid0.tmp") + " " + dir.file("pid0") +
                         "; exit 0;; *) read x < " + fifo + "; exit " +
                         std::to_string(rank1_code) + ";; esac";
    P2prun p(dir, {"-n", "2", "--grace", "1", "sh", "-c", script});
    ASSERT_TRUE(wait_for_files({dir.file("pid0")}, 10));
    pid_t pid0 = static_cast<pid_t>(std::stol(read_file(dir.file("pid0"))));
    ASSERT_TRUE(wait_reaped(pid0, 10)) << "rank 0 not reaped";
    Stranger stranger;
    if (!stranger.start_as(pid0)) {
        GTEST_SKIP() << "could not get pid " << pid0 << " for the stranger";
    }
    // Timed from here: the setup above (the stranger's fork tries) takes
    // longer on a loaded machine, and is not p2prun's.
    const double go_at = now_s();
    {
        std::ofstream go(fifo);
        go << "go\n";
    }
    Result r = p.wait(20);
    const double after_go = now_s() - go_at;
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(rank1_code, r.code) << r.err;
    EXPECT_TRUE(stranger.alive()) << "p2prun killed pid " << pid0 << ", not its rank any more";
    EXPECT_LT(after_go, 3.0) << "p2prun waited for the stranger's group";
}

INSTANTIATE_TEST_SUITE_P(RankOneExit, P2prunPidReuse, ::testing::Values(0, 3));
