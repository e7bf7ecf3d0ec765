/*
 * Single-process bootstrap: rank 0 of 1; collectives return at once.
 */
#include "core/log.h"
#include "wireup/bootstrap.h"

namespace ucxp2p {

namespace {

class SingleBootstrap final : public Bootstrap {
public:
    explicit SingleBootstrap(uint64_t max_msg) : max_msg_(max_msg) {}
    uint32_t rank() const override { return 0; }
    uint32_t size() const override { return 1; }
    uint32_t local_rank() const override { return 0; }
    uint32_t local_size() const override { return 1; }
    const char *name() const override { return "single"; }

    p2p_status_t allgather(const std::vector<uint8_t> &mine,
                           std::vector<std::vector<uint8_t>> *all_p) override {
        if (all_p == nullptr) {
            return P2P_ERR_INVALID_PARAM;
        }
        if (mine.size() > max_msg_) {  // the same bound as every bootstrap's
            P2P_LOG(P2P_LOG_ERROR, "single bootstrap: allgather blob of %zu bytes exceeds "
                    "P2P_BOOTSTRAP_MAX_MSG (%llu)", mine.size(),
                    static_cast<unsigned long long>(max_msg_));
            return P2P_ERR_INVALID_PARAM;
        }
        std::vector<std::vector<uint8_t>> all(1, mine);  // may throw bad_alloc
        all_p->swap(all);
        return P2P_OK;
    }

    p2p_status_t barrier() override { return P2P_OK; }

    void abort(const char *) override {}

private:
    uint64_t max_msg_;
};

} // namespace

p2p_status_t single_bootstrap_create(std::unique_ptr<Bootstrap> *out) {
    uint64_t max_msg = 0;
    p2p_status_t st = bootstrap_max_msg(&max_msg);
    if (st != P2P_OK) return st;
    *out = std::unique_ptr<Bootstrap>(new SingleBootstrap(max_msg));
    return P2P_OK;
}

} // namespace ucxp2p
