#include "core/log.h"
#include "core/config.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
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
    // One fprintf per line so lines from threads do not interleave.
    std::fprintf(stderr, "[ucxp2p:%d%s] %s: %s (%s:%d)\n",
                 static_cast<int>(getpid()), rank_str, level_name(level), msg,
                 base, line);
}

} // namespace ucxp2p
