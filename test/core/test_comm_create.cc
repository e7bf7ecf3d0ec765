/*
 * Comm::create's check of what the bootstrap reports: a job larger than
 * the tag's rank field (kMaxRanks), or a rank outside its job, is refused
 * with P2P_ERR_UNSUPPORTED before any exchange (the C API passes that
 * status on; no real bootstrap reaches 2^18 ranks in a test). At the limit
 * the exchange goes ahead, and its failure is the communicator's. And what
 * the exchange brings back: a missing, short, foreign, other-version or
 * mis-sized blob (a rank running another ucxp2p, or a broken bootstrap)
 * fails with P2P_ERR_BOOTSTRAP, and claims no communicator id. Two
 * single-rank creates on one context at once both get an id. Creates of
 * two-rank jobs whose ranks share contexts (core/comm_wireup.h): run at
 * once they agree on every rank; ids another create holds are waited for,
 * up to P2P_BOOTSTRAP_TIMEOUT_MS, then every rank gets P2P_ERR_BUSY.
 */
#include "core/api_handles.h"
#include "core/comm.h"
#include "core/context.h"
#include "wireup/bootstrap.h"
#include "core_util.h"
#include "thread_job.h"
#include "../scoped_env.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

using namespace ucxp2p;
using coretest::FakeJob;
using coretest::PairExchange;

namespace {

/** A job whose exchange fails (and is counted). */
class FailingBootstrap : public FakeJob {
public:
    using FakeJob::FakeJob;
    p2p_status_t allgather(const std::vector<uint8_t> &,
                           std::vector<std::vector<uint8_t>> *) override {
        ++exchanges;
        return P2P_ERR_BOOTSTRAP;
    }
    int exchanges = 0;
};

/** Where `parties` exchanges meet: each waits (at most 10 s) for the
 *  others. */
struct Meeting {
    explicit Meeting(int n = 2) : parties(n) {}
    const int parties;
    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
    void meet() {
        std::unique_lock<std::mutex> lock(mu);
        ++arrived;
        cv.notify_all();
        cv.wait_for(lock, std::chrono::seconds(10), [this] { return arrived >= parties; });
    }
};

/** A job of one rank whose exchange returns once another one's began:
 *  both took their snapshot of the free ids before either claims one. */
class MeetingSingle : public FakeJob {
public:
    explicit MeetingSingle(Meeting *m) : FakeJob(1, 0), m_(m) {}
    p2p_status_t allgather(const std::vector<uint8_t> &mine,
                           std::vector<std::vector<uint8_t>> *all) override {
        m_->meet();
        all->assign(1, mine);
        return P2P_OK;
    }

private:
    Meeting *m_;
};

/** A job of one rank. */
class SoloJob : public FakeJob {
public:
    SoloJob() : FakeJob(1, 0) {}
    p2p_status_t allgather(const std::vector<uint8_t> &mine,
                           std::vector<std::vector<uint8_t>> *all) override {
        all->assign(1, mine);
        return P2P_OK;
    }
};

class CommCreate : public ::testing::Test {
protected:
    void SetUp() override {
        std::unique_ptr<Context> ctx;
        coretest::self_context(&ctx);
        ctx_ = std::move(ctx);
    }
    p2p_status_t create(FailingBootstrap &bs) {
        std::unique_ptr<Comm> c;
        p2p_status_t st = Comm::create(ctx_, 1, bs, &c);
        EXPECT_EQ(nullptr, c) << "a failed create handed out a communicator";
        return st;
    }
    std::shared_ptr<Context> ctx_;
};

} // namespace

TEST_F(CommCreate, MoreRanksThanTheTagHoldsIsUnsupported) {
    FailingBootstrap big(kMaxRanks + 1, 0);
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, create(big));
    EXPECT_EQ(0, big.exchanges) << "refused only after the exchange";
    FailingBootstrap at_limit(kMaxRanks, kMaxRanks - 1);
    EXPECT_EQ(P2P_ERR_BOOTSTRAP, create(at_limit));
    EXPECT_EQ(1, at_limit.exchanges);
}

TEST_F(CommCreate, RankOutsideItsJobIsUnsupported) {
    FailingBootstrap outside(4, 4);
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, create(outside));
    FailingBootstrap empty(0, 0);
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, create(empty));
    EXPECT_EQ(0, outside.exchanges + empty.exchanges);
}

// The same refusals through the C API, which documents them: the status
// passes through p2p_comm_create, *comm_p is left as it was, and the
// bootstrap handle stays usable (destroyed by the caller).
TEST(CommCreateApi, JobTheTagCannotHoldIsUnsupported) {
    p2p_context_h ctx = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    struct Case {
        uint32_t size, rank;
    };
    for (Case k : {Case{kMaxRanks + 1, 0}, Case{4, 4}, Case{0, 0}}) {
        auto *job = new FailingBootstrap(k.size, k.rank);
        p2p_bootstrap_h bs = api::bootstrap_handle(std::unique_ptr<Bootstrap>(job));
        ASSERT_NE(nullptr, bs);
        p2p_comm_h comm = reinterpret_cast<p2p_comm_h>(0x1);  // must stay as it was
        EXPECT_EQ(P2P_ERR_UNSUPPORTED, p2p_comm_create(ctx, bs, &comm))
            << "rank " << k.rank << " of " << k.size;
        EXPECT_EQ(reinterpret_cast<p2p_comm_h>(0x1), comm);
        EXPECT_EQ(0, job->exchanges) << "refused before any exchange";
        EXPECT_EQ(P2P_OK, p2p_bootstrap_destroy(bs));
    }
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
}

namespace {

/** A 2-rank job (this process is rank 0) whose exchange returns this
 *  rank's blob and, for rank 1, what forge() makes of it. */
class ForgingBootstrap : public FakeJob {
public:
    using Forge = void (*)(std::vector<std::vector<uint8_t>> *all);
    explicit ForgingBootstrap(Forge f) : FakeJob(2, 0), forge_(f) {}
    p2p_status_t allgather(const std::vector<uint8_t> &mine,
                           std::vector<std::vector<uint8_t>> *all) override {
        *all = {mine, mine};
        forge_(all);
        return P2P_OK;
    }

private:
    Forge forge_;
};

/** The blob's first two words: magic, then wire version. */
void add_to_word(std::vector<uint8_t> *blob, size_t word, uint32_t delta) {
    uint32_t v;
    std::memcpy(&v, blob->data() + 4 * word, 4);
    v += delta;
    std::memcpy(blob->data() + 4 * word, &v, 4);
}

} // namespace

TEST_F(CommCreate, BadExchangeResultsAreBootstrapErrors) {
    const std::pair<const char *, ForgingBootstrap::Forge> cases[] = {
        {"one blob for two ranks", [](std::vector<std::vector<uint8_t>> *a) { a->pop_back(); }},
        {"short blob", [](std::vector<std::vector<uint8_t>> *a) { (*a)[1].resize(6); }},
        {"empty blob", [](std::vector<std::vector<uint8_t>> *a) { (*a)[1].clear(); }},
        {"foreign magic", [](std::vector<std::vector<uint8_t>> *a) { add_to_word(&(*a)[1], 0, 1); }},
        {"other wire version", [](std::vector<std::vector<uint8_t>> *a) { add_to_word(&(*a)[1], 1, 1); }},
        {"trailing byte", [](std::vector<std::vector<uint8_t>> *a) { (*a)[1].push_back(0); }},
        {"address cut short", [](std::vector<std::vector<uint8_t>> *a) { (*a)[1].pop_back(); }},
    };
    Context::CommIdGens gens_before, gens_after;
    const Context::CommIdSet free_before = ctx_->free_comm_ids(&gens_before);
    for (const auto &c : cases) {
        ForgingBootstrap bs(c.second);
        std::unique_ptr<Comm> comm;
        EXPECT_EQ(P2P_ERR_BOOTSTRAP, Comm::create(ctx_, 1, bs, &comm)) << c.first;
        EXPECT_EQ(nullptr, comm) << c.first;
    }
    EXPECT_EQ(free_before, ctx_->free_comm_ids(&gens_after)) << "a failed create kept an id";
    // The unforged exchange of the same job succeeds.
    ForgingBootstrap fine([](std::vector<std::vector<uint8_t>> *) {});
    std::unique_ptr<Comm> comm;
    EXPECT_EQ(P2P_OK, Comm::create(ctx_, 1, fine, &comm));
    EXPECT_NE(nullptr, comm);
}

// Two threads create a communicator on one context at once, each over its
// own single-rank bootstrap (p2p_comm_create is callable from any thread):
// both snapshots offer the same lowest id, and the second to claim it got
// P2P_ERR_BUSY although 255 more were free. One rank agrees with nobody:
// it chooses again.
TEST_F(CommCreate, ConcurrentSingleRankCreatesOnOneContextBothGetAnId) {
    Meeting m;
    MeetingSingle a(&m), b(&m);
    std::unique_ptr<Comm> ca, cb;
    p2p_status_t sa = P2P_ERR_TRANSPORT, sb = P2P_ERR_TRANSPORT;
    std::thread other([&] { sa = Comm::create(ctx_, 1, a, &ca); });
    sb = Comm::create(ctx_, 1, b, &cb);
    other.join();
    ASSERT_EQ(P2P_OK, sa);
    ASSERT_EQ(P2P_OK, sb);
    EXPECT_NE(ca->id(), cb->id());
}

namespace {

/** Rank `rank` of a two-rank job exchanging through ex; its first
 *  exchange meets the other three creates of the round first. */
class PairRank : public FakeJob {
public:
    PairRank(PairExchange *ex, uint32_t rank, Meeting *start)
        : FakeJob(2, rank), ex_(ex), start_(start) {}
    p2p_status_t allgather(const std::vector<uint8_t> &mine,
                           std::vector<std::vector<uint8_t>> *all) override {
        if (exchanges++ == 0 && start_ != nullptr) start_->meet();
        return ex_->swap(rank(), mine, all);
    }
    int exchanges = 0;

private:
    PairExchange *ex_;
    Meeting *start_;
};

/** Both ranks of one two-rank job, each on its context (ctx[rank]). */
struct PairRun {
    p2p_status_t st[2] = {P2P_ERR_TRANSPORT, P2P_ERR_TRANSPORT};
    std::unique_ptr<Comm> comm[2];
    int exchanges[2] = {0, 0};
    double seconds = 0;
};

PairRun create_pair(std::shared_ptr<Context> ctx[2]) {
    PairRun run;
    PairExchange ex;
    PairRank r0(&ex, 0, nullptr), r1(&ex, 1, nullptr);
    const auto t0 = std::chrono::steady_clock::now();
    std::thread other([&] { run.st[1] = Comm::create(ctx[1], 1, r1, &run.comm[1]); });
    run.st[0] = Comm::create(ctx[0], 1, r0, &run.comm[0]);
    other.join();
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    run.exchanges[0] = r0.exchanges;
    run.exchanges[1] = r1.exchanges;
    return run;
}

class CommCreateRace : public ::testing::Test {
protected:
    void SetUp() override {
        for (auto &c : ctx_) {
            std::unique_ptr<Context> u;
            coretest::self_context(&u);
            c = std::move(u);
        }
    }
    std::shared_ptr<Context> ctx_[2];
};

} // namespace

// Two jobs of two ranks each, whose ranks share two contexts (ranks 0 on
// one, ranks 1 on the other), create their communicators at the same time:
// four threads, every snapshot of the free ids taken before any id is
// chosen. Both jobs saw the same lowest id free; before ids were reserved
// for the exchange, whichever create claimed it first on a context won
// there, so a job could get its id on one rank and P2P_ERR_BUSY on the
// other. Now every create succeeds on both ranks with one id per job.
TEST_F(CommCreateRace, ConcurrentCreatesOfTwoJobsAgreeOnEveryRank) {
    int retried = 0;
    for (int round = 0; round < 100; ++round) {
        Meeting start(4);  // every snapshot before any choice
        PairExchange ex[2];
        std::unique_ptr<PairRank> bs[2][2];
        std::unique_ptr<Comm> comm[2][2];
        p2p_status_t st[2][2];
        std::vector<std::thread> threads;
        for (int j = 0; j < 2; ++j) {
            for (uint32_t r = 0; r < 2; ++r) {
                bs[j][r].reset(new PairRank(&ex[j], r, &start));
                st[j][r] = P2P_ERR_TRANSPORT;
                threads.emplace_back([&, j, r] {
                    st[j][r] = Comm::create(ctx_[r], 1, *bs[j][r], &comm[j][r]);
                });
            }
        }
        for (auto &t : threads) t.join();
        for (int j = 0; j < 2; ++j) {
            for (uint32_t r = 0; r < 2; ++r) {
                ASSERT_EQ(P2P_OK, st[j][r]) << "round " << round << ": job " << j
                                            << " rank " << r << ": " << p2p_status_string(st[j][r]);
            }
            EXPECT_EQ(comm[j][0]->id(), comm[j][1]->id()) << "round " << round;
            retried += bs[j][0]->exchanges > 1 ? 1 : 0;
        }
        EXPECT_NE(comm[0][0]->id(), comm[1][0]->id()) << "round " << round;
    }
    // Every round meets all four snapshots first: one job at least waits
    // for the other's ids in each.
    EXPECT_GE(retried, 100);
}

// A create on rank 0's context holds every id it could offer (as one
// whose exchange waits for late ranks would): the job exchanges again,
// with pauses, until P2P_BOOTSTRAP_TIMEOUT_MS passed on a rank, then both
// ranks fail with P2P_ERR_BUSY in the same exchange. Once the ids come
// free, the next create takes one in one exchange.
TEST_F(CommCreateRace, IdsHeldPastTheBootstrapTimeoutAreBusyOnEveryRank) {
    p2ptest::ScopedEnv timeout("P2P_BOOTSTRAP_TIMEOUT_MS", "300");
    Context::CommIdGens gens;
    bool contended = true;
    const Context::CommIdSet held = ctx_[0]->reserve_comm_ids(&gens, &contended);
    EXPECT_FALSE(contended);
    PairRun busy = create_pair(ctx_);
    EXPECT_EQ(P2P_ERR_BUSY, busy.st[0]) << p2p_status_string(busy.st[0]);
    EXPECT_EQ(P2P_ERR_BUSY, busy.st[1]) << p2p_status_string(busy.st[1]);
    EXPECT_EQ(nullptr, busy.comm[0]);
    EXPECT_EQ(nullptr, busy.comm[1]);
    EXPECT_GT(busy.exchanges[0], 2);
    EXPECT_EQ(busy.exchanges[0], busy.exchanges[1]);
    EXPECT_GE(busy.seconds, 0.3);
    EXPECT_LT(busy.seconds, 10.0);
    // The failed job left no reservation behind on rank 1.
    const Context::CommIdSet again = ctx_[1]->reserve_comm_ids(&gens, &contended);
    EXPECT_FALSE(contended) << "a failed create kept its reservation";
    ctx_[1]->unreserve_comm_ids(again);

    ctx_[0]->unreserve_comm_ids(held);
    PairRun fine = create_pair(ctx_);
    ASSERT_EQ(P2P_OK, fine.st[0]) << p2p_status_string(fine.st[0]);
    ASSERT_EQ(P2P_OK, fine.st[1]) << p2p_status_string(fine.st[1]);
    EXPECT_EQ(fine.comm[0]->id(), fine.comm[1]->id());
    EXPECT_EQ(1, fine.exchanges[0]);
}

// Ids held only for a while: the job waits for them and gets one, on both
// ranks, well before the timeout.
TEST_F(CommCreateRace, IdsHeldForAWhileAreWaitedFor) {
    Context::CommIdGens gens;
    bool contended = false;
    const Context::CommIdSet held = ctx_[1]->reserve_comm_ids(&gens, &contended);
    std::chrono::steady_clock::time_point released;
    std::thread release([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        released = std::chrono::steady_clock::now(); // no id is free before
        ctx_[1]->unreserve_comm_ids(held);
    });
    PairRun run = create_pair(ctx_);
    const auto done = std::chrono::steady_clock::now();
    release.join();
    ASSERT_EQ(P2P_OK, run.st[0]) << p2p_status_string(run.st[0]);
    ASSERT_EQ(P2P_OK, run.st[1]) << p2p_status_string(run.st[1]);
    EXPECT_EQ(run.comm[0]->id(), run.comm[1]->id());
    EXPECT_GT(run.exchanges[0], 1);
    // The creates ended after the ids came free. (Not "after 0.1 s": the
    // release thread's sleep starts before create_pair's clock does.)
    EXPECT_LE(released, done);
}

// Every id in use on one rank and no create holding any: P2P_ERR_BUSY at
// once, in one exchange, on both ranks (nothing to wait for).
TEST_F(CommCreateRace, NoIdFreeAndNoneHeldIsBusyAtOnce) {
    std::vector<std::unique_ptr<Comm>> all;
    for (int i = 0; i < Context::kMaxComms; ++i) {
        SoloJob one;
        std::unique_ptr<Comm> c;
        ASSERT_EQ(P2P_OK, Comm::create(ctx_[0], 1, one, &c)) << i;
        all.push_back(std::move(c));
    }
    PairRun run = create_pair(ctx_);
    EXPECT_EQ(P2P_ERR_BUSY, run.st[0]);
    EXPECT_EQ(P2P_ERR_BUSY, run.st[1]);
    EXPECT_EQ(1, run.exchanges[0]);
    EXPECT_EQ(1, run.exchanges[1]);
}
