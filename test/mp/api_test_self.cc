/*
 * api_test: a rank sending to itself (rank 0 of 1) through every progress
 * mode, and both thread modes for the transfer sizes: payloads, completion
 * entries and blocking waits.
 */
#include "api_util.h"

#include <cstdint>
#include <string>
#include <thread>

using apitest::ApiFixture;
using apitest::bounded;
using apitest::Buf;
using apitest::mode_name;

namespace {

uint8_t pat(size_t i, uint32_t tid) {
    return static_cast<uint8_t>((i * 131u) ^ (i >> 9) ^ (tid * 17u) ^ 0x5b);
}

class SelfSend : public ApiFixture,
                 public ::testing::WithParamInterface<p2p_progress_mode_t> {
protected:
    void SetUp() override {
        p2p_config_t cfg = apitest::mode_config(GetParam());
        open(&cfg);
    }
};

struct Modes {
    p2p_progress_mode_t progress;
    p2p_thread_mode_t threads;
};

// Every progress mode in both thread modes: in P2P_THREAD_SERIALIZED the
// test thread's own p2p_comm_wait calls progress (the backstop thread only
// between calls).
class SelfSendSizes : public ApiFixture, public ::testing::WithParamInterface<Modes> {
protected:
    void SetUp() override {
        p2p_config_t cfg = apitest::mode_config(GetParam().progress);
        cfg.field_mask |= P2P_CONFIG_FIELD_THREAD_MODE;
        cfg.thread_mode = GetParam().threads;
        open(&cfg);
    }
};

} // namespace

TEST_P(SelfSendSizes, SizesBothOrders) {
    const size_t sizes[] = {0, 1, 8, 4095, 65536, (size_t(1) << 20) + 3,
                            size_t(4) << 20};
    const size_t kGuard = 64;
    for (int recv_first = 0; recv_first < 2; ++recv_first) {
        for (size_t len : sizes) {
            const uint32_t tid = static_cast<uint32_t>(len % 100000 + recv_first);
            Buf s(len + 1), r(len + kGuard, 0xEE);
            for (size_t i = 0; i < len; ++i) {
                s.data()[i] = pat(i, tid);
            }
            p2p_mem_h sm = nullptr, rm = nullptr;
            ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, s.data(), len + 1, &sm));
            ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, r.data(), len + kGuard, &rm));
            void *su = reinterpret_cast<void *>(uintptr_t(0x5000 + len));
            void *ru = reinterpret_cast<void *>(uintptr_t(0x7000 + len));
            if (recv_first) {
                ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, tid, r.data(), len, rm, ru));
            }
            ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, tid, s.data(), len, sm, su));
            if (!recv_first) {
                ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, tid, r.data(), len, rm, ru));
            }
            p2p_completion_t rc = wait_one(P2P_QUEUE_RECV);
            p2p_completion_t sc = wait_one(P2P_QUEUE_SEND);
            SCOPED_TRACE(testing::Message() << "len " << len << " recv_first "
                                            << recv_first);
            EXPECT_EQ(P2P_OK, rc.status);
            EXPECT_EQ(ru, rc.user_context);
            EXPECT_EQ(0u, rc.peer);
            EXPECT_EQ(tid, rc.tensor_id);
            EXPECT_EQ(len, rc.bytes);
            EXPECT_EQ(P2P_OK, sc.status);
            EXPECT_EQ(su, sc.user_context);
            EXPECT_EQ(0u, sc.peer);
            EXPECT_EQ(tid, sc.tensor_id);
            EXPECT_EQ(len, sc.bytes);
            size_t bad = len;
            for (size_t i = 0; i < len && bad == len; ++i) {
                if (r.data()[i] != pat(i, tid)) {
                    bad = i;
                }
            }
            EXPECT_EQ(len, bad) << "first wrong byte";
            for (size_t i = len; i < len + kGuard; ++i) {
                ASSERT_EQ(0xEE, r.data()[i]) << "written past the receive at " << i;
            }
            EXPECT_EQ(0u, pending(P2P_QUEUE_SEND));
            EXPECT_EQ(0u, pending(P2P_QUEUE_RECV));
            EXPECT_EQ(P2P_OK, p2p_mem_deregister(sm));
            EXPECT_EQ(P2P_OK, p2p_mem_deregister(rm));
        }
    }
}

TEST_P(SelfSend, WaitForeverWakesOnCompletion) {
    Buf b(256);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), 256, &mem));
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 4, b.data(), 64, mem, nullptr));
    std::thread sender([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        EXPECT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 4, b.data() + 128, 64, mem, nullptr));
    });
    p2p_completion_t c{};
    size_t n = 0;
    p2p_status_t st = P2P_ERR_TRANSPORT;
    auto t0 = std::chrono::steady_clock::now();
    bounded("p2p_comm_wait(-1)", 20, [&] {
        st = p2p_comm_wait(comm_, P2P_QUEUE_RECV, &c, 1, &n, -1);
    });
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                   .count();
    sender.join();
    EXPECT_EQ(P2P_OK, st);
    EXPECT_EQ(1u, n);
    EXPECT_EQ(P2P_OK, c.status);
    EXPECT_LT(s, 5.0) << "wait woke late";
    EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

TEST_P(SelfSend, WaitForeverEndsAtShutdown) {
    Buf b(256);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), 256, &mem));
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 5, b.data(), 64, mem, nullptr));
    std::thread stopper([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        EXPECT_EQ(P2P_OK, p2p_comm_shutdown(comm_));
    });
    // First the cancelled receive, then nothing can arrive any more.
    p2p_completion_t c{};
    size_t n = 0;
    p2p_status_t st = P2P_ERR_TRANSPORT;
    bounded("p2p_comm_wait(-1) until the cancellation", 20, [&] {
        st = p2p_comm_wait(comm_, P2P_QUEUE_RECV, &c, 1, &n, -1);
    });
    stopper.join();
    EXPECT_EQ(P2P_OK, st);
    EXPECT_EQ(1u, n);
    EXPECT_EQ(P2P_ERR_CANCELED, c.status);
    n = 7;
    bounded("p2p_comm_wait(-1) after shutdown", 20, [&] {
        st = p2p_comm_wait(comm_, P2P_QUEUE_RECV, &c, 1, &n, -1);
    });
    EXPECT_EQ(P2P_ERR_SHUTDOWN, st);
    EXPECT_EQ(0u, n);
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

TEST_P(SelfSend, WaitForeverEndsWhenAnotherThreadDestroys) {
    std::thread destroyer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        EXPECT_EQ(P2P_OK, p2p_comm_destroy(comm_));
    });
    p2p_completion_t c{};
    size_t n = 7;
    p2p_status_t st = P2P_ERR_TRANSPORT;
    bounded("p2p_comm_wait(-1) across p2p_comm_destroy", 20, [&] {
        st = p2p_comm_wait(comm_, P2P_QUEUE_SEND, &c, 1, &n, -1);
    });
    destroyer.join();
    EXPECT_EQ(P2P_ERR_SHUTDOWN, st);
    EXPECT_EQ(0u, n);
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_comm_wait(comm_, P2P_QUEUE_SEND, &c, 1, &n, -1));
    comm_ = nullptr;  // the fixture must not destroy it again
}

// The WaitForever tests call from two threads at once: P2P_THREAD_MULTI only.
INSTANTIATE_TEST_SUITE_P(Modes, SelfSend,
                         ::testing::Values(P2P_PROGRESS_ADAPTIVE, P2P_PROGRESS_BUSY,
                                           P2P_PROGRESS_EVENT),
                         [](const ::testing::TestParamInfo<p2p_progress_mode_t> &i) {
                             return mode_name(i.param);
                         });

INSTANTIATE_TEST_SUITE_P(
    Modes, SelfSendSizes,
    ::testing::Values(Modes{P2P_PROGRESS_ADAPTIVE, P2P_THREAD_MULTI},
                      Modes{P2P_PROGRESS_BUSY, P2P_THREAD_MULTI},
                      Modes{P2P_PROGRESS_EVENT, P2P_THREAD_MULTI},
                      Modes{P2P_PROGRESS_ADAPTIVE, P2P_THREAD_SERIALIZED},
                      Modes{P2P_PROGRESS_BUSY, P2P_THREAD_SERIALIZED},
                      Modes{P2P_PROGRESS_EVENT, P2P_THREAD_SERIALIZED}),
    [](const ::testing::TestParamInfo<Modes> &i) {
        return mode_name(i.param.progress) +
               (i.param.threads == P2P_THREAD_SERIALIZED ? "_serialized" : "_multi");
    });
