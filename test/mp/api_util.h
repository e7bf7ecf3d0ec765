/*
 * Helpers of api_test (single process, public API, P2P_BOOTSTRAP=single).
 */
#ifndef UCXP2P_TEST_MP_API_UTIL_H
#define UCXP2P_TEST_MP_API_UTIL_H

#include <ucxp2p/p2p.h>

#include "../scoped_env.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <unistd.h>

namespace apitest {

/** Sets (or unsets, value NULL) an environment variable for one scope. */
using EnvGuard = p2ptest::ScopedEnv;

/**
 * Run fn on another thread; if it has not returned after `seconds`, the
 * library hung: report and end the process (a hung thread cannot be undone).
 */
template <typename F> void bounded(const char *what, int seconds, F fn) {
    std::packaged_task<void()> task(fn);
    std::future<void> done = task.get_future();
    std::thread t(std::move(task));
    if (done.wait_for(std::chrono::seconds(seconds)) != std::future_status::ready) {
        std::fprintf(stderr, "api_test: %s did not return within %d s (hang)\n",
                     what, seconds);
        std::fflush(stderr);
        _exit(1);
    }
    t.join();
    done.get();
}

/** Page-aligned heap buffer (not registered). */
class Buf {
public:
    explicit Buf(size_t n, uint8_t fill = 0) : n_(n) {
        void *p = nullptr;
        if (posix_memalign(&p, 4096, n + 4096) != 0) {
            std::abort();
        }
        p_ = static_cast<uint8_t *>(p);
        std::memset(p_, fill, n + 4096);
    }
    ~Buf() { std::free(p_); }
    Buf(const Buf &) = delete;
    Buf &operator=(const Buf &) = delete;
    uint8_t *data() const { return p_; }
    size_t size() const { return n_; }

private:
    uint8_t *p_ = nullptr;
    size_t n_ = 0;
};

/** A progress mode's name, for parameterized test names. */
inline std::string mode_name(p2p_progress_mode_t m) {
    switch (m) {
    case P2P_PROGRESS_BUSY: return "busy";
    case P2P_PROGRESS_EVENT: return "event";
    default: return "adaptive";
    }
}

inline p2p_config_t mode_config(p2p_progress_mode_t mode) {
    p2p_config_t c{};
    c.field_mask = P2P_CONFIG_FIELD_PROGRESS_MODE;
    c.progress_mode = mode;
    return c;
}

/** Context + single bootstrap + communicator, created in SetUp. */
class ApiFixture : public ::testing::Test {
protected:
    void SetUp() override { open(nullptr); }
    void TearDown() override { close(); }

    void open(const p2p_config_t *cfg) {
        ASSERT_EQ(P2P_OK, p2p_context_create(cfg, &ctx_));
        ASSERT_EQ(P2P_OK, p2p_bootstrap_create(P2P_BOOTSTRAP_SINGLE, &bs_));
        ASSERT_EQ(P2P_OK, p2p_comm_create(ctx_, bs_, &comm_));
    }
    void close() {
        if (comm_ != nullptr) {
            EXPECT_EQ(P2P_OK, p2p_comm_destroy(comm_));
            comm_ = nullptr;
        }
        if (bs_ != nullptr) {
            EXPECT_EQ(P2P_OK, p2p_bootstrap_destroy(bs_));
            bs_ = nullptr;
        }
        if (ctx_ != nullptr) {
            EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx_));
            ctx_ = nullptr;
        }
    }
    size_t pending(p2p_queue_t q) {
        size_t n = 12345;
        EXPECT_EQ(P2P_OK, p2p_comm_pending(comm_, q, &n));
        return n;
    }
    /** Wait (bounded) for exactly one completion on q. */
    p2p_completion_t wait_one(p2p_queue_t q, int timeout_ms = 10000) {
        p2p_completion_t c{};
        size_t n = 0;
        EXPECT_EQ(P2P_OK, p2p_comm_wait(comm_, q, &c, 1, &n, timeout_ms));
        EXPECT_EQ(1u, n);
        return c;
    }

    p2p_context_h ctx_ = nullptr;
    p2p_bootstrap_h bs_ = nullptr;
    p2p_comm_h comm_ = nullptr;
};

/** A progress mode and a thread mode, for tests run in each pair. */
struct Modes {
    p2p_progress_mode_t progress;
    p2p_thread_mode_t threads;
};

/** Every progress mode in both thread modes. */
inline auto all_modes() {
    return ::testing::Values(Modes{P2P_PROGRESS_ADAPTIVE, P2P_THREAD_MULTI},
                             Modes{P2P_PROGRESS_BUSY, P2P_THREAD_MULTI},
                             Modes{P2P_PROGRESS_EVENT, P2P_THREAD_MULTI},
                             Modes{P2P_PROGRESS_ADAPTIVE, P2P_THREAD_SERIALIZED},
                             Modes{P2P_PROGRESS_BUSY, P2P_THREAD_SERIALIZED},
                             Modes{P2P_PROGRESS_EVENT, P2P_THREAD_SERIALIZED});
}

/** Test name suffix for a Modes parameter. */
inline std::string modes_name(const ::testing::TestParamInfo<Modes> &i) {
    return mode_name(i.param.progress) +
           (i.param.threads == P2P_THREAD_SERIALIZED ? "_serialized" : "_multi");
}

/** ApiFixture opened in the parameter's modes. */
class ModesFixture : public ApiFixture, public ::testing::WithParamInterface<Modes> {
protected:
    void SetUp() override {
        p2p_config_t cfg = mode_config(GetParam().progress);
        cfg.field_mask |= P2P_CONFIG_FIELD_THREAD_MODE;
        cfg.thread_mode = GetParam().threads;
        open(&cfg);
    }
};

/** An address that was never returned by the library, usable as any handle. */
template <typename H> H bogus_handle() {
    static uint64_t junk[64] = {0xdeadbeefdeadbeefull, 0x1234, 0x5678};
    return reinterpret_cast<H>(&junk[0]);
}

} // namespace apitest

#endif
