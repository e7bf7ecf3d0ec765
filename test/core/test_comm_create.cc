/*
 * Comm::create's check of what the bootstrap reports: a job larger than
 * the tag's rank field (kMaxRanks), or a rank outside its job, is refused
 * with P2P_ERR_UNSUPPORTED before any exchange (the C API passes that
 * status on; no real bootstrap reaches 2^18 ranks in a test). At the limit
 * the exchange goes ahead, and its failure is the communicator's. And what
 * the exchange brings back: a missing, short, foreign, other-version or
 * mis-sized blob (a rank running another ucxp2p, or a broken bootstrap)
 * fails with P2P_ERR_BOOTSTRAP, and claims no communicator id. Two
 * single-rank creates on one context at once both get an id.
 */
#include "core/comm.h"
#include "core/context.h"
#include "wireup/bootstrap.h"
#include "core_util.h"

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

namespace {

/** Rank `rank` of a job of `size` ranks, all on one host; its exchange is
 *  the subclass's. */
class FakeJob : public Bootstrap {
public:
    FakeJob(uint32_t size, uint32_t rank) : size_(size), rank_(rank) {}
    uint32_t rank() const override { return rank_; }
    uint32_t size() const override { return size_; }
    uint32_t local_rank() const override { return 0; }
    uint32_t local_size() const override { return 1; }
    const char *name() const override { return "fake"; }
    p2p_status_t barrier() override { return P2P_OK; }
    void abort(const char *) override {}

private:
    uint32_t size_, rank_;
};

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

/** Where two exchanges meet: each waits (at most 10 s) for the other. */
struct Meeting {
    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
    void meet() {
        std::unique_lock<std::mutex> lock(mu);
        ++arrived;
        cv.notify_all();
        cv.wait_for(lock, std::chrono::seconds(10), [this] { return arrived >= 2; });
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
