/*
 * herring_cuda: an SMDDP application's GPU tensors through the preloaded
 * shim (run by herring_cuda.sh, built where configure found the CUDA
 * runtime). SMDDP applications hand the vendor library cudaMalloc'd
 * tensors; this program does the same.
 *
 *   herring_cuda probe     exit 0 where a GPU can be used, 77 where not
 *                          (no driver, no device); calls nothing of herring
 *   herring_cuda xfer      rank RANK of 2 (p2prun): takes herringLocalDevice()
 *                          (modulo the GPUs it sees), registers device
 *                          send and receive buffers, and exchanges 8 B,
 *                          64 KiB and 4 MiB tensors with the other rank;
 *                          checks every completion, the bytes (copied back
 *                          to the host) and that nothing past each receive
 *                          was written
 *   herring_cuda refused   one process, P2P_CUDA_STAGING=off and a UCX
 *                          without CUDA: registering device memory returns
 *                          NULL, host memory still registers
 *
 * Prints "herring_cuda OK rank R" on success; exits 1 with a reason on the
 * first failed check. A watchdog ends a hung run.
 */
#include "vendor_herring.hpp"

#define HERRING_TEST_APP "herring_cuda"
#include "app_check.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <vector>

namespace {

int g_rank = 0;

#define CUDA_CHECK(call) CHECK((call) == cudaSuccess)

int gpu_count() {
    int n = 0;  // cudaGetDeviceCount leaves it as it was on failure
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

uint8_t pattern(int src, int tid, size_t i) {
    return static_cast<uint8_t>(src * 31 + tid * 7 + i * 13 + (i >> 8));
}

constexpr size_t kSizes[] = {8, 64 << 10, 4 << 20};
constexpr int kCount = 3;
constexpr size_t kGap = 64;  // guard bytes after each receive
constexpr uint8_t kGuard = 0xAB;

/** Offset of tensor k in a buffer holding all three, each with its gap. */
size_t offset_of(int k) {
    size_t off = 0;
    for (int i = 0; i < k; ++i) off += kSizes[i] + kGap;
    return off;
}

int run_xfer() {
    g_rank = std::atoi(std::getenv("RANK") != nullptr ? std::getenv("RANK") : "-1");
    const char *ws = std::getenv("WORLD_SIZE");
    CHECK(ws != nullptr && std::strcmp(ws, "2") == 0 && (g_rank == 0 || g_rank == 1));
    const int peer = 1 - g_rank;
    herringP2PInitialize();
    const int dev = herringLocalDevice();
    CHECK(dev >= 0);
    CUDA_CHECK(cudaSetDevice(dev % gpu_count()));

    const size_t total = offset_of(kCount);
    std::vector<uint8_t> host(total, kGuard);
    for (int k = 0; k < kCount; ++k) {
        for (size_t i = 0; i < kSizes[k]; ++i) host[offset_of(k) + i] = pattern(g_rank, k, i);
    }
    uint8_t *sdev = nullptr, *rdev = nullptr;
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void **>(&sdev), total));
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void **>(&rdev), total));
    CUDA_CHECK(cudaMemcpy(sdev, host.data(), total, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(rdev, kGuard, total));
    CUDA_CHECK(cudaDeviceSynchronize());  // the data is on the device before the sends
    void *smr = herringP2PRegisterMemory(sdev, static_cast<int>(total));
    void *rmr = herringP2PRegisterMemory(rdev, static_cast<int>(total));
    CHECK(smr != nullptr && rmr != nullptr);

    static char sctx[kCount], rctx[kCount];
    for (int k = 0; k < kCount; ++k) {
        herringP2PRecv(peer, rdev + offset_of(k), rmr, kSizes[k], 10 + k, &rctx[k], 0);
    }
    for (int k = 0; k < kCount; ++k) {
        herringP2PSend(peer, sdev + offset_of(k), smr, kSizes[k], 10 + k, &sctx[k], 0);
    }
    bool sent[kCount] = {}, got[kCount] = {};
    for (int i = 0; i < kCount; ++i) {
        CompletionEntry e = herringP2PSendCompletion();
        const int k = static_cast<const char *>(e.context) - sctx;
        CHECK(k >= 0 && k < kCount && !sent[k]);
        CHECK(e.dst_rank == static_cast<uint32_t>(peer) && e.tensor_id == 10u + k &&
              e.error_code == RDMA_READ_SUCCESS);
        sent[k] = true;
        e = herringP2PReadCompletion();
        const int r = static_cast<const char *>(e.context) - rctx;
        CHECK(r >= 0 && r < kCount && !got[r]);
        CHECK(e.dst_rank == static_cast<uint32_t>(peer) && e.tensor_id == 10u + r &&
              e.error_code == RDMA_READ_SUCCESS);
        got[r] = true;
    }
    // Completed receives are on the device: what the application reads.
    CUDA_CHECK(cudaMemcpy(host.data(), rdev, total, cudaMemcpyDeviceToHost));
    for (int k = 0; k < kCount; ++k) {
        const uint8_t *p = &host[offset_of(k)];
        for (size_t i = 0; i < kSizes[k]; ++i) {
            if (p[i] != pattern(peer, k, i)) {
                std::fprintf(stderr, "herring_cuda rank %d: tensor %d byte %zu is %u, not %u\n",
                             g_rank, 10 + k, i, p[i], pattern(peer, k, i));
                return 1;
            }
        }
        for (size_t i = kSizes[k]; i < kSizes[k] + kGap; ++i) CHECK(p[i] == kGuard);
    }
    herringP2PShutdown();
    CUDA_CHECK(cudaFree(sdev));
    CUDA_CHECK(cudaFree(rdev));
    std::printf("herring_cuda OK rank %d\n", g_rank);
    return 0;
}

int run_refused() {
    herringP2PInitialize();
    CUDA_CHECK(cudaSetDevice(herringLocalDevice() % gpu_count()));
    void *d = nullptr;
    CUDA_CHECK(cudaMalloc(&d, 1 << 16));
    CHECK(herringP2PRegisterMemory(d, 1 << 16) == nullptr);
    std::vector<uint8_t> h(1 << 16);
    CHECK(herringP2PRegisterMemory(h.data(), 1 << 16) != nullptr);
    herringP2PShutdown();
    CUDA_CHECK(cudaFree(d));
    std::printf("herring_cuda OK rank 0\n");
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    alarm(100);  // watchdog: a hang becomes SIGALRM, never a stuck test
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s probe | xfer | refused\n", argv[0]);
        return 2;
    }
    if (std::strcmp(argv[1], "probe") == 0) return gpu_count() > 0 ? 0 : 77;
    if (gpu_count() == 0) {
        std::fprintf(stderr, "herring_cuda: no usable GPU\n");
        return 77;
    }
    if (std::strcmp(argv[1], "xfer") == 0) return run_xfer();
    if (std::strcmp(argv[1], "refused") == 0) return run_refused();
    std::fprintf(stderr, "usage: %s probe | xfer | refused\n", argv[0]);
    return 2;
}
