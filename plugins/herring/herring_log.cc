#include "herring_internal.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <time.h>
#include <unistd.h>

namespace herring {

namespace {

std::atomic<int> g_level{-1};

int parse_level(const char *s) {
    static const char *const names[] = {"error", "warn", "info", "debug", "trace"};
    for (int i = 0; i < 5; ++i) {
        if (strcasecmp(s, names[i]) == 0) {
            return i;
        }
    }
    return P2P_LOG_WARN;
}

const char *level_name(p2p_log_level_t level) {
    switch (level) {
    case P2P_LOG_ERROR: return "error";
    case P2P_LOG_WARN:  return "warn";
    case P2P_LOG_INFO:  return "info";
    case P2P_LOG_DEBUG: return "debug";
    default:            return "trace";
    }
}

} // namespace

bool log_enabled(p2p_log_level_t level) {
    int cur = g_level.load(std::memory_order_relaxed);
    if (cur < 0) {
        const char *env = std::getenv("P2P_LOG_LEVEL");
        cur = env != nullptr ? parse_level(env) : P2P_LOG_WARN;
        g_level.store(cur, std::memory_order_relaxed);
    }
    return static_cast<int>(level) <= cur;
}

namespace {

void write_line(p2p_log_level_t level, const char *suffix, const char *fmt, va_list ap) {
    char msg[1024];
    std::vsnprintf(msg, sizeof(msg), fmt, ap);
    // One fprintf per line so lines from threads do not interleave.
    std::fprintf(stderr, "[ucxp2p:%d herring] %s: %s%s\n", static_cast<int>(getpid()),
                 level_name(level), msg, suffix);
}

int64_t mono_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

} // namespace

void log(p2p_log_level_t level, const char *fmt, ...) {
    if (!log_enabled(level)) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    write_line(level, "", fmt, ap);
    va_end(ap);
}

void log_burst(Burst &site, p2p_log_level_t level, const char *fmt, ...) {
    if (!log_enabled(level)) {
        return;
    }
    char suffix[96] = "";
    if (level <= P2P_LOG_WARN && !log_enabled(P2P_LOG_INFO)) {
        // Another thread counting this site: write unmuted rather than wait.
        if (site.busy.exchange(1, std::memory_order_acquire) == 0) {
            const int64_t now = mono_ns();
            if (site.count == 0 || now - site.window_start >= Burst::kWindowNs) {
                site.window_start = now;
                site.count = 0;
            }
            const bool drop = site.count >= Burst::kBurst;
            uint64_t dropped = 0;
            if (drop) {
                ++site.dropped;
            } else {
                ++site.count;
                dropped = site.dropped;
                site.dropped = 0;
            }
            const bool last = site.count == Burst::kBurst;
            site.busy.store(0, std::memory_order_release);
            if (drop) return;
            if (dropped != 0) {
                std::snprintf(suffix, sizeof(suffix), " [%llu more like this were not logged]",
                              static_cast<unsigned long long>(dropped));
            } else if (last) {
                std::snprintf(suffix, sizeof(suffix), " [more like this muted for %llds]",
                              static_cast<long long>(Burst::kWindowNs / 1000000000LL));
            }
        }
    }
    va_list ap;
    va_start(ap, fmt);
    write_line(level, suffix, fmt, ap);
    va_end(ap);
}

} // namespace herring
