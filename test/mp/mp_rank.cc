/*
 * mp_rank: one rank of a multi-process test, started by p2prun.
 *   mp_rank <scenario> [args]
 * Exits 0 only when everything the scenario checked was right; otherwise
 * prints the reason to stderr and exits non-zero. Scenarios:
 *   alltoall [max_bytes]  every rank to every rank, sizes 0 B..4 MiB
 *   unexpected            sends first, receives after a barrier
 *   shuffle               random posting order (seeded by rank)
 *   batch                 send/recv batch calls, invalid blocks
 *   truncate              short receives, eager and rendezvous
 *   threads [n]           n threads (8) post and pop concurrently
 *   killee <victim>       the victim kills itself mid-stream
 *   kill-stream [SIZE]    the last rank dies while 64 KiB streams are in flight
 *   idle [sec]            idle between two barriers (see P2P_MP_GO_FILE)
 *   fifo-room N all|some  small sends to a stopped rank: do they fit its FIFO
 *   shutdown              p2p_comm_shutdown cancels pending operations
 *   dead-arrived          receiving what a dead rank sent before dying
 *   cma-fallback          same-host single copy refused by the kernel
 *   cma-withdraw          single-copy sends cancelled before the receive
 *   cma-split-wait        receiver shutdown waits for the sender's half
 *   cma-auto-order        a stream across the per-size path choice, in order
 *   depart [linger_s]     rank 0 leaves first, the others linger
 *   cma-map-free [n [want]]  a receiver unmaps the regions its sender freed
 *   soak [rounds [seed [max]]]  rounds of random mixed traffic, all pairs
 *   comm-churn [n]        n communicators in turn: no descriptor may leak
 *   cancel [rounds]       receives canceled before and racing their messages
 *   gone-churn [n]        goodbyes of destroyed communicators release their endpoints
 *   gone-late             messages reaching a destroyed communicator are dropped
 *   linger                the close handshake: an endpoint lingers until its peer closes its own
 *   linger-killed         a lingering endpoint whose peer dies is closed
 *   cma-split-destroy [late]  destroy with a split receive still in flight
 *   copy-unlocked [split]  posts go on while a large copy is held
 *   cma-copy-fails [write]  a failed single-copy read (write) fails both sides, once
 *   first-connect-gone    a receive whose first connect finds its sender gone
 *   cma-forked            rank 0 is a child forked after the library ran
 *   shared-window [rounds]  4 MiB windows and streams into one shared buffer
 */
#include "mp_common.h"
#include "mp_scenarios.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>

namespace mp {

namespace {

std::vector<uint32_t> all_ranks(const Rank &r) {
    std::vector<uint32_t> v;
    for (uint32_t p = 0; p < r.size(); ++p) {
        v.push_back(p);
    }
    return v;
}

} // namespace

void run_alltoall(int argc, char **argv) {
    size_t max_bytes = argc > 0 ? std::strtoull(argv[0], nullptr, 10)
                                : size_t(4) << 20;
    std::vector<size_t> sizes;
    for (size_t s : {size_t(0), size_t(1), size_t(7), size_t(64), size_t(4095),
                     size_t(65536), size_t((1 << 20) + 3), size_t(4) << 20}) {
        if (s <= max_bytes) {
            sizes.push_back(s);
        }
    }
    Rank r;
    set_identity(static_cast<int>(r.rank()), "alltoall");
    ExchangeOptions opt;
    opt.deadline_s = 120;
    auto t0 = Clock::now();
    exchange(r, all_ranks(r), sizes, 100, opt);
    // A second round on the same communicator, other tensor ids.
    exchange(r, all_ranks(r), sizes, 200, opt);
    r.barrier();
    say("alltoall ok: %zu tensors per pair, 2 rounds, %.2f s", sizes.size(),
        seconds_since(t0));
    r.finish();
}

void run_unexpected(int, char **) {
    Rank r;
    set_identity(static_cast<int>(r.rank()), "unexpected");
    ExchangeOptions opt;
    opt.unexpected = true;
    exchange(r, all_ranks(r),
             {0, 1, 100, 8192, 65536 + 5, size_t(1) << 20, size_t(3) << 20}, 7,
             opt);
    r.barrier();
    say("unexpected ok");
    r.finish();
}

void run_shuffle(int, char **) {
    Rank r;
    set_identity(static_cast<int>(r.rank()), "shuffle");
    ExchangeOptions opt;
    opt.shuffle = true;
    const std::vector<size_t> sizes = {1, 4095, 7, 65536, 300000, 13,
                                       (1 << 20) + 3, 2048, 0, 99999};
    exchange(r, all_ranks(r), sizes, 1000, opt);
    exchange(r, all_ranks(r), sizes, 2000, opt);
    r.barrier();
    say("shuffle ok");
    r.finish();
}

/* Rank 0 leaves first; the others outlive it long enough for UCX to notice
 * its endpoints closing (keepalive or tcp reset), which must not be reported
 * as a failure: it said goodbye. */
void run_depart(int argc, char **argv) {
    const double linger_s = argc > 0 ? std::strtod(argv[0], nullptr) : 2.5;
    Rank r;
    set_identity(static_cast<int>(r.rank()), "depart");
    ExchangeOptions opt;
    exchange(r, all_ranks(r), {8, 65536, (size_t(1) << 20) + 3}, 300, opt);
    r.barrier();
    if (r.rank() != 0) {
        std::this_thread::sleep_for(std::chrono::duration<double>(linger_s));
    }
    say("depart ok");
    r.finish();
}

void run_idle(int argc, char **argv) {
    const unsigned long max_s = argc > 0 ? std::strtoul(argv[0], nullptr, 10) : 60;
    Rank r;
    set_identity(static_cast<int>(r.rank()), "idle");
    r.barrier();
    say("pid=%d idle", static_cast<int>(getpid()));
    const char *go = std::getenv("P2P_MP_GO_FILE");
    auto t0 = Clock::now();
    if (go != nullptr && *go != '\0') {
        while (access(go, F_OK) != 0) {
            MP_CHECK(seconds_since(t0) < static_cast<double>(max_s),
                     "go file %s did not appear within %lu s", go, max_s);
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    } else {
        std::this_thread::sleep_for(std::chrono::seconds(std::min(max_s, 3ul)));
    }
    r.barrier();
    ExchangeOptions opt;
    opt.deadline_s = 30;
    exchange(r, all_ranks(r), {8, 65536}, 5, opt);
    say("idle ok after %.1f s idle", seconds_since(t0));
    r.finish();
}

} // namespace mp

int main(int argc, char **argv) {
    struct Entry {
        const char *name;
        void (*fn)(int, char **);
    };
    static const Entry kScenarios[] = {
        {"alltoall", mp::run_alltoall}, {"unexpected", mp::run_unexpected},
        {"shuffle", mp::run_shuffle},   {"batch", mp::run_batch},
        {"truncate", mp::run_truncate}, {"cancel", mp::run_cancel}, {"gone-churn", mp::run_gone_churn}, {"gone-late", mp::run_gone_late}, {"threads", mp::run_threads},
        {"linger", mp::run_linger},     {"linger-killed", mp::run_linger_killed},
        {"linger-flush", mp::run_linger_flush},
        {"killee", mp::run_killee},     {"kill-stream", mp::run_kill_stream},
        {"stream-in", mp::run_stream_in},
        {"first-connect-gone", mp::run_first_connect_gone},
        {"idle", mp::run_idle},
        {"shutdown", mp::run_shutdown}, {"cma-fallback", mp::run_cma_fallback},
        {"cma-auto-order", mp::run_cma_auto_order},
        {"cma-withdraw", mp::run_cma_withdraw}, {"depart", mp::run_depart},
        {"cma-split-wait", mp::run_cma_split_wait},
        {"cma-split-destroy", mp::run_cma_split_destroy},
        {"copy-unlocked", mp::run_copy_unlocked},
        {"cma-copy-fails", mp::run_cma_copy_fails},
        {"dead-arrived", mp::run_dead_arrived}, {"dead-first", mp::run_dead_first},
        {"leave", mp::run_leave},
        {"leave-oom", mp::run_leave_oom}, {"stopped-peer", mp::run_stopped_peer},
        {"fifo-room", mp::run_fifo_room},
        {"stalled-bulk", mp::run_stalled_bulk},
        {"soak", mp::run_soak}, {"shared-window", mp::run_shared_window}, {"comm-churn", mp::run_comm_churn},
        {"comm-race", mp::run_comm_race},
        {"cma-map-free", mp::run_cma_map_free}, {"cma-forked", mp::run_cma_forked}};
    if (argc >= 2) {
        for (const Entry &e : kScenarios) {
            if (std::strcmp(argv[1], e.name) == 0) {
                mp::set_identity(-1, e.name);
                e.fn(argc - 2, argv + 2);
                return 0;
            }
        }
    }
    std::fprintf(stderr, "usage: %s <scenario> [args]; scenarios:", argv[0]);
    for (const Entry &e : kScenarios) {
        std::fprintf(stderr, " %s", e.name);
    }
    std::fprintf(stderr, "\n");
    return 2;
}
