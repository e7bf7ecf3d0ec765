/*
 * Helpers shared by the scenarios of mp_rank (one rank of a multi-process
 * test started by p2prun). Public API only. Every failure prints a precise
 * reason to stderr and ends the process with status 1 (MP_FAIL), so p2prun
 * reports it; nothing here waits without a deadline.
 */
#ifndef UCXP2P_TEST_MP_COMMON_H
#define UCXP2P_TEST_MP_COMMON_H

#include <ucxp2p/p2p.h>

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mp {

/** Print "mp_rank[<rank>] <scenario>: FAIL <file>:<line>: <msg>" and _exit(1). */
[[noreturn]] void fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define MP_FAIL(...) ::mp::fail_at(__FILE__, __LINE__, __VA_ARGS__)
#define MP_CHECK(cond, ...)                                                    \
    do {                                                                       \
        if (!(cond)) {                                                         \
            MP_FAIL(__VA_ARGS__);                                              \
        }                                                                      \
    } while (0)
/** A call that must return P2P_OK. */
#define MP_OK(call)                                                            \
    do {                                                                       \
        p2p_status_t mp_st_ = (call);                                          \
        if (mp_st_ != P2P_OK) {                                                \
            MP_FAIL("%s returned %d (%s)", #call, static_cast<int>(mp_st_),    \
                    p2p_status_string(mp_st_));                                \
        }                                                                      \
    } while (0)
/** A call that must return exactly `want`. */
#define MP_EXPECT_STATUS(want, call)                                           \
    do {                                                                       \
        p2p_status_t mp_st_ = (call);                                          \
        if (mp_st_ != (want)) {                                                \
            MP_FAIL("%s returned %d (%s), expected %d (%s)", #call,            \
                    static_cast<int>(mp_st_), p2p_status_string(mp_st_),       \
                    static_cast<int>(want), p2p_status_string(want));          \
        }                                                                      \
    } while (0)

/** Name used in failure messages ("mp_rank[3] alltoall"). */
void set_identity(int rank, const char *scenario);
/** Printf to stdout with the identity prefix, flushed at once. */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0);
/** State letter of /proc/PID/stat ('T': stopped), or '?' */
char proc_state(pid_t pid);
/** Wait until pid is stopped ('T'), failing after 20 s. */
void wait_stopped(pid_t pid);

/** Deterministic payload byte of tensor (src -> dst, tensor_id) at index i. */
inline uint8_t pattern_byte(uint32_t src, uint32_t dst, uint32_t tid, size_t i) {
    uint32_t x = (src * 0x9E3779B1u) ^ (dst * 0x85EBCA77u) ^ (tid * 0xC2B2AE3Du);
    x ^= static_cast<uint32_t>(i) * 0x27D4EB2Fu;
    x ^= static_cast<uint32_t>(i >> 32) * 0x165667B1u;
    x ^= x >> 15;
    return static_cast<uint8_t>(x ^ (x >> 8));
}
void fill_pattern(uint8_t *p, size_t n, uint32_t src, uint32_t dst, uint32_t tid);
/** Fail with the first differing index unless p holds the pattern. */
void check_pattern(const uint8_t *p, size_t n, uint32_t src, uint32_t dst,
                   uint32_t tid, const char *what);

/** Context + bootstrap + communicator of this rank (RAII; finish() checks). */
class Rank {
public:
    Rank();
    ~Rank();
    Rank(const Rank &) = delete;
    Rank &operator=(const Rank &) = delete;

    p2p_context_h ctx() const { return ctx_; }
    p2p_comm_h comm() const { return comm_; }
    /** The bootstrap, for scenarios that hold several communicators. */
    p2p_bootstrap_h bootstrap() const { return bs_; }
    uint32_t rank() const { return info_.rank; }
    uint32_t size() const { return info_.size; }
    void barrier();
    /** Destroy the communicator only (bootstrap and context stay). */
    void destroy_comm();
    /** Destroy the communicator (unless destroy_comm did) and create a new
     *  one on the same context and bootstrap (collective). */
    void renew_comm();
    /** Destroy comm (unless destroy_comm did), bootstrap and context,
     *  failing on any error status. */
    void finish();

private:
    p2p_context_h ctx_ = nullptr;
    p2p_bootstrap_h bs_ = nullptr;
    p2p_comm_h comm_ = nullptr;
    p2p_comm_info_t info_{};
};

/** Which memory a RegBuf is: env follows MP_ALLOC (lib: p2p_mem_alloc,
 *  else heap); pages: an anonymous mapping of its own, which free_now
 *  unmaps (the heap may keep a freed block mapped). */
enum class Alloc { env, heap, lib, pages };

/** Page-aligned heap buffer registered with a context (RAII), or memory
 *  from p2p_mem_alloc (Alloc::lib, or MP_ALLOC=lib with Alloc::env). */
class RegBuf {
public:
    RegBuf(p2p_context_h ctx, size_t bytes, uint8_t fill, Alloc how = Alloc::env);
    ~RegBuf();
    RegBuf(const RegBuf &) = delete;
    RegBuf &operator=(const RegBuf &) = delete;

    uint8_t *data() const { return data_; }
    size_t size() const { return size_; }
    p2p_mem_h mem() const { return mem_; }
    /** Deregister now, failing unless P2P_OK. */
    void release();
    /** Give the memory back now (p2p_mem_free, or deregister and free),
     *  failing unless P2P_OK. */
    void free_now();

private:
    void give_back();  // free or unmap data_ (its registration is gone)

    uint8_t *data_ = nullptr;
    size_t size_ = 0;
    p2p_mem_h mem_ = nullptr;
    p2p_mem_h lib_mem_ = nullptr;  // p2p_mem_alloc's registration
    size_t pages_ = 0;             // Alloc::pages: the mapping's length
};

/** One expected transfer of a planned exchange. */
struct Xfer {
    bool is_send;
    uint32_t peer;
    uint32_t tid;
    size_t len;
    size_t off;       /**< offset in the send or receive arena */
};

struct ExchangeOptions {
    bool shuffle = false;     /**< post in a random order (seeded by rank) */
    bool unexpected = false;  /**< sends, barrier, pause, then receives */
    double deadline_s = 60;   /**< for all completions */
};

/**
 * Every rank in `peers` (this rank included when listed) exchanges one tensor
 * per (peer, tensor id, size) with this rank: tensor k uses tensor_id
 * tid_base + k and size sizes[k]. Verifies every completion field, exactly one
 * completion per op, every byte, and that pending counts drop to 0.
 */
void exchange(Rank &r, const std::vector<uint32_t> &peers,
              const std::vector<size_t> &sizes, uint32_t tid_base,
              const ExchangeOptions &opt);

/** Checks one completion of an op; the default wants P2P_OK, bytes == len. */
using CompletionCheck = void (*)(const Xfer &x, const p2p_completion_t &c);
void check_ok(const Xfer &x, const p2p_completion_t &c);

/**
 * Pop completions until every op of `ops` (user_context = ctx_of(index)) has
 * had exactly one, on the right queue with its peer and tensor id, each
 * passing `check`. Fails after deadline_s naming the missing ops.
 */
void collect(p2p_comm_h comm, const std::vector<Xfer> &ops, double deadline_s,
             CompletionCheck check = check_ok);

/** Two ranks, before rank 0 stops itself (SIGSTOP) for rank 1 to resume:
 *  rank 0 sends its pid (tensor 1) and waits for rank 1's go (tensor 3),
 *  through small (16 bytes). */
void send_pid_await_go(p2p_comm_h comm, const RegBuf &small);
/** Rank 1's side: receives the pid, sends the go; returns the pid. */
pid_t await_pid_send_go(p2p_comm_h comm, const RegBuf &small);

/** No completion left in either queue and both pending counts 0. */
void expect_quiet(p2p_comm_h comm);

/** Deregister mem once the library lets go of it (it answers P2P_ERR_BUSY
 *  until then); fails the scenario with "the registration of <what> stays
 *  busy" after limit_s. Each round first calls between (if set: e.g. a poll
 *  that drives progress in serialized mode), then sleeps poll_ms. Returns
 *  the seconds it took. */
double await_deregistered(p2p_mem_h mem, double limit_s, const char *what,
                          const std::function<void()> &between = {}, int poll_ms = 20);

/** Pop every entry available on a queue within wait_ms (one wait call). */
std::vector<p2p_completion_t> pop(p2p_comm_h comm, p2p_queue_t q, int wait_ms);

/** user_context <-> op index (index + 1, so no op uses NULL). */
inline void *ctx_of(size_t index) { return reinterpret_cast<void *>(index + 1); }
inline size_t index_of(void *uc) { return reinterpret_cast<uintptr_t>(uc) - 1; }

/** Environment variable as unsigned (default when unset). */
unsigned long env_ul(const char *name, unsigned long dflt);

/** A rank that kills itself must not die inside a UCX shared-memory send:
 *  that would wedge the receiver's FIFO for every sender (README, Peer
 *  failure; test/ucx/mm_wedge.sh), a UCX limit the kill scenarios do not
 *  test. So, before Rank is constructed, rank `victim` (by the launcher's
 *  RANK) takes P2P_THREAD_SERIALIZED: only its own calls progress UCX,
 *  except the backstop thread's, which takes over only once the rank has
 *  stayed out of the library for a while. It then dies by die_now. */
void serialize_victim(unsigned long victim);

/** The victim's death: it keeps calling (polling both queues) for ms, so
 *  its traffic moves in its own thread and the backstop stays out, then
 *  kill -9s itself right after a call returned. */
[[noreturn]] void die_now(p2p_comm_h comm, int ms);

/** With ctx, call the library without progressing its worker (a
 *  registration takes the worker lock), then sleep 1 ms: while it is
 *  called every millisecond, a serialized context's backstop thread never
 *  steps in. ctx null: sleep only. */
void stay_busy(p2p_context_h ctx);

/** Wait up to 30 s until path exists, stay_busy(ctx) meanwhile. */
void wait_for_file(const std::string &path, p2p_context_h ctx);

/** Create the (empty) file path: tells a rank waiting in wait_for_file. */
void create_file(const std::string &path);
/** Create path holding this process's pid (complete once it exists). */
void write_pid_file(const std::string &path);
/** The pid write_pid_file put in path. */
pid_t read_pid_file(const std::string &path);

} // namespace mp

#endif
