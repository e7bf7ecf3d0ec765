/*
 * mp_rank scenario of large same-host copies made outside the worker lock
 * (src/core/copy_queue.h), 2 ranks over shared memory:
 *   copy-unlocked [split]  rank 0 sends 8 MiB of heap memory to rank 1 by
 *       single copy. Rank 1's read of it (all of it with
 *       P2P_CMA_SPLIT=0; `split`: the head, while rank 0 writes the tail)
 *       is held inside process_vm_readv -- this program's own, in front of
 *       libc's -- and, with `split`, rank 0's write inside
 *       process_vm_writev too. While its copy is held, the rank posts a
 *       64-byte receive and a 64-byte send from its main thread: both posts
 *       must return (before, they waited for the worker lock as long as the
 *       copy took). A watchdog lets a held copy go after 20 s and the rank
 *       then fails. Every message must then arrive intact.
 *   cma-copy-fails [write]  rank 0 sends 4 MiB to rank 1 by single copy,
 *       and rank 1's read fails (ENOMEM from its process_vm_readv, once;
 *       `write`: rank 0's write of the tail of a split copy, from its
 *       process_vm_writev): both the receive and the send complete with
 *       P2P_ERR_TRANSPORT; the next 4 MiB message goes single copy again
 *       and arrives intact.
 */
#include "mp_common.h"
#include "mp_scenarios.h"

#include <dlfcn.h>
#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

namespace {

// The gate: while armed, the first copy of 1 MiB or more waits in it.
std::atomic<bool> g_armed{false};
std::atomic<bool> g_entered{false};
std::atomic<bool> g_open{false};

constexpr size_t kHoldFrom = size_t(1) << 20;

void hold_if_large(const struct iovec *iov, unsigned long n) {
    size_t total = 0;
    for (unsigned long i = 0; i < n; ++i) total += iov[i].iov_len;
    if (total < kHoldFrom || !g_armed.exchange(false)) return;
    g_entered.store(true);
    while (!g_open.load()) usleep(1000);
}

// The fault: while set, the first copy of kHoldFrom bytes or more fails
// with this errno (and the fault is cleared).
std::atomic<int> g_fail_errno{0};

// Copies of kHoldFrom bytes or more made (or failed) here.
std::atomic<uint64_t> g_large_copies{0};

/** The errno to fail this call with (0: none). */
int fault_if_large(const struct iovec *iov, unsigned long n) {
    size_t total = 0;
    for (unsigned long i = 0; i < n; ++i) total += iov[i].iov_len;
    if (total < kHoldFrom) return 0;
    g_large_copies.fetch_add(1);
    return g_fail_errno.exchange(0);
}

using VmFn = ssize_t (*)(pid_t, const struct iovec *, unsigned long,
                         const struct iovec *, unsigned long, unsigned long);

VmFn real_vm_fn(const char *name) { return reinterpret_cast<VmFn>(dlsym(RTLD_NEXT, name)); }

} // namespace

#define MP_VM_WRAPPER(name)                                                            \
    extern "C" __attribute__((visibility("default"))) ssize_t name(                    \
        pid_t pid, const struct iovec *local, unsigned long liovcnt,                   \
        const struct iovec *remote, unsigned long riovcnt, unsigned long flags) {      \
        static const VmFn real = real_vm_fn(#name);                                    \
        if (const int e = fault_if_large(local, liovcnt)) {                            \
            errno = e;                                                                 \
            return -1;                                                                 \
        }                                                                              \
        hold_if_large(local, liovcnt);                                                 \
        return real(pid, local, liovcnt, remote, riovcnt, flags);                      \
    }
MP_VM_WRAPPER(process_vm_readv)
MP_VM_WRAPPER(process_vm_writev)

namespace mp {

namespace {

/** Wait (20 s at most) for this rank's copy to be held, then post the
 *  small pair and check both posts returned while it still was. */
void post_while_held(p2p_comm_h comm, uint32_t peer, const RegBuf &rx,
                     const RegBuf &tx, uint32_t rx_tid, uint32_t tx_tid) {
    Clock::time_point t0 = Clock::now();
    while (!g_entered.load()) {
        MP_CHECK(seconds_since(t0) < 20, "the large copy never reached "
                 "process_vm_readv/writev (single copy off?)");
        usleep(1000);
    }
    std::atomic<bool> posted{false};
    std::thread watchdog([&posted] {
        Clock::time_point w0 = Clock::now();
        while (!posted.load() && seconds_since(w0) < 20) usleep(1000);
        g_open.store(true);  // never leave the copier held
    });
    MP_OK(p2p_comm_recv(comm, peer, rx_tid, rx.data(), 64, rx.mem(), ctx_of(1)));
    MP_OK(p2p_comm_send(comm, peer, tx_tid, tx.data(), 64, tx.mem(), ctx_of(2)));
    const bool held = !g_open.load();
    posted.store(true);
    watchdog.join();
    MP_CHECK(held, "posting a 64-byte receive and send waited %.1f s for a "
             "copy made under the worker lock", seconds_since(t0));
    say("posted while the copy was held");
}

} // namespace

void run_copy_unlocked(int argc, char **argv) {
    const bool split = argc > 0 && std::strcmp(argv[0], "split") == 0;
    Rank r;
    set_identity(static_cast<int>(r.rank()), "copy-unlocked");
    MP_CHECK(r.size() == 2, "copy-unlocked needs 2 ranks");
    const uint32_t me = r.rank(), peer = 1 - me;
    const size_t kLen = size_t(8) << 20;
    RegBuf big(r.ctx(), kLen, 0, Alloc::heap);
    RegBuf rx(r.ctx(), 64, 0), tx(r.ctx(), 64, 0);
    fill_pattern(tx.data(), 64, me, peer, 10 + me);
    const bool holds = me == 1 || split;  // the copiers
    if (holds) g_armed.store(true);
    if (me == 0) {
        fill_pattern(big.data(), kLen, 0, 1, 7);
        MP_OK(p2p_comm_send(r.comm(), 1, 7, big.data(), kLen, big.mem(), ctx_of(0)));
    } else {
        MP_OK(p2p_comm_recv(r.comm(), 0, 7, big.data(), kLen, big.mem(), ctx_of(0)));
    }
    if (holds) {
        post_while_held(r.comm(), peer, rx, tx, 10 + peer, 10 + me);
    } else {
        MP_OK(p2p_comm_recv(r.comm(), peer, 10 + peer, rx.data(), 64, rx.mem(), ctx_of(1)));
        MP_OK(p2p_comm_send(r.comm(), peer, 10 + me, tx.data(), 64, tx.mem(), ctx_of(2)));
    }
    collect(r.comm(), {{me == 0, peer, 7, kLen, 0},
                       {false, peer, 10 + peer, 64, 0},
                       {true, peer, 10 + me, 64, 0}}, 60);
    if (me == 1) check_pattern(big.data(), kLen, 0, 1, 7, "copy-unlocked");
    check_pattern(rx.data(), 64, peer, me, 10 + peer, "copy-unlocked small");
    r.barrier();
    say("copy-unlocked ok");
    r.finish();
}

namespace {

void check_transport_error(const Xfer &x, const p2p_completion_t &c) {
    MP_CHECK(c.status == P2P_ERR_TRANSPORT,
             "%s of tensor %u whose single-copy read failed completed with %d (%s), "
             "expected P2P_ERR_TRANSPORT", x.is_send ? "send" : "receive", x.tid,
             static_cast<int>(c.status), p2p_status_string(c.status));
}

} // namespace

void run_cma_copy_fails(int argc, char **argv) {
    const bool write = argc > 0 && std::strcmp(argv[0], "write") == 0;
    Rank r;
    set_identity(static_cast<int>(r.rank()), "cma-copy-fails");
    MP_CHECK(r.size() == 2, "cma-copy-fails needs 2 ranks");
    const uint32_t me = r.rank(), peer = 1 - me;
    const size_t kLen = size_t(4) << 20;
    RegBuf first(r.ctx(), kLen, 0), second(r.ctx(), kLen, 0);
    const bool faulty = me == (write ? 0u : 1u);  // the rank whose copy fails
    if (faulty) g_fail_errno.store(ENOMEM);
    for (uint32_t tid : {7u, 8u}) {
        RegBuf &b = tid == 7 ? first : second;
        const uint64_t copies = g_large_copies.load();
        if (me == 0) {
            fill_pattern(b.data(), kLen, 0, 1, tid);
            MP_OK(p2p_comm_send(r.comm(), 1, tid, b.data(), kLen, b.mem(), ctx_of(0)));
        } else {
            MP_OK(p2p_comm_recv(r.comm(), 0, tid, b.data(), kLen, b.mem(), ctx_of(0)));
        }
        collect(r.comm(), {{me == 0, peer, tid, kLen, 0}}, 60,
                tid == 7 ? check_transport_error : check_ok);
        MP_CHECK(!faulty || g_large_copies.load() > copies, "message %u: the %s never "
                 "reached process_vm_%s (single copy off?)", tid, write ? "write" : "read",
                 write ? "writev" : "readv");
    }
    if (me == 1) check_pattern(second.data(), kLen, 0, 1, 8, "cma-copy-fails");
    r.barrier();
    say("cma-copy-fails ok");
    r.finish();
}

} // namespace mp
