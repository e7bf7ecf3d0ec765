/*
 * mp_rank scenarios of the close handshake (core/context.h,
 * Context::Lingering), 2 ranks; mp_test runs them with P2P_LOG_LEVEL=debug
 * and reads what the log says of each endpoint:
 *   linger  both ranks exchange a message each way; rank 0 destroys its
 *       communicator, rank 1 keeps its own 300 ms longer. Rank 0's
 *       endpoint to rank 1 lingers until rank 1's closing note comes;
 *       rank 1's closes at once (rank 0's note came first). Then the same
 *       again with the ranks' roles swapped.
 *   linger-killed  as linger's first half, but rank 1 dies by SIGKILL
 *       instead of destroying its communicator: rank 0's lingering
 *       endpoint fails (UCX reports it, or the periodic check finds
 *       rank 1's process gone) and is closed. Rank 0 must not crash or hang.
 */
#include "mp_common.h"
#include "mp_scenarios.h"

#include <chrono>
#include <thread>
#include <vector>

namespace mp {

namespace {

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
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            r.destroy_comm();
        }
        MP_OK(p2p_bootstrap_barrier(r.bootstrap()));
        if (first == 0) r.renew_comm();
    }
    // The last closing note reaches the first rank's context after the
    // barrier: give it a moment before the context (which would close
    // what still lingers, and say so) goes.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
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
    // Rank 1's death ends the lingering endpoint within the peer timeout.
    const double wait_s = 2.0 * env_ul("P2P_PEER_TIMEOUT_MS", 3000) / 1000.0;
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    r.finish();
    say("linger-killed ok");
}

} // namespace mp
