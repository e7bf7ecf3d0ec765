#include "mp_common.h"

#include <ucxp2p/p2p_mem.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <random>
#include <thread>
#include <sys/mman.h>
#include <unistd.h>

namespace mp {

namespace {
char g_identity[96] = "mp_rank[?]";
} // namespace

void set_identity(int rank, const char *scenario) {
    std::snprintf(g_identity, sizeof(g_identity), "mp_rank[%d] %s", rank,
                  scenario);
}

void fail_at(const char *file, int line, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "%s: FAIL %s:%d: %s\n", g_identity, file, line, msg);
    std::fflush(stderr);
    std::fflush(stdout);
    _exit(1);
}

void say(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    std::printf("%s: %s\n", g_identity, msg);
    std::fflush(stdout);
}

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

char proc_state(pid_t pid) {
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
    FILE *f = std::fopen(path, "r");
    if (f == nullptr) return '?';
    char buf[512] = {0};
    size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    const char *paren = std::strrchr(buf, ')');
    return (n > 0 && paren != nullptr && paren[1] == ' ') ? paren[2] : '?';
}

void wait_stopped(pid_t pid) {
    Clock::time_point t0 = Clock::now();
    while (proc_state(pid) != 'T') {
        MP_CHECK(seconds_since(t0) < 20, "pid %d never stopped", static_cast<int>(pid));
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

void serialize_victim(unsigned long victim) {
    if (env_ul("RANK", victim + 1) == victim) {
        setenv("P2P_THREAD_MODE", "serialized", 1);
    }
}

void die_now(p2p_comm_h comm, int ms) {
    const Clock::time_point t0 = Clock::now();
    p2p_completion_t e[64];
    size_t n = 0;
    do {
        for (p2p_queue_t q : {P2P_QUEUE_SEND, P2P_QUEUE_RECV}) {
            p2p_comm_poll(comm, q, e, 64, &n);  // entries dropped: it dies
        }
    } while (seconds_since(t0) * 1000 < ms);
    kill(getpid(), SIGKILL);
    std::this_thread::sleep_for(std::chrono::seconds(5));
    MP_FAIL("still alive after SIGKILL");
}

unsigned long env_ul(const char *name, unsigned long dflt) {
    const char *v = std::getenv(name);
    if (v == nullptr || *v == '\0') {
        return dflt;
    }
    char *end = nullptr;
    unsigned long x = std::strtoul(v, &end, 10);
    MP_CHECK(end != nullptr && *end == '\0', "bad value %s=%s", name, v);
    return x;
}

void fill_pattern(uint8_t *p, size_t n, uint32_t src, uint32_t dst,
                  uint32_t tid) {
    for (size_t i = 0; i < n; ++i) {
        p[i] = pattern_byte(src, dst, tid, i);
    }
}

void check_pattern(const uint8_t *p, size_t n, uint32_t src, uint32_t dst,
                   uint32_t tid, const char *what) {
    for (size_t i = 0; i < n; ++i) {
        uint8_t want = pattern_byte(src, dst, tid, i);
        if (p[i] != want) {
            MP_FAIL("%s: data mismatch (src %u dst %u tensor %u len %zu) at "
                    "byte %zu: got 0x%02x want 0x%02x",
                    what, src, dst, tid, n, i, p[i], want);
        }
    }
}

// ------------------------------------------------------------------ Rank

Rank::Rank() {
    MP_OK(p2p_context_create(nullptr, &ctx_));
    MP_OK(p2p_bootstrap_create(P2P_BOOTSTRAP_AUTO, &bs_));
    MP_OK(p2p_comm_create(ctx_, bs_, &comm_));
    MP_OK(p2p_comm_query(comm_, &info_));
    MP_CHECK(info_.size >= 1 && info_.rank < info_.size,
             "comm_query: rank %u size %u", info_.rank, info_.size);
    unsigned long env_rank = env_ul("RANK", info_.rank);
    unsigned long env_size = env_ul("WORLD_SIZE", info_.size);
    MP_CHECK(env_rank == info_.rank && env_size == info_.size,
             "comm_query says rank %u of %u, environment RANK=%lu "
             "WORLD_SIZE=%lu",
             info_.rank, info_.size, env_rank, env_size);
    MP_CHECK(info_.local_rank < info_.local_size &&
                 info_.local_size <= info_.size,
             "comm_query: local rank %u of %u", info_.local_rank,
             info_.local_size);
    MP_CHECK(info_.id < 256, "comm_query: id %u does not fit 8 bits",
             info_.id);
}

Rank::~Rank() {
    // Best effort when finish() was not reached (a failure already exited).
    if (comm_ != nullptr) {
        p2p_comm_destroy(comm_);
    }
    if (bs_ != nullptr) {
        p2p_bootstrap_destroy(bs_);
    }
    if (ctx_ != nullptr) {
        p2p_context_destroy(ctx_);
    }
}

void Rank::barrier() { MP_OK(p2p_bootstrap_barrier(bs_)); }

void Rank::destroy_comm() {
    MP_OK(p2p_comm_destroy(comm_));
    comm_ = nullptr;
}

void Rank::renew_comm() {
    if (comm_ != nullptr) destroy_comm();
    MP_OK(p2p_comm_create(ctx_, bs_, &comm_));
    MP_OK(p2p_comm_query(comm_, &info_));
}

void Rank::finish() {
    if (comm_ != nullptr) destroy_comm();
    MP_OK(p2p_bootstrap_destroy(bs_));
    bs_ = nullptr;
    MP_OK(p2p_context_destroy(ctx_));
    ctx_ = nullptr;
}

// ------------------------------------------------------------------ RegBuf

RegBuf::RegBuf(p2p_context_h ctx, size_t bytes, uint8_t fill, Alloc how)
    : size_(bytes) {
    size_t alloc = (std::max<size_t>(bytes, 1) + 4095) & ~size_t(4095);
    void *p = nullptr;
    if (how == Alloc::env) {
        const char *e = std::getenv("MP_ALLOC");
        how = e != nullptr && std::strcmp(e, "lib") == 0 ? Alloc::lib : Alloc::heap;
    }
    if (how == Alloc::lib) {
        MP_OK(p2p_mem_alloc(ctx, alloc, -1, &p, &mem_));
        lib_mem_ = mem_;
        data_ = static_cast<uint8_t *>(p);
        std::memset(data_, fill, alloc);
        return;
    }
    if (how == Alloc::pages) {
        p = mmap(nullptr, alloc, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        MP_CHECK(p != MAP_FAILED, "mmap of %zu B: %s", alloc, std::strerror(errno));
        pages_ = alloc;
    } else {
        MP_CHECK(posix_memalign(&p, 4096, alloc) == 0, "out of memory (%zu B)",
                 alloc);
    }
    data_ = static_cast<uint8_t *>(p);
    std::memset(data_, fill, alloc);
    MP_OK(p2p_mem_register(ctx, data_, std::max<size_t>(bytes, 1), &mem_));
}

RegBuf::~RegBuf() {
    if (lib_mem_ != nullptr) {
        p2p_mem_free(data_, lib_mem_);  // deregisters unless release() did
        return;
    }
    if (mem_ != nullptr) {
        p2p_mem_deregister(mem_);
    }
    give_back();
}

void RegBuf::give_back() {
    if (pages_ != 0) {
        if (data_ != nullptr) munmap(data_, pages_);
    } else {
        std::free(data_);
    }
    data_ = nullptr;
}

void RegBuf::release() {
    MP_OK(p2p_mem_deregister(mem_));
    mem_ = nullptr;
}

void RegBuf::free_now() {
    if (lib_mem_ != nullptr) {
        MP_OK(p2p_mem_free(data_, lib_mem_));
        lib_mem_ = mem_ = nullptr;
    } else {
        if (mem_ != nullptr) release();
        give_back();
    }
    data_ = nullptr;
}

// ------------------------------------------------------------------ pop

std::vector<p2p_completion_t> pop(p2p_comm_h comm, p2p_queue_t q,
                                  int wait_ms) {
    p2p_completion_t e[256];
    size_t n = 0;
    p2p_status_t st;
    if (wait_ms == 0) {
        st = p2p_comm_poll(comm, q, e, 256, &n);
    } else {
        st = p2p_comm_wait(comm, q, e, 256, &n, wait_ms);
        if (st == P2P_ERR_TIMEOUT) {
            MP_CHECK(n == 0, "wait timed out but count is %zu", n);
            return {};
        }
    }
    MP_CHECK(st == P2P_OK, "%s on %s queue returned %d (%s)",
             wait_ms == 0 ? "poll" : "wait", q == P2P_QUEUE_SEND ? "send" : "recv",
             static_cast<int>(st), p2p_status_string(st));
    MP_CHECK(n <= 256, "popped %zu entries with max 256", n);
    return std::vector<p2p_completion_t>(e, e + n);
}

// ------------------------------------------------------------------ collect

void check_ok(const Xfer &x, const p2p_completion_t &c) {
    MP_CHECK(c.status == P2P_OK && c.bytes == x.len,
             "%s completion (peer %u tensor %u): status %d (%s) bytes %llu; "
             "expected OK bytes %zu",
             x.is_send ? "send" : "recv", x.peer, x.tid,
             static_cast<int>(c.status), p2p_status_string(c.status),
             static_cast<unsigned long long>(c.bytes), x.len);
}

void collect(p2p_comm_h comm, const std::vector<Xfer> &ops, double deadline_s,
             CompletionCheck check) {
    size_t left[2] = {0, 0}; // [send, recv]
    for (const Xfer &x : ops) {
        ++left[x.is_send ? 0 : 1];
    }
    std::vector<uint8_t> seen(ops.size(), 0);
    const auto t0 = Clock::now();
    while (left[0] + left[1] > 0) {
        if (seconds_since(t0) > deadline_s) {
            std::string missing;
            int shown = 0;
            for (size_t i = 0; i < ops.size() && shown < 8; ++i) {
                if (seen[i] == 0) {
                    char b[96];
                    std::snprintf(b, sizeof(b), " %s(peer %u tensor %u %zu B)",
                                  ops[i].is_send ? "send" : "recv", ops[i].peer,
                                  ops[i].tid, ops[i].len);
                    missing += b;
                    ++shown;
                }
            }
            MP_FAIL("%zu sends and %zu receives without a completion after "
                    "%.0f s, e.g.%s",
                    left[0], left[1], deadline_s, missing.c_str());
        }
        for (int qi = 1; qi >= 0; --qi) {
            if (left[qi] == 0) {
                continue;
            }
            p2p_queue_t q = qi == 0 ? P2P_QUEUE_SEND : P2P_QUEUE_RECV;
            int wait_ms = left[1 - qi] == 0 ? 20 : (qi == 1 ? 5 : 0);
            for (const p2p_completion_t &c : pop(comm, q, wait_ms)) {
                size_t i = index_of(c.user_context);
                MP_CHECK(i < ops.size(), "completion with unknown user_context "
                         "%p (peer %u tensor %u status %d)", c.user_context,
                         c.peer, c.tensor_id, static_cast<int>(c.status));
                const Xfer &x = ops[i];
                MP_CHECK(x.is_send == (qi == 0),
                         "%s op (peer %u tensor %u) completed on the %s queue",
                         x.is_send ? "send" : "recv", x.peer, x.tid,
                         qi == 0 ? "send" : "recv");
                MP_CHECK(seen[i] == 0, "second completion for %s peer %u "
                         "tensor %u", x.is_send ? "send" : "recv", x.peer, x.tid);
                seen[i] = 1;
                MP_CHECK(c.peer == x.peer && c.tensor_id == x.tid,
                         "%s completion names peer %u tensor %u; posted with "
                         "peer %u tensor %u", x.is_send ? "send" : "recv",
                         c.peer, c.tensor_id, x.peer, x.tid);
                check(x, c);
                --left[qi];
            }
        }
    }
}

void send_pid_await_go(p2p_comm_h comm, const RegBuf &small) {
    uint64_t pid = static_cast<uint64_t>(getpid());
    std::memcpy(small.data(), &pid, sizeof(pid));
    MP_OK(p2p_comm_send(comm, 1, 1, small.data(), 8, small.mem(), ctx_of(0)));
    collect(comm, {{true, 1, 1, 8, 0}}, 30);
    MP_OK(p2p_comm_recv(comm, 1, 3, small.data() + 8, 8, small.mem(), ctx_of(0)));
    collect(comm, {{false, 1, 3, 8, 8}}, 30);
}

pid_t await_pid_send_go(p2p_comm_h comm, const RegBuf &small) {
    MP_OK(p2p_comm_recv(comm, 0, 1, small.data(), 8, small.mem(), ctx_of(0)));
    collect(comm, {{false, 0, 1, 8, 0}}, 30);
    uint64_t pid = 0;
    std::memcpy(&pid, small.data(), sizeof(pid));
    MP_OK(p2p_comm_send(comm, 0, 3, small.data() + 8, 8, small.mem(), ctx_of(0)));
    collect(comm, {{true, 0, 3, 8, 8}}, 30);
    return static_cast<pid_t>(pid);
}

void expect_quiet(p2p_comm_h comm) {
    MP_CHECK(pop(comm, P2P_QUEUE_SEND, 0).empty(), "extra send completion");
    MP_CHECK(pop(comm, P2P_QUEUE_RECV, 0).empty(), "extra recv completion");
    size_t pend = 99;
    MP_OK(p2p_comm_pending(comm, P2P_QUEUE_SEND, &pend));
    MP_CHECK(pend == 0, "send pending %zu after all completions", pend);
    pend = 99;
    MP_OK(p2p_comm_pending(comm, P2P_QUEUE_RECV, &pend));
    MP_CHECK(pend == 0, "recv pending %zu after all completions", pend);
}

double await_deregistered(p2p_mem_h mem, double limit_s, const char *what,
                          const std::function<void()> &between, int poll_ms) {
    Clock::time_point t0 = Clock::now();
    p2p_status_t st;
    while ((st = p2p_mem_deregister(mem)) == P2P_ERR_BUSY) {
        MP_CHECK(seconds_since(t0) < limit_s, "the registration of %s stays busy "
                 "after %.0f s", what, limit_s);
        if (between) between();
        std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
    }
    MP_OK(st);
    return seconds_since(t0);
}

// ------------------------------------------------------------------ exchange

namespace {

constexpr size_t kGap = 3; // guard bytes between receive regions
constexpr uint8_t kGuard = 0xEE;

void post(Rank &r, const Xfer &x, size_t index, RegBuf &sbuf, RegBuf &rbuf) {
    if (x.is_send) {
        MP_OK(p2p_comm_send(r.comm(), x.peer, x.tid, sbuf.data() + x.off, x.len,
                            sbuf.mem(), ctx_of(index)));
    } else {
        MP_OK(p2p_comm_recv(r.comm(), x.peer, x.tid, rbuf.data() + x.off, x.len,
                            rbuf.mem(), ctx_of(index)));
    }
}

} // namespace

void exchange(Rank &r, const std::vector<uint32_t> &peers,
              const std::vector<size_t> &sizes, uint32_t tid_base,
              const ExchangeOptions &opt) {
    const uint32_t me = r.rank();
    std::vector<Xfer> ops;
    size_t soff = 0, roff = 0;
    for (uint32_t p : peers) {
        for (size_t k = 0; k < sizes.size(); ++k) {
            uint32_t tid = tid_base + static_cast<uint32_t>(k);
            ops.push_back({false, p, tid, sizes[k], roff});
            roff += sizes[k] + kGap;
            ops.push_back({true, p, tid, sizes[k], soff});
            soff += sizes[k];
        }
    }
    RegBuf sbuf(r.ctx(), soff, 0);
    RegBuf rbuf(r.ctx(), roff, kGuard);
    for (const Xfer &x : ops) {
        if (x.is_send) {
            fill_pattern(sbuf.data() + x.off, x.len, me, x.peer, x.tid);
        }
    }

    std::vector<size_t> order(ops.size());
    for (size_t i = 0; i < order.size(); ++i) {
        order[i] = i;
    }
    if (opt.shuffle) {
        std::mt19937 rng(1234u + me * 7919u);
        std::shuffle(order.begin(), order.end(), rng);
    }
    if (opt.unexpected) {
        for (size_t i : order) {
            if (ops[i].is_send) {
                post(r, ops[i], i, sbuf, rbuf);
            }
        }
        r.barrier(); // every send of every rank is posted
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        for (size_t i : order) {
            if (!ops[i].is_send) {
                post(r, ops[i], i, sbuf, rbuf);
            }
        }
    } else {
        for (size_t i : order) {
            post(r, ops[i], i, sbuf, rbuf);
        }
    }

    collect(r.comm(), ops, opt.deadline_s);
    expect_quiet(r.comm());

    for (const Xfer &x : ops) {
        if (x.is_send) {
            continue;
        }
        check_pattern(rbuf.data() + x.off, x.len, x.peer, me, x.tid, "recv");
        for (size_t g = 0; g < kGap; ++g) {
            MP_CHECK(rbuf.data()[x.off + x.len + g] == kGuard,
                     "guard byte %zu after recv (peer %u tensor %u, %zu B) "
                     "overwritten: 0x%02x", g, x.peer, x.tid, x.len,
                     rbuf.data()[x.off + x.len + g]);
        }
    }
    // The send buffers must be untouched.
    for (const Xfer &x : ops) {
        if (x.is_send) {
            check_pattern(sbuf.data() + x.off, x.len, me, x.peer, x.tid,
                          "send buffer after completion");
        }
    }
    sbuf.release();
    rbuf.release();
}

void stay_busy(p2p_context_h ctx) {
    static char scratch[64];
    if (ctx != nullptr) {
        p2p_mem_h m = nullptr;
        MP_OK(p2p_mem_register(ctx, scratch, sizeof(scratch), &m));
        MP_OK(p2p_mem_deregister(m));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void wait_for_file(const std::string &path, p2p_context_h ctx) {
    const Clock::time_point t0 = Clock::now();
    while (access(path.c_str(), F_OK) != 0) {
        MP_CHECK(seconds_since(t0) < 30, "%s never appeared", path.c_str());
        stay_busy(ctx);
    }
}

void create_file(const std::string &path) {
    FILE *f = std::fopen(path.c_str(), "w");
    MP_CHECK(f != nullptr, "cannot create %s: %s", path.c_str(), std::strerror(errno));
    std::fclose(f);
}

void write_pid_file(const std::string &path) {
    const std::string tmp = path + ".tmp";
    FILE *f = std::fopen(tmp.c_str(), "w");
    MP_CHECK(f != nullptr, "cannot create %s: %s", tmp.c_str(), std::strerror(errno));
    std::fprintf(f, "%d\n", static_cast<int>(getpid()));
    MP_CHECK(std::fclose(f) == 0 && std::rename(tmp.c_str(), path.c_str()) == 0,
             "cannot write %s: %s", path.c_str(), std::strerror(errno));
}

pid_t read_pid_file(const std::string &path) {
    FILE *f = std::fopen(path.c_str(), "r");
    MP_CHECK(f != nullptr, "cannot open %s: %s", path.c_str(), std::strerror(errno));
    int pid = 0;
    const int n = std::fscanf(f, "%d", &pid);
    std::fclose(f);
    MP_CHECK(n == 1 && pid > 0, "%s holds no pid", path.c_str());
    return static_cast<pid_t>(pid);
}

} // namespace mp
