#include "output_sink.h"

#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace p2prun {

OutputSink::OutputSink(int fd) : fd_(fd) {
    struct stat st;
    if (::fstat(fd, &st) == 0) {
        socket_ = S_ISSOCK(st.st_mode);
        regular_ = S_ISREG(st.st_mode);
    }
}

bool OutputSink::same_file(int a, int b) {
    struct stat sa, sb;
    return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

void OutputSink::append(const char *data, size_t len) {
    if (!broken_) {
        buf_.append(data, len);
    }
}

long OutputSink::write_once(const char *data, size_t len) {
    ssize_t n;
    if (socket_) {
        n = ::send(fd_, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    } else {
        if (!regular_) {
            // A blocking pipe with room for at least PIPE_BUF bytes takes
            // that many at once; a tty, room permitting, too.
            pollfd p{fd_, POLLOUT, 0};
            if (::poll(&p, 1, 0) <= 0 || (p.revents & (POLLOUT | POLLERR | POLLHUP)) == 0) {
                return 0;
            }
            len = std::min<size_t>(len, PIPE_BUF);
        }
        n = ::write(fd_, data, len);
    }
    if (n >= 0) {
        return n;
    }
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
}

void OutputSink::flush() {
    while (pending() > 0) {
        long n = write_once(buf_.data() + off_, pending());
        if (n < 0) {
            error_ = errno;
            broken_ = true;  // p2prun's reader went away: output is dropped
            discard();
            return;
        }
        if (n == 0) {
            break;
        }
        off_ += static_cast<size_t>(n);
    }
    if (off_ == buf_.size()) {
        buf_.clear();
        off_ = 0;
    } else if (off_ > buf_.size() / 2) {
        buf_.erase(0, off_);
        off_ = 0;
    }
}

size_t OutputSink::discard() {
    size_t n = pending();
    buf_.clear();
    off_ = 0;
    return n;
}

} // namespace p2prun
