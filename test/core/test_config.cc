#include "core/config.h"
#include "../fail_each.h"

#include <ucxp2p/p2p.h>

#include <gtest/gtest.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace ucxp2p;

TEST(Config, TableEntriesAreUniqueAndDocumented) {
    std::set<std::string> names;
    int n = 0;
    for (const ConfigVar *v = config_table(); v->name != nullptr; ++v, ++n) {
        EXPECT_EQ(0, std::strncmp(v->name, "P2P_", 4)) << v->name;
        EXPECT_TRUE(names.insert(v->name).second) << "duplicate " << v->name;
        EXPECT_GT(std::strlen(v->help), 10u) << v->name;
    }
    EXPECT_GT(n, 5);
}

TEST(Config, EnvOverridesDefault) {
    unsetenv("P2P_SPIN_US");
    uint64_t v = 0;
    ASSERT_EQ(P2P_OK, config_get_u64("P2P_SPIN_US", 1000000, &v));
    EXPECT_EQ(50u, v);
    setenv("P2P_SPIN_US", "77", 1);
    ASSERT_EQ(P2P_OK, config_get_u64("P2P_SPIN_US", 1000000, &v));
    EXPECT_EQ(77u, v);
    for (const char *bad : {"-1", "abc", "12x", "", "2000000"}) {
        setenv("P2P_SPIN_US", bad, 1);
        uint64_t keep = 5;
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, config_get_u64("P2P_SPIN_US", 1000000, &keep)) << bad;
        EXPECT_EQ(5u, keep) << "output written on error for " << bad;
    }
    unsetenv("P2P_SPIN_US");
}

// A value outside the setting's range is refused with the range it has,
// its lower bound included (P2P_PEER_TIMEOUT_MS=5 was told "[0, 3600000]"
// while 0-9 are refused), and the keyword it also takes.
TEST(Config, RangeErrorsNameTheRealRange) {
    uint64_t v = 0;
    setenv("P2P_PEER_TIMEOUT_MS", "5", 1);
    testing::internal::CaptureStderr();
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, config_get_u64("P2P_PEER_TIMEOUT_MS", 3600000, &v, 10));
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("P2P_PEER_TIMEOUT_MS='5' is not an integer in [10, 3600000]"),
              std::string::npos) << err;
    setenv("P2P_PEER_TIMEOUT_MS", "10", 1);
    EXPECT_EQ(P2P_OK, config_get_u64("P2P_PEER_TIMEOUT_MS", 3600000, &v, 10));
    EXPECT_EQ(10u, v);
    unsetenv("P2P_PEER_TIMEOUT_MS");
    setenv("P2P_CMA_THRESH", "64K", 1);
    testing::internal::CaptureStderr();
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, config_get_u64("P2P_CMA_THRESH", 100, &v, 0, "auto"));
    err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("P2P_CMA_THRESH='64K' is not auto or an integer in [0, 100]"),
              std::string::npos) << err;
    unsetenv("P2P_CMA_THRESH");
}

TEST(Config, ParseNames) {
    p2p_log_level_t l;
    EXPECT_EQ(P2P_OK, config_parse_log_level("DEBUG", &l));
    EXPECT_EQ(P2P_LOG_DEBUG, l);
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, config_parse_log_level("loud", &l));
    p2p_progress_mode_t m;
    EXPECT_EQ(P2P_OK, config_parse_progress("event", &m));
    EXPECT_EQ(P2P_PROGRESS_EVENT, m);
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, config_parse_progress("spin", &m));
}

TEST(Config, OnOffIsReadWithoutRegardToCase) {
    bool b = false;
    for (const char *on : {"on", "ON", "On"}) {
        b = false;
        EXPECT_EQ(P2P_OK, config_parse_on_off(on, &b)) << on;
        EXPECT_TRUE(b) << on;
    }
    for (const char *off : {"off", "OFF", "oFf"}) {
        b = true;
        EXPECT_EQ(P2P_OK, config_parse_on_off(off, &b)) << off;
        EXPECT_FALSE(b) << off;
    }
    for (const char *bad : {"", "yes", "1", "on ", "onn"}) {
        b = true;
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, config_parse_on_off(bad, &b)) << bad;
        EXPECT_TRUE(b) << "output written on error for '" << bad << "'";
    }
    EXPECT_TRUE(config_is("AUTO", "auto"));
    EXPECT_FALSE(config_is("autox", "auto"));
}

TEST(Config, PrintShowsEveryVariable) {
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_config_print(nullptr));
    char *buf = nullptr;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ASSERT_NE(nullptr, f);
    setenv("P2P_LOG_LEVEL", "info", 1);
    ASSERT_EQ(P2P_OK, p2p_config_print(f));
    std::fclose(f);
    std::string out(buf, len);
    std::free(buf);
    for (const ConfigVar *v = config_table(); v->name != nullptr; ++v) {
        EXPECT_NE(std::string::npos, out.find(std::string(v->name) + "="))
            << v->name;
    }
    EXPECT_NE(std::string::npos, out.find("P2P_LOG_LEVEL=info   (set in environment)"));
    EXPECT_EQ(std::string::npos, out.find("did you mean")) << out;
    unsetenv("P2P_LOG_LEVEL");
    // A misspelled name is listed after the table, with the name meant.
    setenv("P2P_SPIN_USS", "5", 1);
    f = open_memstream(&buf, &len);
    ASSERT_NE(nullptr, f);
    ASSERT_EQ(P2P_OK, p2p_config_print(f));
    std::fclose(f);
    out.assign(buf, len);
    std::free(buf);
    unsetenv("P2P_SPIN_USS");
    EXPECT_NE(std::string::npos, out.find("# P2P_SPIN_USS is set but is not a ucxp2p variable "
                                          "(ignored); did you mean P2P_SPIN_US?\n")) << out;
}

TEST(Status, EveryCodeHasDistinctText) {
    std::set<std::string> seen;
    for (int s = 1; s >= P2P_ERR_INTERRUPTED; --s) {  // the last code
        std::string text = p2p_status_string(static_cast<p2p_status_t>(s));
        EXPECT_NE("unknown status", text) << s;
        EXPECT_TRUE(seen.insert(text).second) << s;
    }
    EXPECT_STREQ("unknown status", p2p_status_string(static_cast<p2p_status_t>(-999)));
    // Any int a C caller passes, the extremes included.
    for (int v : {INT_MIN, INT_MAX, 2, -1000000}) {
        p2p_status_t st;
        std::memcpy(&st, &v, sizeof(st));
        EXPECT_STREQ("unknown status", p2p_status_string(st)) << v;
    }
    EXPECT_STREQ("success", p2p_status_string(P2P_OK));
}

// A P2P_* name one or two edits from a table name is reported with that
// name (a typo would otherwise be ignored without a word); names further
// from every entry (a test harness' own P2P_TOP_SRCDIR), table names, other
// prefixes and entries without '=' are not.
TEST(Config, MisspelledVariablesAreFoundWithTheirNames) {
    const char *const env[] = {"P2P_CMA_TRESH=4096",     // one letter dropped
                               "P2P_LOGLEVEL=debug",     // '_' dropped
                               "P2P_PEER_TIMEOUT=100",   // '_MS' dropped: 3 edits
                               "P2P_SPIN_US=3",          // a table name
                               "P2P_TOP_SRCDIR=/src",    // far from every name
                               "P2P_THREADMODE=multi",   // '_' dropped
                               "UCX_TLS=shm",            // not ours
                               "P2P_RAILZ",              // no '=': not a variable
                               "P2P_CUDA_STAGNG=",       // empty value: still set
                               nullptr};
    const std::vector<std::pair<std::string, std::string>> want = {
        {"P2P_CMA_TRESH", "P2P_CMA_THRESH"},
        {"P2P_LOGLEVEL", "P2P_LOG_LEVEL"},
        {"P2P_THREADMODE", "P2P_THREAD_MODE"},
        {"P2P_CUDA_STAGNG", "P2P_CUDA_STAGING"}};
    EXPECT_EQ(want, config_misspelled(env));
    EXPECT_TRUE(config_misspelled(nullptr).empty());
}

// Out of memory: NO_MEMORY, nothing printed, never an exception out of the
// C API (a misspelled variable makes the call allocate).
TEST(Config, PrintOutOfMemoryIsNoMemory) {
    setenv("P2P_SPIN_USS", "5", 1);
    char *buf = nullptr;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ASSERT_NE(nullptr, f);
    const unsigned k = p2ptest::fail_each_allocation(
        [&] { return p2p_config_print(f); },
        [&](p2p_status_t st) {
            std::fflush(f);
            if (st != P2P_OK) {
                EXPECT_EQ(0u, len) << "printed before failing";
            }
        });
    std::fclose(f);
    std::free(buf);
    unsetenv("P2P_SPIN_USS");
    EXPECT_GT(k, 0u) << "nothing was failed";
}

TEST(Config, LocalRankQueryOutOfMemoryIsNoMemory) {
    setenv("LOCAL_RANK", "1", 1);
    setenv("LOCAL_WORLD_SIZE", "4", 1);
    uint32_t rank = 9, size = 9;
    const unsigned k = p2ptest::fail_each_allocation(
        [&] { return p2p_local_rank_query(&rank, &size); }, [](p2p_status_t) {});
    unsetenv("LOCAL_RANK");
    unsetenv("LOCAL_WORLD_SIZE");
    EXPECT_GT(k, 0u) << "nothing was failed";
    EXPECT_EQ(1u, rank);
    EXPECT_EQ(4u, size);
}

// A local rank the planner cannot use (no size with it) is warned about
// once per process and values, not on every read: herringLocalDevice asks
// on every call, so an application asking per step flooded stderr.
TEST(Config, UnusableLocalRankIsWarnedAboutOnce) {
    const char *keep_r = std::getenv("LOCAL_RANK");
    const char *keep_s = std::getenv("LOCAL_WORLD_SIZE");
    const std::string saved_r = keep_r ? keep_r : "", saved_s = keep_s ? keep_s : "";
    // Values not used before in this process (--gtest_repeat runs it again:
    // a value already warned about is, rightly, not warned about twice).
    static int round = 0;
    ++round;
    const std::string v1 = std::to_string(69 + 2 * round), v2 = std::to_string(70 + 2 * round);
    setenv("LOCAL_RANK", v1.c_str(), 1);
    unsetenv("LOCAL_WORLD_SIZE");
    auto warnings = [](const std::string &err, const std::string &what) {
        size_t n = 0;
        for (size_t at = err.find(what); at != std::string::npos; at = err.find(what, at + 1)) {
            ++n;
        }
        return n;
    };
    uint32_t rank = 9, size = 9;
    testing::internal::CaptureStderr();
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(P2P_OK, p2p_local_rank_query(&rank, &size));
    }
    setenv("LOCAL_RANK", v2.c_str(), 1);  // other values: warned about again
    EXPECT_EQ(P2P_OK, p2p_local_rank_query(&rank, &size));
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(1u, warnings(err, "ignoring LOCAL_RANK='" + v1 + "' LOCAL_WORLD_SIZE='(unset)'"))
        << err;
    EXPECT_EQ(1u, warnings(err, "ignoring LOCAL_RANK='" + v2 + "' LOCAL_WORLD_SIZE='(unset)'"))
        << err;
    EXPECT_EQ(0u, size);  // none found: planned as rank 0 of 1
    if (keep_r) setenv("LOCAL_RANK", saved_r.c_str(), 1); else unsetenv("LOCAL_RANK");
    if (keep_s) setenv("LOCAL_WORLD_SIZE", saved_s.c_str(), 1);
}
