/*
 * Jobs whose ranks are threads of this process (core_test): a Bootstrap
 * whose exchange the test supplies, and the exchange of a two-rank job.
 */
#ifndef UCXP2P_TEST_CORE_THREAD_JOB_H
#define UCXP2P_TEST_CORE_THREAD_JOB_H

#include "wireup/bootstrap.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace coretest {

/** Rank `rank` of a job of `size` ranks, all on one host (by default the
 *  only rank there); its exchange is the subclass's. */
class FakeJob : public ucxp2p::Bootstrap {
public:
    FakeJob(uint32_t size, uint32_t rank, uint32_t local_rank = 0, uint32_t local_size = 1)
        : size_(size), rank_(rank), local_rank_(local_rank), local_size_(local_size) {}
    uint32_t rank() const override { return rank_; }
    uint32_t size() const override { return size_; }
    uint32_t local_rank() const override { return local_rank_; }
    uint32_t local_size() const override { return local_size_; }
    const char *name() const override { return "fake"; }
    p2p_status_t barrier() override { return P2P_OK; }
    void abort(const char *) override {}

private:
    uint32_t size_, rank_, local_rank_, local_size_;
};

/** The exchange of a two-rank job whose ranks are threads of this process. */
struct PairExchange {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<uint8_t> blobs[2];
    std::vector<std::vector<uint8_t>> done;  // the last round's result
    uint64_t rounds = 0;
    int in = 0;
    p2p_status_t swap(uint32_t rank, const std::vector<uint8_t> &mine,
                      std::vector<std::vector<uint8_t>> *all) {
        std::unique_lock<std::mutex> lock(mu);
        const uint64_t round = rounds;
        blobs[rank] = mine;
        if (++in == 2) {
            done = {blobs[0], blobs[1]};
            in = 0;
            ++rounds;
            cv.notify_all();
        } else if (!cv.wait_for(lock, std::chrono::seconds(10),
                                [&] { return rounds != round; })) {
            return P2P_ERR_TIMEOUT;
        }
        *all = done;  // the next round cannot end before this rank joins it
        return P2P_OK;
    }
};

/** Rank `rank` of a two-rank job on this host, exchanging through ex. */
class PairJob : public FakeJob {
public:
    PairJob(PairExchange *ex, uint32_t rank) : FakeJob(2, rank, rank, 2), ex_(ex) {}
    p2p_status_t allgather(const std::vector<uint8_t> &mine,
                           std::vector<std::vector<uint8_t>> *all) override {
        return ex_->swap(rank(), mine, all);
    }
    p2p_status_t barrier() override {
        std::vector<std::vector<uint8_t>> all;
        return ex_->swap(rank(), {}, &all);
    }

private:
    PairExchange *ex_;
};

} // namespace coretest

#endif
