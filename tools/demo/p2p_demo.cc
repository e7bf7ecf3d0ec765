/*
 * p2p_demo: the quick-start job. Every rank exchanges tensors with every
 * other rank (all-to-all) through ucxp2p, verifies every byte, and rank 0
 * prints what moved and how fast.
 *
 *   p2prun -n 4 -- p2p_demo [-s BYTES] [-t TENSORS] [-i ITERS]
 *
 * Uses only the public API (include/ucxp2p/p2p.h).
 */
#include <ucxp2p/p2p.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <getopt.h>
#include <string>
#include <vector>

namespace {

#define CHECK(call)                                                            \
    do {                                                                       \
        p2p_status_t s_ = (call);                                              \
        if (s_ != P2P_OK) {                                                    \
            std::fprintf(stderr, "p2p_demo: %s failed: %s\n", #call,           \
                         p2p_status_string(s_));                               \
            std::exit(1);                                                      \
        }                                                                      \
    } while (0)

uint8_t pattern(uint32_t src, uint32_t dst, uint32_t tensor, size_t i) {
    return static_cast<uint8_t>(src * 131 + dst * 31 + tensor * 7 + i * 13);
}

void usage() {
    std::printf("usage: p2p_demo [-s BYTES] [-t TENSORS] [-i ITERS]\n"
                "  all-to-all exchange of TENSORS tensors of BYTES bytes per peer pair,\n"
                "  ITERS times, with payload verification (defaults 1048576, 4, 10).\n"
                "  start with: p2prun -n N -- p2p_demo\n");
}

} // namespace

int main(int argc, char **argv) {
    size_t bytes = 1 << 20;
    uint32_t tensors = 4, iters = 10;
    int opt;
    while ((opt = getopt(argc, argv, "s:t:i:h")) != -1) {
        switch (opt) {
        case 's': bytes = std::strtoull(optarg, nullptr, 0); break;
        case 't': tensors = static_cast<uint32_t>(std::strtoul(optarg, nullptr, 0)); break;
        case 'i': iters = static_cast<uint32_t>(std::strtoul(optarg, nullptr, 0)); break;
        case 'h': usage(); return 0;
        default: usage(); return 2;
        }
    }
    if (bytes == 0 || tensors == 0 || iters == 0) {
        usage();
        return 2;
    }

    p2p_context_h ctx;
    p2p_bootstrap_h bs;
    p2p_comm_h comm;
    auto t_init = std::chrono::steady_clock::now();
    CHECK(p2p_context_create(nullptr, &ctx));
    CHECK(p2p_bootstrap_create(P2P_BOOTSTRAP_AUTO, &bs));
    CHECK(p2p_comm_create(ctx, bs, &comm));
    double setup_ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - t_init).count();
    p2p_comm_info_t info;
    CHECK(p2p_comm_query(comm, &info));
    const uint32_t n = info.size, me = info.rank;

    size_t per_peer = bytes * tensors;
    std::vector<uint8_t> sendbuf(per_peer * n), recvbuf(per_peer * n);
    p2p_mem_h smem, rmem;
    CHECK(p2p_mem_register(ctx, sendbuf.data(), sendbuf.size(), &smem));
    CHECK(p2p_mem_register(ctx, recvbuf.data(), recvbuf.size(), &rmem));
    for (uint32_t dst = 0; dst < n; ++dst)
        for (uint32_t t = 0; t < tensors; ++t)
            for (size_t i = 0; i < bytes; ++i)
                sendbuf[(dst * tensors + t) * bytes + i] = pattern(me, dst, t, i);

    CHECK(p2p_bootstrap_barrier(bs));
    auto t0 = std::chrono::steady_clock::now();
    const size_t ops = static_cast<size_t>(n) * tensors;
    std::vector<p2p_completion_t> done(64);
    for (uint32_t it = 0; it < iters; ++it) {
        for (uint32_t peer = 0; peer < n; ++peer)
            for (uint32_t t = 0; t < tensors; ++t)
                CHECK(p2p_comm_recv(comm, peer, t, &recvbuf[(peer * tensors + t) * bytes],
                                    bytes, rmem, nullptr));
        for (uint32_t k = 0; k < n; ++k) {
            uint32_t peer = (me + k) % n;  // stagger to spread load
            for (uint32_t t = 0; t < tensors; ++t)
                CHECK(p2p_comm_send(comm, peer, t, &sendbuf[(peer * tensors + t) * bytes],
                                    bytes, smem, nullptr));
        }
        for (p2p_queue_t q : {P2P_QUEUE_RECV, P2P_QUEUE_SEND}) {
            size_t got = 0;
            while (got < ops) {
                size_t c = 0;
                CHECK(p2p_comm_wait(comm, q, done.data(), done.size(), &c, 30000));
                for (size_t i = 0; i < c; ++i) {
                    if (done[i].status != P2P_OK || done[i].bytes != bytes) {
                        std::fprintf(stderr, "p2p_demo: rank %u: %s with rank %u tensor %u "
                                     "failed: %s (%llu bytes)\n", me,
                                     q == P2P_QUEUE_RECV ? "recv" : "send", done[i].peer,
                                     done[i].tensor_id, p2p_status_string(done[i].status),
                                     static_cast<unsigned long long>(done[i].bytes));
                        return 1;
                    }
                }
                got += c;
            }
        }
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (uint32_t src = 0; src < n; ++src)
        for (uint32_t t = 0; t < tensors; ++t)
            for (size_t i = 0; i < bytes; ++i)
                if (recvbuf[(src * tensors + t) * bytes + i] != pattern(src, me, t, i)) {
                    std::fprintf(stderr, "p2p_demo: rank %u: byte %zu of tensor %u from "
                                 "rank %u is wrong\n", me, i, t, src);
                    return 1;
                }
    CHECK(p2p_bootstrap_barrier(bs));
    double moved = static_cast<double>(per_peer) * n * iters;  // received by this rank
    std::printf("rank %u: received %.1f MB from %u ranks (%u tensors x %zu B x %u iters) "
                "in %.3f s = %.1f MB/s, payload verified; setup %.1f ms\n",
                me, moved / 1e6, n, tensors, bytes, iters, secs, moved / secs / 1e6, setup_ms);
    if (me == 0) {
        std::printf("all-to-all of %u ranks: %.1f MB moved in total, %.1f MB/s aggregate\n", n,
                    moved * n / 1e6, moved * n / secs / 1e6);
    }
    CHECK(p2p_comm_destroy(comm));
    CHECK(p2p_mem_deregister(smem));
    CHECK(p2p_mem_deregister(rmem));
    CHECK(p2p_bootstrap_destroy(bs));
    CHECK(p2p_context_destroy(ctx));
    return 0;
}
