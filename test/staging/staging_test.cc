/*
 * staging_test: CUDA device memory staged through host memory
 * (core/staging.h) where UCX cannot move it, against the fake driver of
 * fake_cuda.h: runs on any machine. test/cuda repeats the two-rank
 * exchange with the real driver on a GPU.
 *
 *   staging_test                   the GoogleTest suite
 *   staging_test --rank            one rank of a two-rank exchange, started
 *                                  by the suite through p2prun: each rank
 *                                  sends every size of kSizes from fake
 *                                  device memory to the other, which
 *                                  receives into fake device memory
 */
#include "fake_cuda.h"

#include "core/staging.h"
#include "../fail_each.h"
#include "../mapped_bytes.h"
#include "../mp/api_util.h"
#include "../rank_session.h"
#include "../scoped_env.h"
#include "../shell.h"
#include "../top_dirs.h"

#include <ucxp2p/p2p.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using ucxp2p::memtype::Shadow;

namespace {

uint8_t pat(size_t i, uint32_t salt) {
    return static_cast<uint8_t>((i * 29u) ^ (i >> 10) ^ (salt * 101u) ^ 0xa5);
}

void fill(uint8_t *p, size_t n, uint32_t salt) {
    for (size_t i = 0; i < n; ++i) p[i] = pat(i, salt);
}

/** Bytes of p that are not the pattern of salt. */
size_t wrong(const uint8_t *p, size_t n, uint32_t salt) {
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += p[i] != pat(i, salt);
    return bad;
}

/** Fake device memory, registered while the object lives. */
struct DevBuf {
    fakecuda::Mem fake;
    void *dev = nullptr;
    size_t len = 0;
    p2p_mem_h mem = nullptr;
    p2p_status_t reg = P2P_ERR_NO_MEMORY;
    DevBuf(p2p_context_h ctx, size_t n) : fake(n), dev(fake.p), len(n) {
        if (dev != nullptr) reg = p2p_mem_register(ctx, dev, n, &mem);
    }
    ~DevBuf() {
        if (mem != nullptr) p2p_mem_deregister(mem);
    }
    DevBuf(const DevBuf &) = delete;
    DevBuf &operator=(const DevBuf &) = delete;
    uint8_t *rw(size_t off = 0) const { return fakecuda::backing(dev) + off; }
    void *at(size_t off) const { return static_cast<char *>(dev) + off; }
};

/** No copy was made without the registration's context current or outside
 *  an allocation (the real driver refuses both). */
void expect_clean_copies() {
    EXPECT_EQ(0, fakecuda::stats().bad_ctx.load());
    EXPECT_EQ(0, fakecuda::stats().bad_range.load());
}

// ------------------------------------------------------------ Shadow itself

TEST(Shadow, MirrorsTheDeviceRangeAndCopiesBothWays) {
    fakecuda::Installed fake;
    const long pinned = fakecuda::stats().pinned, unpinned = fakecuda::stats().unpinned;
    fakecuda::Mem mem(10000);
    void *dev = mem.p;
    ASSERT_NE(nullptr, dev);
    {
        std::unique_ptr<Shadow> s;
        ASSERT_EQ(P2P_OK, Shadow::create(dev, 10000, &s));
        EXPECT_TRUE(s->pinned());
        EXPECT_EQ(pinned + 1, fakecuda::stats().pinned.load());
        uint8_t *host = static_cast<uint8_t *>(s->host());
        EXPECT_EQ(host + 123, s->to_host(static_cast<char *>(dev) + 123));
        fill(fakecuda::backing(dev), 10000, 1);
        ASSERT_EQ(P2P_OK, s->pull(host + 100, 5000));
        EXPECT_EQ(0, std::memcmp(host + 100, fakecuda::backing(dev) + 100, 5000));
        EXPECT_EQ(0, host[99]);    // outside the copied range: untouched
        EXPECT_EQ(0, host[5100]);
        std::memset(host + 9000, 0x3c, 1000);
        ASSERT_EQ(P2P_OK, s->push(host + 9000, 1000));
        for (size_t i = 9000; i < 10000; ++i) ASSERT_EQ(0x3c, fakecuda::backing(dev)[i]);
        EXPECT_EQ(P2P_OK, s->push(host, 0));  // nothing to copy
    }
    EXPECT_EQ(unpinned + 1, fakecuda::stats().unpinned.load());
    expect_clean_copies();
}

TEST(Shadow, DriverFailuresAreErrors) {
    fakecuda::Installed fake;
    fakecuda::Mem mem(4096);
    void *dev = mem.p;
    ASSERT_NE(nullptr, dev);
    std::unique_ptr<Shadow> s;
    ASSERT_EQ(P2P_OK, Shadow::create(dev, 4096, &s));
    fakecuda::stats().fail_dtoh = 1;
    EXPECT_EQ(P2P_ERR_TRANSPORT, s->pull(s->host(), 64));
    fakecuda::stats().fail_htod = 1;
    EXPECT_EQ(P2P_ERR_TRANSPORT, s->push(s->host(), 64));
    EXPECT_EQ(P2P_OK, s->pull(s->host(), 64));  // one failure each
    s.reset();
    expect_clean_copies();
}

TEST(Shadow, PageLockingRefusedStillStages) {
    fakecuda::Installed fake;
    fakecuda::Mem mem(4096);
    void *dev = mem.p;
    ASSERT_NE(nullptr, dev);
    const long unpinned = fakecuda::stats().unpinned;
    fakecuda::stats().fail_pin = 1;
    {
        std::unique_ptr<Shadow> s;
        ASSERT_EQ(P2P_OK, Shadow::create(dev, 4096, &s));
        EXPECT_FALSE(s->pinned());
        fill(fakecuda::backing(dev), 4096, 2);
        ASSERT_EQ(P2P_OK, s->pull(s->host(), 4096));
        EXPECT_EQ(0u, wrong(static_cast<uint8_t *>(s->host()), 4096, 2));
    }
    EXPECT_EQ(unpinned, fakecuda::stats().unpinned.load());  // nothing to undo
}

TEST(Shadow, NoDriverOrNotDeviceMemoryIsUnsupported) {
    std::vector<uint8_t> host(4096);
    std::unique_ptr<Shadow> s;
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, Shadow::create(host.data(), host.size(), &s));  // no driver
    fakecuda::Installed fake;
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, Shadow::create(host.data(), host.size(), &s));  // no context
    EXPECT_EQ(nullptr, s);
}

TEST(Shadow, MemoryNamingNoContextUsesTheRegisteringThreads) {
    fakecuda::Installed fake;
    fakecuda::Mem mem(4096);
    void *dev = mem.p;
    ASSERT_NE(nullptr, dev);
    fakecuda::stats().no_ptr_ctx = true;
    std::unique_ptr<Shadow> s;
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, Shadow::create(dev, 4096, &s));  // none current
    const ucxp2p::memtype::Driver *d = fakecuda::driver();
    ASSERT_EQ(0, d->ctx_push(fakecuda::context()));
    EXPECT_EQ(P2P_OK, Shadow::create(dev, 4096, &s));
    void *popped = nullptr;
    ASSERT_EQ(0, d->ctx_pop(&popped));
    fakecuda::stats().no_ptr_ctx = false;
    ASSERT_NE(nullptr, s);
    // Copies from a thread with no context push the one found.
    fill(fakecuda::backing(dev), 4096, 4);
    p2p_status_t st = P2P_ERR_NO_MEMORY;
    std::thread t([&] { st = s->pull(s->host(), 4096); });
    t.join();
    EXPECT_EQ(P2P_OK, st);
    EXPECT_EQ(0u, wrong(static_cast<uint8_t *>(s->host()), 4096, 4));
    s.reset();
    expect_clean_copies();
}

// --------------------------------------------- registrations and transfers

class Staged : public apitest::ApiFixture {
protected:
    void TearDown() override {
        close();
        expect_clean_copies();
    }
    /** Send a small host-memory message to this rank and receive it:
     *  every message sent before it has then arrived (a peer's messages
     *  match in the order sent), so a receive posted next finds its message
     *  here (recv_now's path). Its send completion (P2P_OK, user context
     *  &mark_) is left in the queue, with those of the earlier sends. */
    void await_earlier_messages() {
        p2p_mem_h m = nullptr;
        ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, mark_, sizeof(mark_), &m));
        ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 0xFFFF, mark_, 8, m, &mark_));
        ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 0xFFFF, mark_ + 8, 8, m, &mark_));
        p2p_completion_t c = wait_one(P2P_QUEUE_RECV);
        EXPECT_EQ(P2P_OK, c.status);
        EXPECT_EQ(static_cast<void *>(&mark_), c.user_context);
        EXPECT_EQ(P2P_OK, p2p_mem_deregister(m));  // the send is over: sent at once
    }
    fakecuda::Installed fake_;  // before SetUp's context: its registrations use it
    uint8_t mark_[16] = {};
};

TEST_F(Staged, DeviceMemoryIsRegisteredAndUnregistered) {
    const long pinned = fakecuda::stats().pinned, unpinned = fakecuda::stats().unpinned;
    {
        DevBuf b(ctx_, 1 << 20);
        ASSERT_EQ(P2P_OK, b.reg);
        EXPECT_EQ(pinned + 1, fakecuda::stats().pinned.load());
        // Posts are checked against the device range, not the host copy's.
        EXPECT_EQ(P2P_ERR_NOT_REGISTERED,
                  p2p_comm_send(comm_, 0, 1, b.at((1 << 20) - 8), 16, b.mem, nullptr));
    }
    EXPECT_EQ(unpinned + 1, fakecuda::stats().unpinned.load());
}

// p2p.h: P2P_ERR_UNSUPPORTED for device memory with no CUDA context for it
// (the pointer names none and none is current on the registering thread),
// as the C caller sees it; Shadow.MemoryNamingNoContext* has the detail.
TEST_F(Staged, DeviceMemoryWithNoContextIsUnsupported) {
    fakecuda::Mem dev(4096);
    ASSERT_NE(nullptr, dev.p);
    fakecuda::stats().no_ptr_ctx = true;
    p2p_mem_h mem = apitest::bogus_handle<p2p_mem_h>();
    const long pinned = fakecuda::stats().pinned;
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, p2p_mem_register(ctx_, dev.p, 4096, &mem));
    EXPECT_EQ(apitest::bogus_handle<p2p_mem_h>(), mem) << "the handle was written";
    EXPECT_EQ(pinned, fakecuda::stats().pinned.load()) << "a host copy was pinned";
    fakecuda::stats().no_ptr_ctx = false;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, dev.p, 4096, &mem));  // with its context: fine
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

TEST_F(Staged, SizesBothPostingOrdersAndBatches) {
    const size_t kLen = (4 << 20) + 4096;
    DevBuf src(ctx_, kLen), dst(ctx_, kLen);
    ASSERT_EQ(P2P_OK, src.reg);
    ASSERT_EQ(P2P_OK, dst.reg);
    uint32_t tid = 0;
    for (size_t len : {size_t(0), size_t(1), size_t(8), size_t(4096), size_t(65539),
                       size_t(1) << 20, size_t(4) << 20}) {
        for (bool recv_first : {true, false}) {
            ++tid;
            SCOPED_TRACE(std::to_string(len) + (recv_first ? " recv first" : " send first"));
            fill(src.rw(64), len, tid);
            std::memset(dst.rw(), 0, kLen);
            if (recv_first) {
                ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, tid, dst.at(128), len, dst.mem, &tid));
            }
            ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, tid, src.at(64), len, src.mem, &tid));
            fill(src.rw(64), len, tid + 1000);  // the send copied at its post
            if (!recv_first) {
                ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, tid, dst.at(128), len, dst.mem, &tid));
            }
            p2p_completion_t s = wait_one(P2P_QUEUE_SEND);
            EXPECT_EQ(P2P_OK, s.status);
            EXPECT_EQ(len, s.bytes);
            p2p_completion_t r = wait_one(P2P_QUEUE_RECV);
            EXPECT_EQ(P2P_OK, r.status);
            EXPECT_EQ(len, r.bytes);
            EXPECT_EQ(&tid, r.user_context);
            EXPECT_EQ(0u, wrong(dst.rw(128), len, tid));
            EXPECT_EQ(0, dst.rw()[127]);
            EXPECT_EQ(0, dst.rw()[128 + len]);
        }
    }
    // A batch of 16 blocks from and into different parts of the regions.
    constexpr size_t kBlocks = 16, kBlock = 200000;
    std::vector<p2p_block_t> sends(kBlocks), recvs(kBlocks);
    for (size_t i = 0; i < kBlocks; ++i) {
        fill(src.rw(i * kBlock), kBlock, 500 + static_cast<uint32_t>(i));
        recvs[i] = {0, 900 + static_cast<uint32_t>(i), dst.at(i * kBlock), kBlock, dst.mem, nullptr};
        sends[i] = {0, 900 + static_cast<uint32_t>(i), src.at(i * kBlock), kBlock, src.mem, nullptr};
    }
    ASSERT_EQ(P2P_OK, p2p_comm_recv_batch(comm_, recvs.data(), kBlocks, nullptr));
    ASSERT_EQ(P2P_OK, p2p_comm_send_batch(comm_, sends.data(), kBlocks, nullptr));
    for (size_t i = 0; i < kBlocks; ++i) {
        EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);
        EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_RECV).status);
    }
    for (size_t i = 0; i < kBlocks; ++i) {
        EXPECT_EQ(0u, wrong(dst.rw(i * kBlock), kBlock, 500 + static_cast<uint32_t>(i))) << i;
    }
}

TEST_F(Staged, FailedCopyFromTheDeviceFailsThePost) {
    DevBuf src(ctx_, 65536), dst(ctx_, 65536);
    ASSERT_EQ(P2P_OK, src.reg);
    ASSERT_EQ(P2P_OK, dst.reg);
    fakecuda::stats().fail_dtoh = 1;
    EXPECT_EQ(P2P_ERR_TRANSPORT, p2p_comm_send(comm_, 0, 7, src.at(0), 4096, src.mem, nullptr));
    p2p_block_t b = {0, 7, src.at(0), 4096, src.mem, nullptr};
    size_t bad = 99;
    fakecuda::stats().fail_dtoh = 1;
    EXPECT_EQ(P2P_ERR_TRANSPORT, p2p_comm_send_batch(comm_, &b, 1, &bad));
    EXPECT_EQ(0u, bad);
    p2p_completion_t c;
    size_t n = 1;
    EXPECT_EQ(P2P_OK, p2p_comm_poll(comm_, P2P_QUEUE_SEND, &c, 1, &n));
    EXPECT_EQ(0u, n);  // nothing was posted
    // The registration is still usable.
    fill(src.rw(), 4096, 3);
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 7, dst.at(0), 4096, dst.mem, nullptr));
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 7, src.at(0), 4096, src.mem, nullptr));
    EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);
    EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_RECV).status);
    EXPECT_EQ(0u, wrong(dst.rw(), 4096, 3));
}

TEST_F(Staged, FailedCopyToTheDeviceFailsTheReceive) {
    DevBuf src(ctx_, 1 << 20), dst(ctx_, 1 << 20);
    ASSERT_EQ(P2P_OK, src.reg);
    ASSERT_EQ(P2P_OK, dst.reg);
    uint32_t tid = 40;
    for (size_t len : {size_t(64), size_t(1) << 20}) {
        for (bool recv_first : {true, false}) {
            ++tid;
            SCOPED_TRACE(std::to_string(len) + (recv_first ? " recv first" : " send first"));
            fakecuda::stats().fail_htod = 1;
            if (recv_first) {
                ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, tid, dst.at(0), len, dst.mem, &tid));
            }
            ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, tid, src.at(0), len, src.mem, nullptr));
            if (!recv_first) {
                await_earlier_messages();  // so a small one lands inside the post
                ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, tid, dst.at(0), len, dst.mem, &tid));
                EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);  // one is the mark's
            }
            EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);
            p2p_completion_t r = wait_one(P2P_QUEUE_RECV);
            EXPECT_EQ(P2P_ERR_TRANSPORT, r.status);
            EXPECT_EQ(0u, r.bytes);
            EXPECT_EQ(tid, r.tensor_id);
            EXPECT_EQ(&tid, r.user_context);
            EXPECT_EQ(0, fakecuda::stats().fail_htod.load());  // the copy was tried
        }
    }
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(dst.mem));  // nothing left in flight
    dst.mem = nullptr;
}

// A large staged receive is copied to the device outside the worker lock:
// while that copy is held (in the fake driver), a 64-byte send and receive
// of host memory posted from this thread return, and the held receive
// completes once the copy goes on. (Before, the progress thread made the
// copy with the lock held and the posts waited for it.) A watchdog lets
// the copy go after 20 s.
TEST_F(Staged, PostsGoOnWhileAReceiveIsCopiedToTheDevice) {
    const size_t kLen = size_t(1) << 20;
    DevBuf src(ctx_, kLen), dst(ctx_, kLen);
    ASSERT_EQ(P2P_OK, src.reg);
    ASSERT_EQ(P2P_OK, dst.reg);
    uint8_t host[128] = {};
    p2p_mem_h hm = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, host, sizeof(host), &hm));
    fakecuda::Stats &fs = fakecuda::stats();
    fs.htod_held = false;
    fs.htod_release = false;
    fs.hold_htod = true;
    struct Release {  // never leave the copier held
        ~Release() { fakecuda::stats().htod_release = true; }
    } release;
    fill(src.rw(), kLen, 61);
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 61, dst.at(0), kLen, dst.mem, &dst));
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 61, src.at(0), kLen, src.mem, &src));
    const auto t0 = std::chrono::steady_clock::now();
    while (!fs.htod_held.load()) {
        ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20))
            << "the receive never reached its copy to the device";
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::atomic<bool> posted{false};
    std::thread watchdog([&] {
        const auto w0 = std::chrono::steady_clock::now();
        while (!posted.load() && std::chrono::steady_clock::now() - w0 < std::chrono::seconds(20)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        fakecuda::stats().htod_release = true;
    });
    std::memset(host, 7, 64);
    EXPECT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 62, host + 64, 64, hm, &hm));
    EXPECT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 62, host, 64, hm, &hm));
    const bool held = !fs.htod_release.load();
    posted = true;
    watchdog.join();
    EXPECT_TRUE(held) << "posts waited for the staged receive's copy to the device";
    bool big_recv = false, small_recv = false;
    for (int i = 0; i < 2; ++i) {
        p2p_completion_t c = wait_one(P2P_QUEUE_RECV);
        EXPECT_EQ(P2P_OK, c.status);
        if (c.user_context == &dst) {
            big_recv = true;
            EXPECT_EQ(kLen, c.bytes);
        } else {
            small_recv = c.user_context == static_cast<void *>(&hm);
        }
    }
    EXPECT_TRUE(big_recv && small_recv);
    EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);
    EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);
    EXPECT_EQ(0u, wrong(dst.rw(), kLen, 61));
    EXPECT_EQ(7, host[64 + 63]);
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(hm));
}

// A canceled receive into staged memory copies nothing to the device; the
// message then reaches the next receive, which copies it.
TEST_F(Staged, CanceledReceiveCopiesNothingToTheDevice) {
    DevBuf src(ctx_, 4096), dst(ctx_, 4096);
    ASSERT_EQ(P2P_OK, src.reg);
    ASSERT_EQ(P2P_OK, dst.reg);
    std::memset(dst.rw(), 0, 4096);
    const long htod = fakecuda::stats().htod;
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 60, dst.at(0), 4096, dst.mem, nullptr));
    size_t n = 0;
    ASSERT_EQ(P2P_OK, p2p_comm_cancel_recv(comm_, 0, 60, &n));
    EXPECT_EQ(1u, n);
    p2p_completion_t r = wait_one(P2P_QUEUE_RECV, 0);
    EXPECT_EQ(P2P_ERR_CANCELED, r.status);
    EXPECT_EQ(htod, fakecuda::stats().htod.load());

    fill(src.rw(), 4096, 60);
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 60, src.at(0), 4096, src.mem, nullptr));
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 60, dst.at(0), 4096, dst.mem, &n));
    r = wait_one(P2P_QUEUE_RECV);
    EXPECT_EQ(P2P_OK, r.status);
    EXPECT_EQ(&n, r.user_context);
    EXPECT_EQ(htod + 1, fakecuda::stats().htod.load());
    EXPECT_EQ(0u, wrong(dst.rw(), 4096, 60));
    EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);
}

namespace {

using p2ptest::mapped_bytes;

} // namespace

// A registration of device memory with each of its allocations failing in
// turn: P2P_ERR_NO_MEMORY, the handle untouched, and the host copy given
// back. The copy (kLen of address space, far more than anything else one
// call maps) was left mapped when the allocation after its mmap failed.
TEST_F(Staged, EachFailedAllocationOfARegistrationKeepsNoHostCopy) {
    const size_t kLen = size_t(256) << 20;
    fakecuda::Mem dev(kLen);
    ASSERT_NE(nullptr, dev.p);
    p2p_mem_h mem = apitest::bogus_handle<p2p_mem_h>();
    size_t before = mapped_bytes();
    p2p_status_t st = P2P_ERR_NO_MEMORY;
    const unsigned k = p2ptest::fail_each_allocation(
        [&] { return p2p_mem_register(ctx_, dev.p, kLen, &mem); },
        [&](p2p_status_t last) {
            st = last;
            if (st == P2P_OK) return;
            EXPECT_EQ(apitest::bogus_handle<p2p_mem_h>(), mem) << "the handle was written";
            const size_t after = mapped_bytes();
            EXPECT_LT(after, before + kLen) << "the host copy was left mapped";
            before = after;
        });
    ASSERT_EQ(P2P_OK, st) << "still failing after " << k << " allocations";
    EXPECT_GT(k, 0u) << "nothing was failed";
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

TEST(StagedConfig, OffRefusesDeviceMemory) {
    fakecuda::Installed fake;
    p2ptest::ScopedEnv off("P2P_CUDA_STAGING", "off");
    p2p_context_h ctx = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    {
        DevBuf b(ctx, 4096);
        EXPECT_EQ(P2P_ERR_UNSUPPORTED, b.reg);
        EXPECT_EQ(nullptr, b.mem);
        std::vector<uint8_t> host(4096);
        p2p_mem_h m = nullptr;
        EXPECT_EQ(P2P_OK, p2p_mem_register(ctx, host.data(), host.size(), &m));  // host: as ever
        EXPECT_EQ(P2P_OK, p2p_mem_deregister(m));
    }
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
}

TEST(StagedConfig, BadValueRefusesTheContext) {
    p2ptest::ScopedEnv bad("P2P_CUDA_STAGING", "maybe");
    p2p_context_h ctx = nullptr;
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_context_create(nullptr, &ctx));
    EXPECT_EQ(nullptr, ctx);
}

// ------------------------------------------------------------- two ranks

const size_t kSizes[] = {1, 8, 4096, 16384, 65539, 262144, size_t(1) << 20,
                         (size_t(4) << 20) + 1};

/** One rank: send every size to the other rank and receive every size from
 *  it, fake device memory on both sides. Exit 0 when all arrived intact
 *  through the driver's copies. */
int rank_main() {
    fakecuda::Installed fake;
    p2ptest::RankSession rs;
    if (rs.open() != 0) return 1;
    const uint32_t me = rs.rank;
    p2p_context_h ctx = rs.ctx;
    p2p_comm_h comm = rs.comm;
    const uint32_t peer = 1 - me;
    size_t total = 0;
    for (size_t len : kSizes) total += len + 64;
    int rc = 0;
    {
        DevBuf src(ctx, total), dst(ctx, total);
        RANK_CHECK(src.reg);
        RANK_CHECK(dst.reg);
        std::vector<size_t> off;
        size_t o = 0;
        for (size_t len : kSizes) {
            off.push_back(o);
            fill(src.rw(o), len, me * 100 + static_cast<uint32_t>(off.size()));
            o += len + 64;
        }
        for (size_t i = 0; i < off.size(); ++i) {
            RANK_CHECK(p2p_comm_recv(comm, peer, static_cast<uint32_t>(i), dst.at(off[i]),
                                     kSizes[i], dst.mem, nullptr));
        }
        for (size_t i = 0; i < off.size(); ++i) {
            RANK_CHECK(p2p_comm_send(comm, peer, static_cast<uint32_t>(i), src.at(off[i]),
                                     kSizes[i], src.mem, nullptr));
        }
        size_t sent = 0, got = 0;
        while (sent < off.size() || got < off.size()) {
            p2p_completion_t c[16];
            size_t n = 0;
            const bool sends = sent < off.size();
            RANK_CHECK(p2p_comm_wait(comm, sends ? P2P_QUEUE_SEND : P2P_QUEUE_RECV, c, 16,
                                     &n, 30000));
            for (size_t k = 0; k < n; ++k) {
                if (c[k].status != P2P_OK || c[k].bytes != kSizes[c[k].tensor_id]) {
                    std::printf("rank %u: %s %u: %s, %llu bytes\n", me, sends ? "send" : "recv",
                                c[k].tensor_id, p2p_status_string(c[k].status),
                                static_cast<unsigned long long>(c[k].bytes));
                    rc = 1;
                }
            }
            (sends ? sent : got) += n;
        }
        for (size_t i = 0; i < off.size(); ++i) {
            size_t bad = wrong(dst.rw(off[i]), kSizes[i], peer * 100 + static_cast<uint32_t>(i + 1));
            if (bad != 0) {
                std::printf("rank %u: %zu of %zu bytes wrong\n", me, bad, kSizes[i]);
                rc = 1;
            }
        }
        fakecuda::Stats &st = fakecuda::stats();
        std::printf("rank %u: copies %ld to host (%ld bytes), %ld to device (%ld bytes), "
                    "%ld without context, %ld out of range\n", me, st.dtoh.load(),
                    st.dtoh_bytes.load(), st.htod.load(), st.htod_bytes.load(),
                    st.bad_ctx.load(), st.bad_range.load());
        size_t bytes = 0;
        for (size_t len : kSizes) bytes += len;
        if (st.bad_ctx != 0 || st.bad_range != 0 ||
            st.dtoh_bytes != static_cast<long>(bytes) || st.htod_bytes != static_cast<long>(bytes)) {
            rc = 1;
        }
    }
    if (rs.close() != 0) return 1;
    if (rc == 0) std::printf("rank %u: staged ok\n", me);
    return rc;
}

std::string g_self;

TEST(StagedTwoRanks, EverySizeArrivesThroughTheCopies) {
    for (const char *env : {"", "P2P_CMA_THRESH=0 P2P_CMA_SPLIT=4096", "P2P_CMA=off",
                            "UCX_TLS=tcp,self"}) {
        SCOPED_TRACE(env);
        p2ptest::ShellResult r = p2ptest::run_shell(
            std::string(env) + " timeout 120 " + p2ptest::top_builddir() + "/tools/p2prun/p2prun -n 2 -- " +
            g_self + " --rank 2>&1");
        EXPECT_EQ(0, r.status) << r.out;
        EXPECT_NE(std::string::npos, r.out.find("rank 0: staged ok")) << r.out;
        EXPECT_NE(std::string::npos, r.out.find("rank 1: staged ok")) << r.out;
    }
}

} // namespace

int main(int argc, char **argv) {
    if (argc == 2 && std::strcmp(argv[1], "--rank") == 0) return rank_main();
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) g_self.assign(self, static_cast<size_t>(n));
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
