#include "core/shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

namespace ucxp2p {
namespace shm {

namespace {

/** /proc/PID/fd/FD: the peer's descriptor, as this process may open or stat it. */
struct FdPath {
    char s[64];
    FdPath(pid_t pid, int fd) {
        std::snprintf(s, sizeof(s), "/proc/%d/fd/%d", static_cast<int>(pid), fd);
    }
};

size_t page_round(size_t n) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (n + page - 1) / page * page;
}

}  // namespace

bool Region::create(size_t length, const char *name) {
    reset();
    if (length == 0 || length > SIZE_MAX / 2) {
        errno = EINVAL;
        return false;
    }
    const size_t len = page_round(length);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) return false;
    struct stat sb;
    if (ftruncate(fd, static_cast<off_t>(len)) != 0 || fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return false;
    }
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        errno = e;
        return false;
    }
    data_ = p;
    length_ = len;
    fd_ = fd;
    ino_ = static_cast<uint64_t>(sb.st_ino);
    return true;
}

void Region::reset() {
    if (data_ != nullptr) munmap(data_, length_);
    if (fd_ >= 0) close(fd_);
    data_ = nullptr;
    length_ = 0;
    fd_ = -1;
    ino_ = 0;
}

const uint8_t *PeerMaps::get(pid_t pid, int fd, uint64_t ino, uint64_t length,
                             bool *fresh) {
    ++tick_;
    if (fresh != nullptr) *fresh = false;
    for (Map &m : maps_) {
        if (m.ino == ino && m.fd == fd && m.length >= length) {
            m.used = tick_;
            return m.ptr;
        }
    }
    int local = open(FdPath(pid, fd).s, O_RDONLY | O_CLOEXEC);
    if (local < 0) return nullptr;
    struct stat sb;
    if (fstat(local, &sb) != 0 || !S_ISREG(sb.st_mode) ||
        static_cast<uint64_t>(sb.st_ino) != ino ||
        static_cast<uint64_t>(sb.st_size) < length) {
        close(local);
        errno = ESTALE;  // the fd no longer is the region the request named
        return nullptr;
    }
    void *p = mmap(nullptr, static_cast<size_t>(length), PROT_READ, MAP_SHARED,
                   local, 0);
    int e = errno;
    close(local);
    if (p == MAP_FAILED) {
        errno = e;
        return nullptr;
    }
    if (maps_.size() >= kMaxMaps) {
        // The least recently used one no copy reads (none: map beyond).
        auto lru = maps_.end();
        for (auto it = maps_.begin(); it != maps_.end(); ++it) {
            if (it->pins == 0 && (lru == maps_.end() || it->used < lru->used)) lru = it;
        }
        if (lru != maps_.end()) {
            munmap(const_cast<uint8_t *>(lru->ptr), lru->length);
            maps_.erase(lru);
        }
    }
    maps_.push_back({ino, fd, static_cast<const uint8_t *>(p),
                     static_cast<size_t>(length), tick_, 0});
    if (fresh != nullptr) *fresh = true;
    return static_cast<const uint8_t *>(p);
}

size_t PeerMaps::drop_closed(pid_t pid, uint64_t closed, const uint8_t *keep) {
    if (closed == closed_seen_ && !drop_due_) return 0;
    closed_seen_ = closed;
    drop_due_ = false;
    size_t dropped = 0;
    for (size_t i = 0; i < maps_.size();) {
        Map &m = maps_[i];
        struct stat sb;
        if (m.ptr == keep ||
            (stat(FdPath(pid, m.fd).s, &sb) == 0 && static_cast<uint64_t>(sb.st_ino) == m.ino)) {
            ++i;
            continue;
        }
        if (m.pins != 0) {  // freed by its owner, but a copy reads it
            drop_due_ = true;
            ++i;
            continue;
        }
        munmap(const_cast<uint8_t *>(m.ptr), m.length);
        m = maps_.back();
        maps_.pop_back();
        ++dropped;
    }
    return dropped;
}

void PeerMaps::clear() {
    clear_due_ = pinned_ != 0;  // the pinned ones once the last unpin comes
    for (size_t i = 0; i < maps_.size();) {
        Map &m = maps_[i];
        if (m.pins != 0) {
            ++i;
            continue;
        }
        munmap(const_cast<uint8_t *>(m.ptr), m.length);
        m = maps_.back();
        maps_.pop_back();
    }
}

PeerMaps::Map *PeerMaps::find(const uint8_t *p) {
    for (Map &m : maps_) {
        if (p >= m.ptr && p < m.ptr + m.length) return &m;
    }
    return nullptr;
}

void PeerMaps::pin(const uint8_t *p) {
    Map *m = find(p);
    if (m == nullptr) return;
    ++m->pins;
    ++pinned_;
}

void PeerMaps::unpin(const uint8_t *p) {
    Map *m = find(p);
    if (m == nullptr || m->pins == 0) return;
    --m->pins;
    if (--pinned_ == 0 && clear_due_) clear();
}

}  // namespace shm
}  // namespace ucxp2p
