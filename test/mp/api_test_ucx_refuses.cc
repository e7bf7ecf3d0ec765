/*
 * api_test, continued: P2P_ERR_TRANSPORT where UCX itself refuses, which
 * no real setup on this machine provokes on demand. This program defines
 * ucp_mem_map and ucp_ep_create: libucxp2p.so's calls resolve to them (the
 * executable comes first in symbol lookup) and they pass through to UCX's
 * (dlsym RTLD_NEXT) unless a test has armed a refusal. Each test checks
 * what the status promises: nothing made, nothing posted, the handle
 * untouched, and the same call succeeding once UCX agrees again. It also
 * defines ucp_tag_send_nbx and ucp_worker_signal, to hold a call inside
 * UCX while another thread shuts down or destroys the communicator: races
 * no timing provokes reliably.
 */
#include "api_util.h"

#include <ucxp2p/p2p_mem.h>

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <dlfcn.h>
#include <thread>

using apitest::ApiFixture;
using apitest::Buf;

namespace {

// Status the next armed call returns instead of calling UCX (UCS_OK: pass).
std::atomic<int> g_mem_map_refusal{UCS_OK};
std::atomic<int> g_ep_create_refusal{UCS_OK};
std::atomic<int> g_ep_create_calls{0};
// ucp_tag_send_nbx of this tensor id (0: none) waits inside the call until
// g_send_release is set (at most 10 s); g_send_held says it is waiting.
std::atomic<uint32_t> g_hold_tensor{0};
std::atomic<bool> g_send_held{false};
std::atomic<bool> g_send_release{false};
// The next ucp_worker_signal while armed waits likewise until
// g_wsignal_release; g_wsignal_left is set once it returns.
std::atomic<bool> g_hold_wsignal{false};
std::atomic<bool> g_wsignal_held{false};
std::atomic<bool> g_wsignal_release{false};
std::atomic<bool> g_wsignal_left{false};

/** Wait (at most 10 s) until flag is set. */
void await(const std::atomic<bool> &flag) {
    for (int i = 0; i < 10000 && !flag.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

template <typename F> F next_symbol(const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    if (p == nullptr) {
        std::fprintf(stderr, "api_test: no %s after this program\n", name);
        std::abort();
    }
    return reinterpret_cast<F>(p);
}

/** Arms one interposed function to return status for one scope. */
class Refuse {
public:
    Refuse(std::atomic<int> &what, ucs_status_t status) : what_(what) {
        what_.store(status);
    }
    ~Refuse() { what_.store(UCS_OK); }
    Refuse(const Refuse &) = delete;
    Refuse &operator=(const Refuse &) = delete;

private:
    std::atomic<int> &what_;
};

} // namespace

extern "C" __attribute__((visibility("default"))) ucs_status_t ucp_mem_map(ucp_context_h context, const ucp_mem_map_params_t *params,
                                    ucp_mem_h *memh_p) {
    static const auto real = next_symbol<decltype(&ucp_mem_map)>("ucp_mem_map");
    const int refusal = g_mem_map_refusal.load();
    if (refusal != UCS_OK) {
        return static_cast<ucs_status_t>(refusal);
    }
    return real(context, params, memh_p);
}

extern "C" __attribute__((visibility("default"))) ucs_status_t ucp_ep_create(ucp_worker_h worker, const ucp_ep_params_t *params,
                                      ucp_ep_h *ep_p) {
    static const auto real = next_symbol<decltype(&ucp_ep_create)>("ucp_ep_create");
    g_ep_create_calls.fetch_add(1);
    const int refusal = g_ep_create_refusal.load();
    if (refusal != UCS_OK) {
        return static_cast<ucs_status_t>(refusal);
    }
    return real(worker, params, ep_p);
}

extern "C" __attribute__((visibility("default"))) ucs_status_ptr_t
ucp_tag_send_nbx(ucp_ep_h ep, const void *buffer, size_t count, ucp_tag_t tag,
                 const ucp_request_param_t *param) {
    static const auto real = next_symbol<decltype(&ucp_tag_send_nbx)>("ucp_tag_send_nbx");
    uint32_t hold = g_hold_tensor.load();
    // Once: the hold is taken by the first send of that tensor id. The
    // tag's low word is the tensor id plus 64 times a block number 0..15
    // (p2p.h, tag layout); this test's other tensor id is 1.
    const uint32_t above = static_cast<uint32_t>(tag) - hold;
    if (hold != 0 && above % 64 == 0 && above / 64 < 16 &&
        g_hold_tensor.compare_exchange_strong(hold, 0)) {
        g_send_held.store(true);
        await(g_send_release);
    }
    return real(ep, buffer, count, tag, param);
}

extern "C" __attribute__((visibility("default"))) ucs_status_t
ucp_worker_signal(ucp_worker_h worker) {
    static const auto real = next_symbol<decltype(&ucp_worker_signal)>("ucp_worker_signal");
    bool hold = true;
    if (!g_hold_wsignal.compare_exchange_strong(hold, false)) return real(worker);
    g_wsignal_held.store(true);
    await(g_wsignal_release);
    const ucs_status_t st = real(worker);
    g_wsignal_left.store(true);
    return st;
}

namespace {
class UcxRefuses : public ApiFixture {};
}

// The interposition itself: a registration goes through this program's
// ucp_mem_map (else the tests below would pass without testing anything).
TEST_F(UcxRefuses, MemRegisterIsTransportWhenUcxRefuses) {
    Buf b(4096);
    p2p_mem_h mem = apitest::bogus_handle<p2p_mem_h>();
    {
        Refuse r(g_mem_map_refusal, UCS_ERR_INVALID_PARAM);
        EXPECT_EQ(P2P_ERR_TRANSPORT, p2p_mem_register(ctx_, b.data(), 4096, &mem));
    }
    EXPECT_EQ(apitest::bogus_handle<p2p_mem_h>(), mem) << "the handle was written";
    {
        Refuse r(g_mem_map_refusal, UCS_ERR_NO_MEMORY);  // UCX out of memory
        EXPECT_EQ(P2P_ERR_NO_MEMORY, p2p_mem_register(ctx_, b.data(), 4096, &mem));
    }
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), 4096, &mem));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

namespace {

/** How many of this process' descriptors are memfds (p2p_mem_alloc's). */
size_t memfds() {
    size_t n = 0;
    for (int fd = 0; fd < 4096; ++fd) {
        char path[64], target[256];
        std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        const ssize_t len = readlink(path, target, sizeof(target) - 1);
        if (len <= 0) continue;
        target[len] = '\0';
        n += std::strncmp(target, "/memfd:", 7) == 0 ? 1 : 0;
    }
    return n;
}

} // namespace

// p2p_mem_alloc whose registration UCX refuses: P2P_ERR_TRANSPORT (UCX out
// of memory: P2P_ERR_NO_MEMORY), the outputs untouched and the memory
// given back (no memfd left open), and the call succeeding once UCX agrees.
TEST_F(UcxRefuses, MemAllocIsTransportWhenUcxRefuses) {
    const size_t fds = memfds();
    void *p = reinterpret_cast<void *>(0x5eed);
    p2p_mem_h mem = apitest::bogus_handle<p2p_mem_h>();
    const struct {
        ucs_status_t ucx;
        p2p_status_t expect;
    } cases[] = {{UCS_ERR_INVALID_PARAM, P2P_ERR_TRANSPORT},
                 {UCS_ERR_NO_MEMORY, P2P_ERR_NO_MEMORY}};
    for (const auto &k : cases) {
        SCOPED_TRACE(ucs_status_string(k.ucx));
        Refuse r(g_mem_map_refusal, k.ucx);
        EXPECT_EQ(k.expect, p2p_mem_alloc(ctx_, 1 << 16, -1, &p, &mem));
        EXPECT_EQ(reinterpret_cast<void *>(0x5eed), p) << "the address was written";
        EXPECT_EQ(apitest::bogus_handle<p2p_mem_h>(), mem) << "the handle was written";
        EXPECT_EQ(fds, memfds()) << "the memory of the failed call was kept";
    }
    ASSERT_EQ(P2P_OK, p2p_mem_alloc(ctx_, 1 << 16, -1, &p, &mem));
    EXPECT_EQ(P2P_OK, p2p_mem_free(p, mem));
    EXPECT_EQ(fds, memfds());
}

// A send or receive naming a peer whose endpoint UCX cannot create fails
// at once -- P2P_ERR_TRANSPORT, or P2P_ERR_PEER_FAILURE when UCX's status
// says the peer is gone or unreachable -- posts nothing, and does not mark
// the peer failed: the next post creates the endpoint and the message
// goes through.
TEST_F(UcxRefuses, PostFailsAtOnceWhenTheEndpointCannotBeCreated) {
    Buf b(64);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), 64, &mem));
    const int calls = g_ep_create_calls.load();
    const struct {
        ucs_status_t ucx;
        p2p_status_t expect;
    } cases[] = {{UCS_ERR_NO_RESOURCE, P2P_ERR_TRANSPORT},
                 {UCS_ERR_UNREACHABLE, P2P_ERR_PEER_FAILURE},
                 {UCS_ERR_CONNECTION_RESET, P2P_ERR_PEER_FAILURE}};
    for (const auto &k : cases) {
        SCOPED_TRACE(ucs_status_string(k.ucx));
        Refuse r(g_ep_create_refusal, k.ucx);
        EXPECT_EQ(k.expect, p2p_comm_send(comm_, 0, 7, b.data(), 8, mem, nullptr));
        EXPECT_EQ(k.expect, p2p_comm_recv(comm_, 0, 7, b.data() + 32, 8, mem, nullptr));
        // The batch calls the same, naming the block (the peer's round).
        const p2p_block_t blocks[2] = {{0, 8, b.data(), 8, mem, nullptr},
                                       {0, 9, b.data() + 16, 8, mem, nullptr}};
        for (bool send : {true, false}) {
            size_t bad = 99;
            EXPECT_EQ(k.expect, send ? p2p_comm_send_batch(comm_, blocks, 2, &bad)
                                     : p2p_comm_recv_batch(comm_, blocks, 2, &bad));
            EXPECT_EQ(0u, bad) << (send ? "send" : "recv");
        }
    }
    EXPECT_GT(g_ep_create_calls.load(), calls) << "no endpoint was created through us";
    EXPECT_EQ(0u, pending(P2P_QUEUE_SEND));
    EXPECT_EQ(0u, pending(P2P_QUEUE_RECV));
    std::memset(b.data(), 0x5a, 8);
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 7, b.data() + 32, 8, mem, nullptr));
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 7, b.data(), 8, mem, nullptr));
    p2p_completion_t c = wait_one(P2P_QUEUE_RECV);
    EXPECT_EQ(P2P_OK, c.status);
    EXPECT_EQ(8u, c.bytes);
    EXPECT_EQ(0x5a, b.data()[32 + 7]);
    EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

// A send still inside its post (UCX holds it: the worker lock is held) when
// another thread shuts the communicator down. Its completion is still to
// come, so a wait must not report P2P_ERR_SHUTDOWN ("every entry has been
// popped: nothing can arrive any more") before it: the entry would arrive
// after a waiter was told none can. The shutdown flag used to be raised
// before shutdown took the worker lock, while an eager send completed
// inside its post queues its entry without counting it pending.
TEST_F(UcxRefuses, NoShutdownReportedWhileASendIsInsideItsPost) {
    Buf b(64);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), 64, &mem));
    // The endpoint first: the next send then completes inside its post.
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 1, b.data() + 32, 8, mem, nullptr));
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 1, b.data(), 8, mem, nullptr));
    EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_RECV).status);
    EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);

    constexpr uint32_t kHeld = 0xB10C;
    void *uc = reinterpret_cast<void *>(uintptr_t(0x5e4d));
    g_send_release.store(false);
    g_send_held.store(false);
    g_hold_tensor.store(kHeld);
    p2p_status_t send_st = P2P_ERR_TRANSPORT, shut_st = P2P_ERR_TRANSPORT;
    std::thread sender([&] { send_st = p2p_comm_send(comm_, 0, kHeld, b.data(), 8, mem, uc); });
    await(g_send_held);
    ASSERT_TRUE(g_send_held.load()) << "the send never reached UCX";
    std::thread closer([&] { shut_st = p2p_comm_shutdown(comm_); });
    // For a second, while the send is held: a wait finds nothing yet.
    p2p_status_t early = P2P_ERR_TIMEOUT;
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1)) {
        p2p_completion_t c{};
        size_t n = 7;
        early = p2p_comm_wait(comm_, P2P_QUEUE_SEND, &c, 1, &n, 0);
        if (early != P2P_ERR_TIMEOUT) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    g_send_release.store(true);
    apitest::bounded("the held send and the shutdown", 30, [&] {
        sender.join();
        closer.join();
    });
    EXPECT_EQ(P2P_ERR_TIMEOUT, early)
        << "a wait answered " << p2p_status_string(early) << " while a send was being posted";
    EXPECT_EQ(P2P_OK, shut_st);
    if (send_st == P2P_OK) {  // else it was refused (P2P_ERR_SHUTDOWN): nothing to come
        p2p_completion_t c = wait_one(P2P_QUEUE_SEND, 5000);
        EXPECT_EQ(uc, c.user_context);
    } else {
        EXPECT_EQ(P2P_ERR_SHUTDOWN, send_st);
    }
    p2p_completion_t c{};
    size_t n = 7;
    EXPECT_EQ(P2P_ERR_SHUTDOWN, p2p_comm_wait(comm_, P2P_QUEUE_SEND, &c, 1, &n, 5000));
    EXPECT_EQ(0u, n);
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

namespace {
class UcxHeldSerialized : public ApiFixture {
protected:
    void SetUp() override {
        p2p_config_t c{};
        c.field_mask = P2P_CONFIG_FIELD_THREAD_MODE;
        c.thread_mode = P2P_THREAD_SERIALIZED;
        open(&c);
    }
};
} // namespace

// P2P_THREAD_SERIALIZED allows p2p_comm_signal from another thread at any
// time, also while the application destroys the communicator. The destroy
// must not return while the signal is still inside the communicator: the
// signal's reference was the last one then, so the communicator was torn
// down (worker progress, endpoint closes) on the signalling thread after
// p2p_comm_destroy returned, while the application went on with its next
// call -- two threads in the worker, which this mode's lock does not
// exclude (the application's side takes no lock).
TEST_F(UcxHeldSerialized, CommDestroyWaitsForASignalInside) {
    g_wsignal_release.store(false);
    g_wsignal_left.store(false);
    g_wsignal_held.store(false);
    g_hold_wsignal.store(true);
    p2p_status_t signal_st = P2P_ERR_TRANSPORT, destroy_st = P2P_ERR_TRANSPORT;
    std::thread signaller([&] { signal_st = p2p_comm_signal(comm_, P2P_QUEUE_RECV); });
    await(g_wsignal_held);
    ASSERT_TRUE(g_wsignal_held.load()) << "p2p_comm_signal never reached ucp_worker_signal";
    std::atomic<bool> destroyed{false};
    bool signal_left_first = false;
    std::thread destroyer([&] {
        destroy_st = p2p_comm_destroy(comm_);
        signal_left_first = g_wsignal_left.load();
        destroyed.store(true);
    });
    // Give a destroy that does not wait for the signal time to return.
    for (int i = 0; i < 2000 && !destroyed.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    g_wsignal_release.store(true);
    apitest::bounded("the held signal and the destroy", 30, [&] {
        signaller.join();
        destroyer.join();
    });
    comm_ = nullptr;
    EXPECT_EQ(P2P_OK, signal_st);
    EXPECT_EQ(P2P_OK, destroy_st);
    EXPECT_TRUE(signal_left_first)
        << "p2p_comm_destroy returned while p2p_comm_signal was still inside";
}
