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
 *  that need a worker but move nothing between processes. */
inline void self_context(std::unique_ptr<ucxp2p::Context> *ctx) {
    setenv("UCX_TLS", "self", 0);
    ucxp2p::ContextSettings s{};
    ASSERT_EQ(P2P_OK, ucxp2p::context_settings_resolve(nullptr, &s));
    ASSERT_EQ(P2P_OK, ucxp2p::Context::create(s, ctx));
}

} // namespace coretest

#endif
