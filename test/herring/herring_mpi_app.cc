/*
 * MPI co-existence: an SMDDP-style program that calls MPI_Init first (as the
 * vendor demo does), then herringP2PInitialize, exchanges a tensor around a
 * ring, uses MPI between herring calls, and shuts both down. Built by
 * herring_mpi.sh with mpicxx against vendor_herring.hpp and the stub
 * libsmddpcpp.so; run with the shim preloaded.
 */
#include "vendor_herring.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <vector>

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            std::fprintf(stderr, "herring_mpi_app: FAILED %s (line %d)\n", #cond,      \
                         __LINE__);                                                    \
            MPI_Abort(MPI_COMM_WORLD, 1);                                              \
        }                                                                              \
    } while (0)

int main(int argc, char **argv) {
    alarm(100);
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    herringP2PInitialize();
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    const size_t n = 100000;
    std::vector<int> buf(2 * n);
    void *mr = herringP2PRegisterMemory(buf.data(), static_cast<int>(buf.size() * sizeof(int)));
    CHECK(mr != nullptr);
    for (size_t i = 0; i < n; ++i) buf[i] = rank * 1000003 + static_cast<int>(i);
    herringP2PRecv(prev, &buf[n], mr, n * sizeof(int), 9, &buf[n], 0);
    MPI_Barrier(MPI_COMM_WORLD);  // MPI traffic between herring calls
    herringP2PSend(next, &buf[0], mr, n * sizeof(int), 9, &buf[0], 0);
    CompletionEntry s = herringP2PSendCompletion();
    CompletionEntry r = herringP2PReadCompletion();
    CHECK(s.error_code == RDMA_READ_SUCCESS && s.context == &buf[0]);
    CHECK(r.error_code == RDMA_READ_SUCCESS && r.context == &buf[n] &&
          r.dst_rank == static_cast<uint32_t>(prev) && r.tensor_id == 9);
    for (size_t i = 0; i < n; ++i) CHECK(buf[n + i] == prev * 1000003 + static_cast<int>(i));
    int sum = 0, one = 1;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == size);
    herringP2PShutdown();
    MPI_Finalize();
    std::printf("herring_mpi_app OK rank %d\n", rank);
    return 0;
}
