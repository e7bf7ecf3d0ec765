/*
 * api_test, continued: P2P_ERR_NO_MEMORY from each public call that
 * allocates, provoked by failing this thread's C++ allocations
 * (test/fail_new.h; UCX's own malloc calls are untouched). Each test then
 * checks what the status promises: nothing half-made, nothing posted,
 * nothing lost, and the same call succeeding once memory is back.
 * (test/ucx_warnings.h hears what UCX reports at teardown.)
 */
#include "api_util.h"

#include "../fail_each.h"

#include "../ucx_warnings.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

using namespace apitest;

namespace {

constexpr size_t kMsg = 8;

/** Wait for one successful kMsg-byte receive on comm. */
void expect_one_message(p2p_comm_h comm) {
    p2p_completion_t c{};
    size_t n = 0;
    EXPECT_EQ(P2P_OK, p2p_comm_wait(comm, P2P_QUEUE_RECV, &c, 1, &n, 10000));
    EXPECT_EQ(1u, n);
    EXPECT_EQ(P2P_OK, c.status);
    EXPECT_EQ(kMsg, c.bytes);
}

/** One kMsg-byte message to ourselves, from buf to buf + kMsg (both in
 *  mem, registered on comm's context), tensor 1. */
void message_to_self(p2p_comm_h comm, p2p_mem_h mem, uint8_t *buf) {
    EXPECT_EQ(P2P_OK, p2p_comm_recv(comm, 0, 1, buf + kMsg, kMsg, mem, nullptr));
    EXPECT_EQ(P2P_OK, p2p_comm_send(comm, 0, 1, buf, kMsg, mem, nullptr));
    expect_one_message(comm);
}

} // namespace

TEST(ApiNoMemory, ContextCreate) {
    p2p_context_h ctx = bogus_handle<p2p_context_h>();
    {
        p2ptest::NoMemory none;
        EXPECT_EQ(P2P_ERR_NO_MEMORY, p2p_context_create(nullptr, &ctx));
    }
    EXPECT_EQ(bogus_handle<p2p_context_h>(), ctx) << "the handle was written";
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
}

TEST(ApiNoMemory, CommCreate) {
    p2p_context_h ctx = nullptr;
    p2p_bootstrap_h bs = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    ASSERT_EQ(P2P_OK, p2p_bootstrap_create(P2P_BOOTSTRAP_SINGLE, &bs));
    p2p_comm_h comm = bogus_handle<p2p_comm_h>();
    {
        p2ptest::NoMemory none;
        EXPECT_EQ(P2P_ERR_NO_MEMORY, p2p_comm_create(ctx, bs, &comm));
    }
    EXPECT_EQ(bogus_handle<p2p_comm_h>(), comm) << "the handle was written";
    // The failed create holds no communicator id and leaves the bootstrap
    // usable: the next create works, and moves a message.
    ASSERT_EQ(P2P_OK, p2p_comm_create(ctx, bs, &comm));
    Buf b(2 * kMsg, 0x5a);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx, b.data(), b.size(), &mem));
    message_to_self(comm, mem, b.data());
    EXPECT_EQ(P2P_OK, p2p_comm_destroy(comm));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
    EXPECT_EQ(P2P_OK, p2p_bootstrap_destroy(bs));
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
}

// The registration's own record is allocated before UCX registers: a
// failure after ucp_mem_map would leave UCX's handle registered for good,
// which UCX reports when the context is destroyed ("regions remained",
// "was not returned to mpool").
TEST(ApiNoMemory, MemRegisterRegistersNothing) {
    if (!p2ptest::UcxWarnings::audible()) {
        GTEST_SKIP() << "UCX_LOG_LEVEL hides UCX's warnings, which this test counts";
    }
    p2p_context_h ctx = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    Buf b(4096);
    p2p_mem_h mem = bogus_handle<p2p_mem_h>();
    {
        p2ptest::NoMemory none;
        EXPECT_EQ(P2P_ERR_NO_MEMORY, p2p_mem_register(ctx, b.data(), b.size(), &mem));
    }
    EXPECT_EQ(bogus_handle<p2p_mem_h>(), mem) << "the handle was written";
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx, b.data(), b.size(), &mem));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
    p2ptest::UcxWarnings warnings;
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
    EXPECT_EQ(0, warnings.seen()) << "UCX found a registration left behind";
}

namespace {

/** A single-rank communicator with one registered buffer of `slots`
 *  messages (message i at slot i, filled with i). */
class NoMemoryPosts : public ApiFixture {
protected:
    static constexpr size_t kSlots = 1024;
    void SetUp() override {
        ApiFixture::SetUp();
        for (size_t i = 0; i < kSlots; ++i) {
            std::memset(send_.data() + i * kMsg, static_cast<int>(i & 0xff), kMsg);
        }
        ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, send_.data(), send_.size(), &smem_));
        ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, recv_.data(), recv_.size(), &rmem_));
        // One message each way first: the endpoint to ourselves and the
        // first completion segments exist before allocations fail.
        ASSERT_EQ(P2P_OK, send(kSlots - 1));
        wait_one(P2P_QUEUE_SEND);
        ASSERT_EQ(P2P_OK, recv(kSlots - 1));
        wait_one(P2P_QUEUE_RECV);
    }
    void TearDown() override {
        // The communicator first: sends of the tests are still unreceived.
        if (comm_ != nullptr) {
            EXPECT_EQ(P2P_OK, p2p_comm_destroy(comm_));
            comm_ = nullptr;
        }
        if (smem_ != nullptr) {
            EXPECT_EQ(P2P_OK, p2p_mem_deregister(smem_));
        }
        if (rmem_ != nullptr) {
            EXPECT_EQ(P2P_OK, p2p_mem_deregister(rmem_));
        }
        ApiFixture::TearDown();
    }
    p2p_status_t send(size_t i) {
        return p2p_comm_send(comm_, 0, static_cast<uint32_t>(i), send_.data() + i * kMsg,
                             kMsg, smem_, nullptr);
    }
    p2p_status_t recv(size_t i) {
        return p2p_comm_recv(comm_, 0, static_cast<uint32_t>(i), recv_.data() + i * kMsg,
                             kMsg, rmem_, nullptr);
    }
    /** Wait (up to 10 s) until `want` entries of q came, then take what
     *  else is there now; each must be OK with kMsg bytes. Returns the
     *  count taken. */
    size_t collect(p2p_queue_t q, size_t want) {
        std::vector<p2p_completion_t> c(kSlots);
        size_t total = 0, n = 0;
        for (;;) {
            const int timeout = total < want ? 10000 : 0;
            p2p_status_t st = p2p_comm_wait(comm_, q, c.data(), c.size(), &n, timeout);
            if (st == P2P_ERR_TIMEOUT) break;
            EXPECT_EQ(P2P_OK, st);
            if (st != P2P_OK) break;
            for (size_t i = 0; i < n; ++i) {
                EXPECT_EQ(P2P_OK, c[i].status) << "tensor " << c[i].tensor_id;
                EXPECT_EQ(kMsg, c[i].bytes) << "tensor " << c[i].tensor_id;
            }
            total += n;
        }
        return total;
    }
    /** Post with allocations failing until one post reports NO_MEMORY;
     *  returns how many were accepted before it (0 when none failed). */
    template <class Post> size_t until_no_memory(Post post) {
        p2ptest::NoMemory none;
        for (size_t i = 0; i + 1 < kSlots; ++i) {
            p2p_status_t st = post(i);
            if (st == P2P_ERR_NO_MEMORY) return i;
            EXPECT_EQ(P2P_OK, st) << "post " << i;
            if (st != P2P_OK) return 0;
        }
        ADD_FAILURE() << "no post needed memory in " << kSlots - 1 << " posts";
        return 0;
    }

    Buf send_{kSlots * kMsg};
    Buf recv_{kSlots * kMsg};
    p2p_mem_h smem_ = nullptr;
    p2p_mem_h rmem_ = nullptr;
};

} // namespace

// Completions are queued unpopped until the queue needs a new segment: the
// send that needs it fails before anything is sent.
TEST_F(NoMemoryPosts, SendWithoutRoomForItsCompletionSendsNothing) {
    const size_t k = until_no_memory([&](size_t i) { return send(i); });
    ASSERT_GT(k, 0u);
    EXPECT_EQ(k, collect(P2P_QUEUE_SEND, k)) << "one completion per accepted send";
    EXPECT_EQ(0u, pending(P2P_QUEUE_SEND));
    // What was accepted arrives; the refused send never does.
    for (size_t i = 0; i <= k; ++i) ASSERT_EQ(P2P_OK, recv(i));
    std::vector<p2p_completion_t> c(kSlots);
    size_t got = 0, n = 0;
    while (got < k) {
        ASSERT_EQ(P2P_OK, p2p_comm_wait(comm_, P2P_QUEUE_RECV, c.data(), c.size(), &n, 10000));
        ASSERT_GT(n, 0u);
        for (size_t j = 0; j < n; ++j) {
            ASSERT_LT(c[j].tensor_id, k) << "the refused send arrived";
            EXPECT_EQ(P2P_OK, c[j].status);
        }
        got += n;
    }
    EXPECT_EQ(0, std::memcmp(send_.data(), recv_.data(), k * kMsg));
    EXPECT_EQ(P2P_ERR_TIMEOUT, p2p_comm_wait(comm_, P2P_QUEUE_RECV, c.data(), 1, &n, 200))
        << "the refused send arrived";
    EXPECT_EQ(1u, pending(P2P_QUEUE_RECV));
    // Sent now, it completes the receive waiting for it.
    ASSERT_EQ(P2P_OK, send(k));
    EXPECT_EQ(k, wait_one(P2P_QUEUE_RECV).tensor_id);
    EXPECT_EQ(0, std::memcmp(send_.data() + k * kMsg, recv_.data() + k * kMsg, kMsg));
}

// The same for a receive whose message already waits: the refused receive
// takes nothing, so the message is received by the next receive posted.
TEST_F(NoMemoryPosts, RecvWithoutRoomForItsCompletionTakesNothing) {
    for (size_t i = 0; i + 1 < kSlots; ++i) {
        ASSERT_EQ(P2P_OK, send(i));
        if (i % 64 == 63) collect(P2P_QUEUE_SEND, 64);
    }
    collect(P2P_QUEUE_SEND, (kSlots - 1) % 64);
    const size_t k = until_no_memory([&](size_t i) { return recv(i); });
    ASSERT_GT(k, 0u);
    EXPECT_EQ(0u, pending(P2P_QUEUE_RECV)) << "the refused receive was posted";
    EXPECT_EQ(k, collect(P2P_QUEUE_RECV, k)) << "one completion per accepted receive";
    ASSERT_EQ(P2P_OK, recv(k));
    const p2p_completion_t c = wait_one(P2P_QUEUE_RECV);
    EXPECT_EQ(k, c.tensor_id);
    EXPECT_EQ(P2P_OK, c.status);
    EXPECT_EQ(0, std::memcmp(send_.data(), recv_.data(), (k + 1) * kMsg));
}

// A batch whose completions do not fit fails whole: no block is sent.
TEST_F(NoMemoryPosts, SendBatchWithoutMemorySendsNothing) {
    constexpr size_t kN = 512;  // more than one completion segment
    std::vector<p2p_block_t> blocks(kN);
    for (size_t i = 0; i < kN; ++i) {
        blocks[i] = {0, static_cast<uint32_t>(i), send_.data() + i * kMsg, kMsg, smem_,
                     nullptr};
    }
    size_t bad = 77;
    {
        p2ptest::NoMemory none;
        EXPECT_EQ(P2P_ERR_NO_MEMORY, p2p_comm_send_batch(comm_, blocks.data(), kN, &bad));
    }
    EXPECT_EQ(77u, bad) << "no block is bad: the batch as a whole did not fit";
    EXPECT_EQ(0u, pending(P2P_QUEUE_SEND));
    EXPECT_EQ(0u, collect(P2P_QUEUE_SEND, 0));
    ASSERT_EQ(P2P_OK, recv(0));
    p2p_completion_t c{};
    size_t n = 0;
    EXPECT_EQ(P2P_ERR_TIMEOUT, p2p_comm_wait(comm_, P2P_QUEUE_RECV, &c, 1, &n, 200))
        << "a block of the refused batch arrived";
    // With memory back, the same batch goes.
    ASSERT_EQ(P2P_OK, p2p_comm_send_batch(comm_, blocks.data(), kN, &bad));
    EXPECT_EQ(0u, wait_one(P2P_QUEUE_RECV).tensor_id);
}

TEST(ApiNoMemory, EachAllocationOfContextCreate) {
    p2p_context_h ctx = nullptr;
    const unsigned k = p2ptest::fail_each_allocation(
        [&] { return p2p_context_create(nullptr, &ctx); },
        [&](p2p_status_t st) {
            if (st == P2P_OK) {
                EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
            }
        });
    EXPECT_GT(k, 0u);
}

TEST(ApiNoMemory, EachAllocationOfCommCreateAndFirstMessage) {
    p2p_context_h ctx = nullptr;
    p2p_bootstrap_h bs = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    ASSERT_EQ(P2P_OK, p2p_bootstrap_create(P2P_BOOTSTRAP_SINGLE, &bs));
    Buf b(2 * kMsg, 0x33);
    p2p_mem_h mem = nullptr;
    p2p_comm_h comm = nullptr;
    unsigned k = p2ptest::fail_each_allocation(
        [&] { return p2p_mem_register(ctx, b.data(), b.size(), &mem); },
        [&](p2p_status_t) {});
    EXPECT_GT(k, 0u);
    k = p2ptest::fail_each_allocation([&] { return p2p_comm_create(ctx, bs, &comm); },
                             [&](p2p_status_t) {});
    EXPECT_GT(k, 0u);
    // The first receive and send to ourselves make the endpoint and the
    // operation records.
    k = p2ptest::fail_each_allocation(
        [&] { return p2p_comm_recv(comm, 0, 1, b.data() + kMsg, kMsg, mem, nullptr); },
        [&](p2p_status_t st) {
            size_t pend = 99;
            EXPECT_EQ(P2P_OK, p2p_comm_pending(comm, P2P_QUEUE_RECV, &pend));
            EXPECT_EQ(st == P2P_OK ? 1u : 0u, pend);
        });
    k = p2ptest::fail_each_allocation(
        [&] { return p2p_comm_send(comm, 0, 1, b.data(), kMsg, mem, nullptr); },
        [&](p2p_status_t) {});
    expect_one_message(comm);
    EXPECT_EQ(0, std::memcmp(b.data(), b.data() + kMsg, kMsg));
    EXPECT_EQ(P2P_OK, p2p_comm_destroy(comm));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
    EXPECT_EQ(P2P_OK, p2p_bootstrap_destroy(bs));
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
}

namespace {

/** A context, a single-rank communicator with a registration and one
 *  message through it (endpoint, operation records and completions made),
 *  and a receive left posted: what the teardown calls have to undo. */
struct Used {
    p2p_context_h ctx = nullptr;
    p2p_bootstrap_h bs = nullptr;
    p2p_comm_h comm = nullptr;
    p2p_mem_h mem = nullptr;
    Buf b{4 * kMsg};

    Used() {
        EXPECT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
        EXPECT_EQ(P2P_OK, p2p_bootstrap_create(P2P_BOOTSTRAP_SINGLE, &bs));
        EXPECT_EQ(P2P_OK, p2p_comm_create(ctx, bs, &comm));
        EXPECT_EQ(P2P_OK, p2p_mem_register(ctx, b.data(), b.size(), &mem));
        message_to_self(comm, mem, b.data());
        EXPECT_EQ(P2P_OK, p2p_comm_recv(comm, 0, 2, b.data() + 2 * kMsg, kMsg, mem, nullptr));
    }
    /** Releases what is still held (a test sets a handle it released to
     *  NULL). */
    ~Used() {
        if (comm != nullptr) {
            EXPECT_EQ(P2P_OK, p2p_comm_destroy(comm));
        }
        if (mem != nullptr) {
            EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
        }
        if (ctx != nullptr) {
            EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
        }
        EXPECT_EQ(P2P_OK, p2p_bootstrap_destroy(bs));
    }
    Used(const Used &) = delete;
    Used &operator=(const Used &) = delete;
};

/** teardown(u) with its allocations failing from the k-th on, for k = 0,
 *  1, ... until it makes fewer than k: it must succeed every time (the
 *  release calls document no P2P_ERR_NO_MEMORY), and check(u) must hold
 *  after. Returns how many allocations teardown makes. */
template <class Teardown, class Check>
unsigned teardown_without_memory(Teardown teardown, Check check) {
    for (unsigned k = 0; k < 200; ++k) {
        Used u;
        p2ptest::fail_new_after(k);
        const p2p_status_t st = teardown(u);
        const bool reached = p2ptest::fail_new_reached();
        p2ptest::fail_new_in_this_thread(false);
        EXPECT_EQ(P2P_OK, st) << "with allocation " << k << " failing";
        check(u);
        if (!reached) return k;
    }
    ADD_FAILURE() << "more than 200 allocations";
    return 200;
}

} // namespace

TEST(ApiNoMemory, CommShutdownAndDestroySucceedWithoutMemory) {
    teardown_without_memory([](Used &u) { return p2p_comm_shutdown(u.comm); },
                            [](Used &u) {
                                // The receive left posted ended, once.
                                p2p_completion_t c[2];
                                size_t n = 0;
                                EXPECT_EQ(P2P_OK, p2p_comm_poll(u.comm, P2P_QUEUE_RECV, c,
                                                                2, &n));
                                EXPECT_EQ(1u, n);
                                if (n == 1) {
                                    EXPECT_EQ(P2P_ERR_CANCELED, c[0].status);
                                }
                            });
    teardown_without_memory(
        [](Used &u) {
            const p2p_status_t st = p2p_comm_destroy(u.comm);
            if (st == P2P_OK) u.comm = nullptr;
            return st;
        },
        [](Used &) {});
}

TEST(ApiNoMemory, DeregisterAndContextDestroySucceedWithoutMemory) {
    teardown_without_memory(
        [](Used &u) {
            EXPECT_EQ(P2P_OK, p2p_comm_destroy(u.comm));
            u.comm = nullptr;
            const p2p_status_t st = p2p_mem_deregister(u.mem);
            if (st == P2P_OK) u.mem = nullptr;
            return st;
        },
        [](Used &) {});
    // The context takes its communicator and registration with it.
    teardown_without_memory(
        [](Used &u) {
            const p2p_status_t st = p2p_context_destroy(u.ctx);
            if (st == P2P_OK) {
                u.ctx = nullptr;
            }
            return st;
        },
        [](Used &u) {
            if (u.ctx != nullptr) return;
            size_t n = 0;
            EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_comm_pending(u.comm, P2P_QUEUE_RECV, &n));
            EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_mem_deregister(u.mem));
            u.comm = nullptr;
            u.mem = nullptr;
        });
}

// The batch calls on a fresh communicator (first endpoint, first records),
// and the completion calls, which have nothing to allocate.
TEST(ApiNoMemory, EachAllocationOfBatchesAndCompletionCalls) {
    Used u;
    // A fresh communicator: its first batch makes the endpoint.
    EXPECT_EQ(P2P_OK, p2p_comm_destroy(u.comm));
    EXPECT_EQ(P2P_OK, p2p_comm_create(u.ctx, u.bs, &u.comm));
    p2p_block_t recv[2] = {{0, 3, u.b.data() + 2 * kMsg, kMsg, u.mem, nullptr},
                           {0, 4, u.b.data() + 3 * kMsg, kMsg, u.mem, nullptr}};
    p2p_block_t send[2] = {{0, 3, u.b.data(), kMsg, u.mem, nullptr},
                           {0, 4, u.b.data(), kMsg, u.mem, nullptr}};
    p2p_completion_t c[4];
    size_t n = 0;
    size_t bad = 77;
    const unsigned k = p2ptest::fail_each_allocation(
                         [&] { return p2p_comm_recv_batch(u.comm, recv, 2, &bad); },
                         [&](p2p_status_t st) {
                             size_t pend = 99;
                             EXPECT_EQ(P2P_OK, p2p_comm_pending(u.comm, P2P_QUEUE_RECV, &pend));
                             EXPECT_EQ(st == P2P_OK ? 2u : 0u, pend) << "all or nothing";
                         });
    p2ptest::fail_each_allocation([&] { return p2p_comm_send_batch(u.comm, send, 2, &bad); },
                         [&](p2p_status_t) {});
    EXPECT_GT(k, 0u) << "the first batch allocated nothing";
    EXPECT_EQ(77u, bad) << "no failure named a block";
    // Nothing left to allocate for: these make no allocation at all.
    p2ptest::fail_new_after(0);
    size_t got = 0;
    for (int i = 0; i < 2 && got < 2; ++i) {
        EXPECT_EQ(P2P_OK, p2p_comm_wait(u.comm, P2P_QUEUE_RECV, c + got, 4 - got, &n, 10000));
        got += n;
    }
    size_t pend = 99;
    EXPECT_EQ(P2P_OK, p2p_comm_pending(u.comm, P2P_QUEUE_SEND, &pend));
    EXPECT_EQ(P2P_OK, p2p_comm_poll(u.comm, P2P_QUEUE_SEND, c + 2, 2, &n));
    EXPECT_EQ(P2P_OK, p2p_comm_signal(u.comm, P2P_QUEUE_SEND));
    const bool allocated = p2ptest::fail_new_reached();
    p2ptest::fail_new_in_this_thread(false);
    EXPECT_FALSE(allocated) << "a completion call allocated";
    EXPECT_EQ(2u, got);
    for (size_t i = 0; i < got; ++i) {
        EXPECT_EQ(P2P_OK, c[i].status);
    }
}

// A thread's first per-message call takes a read-section record (core/rcu.h);
// other threads' records are reused, so with every record held by a parked
// thread the call has to allocate one. Without memory: p2p_comm_poll is
// P2P_ERR_NO_MEMORY (as documented) and p2p_comm_signal still succeeds
// (it falls back to a counted reference); the same thread's next call,
// with memory back, works.
TEST(ApiNoMemory, FirstCallOfAThreadWithEveryRecordTaken) {
    Used u;
    // More threads than this process had inside at once: records are kept
    // for reuse, and each run of this test (--gtest_repeat) leaves one more.
    static int runs = 0;
    const int kParked = 256 + runs++;
    std::mutex mu;
    std::condition_variable cv;
    bool release = false;
    int inside = 0;  // parked threads past their first call
    std::vector<std::thread> parked;
    for (int i = 0; i < kParked; ++i) {
        parked.emplace_back([&] {
            p2p_completion_t c;
            size_t n = 0;
            EXPECT_EQ(P2P_OK, p2p_comm_poll(u.comm, P2P_QUEUE_SEND, &c, 1, &n));
            std::unique_lock<std::mutex> lock(mu);
            ++inside;
            cv.notify_all();
            cv.wait(lock, [&] { return release; });
        });
    }
    {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return inside == kParked; });
    }
    std::thread fresh([&] {
        p2p_completion_t c;
        size_t n = 0;
        p2ptest::fail_new_after(0);
        const p2p_status_t signal = p2p_comm_signal(u.comm, P2P_QUEUE_SEND);
        const p2p_status_t poll = p2p_comm_poll(u.comm, P2P_QUEUE_SEND, &c, 1, &n);
        const bool allocated = p2ptest::fail_new_reached();
        p2ptest::fail_new_in_this_thread(false);
        EXPECT_TRUE(allocated) << "a record was free: the failing path was not reached";
        EXPECT_EQ(P2P_OK, signal);
        EXPECT_EQ(allocated ? P2P_ERR_NO_MEMORY : P2P_OK, poll);
        EXPECT_EQ(P2P_OK, p2p_comm_poll(u.comm, P2P_QUEUE_SEND, &c, 1, &n));
    });
    fresh.join();
    {
        std::lock_guard<std::mutex> lock(mu);
        release = true;
    }
    cv.notify_all();
    for (std::thread &t : parked) t.join();
}

namespace {

/** Everything written to f so far (f is left at its end). */
std::string contents(FILE *f) {
    std::string text;
    std::rewind(f);
    char b[512];
    size_t n;
    while ((n = std::fread(b, 1, sizeof(b), f)) > 0) text.append(b, n);
    return text;
}

} // namespace

// p2p_config_print lists a likely typo of a P2P_ variable; without memory
// for that list it prints nothing (the documented "nothing printed"), not
// a list cut short, and prints it all once memory is back.
TEST(ApiNoMemory, ConfigPrintPrintsNothing) {
    EnvGuard typo("P2P_PROGRES", "busy");  // one edit from P2P_PROGRESS
    FILE *f = std::tmpfile();
    ASSERT_NE(nullptr, f);
    p2p_status_t st = P2P_ERR_NO_MEMORY;
    const unsigned k = p2ptest::fail_each_allocation(
        [&] { return p2p_config_print(f); },
        [&](p2p_status_t last) {
            st = last;
            if (st != P2P_OK) {
                EXPECT_EQ("", contents(f)) << "printed without memory";
            }
        });
    ASSERT_EQ(P2P_OK, st);
    EXPECT_GT(k, 0u) << "nothing was failed";
    const std::string text = contents(f);
    std::fclose(f);
    EXPECT_NE(std::string::npos, text.find("P2P_PROGRES is set but")) << text;
}

// p2p_local_rank_query names the variables it read; without memory for
// that: P2P_ERR_NO_MEMORY, and the right answer once memory is back.
TEST(ApiNoMemory, LocalRankQuery) {
    EnvGuard a("P2P_LOCAL_RANK", nullptr), b("P2P_LOCAL_WORLD_SIZE", nullptr),
        c("LOCAL_RANK", nullptr), d("LOCAL_WORLD_SIZE", nullptr),
        e("OMPI_COMM_WORLD_LOCAL_RANK", "3"), f("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
    uint32_t rank = 99, size = 99;
    p2p_status_t st = P2P_ERR_NO_MEMORY;
    const unsigned k = p2ptest::fail_each_allocation(
        [&] { return p2p_local_rank_query(&rank, &size); },
        [&](p2p_status_t last) { st = last; });
    ASSERT_EQ(P2P_OK, st);
    EXPECT_GT(k, 0u) << "nothing was failed";
    EXPECT_EQ(3u, rank);
    EXPECT_EQ(4u, size);
}
