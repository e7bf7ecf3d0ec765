/*
 * mp_rank scenario "comm-race [rounds]": every rank holds two bootstraps of
 * the job and, in each round, creates one communicator over each at the
 * same time from two threads on one context (core/comm_wireup.h). Both
 * creates must succeed on every rank with one id per communicator, the two
 * ids differ, and a ring exchange over each communicator (which only
 * matches when every rank took the same id) delivers every byte.
 */
#include "mp_common.h"
#include "mp_scenarios.h"

#include <cstdlib>
#include <thread>

namespace mp {

namespace {

/** Rank r sends 4 KiB to its successor and receives from its predecessor
 *  over comm, tensor tid; checks every byte. */
void ring(Rank &r, p2p_comm_h comm, uint32_t tid, RegBuf &sbuf, RegBuf &rbuf) {
    const uint32_t n = r.size(), me = r.rank();
    const uint32_t next = (me + 1) % n, prev = (me + n - 1) % n;
    const size_t len = 4096;
    fill_pattern(sbuf.data(), len, me, next, tid);
    std::vector<Xfer> ops = {{false, prev, tid, len, 0}, {true, next, tid, len, 0}};
    MP_OK(p2p_comm_recv(comm, prev, tid, rbuf.data(), len, rbuf.mem(), ctx_of(0)));
    MP_OK(p2p_comm_send(comm, next, tid, sbuf.data(), len, sbuf.mem(), ctx_of(1)));
    collect(comm, ops, 60);
    check_pattern(rbuf.data(), len, prev, me, tid, "comm-race ring");
}

} // namespace

void run_comm_race(int argc, char **argv) {
    const uint32_t rounds = argc > 0 ? static_cast<uint32_t>(std::strtoul(argv[0], nullptr, 10)) : 20;
    Rank r;
    set_identity(static_cast<int>(r.rank()), "comm-race");
    p2p_bootstrap_h second = nullptr;
    MP_OK(p2p_bootstrap_create(P2P_BOOTSTRAP_AUTO, &second));
    r.destroy_comm();  // its id would only sit below the race's
    RegBuf sbuf(r.ctx(), 4096, 0), rbuf(r.ctx(), 4096, 0);
    for (uint32_t k = 0; k < rounds; ++k) {
        p2p_comm_h comm[2] = {nullptr, nullptr};
        p2p_status_t st[2] = {P2P_ERR_TRANSPORT, P2P_ERR_TRANSPORT};
        std::thread other([&] { st[1] = p2p_comm_create(r.ctx(), second, &comm[1]); });
        st[0] = p2p_comm_create(r.ctx(), r.bootstrap(), &comm[0]);
        other.join();
        for (int i = 0; i < 2; ++i) {
            MP_CHECK(st[i] == P2P_OK, "round %u: create over bootstrap %d: %s", k, i,
                     p2p_status_string(st[i]));
        }
        p2p_comm_info_t info[2];
        for (int i = 0; i < 2; ++i) MP_OK(p2p_comm_query(comm[i], &info[i]));
        MP_CHECK(info[0].id != info[1].id, "round %u: both communicators got id %u", k,
                 info[0].id);
        for (int i = 0; i < 2; ++i) ring(r, comm[i], k * 2 + i, sbuf, rbuf);
        for (int i = 0; i < 2; ++i) MP_OK(p2p_comm_destroy(comm[i]));
    }
    MP_OK(p2p_bootstrap_destroy(second));
    sbuf.release();
    rbuf.release();
    say("comm-race ok: %u rounds of two concurrent creates", rounds);
    r.finish();
}

} // namespace mp
