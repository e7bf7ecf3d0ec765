/*
 * What matching costs when messages meet their receives out of order:
 * rank 0 sends N 8-byte messages (tensor ids 0..N-1) to rank 1, and rank 1
 * has one receive per id. `expected`: rank 1 posts every receive first,
 * then rank 0 sends; `unexpected`: rank 0 sends first, rank 1 posts after.
 * `reverse` reverses the sender's order (expected) or the receiver's
 * (unexpected); `order` keeps both in id order. Rank 1 prints, per round,
 * the time from the barrier (expected) or from its first post
 * (unexpected) to its last completion, per message
 * (docs/PERFORMANCE.md, 2026-11-29 19:00). Public API only; not built by
 * configure:
 *
 *   g++ -O2 -std=c++17 -Iinclude tools/bench/match_order.cc -o /tmp/match_order \
 *       -L.libs -lucxp2p -Wl,-rpath,$PWD/.libs
 *   UCX_TLS=shm,self tools/p2prun/p2prun -n 2 -- /tmp/match_order 4000 expected reverse
 */
#include <ucxp2p/p2p.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

void check(p2p_status_t st, const char *what) {
    if (st != P2P_OK) {
        std::fprintf(stderr, "match_order: %s: %s\n", what, p2p_status_string(st));
        std::exit(1);
    }
}

/** Pop n completions of q (each must be P2P_OK), polling (the caller
 *  drives progress, as p2p_perftest does), for at most 60 s. */
void reap(p2p_comm_h comm, p2p_queue_t q, size_t n) {
    std::vector<p2p_completion_t> got(256);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (size_t done = 0; done < n;) {
        size_t k = 0;
        check(p2p_comm_poll(comm, q, got.data(), got.size(), &k), "poll");
        for (size_t i = 0; i < k; ++i) check(got[i].status, "completion");
        done += k;
        if (k == 0 && std::chrono::steady_clock::now() > end) check(P2P_ERR_TIMEOUT, "reap");
    }
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 4 || std::atol(argv[1]) <= 0 ||
        (std::strcmp(argv[2], "expected") != 0 && std::strcmp(argv[2], "unexpected") != 0) ||
        (std::strcmp(argv[3], "order") != 0 && std::strcmp(argv[3], "reverse") != 0)) {
        std::fprintf(stderr, "usage: match_order N expected|unexpected order|reverse\n");
        return 2;
    }
    const size_t n = static_cast<size_t>(std::atol(argv[1]));
    const bool expected = std::strcmp(argv[2], "expected") == 0;
    const bool reverse = std::strcmp(argv[3], "reverse") == 0;
    p2p_context_h ctx;
    p2p_bootstrap_h bs;
    p2p_comm_h comm;
    p2p_mem_h mem;
    check(p2p_context_create(nullptr, &ctx), "context");
    check(p2p_bootstrap_create(P2P_BOOTSTRAP_AUTO, &bs), "bootstrap");
    check(p2p_comm_create(ctx, bs, &comm), "communicator");
    p2p_comm_info_t me;
    check(p2p_comm_query(comm, &me), "query");
    if (me.size != 2) {
        std::fprintf(stderr, "match_order: needs 2 ranks\n");
        return 2;
    }
    std::vector<char> buf(8 * n);
    check(p2p_mem_register(ctx, buf.data(), buf.size(), &mem), "register");
    auto id = [&](size_t k, bool flip) { return uint32_t(flip ? n - 1 - k : k); };
    auto post_recvs = [&](bool flip) {
        for (size_t k = 0; k < n; ++k) {
            check(p2p_comm_recv(comm, 0, id(k, flip), &buf[8 * id(k, flip)], 8, mem, nullptr),
                  "recv");
        }
    };
    auto send_all = [&](bool flip) {
        for (size_t k = 0; k < n; ++k) {
            check(p2p_comm_send(comm, 1, id(k, flip), &buf[8 * id(k, flip)], 8, mem, nullptr),
                  "send");
        }
        reap(comm, P2P_QUEUE_SEND, n);
    };
    for (int round = 0; round < 3; ++round) {
        if (expected && me.rank == 1) post_recvs(false);
        if (!expected && me.rank == 0) send_all(false);
        check(p2p_bootstrap_barrier(bs), "barrier");
        if (!expected) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const auto t0 = std::chrono::steady_clock::now();
        if (me.rank == 0 && expected) send_all(reverse);
        if (me.rank == 1) {
            if (!expected) post_recvs(reverse);
            reap(comm, P2P_QUEUE_RECV, n);
            const double us =
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                    .count();
            std::printf("%s %s, %zu messages: %.3f us a message\n", argv[2], argv[3], n,
                        us / double(n));
        }
        check(p2p_bootstrap_barrier(bs), "barrier");
    }
    check(p2p_comm_destroy(comm), "destroy");
    check(p2p_mem_deregister(mem), "deregister");
    check(p2p_bootstrap_destroy(bs), "bootstrap destroy");
    check(p2p_context_destroy(ctx), "context destroy");
    return 0;
}
