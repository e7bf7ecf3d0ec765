/*
 * Mixed fabrics: which kind of RDMA NIC the automatic rail plan uses when
 * the machine has several (EFA beside a ConnectX, on-board RDMA ports
 * beside an mlx5 bond). Used by plan_rails.
 */
#ifndef UCXP2P_TOPO_FABRIC_CHOICE_H
#define UCXP2P_TOPO_FABRIC_CHOICE_H

#include "topo/machine.h"

#include <string>
#include <vector>

namespace ucxp2p {
namespace topo {

/**
 * Keep the candidates of one kind, the fabric with the most bandwidth:
 * when sysfs (sysfs_root, /sys/class/infiniband layout) gives every
 * candidate's port rate, the kind whose devices add up to the most Gb/s
 * (a device counts its fastest ACTIVE port); otherwise, or on a tie, the
 * kind with the most devices (ties: EFA, then mlx). Two 25 Gb/s on-board
 * ports thus lose to one 200 Gb/s bond, which a count alone gave them.
 * Returns the note naming what was dropped and why ("" when nothing was).
 */
std::string keep_one_fabric(const std::string &sysfs_root, std::vector<Nic> *cands);

} // namespace topo
} // namespace ucxp2p

#endif
