/*
 * ucxp2p SMDDP compatibility: the herringP2P* API of SageMaker distributed
 * data parallel (herring.hpp), implemented on ucxp2p by libucxp2p_herring.so.
 *
 * Binary compatibility: an application built against SMDDP's herring.hpp and
 * linked with libsmddpcpp.so runs unchanged with
 *     LD_PRELOAD=libucxp2p_herring.so
 * The declarations below are C++ functions (not extern "C") with exactly the
 * vendor's signatures, so the exported (mangled) symbols are the vendor's.
 * herringP2PGetRDMADevices is exported for both libstdc++ string ABIs.
 * New code may include this header and link -lucxp2p_herring directly.
 *
 * Behaviour (where the vendor documentation is silent, this is the contract):
 *  - herringP2PInitialize joins the job through ucxp2p's bootstrap chain
 *    (P2P_BOOTSTRAP, else PMIx under mpirun/srun, else torchrun-style
 *    MASTER_ADDR/RANK/WORLD_SIZE, else a single process). It is collective.
 *    MPI is not needed; MPI_Init may be called before or after it. The RDMA
 *    device choice follows ucxp2p's rail plan, which honours
 *    SMDATAPARALLEL_DEVICE_NAME; the chosen devices are given to UCX through
 *    UCX_NET_DEVICES / UCX_MAX_RNDV_RAILS / UCX_IB_GID_INDEX unless the user
 *    set those. A second call while initialized does nothing.
 *    It returns void and throws nothing, like the vendor's. If it fails --
 *    e.g. SMDATAPARALLEL_DEVICE_NAME names no RDMA device of this machine
 *    (the rail planner's error names the variable and the value) -- the
 *    cause and "herringP2PInitialize failed" are logged at error level
 *    (shown at the default P2P_LOG_LEVEL) and the shim stays uninitialized:
 *    RegisterMemory returns NULL, Send/Recv complete with RDMA_READ_FAIL,
 *    completion calls never block (see below), Shutdown tears nothing down.
 *    A later Initialize tries again.
 *  - herringP2PShutdown is collective like MPI_Finalize: it first waits
 *    (bounded by P2P_BOOTSTRAP_TIMEOUT_MS) for every rank to reach it, while
 *    operations left pending keep moving. Then it cancels what is still
 *    pending (complete your operations before Shutdown, as before
 *    MPI_Finalize: a transfer not over by then is cancelled): each operation
 *    produces one completion with RDMA_SHUTDOWN (or its real status if it
 *    finished first; RDMA_READ_FAIL for one a hung or stopped peer kept
 *    going past the core's deadline, whose buffer that peer may still
 *    touch). It waits for every rank once more before the
 *    transport is torn down, so no rank drops data a peer is still reading.
 *    Completions not yet popped stay readable after Shutdown; a completion
 *    call blocked in another thread returns those entries, then the
 *    RDMA_SHUTDOWN sentinel below.
 *    Initialize after Shutdown is refused (logged); the shim stays shut down.
 *  - Send/Recv are asynchronous: they never wait for the peer or the data
 *    (a call may wait for the context's worker lock while UCX copies a
 *    large same-host message itself, with P2P_CMA=off: README, "Worker
 *    lock").
 *    Each call produces exactly one completion entry carrying the caller's
 *    context, peer rank and tensor_id, including calls that fail at once:
 *      before Initialize (or after a failed one)  -> RDMA_READ_FAIL
 *      after Shutdown                             -> RDMA_SHUTDOWN
 *      bad rank, NULL/unknown mr, range outside the registration -> RDMA_READ_FAIL
 *    A message longer than the receive completes the receive with
 *    RDMA_READ_FAIL and nothing is written past buffer + length; a dead or
 *    unreachable peer gives RDMA_READ_FAIL. imm_data is ignored.
 *  - herringP2PSendCompletion / herringP2PReadCompletion block until an entry
 *    is available and return entries in completion order. They never hang on
 *    an unusable shim: with nothing queued they return at once an entry with
 *    context NULL, dst_rank and tensor_id 0xffffffff and error_code
 *    RDMA_SHUTDOWN (after Shutdown) or RDMA_READ_FAIL (before Initialize or
 *    after a failed one). A call rejected with rank -1, tensor_id -1 and a
 *    NULL context completes with that very entry: give each operation a
 *    non-NULL context to tell the two apart.
 *  - herringP2PRegisterMemory(buff, len) registers [buff, buff + len); the
 *    handle serves any sub-range in Send/Recv (in Send only where some page
 *    of the range was mapped read-only: a Recv into it completes with
 *    RDMA_READ_FAIL). It returns NULL (and logs) for a NULL buffer, len <= 0,
 *    before Initialize / after Shutdown, host memory not mapped or mapped
 *    without access (PROT_NONE), or when UCX refuses. Registrations are
 *    released by Shutdown.
 *  - herringLocalDevice returns the local rank modulo the number of CUDA
 *    devices visible (CUDA driver API, loaded with dlopen when present), or
 *    the local rank when there is no GPU/driver. The local rank comes from
 *    the launcher's variables as the rail planner reads them (so the GPU and
 *    its NICs agree): the first complete rank/size pair of P2P_LOCAL_RANK,
 *    LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, Slurm's
 *    SLURM_LOCALID with its task counts, PMIX_LOCAL_RANK; else the first of
 *    those rank variables set alone; else 0. It stays the same across
 *    Initialize, except where Initialize found none of those pairs and took
 *    the bootstrap's local rank for the rail plan: from then on that one
 *    (after Shutdown too).
 *  - herringP2PGetRDMADevices replaces the vector's contents with the RDMA
 *    device names of this machine (/sys/class/infiniband), sorted; empty when
 *    there are none.
 * Every function is thread-safe and never throws.
 */
#ifndef UCXP2P_HERRING_HPP
#define UCXP2P_HERRING_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#if defined(__GNUC__)
#define HERRING_API __attribute__((visibility("default")))
#else
#define HERRING_API
#endif

// The status of P2P Send/Recv (values and spelling as the vendor's).
typedef enum {
    RDMA_READ_SUCCESS = 0,
    RDMA_READ_FAIL,
    RDMA_READ_STATUS_UNKOWN,
    RDMA_SHUTDOWN,
} herringP2PMessageErrorCode_t;

// One entry per Send/Recv call.
struct CompletionEntry {
    const void *context;                      // the caller's context
    uint32_t dst_rank;                        // peer rank
    uint32_t tensor_id;                       // tensor_id of the call
    herringP2PMessageErrorCode_t error_code;  // status of the call
};

typedef CompletionEntry *CompletionEntryPtr;

static_assert(sizeof(herringP2PMessageErrorCode_t) == 4, "vendor enum is int-sized");
static_assert(sizeof(CompletionEntry) == 24, "vendor CompletionEntry layout");
static_assert(offsetof(CompletionEntry, context) == 0, "vendor CompletionEntry layout");
static_assert(offsetof(CompletionEntry, dst_rank) == 8, "vendor CompletionEntry layout");
static_assert(offsetof(CompletionEntry, tensor_id) == 12, "vendor CompletionEntry layout");
static_assert(offsetof(CompletionEntry, error_code) == 16, "vendor CompletionEntry layout");

HERRING_API void *herringP2PRegisterMemory(void *buff, int buff_len);
HERRING_API CompletionEntry herringP2PReadCompletion();
HERRING_API CompletionEntry herringP2PSendCompletion();
HERRING_API void herringP2PSend(int rank, const void *buffer, void *mr, uint64_t length,
                                int tensor_id, const void *context, uint32_t imm_data);
HERRING_API void herringP2PRecv(int rank, void *buffer, void *mr, uint64_t length,
                                int tensor_id, const void *context, uint32_t imm_data);
HERRING_API void herringP2PGetRDMADevices(std::vector<std::string> &);
HERRING_API void herringP2PInitialize();
HERRING_API void herringP2PShutdown();
HERRING_API int herringLocalDevice();

#endif /* UCXP2P_HERRING_HPP */
