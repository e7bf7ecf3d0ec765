#include "core/log.h"
#include "core/config.h"

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <time.h>
#include <unistd.h>

namespace ucxp2p {

namespace {

std::atomic<int> g_level{-1};
std::atomic<int> g_rank{-1};

const char *level_name(p2p_log_level_t level) {
    switch (level) {
    case P2P_LOG_ERROR: return "error";
    case P2P_LOG_WARN:  return "warn";
    case P2P_LOG_INFO:  return "info";
    case P2P_LOG_DEBUG: return "debug";
    default:            return "trace";
    }
}

/* A storm of one line (a failure that ends hundreds of operations, each
 * logging it) would bury everything else: at warn or error, a call site
 * that logs more than kBurst lines within kWindowNs is muted until that
 * window ends, and its next line says how many were dropped. info and
 * below are never muted (asked for explicitly, to see everything). */
constexpr unsigned kBurst = 10;
constexpr int64_t kWindowNs = 10LL * 1000 * 1000 * 1000;
constexpr size_t kSites = 64;  // call sites tracked at once (hashed)

struct Site {
    const char *file = nullptr;
    int line = 0;
    int64_t window_start = 0;
    unsigned count = 0;      // lines in this window
    uint64_t dropped = 0;    // muted since the last line written
};

std::mutex g_sites_mu;
Site g_sites[kSites];

int64_t mono_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

enum class Admit { DROP, WRITE, WRITE_LAST };

/** Whether this line may be written (WRITE_LAST: the window's last one);
 *  *dropped: lines muted before it. */
Admit admit(const char *file, int line, int64_t now, uint64_t *dropped) {
    const size_t h = (reinterpret_cast<uintptr_t>(file) >> 3) * 31u + static_cast<size_t>(line);
    // Never waits: a child forked while another thread held it would wait
    // forever (the line is then written unmuted).
    std::unique_lock<std::mutex> lock(g_sites_mu, std::try_to_lock);
    if (!lock.owns_lock()) return Admit::WRITE;
    Site &s = g_sites[h % kSites];
    if (s.file != file || s.line != line) {  // new, or evicts a colliding site
        s = Site();
        s.file = file;
        s.line = line;
        s.window_start = now;
    } else if (now - s.window_start >= kWindowNs) {
        s.window_start = now;
        s.count = 0;
    }
    if (s.count >= kBurst) {
        ++s.dropped;
        return Admit::DROP;
    }
    ++s.count;
    *dropped = s.dropped;
    s.dropped = 0;
    return s.count == kBurst ? Admit::WRITE_LAST : Admit::WRITE;
}

} // namespace

p2p_log_level_t log_level() {
    int level = g_level.load(std::memory_order_relaxed);
    if (level < 0) {
        p2p_log_level_t parsed = P2P_LOG_WARN;
        const char *env = std::getenv("P2P_LOG_LEVEL");
        if (env != nullptr &&
            config_parse_log_level(env, &parsed) != P2P_OK) {
            std::fprintf(stderr,
                         "[ucxp2p] warn: config: P2P_LOG_LEVEL='%s' unknown "
                         "(p2p_context_create refuses it; logging at warn)\n", env);
            parsed = P2P_LOG_WARN;
        }
        int expected = -1;
        g_level.compare_exchange_strong(expected, parsed);
        level = g_level.load();
    }
    return static_cast<p2p_log_level_t>(level);
}

void log_set_level(p2p_log_level_t level) { g_level.store(level); }

void log_set_rank(int rank) { g_rank.store(rank); }

void log_write(p2p_log_level_t level, const char *file, int line,
               const char *fmt, ...) {
    uint64_t dropped = 0;
    Admit a = Admit::WRITE;
    if (level <= P2P_LOG_WARN && log_level() <= P2P_LOG_WARN) {
        a = admit(file, line, mono_ns(), &dropped);
        if (a == Admit::DROP) return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *base = std::strrchr(file, '/');
    base = (base != nullptr) ? base + 1 : file;
    int rank = g_rank.load(std::memory_order_relaxed);
    char rank_str[16] = "";
    if (rank >= 0) {
        std::snprintf(rank_str, sizeof(rank_str), ":r%d", rank);
    }
    char muted[96] = "";
    if (dropped != 0) {
        std::snprintf(muted, sizeof(muted), " [%llu more like this were not logged]",
                      static_cast<unsigned long long>(dropped));
    } else if (a == Admit::WRITE_LAST) {
        std::snprintf(muted, sizeof(muted), " [more like this muted for %llds]",
                      static_cast<long long>(kWindowNs / 1000000000LL));
    }
    // One fprintf per line so lines from threads do not interleave.
    std::fprintf(stderr, "[ucxp2p:%d%s] %s: %s (%s:%d)%s\n",
                 static_cast<int>(getpid()), rank_str, level_name(level), msg,
                 base, line, muted);
}

} // namespace ucxp2p
