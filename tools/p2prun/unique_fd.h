// p2prun: owner of one file descriptor (closed on destruction).
#ifndef P2PRUN_UNIQUE_FD_H
#define P2PRUN_UNIQUE_FD_H

#include <unistd.h>

#include <utility>

namespace p2prun {

class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    ~UniqueFd() { reset(); }
    UniqueFd(const UniqueFd &) = delete;
    UniqueFd &operator=(const UniqueFd &) = delete;
    UniqueFd(UniqueFd &&other) noexcept : fd_(other.release()) {}
    UniqueFd &operator=(UniqueFd &&other) noexcept {
        if (this != &other) {
            reset(other.release());
        }
        return *this;
    }

    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    int release() { return std::exchange(fd_, -1); }
    void reset(int fd = -1) {
        if (fd_ >= 0) {
            ::close(fd_);
        }
        fd_ = fd;
    }

private:
    int fd_ = -1;
};

// A pipe whose both ends are close-on-exec; returns false (errno set) on error.
bool make_pipe(UniqueFd *read_end, UniqueFd *write_end);

// Sets O_NONBLOCK on fd; returns false (errno set) on error.
bool set_nonblocking(int fd);

// Writes all of buf (retrying on EINTR and short writes); false on error.
bool write_all(int fd, const char *buf, size_t len);

} // namespace p2prun

#endif
