#include "herring_internal.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

void log(p2p_log_level_t level, const char *fmt, ...) {
    if (!log_enabled(level)) {
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    // One fprintf per line so lines from threads do not interleave.
    std::fprintf(stderr, "[ucxp2p:%d herring] %s: %s\n", static_cast<int>(getpid()),
                 level_name(level), msg);
}

} // namespace herring
