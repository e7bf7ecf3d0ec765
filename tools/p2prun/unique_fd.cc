#include "unique_fd.h"

#include <fcntl.h>
#include <poll.h>

#include <cerrno>

namespace p2prun {

bool make_pipe(UniqueFd *read_end, UniqueFd *write_end) {
    int fds[2];
    if (::pipe(fds) != 0) {
        return false;
    }
    read_end->reset(fds[0]);
    write_end->reset(fds[1]);
    return ::fcntl(fds[0], F_SETFD, FD_CLOEXEC) == 0 &&
           ::fcntl(fds[1], F_SETFD, FD_CLOEXEC) == 0;
}

bool set_nonblocking(int fd) {
    int flags = ::fcntl(fd, F_GETFL);
    return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

bool write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = ::write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                // An inherited non-blocking stdout: wait like a blocking write.
                pollfd p{fd, POLLOUT, 0};
                (void)::poll(&p, 1, -1);
                continue;
            }
            return false;
        }
        buf += n;
        len -= static_cast<size_t>(n);
    }
    return true;
}

} // namespace p2prun
