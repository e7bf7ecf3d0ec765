/*
 * UCX's own warnings and errors, counted while a UcxWarnings is alive
 * (UCX's log handler chain; they are still printed). UCX reports what it
 * finds left behind when a context is destroyed ("regions remained on lru
 * list", "object was not returned to mpool"): a test that counts around
 * p2p_context_destroy hears of a registration the library leaked.
 * Header-only; the test program links UCX (ucs).
 */
#ifndef UCXP2P_TEST_UCX_WARNINGS_H
#define UCXP2P_TEST_UCX_WARNINGS_H

#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>

#include <atomic>
#include <cstdarg>

namespace p2ptest {

class UcxWarnings {
public:
    UcxWarnings() {
        count() = 0;
        ucs_log_push_handler(&UcxWarnings::handler);
    }
    ~UcxWarnings() { ucs_log_pop_handler(); }
    UcxWarnings(const UcxWarnings &) = delete;
    UcxWarnings &operator=(const UcxWarnings &) = delete;
    int seen() const { return count().load(); }
    /** Whether UCX_LOG_LEVEL lets warnings through to the handlers. */
    static bool audible() {
        return ucs_global_opts.log_component.log_level >= UCS_LOG_LEVEL_WARN;
    }

private:
    static std::atomic<int> &count() {
        static std::atomic<int> n{0};
        return n;
    }
    static ucs_log_func_rc_t handler(const char *, unsigned, const char *,
                                     ucs_log_level_t level,
                                     const ucs_log_component_config_t *,
                                     const char *, va_list) {
        if (level <= UCS_LOG_LEVEL_WARN) ++count();
        return UCS_LOG_FUNC_RC_CONTINUE;
    }
};

} // namespace p2ptest

#endif
