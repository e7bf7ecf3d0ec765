/*
 * Test helper: one rank of a two-rank exchange started through p2prun
 * (test/cuda, test/staging): a context, the automatic bootstrap and a
 * communicator of exactly two ranks.
 */
#ifndef UCXP2P_TEST_RANK_SESSION_H
#define UCXP2P_TEST_RANK_SESSION_H

#include <ucxp2p/p2p.h>

#include <cstdint>
#include <cstdio>

/** In a function returning int with a uint32_t me in scope: print the call
 *  and its status and return 1 unless it gave P2P_OK. */
#define RANK_CHECK(call)                                                            \
    do {                                                                            \
        p2p_status_t s_ = (call);                                                   \
        if (s_ != P2P_OK) {                                                         \
            std::printf("rank %u: %s: %s\n", me, #call, p2p_status_string(s_));     \
            return 1;                                                               \
        }                                                                           \
    } while (0)

namespace p2ptest {

struct RankSession {
    p2p_context_h ctx = nullptr;
    p2p_bootstrap_h bs = nullptr;
    p2p_comm_h comm = nullptr;
    uint32_t rank = 0;

    /** 0 when all three exist and the communicator has two ranks; else 1,
     *  having printed why. */
    int open() {
        uint32_t me = 0;
        RANK_CHECK(p2p_context_create(nullptr, &ctx));
        RANK_CHECK(p2p_bootstrap_create(P2P_BOOTSTRAP_AUTO, &bs));
        RANK_CHECK(p2p_comm_create(ctx, bs, &comm));
        p2p_comm_info_t info;
        RANK_CHECK(p2p_comm_query(comm, &info));
        rank = me = info.rank;
        if (info.size != 2) {
            std::printf("rank %u: needs 2 ranks, got %u\n", me, info.size);
            return 1;
        }
        return 0;
    }
    /** Destroy what open made; 0, or 1 having printed the failure. */
    int close() {
        const uint32_t me = rank;
        if (comm != nullptr) RANK_CHECK(p2p_comm_destroy(comm));
        comm = nullptr;
        if (bs != nullptr) RANK_CHECK(p2p_bootstrap_destroy(bs));
        bs = nullptr;
        if (ctx != nullptr) RANK_CHECK(p2p_context_destroy(ctx));
        ctx = nullptr;
        return 0;
    }
};

} // namespace p2ptest

#endif
