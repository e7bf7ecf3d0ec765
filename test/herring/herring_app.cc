/*
 * An "SMDDP application" for the herring shim tests: built only against the
 * test's copy of the vendor header (vendor_herring.hpp) and linked with the
 * aborting stub libsmddpcpp.so; the tests run it with
 * LD_PRELOAD=libucxp2p_herring.so. It never includes a ucxp2p header.
 *
 *   herring_app single DEVICES   one process, no launcher: calls before
 *                                Initialize, errors, self transfers,
 *                                truncation, Shutdown and calls after it.
 *                                DEVICES: expected herringP2PGetRDMADevices
 *                                result, comma-separated ("-" for none).
 *   herring_app initfail DEV     one process whose herringP2PInitialize
 *                                fails (the script names a device that does
 *                                not exist): no exception, the environment
 *                                untouched, NULL registrations, one
 *                                RDMA_READ_FAIL entry per Send/Recv,
 *                                completion calls answer at once; then
 *                                SMDATAPARALLEL_DEVICE_NAME=DEV (a real one)
 *                                and a retried Initialize works; DEV "-":
 *                                Shutdown instead, then RDMA_SHUTDOWN.
 *   herring_app shutdown-race MS a thread blocked in ReadCompletion while
 *                                the main thread calls Shutdown MS ms later.
 *   herring_app job N            rank of an N-rank job (mpirun/srun/p2prun): the
 *                                vendor's even->odd demo, an all-to-all,
 *                                receives before/after the data arrived,
 *                                truncation, Shutdown with pending receives.
 * Prints "herring_app OK rank R" on success; exits 1 with a reason on the
 * first failed check. A watchdog ends a hung run.
 */
#include "vendor_herring.hpp"

#define HERRING_TEST_APP "herring_app"
#include "app_check.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace {

int g_rank = 0;

constexpr uint32_t kNone = 0xffffffffu;

/** The process environment (variables starting with prefix), sorted:
 *  Initialize must leave it as it was (ucxp2p hands its rail plan to UCX
 *  through the UCP config; a setenv in a library races with the
 *  application's threads). */
std::vector<std::string> environment(const char *prefix = "") {
    std::vector<std::string> env;
    const size_t n = std::strlen(prefix);
    for (char **e = environ; e != nullptr && *e != nullptr; ++e) {
        if (std::strncmp(*e, prefix, n) == 0) env.emplace_back(*e);
    }
    std::sort(env.begin(), env.end());
    return env;
}

void print_env_diff(const std::vector<std::string> &before,
                    const std::vector<std::string> &after) {
    for (const std::string &v : after) {
        if (!std::binary_search(before.begin(), before.end(), v)) {
            std::fprintf(stderr, "herring_app rank %d: environment gained %s\n", g_rank,
                         v.c_str());
        }
    }
    for (const std::string &v : before) {
        if (!std::binary_search(after.begin(), after.end(), v)) {
            std::fprintf(stderr, "herring_app rank %d: environment lost %s\n", g_rank,
                         v.c_str());
        }
    }
}

uint8_t pattern(int src, int dst, int tid, size_t i) {
    return static_cast<uint8_t>(src * 31 + dst * 17 + tid * 7 + i * 13 + (i >> 8));
}

void fill(uint8_t *p, size_t n, int src, int dst, int tid) {
    for (size_t i = 0; i < n; ++i) p[i] = pattern(src, dst, tid, i);
}

bool verify(const uint8_t *p, size_t n, int src, int dst, int tid) {
    for (size_t i = 0; i < n; ++i) {
        if (p[i] != pattern(src, dst, tid, i)) {
            std::fprintf(stderr, "rank %d: byte %zu from %d tensor %d is %u, want %u\n",
                         g_rank, i, src, tid, p[i], pattern(src, dst, tid, i));
            return false;
        }
    }
    return true;
}

int env_int(std::initializer_list<const char *> names, int dflt) {
    for (const char *n : names) {
        const char *v = std::getenv(n);
        if (v != nullptr && *v != '\0') return std::atoi(v);
    }
    return dflt;
}

void expect_entry(const CompletionEntry &e, const void *ctx, uint32_t rank, uint32_t tid,
                  herringP2PMessageErrorCode_t code) {
    if (e.context != ctx || e.dst_rank != rank || e.tensor_id != tid || e.error_code != code) {
        std::fprintf(stderr, "rank %d: entry {ctx %p rank %u tid %u code %d}, want "
                     "{ctx %p rank %u tid %u code %d}\n", g_rank, e.context, e.dst_rank,
                     e.tensor_id, static_cast<int>(e.error_code), ctx, rank, tid,
                     static_cast<int>(code));
        std::exit(1);
    }
}

std::string join(const std::vector<std::string> &v) {
    std::string s;
    for (const std::string &x : v) s += (s.empty() ? "" : ",") + x;
    return s.empty() ? "-" : s;
}

/* ------------------------------------------------------------ single */

int run_single(const char *want_devices) {
    char ctx[16];
    // Before Initialize: no crash, one RDMA_READ_FAIL entry per call, and a
    // completion call with nothing queued answers instead of hanging.
    static uint8_t early[64];
    CHECK(herringP2PRegisterMemory(early, sizeof(early)) == nullptr);
    herringP2PSend(0, early, nullptr, 8, 11, &ctx[0], 0);
    herringP2PRecv(0, early, nullptr, 8, 12, &ctx[1], 0);
    expect_entry(herringP2PSendCompletion(), &ctx[0], 0, 11, RDMA_READ_FAIL);
    expect_entry(herringP2PReadCompletion(), &ctx[1], 0, 12, RDMA_READ_FAIL);
    expect_entry(herringP2PReadCompletion(), nullptr, kNone, kNone, RDMA_READ_FAIL);
    CHECK(herringLocalDevice() == env_int({"LOCAL_RANK"}, 0));

    std::vector<std::string> devs{"stale"};
    herringP2PGetRDMADevices(devs);
    CHECK(join(devs) == want_devices);

    const std::vector<std::string> env_before = environment();
    herringP2PInitialize();
    herringP2PInitialize();  // second call: no effect
    // The rail plan (SMDATAPARALLEL_DEVICE_NAME) reaches UCX through
    // ucxp2p's UCP config -- the script checks its log -- not the environment.
    const std::vector<std::string> env_after = environment();
    if (env_after != env_before) print_env_diff(env_before, env_after);
    CHECK(env_after == env_before);
    // The same device as before Initialize (an application may have
    // chosen its GPU then): LOCAL_RANK without a size is not the rail
    // plan's (rank 0 of 1) but stays the device's. No GPU here.
    CHECK(herringLocalDevice() == env_int({"LOCAL_RANK"}, 0));

    CHECK(herringP2PRegisterMemory(early, -1) == nullptr);
    CHECK(herringP2PRegisterMemory(nullptr, 64) == nullptr);
    CHECK(herringP2PRegisterMemory(early, 0) == nullptr);

    // One registration, used for sub-ranges: self send/receive.
    std::vector<uint8_t> buf(64 * 1024);
    void *mr = herringP2PRegisterMemory(buf.data(), static_cast<int>(buf.size()));
    CHECK(mr != nullptr);
    uint8_t *src = buf.data() + 100, *dst = buf.data() + 32 * 1024;
    fill(src, 5000, 0, 0, 42);
    herringP2PRecv(0, dst, mr, 5000, 42, &ctx[2], 7);
    herringP2PSend(0, src, mr, 5000, 42, &ctx[3], 7);
    expect_entry(herringP2PReadCompletion(), &ctx[2], 0, 42, RDMA_READ_SUCCESS);
    expect_entry(herringP2PSendCompletion(), &ctx[3], 0, 42, RDMA_READ_SUCCESS);
    CHECK(verify(dst, 5000, 0, 0, 42));

    // Truncation: RDMA_READ_FAIL and nothing past the receive's length.
    std::memset(dst, 0xEE, 300);
    herringP2PSend(0, src, mr, 200, 43, &ctx[4], 0);
    herringP2PRecv(0, dst, mr, 100, 43, &ctx[5], 0);
    expect_entry(herringP2PReadCompletion(), &ctx[5], 0, 43, RDMA_READ_FAIL);
    herringP2PSendCompletion();  // the sender's own entry, any status
    for (int i = 100; i < 300; ++i) CHECK(dst[i] == 0xEE);

    // Rejected at once by ucxp2p: still exactly one RDMA_READ_FAIL entry each.
    uint8_t outside[16];
    herringP2PSend(5, src, mr, 10, 50, &ctx[6], 0);             // bad rank
    herringP2PSend(-1, src, mr, 10, 51, &ctx[7], 0);            // bad rank
    herringP2PRecv(0, outside, mr, sizeof(outside), 52, &ctx[8], 0);  // not registered
    herringP2PRecv(0, dst, nullptr, 10, 53, &ctx[9], 0);        // no mr
    herringP2PSend(0, buf.data() + buf.size() - 8, mr, 16, 54, &ctx[10], 0);  // overruns mr
    expect_entry(herringP2PSendCompletion(), &ctx[6], 5, 50, RDMA_READ_FAIL);
    expect_entry(herringP2PSendCompletion(), &ctx[7], kNone, 51, RDMA_READ_FAIL);
    expect_entry(herringP2PReadCompletion(), &ctx[8], 0, 52, RDMA_READ_FAIL);
    expect_entry(herringP2PReadCompletion(), &ctx[9], 0, 53, RDMA_READ_FAIL);
    expect_entry(herringP2PSendCompletion(), &ctx[10], 0, 54, RDMA_READ_FAIL);
    // A completion call already blocked when another thread's call is
    // rejected returns that call's own entry (not a made-up one).
    {
        CompletionEntry e{};
        std::thread waiter([&] { e = herringP2PSendCompletion(); });
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let it block
        herringP2PSend(5, src, mr, 10, 55, &ctx[15], 0);  // bad rank
        waiter.join();
        expect_entry(e, &ctx[15], 5, 55, RDMA_READ_FAIL);
    }

    // Shutdown completes pending receives with RDMA_SHUTDOWN.
    herringP2PRecv(0, dst, mr, 64, 60, &ctx[11], 0);
    herringP2PRecv(0, dst + 64, mr, 64, 61, &ctx[12], 0);
    herringP2PShutdown();
    std::map<const void *, uint32_t> got;
    for (int i = 0; i < 2; ++i) {
        CompletionEntry e = herringP2PReadCompletion();
        CHECK(e.error_code == RDMA_SHUTDOWN);
        got[e.context] = e.tensor_id;
    }
    CHECK(got.size() == 2 && got[&ctx[11]] == 60 && got[&ctx[12]] == 61);
    // After Shutdown: answers, no hang, no crash.
    expect_entry(herringP2PReadCompletion(), nullptr, kNone, kNone, RDMA_SHUTDOWN);
    expect_entry(herringP2PSendCompletion(), nullptr, kNone, kNone, RDMA_SHUTDOWN);
    herringP2PSend(0, src, mr, 10, 70, &ctx[13], 0);
    expect_entry(herringP2PSendCompletion(), &ctx[13], 0, 70, RDMA_SHUTDOWN);
    CHECK(herringP2PRegisterMemory(buf.data(), 64) == nullptr);
    herringP2PShutdown();    // idempotent
    herringP2PInitialize();  // refused: stays shut down
    herringP2PRecv(0, dst, mr, 10, 71, &ctx[14], 0);
    expect_entry(herringP2PReadCompletion(), &ctx[14], 0, 71, RDMA_SHUTDOWN);
    std::printf("herring_app OK rank 0\n");
    return 0;
}

/* ------------------------------------------------------------ initfail */

/** Every call of an application whose Initialize failed: each answers at
 *  once (the watchdog and the script's timeout catch a hang). */
void expect_unusable(char *ctx, int tid) {
    static uint8_t buf[256];
    CHECK(herringP2PRegisterMemory(buf, sizeof(buf)) == nullptr);
    herringP2PRecv(0, buf, nullptr, 64, tid, &ctx[0], 0);
    herringP2PSend(0, buf + 64, nullptr, 64, tid + 1, &ctx[1], 0);
    // A bogus mr: the shim must not touch it while uninitialized.
    herringP2PRecv(0, buf, reinterpret_cast<void *>(0x10), 64, tid + 2, &ctx[2], 0);
    expect_entry(herringP2PReadCompletion(), &ctx[0], 0, tid, RDMA_READ_FAIL);
    expect_entry(herringP2PReadCompletion(), &ctx[2], 0, tid + 2, RDMA_READ_FAIL);
    expect_entry(herringP2PSendCompletion(), &ctx[1], 0, tid + 1, RDMA_READ_FAIL);
    expect_entry(herringP2PReadCompletion(), nullptr, kNone, kNone, RDMA_READ_FAIL);
    expect_entry(herringP2PSendCompletion(), nullptr, kNone, kNone, RDMA_READ_FAIL);
}

int run_initfail(const char *good_device) {
    char ctx[8];
    const std::vector<std::string> env_before = environment();
    bool threw = false;
    try {
        herringP2PInitialize();  // fails: the vendor API returns void
    } catch (...) {
        threw = true;
    }
    CHECK(!threw);
    const std::vector<std::string> env_after = environment();
    if (env_after != env_before) print_env_diff(env_before, env_after);
    CHECK(env_after == env_before);
    expect_unusable(ctx, 10);
    CHECK(herringLocalDevice() == env_int({"LOCAL_RANK"}, 0));
    herringP2PInitialize();  // the same cause: fails again
    expect_unusable(ctx, 20);
    if (std::strcmp(good_device, "-") == 0) {
        // Given up: Shutdown has nothing to tear down; later calls say so.
        herringP2PShutdown();
        herringP2PRecv(0, ctx, nullptr, 1, 40, &ctx[6], 0);
        expect_entry(herringP2PReadCompletion(), &ctx[6], 0, 40, RDMA_SHUTDOWN);
        expect_entry(herringP2PReadCompletion(), nullptr, kNone, kNone, RDMA_SHUTDOWN);
        std::printf("herring_app OK rank 0\n");
        return 0;
    }
    std::fprintf(stderr, "herring_app: retrying with SMDATAPARALLEL_DEVICE_NAME=%s\n",
                 good_device);

    // Fixed: a later Initialize succeeds and the shim works.
    CHECK(setenv("SMDATAPARALLEL_DEVICE_NAME", good_device, 1) == 0);
    herringP2PInitialize();
    std::vector<uint8_t> buf(4096);
    void *mr = herringP2PRegisterMemory(buf.data(), static_cast<int>(buf.size()));
    CHECK(mr != nullptr);
    fill(buf.data(), 1000, 0, 0, 30);
    herringP2PRecv(0, buf.data() + 2048, mr, 1000, 30, &ctx[3], 0);
    herringP2PSend(0, buf.data(), mr, 1000, 30, &ctx[4], 0);
    expect_entry(herringP2PReadCompletion(), &ctx[3], 0, 30, RDMA_READ_SUCCESS);
    expect_entry(herringP2PSendCompletion(), &ctx[4], 0, 30, RDMA_READ_SUCCESS);
    CHECK(verify(buf.data() + 2048, 1000, 0, 0, 30));
    herringP2PShutdown();
    herringP2PSend(0, buf.data(), mr, 8, 31, &ctx[5], 0);
    expect_entry(herringP2PSendCompletion(), &ctx[5], 0, 31, RDMA_SHUTDOWN);
    std::printf("herring_app OK rank 0\n");
    return 0;
}

/* ------------------------------------------------------------ shutdown race */

/** The API is thread-safe: two threads sit in the completion calls while
 *  the main thread posts n self transfers; every entry is a success, and
 *  each transfer completes once on each side. */
int run_threads(int n) {
    herringP2PInitialize();
    static char buf[1 << 16];
    void *mr = herringP2PRegisterMemory(buf, sizeof(buf));
    CHECK(mr != nullptr);
    std::vector<int> sent(static_cast<size_t>(n), 0), read(static_cast<size_t>(n), 0);
    std::thread rc([&] {
        for (int i = 0; i < n; ++i) {
            CompletionEntry e = herringP2PReadCompletion();
            CHECK(e.error_code == RDMA_READ_SUCCESS && e.tensor_id < static_cast<uint32_t>(n));
            ++read[e.tensor_id];
        }
    });
    std::thread sc([&] {
        for (int i = 0; i < n; ++i) {
            CompletionEntry e = herringP2PSendCompletion();
            CHECK(e.error_code == RDMA_READ_SUCCESS && e.tensor_id < static_cast<uint32_t>(n));
            ++sent[e.tensor_id];
        }
    });
    for (int i = 0; i < n; ++i) {
        size_t slot = static_cast<size_t>(i % 8) * 1024;
        herringP2PRecv(0, buf + 32768 + slot, mr, 1024, static_cast<uint32_t>(i), nullptr, 0);
        herringP2PSend(0, buf + slot, mr, 1024, static_cast<uint32_t>(i), nullptr, 0);
    }
    rc.join();
    sc.join();
    for (int i = 0; i < n; ++i) CHECK(sent[static_cast<size_t>(i)] == 1 && read[static_cast<size_t>(i)] == 1);
    herringP2PShutdown();
    std::printf("herring_app OK rank 0 (%d threaded transfers)\n", n);
    return 0;
}

/** A completion thread blocked in herringP2PReadCompletion while the main
 *  thread calls herringP2PShutdown (how an application stops its progress
 *  thread): the blocked thread gets exactly the cancelled receives, each
 *  RDMA_SHUTDOWN with its own context, then the RDMA_SHUTDOWN sentinel --
 *  never a spurious entry. */
int run_shutdown_race(int delay_ms) {
    herringP2PInitialize();
    std::vector<uint8_t> buf(4096);
    void *mr = herringP2PRegisterMemory(buf.data(), static_cast<int>(buf.size()));
    CHECK(mr != nullptr);
    constexpr int kRecvs = 8;
    static char ctx[kRecvs];
    for (int i = 0; i < kRecvs; ++i) {
        herringP2PRecv(0, buf.data() + i * 16, mr, 16, 900 + i, &ctx[i], 0);
    }
    std::vector<CompletionEntry> got;
    std::thread popper([&] {
        for (int i = 0; i <= kRecvs; ++i) got.push_back(herringP2PReadCompletion());
    });
    usleep(static_cast<useconds_t>(delay_ms) * 1000);  // let it block in the wait
    herringP2PShutdown();
    popper.join();
    std::map<const void *, uint32_t> seen;
    for (int i = 0; i < kRecvs; ++i) {
        const CompletionEntry &e = got[static_cast<size_t>(i)];
        if (e.context == nullptr || e.error_code != RDMA_SHUTDOWN) {
            std::fprintf(stderr, "entry %d: {ctx %p rank %u tid %u code %d}\n", i, e.context,
                         e.dst_rank, e.tensor_id, static_cast<int>(e.error_code));
        }
        CHECK(e.error_code == RDMA_SHUTDOWN && e.context != nullptr);
        seen[e.context] = e.tensor_id;
    }
    CHECK(seen.size() == kRecvs);
    expect_entry(got[kRecvs], nullptr, kNone, kNone, RDMA_SHUTDOWN);
    std::printf("herring_app OK rank 0\n");
    return 0;
}

/* ------------------------------------------------------------ job */

struct Op {
    int peer;
    int tid;
    size_t off;
    size_t len;
    bool done = false;
};

/** Pop `count` entries of one queue; each must name an op of `ops` once,
 *  with its peer and tensor id and RDMA_READ_SUCCESS. */
void complete_all(std::vector<Op> &ops, bool recv) {
    for (size_t i = 0; i < ops.size(); ++i) {
        CompletionEntry e = recv ? herringP2PReadCompletion() : herringP2PSendCompletion();
        const Op *op = static_cast<const Op *>(e.context);
        CHECK(op >= ops.data() && op < ops.data() + ops.size());
        Op &o = ops[static_cast<size_t>(op - ops.data())];
        CHECK(!o.done);
        o.done = true;
        CHECK(e.dst_rank == static_cast<uint32_t>(o.peer));
        CHECK(e.tensor_id == static_cast<uint32_t>(o.tid));
        CHECK(e.error_code == RDMA_READ_SUCCESS);
    }
}

int run_job(int size) {
    const int rank = g_rank;
    // Without launcher variables (tcp bootstrap, one host) local == rank.
    const int local = env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                               "LOCAL_RANK"}, rank);
    CHECK(env_int({"OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"},
                  size) == size);
    // PMIx may export its own variables; UCX's must stay untouched.
    const std::vector<std::string> ucx_before = environment("UCX_");
    herringP2PInitialize();
    const std::vector<std::string> ucx_after = environment("UCX_");
    if (ucx_after != ucx_before) print_env_diff(ucx_before, ucx_after);
    CHECK(ucx_after == ucx_before);
    CHECK(herringLocalDevice() == local);  // no GPU here: the local rank
    std::vector<std::string> devs;
    herringP2PGetRDMADevices(devs);  // whatever this machine has; must not crash

    // 1. The vendor demo: even ranks send a tensor to the next (odd) rank.
    const size_t demo_len = 1 << 16;
    std::vector<uint8_t> demo(demo_len);
    void *demo_mr = herringP2PRegisterMemory(demo.data(), static_cast<int>(demo_len));
    CHECK(demo_mr != nullptr);
    if (rank % 2 == 0 && rank + 1 < size) {
        fill(demo.data(), demo_len, rank, rank + 1, 1);
        herringP2PSend(rank + 1, demo.data(), demo_mr, demo_len, 1, demo.data(), 0);
        expect_entry(herringP2PSendCompletion(), demo.data(), rank + 1, 1, RDMA_READ_SUCCESS);
    } else if (rank % 2 == 1) {
        herringP2PRecv(rank - 1, demo.data(), demo_mr, demo_len, 1, demo.data(), 0);
        expect_entry(herringP2PReadCompletion(), demo.data(), rank - 1, 1, RDMA_READ_SUCCESS);
        CHECK(verify(demo.data(), demo_len, rank - 1, rank, 1));
    }

    // 2. All-to-all: several tensor ids and sizes per peer, one registration
    //    per direction, sub-ranges; half the peers' receives are posted
    //    before the sends, half after.
    static const size_t kSizes[] = {0, 1, 4093, 70001, 200003};
    const int kIds = 5;
    std::vector<Op> sends, recvs_early, recvs_late;
    size_t soff = 0, roff = 0;
    for (int p = 0; p < size; ++p) {
        if (p == rank) continue;
        for (int k = 0; k < kIds; ++k) {
            int tid = 100 + k * 7919 + (k == kIds - 1 ? 0x7ff00000 : 0);
            size_t len = kSizes[(k + p + rank) % 5];
            sends.push_back(Op{p, tid, soff, len});
            soff += len + 64;
        }
        for (int k = 0; k < kIds; ++k) {
            int tid = 100 + k * 7919 + (k == kIds - 1 ? 0x7ff00000 : 0);
            size_t len = kSizes[(k + p + rank) % 5];  // the sender's formula, sender = p
            (p % 2 == 0 ? recvs_early : recvs_late).push_back(Op{p, tid, roff, len});
            roff += len + 64;
        }
    }
    std::vector<uint8_t> sbuf(soff + 1), rbuf(roff + 1, 0xAB);
    void *smr = herringP2PRegisterMemory(sbuf.data(), static_cast<int>(sbuf.size()));
    void *rmr = herringP2PRegisterMemory(rbuf.data(), static_cast<int>(rbuf.size()));
    CHECK(smr != nullptr && rmr != nullptr);
    for (const Op &o : sends) fill(&sbuf[o.off], o.len, rank, o.peer, o.tid);
    for (const Op &o : recvs_early)
        herringP2PRecv(o.peer, &rbuf[o.off], rmr, o.len, o.tid, &o, 0);
    for (const Op &o : sends)
        herringP2PSend(o.peer, &sbuf[o.off], smr, o.len, o.tid, &o, 0);
    for (const Op &o : recvs_late)
        herringP2PRecv(o.peer, &rbuf[o.off], rmr, o.len, o.tid, &o, 0);
    complete_all(sends, false);
    // Receive entries of both lists arrive interleaved: one list view.
    std::vector<Op> recvs;
    recvs.reserve(recvs_early.size() + recvs_late.size());
    std::map<const Op *, size_t> index;
    for (auto *list : {&recvs_early, &recvs_late}) {
        for (const Op &o : *list) {
            index[&o] = recvs.size();
            recvs.push_back(o);
        }
    }
    for (size_t i = 0; i < recvs.size(); ++i) {
        CompletionEntry e = herringP2PReadCompletion();
        auto it = index.find(static_cast<const Op *>(e.context));
        CHECK(it != index.end());
        Op &o = recvs[it->second];
        CHECK(!o.done);
        o.done = true;
        CHECK(e.dst_rank == static_cast<uint32_t>(o.peer) &&
              e.tensor_id == static_cast<uint32_t>(o.tid) && e.error_code == RDMA_READ_SUCCESS);
    }
    for (const Op &o : recvs) {
        CHECK(verify(&rbuf[o.off], o.len, o.peer, rank, o.tid));
        for (size_t g = o.len; g < o.len + 64; ++g) CHECK(rbuf[o.off + g] == 0xAB);
    }

    // 3. Receive posted after the data surely arrived: the marker (sent
    //    after the data on the same path) is received first.
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    const size_t big = 150000;
    std::vector<uint8_t> lbuf(2 * big + 64, 0);
    void *lmr = herringP2PRegisterMemory(lbuf.data(), static_cast<int>(lbuf.size()));
    CHECK(lmr != nullptr);
    uint8_t *ldata = lbuf.data(), *lrecv = lbuf.data() + big, *mark = lbuf.data() + 2 * big;
    fill(ldata, big, rank, next, 5000);
    herringP2PSend(next, ldata, lmr, big, 5000, ldata, 0);
    herringP2PSend(next, mark, lmr, 8, 5001, mark, 0);
    herringP2PRecv(prev, mark + 8, lmr, 8, 5001, mark + 8, 0);
    expect_entry(herringP2PReadCompletion(), mark + 8, prev, 5001, RDMA_READ_SUCCESS);
    herringP2PRecv(prev, lrecv, lmr, big, 5000, lrecv, 0);
    expect_entry(herringP2PReadCompletion(), lrecv, prev, 5000, RDMA_READ_SUCCESS);
    CHECK(verify(lrecv, big, prev, rank, 5000));
    for (int i = 0; i < 2; ++i) {
        CompletionEntry e = herringP2PSendCompletion();
        CHECK(e.error_code == RDMA_READ_SUCCESS && e.dst_rank == static_cast<uint32_t>(next));
    }

    // 4. Truncation: 4096 bytes into a 1000-byte receive -> RDMA_READ_FAIL,
    //    guard bytes after the receive untouched.
    std::vector<uint8_t> tbuf(8192 + 1064, 0);
    void *tmr = herringP2PRegisterMemory(tbuf.data(), static_cast<int>(tbuf.size()));
    CHECK(tmr != nullptr);
    uint8_t *tsend = tbuf.data(), *trecv = tbuf.data() + 8192;
    fill(tsend, 4096, rank, next, 6000);
    std::memset(trecv, 0x5A, 1064);
    herringP2PRecv(prev, trecv, tmr, 1000, 6000, trecv, 0);
    herringP2PSend(next, tsend, tmr, 4096, 6000, tsend, 0);
    expect_entry(herringP2PReadCompletion(), trecv, prev, 6000, RDMA_READ_FAIL);
    for (int i = 1000; i < 1064; ++i) CHECK(trecv[i] == 0x5A);
    CompletionEntry te = herringP2PSendCompletion();
    CHECK(te.context == tsend && te.tensor_id == 6000);

    // 5. Shutdown with receives that nothing will match: one entry each,
    //    RDMA_SHUTDOWN -- or RDMA_READ_FAIL where `next` cancelled first
    //    (past Shutdown's first barrier each rank cancels in its own time,
    //    and ucxp2p ends operations naming a rank that left).
    static char pctx[3];
    for (int i = 0; i < 3; ++i)
        herringP2PRecv(next, &rbuf[static_cast<size_t>(i) * 16], rmr, 16, 7000 + i, &pctx[i], 0);
    herringP2PShutdown();
    std::map<const void *, uint32_t> got;
    for (int i = 0; i < 3; ++i) {
        CompletionEntry e = herringP2PReadCompletion();
        CHECK((e.error_code == RDMA_SHUTDOWN || e.error_code == RDMA_READ_FAIL) &&
              e.dst_rank == static_cast<uint32_t>(next));
        got[e.context] = e.tensor_id;
    }
    CHECK(got.size() == 3 && got[&pctx[0]] == 7000 && got[&pctx[1]] == 7001 &&
          got[&pctx[2]] == 7002);
    expect_entry(herringP2PReadCompletion(), nullptr, kNone, kNone, RDMA_SHUTDOWN);
    herringP2PSend(next, tsend, tmr, 8, 7100, tsend, 0);
    expect_entry(herringP2PSendCompletion(), tsend, next, 7100, RDMA_SHUTDOWN);
    // The device it named stays (the application chose its GPU with it).
    CHECK(herringLocalDevice() == local);
    std::printf("herring_app OK rank %d\n", rank);
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    alarm(100);  // watchdog: a hang becomes SIGALRM, never a stuck test
    if (argc == 3 && std::strcmp(argv[1], "single") == 0) {
        return run_single(argv[2]);
    }
    if (argc == 3 && std::strcmp(argv[1], "initfail") == 0) {
        return run_initfail(argv[2]);
    }
    if (argc == 3 && std::strcmp(argv[1], "shutdown-race") == 0) {
        return run_shutdown_race(std::atoi(argv[2]));
    }
    if (argc == 3 && std::strcmp(argv[1], "threads") == 0) {
        return run_threads(std::atoi(argv[2]));
    }
    if (argc == 3 && std::strcmp(argv[1], "job") == 0) {
        g_rank = env_int({"PMIX_RANK", "OMPI_COMM_WORLD_RANK",
                                               "SLURM_PROCID", "RANK"}, -1);
        int size = std::atoi(argv[2]);
        CHECK(g_rank >= 0 && size >= 2 && g_rank < size);
        return run_job(size);
    }
    std::fprintf(stderr, "usage: %s single DEVICES | initfail DEVICE | shutdown-race MS | "
                 "threads N | job N\n", argv[0]);
    return 2;
}
