/*
 * mp_rank scenario of a communicator destroyed while an operation of it is
 * still in flight (shutdown gave up waiting for it), 2 ranks; run it with a
 * short P2P_PEER_TIMEOUT_MS (300: shutdown's deadline is 2 x 300 ms + 1 s):
 *   cma-split-destroy [late] [small]  rank 0 posts a split-copy send (4 MiB;
 *       `small`: 256 KiB, so that its half is written under the worker
 *       lock, not as a copy outside it) and stops
 *       itself (SIGSTOP); rank 1 posts the receive (it answers the request
 *       and waits for rank 0's half) and shuts its communicator down, which
 *       gives up at its deadline, completing the receive P2P_ERR_TIMEOUT
 *       (its buffer still registered). Rank 1 then destroys the communicator and
 *       rank 0 resumes (SIGCONT) 100 ms into the destroy, so its report on
 *       the half it wrote comes while the destroy closes the endpoints: the
 *       answer to it must not open a new endpoint, which nothing would close
 *       and whose error handler would point into the freed communicator
 *       (rank 1 crashed once rank 0 exited). `late`: rank 0 resumes only
 *       after the destroy returned, which must not have waited the deadline
 *       again. Either way, once the receive's request ends (orphaned), its
 *       registration must deregister (it stayed P2P_ERR_BUSY for good), and
 *       rank 0, which finds rank 1 gone when it resumes, must have written
 *       nothing into the buffer. `killed`: as `late`, but rank 0 is
 *       killed instead of resumed: the registration must come free all
 *       the same, within 10 s (the run's status is 137).
 */
#include "mp_common.h"
#include "mp_scenarios.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace mp {

void run_cma_split_destroy(int argc, char **argv) {
    bool late = false, small_half = false, killed = false;
    for (int i = 0; i < argc; ++i) {
        late = late || std::strcmp(argv[i], "late") == 0;
        small_half = small_half || std::strcmp(argv[i], "small") == 0;
        killed = killed || std::strcmp(argv[i], "killed") == 0;
    }
    late = late || killed;
    Rank r;
    set_identity(static_cast<int>(r.rank()), "cma-split-destroy");
    MP_CHECK(r.size() == 2, "cma-split-destroy needs 2 ranks");
    const char *t = std::getenv("P2P_PEER_TIMEOUT_MS");
    const double peer_timeout_s = (t != nullptr ? std::atof(t) : 3000.0) / 1000;
    // Above P2P_CMA_SPLIT; `small`: rank 0's half is below 256 KiB, written
    // under the worker lock (not as a copy outside it).
    const size_t kLen = small_half ? size_t(256) << 10 : size_t(4) << 20;
    RegBuf big(r.ctx(), kLen, 0, Alloc::heap);
    RegBuf small(r.ctx(), 16, 0);
    if (r.rank() == 0) {
        std::memset(big.data(), 0x5A, kLen);
        send_pid_await_go(r.comm(), small);
        MP_OK(p2p_comm_send(r.comm(), 1, 2, big.data(), kLen, big.mem(), ctx_of(0)));
        std::raise(SIGSTOP);  // rank 1 lets us go on
        // Its receiver left: the send ends one way or another, once.
        collect(r.comm(), {{true, 1, 2, kLen, 0}}, 30,
                [](const Xfer &, const p2p_completion_t &) {});
        r.barrier();
    } else {
        const pid_t pid = await_pid_send_go(r.comm(), small);
        wait_stopped(pid);
        MP_OK(p2p_comm_recv(r.comm(), 0, 2, big.data(), kLen, big.mem(), ctx_of(0)));
        MP_CHECK(pop(r.comm(), P2P_QUEUE_RECV, 300).empty(),
                 "the receive completed although the sender is stopped");
        MP_OK(p2p_comm_shutdown(r.comm()));  // gives up at its deadline
        // ... and completes it then (P2P_ERR_TIMEOUT), once; its buffer
        // stays registered while the stopped sender may still write.
        std::vector<p2p_completion_t> c = pop(r.comm(), P2P_QUEUE_RECV, 0);
        MP_CHECK(c.size() == 1 && c[0].status == P2P_ERR_TIMEOUT,
                 "the split receive shutdown gave up on: %zu completions (status %d), "
                 "expected one P2P_ERR_TIMEOUT", c.size(),
                 c.empty() ? 0 : static_cast<int>(c[0].status));
        MP_CHECK(p2p_mem_deregister(big.mem()) == P2P_ERR_BUSY, "the receive buffer "
                 "was deregistered while the stopped sender may write into it");
        Clock::time_point t0 = Clock::now();
        std::thread resume;
        if (!late) {
            resume = std::thread([pid] {
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
                kill(pid, SIGCONT);
            });
        }
        r.destroy_comm();
        const double took = seconds_since(t0);
        say("destroy took %.2f s", took);
        if (late) {
            MP_CHECK(took < 2 * peer_timeout_s + 1, "destroy took %.2f s: it waited "
                     "again for what shutdown gave up on", took);
            kill(pid, killed ? SIGKILL : SIGCONT);
        } else {
            resume.join();
        }
        // `killed`: nobody will ever answer the receive; the context sees
        // the sender's process gone and ends it (it stayed busy until
        // p2p_context_destroy). Asked every millisecond: in serialized mode
        // the backstop thread then never finds the application out of the
        // library, so the deregister calls themselves must drive the look.
        const double limit_s = killed ? 10 : 20;
        const int poll_ms = killed ? 1 : 20;
        const char *what = killed ? "the receive whose sender was killed"
                                  : "the receive the destroyed communicator left behind";
        double released = await_deregistered(big.mem(), limit_s, what, /*between=*/{}, poll_ms);
        say("registration released after %.2f s", released);
        if (!killed) {
            // Rank 0, resumed, found this rank gone (its goodbye came
            // before it took the answer up): it wrote nothing into memory
            // this rank was handed back with the P2P_ERR_TIMEOUT. (This
            // rank read the first half itself when it answered; rank 0
            // writes the second.)
            size_t written = 0;
            for (size_t i = kLen / 2; i < kLen; ++i) written += big.data()[i] != 0 ? 1 : 0;
            MP_CHECK(written == 0, "%zu bytes written into the receive buffer after "
                     "shutdown completed the receive", written);
            r.barrier();  // rank 0's send ended: it leaves now
        }
    }
    if (r.rank() == 1) {
        // An endpoint left open would now report rank 0's exit (or death)
        // to a communicator that is gone.
        std::this_thread::sleep_for(std::chrono::duration<double>(3 * peer_timeout_s + 0.5));
    }
    small.release();
    say("cma-split-destroy ok");
    r.finish();
}

} // namespace mp
