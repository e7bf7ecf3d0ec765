#include "child_process.h"

#include "signal_pipe.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace p2prun {

namespace {

// posix_spawn attributes and file actions, destroyed on scope exit.
struct SpawnSetup {
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t actions;
    bool attr_ok = false;
    bool actions_ok = false;
    SpawnSetup() {
        attr_ok = posix_spawnattr_init(&attr) == 0;
        actions_ok = posix_spawn_file_actions_init(&actions) == 0;
    }
    ~SpawnSetup() {
        if (actions_ok) {
            posix_spawn_file_actions_destroy(&actions);
        }
        if (attr_ok) {
            posix_spawnattr_destroy(&attr);
        }
    }
    SpawnSetup(const SpawnSetup &) = delete;
    SpawnSetup &operator=(const SpawnSetup &) = delete;
};

std::vector<char *> c_array(const std::vector<std::string> &v) {
    std::vector<char *> out;
    out.reserve(v.size() + 1);
    for (const std::string &s : v) {
        out.push_back(const_cast<char *>(s.c_str()));
    }
    out.push_back(nullptr);
    return out;
}

} // namespace

int ChildProcess::spawn(const std::vector<std::string> &argv,
                        const std::vector<std::string> &env, int out_fd, int err_fd) {
    if (pid_ > 0 || argv.empty()) {
        return EINVAL;
    }
    SpawnSetup s;
    if (!s.attr_ok || !s.actions_ok) {
        return ENOMEM;
    }
    sigset_t defaults, empty;
    SignalPipe::spawn_default_set(&defaults);
    sigemptyset(&empty);
    int rc = 0;
    short flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
    if ((rc = posix_spawnattr_setflags(&s.attr, flags)) != 0 ||
        (rc = posix_spawnattr_setpgroup(&s.attr, 0)) != 0 ||
        (rc = posix_spawnattr_setsigdefault(&s.attr, &defaults)) != 0 ||
        (rc = posix_spawnattr_setsigmask(&s.attr, &empty)) != 0 ||
        (rc = posix_spawn_file_actions_addopen(&s.actions, 0, "/dev/null", O_RDONLY, 0)) != 0 ||
        (rc = posix_spawn_file_actions_adddup2(&s.actions, out_fd, 1)) != 0 ||
        (rc = posix_spawn_file_actions_adddup2(&s.actions, err_fd, 2)) != 0) {
        return rc;
    }
    std::vector<char *> cargv = c_array(argv);
    std::vector<char *> cenv = c_array(env);
    pid_t pid = -1;
    rc = posix_spawnp(&pid, cargv[0], &s.actions, &s.attr, cargv.data(), cenv.data());
    if (rc != 0) {
        return rc;
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

} // namespace p2prun
