/*
 * Rank program for the PMIx bootstrap, started by srun --mpi=pmix or mpirun
 * (test/slurm/pmix_test.sh). Uses the internal Bootstrap interface through
 * pmix_bootstrap_create (bootstrap selection is not involved).
 *
 *   pmix_rank --check SIZE LOCAL_SIZE   rank/size/local values, allgathers of
 *                                       uneven blobs (one empty), barriers,
 *                                       a second bootstrap (PMIx_Init refcount),
 *                                       one created after all were destroyed
 *   pmix_rank --gone [K]                rank 1 exits after wireup and K
 *                                       barriers (default 0; normally, PMIx
 *                                       finalized); the others' barrier and
 *                                       allgather must fail, not hang and
 *                                       not return OK (K > 0: its values of
 *                                       earlier collectives are there)
 *   pmix_rank --many N                  N barriers, an allgather (contents
 *                                       checked) every 50: each must see
 *                                       this round's values (a key put again
 *                                       read back the old one in a client
 *                                       that caches, PMIX_MCA_gds=hash)
 *   pmix_rank --unsupported             outside a launcher: create must give
 *                                       P2P_ERR_UNSUPPORTED
 *   pmix_rank --bench ITERS             timings (rank 0 prints one line)
 *
 * Every failure prints "pmix_rank FAIL ..." and exits 1; success prints
 * "pmix_rank OK rank R" (one line per rank) and exits 0.
 */
#include "wireup/pmix_bootstrap.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using ucxp2p::Bootstrap;

namespace {

int g_rank = -1;

[[noreturn]] void fail(const char *what, long got, long want) {
    std::printf("pmix_rank FAIL rank %d: %s: got %ld, want %ld\n", g_rank, what,
                got, want);
    std::fflush(stdout);
    std::exit(1);
}

void expect_eq(const char *what, long got, long want) {
    if (got != want) {
        fail(what, got, want);
    }
}

/** Rank r's blob in round k: (r * 37 + k) % 300 bytes; rank 0, round 0 is
 *  empty. Contents depend on (r, k, index). */
std::vector<uint8_t> blob(uint32_t r, uint32_t k) {
    std::vector<uint8_t> b((r * 37 + k) % 300);
    for (size_t i = 0; i < b.size(); ++i) {
        b[i] = static_cast<uint8_t>(r * 131 + k * 17 + i);
    }
    return b;
}

/** The launcher's own idea of our rank, to compare with PMIx's. */
long launcher_rank() {
    for (const char *v : {"SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"}) {
        const char *s = std::getenv(v);
        if (s != nullptr) {
            return std::strtol(s, nullptr, 10);
        }
    }
    return -1;
}

std::unique_ptr<Bootstrap> create_or_die() {
    std::unique_ptr<Bootstrap> b;
    p2p_status_t st = ucxp2p::pmix_bootstrap_create(&b);
    if (st != P2P_OK || b == nullptr) {
        fail("pmix_bootstrap_create status", st, P2P_OK);
    }
    return b;
}

void check_allgather(Bootstrap &b, uint32_t rounds, uint32_t first = 0) {
    for (uint32_t k = first; k < first + rounds; ++k) {
        std::vector<std::vector<uint8_t>> all;
        p2p_status_t st = b.allgather(blob(b.rank(), k), &all);
        expect_eq("allgather status", st, P2P_OK);
        expect_eq("allgather entries", static_cast<long>(all.size()), b.size());
        for (uint32_t r = 0; r < b.size(); ++r) {
            if (all[r] != blob(r, k)) {
                fail("allgather blob of rank (round in want)", r, k);
            }
        }
    }
}

int run_check(long want_size, long want_local_size) {
    std::unique_ptr<Bootstrap> b = create_or_die();
    g_rank = static_cast<int>(b->rank());
    expect_eq("name is pmix", std::strcmp(b->name(), "pmix"), 0);
    expect_eq("size", b->size(), want_size);
    expect_eq("rank matches launcher", b->rank(), launcher_rank());
    expect_eq("local size", b->local_size(), want_local_size);
    if (want_local_size == want_size) {
        // One node: ranks are packed, local rank == rank.
        expect_eq("local rank", b->local_rank(), b->rank());
    }
    check_allgather(*b, 3);
    expect_eq("barrier", b->barrier(), P2P_OK);

    // Allgather results agree on local ranks: every (local rank) is unique.
    std::vector<uint8_t> mine = {static_cast<uint8_t>(b->local_rank())};
    std::vector<std::vector<uint8_t>> all;
    expect_eq("allgather local ranks", b->allgather(mine, &all), P2P_OK);
    std::vector<uint8_t> seen;
    for (const auto &v : all) {
        expect_eq("local rank blob size", static_cast<long>(v.size()), 1);
        seen.push_back(v[0]);
    }
    std::sort(seen.begin(), seen.end());
    if (want_local_size == want_size) {
        for (size_t i = 0; i < seen.size(); ++i) {
            expect_eq("sorted local ranks", seen[i], static_cast<long>(i));
        }
    }

    // A second bootstrap while the first lives (PMIx_Init twice), then the
    // first goes away: the second must still work (Init is refcounted).
    std::unique_ptr<Bootstrap> b2 = create_or_die();
    expect_eq("second bootstrap rank", b2->rank(), b->rank());
    b.reset();
    check_allgather(*b2, 2);
    expect_eq("second barrier", b2->barrier(), P2P_OK);

    // Oversized blob is refused locally, before any collective.
    setenv("P2P_BOOTSTRAP_MAX_MSG", "8", 1);
    std::unique_ptr<Bootstrap> b3 = create_or_die();
    expect_eq("oversized allgather",
              b3->allgather(std::vector<uint8_t>(9), &all),
              P2P_ERR_INVALID_PARAM);
    expect_eq("third barrier", b3->barrier(), P2P_OK);
    b3.reset();
    b2.reset();

    // Every bootstrap gone: a new one must still find the job (PMIx 4.2's
    // client, once finalized for good, did not: pmix.lrank NOT-FOUND).
    unsetenv("P2P_BOOTSTRAP_MAX_MSG");
    std::unique_ptr<Bootstrap> b4 = create_or_die();
    expect_eq("bootstrap after the last was destroyed: rank", b4->rank(), launcher_rank());
    check_allgather(*b4, 1);
    expect_eq("bootstrap after the last was destroyed: barrier", b4->barrier(), P2P_OK);
    b4.reset();
    std::printf("pmix_rank OK rank %d\n", g_rank);
    return 0;
}

int run_unsupported() {
    expect_eq("launched outside a launcher", ucxp2p::pmix_bootstrap_launched(),
              0);
    std::unique_ptr<Bootstrap> b;
    p2p_status_t st = ucxp2p::pmix_bootstrap_create(&b);
    expect_eq("create outside a launcher", st, P2P_ERR_UNSUPPORTED);
    expect_eq("no bootstrap returned", b == nullptr, 1);
    std::printf("pmix_rank OK unsupported\n");
    return 0;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

int run_bench(long iters) {
    using Clock = std::chrono::steady_clock;
    auto ms = [](Clock::time_point a, Clock::time_point b) {
        return std::chrono::duration<double, std::milli>(b - a).count();
    };
    Clock::time_point t0 = Clock::now();
    std::unique_ptr<Bootstrap> b = create_or_die();
    double create_ms = ms(t0, Clock::now());
    g_rank = static_cast<int>(b->rank());
    expect_eq("launched", ucxp2p::pmix_bootstrap_launched(), 1);
    // A blob of the size of a UCX worker address with shm+tcp (~ 300 B).
    std::vector<uint8_t> mine(300, static_cast<uint8_t>(b->rank()));
    std::vector<std::vector<uint8_t>> all;
    std::vector<double> ag, bar;
    expect_eq("warm-up barrier", b->barrier(), P2P_OK);
    for (long i = 0; i < iters; ++i) {
        Clock::time_point a = Clock::now();
        expect_eq("allgather", b->allgather(mine, &all), P2P_OK);
        ag.push_back(ms(a, Clock::now()));
        a = Clock::now();
        expect_eq("barrier", b->barrier(), P2P_OK);
        bar.push_back(ms(a, Clock::now()));
    }
    // Rank 0 reports the slowest rank's medians (gathered with the bootstrap).
    std::vector<double> m = {create_ms, median(ag), median(bar)};
    std::vector<uint8_t> raw(sizeof(double) * m.size());
    std::memcpy(raw.data(), m.data(), raw.size());
    expect_eq("gather timings", b->allgather(raw, &all), P2P_OK);
    if (b->rank() == 0) {
        double worst[3] = {0, 0, 0};
        for (const auto &v : all) {
            double t[3];
            std::memcpy(t, v.data(), sizeof(t));
            for (int j = 0; j < 3; ++j) {
                worst[j] = std::max(worst[j], t[j]);
            }
        }
        const char *modex = std::getenv("P2P_PMIX_MODEX");
        std::printf("pmix_bench ranks %u modex %s create_ms %.2f "
                    "allgather_ms %.3f barrier_ms %.3f (max over ranks of "
                    "medians, %ld iters)\n",
                    b->size(), modex != nullptr ? modex : "collect", worst[0],
                    worst[1], worst[2], iters);
    }
    return 0;
}

/** Rank 1 leaves after `before` barriers; every other rank's barrier and
 *  allgather must then fail (not return OK as if rank 1 had entered). */
int run_gone(uint32_t before) {
    std::unique_ptr<Bootstrap> b = create_or_die();
    g_rank = static_cast<int>(b->rank());
    for (uint32_t k = 0; k < before; ++k) expect_eq("barrier before", b->barrier(), P2P_OK);
    if (b->rank() == 1) {
        std::printf("pmix_rank OK rank %d (leaves)\n", g_rank);
        return 0;
    }
    p2p_status_t st = b->barrier();
    if (st == P2P_OK) {
        fail("barrier with rank 1 gone", st, P2P_ERR_BOOTSTRAP);
    }
    std::vector<std::vector<uint8_t>> all;
    p2p_status_t ag = b->allgather(blob(b->rank(), 0), &all);
    if (ag == P2P_OK) {
        fail("allgather with rank 1 gone", ag, P2P_ERR_BOOTSTRAP);
    }
    std::printf("pmix_rank OK rank %d (barrier %d, allgather %d)\n", g_rank,
                st, ag);
    return 0;
}

int run_many(long rounds) {
    std::unique_ptr<Bootstrap> b = create_or_die();
    g_rank = static_cast<int>(b->rank());
    const auto t0 = std::chrono::steady_clock::now();
    for (long k = 0; k < rounds; ++k) {
        // Round k / 50's blobs, unlike any before: an old value read back
        // would not pass for this round's.
        if (k % 50 == 0) check_allgather(*b, 1, static_cast<uint32_t>(k / 50) + 1);
        expect_eq("barrier", b->barrier(), P2P_OK);
    }
    std::printf("pmix_rank OK rank %d (%ld rounds in %.2f s)\n", g_rank, rounds,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    if (argc == 4 && std::strcmp(argv[1], "--check") == 0) {
        return run_check(std::atol(argv[2]), std::atol(argv[3]));
    }
    if (argc == 2 && std::strcmp(argv[1], "--unsupported") == 0) {
        return run_unsupported();
    }
    if ((argc == 2 || argc == 3) && std::strcmp(argv[1], "--gone") == 0) {
        return run_gone(argc == 3 ? static_cast<uint32_t>(std::atol(argv[2])) : 0);
    }
    if (argc == 3 && std::strcmp(argv[1], "--many") == 0) {
        return run_many(std::atol(argv[2]));
    }
    if (argc == 3 && std::strcmp(argv[1], "--bench") == 0) {
        return run_bench(std::atol(argv[2]));
    }
    std::fprintf(stderr,
                 "usage: %s --check SIZE LOCAL_SIZE | --gone [K] | --many N | "
                 "--unsupported | --bench ITERS\n",
                 argv[0]);
    return 2;
}
