// The C API's exception barrier (core/guard.h): every exception becomes a
// status, none escapes.
#include "core/guard.h"

#include <gtest/gtest.h>

#include <new>
#include <stdexcept>

using ucxp2p::guarded;

TEST(Guard, ReturnsTheBodysStatus) {
    EXPECT_EQ(P2P_OK, guarded("test", [] { return P2P_OK; }));
    EXPECT_EQ(P2P_ERR_BUSY, guarded("test", [] { return P2P_ERR_BUSY; }));
}

TEST(Guard, BadAllocIsNoMemory) {
    EXPECT_EQ(P2P_ERR_NO_MEMORY,
              guarded("test", []() -> p2p_status_t { throw std::bad_alloc(); }));
}

TEST(Guard, OtherExceptionsAreInternalErrors) {
    EXPECT_EQ(P2P_ERR_TRANSPORT, guarded("test", []() -> p2p_status_t {
                  throw std::runtime_error("boom");
              }));
    EXPECT_EQ(P2P_ERR_TRANSPORT,
              guarded("test", []() -> p2p_status_t { throw 42; }));
}
