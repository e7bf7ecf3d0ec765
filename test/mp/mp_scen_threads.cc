/*
 * mp_rank scenario "threads": n threads per rank (default 8) each register
 * their own receive arena, post sends and receives to every rank, and pop
 * completions of any thread concurrently. Every op must complete exactly once
 * (counted with atomics across threads) and every byte must arrive.
 */
#include "mp_common.h"
#include "mp_scenarios.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <thread>

namespace mp {

namespace {

struct Shared {
    Rank *r = nullptr;
    std::vector<Xfer> ops;          // all ops of all threads
    std::vector<size_t> first_op;   // thread t owns [first_op[t], first_op[t+1])
    std::vector<size_t> arena_size; // receive arena bytes per thread
    std::unique_ptr<RegBuf> sbuf;
    std::unique_ptr<std::atomic<int>[]> seen;
    std::atomic<size_t> done{0};
    std::atomic<size_t> posted{0};
    double deadline_s = 120;
};

void handle(Shared &s, p2p_queue_t q, const p2p_completion_t &c) {
    size_t i = index_of(c.user_context);
    MP_CHECK(i < s.ops.size(), "completion with unknown user_context %p",
             c.user_context);
    const Xfer &x = s.ops[i];
    MP_CHECK(x.is_send == (q == P2P_QUEUE_SEND), "op %zu on the wrong queue", i);
    int before = s.seen[i].fetch_add(1);
    MP_CHECK(before == 0, "op %zu (%s peer %u tensor %u) completed %d times", i,
             x.is_send ? "send" : "recv", x.peer, x.tid, before + 1);
    MP_CHECK(c.peer == x.peer && c.tensor_id == x.tid && c.status == P2P_OK &&
                 c.bytes == x.len,
             "%s completion: peer %u tensor %u status %d (%s) bytes %llu; "
             "expected peer %u tensor %u OK %zu",
             x.is_send ? "send" : "recv", c.peer, c.tensor_id,
             static_cast<int>(c.status), p2p_status_string(c.status),
             static_cast<unsigned long long>(c.bytes), x.peer, x.tid, x.len);
    s.done.fetch_add(1);
}

void drain(Shared &s, int wait_ms) {
    for (const p2p_completion_t &c : pop(s.r->comm(), P2P_QUEUE_RECV, wait_ms)) {
        handle(s, P2P_QUEUE_RECV, c);
    }
    for (const p2p_completion_t &c : pop(s.r->comm(), P2P_QUEUE_SEND, 0)) {
        handle(s, P2P_QUEUE_SEND, c);
    }
}

void worker(Shared &s, size_t t) {
    Rank &r = *s.r;
    RegBuf rbuf(r.ctx(), s.arena_size[t], 0xEE); // concurrent registrations
    for (size_t i = s.first_op[t]; i < s.first_op[t + 1]; ++i) {
        const Xfer &x = s.ops[i];
        if (x.is_send) {
            MP_OK(p2p_comm_send(r.comm(), x.peer, x.tid, s.sbuf->data() + x.off,
                                x.len, s.sbuf->mem(), ctx_of(i)));
        } else {
            MP_OK(p2p_comm_recv(r.comm(), x.peer, x.tid, rbuf.data() + x.off,
                                x.len, rbuf.mem(), ctx_of(i)));
        }
        s.posted.fetch_add(1);
        if (i % 7 == 0) {
            drain(s, 0);
        }
    }
    const auto t0 = Clock::now();
    while (s.done.load() < s.ops.size()) {
        MP_CHECK(seconds_since(t0) < s.deadline_s,
                 "thread %zu: %zu of %zu ops completed after %.0f s "
                 "(%zu posted)", t, s.done.load(), s.ops.size(), s.deadline_s,
                 s.posted.load());
        drain(s, 5);
    }
    for (size_t i = s.first_op[t]; i < s.first_op[t + 1]; ++i) {
        const Xfer &x = s.ops[i];
        if (!x.is_send) {
            check_pattern(rbuf.data() + x.off, x.len, x.peer, r.rank(), x.tid,
                          "threads recv");
        }
    }
    rbuf.release(); // concurrent deregistrations
}

} // namespace

void run_threads(int argc, char **argv) {
    const size_t nthreads = argc > 0 ? std::strtoul(argv[0], nullptr, 10) : 8;
    const size_t iters = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 6;
    const size_t kSizes[] = {256, 65537, 12293, 1, (size_t(1) << 20) + 5, 0};
    Rank r;
    set_identity(static_cast<int>(r.rank()), "threads");
    Shared s;
    s.r = &r;
    size_t soff = 0;
    for (size_t t = 0; t < nthreads; ++t) {
        s.first_op.push_back(s.ops.size());
        size_t roff = 0;
        for (size_t k = 0; k < iters; ++k) {
            for (uint32_t p = 0; p < r.size(); ++p) {
                uint32_t tid = static_cast<uint32_t>(t * 1000 + k);
                // Big messages only now and then: 2 cores, many threads.
                // Symmetric in (rank, peer): both sides agree on the size.
                size_t len = kSizes[(k + p + r.rank() + t) % 6];
                if (len > 65536 && (t + k) % 4 != 0) {
                    len = 4093;
                }
                s.ops.push_back({false, p, tid, len, roff});
                roff += len;
                s.ops.push_back({true, p, tid, len, soff});
                soff += len;
            }
        }
        s.arena_size.push_back(roff);
    }
    s.first_op.push_back(s.ops.size());
    s.sbuf.reset(new RegBuf(r.ctx(), soff, 0));
    for (const Xfer &x : s.ops) {
        if (x.is_send) {
            fill_pattern(s.sbuf->data() + x.off, x.len, r.rank(), x.peer, x.tid);
        }
    }
    s.seen.reset(new std::atomic<int>[s.ops.size()]);
    for (size_t i = 0; i < s.ops.size(); ++i) {
        s.seen[i].store(0);
    }
    auto t0 = Clock::now();
    r.barrier();
    std::vector<std::thread> th;
    for (size_t t = 0; t < nthreads; ++t) {
        th.emplace_back(worker, std::ref(s), t);
    }
    for (std::thread &x : th) {
        x.join();
    }
    MP_CHECK(s.done.load() == s.ops.size(), "%zu of %zu completions",
             s.done.load(), s.ops.size());
    expect_quiet(r.comm());
    s.sbuf->release();
    r.barrier();
    say("threads ok: %zu threads, %zu ops, %.2f s", nthreads, s.ops.size(),
        seconds_since(t0));
    r.finish();
}

} // namespace mp
