/*
 * Which of a machine's GPUs this process's CUDA can use, in CUDA device
 * order, so the rail plan of local rank r follows the GPU that cuda:r (r
 * modulo the visible count, as herringLocalDevice) really is. Used by
 * plan_rails.
 */
#ifndef UCXP2P_TOPO_GPU_VISIBLE_H
#define UCXP2P_TOPO_GPU_VISIBLE_H

#include "topo/machine.h"

#include <optional>
#include <string>
#include <vector>

namespace ucxp2p {
namespace topo {

struct VisibleGpus {
    /** Indexes into Machine::gpus; CUDA device k is gpus[order[k]]. */
    std::vector<size_t> order;
    /** Which GPUs and why, for the plan's notes; "" when every GPU is
     *  visible in PCI bus order (CUDA_VISIBLE_DEVICES unset). */
    std::string note;
};

/**
 * The GPUs CUDA sees. A topology with CUDA devices (cudaN) lists only
 * those, already in CUDA order and already filtered by the discovering
 * process's CUDA_VISIBLE_DEVICES: all of them. Otherwise cuda_visible (the
 * value of CUDA_VISIBLE_DEVICES, nullopt when unset) selects entries of
 * the PCI-ordered list as CUDA does: a comma list of indexes that ends at
 * the first entry that is not one, is out of range or repeats; "" selects
 * none. UUIDs (GPU-...) and MIG ids cannot be mapped without the driver:
 * every GPU then, with a note.
 */
VisibleGpus visible_gpus(const Machine &m, const std::optional<std::string> &cuda_visible);

} // namespace topo
} // namespace ucxp2p

#endif
