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

} // namespace

int main(int argc, char **argv) {
    alarm(60);  // watchdog: a hang becomes SIGALRM, never a stuck test
    int rc = 2;
    if (argc == 2 && std::strcmp(argv[1], "oom-post") == 0) {
        rc = run_oom_post();
    } else {
        std::fprintf(stderr, "usage: herring_edge oom-post\n");
        return 2;
    }
    if (rc == 0) std::printf("herring_edge OK rank %d\n", g_rank);
    return rc;
}
