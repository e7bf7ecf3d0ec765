/*
 * Edge cases of herringP2PShutdown for the herring shim tests, as an "SMDDP
 * application" (the vendor header only, linked with the aborting stub; the
 * tests preload libucxp2p_herring.so):
 *
 *   herring_edge oom-post      1 process: Sends rejected at once (bad rank)
 *                              while every allocation of this thread fails;
 *                              the shim loses those entries (logged) but
 *                              Shutdown must still return, and the
 *                              completion calls answer afterwards.
 *   herring_edge oom-drain     1 process: 30 sends and receives to itself
 *                              complete; then a Send rejected while this
 *                              thread's allocations fail (it moves the
 *                              core's entries to the shim's queue first):
 *                              none of the 30 send entries may be lost.
 *   herring_edge oom-shutdown  1 process: the same 30 pairs, then Shutdown
 *                              while this thread's allocations fail: it
 *                              returns, and the completion calls end
 *                              (no hang), each entry at most once.
 *   herring_edge storm         1 process: 2000 Sends before Initialize and
 *                              2000 Receives after Shutdown, each rejected
 *                              with a warning (the script counts the lines:
 *                              a burst per call site, not one per call).
 *
 * Prints "herring_edge OK rank R" on success; exits 1 with a reason on the
 * first failed check. A watchdog ends a hung run (SIGALRM).
 */
#include "vendor_herring.hpp"

#define HERRING_TEST_APP "herring_edge"
#include "app_check.h"
#include "../fail_new.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <vector>

namespace {

int g_rank = 0;

int run_oom_post() {
    herringP2PInitialize();
    std::vector<uint8_t> buf(64);
    void *mr = herringP2PRegisterMemory(buf.data(), static_cast<int>(buf.size()));
    CHECK(mr != nullptr);
    static char ctx[40];
    {
        p2ptest::NoMemory oom;  // this thread's allocations (test/fail_new.h)
        for (int i = 0; i < 40; ++i) herringP2PSend(5, buf.data(), mr, 8, i, &ctx[i], 0);
    }
    herringP2PShutdown();  // hung here when a failed post kept its count
    // What was queued before the allocations failed, then the sentinel.
    int queued = 0;
    for (;;) {
        CompletionEntry e = herringP2PSendCompletion();
        if (e.context == nullptr) {
            CHECK(e.error_code == RDMA_SHUTDOWN && e.tensor_id == 0xffffffffu);
            break;
        }
        CHECK(e.tensor_id < 40 && e.context == &ctx[e.tensor_id] &&
              e.error_code == RDMA_READ_FAIL);
        CHECK(++queued <= 40);
    }
    std::printf("herring_edge: %d of 40 rejected sends queued their entry\n", queued);
    return 0;
}

/** 30 sends and receives of 64 B to this rank itself, given time to end. */
struct SelfPairs {
    static constexpr int kN = 30;
    char buf[1 << 13] = {};
    char ctx[kN] = {};
    void *mr = nullptr;
    void post() {
        mr = herringP2PRegisterMemory(buf, static_cast<int>(sizeof(buf)));
        CHECK(mr != nullptr);
        for (int i = 0; i < kN; ++i) {
            herringP2PRecv(0, buf + 4096 + i * 64, mr, 64, i, &ctx[i], 0);
            herringP2PSend(0, buf + i * 64, mr, 64, i, &ctx[i], 0);
        }
        usleep(300 * 1000);  // most into the core's queues: what the drain moves
    }
};

/** Pop entries until the sentinel: each of the pairs' tensors at most
 *  once (how many: *count), plus any with extra_ctx. Any code: a pair still
 *  pending at Shutdown completes RDMA_SHUTDOWN. */
int pop_all(bool sends, const SelfPairs &p, int *count, const void *extra_ctx, int *extra) {
    bool seen[SelfPairs::kN] = {};
    for (;;) {
        CompletionEntry e = sends ? herringP2PSendCompletion() : herringP2PReadCompletion();
        if (e.context == nullptr) {
            CHECK(e.error_code == RDMA_SHUTDOWN && e.tensor_id == 0xffffffffu);
            return 0;
        }
        if (e.context == extra_ctx) {
            ++*extra;
            continue;
        }
        CHECK(e.tensor_id < SelfPairs::kN && e.context == &p.ctx[e.tensor_id]);
        CHECK(!seen[e.tensor_id]);
        CHECK(e.error_code == RDMA_READ_SUCCESS || e.error_code == RDMA_SHUTDOWN);
        seen[e.tensor_id] = true;
        ++*count;
    }
}

int run_oom_drain() {
    herringP2PInitialize();
    static SelfPairs p;
    p.post();
    static char rejected_ctx;
    {
        p2ptest::NoMemory oom;
        herringP2PSend(5, p.buf, p.mr, 8, 100, &rejected_ctx, 0);  // bad rank
    }
    herringP2PShutdown();
    int sends = 0, recvs = 0, rejected = 0, none = 0;
    CHECK(pop_all(true, p, &sends, &rejected_ctx, &rejected) == 0);
    CHECK(pop_all(false, p, &recvs, nullptr, &none) == 0);
    std::printf("herring_edge: %d + %d of %d sends and receives, rejected send's entry %d\n",
                sends, recvs, SelfPairs::kN, rejected);
    // Moved with room made first: none lost (the rejected one's own entry
    // may be, as in oom-post).
    CHECK(sends == SelfPairs::kN && recvs == SelfPairs::kN && rejected <= 1);
    return 0;
}

int run_oom_shutdown() {
    herringP2PInitialize();
    static SelfPairs p;
    p.post();
    {
        p2ptest::NoMemory oom;
        herringP2PShutdown();  // hung the completion calls when it threw
    }
    int sends = 0, recvs = 0, none = 0;
    CHECK(pop_all(true, p, &sends, nullptr, &none) == 0);
    CHECK(pop_all(false, p, &recvs, nullptr, &none) == 0);
    std::printf("herring_edge: %d + %d of %d entries kept through Shutdown without memory\n",
                sends, recvs, SelfPairs::kN);
    herringP2PShutdown();  // again: nothing to do
    return 0;
}

int run_storm() {
    static char buf[64];
    for (int i = 0; i < 2000; ++i) herringP2PSend(0, buf, nullptr, 8, i, buf, 0);
    herringP2PInitialize();
    herringP2PShutdown();
    for (int i = 0; i < 2000; ++i) herringP2PRecv(0, buf, nullptr, 8, i, buf, 0);
    int n = 0;
    while (herringP2PSendCompletion().context != nullptr) ++n;
    while (herringP2PReadCompletion().context != nullptr) ++n;
    CHECK(n == 4000);  // one entry per call, logged or not
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    alarm(60);  // watchdog: a hang becomes SIGALRM, never a stuck test
    int rc = 2;
    if (argc == 2 && std::strcmp(argv[1], "oom-post") == 0) {
        rc = run_oom_post();
    } else if (argc == 2 && std::strcmp(argv[1], "oom-drain") == 0) {
        rc = run_oom_drain();
    } else if (argc == 2 && std::strcmp(argv[1], "oom-shutdown") == 0) {
        rc = run_oom_shutdown();
    } else if (argc == 2 && std::strcmp(argv[1], "storm") == 0) {
        rc = run_storm();
    } else {
        std::fprintf(stderr, "usage: herring_edge oom-post|oom-drain|oom-shutdown|storm\n");
        return 2;
    }
    if (rc == 0) std::printf("herring_edge OK rank %d\n", g_rank);
    return rc;
}
