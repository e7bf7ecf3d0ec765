#include "core/vm_range.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace ucxp2p {
namespace vm {

namespace {

/** Reads a file in large chunks (the kernel builds /proc maps per read
 *  call) and hands out its lines. */
class LineReader {
public:
    explicit LineReader(int fd) : fd_(fd) {}
    /** The next line without its newline (NUL-terminated in place), or
     *  nullptr at the end or on an error (*failed then). */
    char *next(bool *failed) {
        for (;;) {
            char *nl = static_cast<char *>(std::memchr(buf_ + pos_, '\n', len_ - pos_));
            if (nl != nullptr) {
                char *line = buf_ + pos_;
                *nl = '\0';
                pos_ = static_cast<size_t>(nl - buf_) + 1;
                return line;
            }
            // Keep the partial line, then read more behind it.
            std::memmove(buf_, buf_ + pos_, len_ - pos_);
            len_ -= pos_;
            pos_ = 0;
            if (len_ == sizeof(buf_) - 1) {  // a line longer than the buffer
                *failed = true;
                return nullptr;
            }
            ssize_t r = read(fd_, buf_ + len_, sizeof(buf_) - 1 - len_);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) {
                *failed = true;
                return nullptr;
            }
            if (r == 0) {
                if (len_ == 0) return nullptr;
                buf_[len_] = '\0';  // a last line without a newline
                pos_ = len_;
                return buf_;
            }
            len_ += static_cast<size_t>(r);
        }
    }

private:
    int fd_;
    char buf_[16384];
    size_t pos_ = 0, len_ = 0;
};

Access read_once(uintptr_t first, uintptr_t end, const char *maps_path) {
    int fd = open(maps_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Access::UNKNOWN;
    LineReader lines(fd);
    Access worst = Access::READ_WRITE;
    uintptr_t cur = first;
    bool failed = false, covered = false;
    while (char *line = lines.next(&failed)) {
        // "start-end perms offset dev inode path", addresses in hex.
        char *p = nullptr;
        errno = 0;
        const unsigned long long s = std::strtoull(line, &p, 16);
        if (p == line || *p != '-') {
            failed = true;
            break;
        }
        char *q = nullptr;
        const unsigned long long e = std::strtoull(p + 1, &q, 16);
        if (q == p + 1 || *q != ' ' || q[1] == '\0' || q[2] == '\0' || errno != 0) {
            failed = true;
            break;
        }
        if (e <= cur) continue;
        if (s > cur) break;  // a hole at cur
        // Write without read: the MMU reads such pages too (x86, arm64).
        const bool r = q[1] == 'r', w = q[2] == 'w';
        const Access a = w ? Access::READ_WRITE : r ? Access::READ_ONLY : Access::NO_ACCESS;
        worst = std::min(worst, a);
        cur = static_cast<uintptr_t>(e);
        if (cur >= end) {
            covered = true;
            break;
        }
    }
    close(fd);
    if (failed) return Access::UNKNOWN;
    return covered ? worst : Access::UNMAPPED;
}

}  // namespace

const char *access_name(Access a) {
    switch (a) {
    case Access::UNMAPPED: return "not mapped";
    case Access::NO_ACCESS: return "mapped without access";
    case Access::READ_ONLY: return "read-only";
    case Access::READ_WRITE: return "readable and writable";
    default: return "not known";
    }
}

Access range_access(const void *addr, size_t len, const char *maps_path) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    const uintptr_t first = a & ~(page - 1);
    const uintptr_t end = a + len;
    Access got = read_once(first, end, maps_path);
    if (got == Access::UNMAPPED || got == Access::NO_ACCESS) {
        got = read_once(first, end, maps_path);  // see the header
    }
    return got;
}

}  // namespace vm
}  // namespace ucxp2p
