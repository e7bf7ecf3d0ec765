/*
 * mp_rank scenarios about same-host single copy (src/core/cma.h), 2 ranks:
 *   cma-fallback  rank 0 makes itself unreadable (not dumpable; both ranks
 *       drop CAP_SYS_PTRACE), so rank 1's reads of rank 0 fail with EPERM and
 *       rank 0 must push its payloads through UCX instead; rank 1 -> 0 still
 *       reads directly -- but rank 1 may not write rank 0's memory either,
 *       so its split copies (core/cma.h) fall back to rank 0 reading the
 *       whole message. Every byte is verified both ways, twice (the second
 *       round runs after both have stopped trying what failed).
 *   cma-withdraw  rank 0 posts large sends nobody receives yet, shuts its
 *       communicator down (the sends complete P2P_ERR_CANCELED) and
 *       overwrites the buffers; rank 1 posts its receives only then: they
 *       must fail (P2P_ERR_PEER_FAILURE), never deliver the new bytes as OK.
 *       `freed`: rank 0 gives its buffers back instead (unmapped; with
 *       MP_ALLOC=lib p2p_mem_free, which also closes the memfd the requests
 *       name): the receives must fail the same way, although the sender's
 *       address now faults.
 *   cma-split-wait  rank 0 posts a split-copy send and stops itself
 *       (SIGSTOP); only then does rank 1 post the receive, which answers
 *       the request, and shut its communicator down: the shutdown
 *       must neither return nor complete the receive while rank 0 may still
 *       write into the buffer. After SIGCONT the receive completes with
 *       every byte right and the shutdown returns. `cma-split-wait
 *       sending`: rank 1 also leaves a 128 KiB send rank 0 never receives
 *       in flight (UCX's rendezvous: only closing its endpoint by force
 *       ends it), so that endpoint must stay open until the split receive
 *       is over (its ACK still reaches rank 0) and then carry the goodbye
 *       (rank 0's later receive from rank 1 fails, not waits). `stall`: as
 *       sending, but rank 0 stays stopped until rank 1's shutdown gave up
 *       waiting (run it with a short P2P_PEER_TIMEOUT_MS): when it returns
 *       the send has ended P2P_ERR_CANCELED and the receive
 *       P2P_ERR_TIMEOUT, its buffer still registered (P2P_ERR_BUSY) until
 *       rank 0, resumed, reports its half.
 *   cma-auto-order [unreceived] [SIZE]  rank 0 streams SIZE-byte (64 KiB)
 *       messages, all with one tensor id, to rank 1 (P2P_CMA_THRESH=auto:
 *       the sender measures UCX, then probes single copy, and may switch
 *       between them mid-stream; over tcp, P2P_TCP_BULK_THRESH=auto from
 *       256 KiB: UCX first, the tcp path probed); every message must
 *       arrive intact and in posting order. `unreceived`: then rank 0 posts
 *       sends rank 1 never receives and shuts down: each must complete once
 *       (OK or P2P_ERR_CANCELED), the synchronous ones the choice makes
 *       included.
 *   cma-map-free [n [want]]  rank 0 sends n (16) messages, each from its own
 *       p2p_mem_alloc region, freed once the send completed and before the
 *       next is allocated; rank 1 reads them through its mapping of each
 *       region. After every receive rank 1 must map exactly one of rank
 *       0's regions (the last), or p2p_mem_free would not give memory back
 *       while a receiver kept mappings of it. want: 1, or 0 where single
 *       copy is off (tcp): then none may be mapped. Then rank 0 leaves:
 *       within 10 s rank 1 must have unmapped its region and epoch table.
 *   cma-forked  rank 0's process creates a communicator of its own (rank 0
 *       of 1: the library works out its identity), destroys it and forks;
 *       the child is rank 0 and sends 1 MiB that it wrote after the fork.
 *       Rank 1 must read the child, not the parent (whose copy of the
 *       buffer stayed zero).
 */
#include "mp_common.h"
#include "mp_scenarios.h"

#include <ucxp2p/p2p_mem.h>

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace mp {

namespace {

/** Drop CAP_SYS_PTRACE from this process (a no-op when not privileged). */
void drop_ptrace_capability() {
    __user_cap_header_struct hdr;
    __user_cap_data_struct data[2];
    std::memset(&hdr, 0, sizeof(hdr));
    std::memset(data, 0, sizeof(data));
    hdr.version = _LINUX_CAPABILITY_VERSION_3;
    MP_CHECK(syscall(SYS_capget, &hdr, data) == 0, "capget: %s", std::strerror(errno));
    data[0].effective &= ~(1u << CAP_SYS_PTRACE);
    data[0].permitted &= ~(1u << CAP_SYS_PTRACE);
    data[0].inheritable &= ~(1u << CAP_SYS_PTRACE);
    MP_CHECK(syscall(SYS_capset, &hdr, data) == 0, "capset: %s", std::strerror(errno));
}

void exchange_verified(Rank &r, uint32_t tid0) {
    const std::vector<size_t> sizes = {8, 40, 16384, 65536, (size_t(1) << 20) + 5};
    const uint32_t peer = 1 - r.rank();
    size_t total = 0;
    for (size_t s : sizes) total += s;
    RegBuf sbuf(r.ctx(), total, 0);
    RegBuf rbuf(r.ctx(), total, 0xEE);
    std::vector<Xfer> ops;
    size_t off = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
        uint32_t tid = tid0 + static_cast<uint32_t>(k);
        fill_pattern(sbuf.data() + off, sizes[k], r.rank(), peer, tid);
        ops.push_back({false, peer, tid, sizes[k], off});
        MP_OK(p2p_comm_recv(r.comm(), peer, tid, rbuf.data() + off, sizes[k],
                            rbuf.mem(), ctx_of(ops.size() - 1)));
        ops.push_back({true, peer, tid, sizes[k], off});
        MP_OK(p2p_comm_send(r.comm(), peer, tid, sbuf.data() + off, sizes[k],
                            sbuf.mem(), ctx_of(ops.size() - 1)));
        off += sizes[k];
    }
    collect(r.comm(), ops, 60);
    expect_quiet(r.comm());
    for (const Xfer &x : ops) {
        if (!x.is_send) {
            check_pattern(rbuf.data() + x.off, x.len, x.peer, r.rank(), x.tid,
                          "cma exchange");
        }
    }
    sbuf.release();
    rbuf.release();
}

void withdrawn_check(const Xfer &x, const p2p_completion_t &c) {
    if (x.is_send) {
        MP_CHECK(c.status == P2P_ERR_CANCELED, "send of %zu B nobody received "
                 "completed with %d (%s) at shutdown, expected P2P_ERR_CANCELED",
                 x.len, static_cast<int>(c.status), p2p_status_string(c.status));
        return;
    }
    MP_CHECK(c.status == P2P_ERR_PEER_FAILURE, "receive of a withdrawn %zu B "
             "send completed with %d (%s) and %llu bytes, expected "
             "P2P_ERR_PEER_FAILURE", x.len, static_cast<int>(c.status),
             p2p_status_string(c.status),
             static_cast<unsigned long long>(c.bytes));
}

} // namespace

void run_cma_fallback(int, char **) {
    // Capabilities belong to threads: drop it before the library starts its
    // progress thread (which may do the reads), in both ranks. Rank 1 still
    // reads rank 0's memory as a same-user process would -- until rank 0
    // makes itself non-dumpable below.
    drop_ptrace_capability();
    Rank r;
    set_identity(static_cast<int>(r.rank()), "cma-fallback");
    MP_CHECK(r.size() == 2, "cma-fallback needs 2 ranks");
    if (r.rank() == 0) {
        MP_CHECK(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0, "prctl: %s",
                 std::strerror(errno));
    }
    r.barrier();
    exchange_verified(r, 100);
    exchange_verified(r, 200);
    r.barrier();
    say("cma-fallback ok");
    r.finish();
}

void run_cma_withdraw(int argc, char **argv) {
    const bool freed = argc > 0 && std::strcmp(argv[0], "freed") == 0;
    Rank r;
    set_identity(static_cast<int>(r.rank()), "cma-withdraw");
    MP_CHECK(r.size() == 2, "cma-withdraw needs 2 ranks");
    const size_t kLen = size_t(1) << 20, kCount = 4;
    const char *alloc = std::getenv("MP_ALLOC");
    const bool lib = alloc != nullptr && std::strcmp(alloc, "lib") == 0;
    RegBuf buf(r.ctx(), kLen * kCount, 0, freed && !lib ? Alloc::pages : Alloc::env);
    std::vector<Xfer> ops;
    for (size_t k = 0; k < kCount; ++k) {
        ops.push_back({r.rank() == 0, 1 - r.rank(), static_cast<uint32_t>(k),
                       kLen, k * kLen});
    }
    if (r.rank() == 0) {
        for (size_t k = 0; k < kCount; ++k) {
            fill_pattern(buf.data() + k * kLen, kLen, 0, 1, static_cast<uint32_t>(k));
            MP_OK(p2p_comm_send(r.comm(), 1, static_cast<uint32_t>(k),
                                buf.data() + k * kLen, kLen, buf.mem(), ctx_of(k)));
        }
        r.barrier();  // the requests have reached rank 1
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        MP_OK(p2p_comm_shutdown(r.comm()));
        collect(r.comm(), ops, 30, withdrawn_check);
        if (freed) {
            buf.free_now();  // the user owns it again: gone
        } else {
            std::memset(buf.data(), 0x5A, kLen * kCount);  // the user owns it again
        }
        r.barrier();  // rank 1 may receive now
        r.barrier();  // rank 1 is done
    } else {
        r.barrier();
        r.barrier();  // rank 0 withdrew its sends and reused the buffers
        for (size_t k = 0; k < kCount; ++k) {
            MP_OK(p2p_comm_recv(r.comm(), 0, static_cast<uint32_t>(k),
                                buf.data() + k * kLen, kLen, buf.mem(), ctx_of(k)));
        }
        collect(r.comm(), ops, 30, withdrawn_check);
        r.barrier();
    }
    if (!freed || r.rank() == 1) buf.release();
    say("cma-withdraw ok");
    r.finish();
}

void run_cma_split_wait(int argc, char **argv) {
    const bool stall = argc > 0 && std::strcmp(argv[0], "stall") == 0;
    const bool sending = stall || (argc > 0 && std::strcmp(argv[0], "sending") == 0);
    Rank r;
    set_identity(static_cast<int>(r.rank()), "cma-split-wait");
    MP_CHECK(r.size() == 2, "cma-split-wait needs 2 ranks");
    const size_t kLen = size_t(4) << 20;  // above P2P_CMA_SPLIT
    RegBuf big(r.ctx(), kLen, r.rank() == 0 ? 0 : 0xEE);
    RegBuf small(r.ctx(), 16, 0);
    // Below the threshold (auto: its size class starts with UCX, and this is
    // its first send): UCX moves it, by rendezvous where it is to stay in
    // flight (mp_test sets UCX_RNDV_THRESH below it: eager, it completes).
    const size_t kMid = size_t(128) << 10;
    RegBuf mid(r.ctx(), kMid, 0x5A);
    const std::vector<Xfer> payload = {{r.rank() == 0, 1 - r.rank(), 2, kLen, 0}};
    if (r.rank() == 0) {
        fill_pattern(big.data(), kLen, 0, 1, 2);
        send_pid_await_go(r.comm(), small);
        MP_OK(p2p_comm_send(r.comm(), 1, 2, big.data(), kLen, big.mem(), ctx_of(0)));
        std::raise(SIGSTOP);  // rank 1 lets us go on
        if (stall) {
            // Rank 1 gave up on the receive and left: the send ends once,
            // how depends on when its goodbye is taken in.
            collect(r.comm(), payload, 30, [](const Xfer &, const p2p_completion_t &) {});
        } else {
            collect(r.comm(), payload, 30);  // its ACK came
        }
        if (sending && !stall) {  // stall: the goodbye went before the ACK
            // Rank 1 left: its goodbye makes a receive from it fail (at the
            // post, or once the goodbye comes), where without one it would
            // wait for as long as rank 1's process lives.
            const std::vector<Xfer> never = {{false, 1, 9, 8, 0}};
            p2p_status_t st = p2p_comm_recv(r.comm(), 1, 9, small.data(), 8,
                                            small.mem(), ctx_of(0));
            if (st == P2P_OK) {
                collect(r.comm(), never, 10, [](const Xfer &, const p2p_completion_t &c) {
                    MP_CHECK(c.status == P2P_ERR_PEER_FAILURE, "a receive from the rank "
                             "that left: status %d, expected P2P_ERR_PEER_FAILURE",
                             static_cast<int>(c.status));
                });
            } else {
                MP_CHECK(st == P2P_ERR_PEER_FAILURE, "a receive from the rank that "
                         "left: post gave %d, expected P2P_ERR_PEER_FAILURE",
                         static_cast<int>(st));
            }
        }
    } else {
        const pid_t pid = await_pid_send_go(r.comm(), small);
        wait_stopped(pid);
        // The request was sent before the stop and waits here unexpected;
        // only now does the receive match and answer it, so rank 0 cannot
        // have written its half yet. Let the answer go out (the progress
        // thread does it at once; a second covers a loaded CI).
        MP_OK(p2p_comm_recv(r.comm(), 0, 2, big.data(), kLen, big.mem(), ctx_of(0)));
        MP_CHECK(pop(r.comm(), P2P_QUEUE_RECV, 1000).empty(),
                 "the receive completed although the sender is stopped");
        if (sending) {
            MP_OK(p2p_comm_send(r.comm(), 0, 4, mid.data(), kMid, mid.mem(), ctx_of(0)));
        }
        std::atomic<bool> returned{false};
        p2p_status_t shut_st = P2P_ERR_TIMEOUT;  // until the thread sets it
        std::thread shut([&] {
            shut_st = p2p_comm_shutdown(r.comm());
            returned = true;
        });
        // Multi mode: wait on the queue meanwhile (nothing may come). In
        // serialized mode a call beside the shutdown is undefined (UCX
        // asserted on two threads in worker progress): only sleep; an early
        // completion would then show in the collect below.
        const char *mode = std::getenv("P2P_THREAD_MODE");
        std::vector<p2p_completion_t> early;
        if (mode != nullptr && std::strcmp(mode, "serialized") == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
        } else {
            early = pop(r.comm(), P2P_QUEUE_RECV, 300);
        }
        bool early_return = returned.load();
        if (stall) {
            // Past the shutdown's deadline it stops waiting for the split
            // receive, and the send to the stalled rank is ended anyway.
            Clock::time_point t0 = Clock::now();
            while (!returned.load()) {
                MP_CHECK(seconds_since(t0) < 30, "shutdown never gave up waiting");
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            say("shutdown returned after %.1f s", seconds_since(t0));
            std::vector<p2p_completion_t> c = pop(r.comm(), P2P_QUEUE_SEND, 0);
            MP_CHECK(c.size() == 1 && c[0].status == P2P_ERR_CANCELED,
                     "the send to the stalled rank when shutdown returned: %zu "
                     "completions (status %d), expected P2P_ERR_CANCELED", c.size(),
                     c.empty() ? 0 : static_cast<int>(c[0].status));
            // The split receive it gave up on has completed too, as a
            // timeout, and its buffer stays registered while the stopped
            // sender may still write into it.
            c = pop(r.comm(), P2P_QUEUE_RECV, 0);
            MP_CHECK(c.size() == 1 && c[0].status == P2P_ERR_TIMEOUT,
                     "the split receive when shutdown returned: %zu completions "
                     "(status %d), expected P2P_ERR_TIMEOUT", c.size(),
                     c.empty() ? 0 : static_cast<int>(c[0].status));
            MP_CHECK(p2p_mem_deregister(big.mem()) == P2P_ERR_BUSY, "the receive "
                     "buffer was deregistered while the stopped sender may write into it");
        }
        kill(pid, SIGCONT);
        shut.join();
        MP_CHECK(early.empty(), "shutdown completed the receive (status %d) while "
                 "the sender could still write into its buffer",
                 early.empty() ? 0 : static_cast<int>(early[0].status));
        MP_CHECK(!early_return, "shutdown returned while the sender could still "
                 "write into a receive buffer");
        MP_OK(shut_st);
        if (stall) {
            // Resumed, the sender reports its half (or exits): the
            // registration comes free. Polling drives progress in
            // serialized mode.
            double took = await_deregistered(
                big.mem(), 20, "the receive shutdown gave up on", [&] {
                    p2p_completion_t extra;
                    size_t n = 0;
                    MP_OK(p2p_comm_poll(r.comm(), P2P_QUEUE_RECV, &extra, 1, &n));
                    MP_CHECK(n == 0, "a second completion of the split receive");
                });
            say("registration released after %.2f s", took);
        } else {
            collect(r.comm(), payload, 30);
            check_pattern(big.data(), kLen, 0, 1, 2, "split payload");
        }
        if (sending && !stall) {
            std::vector<p2p_completion_t> c = pop(r.comm(), P2P_QUEUE_SEND, 10000);
            MP_CHECK(c.size() == 1 && c[0].status == P2P_ERR_CANCELED,
                     "the send nobody received: %zu completions (status %d), expected "
                     "P2P_ERR_CANCELED", c.size(),
                     c.empty() ? 0 : static_cast<int>(c[0].status));
        }
    }
    r.barrier();
    mid.release();
    if (!stall || r.rank() == 0) big.release();  // else deregistered above
    small.release();
    say("cma-split-wait ok");
    r.finish();
}

void run_cma_auto_order(int argc, char **argv) {
    const bool unreceived = argc > 0 && std::strcmp(argv[0], "unreceived") == 0;
    const int at = unreceived ? 1 : 0;
    const size_t kLen = argc > at ? std::strtoull(argv[at], nullptr, 10) : size_t(64) << 10;
    Rank r;
    set_identity(static_cast<int>(r.rank()), "cma-auto-order");
    MP_CHECK(r.size() == 2, "cma-auto-order needs 2 ranks");
    MP_CHECK(kLen >= 16, "cma-auto-order: SIZE below 16");
    constexpr uint32_t kWindow = 32, kMessages = 1024, kTid = 7;
    RegBuf buf(r.ctx(), kLen * kWindow, 0);
    std::vector<Xfer> window;
    for (uint32_t first = 0; first < kMessages; first += kWindow) {
        window.clear();
        for (uint32_t k = 0; k < kWindow; ++k) {
            uint8_t *slot = buf.data() + k * kLen;
            window.push_back({r.rank() == 0, 1 - r.rank(), kTid, kLen, k * kLen});
            if (r.rank() == 0) {
                fill_pattern(slot, kLen, 0, 1, first + k);  // its sequence number
                MP_OK(p2p_comm_send(r.comm(), 1, kTid, slot, kLen, buf.mem(), ctx_of(k)));
            } else {
                MP_OK(p2p_comm_recv(r.comm(), 0, kTid, slot, kLen, buf.mem(), ctx_of(k)));
            }
        }
        collect(r.comm(), window, 60);
        if (r.rank() == 1) {
            // Equal (peer, tensor_id): receives match in posting order.
            for (uint32_t k = 0; k < kWindow; ++k) {
                check_pattern(buf.data() + k * kLen, kLen, 0, 1, first + k, "cma-auto-order");
            }
        }
        r.barrier();  // the sender reuses its buffers only now
    }
    if (unreceived) {
        if (r.rank() == 0) {
            window.clear();
            for (uint32_t k = 0; k < kWindow; ++k) {
                window.push_back({true, 1, kTid + 1, kLen, k * kLen});
                MP_OK(p2p_comm_send(r.comm(), 1, kTid + 1, buf.data() + k * kLen, kLen,
                                    buf.mem(), ctx_of(k)));
            }
            MP_OK(p2p_comm_shutdown(r.comm()));
            static size_t cancelled = 0;  // CompletionCheck takes no capture
            collect(r.comm(), window, 30, [](const Xfer &, const p2p_completion_t &c) {
                MP_CHECK(c.status == P2P_OK || c.status == P2P_ERR_CANCELED,
                         "an unreceived send ended %d", static_cast<int>(c.status));
                cancelled += c.status == P2P_ERR_CANCELED ? 1 : 0;
            });
            say("%zu of %u unreceived sends cancelled", cancelled, kWindow);
        }
        r.barrier();
    }
    say("cma-auto-order ok");
    r.finish();
}

namespace {

/** Read-only shared mappings here of another process' p2p_mem_alloc
 *  regions (named "ucxp2p"; epoch tables are "ucxp2p-epochs", and this
 *  process' own regions are mapped read-write). */
size_t peer_maps(const char *name = "/memfd:ucxp2p (deleted)") {
    std::ifstream f("/proc/self/maps");
    std::string line;
    size_t n = 0;
    while (std::getline(f, line)) {
        if (line.find(" r--s ") != std::string::npos &&
            line.find(name) != std::string::npos) {
            ++n;
        }
    }
    return n;
}

} // namespace

void run_cma_map_free(int argc, char **argv) {
    const uint32_t n = argc > 0 ? static_cast<uint32_t>(std::strtoul(argv[0], nullptr, 10)) : 16;
    // 1 where single copy applies (the test knows the transport), else 0.
    const size_t want = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1;
    Rank r;
    set_identity(static_cast<int>(r.rank()), "cma-map-free");
    MP_CHECK(r.size() == 2, "cma-map-free needs 2 ranks");
    constexpr size_t kLen = size_t(64) << 10;
    RegBuf rbuf(r.ctx(), kLen, 0);
    for (uint32_t k = 0; k < n; ++k) {
        std::vector<Xfer> one = {{r.rank() == 0, 1 - r.rank(), k, kLen, 0}};
        if (r.rank() == 0) {
            void *p = nullptr;
            p2p_mem_h mem = nullptr;
            MP_OK(p2p_mem_alloc(r.ctx(), kLen, -1, &p, &mem));
            fill_pattern(static_cast<uint8_t *>(p), kLen, 0, 1, k);
            MP_OK(p2p_comm_send(r.comm(), 1, k, p, kLen, mem, ctx_of(0)));
            collect(r.comm(), one, 60);  // single copy: after rank 1 read it
            MP_OK(p2p_mem_free(p, mem));
        } else {
            MP_OK(p2p_comm_recv(r.comm(), 0, k, rbuf.data(), kLen, rbuf.mem(), ctx_of(0)));
            collect(r.comm(), one, 60);
            check_pattern(rbuf.data(), kLen, 0, 1, k, "cma-map-free");
            const size_t maps = peer_maps();
            MP_CHECK(maps == want, "after message %u, %zu of rank 0's regions are "
                     "mapped here; want %zu (the %u freed before it must be unmapped)",
                     k, maps, want, k);
        }
    }
    r.barrier();
    if (r.rank() == 0) {
        say("cma-map-free ok");
        r.finish();  // leaves: its goodbye reaches rank 1
        return;
    }
    // Rank 0 is gone (or going): its region and epoch table must not stay
    // mapped here, keeping its memory alive, until this communicator ends.
    const auto t0 = Clock::now();
    p2p_completion_t c;
    size_t got = 0;
    while (peer_maps() + peer_maps("/memfd:ucxp2p-epochs (deleted)") != 0) {
        MP_CHECK(seconds_since(t0) < 10, "10 s after rank 0 left, %zu of its regions "
                 "and %zu epoch tables are still mapped here", peer_maps(),
                 peer_maps("/memfd:ucxp2p-epochs (deleted)"));
        p2p_status_t st = p2p_comm_wait(r.comm(), P2P_QUEUE_RECV, &c, 1, &got, 10);
        MP_CHECK(st == P2P_ERR_TIMEOUT, "wait with nothing posted returned %d", st);
    }
    say("cma-map-free ok");
    r.finish();
}

void run_cma_forked(int, char **) {
    const char *env_rank = std::getenv("RANK");
    const bool first = env_rank != nullptr && std::strcmp(env_rank, "0") == 0;
    constexpr size_t kLen = size_t(1) << 20;  // single copy, also under auto
    // Rank 0's send buffer exists before the fork: parent and child then
    // hold different bytes at one address.
    void *p = nullptr;
    MP_CHECK(posix_memalign(&p, 4096, kLen) == 0, "out of memory (%zu B)", kLen);
    uint8_t *buf = static_cast<uint8_t *>(p);
    std::memset(buf, 0, kLen);
    if (first) {
        p2p_context_h ctx = nullptr;
        p2p_bootstrap_h bs = nullptr;
        p2p_comm_h comm = nullptr;
        MP_OK(p2p_context_create(nullptr, &ctx));
        MP_OK(p2p_bootstrap_create(P2P_BOOTSTRAP_SINGLE, &bs));
        MP_OK(p2p_comm_create(ctx, bs, &comm));
        MP_OK(p2p_comm_destroy(comm));
        MP_OK(p2p_bootstrap_destroy(bs));
        MP_OK(p2p_context_destroy(ctx));
        std::fflush(nullptr);
        const pid_t child = fork();
        MP_CHECK(child >= 0, "fork: %s", std::strerror(errno));
        if (child > 0) {  // the parent only waits: the child is rank 0
            int status = 0;
            MP_CHECK(waitpid(child, &status, 0) == child, "waitpid: %s",
                     std::strerror(errno));
            _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
        }
    }
    Rank r;
    set_identity(static_cast<int>(r.rank()), "cma-forked");
    MP_CHECK(r.size() == 2, "cma-forked needs 2 ranks");
    p2p_mem_h mem = nullptr;
    MP_OK(p2p_mem_register(r.ctx(), buf, kLen, &mem));
    const std::vector<Xfer> one = {{r.rank() == 0, 1 - r.rank(), 1, kLen, 0}};
    if (r.rank() == 0) {
        fill_pattern(buf, kLen, 0, 1, 1);
        MP_OK(p2p_comm_send(r.comm(), 1, 1, buf, kLen, mem, ctx_of(0)));
    } else {
        MP_OK(p2p_comm_recv(r.comm(), 0, 1, buf, kLen, mem, ctx_of(0)));
    }
    collect(r.comm(), one, 60);
    if (r.rank() == 1) check_pattern(buf, kLen, 0, 1, 1, "cma-forked");
    r.barrier();
    MP_OK(p2p_mem_deregister(mem));
    std::free(buf);
    say("cma-forked ok");
    r.finish();
}

} // namespace mp
