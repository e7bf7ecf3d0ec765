// p2prun: starts N ranks of a program on this machine with the environment of
// the ucxp2p TCP bootstrap. Plain C++17 + POSIX; does not link ucxp2p.
#include "launcher.h"
#include "options.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <cstdio>
#include <string>

namespace {

// Opens /dev/null on any of fds 0-2 that is closed, so that pipes created
// later never land there (a rank's stdout would otherwise be lost on dup2).
void ensure_std_fds() {
    for (int fd = 0; fd < 3; ++fd) {
        if (::fcntl(fd, F_GETFD) < 0) {
            int n = ::open("/dev/null", O_RDWR);
            if (n >= 0 && n != fd) {
                ::close(n);  // lower fd already open: nothing to fill
            }
        }
    }
}

// Ends p2prun by sig, as sig would have without p2prun's handler. A shell
// tells a job killed by SIGINT from one that handled it and exited 130: bash
// goes on with the script after the latter, so Ctrl-C would not stop a loop.
void die_by_signal(int sig) {
#ifdef __linux__
    (void)::prctl(PR_SET_DUMPABLE, 0);  // SIGQUIT: no core of p2prun's own
#endif
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    if (::sigaction(sig, &dfl, nullptr) == 0 &&
        ::sigprocmask(SIG_UNBLOCK, &set, nullptr) == 0) {
        ::raise(sig);
    }
}

} // namespace

int main(int argc, char **argv) {
    ensure_std_fds();
    p2prun::Options opts;
    std::string error;
    switch (p2prun::parse_options(argc, argv, &opts, &error)) {
    case p2prun::ParseResult::kHelp: {
        std::string text = p2prun::usage_text();
        std::fwrite(text.data(), 1, text.size(), stdout);
        return 0;
    }
    case p2prun::ParseResult::kError: {
        p2prun::report(error);
        std::string text = p2prun::usage_text();
        std::fwrite(text.data(), 1, text.size(), stderr);
        return 2;
    }
    case p2prun::ParseResult::kRun:
        break;
    }
    int code = 0;
    int sig = 0;
    {
        p2prun::Launcher launcher(std::move(opts));
        code = launcher.run();
        sig = launcher.exit_signal();
    }  // the ranks are gone, the handlers restored
    if (sig != 0) {
        die_by_signal(sig);
    }
    return code;  // 128+sig if the signal did not end p2prun
}
