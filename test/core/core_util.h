/*
 * Helpers of core_test.
 */
#ifndef UCXP2P_TEST_CORE_UTIL_H
#define UCXP2P_TEST_CORE_UTIL_H

#include "core/context.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

namespace coretest {

/** A context on UCX's self transport (unless UCX_TLS is set): for tests
 *  that need a worker but move nothing between processes. UCX_TLS is set
 *  for this creation alone: p2p_context_create refuses a self-only list,
 *  and later tests of this process go through it. */
inline void self_context(std::unique_ptr<ucxp2p::Context> *ctx) {
    const bool set_here = std::getenv("UCX_TLS") == nullptr;
    if (set_here) setenv("UCX_TLS", "self", 1);
    ucxp2p::ContextSettings s{};
    p2p_status_t resolved = ucxp2p::context_settings_resolve(nullptr, &s);
    p2p_status_t created = resolved == P2P_OK ? ucxp2p::Context::create(s, ctx) : resolved;
    if (set_here) unsetenv("UCX_TLS");
    ASSERT_EQ(P2P_OK, resolved);
    ASSERT_EQ(P2P_OK, created);
}

} // namespace coretest

#endif
