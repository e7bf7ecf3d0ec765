/*
 * rails_bw: two-rank bandwidth probe over the public API for the multi-rail
 * test (netns_rails.sh). Rank 0 sends RAILS_BW_COUNT messages of
 * RAILS_BW_SIZE bytes (default 64 x 4 MiB) to rank 1, all posted at once
 * from p2p_mem_alloc memory; rank 1 checks the data and answers with an
 * 8-byte ack. Rank 0 prints "rails_bw: <bytes> bytes in <s> s = <MiB/s>".
 * Bootstrap from the environment (RANK, WORLD_SIZE, MASTER_ADDR, ...).
 * Exit 0 on success, 1 on any error; every wait is bounded.
 */
#include <ucxp2p/p2p.h>
#include <ucxp2p/p2p_mem.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr int kWaitMs = 30000;
constexpr uint32_t kAckTag = 0xffffff;

#define CHECK(call)                                                          \
    do {                                                                     \
        p2p_status_t s_ = (call);                                            \
        if (s_ != P2P_OK) {                                                  \
            std::fprintf(stderr, "rails_bw: %s failed: %s\n", #call,         \
                         p2p_status_string(s_));                             \
            return 1;                                                        \
        }                                                                    \
    } while (0)

size_t env_size(const char *name, size_t def) {
    const char *v = std::getenv(name);
    return (v != nullptr && *v != '\0') ? std::strtoull(v, nullptr, 10) : def;
}

/** Wait for n completions on q; 1 on timeout or a failed entry. */
int drain(p2p_comm_h comm, p2p_queue_t q, size_t n) {
    std::vector<p2p_completion_t> e(64);
    while (n > 0) {
        size_t got = 0;
        p2p_status_t st = p2p_comm_wait(comm, q, e.data(), e.size(), &got, kWaitMs);
        if (st != P2P_OK) {
            std::fprintf(stderr, "rails_bw: wait: %s (%zu left)\n",
                         p2p_status_string(st), n);
            return 1;
        }
        for (size_t i = 0; i < got; ++i) {
            if (e[i].status != P2P_OK) {
                std::fprintf(stderr, "rails_bw: tensor %u: %s\n", e[i].tensor_id,
                             p2p_status_string(e[i].status));
                return 1;
            }
        }
        n -= got;
    }
    return 0;
}

int run(p2p_context_h ctx, p2p_comm_h comm, uint32_t rank) {
    size_t count = env_size("RAILS_BW_COUNT", 64);
    size_t size = env_size("RAILS_BW_SIZE", 4u << 20);
    if (count == 0 || size < 8) {
        std::fprintf(stderr, "rails_bw: need RAILS_BW_COUNT >= 1, RAILS_BW_SIZE >= 8\n");
        return 1;
    }
    void *buf = nullptr;
    p2p_mem_h mem = nullptr;
    CHECK(p2p_mem_alloc(ctx, count * size + 8, -1, &buf, &mem));
    auto *bytes = static_cast<unsigned char *>(buf);
    uint32_t peer = 1 - rank;
    int rc = 0;
    if (rank == 0) {
        for (size_t i = 0; i < count; ++i) {
            std::memset(bytes + i * size, static_cast<int>(i & 0xff), size);
        }
        auto t0 = std::chrono::steady_clock::now();
        rc |= p2p_comm_recv(comm, peer, kAckTag, bytes + count * size, 8, mem,
                            nullptr) != P2P_OK;
        for (size_t i = 0; i < count && rc == 0; ++i) {
            rc |= p2p_comm_send(comm, peer, static_cast<uint32_t>(i), bytes + i * size,
                                size, mem, nullptr) != P2P_OK;
        }
        rc = rc ? rc : drain(comm, P2P_QUEUE_SEND, count);
        rc = rc ? rc : drain(comm, P2P_QUEUE_RECV, 1);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                       .count();
        if (rc == 0) {
            std::printf("rails_bw: %zu bytes in %.3f s = %.1f MiB/s\n", count * size, s,
                        static_cast<double>(count * size) / s / (1 << 20));
        }
    } else {
        std::memset(bytes, 0xee, count * size);
        for (size_t i = 0; i < count && rc == 0; ++i) {
            rc |= p2p_comm_recv(comm, peer, static_cast<uint32_t>(i), bytes + i * size,
                                size, mem, nullptr) != P2P_OK;
        }
        rc = rc ? rc : drain(comm, P2P_QUEUE_RECV, count);
        for (size_t i = 0; i < count && rc == 0; ++i) {
            const unsigned char *m = bytes + i * size;
            unsigned char want = static_cast<unsigned char>(i & 0xff);
            if (m[0] != want || m[size / 2] != want || m[size - 1] != want) {
                std::fprintf(stderr, "rails_bw: message %zu corrupt\n", i);
                rc = 1;
            }
        }
        if (rc == 0) {
            rc |= p2p_comm_send(comm, peer, kAckTag, bytes, 8, mem, nullptr) != P2P_OK;
            rc = rc ? rc : drain(comm, P2P_QUEUE_SEND, 1);
        }
    }
    p2p_status_t fs = p2p_mem_free(buf, mem);
    if (fs != P2P_OK) {
        std::fprintf(stderr, "rails_bw: p2p_mem_free: %s\n", p2p_status_string(fs));
        rc = 1;
    }
    return rc;
}

} // namespace

int main() {
    p2p_context_h ctx = nullptr;
    p2p_bootstrap_h boot = nullptr;
    p2p_comm_h comm = nullptr;
    CHECK(p2p_context_create(nullptr, &ctx));
    int rc = 1;
    p2p_bootstrap_info_t info;
    if (p2p_bootstrap_create(P2P_BOOTSTRAP_TCP, &boot) == P2P_OK &&
        p2p_bootstrap_query(boot, &info) == P2P_OK && info.size == 2 &&
        p2p_comm_create(ctx, boot, &comm) == P2P_OK &&
        p2p_bootstrap_barrier(boot) == P2P_OK) {
        rc = run(ctx, comm, info.rank);
        // Keep the peer alive until both are done, so no one sees a reset.
        if (p2p_bootstrap_barrier(boot) != P2P_OK) {
            rc = 1;
        }
    } else {
        std::fprintf(stderr, "rails_bw: bootstrap/comm setup failed (need 2 ranks)\n");
    }
    if (comm != nullptr) p2p_comm_destroy(comm);
    if (boot != nullptr) p2p_bootstrap_destroy(boot);
    p2p_context_destroy(ctx);
    return rc;
}
