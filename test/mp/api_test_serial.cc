/*
 * api_test: P2P_THREAD_SERIALIZED contexts (one call at a time; the
 * application's calls progress, a backstop thread only while it stays
 * away): poll and wait calls move every message, idle waits sleep, and
 * ordered calls from different threads are allowed.
 */
#include "api_util.h"

#include <dirent.h>
#include <fstream>
#include <sys/resource.h>
#include <vector>

using apitest::ApiFixture;
using apitest::bounded;
using apitest::Buf;

namespace {

p2p_config_t serialized(p2p_progress_mode_t mode) {
    p2p_config_t c = apitest::mode_config(mode);
    c.field_mask |= P2P_CONFIG_FIELD_THREAD_MODE;
    c.thread_mode = P2P_THREAD_SERIALIZED;
    return c;
}

/** Threads of this process named `name` (/proc/self/task/N/comm). */
int threads_named(const std::string &name) {
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    if (d == nullptr) {
        return -1;
    }
    while (struct dirent *e = readdir(d)) {
        if (e->d_name[0] == '.') {
            continue;
        }
        std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/comm");
        std::string comm;
        if (std::getline(f, comm) && comm == name) {
            ++n;
        }
    }
    closedir(d);
    return n;
}

double cpu_seconds() {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

class Serialized : public ApiFixture,
                   public ::testing::WithParamInterface<p2p_progress_mode_t> {
protected:
    void SetUp() override {
        p2p_config_t cfg = serialized(GetParam());
        open(&cfg);
    }
};

} // namespace

// A serialized context runs a backstop thread (named p2p-backstop), never
// the full progress thread; each context's thread ends with it.
TEST(ApiSerialized, BackstopInsteadOfProgressThread) {
    const int progress0 = threads_named("p2p-progress");
    const int backstop0 = threads_named("p2p-backstop");
    ASSERT_GE(progress0, 0) << "cannot read /proc/self/task";
    p2p_context_h multi = nullptr, serial = nullptr;
    p2p_config_t cfg = serialized(P2P_PROGRESS_ADAPTIVE);
    ASSERT_EQ(P2P_OK, p2p_context_create(&cfg, &serial));
    EXPECT_EQ(progress0, threads_named("p2p-progress"))
        << "a serialized context started a progress thread";
    EXPECT_EQ(backstop0 + 1, threads_named("p2p-backstop"));
    cfg.thread_mode = P2P_THREAD_MULTI;
    ASSERT_EQ(P2P_OK, p2p_context_create(&cfg, &multi));
    EXPECT_EQ(progress0 + 1, threads_named("p2p-progress"))
        << "a multi-threaded context runs one progress thread";
    EXPECT_EQ(backstop0 + 1, threads_named("p2p-backstop"));
    EXPECT_EQ(P2P_OK, p2p_context_destroy(multi));
    EXPECT_EQ(P2P_OK, p2p_context_destroy(serial));
    EXPECT_EQ(progress0, threads_named("p2p-progress"));
    EXPECT_EQ(backstop0, threads_named("p2p-backstop"));
}

// Nothing but p2p_comm_poll: a rendezvous-sized message and an eager one
// must complete (poll on an empty queue progresses the worker).
TEST_P(Serialized, PollAloneMovesMessages) {
    const size_t kLen[] = {8, (size_t(2) << 20) + 5};
    Buf s(kLen[1], 0x3c), r(kLen[1] * 2, 0);
    p2p_mem_h sm = nullptr, rm = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, s.data(), kLen[1], &sm));
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, r.data(), kLen[1] * 2, &rm));
    for (uint32_t t = 0; t < 2; ++t) {
        ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 40 + t, r.data() + t * kLen[1],
                                        kLen[t], rm, nullptr));
        ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 40 + t, s.data(), kLen[t], sm,
                                        nullptr));
    }
    size_t got[2] = {0, 0};
    uint64_t bytes[2] = {0, 0};
    auto t0 = std::chrono::steady_clock::now();
    while ((got[0] < 2 || got[1] < 2) &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
        for (int q = 0; q < 2; ++q) {
            p2p_completion_t e[4];
            size_t n = 0;
            ASSERT_EQ(P2P_OK, p2p_comm_poll(comm_, static_cast<p2p_queue_t>(q), e, 4, &n));
            for (size_t i = 0; i < n; ++i) {
                EXPECT_EQ(P2P_OK, e[i].status);
                bytes[q] += e[i].bytes;
            }
            got[q] += n;
        }
    }
    ASSERT_EQ(2u, got[P2P_QUEUE_SEND]) << "sends did not complete by polling";
    ASSERT_EQ(2u, got[P2P_QUEUE_RECV]) << "receives did not complete by polling";
    EXPECT_EQ(kLen[0] + kLen[1], bytes[P2P_QUEUE_SEND]);
    EXPECT_EQ(kLen[0] + kLen[1], bytes[P2P_QUEUE_RECV]);
    EXPECT_EQ(0x3c, r.data()[0]);
    EXPECT_EQ(0x3c, r.data()[kLen[1] + kLen[1] - 1]);
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(sm));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(rm));
}

// With no progress thread, a zero-timeout wait must progress like a poll:
// a rendezvous-sized self send completes within a few such calls.
TEST_P(Serialized, ZeroTimeoutWaitProgresses) {
    const size_t kLen = (size_t(2) << 20) + 1;
    Buf b(2 * kLen, 0x5a);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), 2 * kLen, &mem));
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 77, b.data(), kLen, mem, nullptr));
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 77, b.data() + kLen, kLen, mem, nullptr));
    size_t got[2] = {0, 0};
    int calls = 0;
    for (; calls < 200 && (got[0] == 0 || got[1] == 0); ++calls) {
        for (p2p_queue_t q : {P2P_QUEUE_SEND, P2P_QUEUE_RECV}) {
            p2p_completion_t c{};
            size_t n = 0;
            p2p_status_t st = p2p_comm_wait(comm_, q, &c, 1, &n, 0);
            ASSERT_TRUE(st == P2P_OK || st == P2P_ERR_TIMEOUT) << p2p_status_string(st);
            if (st == P2P_OK) {
                EXPECT_EQ(P2P_OK, c.status);
                EXPECT_EQ(kLen, c.bytes);
                got[q] += n;
            }
        }
    }
    EXPECT_EQ(1u, got[P2P_QUEUE_SEND]) << "after " << calls << " zero-timeout waits";
    EXPECT_EQ(1u, got[P2P_QUEUE_RECV]) << "after " << calls << " zero-timeout waits";
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

// A wait with nothing to arrive keeps its deadline; outside busy mode it
// sleeps rather than spins.
TEST_P(Serialized, IdleWaitTimesOutAndSleeps) {
    Buf b(64);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), 64, &mem));
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 9, b.data(), 8, mem, nullptr));
    const int kMs = 600;
    p2p_completion_t e[2];
    size_t n = 5;
    double cpu0 = cpu_seconds();
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(P2P_ERR_TIMEOUT, p2p_comm_wait(comm_, P2P_QUEUE_RECV, e, 2, &n, kMs));
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                      .count();
    double cpu = cpu_seconds() - cpu0;
    EXPECT_EQ(0u, n);
    EXPECT_GE(wall, kMs / 1000.0 * 0.9) << "returned early";
    EXPECT_LT(wall, kMs / 1000.0 + 1.0) << "returned late";
    if (GetParam() != P2P_PROGRESS_BUSY) {
        EXPECT_LT(cpu, wall * 0.3) << "an idle wait used " << cpu << " s of CPU in "
                                   << wall << " s";
    }
    // The receive is still there and completes once the send comes.
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 9, b.data() + 32, 8, mem, nullptr));
    EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_RECV).status);
    EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

// Calls from different threads, ordered by the application (join), are
// allowed; a wait forever ends when its message completes.
TEST_P(Serialized, OrderedCallsFromSeveralThreads) {
    Buf b(size_t(1) << 20);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), b.size(), &mem));
    const size_t kHalf = b.size() / 2;
    std::thread poster([&] {
        EXPECT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 11, b.data(), kHalf, mem, nullptr));
        EXPECT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 11, b.data() + kHalf, kHalf, mem,
                                        nullptr));
    });
    poster.join();
    for (p2p_queue_t q : {P2P_QUEUE_RECV, P2P_QUEUE_SEND}) {
        p2p_completion_t c{};
        size_t n = 0;
        p2p_status_t st = P2P_ERR_TRANSPORT;
        std::thread waiter([&] { st = p2p_comm_wait(comm_, q, &c, 1, &n, -1); });
        bounded("p2p_comm_wait(-1) in another thread", 20, [&] { waiter.join(); });
        EXPECT_EQ(P2P_OK, st);
        EXPECT_EQ(1u, n);
        EXPECT_EQ(P2P_OK, c.status);
        EXPECT_EQ(kHalf, c.bytes);
    }
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

// Shutdown cancels the receives nobody sent; the waits see them without a
// progress thread.
TEST_P(Serialized, ShutdownCancelsPending) {
    Buf b(256);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), 256, &mem));
    for (uint32_t t = 0; t < 3; ++t) {
        ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 60 + t, b.data() + t * 8, 8, mem,
                                        nullptr));
    }
    ASSERT_EQ(P2P_OK, p2p_comm_shutdown(comm_));
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(P2P_ERR_CANCELED, wait_one(P2P_QUEUE_RECV, 5000).status);
    }
    p2p_completion_t c{};
    size_t n = 7;
    EXPECT_EQ(P2P_ERR_SHUTDOWN, p2p_comm_wait(comm_, P2P_QUEUE_RECV, &c, 1, &n, -1));
    EXPECT_EQ(0u, n);
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

// Entries take precedence over a kept signal (p2p.h), also when the
// entry is a message that arrived but no call has progressed yet: the
// wait returned P2P_ERR_INTERRUPTED before its own progress round, so the
// message came only with the next wait (the backstop leaves a calling
// application alone). The signal stays kept for the next empty wait.
TEST_P(Serialized, KeptSignalYieldsToAnArrivedMessage) {
    Buf b(64, 0x6b);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), b.size(), &mem));
    for (uint32_t i = 0; i < 20; ++i) {
        SCOPED_TRACE("round " + std::to_string(i));
        ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, i, b.data(), 10, mem, nullptr));
        ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, i, b.data() + 32, 10, mem, nullptr));
        ASSERT_EQ(P2P_OK, p2p_comm_signal(comm_, P2P_QUEUE_RECV));
        p2p_completion_t c{};
        size_t n = 0;
        ASSERT_EQ(P2P_OK, p2p_comm_wait(comm_, P2P_QUEUE_RECV, &c, 1, &n, 5000));
        EXPECT_EQ(1u, n);
        EXPECT_EQ(i, c.tensor_id);
        EXPECT_EQ(P2P_ERR_INTERRUPTED, p2p_comm_wait(comm_, P2P_QUEUE_RECV, &c, 1, &n, 5000));
        EXPECT_EQ(0u, n);
        ASSERT_EQ(P2P_OK, p2p_comm_wait(comm_, P2P_QUEUE_SEND, &c, 1, &n, 5000));
    }
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

INSTANTIATE_TEST_SUITE_P(Modes, Serialized,
                         ::testing::Values(P2P_PROGRESS_ADAPTIVE, P2P_PROGRESS_BUSY,
                                           P2P_PROGRESS_EVENT),
                         [](const ::testing::TestParamInfo<p2p_progress_mode_t> &i) {
                             return apitest::mode_name(i.param);
                         });
