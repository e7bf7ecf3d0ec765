/*
 * Two ranks as threads of this process, through the public API: each rank
 * has its own context, and the job's exchange is the test's (registered
 * as a bootstrap handle, core/api_handles.h). CI runs core_test under
 * ThreadSanitizer, so these runs put the paths between the threads of a
 * real transfer there: the posting threads, both progress threads, and
 * over tcp ucxp2p's own path for large payloads (core/tcp_bulk.h: its
 * server threads, the client's reads on the copy runners). The multi-
 * process tests (mp_test) cover the same paths between processes, outside
 * ThreadSanitizer (UCX is not built for it). Single copy is not among
 * them: it serves peers in other processes only (cma::peer_eligible).
 */
#include "core/api_handles.h"
#include "thread_job.h"
#include "../scoped_env.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <string>
#include <thread>
#include <vector>

using namespace ucxp2p;

namespace {

using coretest::PairJob;

// Below, at and above P2P_TCP_BULK_THRESH (set to 64 KiB by the tcp runs),
// and one size that is no multiple of anything.
const size_t kSizes[] = {8, 4096, 65536, 300000, (size_t(1) << 20) + 3};
constexpr size_t kCount = sizeof(kSizes) / sizeof(kSizes[0]);
constexpr int kRounds = 3;

size_t total_bytes() {
    size_t n = 0;
    for (size_t s : kSizes) n += s;
    return n;
}

/** Byte k of message i of round r from rank src. */
uint8_t pattern(uint32_t src, int r, size_t i, size_t k) {
    return static_cast<uint8_t>(src * 131 + r * 17 + i * 31 + k * 7 + (k >> 9));
}

struct Rank {
    uint32_t me = 0;
    p2p_context_h ctx = nullptr;
    p2p_bootstrap_h bs = nullptr;
    p2p_comm_h comm = nullptr;
    std::vector<uint8_t> sbuf, rbuf;
    p2p_mem_h smem = nullptr, rmem = nullptr;
    std::string error;  // the first thing that went wrong ("": nothing)

    void fail(const std::string &what) {
        if (error.empty()) error = "rank " + std::to_string(me) + ": " + what;
    }
    bool check(p2p_status_t st, const char *what) {
        if (st != P2P_OK) fail(std::string(what) + ": " + p2p_status_string(st));
        return st == P2P_OK;
    }

    /** Wait for n completions on q; each must be OK, from the other rank,
     *  with its message's size. */
    void reap(p2p_queue_t q, size_t n, int round) {
        p2p_completion_t got[kCount];
        size_t seen = 0;
        while (seen < n && error.empty()) {
            size_t k = 0;
            if (!check(p2p_comm_wait(comm, q, got, kCount, &k, 30000), "wait")) return;
            for (size_t j = 0; j < k; ++j) {
                const size_t i = reinterpret_cast<uintptr_t>(got[j].user_context) - 1;
                if (i >= kCount || got[j].status != P2P_OK || got[j].peer != (me ^ 1u) ||
                    got[j].tensor_id != uint32_t(round * kCount + i) ||
                    got[j].bytes != kSizes[i]) {
                    fail("round " + std::to_string(round) + ": bad completion on queue " +
                         std::to_string(q) + ": status " + p2p_status_string(got[j].status) +
                         ", tensor " + std::to_string(got[j].tensor_id) + ", " +
                         std::to_string(got[j].bytes) + " bytes");
                    return;
                }
            }
            seen += k;
        }
    }

    /** Each round: receives of every size posted, then the sends, then
     *  both queues reaped and every payload checked. */
    void run() {
        std::vector<size_t> off(kCount);
        for (size_t i = 1; i < kCount; ++i) off[i] = off[i - 1] + kSizes[i - 1];
        for (int r = 0; r < kRounds && error.empty(); ++r) {
            std::memset(rbuf.data(), 0, rbuf.size());
            for (size_t i = 0; i < kCount; ++i) {
                for (size_t k = 0; k < kSizes[i]; ++k) sbuf[off[i] + k] = pattern(me, r, i, k);
            }
            for (size_t i = 0; i < kCount; ++i) {
                void *ctxp = reinterpret_cast<void *>(uintptr_t(i + 1));
                const uint32_t tensor = uint32_t(r * kCount + i);
                if (!check(p2p_comm_recv(comm, me ^ 1u, tensor, &rbuf[off[i]], kSizes[i],
                                         rmem, ctxp), "recv") ||
                    !check(p2p_comm_send(comm, me ^ 1u, tensor, &sbuf[off[i]], kSizes[i],
                                         smem, ctxp), "send")) {
                    return;
                }
            }
            reap(P2P_QUEUE_RECV, kCount, r);
            reap(P2P_QUEUE_SEND, kCount, r);
            for (size_t i = 0; i < kCount && error.empty(); ++i) {
                for (size_t k = 0; k < kSizes[i]; ++k) {
                    if (rbuf[off[i] + k] != pattern(me ^ 1u, r, i, k)) {
                        fail("round " + std::to_string(r) + ": message of " +
                             std::to_string(kSizes[i]) + " bytes differs at byte " +
                             std::to_string(k));
                        break;
                    }
                }
            }
        }
    }
};

/** Run f(rank) for both ranks at once, each on its own thread. */
template <class F> void both(Rank *ranks, F f) {
    std::thread other([&] { f(ranks[1]); });
    f(ranks[0]);
    other.join();
}

/** Both ranks' errors, "" when neither has one. */
std::string errors(const Rank *ranks) {
    if (ranks[0].error.empty() || ranks[1].error.empty()) return ranks[0].error + ranks[1].error;
    return ranks[0].error + "; " + ranks[1].error;
}

struct Transport {
    const char *name;
    const char *tls;
    bool bulk;  // large payloads over ucxp2p's tcp path
};

class PairTransfer : public ::testing::TestWithParam<Transport> {};

/** The tcp path's server of ctx's context: connections accepted and open
 *  (0 without a server). */
size_t bulk_connections(p2p_context_h ctx) {
    Registry<api::ContextEntry>::Ref ce = api::g_contexts.get(handle_id(ctx));
    tcpb::Server *s = ce ? ce->ctx->bulk() : nullptr;
    return s != nullptr ? s->connections() : 0;
}

/** Ranks 0 and 1 of a job on tr, both ways, then destroyed: what went
 *  wrong ("": nothing). */
std::string run_pair(const Transport &tr) {
    p2ptest::ScopedEnv tls("UCX_TLS", tr.tls);
    p2ptest::ScopedEnv bulk("P2P_TCP_BULK", tr.bulk ? "auto" : "off");
    p2ptest::ScopedEnv thresh("P2P_TCP_BULK_THRESH", "65536");
    coretest::PairExchange ex;
    Rank ranks[2];
    for (uint32_t r = 0; r < 2; ++r) {
        Rank &k = ranks[r];
        k.me = r;
        k.sbuf.assign(total_bytes(), 0);
        k.rbuf.assign(total_bytes(), 0);
        if (!k.check(p2p_context_create(nullptr, &k.ctx), "context") ||
            !k.check(p2p_mem_register(k.ctx, k.sbuf.data(), k.sbuf.size(), &k.smem), "register") ||
            !k.check(p2p_mem_register(k.ctx, k.rbuf.data(), k.rbuf.size(), &k.rmem), "register")) {
            return k.error;
        }
        k.bs = api::bootstrap_handle(std::unique_ptr<Bootstrap>(new PairJob(&ex, r)));
    }
    both(ranks, [](Rank &k) { k.check(p2p_comm_create(k.ctx, k.bs, &k.comm), "create"); });
    if (!ranks[0].error.empty() || !ranks[1].error.empty()) {
        return errors(ranks);
    }
    both(ranks, [](Rank &k) { k.run(); });
    for (Rank &k : ranks) {
        const size_t n = bulk_connections(k.ctx);
        if (tr.bulk ? n == 0 : n != 0) {
            k.fail("its tcp server holds " + std::to_string(n) + " connections");
        }
    }
    both(ranks, [](Rank &k) { k.check(p2p_comm_destroy(k.comm), "destroy"); });
    for (Rank &k : ranks) {
        k.check(p2p_mem_deregister(k.smem), "deregister");
        k.check(p2p_mem_deregister(k.rmem), "deregister");
        k.check(p2p_bootstrap_destroy(k.bs), "bootstrap destroy");
        k.check(p2p_context_destroy(k.ctx), "context destroy");
    }
    return errors(ranks);
}

} // namespace

// Both ranks post receives and sends of every size to each other at once,
// three rounds, every byte checked; then both destroy at once. Over tcp the
// payloads from 64 KiB on go through ucxp2p's own tcp path, whose servers
// then hold connections from the other rank; with P2P_TCP_BULK=off, or
// over shared memory, UCX moves every byte. In a child process each: the
// path's settings are read once per process.
TEST_P(PairTransfer, BothWaysEverySizeThenDestroy) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const Transport tr = GetParam();
    EXPECT_EXIT(
        {
            const std::string e = run_pair(tr);
            std::fprintf(stderr, "%s\n", e.empty() ? "pair done" : e.c_str());
            _exit(e.empty() ? 0 : 1);
        },
        testing::ExitedWithCode(0), "pair done\n$");
}

INSTANTIATE_TEST_SUITE_P(
    Transports, PairTransfer,
    ::testing::Values(Transport{"tcp_bulk", "tcp,self", true},
                      Transport{"tcp_ucx", "tcp,self", false},
                      Transport{"shm", "shm,self", false}),
    [](const ::testing::TestParamInfo<Transport> &i) { return std::string(i.param.name); });
