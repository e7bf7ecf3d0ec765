/*
 * Single-process bootstrap: rank 0 of 1; collectives return at once.
 */
#include "wireup/bootstrap.h"

namespace ucxp2p {

namespace {

class SingleBootstrap final : public Bootstrap {
public:
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
        std::vector<std::vector<uint8_t>> all(1, mine);  // may throw bad_alloc
        all_p->swap(all);
        return P2P_OK;
    }

    p2p_status_t barrier() override { return P2P_OK; }

    void abort(const char *) override {}
};

} // namespace

std::unique_ptr<Bootstrap> single_bootstrap_create() {
    return std::unique_ptr<Bootstrap>(new SingleBootstrap());
}

} // namespace ucxp2p
