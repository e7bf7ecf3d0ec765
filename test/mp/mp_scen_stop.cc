/*
 * mp_rank scenario about a peer that stops (SIGSTOP) before we connect:
 *   stopped-peer  (2 ranks) rank 1 sends rank 0 its pid and stops itself;
 *       only then does rank 0 post a send to it, which creates rank 0's
 *       endpoint to rank 1. Rank 0 then shuts its communicator down: the
 *       shutdown must return within its bound and the send complete exactly
 *       once (P2P_ERR_CANCELED, or P2P_OK where the transport finished it
 *       locally), and destroying the communicator must return although the
 *       endpoint's close may not end while rank 1 is stopped (over tcp with
 *       UCX 1.13 it usually does not: destroy gives up on it after its
 *       bound). Rank 0 resumes rank 1 and keeps its context (and its
 *       progress thread) alive for a second, when what UCX still had
 *       pending on that endpoint ends: nothing may reach the destroyed
 *       communicator (a sanitizer build reports it). Rank 1 then destroys
 *       its communicator as usual.
 */
#include "mp_common.h"
#include "mp_scenarios.h"

#include <csignal>
#include <cstring>
#include <thread>
#include <unistd.h>

namespace mp {

void run_stopped_peer(int, char **) {
    Rank r;
    set_identity(static_cast<int>(r.rank()), "stopped-peer");
    MP_CHECK(r.size() == 2, "stopped-peer needs 2 ranks");
    RegBuf buf(r.ctx(), 64, 0x3C);
    const std::vector<Xfer> pid_msg = {{r.rank() == 1, 1 - r.rank(), 1, 8, 0}};
    if (r.rank() == 1) {
        uint64_t pid = static_cast<uint64_t>(getpid());
        std::memcpy(buf.data(), &pid, sizeof(pid));
        MP_OK(p2p_comm_send(r.comm(), 0, 1, buf.data(), 8, buf.mem(), ctx_of(0)));
        collect(r.comm(), pid_msg, 30);
        std::raise(SIGSTOP);  // rank 0 lets us go on once its communicator is gone
        r.barrier();          // rank 0 is done checking
        say("stopped-peer ok");
        r.finish();
        return;
    }
    MP_OK(p2p_comm_recv(r.comm(), 1, 1, buf.data(), 8, buf.mem(), ctx_of(0)));
    collect(r.comm(), pid_msg, 30);
    uint64_t pid64 = 0;
    std::memcpy(&pid64, buf.data(), sizeof(pid64));
    const pid_t pid = static_cast<pid_t>(pid64);
    wait_stopped(pid);
    MP_OK(p2p_comm_send(r.comm(), 1, 2, buf.data() + 8, 8, buf.mem(), ctx_of(0)));
    Clock::time_point t0 = Clock::now();
    MP_OK(p2p_comm_shutdown(r.comm()));
    const double took = seconds_since(t0);
    // The bound: the endpoint's flush waits one peer timeout before the
    // forced close; the shutdown's own deadline is 2 timeouts + 1 s (and
    // 5 s for a loaded machine).
    const double peer_timeout_s = env_ul("P2P_PEER_TIMEOUT_MS", 2000) / 1000.0;
    MP_CHECK(took < 2 * peer_timeout_s + 1 + 5, "shutdown took %.1f s", took);
    std::vector<p2p_completion_t> c = pop(r.comm(), P2P_QUEUE_SEND, 0);
    MP_CHECK(c.size() == 1 && (c[0].status == P2P_ERR_CANCELED || c[0].status == P2P_OK),
             "the send to the stopped rank after shutdown: %zu completions (status "
             "%d), expected one, P2P_ERR_CANCELED or P2P_OK", c.size(),
             c.empty() ? 0 : static_cast<int>(c[0].status));
    say("send to the stopped rank: %s; shutdown took %.1f s",
        c[0].status == P2P_OK ? "ok" : "canceled", took);
    r.destroy_comm();
    MP_CHECK(kill(pid, SIGCONT) == 0, "cannot resume rank 1");
    std::this_thread::sleep_for(std::chrono::seconds(1));
    r.barrier();
    say("stopped-peer ok");
    r.finish();
}

} // namespace mp
