/*
 * p2p_demo: the quick-start job. Every rank exchanges tensors with every
 * rank (all-to-all, itself included), verifies every byte of every
 * iteration, and prints what moved between ranks and how fast (a rank's
 * tensors to itself are a local copy: checked, not counted as moved).
 *
 *   p2prun -n 4 -- p2p_demo [-s BYTES] [-t TENSORS] [-i ITERS]
 *
 * Each iteration starts at a barrier with cleared receive buffers; only
 * posting and completing the transfers is timed, verification is not.
 * Uses only the public API (include/ucxp2p/p2p.h).
 */
#include "../common/meminfo.h"

#include <ucxp2p/p2p.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
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

void usage(FILE *out) {
    std::fprintf(out,
                 "usage: p2p_demo [-s BYTES] [-t TENSORS] [-i ITERS] [-h|--help]\n"
                 "  all-to-all exchange of TENSORS tensors of BYTES bytes per rank pair,\n"
                 "  ITERS times, every payload verified (defaults 1M, 4, 10). BYTES takes\n"
                 "  a K, M or G suffix (powers of 2); at most 1G, and TENSORS at most\n"
                 "  65536, ITERS at most 1000000.\n"
                 "  start with: p2prun -n N -- p2p_demo (installed), or from the build\n"
                 "  tree: tools/p2prun/p2prun -n N -- tools/demo/p2p_demo\n");
}

/** A decimal count, optionally with a K/M/G suffix (suffix_ok), in
 *  1..max; false for anything else ("4x", "-1", "", overflow). */
bool parse_count(const char *text, bool suffix_ok, uint64_t max, uint64_t *out) {
    if (text == nullptr || *text < '0' || *text > '9') {
        return false;
    }
    errno = 0;
    char *end = nullptr;
    unsigned long long v = std::strtoull(text, &end, 10);
    int shift = 0;
    if (suffix_ok && *end != '\0' && end[1] == '\0') {
        switch (*end) {
        case 'k': case 'K': shift = 10; ++end; break;
        case 'm': case 'M': shift = 20; ++end; break;
        case 'g': case 'G': shift = 30; ++end; break;
        default: break;
        }
    }
    if (errno != 0 || *end != '\0' || v == 0 || v > (max >> shift)) {
        return false;
    }
    *out = static_cast<uint64_t>(v) << shift;
    return true;
}

} // namespace

int main(int argc, char **argv) {
    uint64_t bytes = 1 << 20, tensors = 4, iters = 10;
    int opt;
    static const struct option kLong[] = {{"help", no_argument, nullptr, 'h'},
                                          {nullptr, 0, nullptr, 0}};
    while ((opt = getopt_long(argc, argv, "s:t:i:h", kLong, nullptr)) != -1) {
        bool ok = true;
        switch (opt) {
        case 's': ok = parse_count(optarg, true, uint64_t(1) << 30, &bytes); break;
        case 't': ok = parse_count(optarg, false, 65536, &tensors); break;
        case 'i': ok = parse_count(optarg, false, 1000000, &iters); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (!ok) {
            std::fprintf(stderr, "p2p_demo: bad value for -%c: '%s'\n", opt, optarg);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        std::fprintf(stderr, "p2p_demo: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }

    p2p_context_h ctx;
    p2p_bootstrap_h bs;
    p2p_comm_h comm;
    auto t_init = std::chrono::steady_clock::now();
    CHECK(p2p_context_create(nullptr, &ctx));
    CHECK(p2p_bootstrap_create(P2P_BOOTSTRAP_AUTO, &bs));
    p2p_bootstrap_info_t binfo;
    CHECK(p2p_bootstrap_query(bs, &binfo));
    const uint32_t n = binfo.size, me = binfo.rank;

    // A send and a receive buffer of per_peer bytes per rank, each rank:
    // checked before they are touched, not by the kernel's OOM killer, and
    // before p2p_comm_create, which no rank leaves before all came to it,
    // so that no rank checks memory a faster one already took.
    const size_t per_peer = static_cast<size_t>(bytes * tensors);
    if (per_peer > (uint64_t(8) << 30) / n) {
        std::fprintf(stderr, "p2p_demo: 2 x %u ranks x %llu tensors x %llu B is more than "
                     "16 GiB of buffers per rank\n", n, static_cast<unsigned long long>(tensors),
                     static_cast<unsigned long long>(bytes));
        return 2;
    }
    const uint64_t need = 2 * uint64_t(per_peer) * n * std::max<uint32_t>(binfo.local_size, 1);
    const uint64_t avail = p2ptools::memory_available();
    if (avail != 0 && need > avail) {
        std::fprintf(stderr, "p2p_demo: rank %u: buffers of %llu bytes for the %u ranks on "
                     "this host are more than the memory available (%llu bytes); use a "
                     "smaller -s or -t\n", me, static_cast<unsigned long long>(need),
                     binfo.local_size, static_cast<unsigned long long>(avail));
        return 2;
    }
    CHECK(p2p_comm_create(ctx, bs, &comm));
    double setup_ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - t_init).count();
    std::vector<uint8_t> sendbuf(per_peer * n), recvbuf(per_peer * n);
    p2p_mem_h smem, rmem;
    CHECK(p2p_mem_register(ctx, sendbuf.data(), sendbuf.size(), &smem));
    CHECK(p2p_mem_register(ctx, recvbuf.data(), recvbuf.size(), &rmem));
    for (uint32_t dst = 0; dst < n; ++dst)
        for (uint32_t t = 0; t < tensors; ++t)
            for (size_t i = 0; i < bytes; ++i)
                sendbuf[(dst * tensors + t) * bytes + i] = pattern(me, dst, t, i);

    const size_t ops = static_cast<size_t>(n) * tensors;
    std::vector<p2p_completion_t> done(64);
    double secs = 0;  // posting and completing, summed over iterations
    for (uint32_t it = 0; it < iters; ++it) {
        // Cleared, so that data an earlier iteration left cannot pass for
        // this one's.
        std::memset(recvbuf.data(), 0, recvbuf.size());
        CHECK(p2p_bootstrap_barrier(bs));
        auto t0 = std::chrono::steady_clock::now();
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
        secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        for (uint32_t src = 0; src < n; ++src)
            for (uint32_t t = 0; t < tensors; ++t)
                for (size_t i = 0; i < bytes; ++i)
                    if (recvbuf[(src * tensors + t) * bytes + i] != pattern(src, me, t, i)) {
                        std::fprintf(stderr, "p2p_demo: rank %u: iteration %u: byte %zu of "
                                     "tensor %u from rank %u is wrong\n", me, it, i, t, src);
                        return 1;
                    }
    }
    CHECK(p2p_bootstrap_barrier(bs));
    // Received from the other ranks (this rank's own tensors are a copy).
    const double moved = static_cast<double>(per_peer) * (n - 1) * iters;
    std::printf("rank %u: received %.1f MB from %u other rank(s) (%llu tensors x %llu B x "
                "%llu iters) in %.3f s = %.1f MB/s, payload verified; setup %.1f ms\n",
                me, moved / 1e6, n - 1, static_cast<unsigned long long>(tensors),
                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(iters),
                secs, moved / secs / 1e6, setup_ms);
    if (me == 0 && n > 1) {
        std::printf("all-to-all of %u ranks: %.1f MB moved between ranks in total, "
                    "%.1f MB/s aggregate\n", n, moved * n / 1e6, moved * n / secs / 1e6);
    } else if (me == 0) {
        std::printf("one rank: its tensors to itself were verified; nothing moved between "
                    "ranks (start with p2prun -n N, N >= 2)\n");
    }
    CHECK(p2p_comm_destroy(comm));
    CHECK(p2p_mem_deregister(smem));
    CHECK(p2p_mem_deregister(rmem));
    CHECK(p2p_bootstrap_destroy(bs));
    CHECK(p2p_context_destroy(ctx));
    return 0;
}
