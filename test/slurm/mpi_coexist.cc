/*
 * ucxp2p's PMIx bootstrap next to MPI in one process (run under mpirun by
 * test/slurm/mpi_coexist.sh, built there with mpicxx, not by configure).
 *
 *   mpi_coexist mpi-first   MPI_Init; PMIx bootstrap: allgather + barrier;
 *                           bootstrap destroyed (our PMIx_Finalize);
 *                           MPI_Allreduce must still work; MPI_Finalize.
 *   mpi_coexist p2p-first   PMIx bootstrap; MPI_Init; MPI_Allreduce;
 *                           MPI_Finalize; the bootstrap must still work
 *                           (allgather + barrier); bootstrap destroyed.
 *
 * Both check that PMIx_Init/PMIx_Finalize are reference counted across the
 * two users. The bootstrap is created with pmix_bootstrap_create directly
 * (the public p2p_bootstrap_create(P2P_BOOTSTRAP_PMIX) is not wired yet).
 * Prints "mpi_coexist OK rank R" per rank on success.
 */
#include "wireup/pmix_bootstrap.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

int g_rank = -1;

void check(bool ok, const char *what) {
    if (!ok) {
        std::printf("mpi_coexist FAIL rank %d: %s\n", g_rank, what);
        std::fflush(stdout);
        std::exit(1);
    }
}

/** The ucxp2p side: allgather each rank's id and a barrier. */
void p2p_exchange(ucxp2p::Bootstrap &b, int round) {
    std::vector<uint8_t> mine = {static_cast<uint8_t>(b.rank()),
                                 static_cast<uint8_t>(round)};
    std::vector<std::vector<uint8_t>> all;
    check(b.allgather(mine, &all) == P2P_OK, "bootstrap allgather");
    check(all.size() == b.size(), "allgather size");
    for (uint32_t r = 0; r < b.size(); ++r) {
        check(all[r].size() == 2 && all[r][0] == r && all[r][1] == round,
              "allgather contents");
    }
    check(b.barrier() == P2P_OK, "bootstrap barrier");
}

std::unique_ptr<ucxp2p::Bootstrap> p2p_start() {
    std::unique_ptr<ucxp2p::Bootstrap> b;
    check(ucxp2p::pmix_bootstrap_create(&b) == P2P_OK, "pmix_bootstrap_create");
    g_rank = static_cast<int>(b->rank());
    return b;
}

/** The MPI side: ranks agree with the bootstrap's, an allreduce works. */
void mpi_exchange(const ucxp2p::Bootstrap &b) {
    int rank = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check(rank == static_cast<int>(b.rank()), "MPI rank == bootstrap rank");
    check(size == static_cast<int>(b.size()), "MPI size == bootstrap size");
    int sum = 0, one = 1;
    check(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) ==
              MPI_SUCCESS,
          "MPI_Allreduce");
    check(sum == size, "MPI_Allreduce result");
}

} // namespace

int main(int argc, char **argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    if (argc != 2 || (std::strcmp(argv[1], "mpi-first") != 0 &&
                      std::strcmp(argv[1], "p2p-first") != 0)) {
        std::fprintf(stderr, "usage: %s mpi-first|p2p-first\n", argv[0]);
        return 2;
    }
    if (std::strcmp(argv[1], "mpi-first") == 0) {
        check(MPI_Init(&argc, &argv) == MPI_SUCCESS, "MPI_Init");
        std::unique_ptr<ucxp2p::Bootstrap> b = p2p_start();
        p2p_exchange(*b, 0);
        mpi_exchange(*b);
        uint32_t size = b->size();
        b.reset(); // our PMIx_Finalize: MPI must keep working
        int sum = 0, one = 1;
        check(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) ==
                      MPI_SUCCESS &&
                  sum == static_cast<int>(size),
              "MPI_Allreduce after the bootstrap was destroyed");
        check(MPI_Finalize() == MPI_SUCCESS, "MPI_Finalize");
    } else {
        std::unique_ptr<ucxp2p::Bootstrap> b = p2p_start();
        p2p_exchange(*b, 0);
        check(MPI_Init(&argc, &argv) == MPI_SUCCESS, "MPI_Init");
        mpi_exchange(*b);
        check(MPI_Finalize() == MPI_SUCCESS, "MPI_Finalize");
        p2p_exchange(*b, 1); // MPI's PMIx_Finalize must not cut us off
        b.reset();
    }
    std::printf("mpi_coexist OK rank %d\n", g_rank);
    return 0;
}
