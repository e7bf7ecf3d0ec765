/*
 * p2p_perftest runtime: RAII owners of the library handles, the registered
 * buffer pool, and completion reaping with a deadline (poll loop or wait).
 */
#ifndef UCXP2P_TOOLS_PERFTEST_RUNTIME_H
#define UCXP2P_TOOLS_PERFTEST_RUNTIME_H

#include "../common/meminfo.h"
#include "options.h"

#include <ucxp2p/p2p.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace perftest {

using Clock = std::chrono::steady_clock;

inline double now_us() {
    return std::chrono::duration<double, std::micro>(
               Clock::now().time_since_epoch()).count();
}

/** Print "p2p_perftest: rank R: what: status" to stderr. */
void report_error(uint32_t rank, const char *what, p2p_status_t st);

/* ------------------------------------------------------------ owners */

class Context {
public:
    Context() = default;
    ~Context();
    Context(const Context &) = delete;
    Context &operator=(const Context &) = delete;
    /** threads: "multi", "serialized", or empty (from the environment). */
    p2p_status_t create(const std::string &threads);
    p2p_context_h get() const { return h_; }

private:
    p2p_context_h h_ = nullptr;
};

class Bootstrap {
public:
    Bootstrap() = default;
    ~Bootstrap();
    Bootstrap(const Bootstrap &) = delete;
    Bootstrap &operator=(const Bootstrap &) = delete;
    /**
     * P2P_BOOTSTRAP_AUTO, then its query: PMIx under srun/mpirun, the
     * env/TCP variables torchrun-style (p2prun sets them), else one process.
     * A launcher without a PMIx server is the library's refusal
     * (P2P_ERR_UNSUPPORTED, logged with the variables to set instead).
     */
    p2p_status_t create();
    p2p_bootstrap_h get() const { return h_; }
    const p2p_bootstrap_info_t &info() const { return info_; }

private:
    p2p_bootstrap_h h_ = nullptr;
    p2p_bootstrap_info_t info_{};
};

class Comm {
public:
    Comm() = default;
    ~Comm();
    Comm(const Comm &) = delete;
    Comm &operator=(const Comm &) = delete;
    Comm(Comm &&o) noexcept : h_(o.h_) { o.h_ = nullptr; }
    p2p_status_t create(p2p_context_h ctx, p2p_bootstrap_h boot);
    p2p_status_t destroy();
    p2p_comm_h get() const { return h_; }

private:
    p2p_comm_h h_ = nullptr;
};

/** Page-aligned, pre-touched, registered host memory. */
class Buffer {
public:
    Buffer() = default;
    ~Buffer();
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
    /** lib: from p2p_mem_alloc instead of posix_memalign + register;
     *  mem_type cuda / cuda-managed: GPU memory (gpu_mem.h), registered. */
    p2p_status_t create(p2p_context_h ctx, size_t bytes, bool lib = false,
                        const std::string &mem_type = "host");
    char *data() const { return data_; }
    size_t size() const { return size_; }
    p2p_mem_h mem() const { return mem_; }

private:
    char *data_ = nullptr;
    size_t size_ = 0;
    p2p_mem_h mem_ = nullptr;
    bool lib_ = false;
    std::string mem_type_ = "host";
};

/* ------------------------------------------------------------ completions */

/** Totals gathered while reaping completions. */
struct Tally {
    uint64_t bytes = 0;
    uint64_t count = 0;
    uint64_t errors = 0;
    p2p_status_t first_error = P2P_OK;
};

/**
 * Pops completions until the wanted number arrived or the deadline passed.
 * Busy-polls p2p_comm_poll (the latency path: the caller drives progress),
 * or blocks in p2p_comm_wait when use_wait.
 */
class Reaper {
public:
    Reaper(p2p_comm_h comm, bool use_wait) : comm_(comm), wait_(use_wait) {}
    void set_deadline(double deadline_us) { deadline_us_ = deadline_us; }
    /** Reap `n` entries from `q`. P2P_ERR_TIMEOUT past the deadline. */
    p2p_status_t reap(p2p_queue_t q, uint64_t n, Tally *t);
    /** Reap ns send and nr receive entries, whichever come first. */
    p2p_status_t reap_both(uint64_t ns, Tally *ts, uint64_t nr, Tally *tr);
    /** Wait for at least one entry of `q` and return up to max of them in
     *  out (counted into t). P2P_ERR_TIMEOUT past the deadline. */
    p2p_status_t take(p2p_queue_t q, p2p_completion_t *out, size_t max,
                      size_t *n, Tally *t);

private:
    p2p_status_t pop(p2p_queue_t q, uint64_t max, int timeout_ms, Tally *t,
                     uint64_t *got);
    p2p_status_t pop_into(p2p_queue_t q, p2p_completion_t *out, size_t max,
                          int timeout_ms, Tally *t, size_t *got);
    int timeout_ms() const;
    p2p_comm_h comm_;
    bool wait_;
    double deadline_us_ = 0;
};

/* ------------------------------------------------------------ process info */

/** Resident set size in bytes (/proc/self/statm); 0 if unknown. */
uint64_t rss_bytes();
/** Pinned memory in bytes (VmPin of /proc/self/status); 0 if unknown. */
uint64_t pinned_bytes();
/** Memory a new allocation can use without swapping out others
 *  (tools/common/meminfo.h). */
using p2ptools::memory_available;

} // namespace perftest

#endif
