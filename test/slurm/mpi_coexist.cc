/*
 * ucxp2p next to MPI in one process, through the public API only (run under
 * mpirun by test/slurm/mpi_coexist.sh, built there with mpicxx and linked to
 * libucxp2p.la; MPI is not a configure dependency).
 *
 *   mpi_coexist mpi-first   MPI_Init; p2p_context_create,
 *                           p2p_bootstrap_create(P2P_BOOTSTRAP_PMIX),
 *                           p2p_comm_create; verified all-to-all through
 *                           ucxp2p and an MPI ring; ucxp2p torn down (its
 *                           PMIx_Finalize); MPI must still work;
 *                           MPI_Finalize.
 *   p2p-first               ucxp2p up and a verified all-to-all; MPI_Init;
 *                           MPI ring and ucxp2p all-to-all interleaved;
 *                           MPI_Finalize; ucxp2p must still work (all-to-all
 *                           and a bootstrap barrier); ucxp2p torn down.
 *
 * PMIx_Init/PMIx_Finalize are reference counted by the PMIx client library,
 * so neither order may cut the other user off. Every byte received is
 * checked. Prints "mpi_coexist OK rank R" per rank on success; any failure
 * prints the reason and exits 1. Every wait is bounded.
 */
#include <ucxp2p/p2p.h>

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

int g_rank = -1;
const int kWaitMs = 30000;

[[noreturn]] void fail(const char *what, const char *detail) {
    std::printf("mpi_coexist FAIL rank %d: %s%s%s\n", g_rank, what,
                detail[0] != '\0' ? ": " : "", detail);
    std::fflush(stdout);
    std::exit(1);
}

void check(bool ok, const char *what) {
    if (!ok) {
        fail(what, "");
    }
}

void check_p2p(p2p_status_t st, const char *what) {
    if (st != P2P_OK) {
        fail(what, p2p_status_string(st));
    }
}

uint8_t pattern(uint32_t src, uint32_t dst, uint32_t tid, size_t i) {
    return static_cast<uint8_t>(src * 131 + dst * 31 + tid * 7 + i * 13);
}

/** The ucxp2p side of the process: context, PMIx bootstrap, communicator. */
class P2p {
public:
    P2p() {
        check_p2p(p2p_context_create(nullptr, &ctx_), "p2p_context_create");
        check_p2p(p2p_bootstrap_create(P2P_BOOTSTRAP_PMIX, &bs_),
                  "p2p_bootstrap_create(P2P_BOOTSTRAP_PMIX)");
        p2p_bootstrap_info_t bi{};
        check_p2p(p2p_bootstrap_query(bs_, &bi), "p2p_bootstrap_query");
        check(bi.name != nullptr && std::strcmp(bi.name, "pmix") == 0,
              "bootstrap name is not pmix");
        check_p2p(p2p_comm_create(ctx_, bs_, &comm_), "p2p_comm_create");
        check_p2p(p2p_comm_query(comm_, &info_), "p2p_comm_query");
        check(info_.rank == bi.rank && info_.size == bi.size,
              "comm rank/size differ from the bootstrap's");
        g_rank = static_cast<int>(info_.rank);
    }
    P2p(const P2p &) = delete;
    P2p &operator=(const P2p &) = delete;
    ~P2p() {
        check_p2p(p2p_comm_destroy(comm_), "p2p_comm_destroy");
        check_p2p(p2p_bootstrap_destroy(bs_), "p2p_bootstrap_destroy");
        check_p2p(p2p_context_destroy(ctx_), "p2p_context_destroy");
    }

    uint32_t rank() const { return info_.rank; }
    uint32_t size() const { return info_.size; }
    void barrier() { check_p2p(p2p_bootstrap_barrier(bs_), "p2p_bootstrap_barrier"); }

    /** Every rank sends `bytes` to every other rank, tensor id tid; every
     *  completion and every received byte is checked. */
    void alltoall(size_t bytes, uint32_t tid) {
        const uint32_t n = size(), me = rank();
        const size_t slot = bytes > 0 ? bytes : 1;
        std::vector<uint8_t> sbuf(slot * n), rbuf(slot * n, 0xee);
        p2p_mem_h smem = nullptr, rmem = nullptr;
        check_p2p(p2p_mem_register(ctx_, sbuf.data(), sbuf.size(), &smem),
                  "p2p_mem_register (send)");
        check_p2p(p2p_mem_register(ctx_, rbuf.data(), rbuf.size(), &rmem),
                  "p2p_mem_register (recv)");
        for (uint32_t p = 0; p < n; ++p) {
            for (size_t i = 0; i < bytes; ++i) {
                sbuf[p * slot + i] = pattern(me, p, tid, i);
            }
        }
        for (uint32_t p = 0; p < n; ++p) {
            if (p != me) {
                check_p2p(p2p_comm_recv(comm_, p, tid, &rbuf[p * slot], bytes,
                                        rmem, &rbuf[p * slot]),
                          "p2p_comm_recv");
            }
        }
        for (uint32_t p = 0; p < n; ++p) {
            if (p != me) {
                check_p2p(p2p_comm_send(comm_, p, tid, &sbuf[p * slot], bytes,
                                        smem, nullptr),
                          "p2p_comm_send");
            }
        }
        drain(P2P_QUEUE_SEND, n - 1, bytes, tid);
        drain(P2P_QUEUE_RECV, n - 1, bytes, tid);
        for (uint32_t p = 0; p < n; ++p) {
            for (size_t i = 0; p != me && i < bytes; ++i) {
                if (rbuf[p * slot + i] != pattern(p, me, tid, i)) {
                    char d[128];
                    std::snprintf(d, sizeof(d), "from rank %u, %zu bytes, "
                                  "tensor %u, byte %zu", p, bytes, tid, i);
                    fail("ucxp2p payload mismatch", d);
                }
            }
        }
        check_p2p(p2p_mem_deregister(smem), "p2p_mem_deregister (send)");
        check_p2p(p2p_mem_deregister(rmem), "p2p_mem_deregister (recv)");
    }

    /** One exchange of every size (eager to rendezvous) with ids from tid. */
    void exchange(uint32_t tid) {
        for (size_t bytes : {size_t(0), size_t(8), size_t(65536 + 3),
                             size_t(1) << 20}) {
            alltoall(bytes, tid++);
        }
    }

private:
    void drain(p2p_queue_t q, uint32_t want, size_t bytes, uint32_t tid) {
        uint32_t got = 0;
        while (got < want) {
            p2p_completion_t c[16];
            size_t k = 0;
            check_p2p(p2p_comm_wait(comm_, q, c, 16, &k, kWaitMs),
                      q == P2P_QUEUE_SEND ? "send completion" : "recv completion");
            for (size_t i = 0; i < k; ++i) {
                check_p2p(c[i].status, "completion status");
                check(c[i].bytes == bytes && c[i].tensor_id == tid,
                      "completion bytes or tensor id");
            }
            got += static_cast<uint32_t>(k);
        }
    }

    p2p_context_h ctx_ = nullptr;
    p2p_bootstrap_h bs_ = nullptr;
    p2p_comm_h comm_ = nullptr;
    p2p_comm_info_t info_{};
};

/** The MPI side: ranks agree with ucxp2p's (if given), a verified ring, an
 *  allreduce. */
void mpi_exchange(const P2p *p, int round) {
    int rank = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (p != nullptr) {
        check(rank == static_cast<int>(p->rank()), "MPI rank == ucxp2p rank");
        check(size == static_cast<int>(p->size()), "MPI size == ucxp2p size");
    }
    g_rank = rank;
    std::vector<int> out(4096), in(4096, -1);
    for (size_t i = 0; i < out.size(); ++i) {
        out[i] = rank * 100000 + round * 10000 + static_cast<int>(i);
    }
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    check(MPI_Sendrecv(out.data(), 4096, MPI_INT, next, round, in.data(), 4096,
                       MPI_INT, prev, round, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE) == MPI_SUCCESS,
          "MPI_Sendrecv");
    for (size_t i = 0; i < in.size(); ++i) {
        check(in[i] == prev * 100000 + round * 10000 + static_cast<int>(i),
              "MPI ring payload");
    }
    int sum = 0, one = 1;
    check(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) ==
              MPI_SUCCESS,
          "MPI_Allreduce");
    check(sum == size, "MPI_Allreduce result");
}

} // namespace

int main(int argc, char **argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    const bool mpi_first = argc == 2 && std::strcmp(argv[1], "mpi-first") == 0;
    if (argc != 2 || (!mpi_first && std::strcmp(argv[1], "p2p-first") != 0)) {
        std::fprintf(stderr, "usage: %s mpi-first|p2p-first\n", argv[0]);
        return 2;
    }
    if (mpi_first) {
        check(MPI_Init(&argc, &argv) == MPI_SUCCESS, "MPI_Init");
        {
            P2p p;
            p.exchange(100);
            mpi_exchange(&p, 0);
            p.exchange(200);
        } // ucxp2p torn down, its PMIx_Finalize: MPI must keep working
        mpi_exchange(nullptr, 1);
        check(MPI_Finalize() == MPI_SUCCESS, "MPI_Finalize");
    } else {
        P2p p;
        p.exchange(100);
        check(MPI_Init(&argc, &argv) == MPI_SUCCESS, "MPI_Init");
        mpi_exchange(&p, 0);
        p.exchange(200);
        mpi_exchange(&p, 1);
        check(MPI_Finalize() == MPI_SUCCESS, "MPI_Finalize");
        // MPI's PMIx_Finalize must not cut ucxp2p off.
        p.barrier();
        p.exchange(300);
    }
    std::printf("mpi_coexist OK rank %d\n", g_rank);
    return 0;
}
