/*
 * mp_rank scenarios of the close handshake (core/context.h,
 * Context::Lingering), 2 ranks; mp_test runs them with P2P_LOG_LEVEL=debug
 * and reads what the log says of each endpoint:
 *   linger  both ranks exchange a message each way; rank 0 destroys its
 *       communicator, rank 1 keeps its own 1 s longer. Rank 0's
 *       endpoint to rank 1 lingers until rank 1's closing note comes;
 *       rank 1's closes at once (rank 0's note came first). Then the same
 *       again with the ranks' roles swapped.
 *   linger-killed  as linger's first half, but rank 1 dies by SIGKILL
 *       instead of destroying its communicator: rank 0's lingering
 *       endpoint fails (UCX reports it, or the periodic check finds
 *       rank 1's process gone) and is closed. Rank 0 must not crash or hang.
 *   linger-flush  (3 ranks, same host, single copy on) what a rank sent
 *       on an endpoint that lingers must reach the peer before the
 *       context goes. Rank 1 posts a single-copy send to rank 0 and the
 *       receives of rank 2's many small messages, then stops itself
 *       (SIGSTOP: nothing of it progresses, whatever the load); rank 2
 *       sends those until rank 1's shared-memory FIFO is full. Rank 0 then
 *       receives rank 1's message: its single-copy answer (which completes
 *       rank 1's send) and later its goodbye wait in UCX behind the full
 *       FIFO. Rank 0 destroys its communicator (the endpoint lingers),
 *       resumes rank 1 (SIGCONT), and destroys its context at once. Rank
 *       1's send must complete OK, and rank 0 must leave as a rank that
 *       said goodbye, not as a failure. Before, the context closed the
 *       lingering endpoint by force at once, dropping both: rank 1's send
 *       failed with P2P_ERR_PEER_FAILURE once it found rank 0's process
 *       gone (MpTest.Soak3Ranks/shm_serialized, about 1 run in 17 under
 *       load). The ranks signal through files in P2P_MP_DIR.
 *   linger-flush stuck  the same, but rank 0 resumes rank 1 only once its
 *       context is gone: rank 0's flush gives up after P2P_PEER_TIMEOUT_MS
 *       (and says so), and rank 1's send completes with
 *       P2P_ERR_PEER_FAILURE.
 */
#include "mp_common.h"
#include "mp_scenarios.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace mp {

namespace {

/** How long a closing note is given to reach the other rank. */
constexpr int kNoteMs = 1000;

/** One message each way between the two ranks: endpoints both ways. */
void one_each_way(Rank &r) {
    ExchangeOptions opt;
    exchange(r, {1 - r.rank()}, {64}, 1, opt);
}

} // namespace

void run_linger(int, char **) {
    Rank r;
    set_identity(static_cast<int>(r.rank()), "linger");
    MP_CHECK(r.size() == 2, "linger needs 2 ranks");
    for (uint32_t first : {0u, 1u}) {
        one_each_way(r);
        if (r.rank() == first) r.destroy_comm();
        MP_OK(p2p_bootstrap_barrier(r.bootstrap()));
        if (r.rank() != first) {
            // Time for the first rank's closing note to arrive (300 ms
            // left little margin on a loaded machine).
            std::this_thread::sleep_for(std::chrono::milliseconds(kNoteMs));
            r.destroy_comm();
        }
        MP_OK(p2p_bootstrap_barrier(r.bootstrap()));
        if (first == 0) r.renew_comm();
    }
    // The last closing note reaches the first rank's context after the
    // barrier: give it a moment before the context (which would close
    // what still lingers, and say so) goes.
    std::this_thread::sleep_for(std::chrono::milliseconds(kNoteMs));
    r.finish();
    say("linger ok");
}

void run_linger_killed(int, char **) {
    Rank r;
    set_identity(static_cast<int>(r.rank()), "linger-killed");
    MP_CHECK(r.size() == 2, "linger-killed needs 2 ranks");
    one_each_way(r);
    if (r.rank() == 0) r.destroy_comm();
    MP_OK(p2p_bootstrap_barrier(r.bootstrap()));
    if (r.rank() == 1) die_now(r.comm(), 100);
    // Rank 1's death ends the lingering endpoint within the peer timeout
    // (its process is seen gone once the kernel has torn it down, later
    // under load, or in a sanitizer build): wait well past it.
    const double wait_s = 5.0 * env_ul("P2P_PEER_TIMEOUT_MS", 3000) / 1000.0;
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    r.finish();
    say("linger-killed ok");
}

namespace {

/** linger-flush stuck, rank 1: rank 0 never answered its send. */
void check_big_send_failed(const Xfer &x, const p2p_completion_t &c) {
    if (x.is_send && x.peer == 0) {
        MP_CHECK(c.status == P2P_ERR_PEER_FAILURE, "send to rank 0 gave %s, expected a "
                 "peer failure", p2p_status_string(c.status));
        return;
    }
    check_ok(x, c);
}

} // namespace

void run_linger_flush(int argc, char **argv) {
    const bool stuck = argc > 0 && std::string(argv[0]) == "stuck";
    MP_CHECK(argc == 0 || stuck, "linger-flush [stuck]");
    serialize_victim(1);  // rank 1: only its own calls progress its worker
    const char *dir = std::getenv("P2P_MP_DIR");
    MP_CHECK(dir != nullptr && *dir != '\0', "linger-flush needs P2P_MP_DIR");
    const std::string ready = std::string(dir) + "/ready";  // holds rank 1's pid
    const std::string full = std::string(dir) + "/full";
    Rank r;
    set_identity(static_cast<int>(r.rank()), "linger-flush");
    MP_CHECK(r.size() == 3, "linger-flush runs on 3 ranks");
    constexpr size_t kBig = 32 * 1024;  // single copy, not split (mp_test sets
                                         // P2P_CMA_THRESH=16384; split: 64 KiB)
    constexpr uint32_t kFillers = 600;   // 8 B each: more than a FIFO holds
                                         // (256 by default, context_ucx_defaults)
    RegBuf buf(r.ctx(), kBig + kFillers * 8, 0xEE);
    const Xfer big = {r.rank() == 1, r.rank() == 1 ? 0u : 1u, 1, kBig, 0};
    std::vector<Xfer> fillers;
    for (uint32_t i = 0; i < kFillers; ++i) {
        fillers.push_back({r.rank() == 2, r.rank() == 2 ? 1u : 2u, 100 + i, 8, kBig + i * 8});
    }
    auto post = [&](const std::vector<Xfer> &ops) {
        for (size_t i = 0; i < ops.size(); ++i) {
            const Xfer &x = ops[i];
            if (x.is_send) {
                fill_pattern(buf.data() + x.off, x.len, r.rank(), x.peer, x.tid);
                MP_OK(p2p_comm_send(r.comm(), x.peer, x.tid, buf.data() + x.off, x.len,
                                    buf.mem(), ctx_of(i)));
            } else {
                MP_OK(p2p_comm_recv(r.comm(), x.peer, x.tid, buf.data() + x.off, x.len,
                                    buf.mem(), ctx_of(i)));
            }
        }
    };
    auto check = [&](const std::vector<Xfer> &ops) {
        for (const Xfer &x : ops) {
            if (!x.is_send) check_pattern(buf.data() + x.off, x.len, x.peer, r.rank(), x.tid,
                                          "linger-flush");
        }
    };
    // Endpoints wired up both ways first (a new one's first messages wait
    // on its peer's progress).
    ExchangeOptions opt;
    exchange(r, {0, 1, 2}, {8}, 1000, opt);
    if (r.rank() == 1) {
        std::vector<Xfer> ops = fillers;
        ops.push_back(big);
        post(ops);
        write_pid_file(ready);
        raise(SIGSTOP);  // until rank 0 resumes it
        collect(r.comm(), ops, 30, stuck ? check_big_send_failed : check_ok);
        check(ops);
    } else if (r.rank() == 2) {
        wait_for_file(ready, nullptr);
        wait_stopped(read_pid_file(ready));
        post(fillers);
        // Some must stay in flight: rank 1's FIFO is full.
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        size_t in_flight = 0;
        MP_OK(p2p_comm_pending(r.comm(), P2P_QUEUE_SEND, &in_flight));
        MP_CHECK(in_flight > 0, "all %u sends to a stopped rank completed: "
                 "its FIFO never filled", kFillers);
        create_file(full);
        collect(r.comm(), fillers, 30);
    } else {
        wait_for_file(full, nullptr);
        const pid_t one = read_pid_file(ready);
        post({big});
        collect(r.comm(), {big}, 30);
        check({big});
        r.destroy_comm();
        if (!stuck) MP_CHECK(kill(one, SIGCONT) == 0, "cannot resume rank 1");
        buf.release();
        r.finish();
        if (stuck) MP_CHECK(kill(one, SIGCONT) == 0, "cannot resume rank 1");
        say("linger-flush ok");
        return;
    }
    buf.release();
    r.finish();
    say("linger-flush ok");
}

} // namespace mp
