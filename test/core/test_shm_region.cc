/*
 * core/shm_region.h: memfd regions and the receiver's bounded cache of a
 * peer's mapped regions (the peer here is this process: /proc/PID/fd/N
 * works the same for our own pid).
 */
#include "core/cma.h"
#include "core/shm_region.h"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

using namespace ucxp2p;

TEST(ShmRegion, CreateRoundsToPagesAndMoves) {
    shm::Region r;
    ASSERT_TRUE(r.create(100, "ucxp2p-test"));
    EXPECT_EQ(static_cast<size_t>(sysconf(_SC_PAGESIZE)), r.length());
    EXPECT_GE(r.fd(), 0);
    EXPECT_NE(0u, r.ino());
    static_cast<char *>(r.data())[99] = 7;
    shm::Region moved(std::move(r));
    EXPECT_EQ(nullptr, r.data());
    EXPECT_EQ(-1, r.fd());
    EXPECT_EQ(7, static_cast<char *>(moved.data())[99]);
    shm::Region bad;
    EXPECT_FALSE(bad.create(0, "ucxp2p-test"));
    EXPECT_EQ(EINVAL, errno);
}

TEST(ShmRegion, PeerMapsSeeTheOwnersBytesAndStayBounded) {
    const size_t n = shm::PeerMaps::kMaxMaps + 6;
    std::vector<std::unique_ptr<shm::Region>> regions;
    for (size_t i = 0; i < n; ++i) {
        regions.emplace_back(new shm::Region());
        ASSERT_TRUE(regions.back()->create(8192, "ucxp2p-test"));
        std::memset(regions.back()->data(), static_cast<int>(i + 1), 8192);
    }
    shm::PeerMaps maps;
    bool fresh = false;
    for (size_t i = 0; i < n; ++i) {
        const shm::Region &r = *regions[i];
        const uint8_t *p = maps.get(getpid(), r.fd(), r.ino(), r.length(), &fresh);
        ASSERT_NE(nullptr, p) << std::strerror(errno);
        EXPECT_TRUE(fresh);
        EXPECT_EQ(i + 1, p[8191]);
        EXPECT_LE(maps.size(), shm::PeerMaps::kMaxMaps);
    }
    // The newest is cached; the first was evicted and maps again.
    const shm::Region &last = *regions[n - 1];
    ASSERT_NE(nullptr, maps.get(getpid(), last.fd(), last.ino(), last.length(), &fresh));
    EXPECT_FALSE(fresh);
    const shm::Region &first = *regions[0];
    const uint8_t *p = maps.get(getpid(), first.fd(), first.ino(), first.length(), &fresh);
    ASSERT_NE(nullptr, p);
    EXPECT_TRUE(fresh);
    // Writes by the owner are visible through the mapping.
    static_cast<uint8_t *>(first.data())[10] = 0xAB;
    EXPECT_EQ(0xAB, p[10]);
    maps.clear();
    EXPECT_EQ(0u, maps.size());
}

TEST(ShmRegion, PeerMapsRefuseAStaleOrMissingFd) {
    shm::Region r;
    ASSERT_TRUE(r.create(4096, "ucxp2p-test"));
    shm::PeerMaps maps;
    // The fd no longer holds the inode the request named.
    EXPECT_EQ(nullptr, maps.get(getpid(), r.fd(), r.ino() + 1, r.length()));
    EXPECT_EQ(ESTALE, errno);
    // Longer than the file.
    EXPECT_EQ(nullptr, maps.get(getpid(), r.fd(), r.ino(), r.length() * 2));
    EXPECT_EQ(ESTALE, errno);
    // No such fd.
    EXPECT_EQ(nullptr, maps.get(getpid(), 4000000, r.ino(), r.length()));
    EXPECT_EQ(ENOENT, errno);
    EXPECT_EQ(0u, maps.size());
}

TEST(ShmRegion, MappedCopyChecksTheEpoch) {
    shm::Region src, epochs;
    ASSERT_TRUE(src.create(4096, "ucxp2p-test"));
    ASSERT_TRUE(epochs.create(cma::kEpochTableBytes, "ucxp2p-test"));
    std::memset(src.data(), 0x5C, 4096);
    auto *slots = static_cast<uint64_t *>(epochs.data());
    const uint32_t seq = 4096 + 17;  // slot 17
    slots[17] = 3;
    std::vector<uint8_t> dst(100, 0);
    EXPECT_EQ(cma::ReadResult::OK,
              cma::copy_mapped(static_cast<uint8_t *>(src.data()) + 5, 100, dst.data(),
                               static_cast<uint8_t *>(epochs.data()), seq, 3));
    EXPECT_EQ(0x5C, dst[99]);
    slots[17] = 4;  // the sender cancelled meanwhile
    EXPECT_EQ(cma::ReadResult::CANCELLED,
              cma::copy_mapped(static_cast<uint8_t *>(src.data()), 100, dst.data(),
                               static_cast<uint8_t *>(epochs.data()), seq, 3));
}

// The owner closed some regions (p2p_mem_free): once its count of closed
// regions moves, the receiver unmaps those whose fd no longer is theirs,
// and keeps the live ones and the one it was told to keep.
TEST(ShmRegion, PeerMapsDropRegionsTheOwnerClosed) {
    shm::Region epochs, live, gone, reused;
    ASSERT_TRUE(epochs.create(cma::kEpochTableBytes, "ucxp2p-test"));
    ASSERT_TRUE(live.create(4096, "ucxp2p-test"));
    ASSERT_TRUE(gone.create(4096, "ucxp2p-test"));
    ASSERT_TRUE(reused.create(4096, "ucxp2p-test"));
    shm::PeerMaps maps;
    const uint8_t *keep = maps.get(getpid(), epochs.fd(), epochs.ino(), epochs.length());
    ASSERT_NE(nullptr, keep);
    ASSERT_NE(nullptr, maps.get(getpid(), live.fd(), live.ino(), live.length()));
    ASSERT_NE(nullptr, maps.get(getpid(), gone.fd(), gone.ino(), gone.length()));
    const int reused_fd = reused.fd();
    const uint64_t reused_ino = reused.ino();
    ASSERT_NE(nullptr, maps.get(getpid(), reused_fd, reused_ino, reused.length()));
    EXPECT_EQ(4u, maps.size());
    // Nothing closed yet: no check.
    EXPECT_EQ(0u, maps.drop_closed(getpid(), 0, keep));
    gone.reset();
    reused.reset();
    shm::Region other;  // takes the freed fd number (the lowest free one)
    ASSERT_TRUE(other.create(4096, "ucxp2p-test"));
    // The count has not moved: the receiver does not look (and keeps both).
    EXPECT_EQ(0u, maps.drop_closed(getpid(), 0, keep));
    EXPECT_EQ(4u, maps.size());
    EXPECT_EQ(2u, maps.drop_closed(getpid(), 2, keep));
    EXPECT_EQ(2u, maps.size());
    bool fresh = true;
    EXPECT_NE(nullptr, maps.get(getpid(), live.fd(), live.ino(), live.length(), &fresh));
    EXPECT_FALSE(fresh);
    EXPECT_EQ(keep, maps.get(getpid(), epochs.fd(), epochs.ino(), epochs.length(), &fresh));
    EXPECT_FALSE(fresh);
    // The keep pointer survives even when its fd is gone.
    epochs.reset();
    EXPECT_EQ(0u, maps.drop_closed(getpid(), 3, keep));
    EXPECT_EQ(1u, maps.drop_closed(getpid(), 4, nullptr));
    EXPECT_EQ(1u, maps.size());
}

// A withdrawn send's user may unmap its buffer before the receiver reads:
// the read faults, and the moved epoch says it was withdrawn (CANCELLED),
// not that reading failed. With the epoch unmoved it is a failure.
TEST(ShmRegion, FaultingReadOfAWithdrawnSendIsCancelled) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    // Inaccessible for the whole test (PROT_NONE), not unmapped: an
    // unmapped page may be mapped again meanwhile (an allocation of this
    // process, ASAN's included) and then reads fine (a CI failure).
    void *gone = mmap(nullptr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, gone);
    uint64_t epoch = 5;
    cma::Rts rts{};
    rts.addr = reinterpret_cast<uint64_t>(gone);
    rts.length = 100;
    rts.epoch_addr = reinterpret_cast<uint64_t>(&epoch);
    rts.epoch = 5;
    std::vector<uint8_t> dst(100, 0);
    int err = 0;
    EXPECT_EQ(cma::ReadResult::FAILED, cma::read(getpid(), rts, 0, 100, dst.data(), &err));
    EXPECT_EQ(EFAULT, err);
    epoch = 6;  // the sender withdrew the send
    EXPECT_EQ(cma::ReadResult::CANCELLED, cma::read(getpid(), rts, 0, 100, dst.data(), &err));
    munmap(gone, page);
}

// A child forked after the parent's first single-copy send has its own
// epoch table: withdrawing its sends must not cancel the parent's.
TEST(ShmRegion, ForkedChildHasItsOwnEpochTable) {
    cma::Rts rts{};
    const uint32_t seq = cma::next_seq();
    cma::stamp_epoch(&rts, seq);  // the parent's table exists now
    const cma::Identity parent = cma::local_identity();
    int fds[2];
    ASSERT_EQ(0, ::pipe(fds));
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::close(fds[0]);
        cma::bump_epoch(seq);  // withdraws the child's send of the same seq
        const cma::Identity mine = cma::local_identity();
        const uint64_t out[2] = {mine.epoch_ino, static_cast<uint64_t>(mine.pid)};
        ssize_t w = ::write(fds[1], out, sizeof(out));
        ::_exit(w == static_cast<ssize_t>(sizeof(out)) ? 0 : 1);
    }
    ::close(fds[1]);
    uint64_t in[2] = {};
    ssize_t got = ::read(fds[0], in, sizeof(in));
    ::close(fds[0]);
    int status = 0;
    ASSERT_EQ(pid, ::waitpid(pid, &status, 0));
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_EQ(static_cast<ssize_t>(sizeof(in)), got);
    EXPECT_EQ(static_cast<uint64_t>(pid), in[1]);
    if (parent.enabled && parent.epoch_fd >= 0) {
        EXPECT_NE(parent.epoch_ino, in[0]) << "the child names the parent's table";
    }
    // The parent's send of that seq is still live.
    const uint8_t *table =
        reinterpret_cast<const uint8_t *>(rts.epoch_addr) - (seq % cma::kEpochSlots) * 8;
    EXPECT_FALSE(cma::epoch_moved(table, seq, rts.epoch));
}

// A copy reading a mapping with no lock held pins it: nothing unmaps a
// pinned mapping (eviction takes an unpinned one, or maps beyond kMaxMaps
// when all are pinned; clear and drop_closed leave it for later), while
// the others go as before.
TEST(ShmRegion, PinnedPeerMapsStayUntilUnpinned) {
    const size_t n = shm::PeerMaps::kMaxMaps + 2;
    std::vector<std::unique_ptr<shm::Region>> regions;
    for (size_t i = 0; i < n + 1; ++i) {
        regions.emplace_back(new shm::Region());
        ASSERT_TRUE(regions.back()->create(4096, "ucxp2p-test"));
        std::memset(regions.back()->data(), static_cast<int>(i + 1), 4096);
    }
    auto get = [&](shm::PeerMaps &m, size_t i, bool *fresh = nullptr) {
        const shm::Region &r = *regions[i];
        return m.get(getpid(), r.fd(), r.ino(), r.length(), fresh);
    };
    shm::PeerMaps maps;
    const uint8_t *p0 = get(maps, 0);
    ASSERT_NE(nullptr, p0);
    maps.pin(p0 + 100);  // any address inside it
    maps.pin(p0);
    bool fresh = false;
    for (size_t i = 1; i < n; ++i) ASSERT_NE(nullptr, get(maps, i));
    EXPECT_EQ(shm::PeerMaps::kMaxMaps, maps.size());  // others were evicted
    EXPECT_NE(nullptr, get(maps, 0, &fresh));
    EXPECT_FALSE(fresh);  // the oldest, but pinned: kept
    EXPECT_EQ(1, p0[4095]);
    // Freed by its owner: the unpinned ones are dropped, the pinned one
    // at the next call after its last unpin.
    const uint8_t *p1 = get(maps, n - 1);
    ASSERT_NE(nullptr, p1);
    regions[0].reset();
    regions[n - 1].reset();
    EXPECT_EQ(1u, maps.drop_closed(getpid(), 1, nullptr));
    EXPECT_EQ(1, p0[4095]);
    maps.unpin(p0);
    maps.unpin(p0 + 100);
    EXPECT_EQ(1u, maps.drop_closed(getpid(), 1, nullptr));  // same count: looks again
    EXPECT_EQ(0u, maps.drop_closed(getpid(), 1, nullptr));
    // clear leaves a pinned one until its last unpin.
    const uint8_t *p2 = get(maps, 2);
    ASSERT_NE(nullptr, p2);
    maps.pin(p2);
    maps.clear();
    EXPECT_EQ(1u, maps.size());
    EXPECT_EQ(3, p2[4095]);  // still mapped: reading it does not fault
    maps.unpin(p2);
    EXPECT_EQ(0u, maps.size());
    // All pinned: a new one maps beyond the bound.
    shm::PeerMaps full;
    for (size_t i = 1; i <= shm::PeerMaps::kMaxMaps; ++i) {
        const uint8_t *p = get(full, i);
        ASSERT_NE(nullptr, p);
        full.pin(p);
    }
    ASSERT_NE(nullptr, get(full, n));
    EXPECT_EQ(shm::PeerMaps::kMaxMaps + 1, full.size());
}
