/*
 * Shareable memory for same-host single copy (core/cma.h).
 *
 * process_vm_readv pins the sender's pages on every call: about 2 us plus
 * the page walk per message here, whatever the size, against a fraction of
 * that for a memcpy of cached data. Memory from p2p_mem_alloc is a memfd
 * mapping, so a same-host receiver can map it once (through
 * /proc/PID/fd/N, under the same ptrace rules as process_vm_readv) and then
 * copy with memcpy. The sender's epoch table (core/cma.h) lives in a memfd
 * too, so the receiver's "did the sender cancel meanwhile" check after the
 * copy is a load, not a second system call.
 */
#ifndef UCXP2P_CORE_SHM_REGION_H
#define UCXP2P_CORE_SHM_REGION_H

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ucxp2p {
namespace shm {

/** A memfd mapped read-write in this process (RAII). */
class Region {
public:
    Region() = default;
    ~Region() { reset(); }
    Region(const Region &) = delete;
    Region &operator=(const Region &) = delete;
    Region(Region &&o) noexcept { *this = std::move(o); }
    Region &operator=(Region &&o) noexcept {
        if (this != &o) {
            reset();
            std::swap(data_, o.data_);
            std::swap(length_, o.length_);
            std::swap(fd_, o.fd_);
            std::swap(ino_, o.ino_);
        }
        return *this;
    }

    /** Create and map length bytes (rounded up to pages); false + errno. */
    bool create(size_t length, const char *name);
    void reset();
    void *data() const { return data_; }
    size_t length() const { return length_; }
    int fd() const { return fd_; }
    uint64_t ino() const { return ino_; }

private:
    void *data_ = nullptr;
    size_t length_ = 0;
    int fd_ = -1;
    uint64_t ino_ = 0;
};

/**
 * A peer process' regions mapped read-only here, least recently used
 * unmapped first beyond a bound. One per peer and communicator; touched
 * under the worker lock only.
 */
class PeerMaps {
public:
    PeerMaps() = default;
    ~PeerMaps() {
        for (Map &m : maps_) m.pins = 0;
        pinned_ = 0;
        clear();
    }
    PeerMaps(const PeerMaps &) = delete;
    PeerMaps &operator=(const PeerMaps &) = delete;

    /** [0, length) of the peer's fd, which must still be the memfd with
     *  inode ino; nullptr with errno set when it cannot be mapped. *fresh
     *  (optional) tells whether it was mapped by this call. */
    const uint8_t *get(pid_t pid, int fd, uint64_t ino, uint64_t length,
                       bool *fresh = nullptr);
    /** Unmap every region (while pinned: once the last unpin comes). */
    void clear();
    size_t size() const { return maps_.size(); }
    /** A copy reads the mapping holding p (from get()) with no lock held
     *  (core/copy_queue.h): until the matching unpin(p), it stays mapped
     *  (get() evicts others or maps beyond kMaxMaps, drop_closed and
     *  clear leave it for later). No-op for an address not mapped here. */
    void pin(const uint8_t *p);
    void unpin(const uint8_t *p);
    /** The peer's count of closed regions (cma::regions_closed) is now
     *  closed: when it moved since the last call, unmap every region whose
     *  fd in the peer no longer is its memfd (freed there; our mapping
     *  alone would keep its memory alive), except keep. Returns how many
     *  were unmapped. */
    size_t drop_closed(pid_t pid, uint64_t closed, const uint8_t *keep);

    static constexpr size_t kMaxMaps = 64;

private:
    struct Map {
        uint64_t ino;
        int fd;
        const uint8_t *ptr;
        size_t length;
        uint64_t used;
        uint32_t pins;
    };
    Map *find(const uint8_t *p);
    std::vector<Map> maps_;
    uint64_t tick_ = 0;
    uint64_t closed_seen_ = 0;
    uint32_t pinned_ = 0;     // pins over all maps
    bool clear_due_ = false;  // clear() waits for the last unpin
    bool drop_due_ = false;   // drop_closed skipped a pinned map: look again
};

}  // namespace shm
}  // namespace ucxp2p

#endif
