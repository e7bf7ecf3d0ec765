/*
 * cma::process_gone, what the liveness checks of same-host peers ask: a
 * live process is not gone, nor pid 0; a zombie whose main thread called
 * pthread_exit while another thread runs on is alive (the peer may still
 * be communicating); a zombie nobody reaped whose threads all ended is
 * gone, and so is a reaped one.
 */
#include "core/cma.h"
#include "../top_dirs.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace ucxp2p;

namespace {

/** The state letter of /proc/pid/stat ('?' when unreadable). */
char proc_state(pid_t pid) {
    char path[48];
    std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
    FILE *f = std::fopen(path, "r");
    if (f == nullptr) return '?';
    char buf[512];
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    const char *paren = std::strrchr(buf, ')');
    return paren != nullptr && paren[1] == ' ' ? paren[2] : '?';
}

/** Poll pred for at most 10 s. */
template <class Pred>
bool eventually(Pred pred) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!pred()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

} // namespace

TEST(ProcessGone, LiveProcessAndPidZeroAreNotGone) {
    EXPECT_FALSE(cma::process_gone(static_cast<uint32_t>(getpid())));
    EXPECT_FALSE(cma::process_gone(0));
}

TEST(ProcessGone, ZombieLeaderWithALiveThreadIsAliveUntilItsThreadsEnd) {
    const std::string helper = p2ptest::top_builddir() + "/test/core/zombie_leader";
    ASSERT_EQ(0, access(helper.c_str(), X_OK)) << helper;
    int fds[2];
    ASSERT_EQ(0, pipe(fds));
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        dup2(fds[0], 0);
        close(fds[0]);
        close(fds[1]);
        execl(helper.c_str(), helper.c_str(), static_cast<char *>(nullptr));
        _exit(127);
    }
    close(fds[0]);
    const uint32_t upid = static_cast<uint32_t>(pid);
    // The main thread ended: a zombie leader, its second thread reading.
    ASSERT_TRUE(eventually([&] { return proc_state(pid) == 'Z'; })) << proc_state(pid);
    EXPECT_FALSE(cma::process_gone(upid)) << "a zombie leader with a live thread is gone";
    close(fds[1]);  // the thread reads end of file and ends the process
    EXPECT_TRUE(eventually([&] { return cma::process_gone(upid); }))
        << "the exited, unreaped process is not gone";
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    EXPECT_TRUE(cma::process_gone(upid));
}
