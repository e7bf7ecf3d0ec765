// p2prun: starts N ranks of a program on this machine with the environment of
// the ucxp2p TCP bootstrap. Plain C++17 + POSIX; does not link ucxp2p.
#include "launcher.h"
#include "options.h"

#include <fcntl.h>
#include <unistd.h>

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
    return p2prun::Launcher(std::move(opts)).run();
}
