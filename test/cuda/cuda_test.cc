/*
 * cuda_test: registrations of CUDA memory (core/memtype.h), on a machine
 * with a GPU. Built when configure found the CUDA runtime; every test
 * skips, saying why, where no device can be used (no driver, no GPU); run
 * without arguments there, the program exits 77 (automake's SKIP).
 *
 *   cuda_test                      the GoogleTest suite
 *   cuda_test --rank KIND BYTES    one rank of a two-rank exchange, started
 *                                  by the suite through p2prun: rank 0
 *                                  sends BYTES from KIND memory (host,
 *                                  pinned, managed, device, async), rank 1
 *                                  receives into the same kind and checks
 *
 * Device memory moves whatever the UCX underneath: one built with CUDA
 * moves it itself; with one built without CUDA (Debian's) the library
 * stages it through host memory (core/staging.h), and refuses it only with
 * P2P_CUDA_STAGING=off.
 */
#include "core/memtype.h"

#include "../rank_session.h"
#include "../scoped_env.h"
#include "../shell.h"
#include "../top_dirs.h"

#include <ucxp2p/p2p.h>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <ucp/api/ucp.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using ucxp2p::memtype::classify;
using ucxp2p::memtype::Kind;

namespace {

/** Whether this UCX reports CUDA among its memory types. */
bool ucx_moves_cuda() {
    ucp_params_t p = {};
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_TAG;
    ucp_context_h ctx = nullptr;
    if (ucp_init(&p, nullptr, &ctx) != UCS_OK) return false;
    ucp_context_attr_t a = {};
    a.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    bool yes = ucp_context_query(ctx, &a) == UCS_OK &&
               (a.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
    ucp_cleanup(ctx);
    return yes;
}

/** Whether p2p_mem_register refuses device memory here: a UCX without
 *  CUDA and staging turned off. */
bool device_refused() {
    const char *v = std::getenv("P2P_CUDA_STAGING");
    return !ucx_moves_cuda() && v != nullptr && std::strcmp(v, "off") == 0;
}

/** Empty when a CUDA device can be used, else why not. */
std::string no_gpu_reason() {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return std::string("no usable CUDA: ") + cudaGetErrorString(e);
    if (n == 0) return "no CUDA device";
    return "";
}

#define NEED_GPU()                                                        \
    do {                                                                  \
        std::string why_ = no_gpu_reason();                               \
        if (!why_.empty()) GTEST_SKIP() << why_;                          \
    } while (0)

cudaError_t alloc_async(void **p, size_t n) {
    cudaError_t e = cudaMallocAsync(p, n, nullptr);
    return e != cudaSuccess ? e : cudaStreamSynchronize(nullptr);
}

/** Memory of a kind, freed with the matching call: host, pinned, managed,
 *  device (cudaMalloc) or async (cudaMallocAsync: device memory of the
 *  default pool, which may name no context). */
struct CudaBuf {
    std::string kind;
    void *p = nullptr;
    size_t len = 0;
    CudaBuf(const std::string &k, size_t n) : kind(k), len(n) {
        cudaError_t e = cudaSuccess;
        if (k == "device") e = cudaMalloc(&p, n);
        else if (k == "async") e = alloc_async(&p, n);  // a stream-ordered pool
        else if (k == "managed") e = cudaMallocManaged(&p, n);
        else if (k == "pinned") e = cudaMallocHost(&p, n);
        else p = std::malloc(n);
        if (e != cudaSuccess) p = nullptr;
    }
    ~CudaBuf() {
        if (p == nullptr) return;
        if (kind == "async") {
            cudaFreeAsync(p, nullptr);
            cudaStreamSynchronize(nullptr);
        } else if (kind == "device" || kind == "managed") {
            cudaFree(p);
        } else if (kind == "pinned") {
            cudaFreeHost(p);
        } else {
            std::free(p);
        }
    }
    CudaBuf(const CudaBuf &) = delete;
    CudaBuf &operator=(const CudaBuf &) = delete;
};

uint8_t pat(size_t i) { return static_cast<uint8_t>(i * 7 + (i >> 11) + 1); }

/** One rank of the exchange (see the file comment). Exit 0 when the rank
 *  saw what it must: the payload intact, or device memory refused by a
 *  UCX that cannot move it. */
int rank_main(const std::string &kind, size_t len) {
    p2ptest::RankSession rs;
    if (rs.open() != 0) return 1;
    const uint32_t me = rs.rank;
    p2p_context_h ctx = rs.ctx;
    p2p_comm_h comm = rs.comm;
    CudaBuf buf(kind, len);
    if (buf.p == nullptr) {
        std::printf("rank %u: cannot allocate %zu bytes of %s memory\n", me, len,
                    kind.c_str());
        return 1;
    }
    std::vector<uint8_t> h(len);
    for (size_t i = 0; i < len; ++i) h[i] = me == 0 ? pat(i) : 0;
    if (cudaMemcpy(buf.p, h.data(), len, cudaMemcpyDefault) != cudaSuccess) {
        std::printf("rank %u: cudaMemcpy to %s memory failed\n", me, kind.c_str());
        return 1;
    }
    p2p_mem_h mem = nullptr;
    const p2p_status_t reg = p2p_mem_register(ctx, buf.p, len, &mem);
    int rc = 0;
    if ((kind == "device" || kind == "async") && device_refused()) {
        // Both ranks refuse; neither posts, so neither waits on the other.
        if (reg == P2P_ERR_UNSUPPORTED) {
            std::printf("rank %u: device memory refused\n", me);
        } else {
            std::printf("rank %u: device memory: %s, expected refusal\n", me,
                        p2p_status_string(reg));
            rc = 1;
        }
    } else {
        RANK_CHECK(reg);
        const uint32_t peer = 1 - me;
        if (me == 0) {
            RANK_CHECK(p2p_comm_send(comm, peer, 42, buf.p, len, mem, nullptr));
        } else {
            RANK_CHECK(p2p_comm_recv(comm, peer, 42, buf.p, len, mem, nullptr));
        }
        p2p_completion_t c{};
        size_t n = 0;
        RANK_CHECK(p2p_comm_wait(comm, me == 0 ? P2P_QUEUE_SEND : P2P_QUEUE_RECV, &c,
                                 1, &n, 30000));
        if (n != 1 || c.status != P2P_OK || c.bytes != len) {
            std::printf("rank %u: completion n=%zu status %s bytes %llu\n", me, n,
                        p2p_status_string(c.status),
                        static_cast<unsigned long long>(c.bytes));
            rc = 1;
        } else if (me == 1) {
            cudaMemcpy(h.data(), buf.p, len, cudaMemcpyDefault);
            size_t bad = 0;
            for (size_t i = 0; i < len; ++i) bad += h[i] != pat(i);
            std::printf("rank 1: %zu of %zu bytes wrong\n", bad, len);
            if (bad == 0) std::printf("rank 1: verified %zu bytes\n", len);
            rc = bad == 0 ? 0 : 1;
        }
        RANK_CHECK(p2p_mem_deregister(mem));
    }
    if (rs.close() != 0) return 1;
    return rc;
}

std::string g_self;  // this program, for the two-rank runs

p2ptest::ShellResult run_ranks(const std::string &env, const std::string &kind,
                               size_t len) {
    const std::string cmd = env + " timeout 120 " + p2ptest::top_builddir() + "/tools/p2prun/p2prun -n 2 -- " +
                            g_self + " --rank " + kind + " " + std::to_string(len) +
                            " 2>&1";
    return p2ptest::run_shell(cmd);
}

class Single : public ::testing::Test {
protected:
    void SetUp() override {
        NEED_GPU();
        ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx_));
    }
    void TearDown() override {
        if (ctx_ != nullptr) {
            EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx_));
        }
    }
    p2p_context_h ctx_ = nullptr;
};

} // namespace

TEST(CudaClassify, EachAllocatorsKind) {
    NEED_GPU();
    CudaBuf dev("device", 1 << 20), man("managed", 1 << 20), pin("pinned", 1 << 20),
        host("host", 1 << 20), pool("async", 1 << 20);
    ASSERT_NE(nullptr, dev.p);
    ASSERT_NE(nullptr, pool.p);
    EXPECT_EQ(Kind::DEVICE, classify(pool.p));
    ASSERT_NE(nullptr, man.p);
    ASSERT_NE(nullptr, pin.p);
    EXPECT_EQ(Kind::DEVICE, classify(dev.p));
    EXPECT_EQ(Kind::DEVICE, classify(static_cast<char *>(dev.p) + 12345));
    EXPECT_EQ(Kind::MANAGED, classify(man.p));
    EXPECT_EQ(Kind::HOST, classify(pin.p));
    EXPECT_EQ(Kind::HOST, classify(host.p));
}

TEST(CudaClassify, FromAThreadWithoutACurrentContext) {
    NEED_GPU();
    CudaBuf dev("device", 4096);
    ASSERT_NE(nullptr, dev.p);
    Kind seen = Kind::HOST;
    std::thread t([&] { seen = classify(dev.p); });  // never called CUDA
    t.join();
    EXPECT_EQ(Kind::DEVICE, seen);
}

TEST_F(Single, DeviceMemoryRegistersStagedOrDirect) {
    CudaBuf dev("device", 1 << 20);
    ASSERT_NE(nullptr, dev.p);
    p2p_mem_h m = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, dev.p, dev.len, &m));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(m));
}

TEST(CudaStagingOff, DeviceMemoryRefusedWhereUcxCannotMoveIt) {
    NEED_GPU();
    p2ptest::ScopedEnv off("P2P_CUDA_STAGING", "off");
    p2p_context_h ctx = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    CudaBuf dev("device", 1 << 20);
    ASSERT_NE(nullptr, dev.p);
    p2p_mem_h m = nullptr;
    const p2p_status_t st = p2p_mem_register(ctx, dev.p, dev.len, &m);
    if (ucx_moves_cuda()) {
        ASSERT_EQ(P2P_OK, st);
        EXPECT_EQ(P2P_OK, p2p_mem_deregister(m));
    } else {
        EXPECT_EQ(P2P_ERR_UNSUPPORTED, st);
        EXPECT_EQ(nullptr, m);
    }
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
}

TEST_F(Single, PinnedAndManagedMemoryRegister) {
    for (const char *k : {"pinned", "managed"}) {
        CudaBuf b(k, 1 << 20);
        ASSERT_NE(nullptr, b.p) << k;
        p2p_mem_h m = nullptr;
        ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.p, b.len, &m)) << k;
        EXPECT_EQ(P2P_OK, p2p_mem_deregister(m)) << k;
    }
}

// Two ranks over shared memory (1 MiB: same-host single copy) and tcp.
TEST(CudaTwoRanks, ManagedAndPinnedPayloadsArriveIntact) {
    NEED_GPU();
    for (const char *env : {"", "UCX_TLS=tcp,self P2P_CMA=off"}) {
        for (const char *kind : {"managed", "pinned"}) {
            for (size_t len : {size_t(4096), size_t(1) << 20}) {
                p2ptest::ShellResult r = run_ranks(env, kind, len);
                EXPECT_EQ(0, r.status) << env << " " << kind << " " << len << "\n" << r.out;
                EXPECT_NE(std::string::npos, r.out.find("verified " + std::to_string(len)))
                    << r.out;
            }
        }
    }
}

// Device memory: staged through host memory by a UCX without CUDA, over
// shared memory (single copy from the host copies at 1 MiB, and for every
// size with P2P_CMA_THRESH=0) and tcp; refused, not crashed, with staging
// off.
TEST(CudaTwoRanks, DeviceMemoryArrivesIntact) {
    NEED_GPU();
    for (const char *env : {"", "P2P_CMA_THRESH=0", "UCX_TLS=tcp,self P2P_CMA=off"}) {
        for (size_t len : {size_t(8), size_t(65536) + 3, size_t(4) << 20}) {
            p2ptest::ShellResult r = run_ranks(env, "device", len);
            EXPECT_EQ(0, r.status) << env << " " << len << "\n" << r.out;
            EXPECT_NE(std::string::npos, r.out.find("verified " + std::to_string(len)))
                << r.out;
        }
    }
    for (const char *env : {"", "UCX_TLS=tcp,self P2P_CMA=off"}) {
        p2ptest::ShellResult r = run_ranks(env, "async", size_t(65536) + 3);
        EXPECT_EQ(0, r.status) << env << " async\n" << r.out;
        EXPECT_NE(std::string::npos, r.out.find("verified 65539")) << r.out;
    }
    p2ptest::ShellResult r = run_ranks("P2P_CUDA_STAGING=off", "device", size_t(1) << 20);
    EXPECT_EQ(0, r.status) << r.out;
    const char *expect = ucx_moves_cuda() ? "verified" : "device memory refused";
    EXPECT_NE(std::string::npos, r.out.find(expect)) << r.out;
}

/** Rows of p2p_perftest's CSV (bw and lat) in out that count every byte
 *  sent and received, none lost; fails the test on a row that does not. */
size_t good_csv_rows(const std::string &out) {
    // CSV rows: test,size,...; fields 14-17: bytes_expected, bytes_sent,
    // bytes_received, errors.
    size_t rows = 0;
    std::istringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind("[0] ", 0) == 0) line.erase(0, 4);  // p2prun's rank prefix
        if (line.rfind("bw,", 0) != 0 && line.rfind("lat,", 0) != 0) continue;
        std::vector<std::string> f;
        std::istringstream fields(line);
        std::string x;
        while (std::getline(fields, x, ',')) f.push_back(x);
        EXPECT_GE(f.size(), 18u) << line;
        if (f.size() < 18) continue;
        EXPECT_NE("0", f[14]) << line;
        EXPECT_EQ(f[14], f[15]) << line;
        EXPECT_EQ(f[14], f[16]) << line;
        EXPECT_EQ("0", f[17]) << line;
        ++rows;
    }
    return rows;
}

// p2p_perftest -m: managed and device buffers move every byte counted;
// with staging off, a UCX without CUDA fails device buffers with the
// refusal, not a crash.
TEST(CudaPerftest, MemoryTypes) {
    NEED_GPU();
    const std::string pt = p2ptest::top_builddir() + "/tools/perftest/p2p_perftest";
    const std::string run = "timeout 120 " + p2ptest::top_builddir() + "/tools/p2prun/p2prun -n 2 -- " +
                            pt + " -q --csv -t bw,lat -s 8,1M -n 20 -m ";
    for (const char *type : {"cuda-managed", "cuda"}) {
        p2ptest::ShellResult m = p2ptest::run_shell(run + type + " 2>&1");
        EXPECT_EQ(0, m.status) << type << "\n" << m.out;
        EXPECT_EQ(4u, good_csv_rows(m.out)) << type << "\n" << m.out;
    }
    p2ptest::ShellResult d = p2ptest::run_shell("P2P_CUDA_STAGING=off " + run + "cuda 2>&1");
    if (ucx_moves_cuda()) {
        EXPECT_EQ(0, d.status) << d.out;
    } else {
        EXPECT_NE(0, d.status) << d.out;
        EXPECT_NE(std::string::npos, d.out.find("CUDA device memory")) << d.out;
        EXPECT_EQ(std::string::npos, d.out.find("Segmentation")) << d.out;
    }
}

int main(int argc, char **argv) {
    if (argc == 4 && std::strcmp(argv[1], "--rank") == 0) {
        return rank_main(argv[2], std::strtoull(argv[3], nullptr, 0));
    }
    // No GPU at all (CI): one automake SKIP with the reason, rather than a
    // PASS made of skipped tests.
    const std::string why = no_gpu_reason();
    if (why.empty() == false && argc == 1) {
        std::printf("cuda_test: skipped: %s\n", why.c_str());
        return 77;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) g_self.assign(self, static_cast<size_t>(n));
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
