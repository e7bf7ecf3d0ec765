/*
 * Comm::create's check of what the bootstrap reports: a job larger than
 * the tag's rank field (kMaxRanks), or a rank outside its job, is refused
 * with P2P_ERR_UNSUPPORTED before any exchange (the C API passes that
 * status on; no real bootstrap reaches 2^18 ranks in a test). At the limit
 * the exchange goes ahead, and its failure is the communicator's.
 */
#include "core/comm.h"
#include "core/context.h"
#include "wireup/bootstrap.h"
#include "core_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <vector>

using namespace ucxp2p;

namespace {

/** A job of `size` ranks whose exchange fails (and is counted). */
class FailingBootstrap : public Bootstrap {
public:
    FailingBootstrap(uint32_t size, uint32_t rank) : size_(size), rank_(rank) {}
    uint32_t rank() const override { return rank_; }
    uint32_t size() const override { return size_; }
    uint32_t local_rank() const override { return 0; }
    uint32_t local_size() const override { return 1; }
    const char *name() const override { return "failing"; }
    p2p_status_t allgather(const std::vector<uint8_t> &,
                           std::vector<std::vector<uint8_t>> *) override {
        ++exchanges;
        return P2P_ERR_BOOTSTRAP;
    }
    p2p_status_t barrier() override { return P2P_ERR_BOOTSTRAP; }
    void abort(const char *) override {}
    int exchanges = 0;

private:
    uint32_t size_, rank_;
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
