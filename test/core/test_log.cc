/*
 * Logging: a storm of one line is muted per call site (core/log.cc).
 */
#include "core/log.h"

#include "../shell.h"

#include <gtest/gtest.h>

#include <string>

namespace {

using p2ptest::count_of;

void storm(int n) {
    for (int i = 0; i < n; ++i) {
        P2P_LOG(P2P_LOG_WARN, "comm 9: storm line %d", i);
    }
}

void other_site() { P2P_LOG(P2P_LOG_WARN, "comm 9: another line"); }

} // namespace

// 100 warnings from one call site: the first 10 are written, the tenth
// says the rest are muted; another call site is not muted; a line from the
// muted site after its window says how many were dropped (not tested: the
// window is 10 s).
TEST(Log, AStormOfOneWarningIsMutedPerCallSite) {
    const p2p_log_level_t before = ucxp2p::log_level();
    ucxp2p::log_set_level(P2P_LOG_WARN);
    testing::internal::CaptureStderr();
    storm(100);
    other_site();
    const std::string err = testing::internal::GetCapturedStderr();
    ucxp2p::log_set_level(before);
    EXPECT_EQ(count_of(err, "storm line"), 10u) << err;
    EXPECT_NE(err.find("storm line 9 (test_log.cc"), std::string::npos) << err;
    EXPECT_EQ(err.find("storm line 10 "), std::string::npos) << err;
    EXPECT_EQ(count_of(err, "[more like this muted for 10s]"), 1u) << err;
    EXPECT_EQ(count_of(err, "another line"), 1u) << err;
}

// Asked for info or more, every line is written (whoever raised the
// level wants to see everything), warnings included.
TEST(Log, NothingIsMutedAtInfoLevel) {
    const p2p_log_level_t before = ucxp2p::log_level();
    ucxp2p::log_set_level(P2P_LOG_INFO);
    testing::internal::CaptureStderr();
    for (int i = 0; i < 30; ++i) {
        P2P_LOG(P2P_LOG_WARN, "comm 9: loud line %d", i);
        P2P_LOG(P2P_LOG_INFO, "comm 9: info line %d", i);
    }
    const std::string err = testing::internal::GetCapturedStderr();
    ucxp2p::log_set_level(before);
    EXPECT_EQ(count_of(err, "loud line"), 30u) << err;
    EXPECT_EQ(count_of(err, "info line"), 30u) << err;
    EXPECT_EQ(err.find("muted"), std::string::npos) << err;
}

// The level is evaluated once: rails.cc passes "first time ? warn :
// debug", which printed a warning labelled debug (the second evaluation).
TEST(Log, TheLevelIsEvaluatedOnce) {
    const p2p_log_level_t before = ucxp2p::log_level();
    ucxp2p::log_set_level(P2P_LOG_WARN);
    int evaluations = 0;
    auto first_time = [&]() { return evaluations++ == 0; };
    testing::internal::CaptureStderr();
    P2P_LOG(first_time() ? P2P_LOG_WARN : P2P_LOG_DEBUG, "rails: once only");
    const std::string err = testing::internal::GetCapturedStderr();
    ucxp2p::log_set_level(before);
    EXPECT_EQ(evaluations, 1);
    EXPECT_NE(err.find("] warn: rails: once only"), std::string::npos) << err;
}
