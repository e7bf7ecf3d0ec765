/*
 * mp_rank scenario of the goodbyes a context says for communicators already
 * destroyed (Context::answer_gone_hellos):
 *   gone-churn [n]  (2 ranks) n rounds: both ranks create a communicator,
 *       rank 1 destroys its own at once, then rank 0 posts a receive and a
 *       send on it (its endpoint's hello reaches rank 1's context, which
 *       answers with a goodbye over an endpoint of its own): the receive
 *       must fail with P2P_ERR_PEER_FAILURE. Rank 0 then destroys its
 *       communicator. Rank 1's open descriptors must not grow with the
 *       rounds: its context closes the endpoint of each goodbye by force
 *       once the goodbye left (closed without force, UCX kept it and its
 *       tcp connections open for a while: +2 descriptors a round).
 *   gone-late  (2 ranks) rank 1 destroys its communicator, then rank 0
 *       sends it 16 small messages (until its goodbye comes back) and rank
 *       1 idles past two periodic runs: its context drops them (logged at
 *       debug level, which the driver asks for and looks for), so nothing
 *       is left in UCX's unexpected queue when the context goes (UCX
 *       would warn once per message then).
 */
#include "../open_fds.h"
#include "mp_common.h"
#include "mp_scenarios.h"

#include <cstdlib>
#include <thread>
#include <vector>

namespace mp {

void run_gone_churn(int argc, char **argv) {
    const uint32_t n = argc > 0 ? static_cast<uint32_t>(std::strtoul(argv[0], nullptr, 10)) : 8;
    MP_CHECK(n >= 2 && n <= 100, "gone-churn: 2..100 rounds");
    Rank r;
    set_identity(static_cast<int>(r.rank()), "gone-churn");
    MP_CHECK(r.size() == 2, "gone-churn needs 2 ranks");
    r.destroy_comm();
    RegBuf buf(r.ctx(), 64, 0x5A);
    int after_first = -1;
    for (uint32_t k = 0; k < n; ++k) {
        p2p_comm_h c = nullptr;
        MP_OK(p2p_comm_create(r.ctx(), r.bootstrap(), &c));
        if (r.rank() == 1) MP_OK(p2p_comm_destroy(c));
        MP_OK(p2p_bootstrap_barrier(r.bootstrap()));  // rank 1's is gone
        if (r.rank() == 0) {
            // The receive connects and can only end by the goodbye. The
            // goodbye may come back before the send is posted (then the
            // post fails), and an eager send may complete before it.
            MP_OK(p2p_comm_recv(c, 1, 7, buf.data() + 8, 8, buf.mem(), ctx_of(0)));
            std::vector<Xfer> ops = {{false, 1, 7, 8, 8}};
            const p2p_status_t st = p2p_comm_send(c, 1, 7, buf.data(), 8, buf.mem(), ctx_of(1));
            MP_CHECK(st == P2P_OK || st == P2P_ERR_PEER_FAILURE, "send post: %s",
                     p2p_status_string(st));
            if (st == P2P_OK) ops.push_back({true, 1, 7, 8, 0});
            collect(c, ops, 30,
                    [](const Xfer &x, const p2p_completion_t &e) {
                        MP_CHECK(e.status == P2P_ERR_PEER_FAILURE ||
                                     (x.is_send && e.status == P2P_OK),
                                 "%s naming the rank that destroyed the communicator: "
                                 "status %d, expected P2P_ERR_PEER_FAILURE",
                                 x.is_send ? "send" : "receive", static_cast<int>(e.status));
                    });
            MP_OK(p2p_comm_destroy(c));
        }
        MP_OK(p2p_bootstrap_barrier(r.bootstrap()));  // rank 0 got its goodbye
        if (r.rank() == 1) {
            // The answer's endpoint closes after a progress call or two.
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            const int fds = p2ptest::open_fds();
            MP_CHECK(fds >= 0, "cannot list /proc/self/fd");
            say("round %u: %d descriptors open", k, fds);
            if (k == 0) after_first = fds;
            MP_CHECK(fds <= after_first + 1, "%d descriptors open after %u goodbyes for "
                     "destroyed communicators, %d after the first: their endpoints "
                     "stay open", fds, k + 1, after_first);
        }
    }
    MP_OK(p2p_bootstrap_barrier(r.bootstrap()));
    buf.release();
    r.finish();
    say("gone-churn ok");
}

void run_gone_late(int, char **) {
    Rank r;
    set_identity(static_cast<int>(r.rank()), "gone-late");
    MP_CHECK(r.size() == 2, "gone-late needs 2 ranks");
    RegBuf buf(r.ctx(), 16 * 8, 0x5A);
    p2p_comm_h c = r.comm();
    if (r.rank() == 1) r.destroy_comm();
    MP_OK(p2p_bootstrap_barrier(r.bootstrap()));  // rank 1's is gone
    if (r.rank() == 0) {
        // Eager sends complete as they leave; once the goodbye that
        // answers our hello is back, posts fail and so may those in flight.
        std::vector<Xfer> ops;
        for (uint32_t i = 0; i < 16; ++i) {
            const p2p_status_t st =
                p2p_comm_send(c, 1, 9, buf.data() + 8 * i, 8, buf.mem(), ctx_of(i));
            MP_CHECK(st == P2P_OK || st == P2P_ERR_PEER_FAILURE, "send post %u: %s", i,
                     p2p_status_string(st));
            if (st != P2P_OK) break;
            ops.push_back({true, 1, 9, 8, 0});
        }
        MP_CHECK(!ops.empty(), "no send left before the goodbye came back");
        collect(c, ops, 30, [](const Xfer &, const p2p_completion_t &e) {
            MP_CHECK(e.status == P2P_OK || e.status == P2P_ERR_PEER_FAILURE,
                     "send to the rank that destroyed the communicator: status %d",
                     static_cast<int>(e.status));
        });
        say("%zu sends posted", ops.size());
    }
    MP_OK(p2p_bootstrap_barrier(r.bootstrap()));
    if (r.rank() == 1) {
        // A periodic run every P2P_PEER_TIMEOUT_MS / 4 (750 ms by default).
        std::this_thread::sleep_for(std::chrono::milliseconds(1600));
    }
    MP_OK(p2p_bootstrap_barrier(r.bootstrap()));
    buf.release();
    r.finish();
    say("gone-late ok");
}

} // namespace mp
