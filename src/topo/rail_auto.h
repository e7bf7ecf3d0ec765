/*
 * Automatic rail placement: which of the candidate NICs a local rank takes
 * when no device was named (P2P_RAILS=auto or a count). Used by plan_rails.
 */
#ifndef UCXP2P_TOPO_RAIL_AUTO_H
#define UCXP2P_TOPO_RAIL_AUTO_H

#include "topo/rail_plan.h"

#include <string>
#include <vector>

namespace ucxp2p {
namespace topo {

struct AutoResult {
    std::vector<size_t> share;   // indexes into cands: the rank's own NICs
    std::vector<size_t> order;   // every candidate, best first (P2P_RAILS=N)
    std::string reason;          // why, for the plan's reason line
};

/** The GPU's nearest NICs by PCIe ancestry, split among the GPUs of
 *  `gpus` (the local ranks' GPUs: those CUDA sees) that share them; gpu
 *  and gpus index m.gpus, and gpus holds gpu. cands must not be empty. */
AutoResult plan_with_gpu(const Machine &m, const std::vector<Nic> &cands,
                         size_t gpu, const std::vector<size_t> &gpus,
                         uint32_t local_rank);

/** No GPU: the NICs on the rank's NUMA node (all of them when that node
 *  has none), split among the local ranks placed there. cands must not be
 *  empty. */
AutoResult plan_without_gpu(const Machine &m, const std::vector<Nic> &cands,
                            const PlanInput &in, int numa);

} // namespace topo
} // namespace ucxp2p

#endif
