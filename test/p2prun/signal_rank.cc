// A rank for p2prun's signal tests whose handling of signals is exact, unlike
// a shell's (dash can lose one of two signals that arrive together, and a
// background job forked but not yet exec'd swallows a signal meant for it).
//
// Usage: signal_rank DIR. Appends the name of each SIGQUIT, SIGINT, SIGHUP,
// SIGALRM, SIGUSR1 and SIGUSR2 it gets to DIR/got.$RANK, one per line, in the
// order they arrive; on SIGTERM it appends "TERM" and exits 0. DIR/ready.$RANK
// appears once the handlers are in place.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int g_fd = -1;

void note(const char *name) {
    char line[16];
    size_t n = std::strlen(name);
    std::memcpy(line, name, n);
    line[n] = '\n';
    // One write per line on an O_APPEND descriptor: lines never interleave.
    (void)!::write(g_fd, line, n + 1);
}

void on_signal(int sig) {
    switch (sig) {
    case SIGQUIT: note("QUIT"); break;
    case SIGINT: note("INT"); break;
    case SIGHUP: note("HUP"); break;
    case SIGALRM: note("ALRM"); break;
    case SIGUSR1: note("USR1"); break;
    case SIGUSR2: note("USR2"); break;
    case SIGTERM:
        note("TERM");
        ::_exit(0);
    default: break;
    }
}

}  // namespace

int main(int argc, char **argv) {
    const char *rank = std::getenv("RANK");
    if (argc != 2 || rank == nullptr) {
        std::fprintf(stderr, "usage: RANK=N signal_rank DIR\n");
        return 2;
    }
    std::string dir = argv[1];
    g_fd = ::open((dir + "/got." + rank).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                  0644);
    if (g_fd < 0) {
        std::perror("signal_rank: open");
        return 2;
    }
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigfillset(&sa.sa_mask);  // one handler at a time keeps the arrival order
    for (int sig : {SIGQUIT, SIGINT, SIGHUP, SIGALRM, SIGUSR1, SIGUSR2, SIGTERM}) {
        if (::sigaction(sig, &sa, nullptr) != 0) {
            std::perror("signal_rank: sigaction");
            return 2;
        }
    }
    int ready = ::open((dir + "/ready." + rank).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (ready < 0) {
        std::perror("signal_rank: open ready");
        return 2;
    }
    ::close(ready);
    for (int i = 0; i < 600; ++i) {
        ::sleep(1);  // interrupted by each signal; bounded so a lost test ends
    }
    std::fprintf(stderr, "signal_rank: no SIGTERM within 600 s\n");
    return 3;
}
