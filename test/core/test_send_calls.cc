/*
 * How many UCX send calls one p2p_comm_send makes. core_test defines
 * ucp_tag_send_nbx itself (below): the library's calls, linked statically
 * into this program, come here first, are counted per thread, and go on to
 * UCX's (dlsym RTLD_NEXT). Every other core test's sends pass through it
 * unchanged.
 *
 * Why it matters: a send UCX finishes inside the call should cost one UCX
 * call. UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL, which the library once tried
 * first, is granted by UCX 1.13 only on its inline path (up to ~100 bytes
 * over shared memory); a larger eager message was refused there and sent
 * again through the general path: two UCX calls and an operation record
 * per send from ~100 bytes to 16 KiB (docs/PERFORMANCE.md, 2026-11-30 07:45).
 */
#include "core/api_handles.h"
#include "thread_job.h"
#include "../scoped_env.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <ucp/api/ucp.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {
thread_local unsigned t_send_calls = 0;  // this thread's ucp_tag_send_nbx calls
}

extern "C" ucs_status_ptr_t ucp_tag_send_nbx(ucp_ep_h ep, const void *buffer, size_t count,
                                             ucp_tag_t tag, const ucp_request_param_t *param) {
    using Fn = ucs_status_ptr_t (*)(ucp_ep_h, const void *, size_t, ucp_tag_t,
                                    const ucp_request_param_t *);
    static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "ucp_tag_send_nbx"));
    ++t_send_calls;
    return real(ep, buffer, count, tag, param);
}

namespace {

using namespace ucxp2p;

const size_t kSizes[] = {8, 512, 4096, 16384};
constexpr size_t kCount = sizeof(kSizes) / sizeof(kSizes[0]);

struct Side {
    p2p_context_h ctx = nullptr;
    p2p_bootstrap_h bs = nullptr;
    p2p_comm_h comm = nullptr;
    std::vector<char> buf = std::vector<char>((kCount + 1) * 16384, 1);
    p2p_mem_h mem = nullptr;
};

/** n completions of q, each OK; what went wrong ("": nothing). */
std::string reap(p2p_comm_h comm, p2p_queue_t q, size_t n) {
    for (size_t seen = 0; seen < n;) {
        p2p_completion_t e[kCount + 1];
        size_t k = 0;
        p2p_status_t st = p2p_comm_wait(comm, q, e, kCount + 1, &k, 30000);
        if (st != P2P_OK) return std::string("wait: ") + p2p_status_string(st);
        for (size_t j = 0; j < k; ++j) {
            if (e[j].status != P2P_OK) {
                return "tensor " + std::to_string(e[j].tensor_id) + ": " +
                       p2p_status_string(e[j].status);
            }
        }
        seen += k;
    }
    return "";
}

/** Rank 0 sends one message of each size to rank 1 (connected by an 8-byte
 *  message first), counting the UCX calls of each p2p_comm_send: the
 *  counts, comma separated, or what went wrong. */
std::string count_calls(const char *tls) {
    p2ptest::ScopedEnv env("UCX_TLS", tls);
    coretest::PairExchange ex;
    Side s[2];
    for (uint32_t r = 0; r < 2; ++r) {
        if (p2p_context_create(nullptr, &s[r].ctx) != P2P_OK ||
            p2p_mem_register(s[r].ctx, s[r].buf.data(), s[r].buf.size(), &s[r].mem) != P2P_OK) {
            return "context or registration failed";
        }
        s[r].bs = api::bootstrap_handle(
            std::unique_ptr<Bootstrap>(new coretest::PairJob(&ex, r)));
    }
    p2p_status_t cst[2];
    std::thread other([&] { cst[1] = p2p_comm_create(s[1].ctx, s[1].bs, &s[1].comm); });
    cst[0] = p2p_comm_create(s[0].ctx, s[0].bs, &s[0].comm);
    other.join();
    if (cst[0] != P2P_OK || cst[1] != P2P_OK) return "p2p_comm_create failed";

    std::string out, err;
    for (size_t i = 0; i <= kCount && err.empty(); ++i) {
        if (p2p_comm_recv(s[1].comm, 0, uint32_t(i), s[1].buf.data() + i * 16384, 16384,
                          s[1].mem, nullptr) != P2P_OK) {
            err = "recv failed";
        }
    }
    // The first message connects (and may say hello): not counted.
    if (err.empty() && p2p_comm_send(s[0].comm, 1, 0, s[0].buf.data(), 8, s[0].mem,
                                     nullptr) != P2P_OK) {
        err = "send failed";
    }
    if (err.empty()) err = reap(s[0].comm, P2P_QUEUE_SEND, 1);
    for (size_t i = 0; i < kCount && err.empty(); ++i) {
        t_send_calls = 0;
        if (p2p_comm_send(s[0].comm, 1, uint32_t(i + 1), s[0].buf.data() + i * 16384,
                          kSizes[i], s[0].mem, nullptr) != P2P_OK) {
            err = "send failed";
        }
        out += (out.empty() ? "" : ",") + std::to_string(t_send_calls);
    }
    if (err.empty()) err = reap(s[0].comm, P2P_QUEUE_SEND, kCount);
    if (err.empty()) err = reap(s[1].comm, P2P_QUEUE_RECV, kCount + 1);
    std::thread other2([&] { p2p_comm_destroy(s[1].comm); });
    p2p_comm_destroy(s[0].comm);
    other2.join();
    for (Side &d : s) {
        p2p_mem_deregister(d.mem);
        p2p_bootstrap_destroy(d.bs);
        p2p_context_destroy(d.ctx);
    }
    return err.empty() ? out : err;
}

class SendCalls : public ::testing::TestWithParam<const char *> {};

// 8 B, 512 B, 4 KiB and 16 KiB (kImmediateMax): one UCX call each, over
// shared memory and over tcp. In a child process: UCX_TLS is read at
// context creation, and the child's contexts leave nothing behind.
TEST_P(SendCalls, OneUcxCallPerEagerSend) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const char *tls = GetParam();
    EXPECT_EXIT(
        {
            const std::string r = count_calls(tls);
            std::fprintf(stderr, "calls %s\n", r.c_str());
            _exit(0);
        },
        testing::ExitedWithCode(0), "calls 1,1,1,1\n$");
}

INSTANTIATE_TEST_SUITE_P(Transports, SendCalls, ::testing::Values("shm,self", "tcp,self"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                             return std::string(i.param).substr(0, 3);
                         });

} // namespace
