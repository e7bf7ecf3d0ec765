#include "run_p2prun.h"

#include "../top_dirs.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace p2prun_test {

std::string p2prun_path() {
    return p2ptest::top_builddir() + "/tools/p2prun/p2prun";
}

std::string signal_rank_path() {
    return p2ptest::top_builddir() + "/test/p2prun/signal_rank";
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

TempDir::TempDir() {
    const char *tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                        "/p2prun_test.XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) {
        throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
    }
    path_ = buf.data();
}

TempDir::~TempDir() {
    std::string cmd = "rm -rf '" + path_ + "'";
    int rc = std::system(cmd.c_str());
    (void)rc;
}

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

bool file_exists(const std::string &path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

bool wait_for_files(const std::vector<std::string> &paths, double deadline_s) {
    double end = now_s() + deadline_s;
    for (;;) {
        bool all = true;
        for (const auto &p : paths) {
            all = all && file_exists(p);
        }
        if (all) {
            return true;
        }
        if (now_s() > end) {
            return false;
        }
        ::usleep(10000);
    }
}

bool process_gone(pid_t pid) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) {
        return true;
    }
    // A zombie waiting for a reaper other than p2prun (e.g. init) is dead too.
    return process_state(pid) == 'Z';
}

pid_t read_pid(const std::string &path) {
    std::string s = read_file(path);
    return s.empty() ? -1 : static_cast<pid_t>(std::stol(s));
}

char process_state(pid_t pid) {
    std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    size_t paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : 0;
}

std::vector<std::string> split_lines(const std::string &text) {
    std::vector<std::string> lines;
    std::string cur;
    for (char c : text) {
        if (c == '\n') {
            lines.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (!cur.empty()) {
        lines.push_back(cur);
    }
    return lines;
}

P2prun::P2prun(const TempDir &dir, const std::vector<std::string> &args,
               const std::vector<std::string> &env, const std::vector<std::string> &unset,
               int stdout_fd, const std::vector<int> &ignored, bool own_group) {
    static int seq = 0;
    ++seq;
    out_path_ = dir.file("p2prun.out." + std::to_string(seq));
    err_path_ = dir.file("p2prun.err." + std::to_string(seq));
    std::string prog = p2prun_path();
    std::vector<std::string> argv_s{prog};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char *> argv;
    for (auto &a : argv_s) {
        argv.push_back(const_cast<char *>(a.c_str()));
    }
    argv.push_back(nullptr);
    start_ = now_s();
    pid_ = ::fork();
    if (pid_ < 0) {
        throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    }
    if (pid_ == 0) {
        int out = stdout_fd >= 0 ? stdout_fd
                                 : ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) {
            ::_exit(250);
        }
        for (const auto &e : env) {
            size_t eq = e.find('=');
            ::setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
        }
        for (const auto &u : unset) {
            ::unsetenv(u.c_str());
        }
        // The signals p2prun handles start at their defaults, whatever the
        // test runner inherited (under nohup or a script's `&`, p2prun keeps
        // ignoring what it was started ignoring), then those the test wants
        // ignored.
        for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGALRM, SIGUSR1, SIGUSR2, SIGTSTP}) {
            signal(sig, SIG_DFL);
        }
        for (int sig : ignored) {
            signal(sig, SIG_IGN);
        }
        if (own_group) {
            ::setpgid(0, 0);
        }
        ::execv(argv[0], argv.data());
        ::_exit(251);
    }
}

std::string P2prun::err_so_far() const { return read_file(err_path_); }

bool P2prun::wait_for_err(const std::string &text, double deadline_s) const {
    const double t0 = now_s();
    while (err_so_far().find(text) == std::string::npos) {
        if (now_s() - t0 > deadline_s) return false;
        ::usleep(5 * 1000);
    }
    return true;
}

Result P2prun::wait(double deadline_s) {
    Result r;
    if (pid_ <= 0) {
        return r;
    }
    double end = start_ + deadline_s;
    int status = 0;
    for (;;) {
        pid_t w = ::waitpid(pid_, &status, WNOHANG);
        if (w == pid_) {
            break;
        }
        if (w < 0 && errno != EINTR) {
            break;
        }
        if (now_s() > end) {
            r.timed_out = true;
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, &status, 0);
            break;
        }
        ::usleep(5000);
    }
    r.seconds = now_s() - start_;
    pid_ = -1;
    r.code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    r.out = read_file(out_path_);
    r.err = read_file(err_path_);
    return r;
}

P2prun::~P2prun() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
    }
}

Result run(const TempDir &dir, const std::vector<std::string> &args,
           const std::vector<std::string> &env, double deadline_s) {
    P2prun p(dir, args, env);
    return p.wait(deadline_s);
}

StdoutPipe::StdoutPipe() { EXPECT_EQ(0, ::pipe2(&r, O_CLOEXEC)); }

StdoutPipe::~StdoutPipe() {
    close_write();
    close_read();
}

void StdoutPipe::close_write() {
    if (w >= 0) {
        ::close(w);
        w = -1;
    }
}

void StdoutPipe::close_read() {
    if (r >= 0) {
        ::close(r);
        r = -1;
    }
}

size_t StdoutPipe::count_lines() {
    size_t lines = 0;
    char buf[65536];
    ssize_t n;
    while ((n = ::read(r, buf, sizeof(buf))) > 0) {
        lines += static_cast<size_t>(std::count(buf, buf + n, '\n'));
    }
    return lines;
}

} // namespace p2prun_test
