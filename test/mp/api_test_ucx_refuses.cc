/*
 * api_test, continued: P2P_ERR_TRANSPORT where UCX itself refuses, which
 * no real setup on this machine provokes on demand. This program defines
 * ucp_mem_map and ucp_ep_create: libucxp2p.so's calls resolve to them (the
 * executable comes first in symbol lookup) and they pass through to UCX's
 * (dlsym RTLD_NEXT) unless a test has armed a refusal. Each test checks
 * what the status promises: nothing made, nothing posted, the handle
 * untouched, and the same call succeeding once UCX agrees again.
 */
#include "api_util.h"

#include <ucp/api/ucp.h>

#include <atomic>
#include <dlfcn.h>

using apitest::ApiFixture;
using apitest::Buf;

namespace {

// Status the next armed call returns instead of calling UCX (UCS_OK: pass).
std::atomic<int> g_mem_map_refusal{UCS_OK};
std::atomic<int> g_ep_create_refusal{UCS_OK};
std::atomic<int> g_ep_create_calls{0};

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
