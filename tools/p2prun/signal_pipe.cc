#include "signal_pipe.h"

#include <time.h>

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

bool same_request(const Received &prev, const Received &cur) {
    return prev.signo == cur.signo && prev.sender > 0 && prev.sender == cur.sender &&
           cur.at_ns >= prev.at_ns && cur.at_ns - prev.at_ns < kRepeatWindowNs;
}

void SignalPipe::handler(int signo, siginfo_t *info, void *) {
    int saved_errno = errno;
    Received r;
    r.signo = signo;
    // si_code <= 0: sent by a process (SI_USER, SI_QUEUE, SI_TKILL), whose
    // pid is in si_pid; above 0 the kernel sent it (a tty's Ctrl-C, or
    // SIGCHLD, where si_pid is the child).
    r.sender = info != nullptr && info->si_code <= 0 ? info->si_pid : 0;
    struct timespec ts;
    if (::clock_gettime(CLOCK_MONOTONIC, &ts) == 0) {
        r.at_ns = int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    }
    // One write of a whole record (below PIPE_BUF: never split between
    // writers). Non-blocking: when the pipe is full, enough wake-ups are
    // pending.
    ssize_t rc = ::write(g_write_fd, &r, sizeof(r));
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
    sa.sa_sigaction = &SignalPipe::handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NOCLDSTOP;
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

std::vector<Received> SignalPipe::drain() {
    std::vector<Received> got;
    unsigned char buf[64 * sizeof(Received)];
    for (;;) {
        std::memcpy(buf, partial_, partial_len_);
        ssize_t n = ::read(read_end_.get(), buf + partial_len_, sizeof(buf) - partial_len_);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        size_t have = partial_len_ + static_cast<size_t>(n);
        size_t whole = have - have % sizeof(Received);
        for (size_t off = 0; off < whole; off += sizeof(Received)) {
            Received r;
            std::memcpy(&r, buf + off, sizeof(r));
            got.push_back(r);
        }
        partial_len_ = have - whole;
        std::memcpy(partial_, buf + whole, partial_len_);
    }
    return got;
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
