/*
 * Edge cases of herringP2PShutdown for the herring shim tests, as an "SMDDP
 * application" (the vendor header only, linked with the aborting stub; the
 * tests preload libucxp2p_herring.so):
 *
 *   herring_edge late-recv     2 ranks: rank 0 sends 1 MiB to rank 1 and
 *                              calls Shutdown at once; rank 1 posts the
 *                              receive 300 ms later, then calls Shutdown.
 *                              Shutdown waits for every rank before it
 *                              cancels, so the receive gets every byte.
 *   herring_edge oom-post      1 process: Sends rejected at once (bad rank)
 *                              while every allocation of this thread fails;
 *                              the shim loses those entries (logged) but
 *                              Shutdown must still return, and the
 *                              completion calls answer afterwards.
 *
 * Prints "herring_edge OK rank R" on success; exits 1 with a reason on the
 * first failed check. A watchdog ends a hung run (SIGALRM).
 */
#include "vendor_herring.hpp"

#define HERRING_TEST_APP "herring_edge"
#include "app_check.h"
#include "../fail_new.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

int g_rank = 0;

uint8_t pattern(size_t i) { return static_cast<uint8_t>((i * 131u + 7u) >> 3); }

int run_late_recv() {
    const char *r = std::getenv("RANK");
    CHECK(r != nullptr);
    g_rank = std::atoi(r);
    herringP2PInitialize();
    const size_t len = 1 << 20;
    std::vector<uint8_t> buf(len);
    void *mr = herringP2PRegisterMemory(buf.data(), static_cast<int>(len));
    CHECK(mr != nullptr);
    static char ctx;
    if (g_rank == 0) {
        for (size_t i = 0; i < len; ++i) buf[i] = pattern(i);
        herringP2PSend(1, buf.data(), mr, len, 42, &ctx, 0);
        herringP2PShutdown();  // without waiting for the send's entry
        CompletionEntry e = herringP2PSendCompletion();
        // The receiver has the bytes either way; whether this rank learned
        // it before its cancel is a race of the acknowledgement.
        CHECK(e.context == &ctx && e.dst_rank == 1 && e.tensor_id == 42 &&
              (e.error_code == RDMA_READ_SUCCESS || e.error_code == RDMA_SHUTDOWN));
    } else if (g_rank == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        herringP2PRecv(0, buf.data(), mr, len, 42, &ctx, 0);
        herringP2PShutdown();
        CompletionEntry e = herringP2PReadCompletion();
        CHECK(e.context == &ctx && e.dst_rank == 0 && e.tensor_id == 42);
        CHECK(e.error_code == RDMA_READ_SUCCESS);
        for (size_t i = 0; i < len; ++i) CHECK(buf[i] == pattern(i));
    } else {
        herringP2PShutdown();
    }
    return 0;
}

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

} // namespace

int main(int argc, char **argv) {
    alarm(60);  // watchdog: a hang becomes SIGALRM, never a stuck test
    int rc = 2;
    if (argc == 2 && std::strcmp(argv[1], "late-recv") == 0) {
        rc = run_late_recv();
    } else if (argc == 2 && std::strcmp(argv[1], "oom-post") == 0) {
        rc = run_oom_post();
    } else {
        std::fprintf(stderr, "usage: herring_edge late-recv|oom-post\n");
        return 2;
    }
    if (rc == 0) std::printf("herring_edge OK rank %d\n", g_rank);
    return rc;
}
