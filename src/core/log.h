/*
 * Leveled logging to stderr, quiet by default (warn). Messages are lowercase
 * and start with the object they concern ("comm 3: ...", "tcp bootstrap: ...").
 */
#ifndef UCXP2P_CORE_LOG_H
#define UCXP2P_CORE_LOG_H

#include <ucxp2p/p2p.h>

namespace ucxp2p {

/** Current level; initialised from P2P_LOG_LEVEL on first use. */
p2p_log_level_t log_level();
void log_set_level(p2p_log_level_t level);
/** Rank shown in the prefix once known (-1: unknown). */
void log_set_rank(int rank);

void log_write(p2p_log_level_t level, const char *file, int line,
               const char *fmt, ...) __attribute__((format(printf, 4, 5)));

} // namespace ucxp2p

/* level is evaluated once (a caller may pass an expression with a side
 * effect, e.g. a first-time check choosing warn or debug). */
#define P2P_LOG(level, ...)                                                    \
    do {                                                                       \
        const p2p_log_level_t p2p_log_lvl_ = (level);                          \
        if (p2p_log_lvl_ <= ::ucxp2p::log_level()) {                           \
            ::ucxp2p::log_write(p2p_log_lvl_, __FILE__, __LINE__, __VA_ARGS__); \
        }                                                                      \
    } while (0)

#endif
