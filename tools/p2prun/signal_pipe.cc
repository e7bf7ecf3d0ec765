#include "signal_pipe.h"

#include <cerrno>
#include <cstring>

namespace p2prun {

namespace {

// Every signal that is commonly sent to a job and would otherwise end (or stop) p2prun
// and leave the ranks, which run in groups of their own, behind.
const int kCaught[] = {SIGCHLD, SIGINT,  SIGTERM, SIGHUP, SIGQUIT,
                       SIGALRM, SIGUSR1, SIGUSR2, SIGTSTP};
int g_write_fd = -1;  // for the async-signal handler only
// Signals ignored when p2prun started (nohup, `&` in a script): they stay
// ignored, for p2prun and the ranks, as they would across an exec.
sigset_t g_inherited_ignored;

} // namespace

void SignalPipe::handler(int signo) {
    int saved_errno = errno;
    unsigned char b = static_cast<unsigned char>(signo);
    // Non-blocking: when the pipe is full, enough wake-ups are pending.
    ssize_t rc = ::write(g_write_fd, &b, 1);
    (void)rc;
    errno = saved_errno;
}

bool SignalPipe::install(std::string *error) {
    if (g_write_fd >= 0) {
        *error = "signal pipe already installed";
        return false;
    }
    if (!make_pipe(&read_end_, &write_end_) || !set_nonblocking(read_end_.get()) ||
        !set_nonblocking(write_end_.get())) {
        *error = std::string("signal pipe: ") + std::strerror(errno);
        return false;
    }
    g_write_fd = write_end_.get();
    installed_ = true;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = &SignalPipe::handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&g_inherited_ignored);
    for (int sig : kCaught) {
        struct sigaction old;
        if (::sigaction(sig, nullptr, &old) != 0) {
            *error = std::string("sigaction: ") + std::strerror(errno);
            return false;
        }
        if (old.sa_handler == SIG_IGN && sig != SIGCHLD) {  // SIGCHLD: reaping needs it
            sigaddset(&g_inherited_ignored, sig);
            continue;
        }
        if (::sigaction(sig, &sa, &old) != 0) {
            *error = std::string("sigaction: ") + std::strerror(errno);
            return false;
        }
        saved_.emplace_back(sig, old);
    }
    struct sigaction ign;
    std::memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    struct sigaction old;
    if (::sigaction(SIGPIPE, &ign, &old) != 0) {
        *error = std::string("sigaction: ") + std::strerror(errno);
        return false;
    }
    saved_.emplace_back(SIGPIPE, old);
    if (old.sa_handler == SIG_IGN) {
        sigaddset(&g_inherited_ignored, SIGPIPE);
    }
    return true;
}

SignalPipe::~SignalPipe() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
        ::sigaction(it->first, &it->second, nullptr);
    }
    if (installed_) {
        g_write_fd = -1;
    }
}

void SignalPipe::stop_self() {
    struct sigaction dfl, old;
    std::memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    if (::sigaction(SIGTSTP, &dfl, &old) != 0) {
        return;
    }
    // Delivered before raise returns: the kernel stops p2prun here, or
    // discards it when no shell is left to continue the group (orphaned).
    ::raise(SIGTSTP);
    ::sigaction(SIGTSTP, &old, nullptr);
}

std::vector<int> SignalPipe::drain() {
    std::vector<int> sigs;
    unsigned char buf[64];
    for (;;) {
        ssize_t n = ::read(read_end_.get(), buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        for (ssize_t i = 0; i < n; ++i) {
            sigs.push_back(buf[i]);
        }
    }
    return sigs;
}

void SignalPipe::spawn_default_set(sigset_t *set) {
    sigemptyset(set);
    for (int sig : kCaught) {
        sigaddset(set, sig);
    }
    sigaddset(set, SIGPIPE);
    for (int sig = 1; sig < NSIG; ++sig) {
        if (sigismember(&g_inherited_ignored, sig) == 1) {
            sigdelset(set, sig);
        }
    }
}

} // namespace p2prun
