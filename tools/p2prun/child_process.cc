#include "child_process.h"

#include "signal_pipe.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace p2prun {

namespace {

std::vector<char *> c_array(const std::vector<std::string> &v) {
    std::vector<char *> out;
    out.reserve(v.size() + 1);
    for (const std::string &s : v) {
        out.push_back(const_cast<char *>(s.c_str()));
    }
    out.push_back(nullptr);
    return out;
}

// Blocks every signal for its scope: a handler of p2prun's must not run in
// a child that has not reset it yet (it would write to p2prun's signal pipe).
class AllSignalsBlocked {
public:
    AllSignalsBlocked() {
        sigset_t all;
        sigfillset(&all);
        ::sigprocmask(SIG_SETMASK, &all, &saved_);
    }
    ~AllSignalsBlocked() { ::sigprocmask(SIG_SETMASK, &saved_, nullptr); }
    AllSignalsBlocked(const AllSignalsBlocked &) = delete;
    AllSignalsBlocked &operator=(const AllSignalsBlocked &) = delete;

private:
    sigset_t saved_;
};

// Makes `fd` the descriptor `target` of the new program (dup2 keeps the
// close-on-exec flag when they are already the same).
bool place_fd(int fd, int target) {
    if (fd == target) {
        return ::fcntl(fd, F_SETFD, 0) == 0;
    }
    return ::dup2(fd, target) == target;
}

// The child between fork and exec: async-signal-safe calls only. Reports
// the errno of a failure on report_fd and exits 127; on success the exec
// closes report_fd (close-on-exec) and the parent reads nothing.
[[noreturn]] void exec_child(pid_t parent, const sigset_t &defaults, char *const argv[],
                             char *const envp[], int out_fd, int err_fd,
                             const struct rlimit *nofile, int report_fd) {
    int err = 0;
    // The rank dies with p2prun even when p2prun cannot act (SIGKILL, the
    // OOM killer): SIGKILL, because nobody is left to escalate from a
    // SIGTERM the rank ignores. The death signal survives the exec; the
    // getppid check closes the window in which p2prun died before prctl.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
        err = errno;
    } else if (::getppid() != parent) {
        err = ESRCH;
    } else if (::setpgid(0, 0) != 0) {
        err = errno;
    }
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; err == 0 && sig < NSIG; ++sig) {
        if (sigismember(&defaults, sig) == 1) ::sigaction(sig, &dfl, nullptr);
    }
    sigset_t empty;
    sigemptyset(&empty);
    if (err == 0) {
        int null_fd = ::open("/dev/null", O_RDONLY);
        if (null_fd < 0 || !place_fd(null_fd, 0) || !place_fd(out_fd, 1) ||
            !place_fd(err_fd, 2)) {
            err = errno;
        } else {
            if (null_fd != 0) ::close(null_fd);
            // The user's limit last: p2prun's open fds may exceed it.
            if (nofile != nullptr && ::setrlimit(RLIMIT_NOFILE, nofile) != 0) {
                err = errno;
            } else {
                ::sigprocmask(SIG_SETMASK, &empty, nullptr);
                // execvpe searches the PATH of the caller's environment:
                // make that the rank's, so `-x PATH=...` (or --export)
                // decides where the program is found, as with mpirun.
                environ = const_cast<char **>(envp);
                ::execvpe(argv[0], argv, envp);
                err = errno;
            }
        }
    }
    ssize_t w;
    do {
        w = ::write(report_fd, &err, sizeof(err));
    } while (w < 0 && errno == EINTR);
    ::_exit(127);
}

} // namespace

int ChildProcess::spawn(const std::vector<std::string> &argv,
                        const std::vector<std::string> &env, int out_fd, int err_fd,
                        const struct rlimit *nofile) {
    if (pid_ > 0 || argv.empty()) {
        return EINVAL;
    }
    sigset_t defaults;
    SignalPipe::spawn_default_set(&defaults);
    std::vector<char *> cargv = c_array(argv);
    std::vector<char *> cenv = c_array(env);
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) {
        return errno;
    }
    const pid_t parent = ::getpid();
    pid_t pid;
    int fork_err = 0;
    {
        AllSignalsBlocked blocked;
        pid = ::fork();
        if (pid == 0) {
            ::close(report[0]);
            exec_child(parent, defaults, cargv.data(), cenv.data(), out_fd, err_fd, nofile,
                       report[1]);
        }
        fork_err = errno;
    }
    ::close(report[1]);
    if (pid < 0) {
        ::close(report[0]);
        fork_failed_ = true;
        return fork_err;
    }
    int child_err = 0;
    ssize_t n;
    do {
        n = ::read(report[0], &child_err, sizeof(child_err));
    } while (n < 0 && errno == EINTR);
    ::close(report[0]);
    if (n == static_cast<ssize_t>(sizeof(child_err))) {
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        return child_err != 0 ? child_err : ECHILD;
    }
    pid_ = pid;
    return 0;
}

void ChildProcess::set_reaped(int status, bool others_in_group) {
    reaped_ = true;
    status_ = status;
    group_gone_ = group_gone_ || !others_in_group;
}

void ChildProcess::signal_group(int sig) {
    if (pid_ <= 0 || group_gone_) {
        return;
    }
    if (::kill(-pid_, sig) != 0 && errno == ESRCH) {
        group_gone_ = true;
    }
}

ChildProcess::~ChildProcess() {
    if (pid_ <= 0 || reaped_) {
        return;  // a reaped rank's leftovers are the launcher's to kill
    }
    signal_group(SIGKILL);
    // Bounded: a process stuck in an uninterruptible sleep is left to init
    // rather than hanging p2prun.
    for (int i = 0; i < 200 && !reaped_; ++i) {
        int status = 0;
        pid_t r = ::waitpid(pid_, &status, WNOHANG);
        if (r == pid_ || (r < 0 && errno != EINTR)) {
            break;
        }
        ::usleep(10000);
    }
}

int exit_code_of(int wait_status) {
    if (WIFSIGNALED(wait_status)) {
        return 128 + WTERMSIG(wait_status);
    }
    if (WIFEXITED(wait_status)) {
        return WEXITSTATUS(wait_status);
    }
    return 1;
}

std::string describe_wait_status(int wait_status) {
    if (WIFSIGNALED(wait_status)) {
        int sig = WTERMSIG(wait_status);
        const char *name = ::strsignal(sig);
        return "killed by signal " + std::to_string(sig) +
               (name != nullptr ? std::string(" (") + name + ")" : std::string());
    }
    return "exited with status " + std::to_string(exit_code_of(wait_status));
}

bool ensure_fd_limit(int nranks, std::string *error, bool *raised, struct rlimit *saved) {
    rlim_t need = static_cast<rlim_t>(nranks) * 2 + 32;
    struct rlimit rl;
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        return true;  // try anyway
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
            *error = "open file limit (" + std::to_string(rl.rlim_max) + ") too low for " +
                     std::to_string(nranks) + " ranks";
            return false;
        }
        *saved = rl;
        rl.rlim_cur = need;
        if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            *error = std::string("setrlimit: ") + std::strerror(errno);
            return false;
        }
        *raised = true;
    }
    return true;
}

} // namespace p2prun
