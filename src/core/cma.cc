#include "core/cma.h"
#include "core/config.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/shm_region.h"
#include "core/ucx_tls.h"

#include <pthread.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#if defined(__SANITIZE_THREAD__)
#define UCXP2P_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UCXP2P_TSAN 1
#endif
#endif

namespace ucxp2p {
namespace cma {

namespace {

// Peers read a slot as 8 plain bytes (process_vm_readv or a mapping).
static_assert(sizeof(std::atomic<uint64_t>) == 8 &&
              std::atomic<uint64_t>::is_always_lock_free,
              "epoch slots must be plain 64-bit words");
std::atomic<uint32_t> g_seq{0};

struct EpochTable {
    std::atomic<uint64_t> *slots;
    shm::Region *region = nullptr;  // owner of slots when a memfd
    int fd = -1;
    uint64_t ino = 0;
};

/** In a memfd (peers map it), else in plain memory; never freed. */
const EpochTable *make_epoch_table() {
    auto *t = new EpochTable();
    auto *region = new shm::Region();  // process lifetime
    if (region->create(kEpochTableBytes, "ucxp2p-epochs")) {
        t->slots = new (region->data()) std::atomic<uint64_t>[kEpochSlots + 1]();
        t->region = region;
        t->fd = region->fd();
        t->ino = region->ino();
    } else {
        P2P_LOG(P2P_LOG_DEBUG, "cma: no memfd for the epoch table (%s)",
                std::strerror(errno));
        delete region;
        t->slots = new std::atomic<uint64_t>[kEpochSlots + 1]();
    }
    return t;
}

std::atomic<const EpochTable *> g_table{nullptr};
std::mutex g_table_mu;  // creates g_table
// In a forked child: the parent's table, kept reachable (no leak report).
// Atomic: a plain variable that is never read may lose its stores.
std::atomic<const EpochTable *> g_parents_table{nullptr};

void table_lock_for_fork() { g_table_mu.lock(); }
void table_unlock_in_parent() { g_table_mu.unlock(); }

/** A forked child inherits the parent's table, a memfd both have mapped:
 *  its bumps would cancel the parent's sends. The child makes its own on
 *  first use (the parent's stays mapped here, unused). */
void table_renew_in_child() {
    g_table_mu.unlock();
    g_parents_table.store(g_table.load(std::memory_order_relaxed), std::memory_order_relaxed);
    g_table.store(nullptr, std::memory_order_relaxed);
}

__attribute__((noinline, cold)) const EpochTable &first_epoch_table() {
    // Outside the lock: a fork in progress holds glibc's handler list while
    // its prepare handler waits for the lock.
    static const bool fork_handlers = pthread_atfork(
        table_lock_for_fork, table_unlock_in_parent, table_renew_in_child) == 0;
    (void)fork_handlers;
    std::lock_guard<std::mutex> lock(g_table_mu);
    const EpochTable *t = g_table.load(std::memory_order_relaxed);
    if (t == nullptr) {
        t = make_epoch_table();
        g_table.store(t, std::memory_order_release);
    }
    return *t;
}

const EpochTable &epoch_table() {
    const EpochTable *t = g_table.load(std::memory_order_acquire);
    return __builtin_expect(t != nullptr, 1) ? *t : first_epoch_table();
}

bool read_boot_id(uint8_t out[16]) {
    FILE *f = std::fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f == nullptr) return false;
    char buf[64] = {0};
    bool ok = std::fgets(buf, sizeof(buf), f) != nullptr;
    std::fclose(f);
    if (!ok) return false;
    int n = 0;
    for (const char *p = buf; *p != '\0' && n < 32; ++p) {
        int c = std::tolower(static_cast<unsigned char>(*p));
        int v;
        if (c >= '0' && c <= '9') v = c - '0';
        else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
        else continue;
        if (n % 2 == 0) out[n / 2] = static_cast<uint8_t>(v << 4);
        else out[n / 2] |= static_cast<uint8_t>(v);
        ++n;
    }
    return n == 32;
}

Identity compute_identity() {
    Identity id;
    std::memset(&id, 0, sizeof(id));
    id.pid = static_cast<uint32_t>(getpid());
    id.epoch_fd = -1;
    // Where the pid means something to a peer (same_pid_space), whether or
    // not single copy is on: a peer's liveness check needs it too.
    struct stat sb;
    if (read_boot_id(id.boot_id) && stat("/proc/self/ns/pid", &sb) == 0) {
        id.pid_ns = static_cast<uint64_t>(sb.st_ino);
    } else {
        std::memset(id.boot_id, 0, sizeof(id.boot_id));
    }
    std::string mode = config_get("P2P_CMA");
    if (config_is(mode, "off")) {
        P2P_LOG(P2P_LOG_DEBUG, "cma: disabled by P2P_CMA=off");
        return id;
    }
    if (!config_is(mode, "auto")) {
        P2P_LOG(P2P_LOG_WARN, "cma: P2P_CMA='%s' is not auto or off; "
                "single copy disabled", mode.c_str());
        return id;
    }
    if (!UcxTls::from_environment().allows("cma")) {
        P2P_LOG(P2P_LOG_DEBUG, "cma: disabled because UCX_TLS excludes "
                "shared memory");
        return id;
    }
    if (id.pid_ns == 0) {
        P2P_LOG(P2P_LOG_DEBUG, "cma: disabled (no boot id or pid namespace)");
        return id;
    }
    // Seccomp (container runtimes) may forbid the call altogether.
    uint64_t src = 0x1234, dst = 0;
    struct iovec l = {&dst, sizeof(dst)}, r = {&src, sizeof(src)};
    if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != sizeof(dst) ||
        dst != src) {
        P2P_LOG(P2P_LOG_INFO, "cma: process_vm_readv unavailable (%s); "
                "same-host messages use UCX shared memory only",
                std::strerror(errno));
        return id;
    }
    id.enabled = 1;
    return id;
}

}  // namespace

Identity local_identity() {
    static const Identity id = compute_identity();
    // Peers read this pid's memory: a forked child inherits the rest (boot,
    // pid namespace) but is not its parent, whose bytes at the same
    // addresses differ; nor does it share the parent's epoch table.
    Identity mine = id;
    mine.pid = static_cast<uint32_t>(getpid());
    if (mine.enabled) {
        const EpochTable &t = epoch_table();
        mine.epoch_fd = t.fd;
        mine.epoch_ino = t.ino;
    }
    return mine;
}

bool process_gone(uint32_t pid) {
    if (pid == 0) return false;
    if (kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
    char path[48];
    std::snprintf(path, sizeof(path), "/proc/%u/stat", pid);
    FILE *f = std::fopen(path, "r");
    if (f == nullptr) return errno == ENOENT;
    char buf[512];
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    const char *paren = std::strrchr(buf, ')');  // the name may hold anything
    if (paren == nullptr || paren[1] != ' ' || (paren[2] != 'Z' && paren[2] != 'X')) {
        return false;
    }
    // A zombie leader whose other threads run on (it called pthread_exit)
    // is alive: num_threads (field 20; the state is field 3) counts it and
    // them, and drops to 1 once they all ended.
    const char *p = paren + 2;
    for (int field = 3; field < 20 && p != nullptr; ++field) {
        p = std::strchr(p, ' ');
        if (p != nullptr) ++p;
    }
    return p == nullptr || std::strtol(p, nullptr, 10) <= 1;
}

bool same_pid_space(const Identity &mine, const Identity &theirs) {
    return mine.pid_ns != 0 && mine.pid_ns == theirs.pid_ns &&
           std::memcmp(mine.boot_id, theirs.boot_id, sizeof(mine.boot_id)) == 0;
}

bool peer_eligible(const Identity &mine, const Identity &theirs) {
    return mine.enabled == 1 && theirs.enabled == 1 &&
           std::memcmp(mine.boot_id, theirs.boot_id, sizeof(mine.boot_id)) == 0 &&
           mine.pid_ns == theirs.pid_ns && mine.pid != theirs.pid;
}

namespace {

/** A P2P_* size read once by the caller's static: the table's default when
 *  unset, fallback when malformed (config_get_u64 logged it). */
uint64_t size_var(const char *name, uint64_t fallback) {
    uint64_t v = 0;
    return config_get_u64(name, UINT64_MAX, &v) == P2P_OK ? v : fallback;
}

size_t at_least_rts(uint64_t v) {
    return static_cast<size_t>(v < sizeof(Rts) ? sizeof(Rts) : v);
}

}  // namespace

p2p_status_t check_settings() {
    const std::string mode = config_get("P2P_CMA");
    if (!config_is(mode, "auto") && !config_is(mode, "off")) {
        P2P_LOG(P2P_LOG_ERROR, "cma: P2P_CMA='%s' is not auto or off", mode.c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    uint64_t v = 0;  // each call logs what is wrong
    p2p_status_t st = config_is(config_get("P2P_CMA_THRESH"), "auto")
                          ? P2P_OK
                          : config_get_u64("P2P_CMA_THRESH", UINT64_MAX, &v, 0, "auto");
    if (st == P2P_OK) st = config_get_u64("P2P_CMA_MAPPED_THRESH", UINT64_MAX, &v);
    if (st == P2P_OK) st = config_get_u64("P2P_CMA_SPLIT", UINT64_MAX, &v);
    return st;
}

bool threshold_auto() {
    static bool automatic = config_is(config_get("P2P_CMA_THRESH"), "auto");
    return automatic;
}

size_t threshold() {
    // Malformed: the fixed default of the releases before auto.
    static size_t thresh = threshold_auto()
                               ? SIZE_MAX
                               : at_least_rts(size_var("P2P_CMA_THRESH", 262144));
    return thresh;
}

size_t mapped_threshold() {
    static size_t thresh = at_least_rts(size_var("P2P_CMA_MAPPED_THRESH", 2048));
    return thresh;
}

size_t split_threshold() {
    static size_t thresh = [] {
        uint64_t v = size_var("P2P_CMA_SPLIT", 65536);
        if (v == 0) return SIZE_MAX;
        return static_cast<size_t>(v < 2 * sizeof(Rts) ? 2 * sizeof(Rts) : v);
    }();
    return thresh;
}

uint64_t split_offset(uint64_t len) {
    uint64_t off = (len / 2) & ~static_cast<uint64_t>(63);
    return off == 0 ? len / 2 : off;
}

uint32_t next_seq() {
    uint32_t s;
    do {
        s = (g_seq.fetch_add(1, std::memory_order_relaxed) + 1) & ~kWdoneBit;
    } while (s == 0);
    return s;
}

void stamp_epoch(Rts *rts, uint32_t seq) {
    std::atomic<uint64_t> &slot = epoch_table().slots[seq % kEpochSlots];
    rts->epoch_addr = reinterpret_cast<uint64_t>(&slot);
    rts->epoch = slot.load(std::memory_order_seq_cst);
}

void bump_epoch(uint32_t seq) {
    epoch_table().slots[seq % kEpochSlots].fetch_add(1, std::memory_order_seq_cst);
}

uint64_t regions_closed(const uint8_t *epoch_table) {
    const uint64_t *w = reinterpret_cast<const uint64_t *>(epoch_table) + kClosedWord;
    return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

namespace {

ReadResult classify(int e, int *err) {
    *err = e;
    if (e == EPERM || e == EACCES || e == ENOSYS) return ReadResult::NOT_ALLOWED;
    return e == ESRCH ? ReadResult::PEER_GONE : ReadResult::FAILED;
}

/** The read of rts from pid failed with e: CANCELLED when the sender's
 *  epoch moved meanwhile (its user may have freed the buffer since, so
 *  the failure says nothing about the path), else what e means. */
ReadResult read_failed(pid_t pid, const Rts &rts, int e, int *err) {
    const ReadResult r = classify(e, err);
    if (r != ReadResult::FAILED) return r;
    uint64_t now = rts.epoch;
    struct iovec l = {&now, sizeof(now)};
    struct iovec rem = {reinterpret_cast<void *>(rts.epoch_addr), sizeof(now)};
    if (process_vm_readv(pid, &l, 1, &rem, 1, 0) == sizeof(now) && now != rts.epoch) {
        return ReadResult::CANCELLED;
    }
    return r;
}

}  // namespace

bool epoch_moved(const uint8_t *epoch_table, uint32_t seq, uint64_t epoch) {
    const uint64_t *slot = reinterpret_cast<const uint64_t *>(epoch_table) +
                           seq % kEpochSlots;
    return __atomic_load_n(slot, __ATOMIC_RELAXED) != epoch;
}

ReadResult copy_mapped(const uint8_t *src, uint64_t len, void *dst,
                       const uint8_t *epoch_table, uint32_t seq, uint64_t epoch) {
    std::memcpy(dst, src, static_cast<size_t>(len));
    // Seqlock reader: the copy's loads happen before the epoch load.
#if defined(UCXP2P_TSAN)
    // ThreadSanitizer rejects fences; its builds only run the tests (and
    // it cannot see the other process anyway): a compiler barrier.
    std::atomic_signal_fence(std::memory_order_seq_cst);
#else
    std::atomic_thread_fence(std::memory_order_acquire);
#endif
    return epoch_moved(epoch_table, seq, epoch) ? ReadResult::CANCELLED : ReadResult::OK;
}

ReadResult copy_in(pid_t pid, const Rts &rts, const uint8_t *base,
                   const uint8_t *epochs, uint64_t off, uint64_t len, void *dst,
                   int *err) {
    *err = 0;
    if (base != nullptr) {
        return copy_mapped(base + off, len, static_cast<uint8_t *>(dst) + off, epochs,
                           rts.seq, rts.epoch);
    }
    return read(pid, rts, off, len, dst, err);
}

ReadResult write(pid_t pid, const void *src, uint64_t len, uint64_t remote,
                 int *err) {
    const uint8_t *s = static_cast<const uint8_t *>(src);
    uint64_t done = 0;
    *err = 0;
    while (done < len) {
        struct iovec l = {const_cast<uint8_t *>(s) + done,
                          static_cast<size_t>(len - done)};
        struct iovec r = {reinterpret_cast<void *>(remote + done),
                          static_cast<size_t>(len - done)};
        ssize_t put = process_vm_writev(pid, &l, 1, &r, 1, 0);
        if (put < 0) {
            if (errno == EINTR) continue;
            return classify(errno, err);
        }
        if (put == 0) return classify(EFAULT, err);
        done += static_cast<uint64_t>(put);
    }
    return ReadResult::OK;
}

ReadResult read(pid_t pid, const Rts &rts, uint64_t off, uint64_t len,
                void *dst, int *err) {
    uint64_t epoch = 0;
    uint8_t *d = static_cast<uint8_t *>(dst) + off;
    const uint64_t src = rts.addr + off;
    uint64_t done = 0;
    const uint64_t total = len + sizeof(epoch);
    *err = 0;
    while (done < total) {
        struct iovec l[2], r[2];
        int n = 0;
        if (done < len) {
            l[n] = {d + done, static_cast<size_t>(len - done)};
            r[n] = {reinterpret_cast<void *>(src + done),
                    static_cast<size_t>(len - done)};
            ++n;
        }
        uint64_t eoff = done > len ? done - len : 0;
        l[n] = {reinterpret_cast<uint8_t *>(&epoch) + eoff,
                static_cast<size_t>(sizeof(epoch) - eoff)};
        r[n] = {reinterpret_cast<void *>(rts.epoch_addr + eoff),
                static_cast<size_t>(sizeof(epoch) - eoff)};
        ++n;
        ssize_t got = process_vm_readv(pid, l, n, r, n, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            return read_failed(pid, rts, errno, err);
        }
        if (got == 0) return read_failed(pid, rts, EFAULT, err);
        done += static_cast<uint64_t>(got);
    }
    return epoch == rts.epoch ? ReadResult::OK : ReadResult::CANCELLED;
}

}  // namespace cma
}  // namespace ucxp2p

void ucxp2p::mem_region_closed() {
    cma::epoch_table().slots[cma::kClosedWord].fetch_add(1, std::memory_order_seq_cst);
}
