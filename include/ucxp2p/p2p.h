/*
 * ucxp2p: fast point-to-point tensor transfer over UCX.
 *
 * Public C API. Every function is safe to call from any thread, never throws,
 * and reports failures through p2p_status_t. Output arguments (suffix _p) are
 * written only on success, except where a function says otherwise
 * (p2p_comm_wait's *count_p, the batch calls' *bad_index_p).
 *
 * Object model
 *   p2p_context_h   UCP context + one worker + one progress thread.
 *   p2p_bootstrap_h how the processes of a job find each other (PMIx under
 *                   srun/mpirun, env/TCP as torchrun sets it, single process).
 *   p2p_comm_h      a group of ranks created collectively through a
 *                   bootstrap; owns a send and a receive completion queue.
 *   p2p_mem_h       a registered memory region (ucp_mem_map), usable with any
 *                   communicator of its context, for any sub-range.
 *
 * Synchronous errors versus completions
 *   A post call (p2p_comm_send, p2p_comm_recv, the batch calls) either returns
 *   a negative status and queues nothing, or returns P2P_OK and the operation
 *   later produces exactly one completion entry -- success or error -- in the
 *   communicator's send or receive queue.
 *
 * Tag layout (64-bit UCP tag)
 *   bits 63..56  communicator id (agreed collectively at p2p_comm_create)
 *   bits 55..54  message kind: data, and the library's own answers (a
 *                receive matches data only: single-copy requests, same
 *                host or tcp path, travel as data, told apart by payload)
 *   bits 53..50  generation of the communicator id: a communicator that
 *                reuses an id never matches messages sent on the one that
 *                had it before (those left unreceived are dropped when it
 *                is destroyed)
 *   bits 49..32  source rank (so at most 2^18 = 262144 ranks)
 *   bits 31..0   tensor_id plus 64 times a block number (0..15) derived
 *                from bits 63..32, mod 2^32: spreads the tags of
 *                different ranks over UCX's tag-matching hash buckets
 *   A receive therefore matches only messages from its peer, with its
 *   tensor_id, on its communicator, whatever order sends and receives are
 *   posted in; messages with equal (peer, tensor_id) match in posting order.
 *
 * Same-host single copy
 *   Between ranks on one host, messages from P2P_CMA_THRESH bytes (256 KiB
 *   by default, 16 KiB where the sender measured it faster;
 *   P2P_CMA_MAPPED_THRESH from p2p_mem_alloc memory) are read by the
 *   receiver straight from the sender's buffer after a small request
 *   (README "Same-host single copy"); the send completes when the receiver
 *   has read it. Where the kernel refuses the read, the bytes go through
 *   UCX instead; P2P_CMA=off disables it. A send cancelled (shutdown, peer
 *   failure) before it was read fails its receive with P2P_ERR_PEER_FAILURE.
 *   A receive the sender helps write (from P2P_CMA_SPLIT bytes) completes
 *   only when the sender has finished its part or is gone:
 *   p2p_comm_shutdown waits for it, up to its deadline.
 *
 * fork()
 *   A child made by fork() starts without the parent's objects: every
 *   handle created before the fork is unknown in the child (calls on it
 *   return P2P_ERR_INVALID_HANDLE, destroy calls included, and release
 *   nothing: the UCX workers, threads and shared memory stay the
 *   parent's). The child may create its own context and communicators;
 *   when UCX's async thread ran in the parent at the fork (a context over
 *   tcp or InfiniBand was alive), UCX 1.13 cannot use those transports in
 *   the child, and p2p_context_create there limits UCX to shared memory
 *   (no UCX_TLS set) or fails with P2P_ERR_UNSUPPORTED (UCX_TLS allows
 *   another transport).
 *   Memory from p2p_mem_alloc is shared with the child (MAP_SHARED), as
 *   any shared mapping is; p2p_mem_free there unmaps the child's view only.
 */
#ifndef UCXP2P_P2P_H
#define UCXP2P_P2P_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with -fvisibility=hidden; every declaration of this
 * header is part of the exported API. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define UCXP2P_VERSION_MAJOR 0
#define UCXP2P_VERSION_MINOR 1

/* ---------------------------------------------------------------- status */

typedef enum {
    P2P_OK                  =   0,
    P2P_IN_PROGRESS         =   1,  /**< not finished yet */
    P2P_ERR_INVALID_PARAM   =  -1,  /**< null pointer, bad value, bad flag */
    P2P_ERR_INVALID_HANDLE  =  -2,  /**< handle never created, destroyed,
                                         context finalized (use after
                                         finalize, double finalize), or
                                         created before a fork() (in the
                                         child) */
    P2P_ERR_NO_MEMORY       =  -3,
    P2P_ERR_NOT_REGISTERED  =  -4,  /**< (buffer, length) not inside the given
                                         registration */
    P2P_ERR_BAD_RANK        =  -5,  /**< peer rank outside [0, size) */
    P2P_ERR_TRUNCATED       =  -6,  /**< message longer than the receive */
    P2P_ERR_PEER_FAILURE    =  -7,  /**< peer died, became unreachable, or
                                         shut its communicator down */
    P2P_ERR_CANCELED        =  -8,  /**< canceled before it finished
                                         (p2p_comm_shutdown,
                                         p2p_comm_cancel_recv) */
    P2P_ERR_TIMEOUT         =  -9,
    P2P_ERR_BUSY            = -10,  /**< resource still in use (e.g. memory
                                         with operations in flight) */
    P2P_ERR_SHUTDOWN        = -11,  /**< communicator was shut down */
    P2P_ERR_BOOTSTRAP       = -12,  /**< wireup failed (see log) */
    P2P_ERR_UNSUPPORTED     = -13,
    P2P_ERR_TRANSPORT       = -14,  /**< other UCX failure (see log) */
    P2P_ERR_NO_DEVICE       = -15,  /**< no usable transport/device */
    P2P_ERR_INTERRUPTED     = -16   /**< p2p_comm_wait woken by p2p_comm_signal */
} p2p_status_t;

/** Static, human-readable text for a status; never NULL. */
const char *p2p_status_string(p2p_status_t status);

/* ---------------------------------------------------------------- handles */

typedef struct p2p_context   *p2p_context_h;
typedef struct p2p_bootstrap *p2p_bootstrap_h;
typedef struct p2p_comm      *p2p_comm_h;
typedef struct p2p_mem       *p2p_mem_h;

/* ---------------------------------------------------------------- config */

typedef enum {
    P2P_PROGRESS_ADAPTIVE = 0, /**< spin P2P_SPIN_US after activity, then
                                    sleep on the worker's event fd (default) */
    P2P_PROGRESS_BUSY     = 1, /**< progress thread never sleeps */
    P2P_PROGRESS_EVENT    = 2  /**< sleep on the event fd whenever idle */
} p2p_progress_mode_t;

/**
 * Which calls may run at once on a context's objects (P2P_THREAD_MODE).
 */
typedef enum {
    /** Any thread may call any function at any time (default). A progress
     *  thread (p2p_progress_mode_t) completes operations between calls. */
    P2P_THREAD_MULTI      = 0,
    /** The application makes at most one call at a time into the context
     *  and its communicators and registrations, from any thread (like
     *  MPI_THREAD_SERIALIZED); calls in different threads must be ordered
     *  by the application's own synchronization. Concurrent calls in this
     *  mode are undefined behaviour. Operations progress inside the
     *  application's calls (p2p_comm_poll on an empty queue, p2p_comm_wait,
     *  a p2p_mem_deregister that finds its registration busy);
     *  a backstop thread progresses only while the application has made no
     *  call between two of its looks (1 ms apart, backing off to 16 ms while
     *  the application keeps calling; so the rank still answers its peers
     *  and detects dead ones while it computes). The per-message path
     *  takes no locked instruction. progress_mode then chooses how
     *  p2p_comm_wait idles: busy spins, adaptive spins P2P_SPIN_US after the
     *  last activity, then like event sleeps on the worker's event fd. */
    P2P_THREAD_SERIALIZED = 1
} p2p_thread_mode_t;

enum {
    P2P_CONFIG_FIELD_PROGRESS_MODE   = 1u << 0,
    P2P_CONFIG_FIELD_SPIN_US         = 1u << 1,
    P2P_CONFIG_FIELD_PEER_TIMEOUT_MS = 1u << 2,
    P2P_CONFIG_FIELD_LOG_LEVEL       = 1u << 3,
    P2P_CONFIG_FIELD_LOCAL_RANK      = 1u << 4, /**< local_rank and local_size */
    P2P_CONFIG_FIELD_THREAD_MODE     = 1u << 5
};

typedef enum {
    P2P_LOG_ERROR = 0, P2P_LOG_WARN, P2P_LOG_INFO, P2P_LOG_DEBUG, P2P_LOG_TRACE
} p2p_log_level_t;

/**
 * Context configuration. Fields not named in field_mask take their value from
 * the P2P_* environment variables (see p2p_config_print), else the default.
 */
typedef struct {
    uint64_t            field_mask;
    p2p_progress_mode_t progress_mode;   /**< P2P_PROGRESS */
    uint32_t            spin_us;         /**< P2P_SPIN_US */
    uint32_t            peer_timeout_ms; /**< P2P_PEER_TIMEOUT_MS */
    p2p_log_level_t     log_level;       /**< P2P_LOG_LEVEL */
    /** This process' rank among the ranks on its host, and their number,
     *  for the rail plan (p2p_topo.h). Without this field they come from the
     *  launcher's variables (P2P_LOCAL_RANK, LOCAL_RANK, OpenMPI, MPICH,
     *  Slurm, PMIx). Pass p2p_bootstrap_query's local_rank/local_size when
     *  the bootstrap is created first and computed them (tcp bootstrap
     *  without LOCAL_RANK). local_rank < local_size, local_size >= 1. */
    uint32_t            local_rank;
    uint32_t            local_size;
    p2p_thread_mode_t   thread_mode;     /**< P2P_THREAD_MODE */
} p2p_config_t;

/**
 * Print every P2P_* variable with its default, current value and help text,
 * then any variable of the environment that looks like a misspelled one.
 * Errors: P2P_ERR_INVALID_PARAM if stream is NULL; P2P_ERR_NO_MEMORY
 * (nothing printed). Write errors on stream are not reported: check it
 * with ferror, as after fprintf.
 */
p2p_status_t p2p_config_print(FILE *stream);

/**
 * The local rank and size a context created now would plan its rails (and a
 * GPU choice made from them) for: from the environment, in this order,
 * P2P_LOCAL_RANK/P2P_LOCAL_WORLD_SIZE, LOCAL_RANK/LOCAL_WORLD_SIZE,
 * OMPI_COMM_WORLD_LOCAL_RANK/_SIZE, MPI_LOCALRANKID/MPI_LOCALNRANKS,
 * SLURM_LOCALID with SLURM's task counts, PMIX_LOCAL_RANK/PMIX_LOCAL_SIZE
 * (a pair is used only when both parse and rank < size). When none does,
 * *local_rank and *local_size are 0 (a context then plans as rank 0 of 1). A
 * context given p2p_config_t's local_rank plans for that instead.
 * Errors: P2P_ERR_INVALID_PARAM if a pointer is NULL; P2P_ERR_NO_MEMORY.
 */
p2p_status_t p2p_local_rank_query(uint32_t *local_rank, uint32_t *local_size);

/* ---------------------------------------------------------------- context */

/**
 * Create a context: UCP context (TAG feature, WAKEUP unless busy mode),
 * one worker and its progress thread.
 * config may be NULL (everything from the environment).
 * Errors: P2P_ERR_INVALID_PARAM (context_p NULL, bad field value, bad P2P_*
 * variable), P2P_ERR_NO_DEVICE (no usable transport or device: UCX_TLS
 * names none this machine has, or only ones that carry no messages -- self,
 * cma, knem -- with which no endpoint works; logged), P2P_ERR_TRANSPORT
 * (UCX could not start),
 * P2P_ERR_UNSUPPORTED (a child forked while UCX's async thread ran, with a
 * UCX_TLS that allows tcp or InfiniBand: see fork() above; logged),
 * P2P_ERR_NO_MEMORY.
 */
p2p_status_t p2p_context_create(const p2p_config_t *config,
                                p2p_context_h *context_p);

/**
 * Destroy a context. Communicators still alive are shut down and destroyed
 * (their pending operations are canceled; undelivered completions are
 * dropped); registrations are released. Endpoints of destroyed
 * communicators still waiting for their peers to close theirs (the close
 * handshake, see p2p_comm_destroy) are closed, once what was sent on them
 * left: this waits while such a peer, alive, takes in nothing, at most
 * P2P_PEER_TIMEOUT_MS (then it closes them anyway and logs a warning).
 * The handle becomes invalid.
 * Errors: P2P_ERR_INVALID_HANDLE (unknown or already finalized context).
 */
p2p_status_t p2p_context_destroy(p2p_context_h context);

/* ---------------------------------------------------------------- bootstrap */

typedef enum {
    P2P_BOOTSTRAP_AUTO   = 0, /**< P2P_BOOTSTRAP, else env/TCP when RANK,
                                   WORLD_SIZE and MASTER_ADDR are all set,
                                   else PMIx when launched by a PMIx server,
                                   else env/TCP when RANK and WORLD_SIZE are
                                   set, else single -- except under an MPI
                                   launcher that started several ranks
                                   (OMPI_COMM_WORLD_SIZE, PMI_SIZE or
                                   SLURM_STEP_NUM_TASKS > 1):
                                   P2P_ERR_UNSUPPORTED, logged */
    P2P_BOOTSTRAP_TCP    = 1, /**< MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE */
    P2P_BOOTSTRAP_SINGLE = 2, /**< one process, rank 0 of 1 */
    P2P_BOOTSTRAP_PMIX   = 3  /**< PMIx (srun --mpi=pmix, mpirun);
                                   P2P_ERR_UNSUPPORTED outside a PMIx launcher
                                   or in a build without PMIx */
} p2p_bootstrap_type_t;

/**
 * Join the job described by the environment (collective over the job).
 * Errors: P2P_ERR_INVALID_PARAM (bad type, NULL bootstrap_p, malformed
 * variables), P2P_ERR_UNSUPPORTED (type not available in this build; AUTO
 * under an MPI launcher with neither PMIx nor the torchrun variables),
 * P2P_ERR_BOOTSTRAP (rendezvous failed: bad token, a disagreement with
 * rank 0, peer gone, port taken), P2P_ERR_TIMEOUT (P2P_BOOTSTRAP_TIMEOUT_MS
 * passed, e.g. rank 0 never answered), P2P_ERR_NO_MEMORY.
 */
p2p_status_t p2p_bootstrap_create(p2p_bootstrap_type_t type,
                                  p2p_bootstrap_h *bootstrap_p);

/** Errors: P2P_ERR_INVALID_HANDLE. */
p2p_status_t p2p_bootstrap_destroy(p2p_bootstrap_h bootstrap);

typedef struct {
    uint32_t    rank;
    uint32_t    size;
    uint32_t    local_rank;
    uint32_t    local_size;
    const char *name;          /**< "tcp", "single", ... (static string) */
} p2p_bootstrap_info_t;

/** Fixed at creation: answers at once, also while another thread is in
 *  p2p_bootstrap_barrier or p2p_comm_create on the same bootstrap.
 *  Errors: P2P_ERR_INVALID_HANDLE, P2P_ERR_INVALID_PARAM (info_p NULL). */
p2p_status_t p2p_bootstrap_query(p2p_bootstrap_h bootstrap,
                                 p2p_bootstrap_info_t *info_p);

/** Block until every rank of the job called it. A rank that left the job
 *  (exited, destroyed its bootstrap) makes it fail, never return P2P_OK.
 *  Under the PMIx bootstrap (srun, mpirun) each collective costs more than
 *  the one before (PMIx carries every key committed so far; 2 ranks: 500
 *  barriers in a row took 2.3-2.6 s, 1000 19-20 s, docs/WIREUP.md): not for
 *  every step of a training loop -- a message over a communicator serves
 *  there.
 *  Errors: P2P_ERR_INVALID_HANDLE, P2P_ERR_BOOTSTRAP, P2P_ERR_TIMEOUT,
 *  P2P_ERR_NO_MEMORY. */
p2p_status_t p2p_bootstrap_barrier(p2p_bootstrap_h bootstrap);

/* ---------------------------------------------------------------- comm */

/**
 * Create a communicator of every rank of the bootstrap (collective: every
 * rank calls it, in the same order relative to other p2p_comm_create calls
 * on the same bootstrap). Worker addresses are exchanged once; endpoints are
 * created lazily, the first time an operation names a peer (send or receive),
 * so memory and setup time grow with the peers actually used, not with the
 * job size. At most 256 communicators may be alive per context.
 * The bootstrap must outlive the call only, not the communicator.
 * Errors: P2P_ERR_INVALID_HANDLE, P2P_ERR_INVALID_PARAM (comm_p NULL; this
 * rank's address for the exchange larger than its P2P_BOOTSTRAP_MAX_MSG),
 * P2P_ERR_BOOTSTRAP, P2P_ERR_NO_MEMORY, P2P_ERR_BUSY (no communicator id
 * free on every rank; every rank of the job gets it together),
 * P2P_ERR_TIMEOUT, P2P_ERR_UNSUPPORTED (the bootstrap reports more than
 * 2^18 ranks -- see the tag layout --, no rank, or this rank outside its
 * job; refused before any exchange). Creates over different bootstraps may run on one context at
 * once, from different threads (P2P_THREAD_MULTI): each holds the ids it
 * offers until its ranks chose one, so they never take the same id. One
 * that finds no id free on every rank while another held some exchanges
 * again, after a short random pause, until the ids come free; past
 * P2P_BOOTSTRAP_TIMEOUT_MS of that (60 s for a single process, which
 * ignores the variable), BUSY.
 */
p2p_status_t p2p_comm_create(p2p_context_h context, p2p_bootstrap_h bootstrap,
                             p2p_comm_h *comm_p);

typedef struct {
    uint32_t rank;
    uint32_t size;
    uint32_t local_rank;
    uint32_t local_size;
    uint32_t id;          /**< communicator id in the tag (bits 63..56) */
} p2p_comm_info_t;

/** Errors: P2P_ERR_INVALID_HANDLE, P2P_ERR_INVALID_PARAM. */
p2p_status_t p2p_comm_query(p2p_comm_h comm, p2p_comm_info_t *info_p);

/**
 * Cancel every pending operation: each gets one completion with
 * P2P_ERR_CANCELED (or its real status if it finished first). Later posts
 * fail with P2P_ERR_SHUTDOWN; the queues stay readable. Idempotent.
 * Then this rank says goodbye to the peers it has an endpoint to (it named
 * them in an operation) and to those that have one to it (they named it;
 * also when that comes later: while this communicator is shut down, or,
 * once it is destroyed, from its context while that lives): on their side,
 * operations naming this rank that were still waiting (receives not yet
 * matched, sends not yet received) complete with P2P_ERR_PEER_FAILURE, and
 * later posts naming it fail with P2P_ERR_PEER_FAILURE -- except receives
 * of messages that had already arrived, which still succeed. Messages that
 * reach this communicator after it shut down are dropped: at its destroy;
 * those that come later (a peer had not seen the goodbye yet) by the
 * context's periodic work (every P2P_PEER_TIMEOUT_MS / 4, for 4 x
 * P2P_PEER_TIMEOUT_MS), by the destroy of the next one with its id, or
 * at the context's destroy.
 * What cannot be cancelled at once (a transfer UCX is moving; a split
 * single-copy receive whose sender may still write into it) is waited for,
 * up to 2 x P2P_PEER_TIMEOUT_MS + 1 s. Past that deadline (a stopped or
 * hung peer) each such operation completes with P2P_ERR_TIMEOUT, so every
 * operation has its completion when this returns; the peer may still
 * touch that buffer, so its registration stays busy (p2p_mem_deregister
 * answers P2P_ERR_BUSY) until the peer lets go of it (a split receive:
 * its sender reports, or its process is gone -- the context looks about
 * every P2P_PEER_TIMEOUT_MS / 4 while it progresses, also after
 * p2p_comm_destroy -- or the context is destroyed).
 * Errors: P2P_ERR_INVALID_HANDLE.
 */
p2p_status_t p2p_comm_shutdown(p2p_comm_h comm);

/**
 * Take back receives (as MPI_Cancel does): every receive posted on comm
 * from peer with tensor_id that no message has matched yet completes in
 * the receive queue with P2P_ERR_CANCELED and 0 bytes before this call
 * returns (P2P_ERR_PEER_FAILURE instead if peer is known to have failed),
 * and *count_p (if not NULL) is set to how many did. (With UCX's hardware
 * tag matching, UCX_RC_TM_ENABLE=y, a receive the NIC holds completes so
 * only after the call and is not counted.) A receive a message has
 * already matched -- its data or its single-copy request arrived -- is not
 * canceled: it completes as it would have, so every receive still gets
 * exactly one completion. A message that arrives later waits for the next
 * receive that matches it, as any message that comes before its receive
 * (a send that completes only once received -- see p2p_comm_send -- waits
 * with it, until such a receive or this rank's shutdown). Sends cannot be
 * canceled (p2p_comm_shutdown ends them). On a communicator that was shut
 * down nothing is left to cancel: P2P_OK, *count_p 0.
 * Errors: P2P_ERR_INVALID_HANDLE, P2P_ERR_BAD_RANK (peer not below the
 * communicator's size).
 */
p2p_status_t p2p_comm_cancel_recv(p2p_comm_h comm, uint32_t peer, uint32_t tensor_id,
                                  size_t *count_p);

/**
 * Shut down (as above) and free the communicator; completions not yet
 * popped are discarded. Its endpoints are flushed (the peer has every byte
 * sent to it), then closed by force, so their connections are released.
 * With P2P_CLOSE_HANDSHAKE on (the default), an endpoint whose peer still
 * holds its own in this communicator is not closed yet: the context keeps
 * it open until the peer closes that one (destroys its communicator), the
 * peer fails, or p2p_context_destroy (README, Peer failure). An
 * endpoint not flushed within P2P_PEER_TIMEOUT_MS (a peer that is stopped,
 * not dead) is closed all the same with a warning, and one whose close has
 * not ended within 2 x P2P_PEER_TIMEOUT_MS + 1 s is left to UCX with a
 * warning, and the call returns: nothing UCX does with it later reaches
 * this communicator. After a shutdown that gave up waiting, the deadline
 * is not waited again; the operations it completed with P2P_ERR_TIMEOUT
 * release their registrations once UCX ends their requests.
 * Errors: P2P_ERR_INVALID_HANDLE.
 */
p2p_status_t p2p_comm_destroy(p2p_comm_h comm);

/* ---------------------------------------------------------------- memory */

/**
 * Register [address, address + length) with UCX (ucp_mem_map).
 * Host memory (pageable, or pinned with cudaMallocHost) and CUDA managed
 * memory (cudaMallocManaged) always work. CUDA device memory (cudaMalloc)
 * is moved by UCX where UCX was built with CUDA (`ucx_info -d` lists cuda
 * transports), and same-host single copy is off in that context's
 * communicators. With a UCX without CUDA (Debian's), the registration gets
 * a host copy of the same size (page-locked where the driver allows) that
 * UCX moves instead: a send's bytes are copied from the device when it is
 * posted, a receive's to the device before its completion is queued
 * (synchronous cuMemcpy calls in the memory's CUDA context). The device
 * data must be ready when the send is posted, as with any UCX.
 * P2P_CUDA_STAGING=off refuses device memory there instead. Where the
 * process has loaded the CUDA driver, the address is checked with
 * cuPointerGetAttribute.
 * Host memory must be mapped in this process over the whole range (read
 * in /proc/self/maps at registration); a range with a page mapped
 * read-only registers, and serves sends only: a receive into any part of
 * it is refused.
 * Errors: P2P_ERR_INVALID_HANDLE, P2P_ERR_INVALID_PARAM (NULL address or
 * mem_p, zero length, address + length past the end of the address space;
 * or, logged, a page of host memory in the range not mapped or mapped
 * without read access: PROT_NONE, or execute only), P2P_ERR_UNSUPPORTED
 * (CUDA device memory, a UCX without CUDA and P2P_CUDA_STAGING=off, or no
 * CUDA context for it; logged), P2P_ERR_TRANSPORT (UCX refused),
 * P2P_ERR_NO_MEMORY (also: no host memory for the copy of device memory).
 */
p2p_status_t p2p_mem_register(p2p_context_h context, void *address,
                              size_t length, p2p_mem_h *mem_p);

/**
 * Release a registration.
 * Errors: P2P_ERR_INVALID_HANDLE, P2P_ERR_BUSY (operations using it are still
 * in flight; nothing is released). An operation naming a failed peer that
 * completed with P2P_ERR_PEER_FAILURE because UCX had not ended it within
 * P2P_PEER_TIMEOUT_MS keeps its registration in use (BUSY) until UCX ends
 * it, which may be never (README, "Peer failure"); so does one
 * p2p_comm_shutdown completed with P2P_ERR_TIMEOUT (see there). In
 * P2P_THREAD_SERIALIZED mode a call that finds the registration busy
 * progresses the context once and looks again, so that an application
 * polling this call alone lets go what the context's own work frees (a
 * split receive whose sender died); in multi mode the progress thread
 * does that work.
 */
p2p_status_t p2p_mem_deregister(p2p_mem_h mem);

/* ---------------------------------------------------------------- transfer */

/**
 * Post a send of length bytes at buffer to peer, tagged tensor_id.
 * (buffer, length) must lie inside mem. length may be 0 (buffer may then
 * be any address inside mem, or its end). user_context comes back in the
 * completion.
 * The send's completion means the buffer may be reused. It may come before
 * the peer posted its receive (small messages, UCX's eager protocol) or
 * only after (rendezvous, same-host single copy, and with
 * P2P_CMA_THRESH=auto one send in about each MiB of 16-256 KiB sends to a
 * same-host peer, which is sent synchronously to time the path): never
 * wait for a send's completion before posting the receive it pairs with.
 * Errors: P2P_ERR_INVALID_HANDLE (comm or mem), P2P_ERR_INVALID_PARAM (NULL
 * buffer, mem of another context; for a receive also mem mapped read-only
 * when registered, logged), P2P_ERR_NOT_REGISTERED, P2P_ERR_BAD_RANK,
 * P2P_ERR_SHUTDOWN, P2P_ERR_PEER_FAILURE (peer already known dead, its
 * process found gone (same host) before connecting to it, or UCX found it
 * gone or unreachable creating the endpoint: nothing was posted, and the
 * next post to it tries again), P2P_ERR_TRANSPORT (the endpoint to peer
 * could not be created, or the copy from staged device memory failed: see
 * p2p_mem_register; nothing was posted), P2P_ERR_NO_MEMORY.
 */
p2p_status_t p2p_comm_send(p2p_comm_h comm, uint32_t peer, uint32_t tensor_id,
                           const void *buffer, size_t length, p2p_mem_h mem,
                           void *user_context);

/**
 * Post a receive of at most length bytes from peer with tensor_id.
 * A longer message completes with P2P_ERR_TRUNCATED and nothing is written
 * past buffer + length (its send completes P2P_OK when UCX moved it, or
 * P2P_ERR_TRUNCATED when the library's own rendezvous did: same-host single
 * copy, or the P2P_TCP_BULK path). Into staged device memory
 * (p2p_mem_register), a failed copy to the device completes the receive
 * with P2P_ERR_TRANSPORT.
 * After a receive that completes with an error, [buffer, buffer + length)
 * holds unspecified bytes (part of the message, or the library's own
 * single-copy request); only a P2P_OK receive's first bytes are defined.
 * A receive whose message has already arrived (the first post naming peer
 * progresses the worker once to take in what the transport delivered) is
 * posted even when peer cannot be connected to any more: it succeeds
 * although peer has since left or died.
 * Errors: as p2p_comm_send.
 */
p2p_status_t p2p_comm_recv(p2p_comm_h comm, uint32_t peer, uint32_t tensor_id,
                           void *buffer, size_t length, p2p_mem_h mem,
                           void *user_context);

/** One block of a batch call. */
typedef struct {
    uint32_t  peer;
    uint32_t  tensor_id;
    void     *buffer;
    size_t    length;
    p2p_mem_h mem;
    void     *user_context;
} p2p_block_t;

/**
 * Post count blocks in one call (as seed P2PSendBatch/P2PRecvBatch). Every
 * block is validated first, in two rounds: the arguments of every block
 * (its registration, buffer and length, and a peer rank within the world:
 * P2P_ERR_BAD_RANK), then the peer of every block (a failed peer, an
 * endpoint that cannot be created). If one is bad, nothing is posted, the
 * status of the first block found bad is returned and *bad_index_p (if
 * not NULL) is set to its index (so a bad argument in a later block is
 * reported before a failed peer in an earlier one). Otherwise each block produces its own completion entry.
 * An error that concerns no block (the communicator's handle, blocks NULL,
 * P2P_ERR_SHUTDOWN) leaves *bad_index_p untouched. Receive blocks from a
 * peer that cannot be connected to pass the check when a message from it
 * with their tensor_id has already arrived (as p2p_comm_recv); blocks that
 * message does not match (more blocks than arrived messages) then complete
 * with P2P_ERR_PEER_FAILURE instead of waiting forever.
 * Errors: as p2p_comm_send (P2P_ERR_NO_MEMORY: the batch does not fit in
 * memory, found before any block is checked, *bad_index_p untouched;
 * nothing was posted), plus P2P_ERR_INVALID_PARAM (blocks NULL with
 * count > 0).
 */
p2p_status_t p2p_comm_send_batch(p2p_comm_h comm, const p2p_block_t *blocks,
                                 size_t count, size_t *bad_index_p);
p2p_status_t p2p_comm_recv_batch(p2p_comm_h comm, const p2p_block_t *blocks,
                                 size_t count, size_t *bad_index_p);

/* ---------------------------------------------------------------- completions */

typedef enum {
    P2P_QUEUE_SEND = 0,
    P2P_QUEUE_RECV = 1
} p2p_queue_t;

typedef struct {
    void        *user_context;
    uint32_t     peer;
    uint32_t     tensor_id;
    uint64_t     bytes;      /**< bytes actually transferred */
    p2p_status_t status;     /**< P2P_OK or a negative error */
    uint32_t     reserved;
} p2p_completion_t;

/**
 * Pop up to max entries from a queue without blocking (an empty poll may
 * yield the CPU once to a library thread: README, "Large messages over
 * tcp"); *count_p is set to the number popped (possibly 0), in completion
 * order.
 * Errors: P2P_ERR_INVALID_HANDLE, P2P_ERR_INVALID_PARAM (bad queue,
 * entries/count_p NULL, max 0), P2P_ERR_NO_MEMORY (only on a thread's
 * first call into the library, for its lookup record; nothing popped).
 */
p2p_status_t p2p_comm_poll(p2p_comm_h comm, p2p_queue_t queue,
                           p2p_completion_t *entries, size_t max,
                           size_t *count_p);

/**
 * As p2p_comm_poll, but block until at least one entry is available or
 * timeout_ms passes (-1: forever, 0: do not block).
 * Errors: P2P_ERR_INVALID_HANDLE, P2P_ERR_INVALID_PARAM (as p2p_comm_poll,
 * and a timeout_ms below -1), P2P_ERR_TIMEOUT (nothing arrived in time;
 * *count_p is 0), P2P_ERR_SHUTDOWN (the communicator was shut down or
 * destroyed -- also while this call waited -- and every entry has been
 * popped: nothing can arrive any more; *count_p is 0) and
 * P2P_ERR_INTERRUPTED (p2p_comm_signal on this queue, see there; *count_p
 * is 0). Entries, then P2P_ERR_SHUTDOWN, take precedence over a signal.
 */
p2p_status_t p2p_comm_wait(p2p_comm_h comm, p2p_queue_t queue,
                           p2p_completion_t *entries, size_t max,
                           size_t *count_p, int timeout_ms);

/**
 * Wake the threads blocked in p2p_comm_wait on queue: each returns
 * P2P_ERR_INTERRUPTED (or the entries that arrived meanwhile). With no
 * thread blocked, the signal is kept: the next p2p_comm_wait on queue that
 * finds no entry returns P2P_ERR_INTERRUPTED at once, even with timeout 0
 * (signals kept count as one; a wait that returns entries leaves it kept).
 * For a thread that waits on completions and must also react to the
 * application's own events (stop, new work): set the event, then signal.
 * May be called from any thread at any time, in every thread mode (also
 * while another thread is inside a call under P2P_THREAD_SERIALIZED), and
 * on a communicator that was shut down.
 * Errors: P2P_ERR_INVALID_HANDLE, P2P_ERR_INVALID_PARAM (bad queue).
 */
p2p_status_t p2p_comm_signal(p2p_comm_h comm, p2p_queue_t queue);

/**
 * Number of posted operations that have not produced a completion yet.
 * Errors: P2P_ERR_INVALID_HANDLE, P2P_ERR_INVALID_PARAM.
 */
p2p_status_t p2p_comm_pending(p2p_comm_h comm, p2p_queue_t queue,
                              size_t *count_p);

/* ---------------------------------------------------------------- info */

/** Library version string, e.g. "0.1.0". */
const char *p2p_version(void);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* UCXP2P_P2P_H */
