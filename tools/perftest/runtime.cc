#include "runtime.h"
#include "gpu_mem.h"

#include <ucxp2p/p2p_mem.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace perftest {

void report_error(uint32_t rank, const char *what, p2p_status_t st) {
    std::fprintf(stderr, "p2p_perftest: rank %u: %s: %s (%d)\n", rank, what,
                 p2p_status_string(st), static_cast<int>(st));
}

/* ------------------------------------------------------------ owners */

Context::~Context() {
    if (h_ != nullptr) {
        p2p_context_destroy(h_);
    }
}

p2p_status_t Context::create(const std::string &threads) {
    if (threads.empty()) {
        return p2p_context_create(nullptr, &h_);
    }
    p2p_config_t cfg = {};
    cfg.field_mask = P2P_CONFIG_FIELD_THREAD_MODE;
    cfg.thread_mode = threads == "serialized" ? P2P_THREAD_SERIALIZED : P2P_THREAD_MULTI;
    return p2p_context_create(&cfg, &h_);
}

Bootstrap::~Bootstrap() {
    if (h_ != nullptr) {
        p2p_bootstrap_destroy(h_);
    }
}

p2p_status_t Bootstrap::create() {
    // AUTO: PMIx under srun/mpirun, the env/TCP variables torchrun-style,
    // else one process. A launcher without a PMIx server is refused by the
    // library (P2P_ERR_UNSUPPORTED, with the variables to set instead).
    p2p_status_t st = p2p_bootstrap_create(P2P_BOOTSTRAP_AUTO, &h_);
    if (st != P2P_OK) {
        h_ = nullptr;
        return st;
    }
    return p2p_bootstrap_query(h_, &info_);
}

Comm::~Comm() { destroy(); }

p2p_status_t Comm::create(p2p_context_h ctx, p2p_bootstrap_h boot) {
    p2p_comm_h h = nullptr;
    p2p_status_t st = p2p_comm_create(ctx, boot, &h);
    if (st == P2P_OK) {
        destroy();
        h_ = h;
    }
    return st;
}

p2p_status_t Comm::destroy() {
    p2p_status_t st = P2P_OK;
    if (h_ != nullptr) {
        st = p2p_comm_destroy(h_);
        h_ = nullptr;
    }
    return st;
}

Buffer::~Buffer() {
    if (lib_) {
        p2p_mem_free(data_, mem_);
        return;
    }
    if (mem_ != nullptr) {
        p2p_mem_deregister(mem_);
    }
    if (mem_type_ != "host") {
        gpu_free(mem_type_, data_);
    } else {
        std::free(data_);
    }
}

p2p_status_t Buffer::create(p2p_context_h ctx, size_t bytes, bool lib,
                            const std::string &mem_type) {
    const size_t page = 4096;
    bytes = std::max<size_t>((bytes + page - 1) / page * page, page);
    void *p = nullptr;
    if (mem_type != "host") {
        std::string why;
        p = gpu_alloc(mem_type, bytes, &why);
        if (p == nullptr) {
            std::fprintf(stderr, "p2p_perftest: %s\n", why.c_str());
            return P2P_ERR_NO_MEMORY;
        }
        p2p_mem_h mem = nullptr;
        p2p_status_t st = p2p_mem_register(ctx, p, bytes, &mem);
        if (st != P2P_OK) {
            gpu_free(mem_type, p);
            return st;
        }
        data_ = static_cast<char *>(p);
        size_ = bytes;
        mem_ = mem;
        mem_type_ = mem_type;
        return P2P_OK;
    }
    if (lib) {
        p2p_mem_h mem = nullptr;
        p2p_status_t st = p2p_mem_alloc(ctx, bytes, -1, &p, &mem);
        if (st != P2P_OK) {
            return st;
        }
        std::memset(p, 0, bytes); /* first touch outside the timed loops */
        data_ = static_cast<char *>(p);
        size_ = bytes;
        mem_ = mem;
        lib_ = true;
        return P2P_OK;
    }
    if (posix_memalign(&p, page, bytes) != 0) {
        return P2P_ERR_NO_MEMORY;
    }
    std::memset(p, 0, bytes); /* first touch outside the timed loops */
    p2p_mem_h mem = nullptr;
    p2p_status_t st = p2p_mem_register(ctx, p, bytes, &mem);
    if (st != P2P_OK) {
        std::free(p);
        return st;
    }
    data_ = static_cast<char *>(p);
    size_ = bytes;
    mem_ = mem;
    return P2P_OK;
}

/* ------------------------------------------------------------ completions */

p2p_status_t Reaper::pop_into(p2p_queue_t q, p2p_completion_t *out,
                              size_t max, int timeout_ms, Tally *t,
                              size_t *got) {
    size_t n = 0;
    p2p_status_t st = (timeout_ms >= 0)
                          ? p2p_comm_wait(comm_, q, out, max, &n, timeout_ms)
                          : p2p_comm_poll(comm_, q, out, max, &n);
    if (st == P2P_ERR_TIMEOUT) {
        st = P2P_OK;
        n = 0;
    }
    if (st != P2P_OK) {
        return st;
    }
    for (size_t i = 0; i < n; ++i) {
        t->count++;
        if (out[i].status == P2P_OK) {
            t->bytes += out[i].bytes;
        } else {
            if (t->errors++ == 0) {
                t->first_error = out[i].status;
            }
        }
    }
    *got = n;
    return P2P_OK;
}

p2p_status_t Reaper::pop(p2p_queue_t q, uint64_t max, int timeout_ms,
                         Tally *t, uint64_t *got) {
    p2p_completion_t entries[64];
    size_t want = static_cast<size_t>(std::min<uint64_t>(max, 64));
    size_t n = 0;
    p2p_status_t st = pop_into(q, entries, want, timeout_ms, t, &n);
    *got = n;
    return st;
}

/** Poll (-1), or block up to 100 ms but not past the deadline. */
int Reaper::timeout_ms() const {
    if (!wait_) {
        return -1;
    }
    double left_ms = (deadline_us_ - now_us()) / 1000.0;
    return static_cast<int>(std::max(0.0, std::min(left_ms, 100.0)));
}

p2p_status_t Reaper::take(p2p_queue_t q, p2p_completion_t *out, size_t max,
                          size_t *n, Tally *t) {
    for (unsigned spins = 1;; ++spins) {
        p2p_status_t st = pop_into(q, out, max, timeout_ms(), t, n);
        if (st != P2P_OK || *n > 0) {
            return st;
        }
        if (((spins & 1023u) == 0 || wait_) && now_us() > deadline_us_) {
            return P2P_ERR_TIMEOUT;
        }
    }
}

p2p_status_t Reaper::reap(p2p_queue_t q, uint64_t n, Tally *t) {
    Tally none;
    return q == P2P_QUEUE_SEND ? reap_both(n, t, 0, &none)
                               : reap_both(0, &none, n, t);
}

p2p_status_t Reaper::reap_both(uint64_t ns, Tally *ts, uint64_t nr,
                               Tally *tr) {
    if (wait_ && ns > 0 && nr > 0) {
        /* Blocking: one queue, then the other. Every posted operation
         * completes without this thread (the library's progress thread
         * drives them while we block), so the order cannot deadlock.
         * Alternating short waits on both queues slept through entries
         * landing on the other one: a 1 ms nap per switch, 4 ms per window
         * of 16 KiB-64 KiB messages in bw --wait. */
        p2p_status_t st = reap_both(ns, ts, 0, tr);
        return st != P2P_OK ? st : reap_both(0, ts, nr, tr);
    }
    unsigned spins = 0;
    while (ns > 0 || nr > 0) {
        uint64_t got = 0;
        int timeout_ms = this->timeout_ms();
        if (nr > 0) {
            p2p_status_t st = pop(P2P_QUEUE_RECV, nr, timeout_ms, tr, &got);
            if (st != P2P_OK) {
                return st;
            }
            nr -= got;
        }
        if (ns > 0) {
            p2p_status_t st = pop(P2P_QUEUE_SEND, ns, timeout_ms, ts, &got);
            if (st != P2P_OK) {
                return st;
            }
            ns -= got;
        }
        if ((++spins & 1023u) == 0 || wait_) {
            if (now_us() > deadline_us_ && (ns > 0 || nr > 0)) {
                return P2P_ERR_TIMEOUT;
            }
        }
    }
    return P2P_OK;
}

/* ------------------------------------------------------------ process info */

uint64_t rss_bytes() {
    FILE *f = std::fopen("/proc/self/statm", "r");
    if (f == nullptr) {
        return 0;
    }
    unsigned long long size = 0, resident = 0;
    int n = std::fscanf(f, "%llu %llu", &size, &resident);
    std::fclose(f);
    return n == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE))
                  : 0;
}

uint64_t pinned_bytes() {
    FILE *f = std::fopen("/proc/self/status", "r");
    if (f == nullptr) {
        return 0;
    }
    char line[256];
    unsigned long long kb = 0;
    while (std::fgets(line, sizeof(line), f) != nullptr) {
        if (std::sscanf(line, "VmPin: %llu kB", &kb) == 1) {
            break;
        }
    }
    std::fclose(f);
    return kb * 1024;
}

} // namespace perftest
