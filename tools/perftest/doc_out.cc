#include "doc_out.h"

#include <fcntl.h>
#include <unistd.h>

namespace perftest {
namespace doc_out {

namespace {
FILE *g_stream = nullptr;  // set once, before any other thread exists
int g_fd = STDOUT_FILENO;
} // namespace

void isolate() {
    if (g_stream != nullptr) {
        return;
    }
    std::fflush(stdout);
    const int keep = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (keep < 0) {
        return;
    }
    FILE *f = fdopen(keep, "w");
    if (f == nullptr) {
        close(keep);
        return;
    }
    if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        std::fclose(f);
        return;
    }
    g_stream = f;
    g_fd = keep;
}

FILE *stream() {
    return g_stream != nullptr ? g_stream : stdout;
}

int fd() {
    return g_fd;
}

} // namespace doc_out
} // namespace perftest
