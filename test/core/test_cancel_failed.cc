/*
 * p2p_comm_cancel_recv on a receive from a peer known to have failed: the
 * receive completes with P2P_ERR_PEER_FAILURE, not P2P_ERR_CANCELED (p2p.h).
 * A peer is "known to have failed" from UCX's error callback
 * (Comm::on_peer_error, under the worker lock) until the deferred hook
 * after that progress call cancels every receive from it itself; only a
 * caller that takes the lock in between sees that state. The test makes
 * the state the way UCX's callback does: two ranks as threads of this
 * process (core/api_handles.h bootstrap handles), rank 1 posts a receive
 * from rank 0, and the test calls rank 1's on_peer_error(0) under its
 * worker lock, then p2p_comm_cancel_recv. Rank 1's context runs
 * P2P_THREAD_MODE=serialized: no progress thread runs the hook meanwhile
 * (its backstop looks every millisecond or more and steps aside while the
 * application calls). Should the hook still come first, the receive gets
 * its status from there and cancel_recv counts 0: the pair is made again,
 * up to three times.
 */
#include "core/api_handles.h"
#include "core/comm.h"
#include "core/context.h"
#include "thread_job.h"
#include "../scoped_env.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace ucxp2p;

namespace {

struct Side {
    p2p_context_h ctx = nullptr;
    p2p_bootstrap_h bs = nullptr;
    p2p_comm_h comm = nullptr;
    p2p_mem_h mem = nullptr;
    std::vector<uint8_t> buf = std::vector<uint8_t>(4096, 0);
};

/** One try: the receive's completion status into *status; cancel_recv's
 *  count returned (SIZE_MAX where a call failed: a test failure is noted). */
size_t one_try(uint32_t tensor_id, p2p_status_t *status) {
    p2ptest::ScopedEnv tls("UCX_TLS", "shm,self");
    coretest::PairExchange ex;
    Side s[2];
    for (uint32_t r = 0; r < 2; ++r) {
        p2ptest::ScopedEnv mode("P2P_THREAD_MODE", r == 1 ? "serialized" : "multi");
        EXPECT_EQ(P2P_OK, p2p_context_create(nullptr, &s[r].ctx));
        EXPECT_EQ(P2P_OK, p2p_mem_register(s[r].ctx, s[r].buf.data(), s[r].buf.size(),
                                           &s[r].mem));
        s[r].bs = api::bootstrap_handle(std::unique_ptr<Bootstrap>(new coretest::PairJob(&ex, r)));
        if (s[r].ctx == nullptr || s[r].mem == nullptr || s[r].bs == nullptr) return SIZE_MAX;
    }
    p2p_status_t cst[2];
    std::thread other([&] { cst[0] = p2p_comm_create(s[0].ctx, s[0].bs, &s[0].comm); });
    cst[1] = p2p_comm_create(s[1].ctx, s[1].bs, &s[1].comm);
    other.join();
    EXPECT_EQ(P2P_OK, cst[0]);
    EXPECT_EQ(P2P_OK, cst[1]);
    if (cst[0] != P2P_OK || cst[1] != P2P_OK) return SIZE_MAX;

    int marker = 0;
    EXPECT_EQ(P2P_OK, p2p_comm_recv(s[1].comm, 0, tensor_id, s[1].buf.data(), 64,
                                    s[1].mem, &marker));
    {
        Registry<api::CommEntry>::Ref ce = api::g_comms.get(handle_id(s[1].comm));
        EXPECT_TRUE(ce);
        if (!ce) return SIZE_MAX;
        Comm &c = *ce->comm;
        std::lock_guard<Mutex> lock(c.context().worker_mu());  // as UCX's callback runs
        c.on_peer_error(0, UCS_ERR_CONNECTION_RESET);
    }
    size_t n = SIZE_MAX;
    EXPECT_EQ(P2P_OK, p2p_comm_cancel_recv(s[1].comm, 0, tensor_id, &n));

    // Exactly one completion, whichever call ended the receive.
    p2p_completion_t e[2];
    size_t got = 0;
    EXPECT_EQ(P2P_OK, p2p_comm_wait(s[1].comm, P2P_QUEUE_RECV, e, 2, &got, 5000));
    EXPECT_EQ(1u, got);
    if (got >= 1) {
        EXPECT_EQ(&marker, e[0].user_context);
        EXPECT_EQ(0u, e[0].peer);
        EXPECT_EQ(tensor_id, e[0].tensor_id);
        EXPECT_EQ(0u, e[0].bytes);
        *status = e[0].status;
    }
    size_t more = 1;
    EXPECT_EQ(P2P_OK, p2p_comm_poll(s[1].comm, P2P_QUEUE_RECV, e, 2, &more));
    EXPECT_EQ(0u, more) << "a second completion for one receive";

    std::thread destroy0([&] { EXPECT_EQ(P2P_OK, p2p_comm_destroy(s[0].comm)); });
    EXPECT_EQ(P2P_OK, p2p_comm_destroy(s[1].comm));
    destroy0.join();
    for (Side &k : s) {
        EXPECT_EQ(P2P_OK, p2p_mem_deregister(k.mem));
        EXPECT_EQ(P2P_OK, p2p_bootstrap_destroy(k.bs));
        EXPECT_EQ(P2P_OK, p2p_context_destroy(k.ctx));
    }
    return n;
}

} // namespace

TEST(CancelRecv, FromAFailedPeerIsPeerFailure) {
    size_t n = 0;
    for (int attempt = 0; attempt < 3 && n != 1; ++attempt) {
        p2p_status_t st = P2P_OK;
        n = one_try(100 + static_cast<uint32_t>(attempt), &st);
        ASSERT_NE(SIZE_MAX, n);
        EXPECT_EQ(P2P_ERR_PEER_FAILURE, st) << p2p_status_string(st);
        EXPECT_LE(n, 1u);
    }
    EXPECT_EQ(1u, n) << "p2p_comm_cancel_recv never found the receive (the "
                        "failure's own hook ended it first, three times)";
}
