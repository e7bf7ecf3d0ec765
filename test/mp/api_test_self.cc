/*
 * api_test: a rank sending to itself (rank 0 of 1) through every progress
 * mode, and both thread modes for the transfer sizes: payloads, completion
 * entries and blocking waits.
 */
#include "api_util.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using apitest::ApiFixture;
using apitest::EnvGuard;
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

// Every progress mode in both thread modes: in P2P_THREAD_SERIALIZED the
// test thread's own p2p_comm_wait calls progress (the backstop thread only
// between calls).
class SelfSendSizes : public apitest::ModesFixture {};

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

// Single posts take short paths when the operation finishes inside the
// call (a send UCX completes at once, a receive whose message is already
// here) and the general path otherwise; receives stop looking for waiting
// messages after a run that found none and start again when one is there.
// Runs of each order, and batched sends, must all complete once with the
// right entry (bytes: the message's, not the buffer's) and leave nothing
// pending.
TEST_P(SelfSendSizes, RunsOfEachOrderAndBatches) {
    const size_t sizes[] = {8, 100, 5000};
    const size_t kSlack = 37;  // receive buffers are longer than the messages
    const size_t kSlot = 5000 + kSlack;
    const int kRun = 12, kRuns = 6;
    const size_t kBytes = kSlot * kRun + 64;  // the marker's 8 bytes at the end
    Buf s(kBytes), r(kBytes, 0xEE);
    p2p_mem_h sm = nullptr, rm = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, s.data(), kBytes, &sm));
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, r.data(), kBytes, &rm));
    uint32_t tid0 = 1000;
    for (int run = 0; run < kRuns; ++run) {
        const bool recv_first = (run % 2) == 0;
        const bool batched = run >= 4;  // the last two runs send in one batch
        std::vector<p2p_block_t> blocks;
        for (int k = 0; k < kRun; ++k) {
            const size_t len = sizes[k % 3];
            const uint32_t tid = tid0 + static_cast<uint32_t>(k);
            uint8_t *sp = s.data() + k * kSlot, *rp = r.data() + k * kSlot;
            for (size_t i = 0; i < len; ++i) sp[i] = pat(i, tid);
            std::memset(rp, 0xEE, kSlot);
            void *su = reinterpret_cast<void *>(uintptr_t(0x10000 + tid));
            if (recv_first) {
                ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, tid, rp, len + kSlack, rm,
                                                reinterpret_cast<void *>(uintptr_t(tid))));
            }
            if (batched) {
                blocks.push_back(p2p_block_t{0, tid, sp, len, sm, su});
            } else {
                ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, tid, sp, len, sm, su));
            }
        }
        if (batched) {
            size_t bad = 0;
            ASSERT_EQ(P2P_OK, p2p_comm_send_batch(comm_, blocks.data(), blocks.size(), &bad));
        }
        if (!recv_first) {
            // A marker after the run, received at once: progress that
            // delivers it has delivered the run before it, so the run's
            // receives below find their messages waiting.
            const uint32_t marker = tid0 + kRun;
            ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, marker, s.data(), 8, sm, nullptr));
            ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, marker, r.data() + kRun * kSlot,
                                            8, rm, nullptr));
            p2p_completion_t mc = wait_one(P2P_QUEUE_RECV);
            ASSERT_EQ(marker, mc.tensor_id);
            ASSERT_EQ(P2P_OK, mc.status);
            for (int k = 0; k < kRun; ++k) {
                const uint32_t tid = tid0 + static_cast<uint32_t>(k);
                ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, tid, r.data() + k * kSlot,
                                                sizes[k % 3] + kSlack, rm,
                                                reinterpret_cast<void *>(uintptr_t(tid))));
            }
        }
        std::vector<int> got_recv(kRun, 0), got_send(kRun, 0);
        const int nsend = kRun + (recv_first ? 0 : 1);  // with the marker's
        for (int n = 0; n < kRun + nsend; ++n) {
            const bool is_recv = n < kRun;
            p2p_completion_t c = wait_one(is_recv ? P2P_QUEUE_RECV : P2P_QUEUE_SEND);
            ASSERT_EQ(P2P_OK, c.status) << "run " << run;
            if (!is_recv && c.tensor_id == tid0 + kRun) {
                continue;  // the marker's send
            }
            ASSERT_GE(c.tensor_id, tid0);
            const int k = static_cast<int>(c.tensor_id - tid0);
            ASSERT_LT(k, kRun);
            EXPECT_EQ(sizes[k % 3], c.bytes) << "run " << run << " message " << k;
            if (is_recv) {
                ++got_recv[k];
                EXPECT_EQ(reinterpret_cast<void *>(uintptr_t(c.tensor_id)), c.user_context);
                const uint8_t *rp = r.data() + k * kSlot;
                for (size_t i = 0; i < sizes[k % 3]; ++i) {
                    ASSERT_EQ(pat(i, c.tensor_id), rp[i]) << "run " << run << " byte " << i;
                }
                ASSERT_EQ(0xEE, rp[sizes[k % 3]]) << "written past the message";
            } else {
                ++got_send[k];
                EXPECT_EQ(reinterpret_cast<void *>(uintptr_t(0x10000 + c.tensor_id)),
                          c.user_context);
            }
        }
        for (int k = 0; k < kRun; ++k) {
            EXPECT_EQ(1, got_recv[k]) << "run " << run << " receive " << k;
            EXPECT_EQ(1, got_send[k]) << "run " << run << " send " << k;
        }
        EXPECT_EQ(0u, pending(P2P_QUEUE_SEND));
        EXPECT_EQ(0u, pending(P2P_QUEUE_RECV));
        tid0 += kRun + 1;
    }
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(sm));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(rm));
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

INSTANTIATE_TEST_SUITE_P(Modes, SelfSendSizes, apitest::all_modes(), apitest::modes_name);

// A single-process run waits for nobody and ignores P2P_BOOTSTRAP_TIMEOUT_MS
// (docs/WIREUP.md): a value the multi-rank bootstraps refuse (0, not a
// number) used to make p2p_comm_create fail with INVALID_PARAM there,
// after p2p_bootstrap_create had succeeded.
// ApiFixture's open/close, called per value (SetUp opens nothing: the
// variable is set first).
class ApiSelfTimeout : public ApiFixture {
protected:
    void SetUp() override {}
};

TEST_F(ApiSelfTimeout, SingleProcessIgnoresTheBootstrapTimeout) {
    for (const char *v : {"0", "x"}) {
        SCOPED_TRACE(v);
        EnvGuard env("P2P_BOOTSTRAP_TIMEOUT_MS", v);
        open(nullptr);  // comm_create with the variable set
        close();
    }
}
