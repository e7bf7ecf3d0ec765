#include "mp_launch.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace mptest {

namespace {

using Clock = std::chrono::steady_clock;

double left_s(Clock::time_point deadline) {
    return std::chrono::duration<double>(deadline - Clock::now()).count();
}

} // namespace

Launch::Launch(const std::vector<std::string> &argv) {
    int p[2];
    if (argv.empty() || pipe2(p, O_CLOEXEC) != 0) {
        return;
    }
    std::vector<char *> args;
    for (const std::string &a : argv) {
        args.push_back(const_cast<char *>(a.c_str()));
    }
    args.push_back(nullptr);
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return;
    }
    if (pid == 0) {
        setpgid(0, 0);
        dup2(p[1], STDOUT_FILENO);
        dup2(p[1], STDERR_FILENO);
        execv(args[0], args.data());
        std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); // also here: no race with kill_group
    close(p[1]);
    fd_ = p[0];
    pid_ = pid;
}

Launch::~Launch() {
    if (pid_ > 0 && status_ == -2) {
        kill_group();
        waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) {
        close(fd_);
    }
}

void Launch::kill_group() {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
}

bool Launch::fill(double timeout_s) {
    if (eof_ || fd_ < 0) {
        return false;
    }
    struct pollfd pfd = {fd_, POLLIN, 0};
    int ms = timeout_s <= 0 ? 0 : static_cast<int>(timeout_s * 1000) + 1;
    int rc = poll(&pfd, 1, ms);
    if (rc <= 0) {
        return false;
    }
    char buf[4096];
    ssize_t n = read(fd_, buf, sizeof(buf));
    if (n <= 0) {
        if (n < 0 && errno == EINTR) {
            return true;
        }
        eof_ = true;
        return false;
    }
    all_.append(buf, static_cast<size_t>(n));
    pending_.append(buf, static_cast<size_t>(n));
    return true;
}

bool Launch::read_line(std::string *line, double timeout_s) {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout_s));
    for (;;) {
        size_t nl = pending_.find('\n');
        if (nl != std::string::npos) {
            *line = pending_.substr(0, nl);
            pending_.erase(0, nl + 1);
            return true;
        }
        double left = left_s(deadline);
        if (left <= 0 || (!fill(left) && (eof_ || left_s(deadline) <= 0))) {
            if (eof_ && !pending_.empty()) {
                *line = pending_;
                pending_.clear();
                return true;
            }
            return false;
        }
    }
}

int Launch::wait(double timeout_s) {
    if (pid_ <= 0) {
        return -1;
    }
    if (status_ != -2) {
        return status_;
    }
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout_s));
    while (!eof_ && left_s(deadline) > 0) {
        fill(left_s(deadline));
    }
    int st = 0;
    for (;;) {
        pid_t r = waitpid(pid_, &st, WNOHANG);
        if (r == pid_) {
            break;
        }
        if (left_s(deadline) <= 0) {
            kill_group();
            waitpid(pid_, &st, 0);
            status_ = -1;
            all_ += "\n[mp_test: killed after " + std::to_string(timeout_s) +
                    " s without exit]\n";
            return status_;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    status_ = WIFEXITED(st) ? WEXITSTATUS(st)
                            : (WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1);
    return status_;
}

long long cpu_ticks(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string s((std::istreambuf_iterator<char>(f)),
                  std::istreambuf_iterator<char>());
    size_t rp = s.rfind(')'); // the command name may hold spaces
    if (rp == std::string::npos) {
        return -1;
    }
    std::istringstream in(s.substr(rp + 2));
    // Fields after the name: state(3) ppid pgrp session tty tpgid flags
    // minflt cminflt majflt cmajflt utime(14) stime(15).
    std::string tok;
    long long utime = -1, stime = -1;
    for (int field = 3; field <= 15 && (in >> tok); ++field) {
        if (field == 14) {
            utime = std::atoll(tok.c_str());
        } else if (field == 15) {
            stime = std::atoll(tok.c_str());
        }
    }
    return utime < 0 || stime < 0 ? -1 : utime + stime;
}

} // namespace mptest
