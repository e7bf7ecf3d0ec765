/*
 * Rail planner: which RDMA NICs one local rank uses, and the UCX settings
 * that make UCX use exactly those (never overriding a UCX_* variable the
 * user set). Pure function of a Machine and a PlanInput, so plans for other
 * machines (hwloc XML) can be previewed and tested.
 */
#ifndef UCXP2P_TOPO_RAIL_PLAN_H
#define UCXP2P_TOPO_RAIL_PLAN_H

#include "topo/machine.h"
#include "topo/roce.h"

#include <ucxp2p/p2p.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ucxp2p {
namespace topo {

/** UCX stripes a message over at most this many rails. */
constexpr unsigned kUcxMaxRails = 4;

/** UCX's default UCX_MAX_RNDV_RAILS (1.13). */
constexpr const char *kUcxDefaultRndvRails = "2";

struct PlanInput {
    uint32_t local_rank = 0;
    uint32_t local_size = 1;
    std::string rails = "auto";     /**< P2P_RAILS: auto | N | name,name */
    std::string hca;                /**< P2P_HCA: NCCL_IB_HCA-style filter */
    std::string smddp_devices;      /**< SMDATAPARALLEL_DEVICE_NAME */
    std::string gid_index = "auto"; /**< P2P_IB_GID_INDEX: auto | N */
    /** P2P_IB_ADDR_RANGE: auto GID choice only among addresses in this
     *  range (10.1.0.0/16, fd00::/8); empty: any. */
    std::string addr_range;
    /** Index into Machine::gpus of this rank's GPU; -1: the GPU of CUDA
     *  device local_rank modulo the number CUDA sees (one rank per GPU,
     *  as herringLocalDevice), see cuda_visible_devices. */
    int gpu = -1;
    /** CUDA_VISIBLE_DEVICES; nullopt when unset (topo/gpu_visible.h). */
    std::optional<std::string> cuda_visible_devices;
    /** NUMA node of the rank's CPU binding; -1: unknown (no GPU case then
     *  spreads ranks over NUMA nodes in blocks). */
    int binding_numa = -1;
    /** The rank's position among the ranks bound to that node, from where
     *  its cores lie in the node (Topology::Binding::slot); -1: unknown
     *  (bound to the whole node), then taken from the local rank. */
    int binding_slot = -1;
    /** UCX_* variables the user set, with their values: the environment's
     *  and those of UCX's config files (core/ucx_user.h). */
    std::vector<std::pair<std::string, std::string>> user_ucx;
    /** The names in user_ucx that a config file set, with its path. */
    std::vector<std::pair<std::string, std::string>> user_ucx_files;
    /** sysfs tree for RoCE GID detection; empty: skip it. */
    std::string sysfs_root;
    /** Network interfaces P2P_RAILS may name as TCP rails (veth0, eth1)
     *  when no RDMA device has the name; from_environment lists
     *  /sys/class/net. */
    std::vector<std::string> netdevs;

    /** From P2P_RAILS, P2P_HCA, P2P_IB_GID_INDEX, P2P_IB_ADDR_RANGE,
     *  SMDATAPARALLEL_DEVICE_NAME,
     *  CUDA_VISIBLE_DEVICES and every UCX_* setting of the environment and UCX's config files;
     *  sysfs_root is the default one. */
    static PlanInput from_environment(uint32_t local_rank, uint32_t local_size);

    /** The user's value of name, set under it or one of the names UCX
     *  also reads for it (ucx_names); nullptr when unset. */
    const std::string *user_ucx_value(const std::string &name) const;
    /** The name the user set name's value under (itself or an alias). */
    std::string user_ucx_name(const std::string &name) const;
    /** "set by the user", or "set in FILE" for a config file's setting. */
    std::string user_ucx_origin(const std::string &name) const;
};

struct PlannedNic {
    Nic nic;
    unsigned port = 1;
    bool tcp = false;   /**< a network interface (UCX tcp), not an rdma port */
    bool port_named = false;  /**< the user named the port: not moved to an active one */
    std::string ucx_name() const {
        return tcp ? nic.name : nic.name + ":" + std::to_string(port);
    }
};

struct RailPlan {
    uint32_t local_rank = 0;
    int gpu = -1;                   /**< index in Machine::gpus, -1 none */
    int cuda_device = -1;           /**< CUDA device number of gpu, -1 none */
    std::string gpu_name;
    int numa = -1;                  /**< NUMA node the rank should run on */
    std::vector<PlannedNic> nics;   /**< rails, in the order UCX gets them */
    std::string reason;             /**< why, one line */
    GidChoice gid;                  /**< index -1 when not RoCE, not found
                                         or not the same on every RoCE rail */
    std::vector<std::pair<std::string, std::string>> ucx_settings;
    std::vector<std::string> notes; /**< user settings kept, warnings */
};

/**
 * Plan the rails of in.local_rank. A machine without RDMA NICs gives an
 * empty plan whose reason says "no rdma devices" (P2P_OK).
 * Errors: P2P_ERR_INVALID_PARAM (local_rank >= local_size, local_size 0,
 * malformed P2P_RAILS / P2P_IB_GID_INDEX, a device named in P2P_RAILS or
 * SMDATAPARALLEL_DEVICE_NAME that does not exist); logged.
 */
p2p_status_t plan_rails(const Machine &machine, const PlanInput &in,
                        RailPlan *out);

/** Warning text when the machine has EFA NICs and UCX is older than 1.19
 *  (no `srd` transport); empty otherwise. */
std::string efa_ucx_warning(const Machine &machine, unsigned ucx_major,
                            unsigned ucx_minor);

/** A note for plans with two or more tcp rails under a UCX older than
 *  1.20: it pairs an endpoint's tcp lanes in device (sysfs) order without
 *  checking routes, so rails in separate subnets may pair across subnets
 *  and some carry nothing (docs/PERFORMANCE-RAILS.md). "" otherwise. */
std::string tcp_rails_ucx_note(const RailPlan &plan, unsigned ucx_major,
                               unsigned ucx_minor);

/** What the loaded UCX (ucx_major.ucx_minor) does with the plan, applied
 *  the same way by the context and by p2p_info's preview: the tcp rails
 *  note above, and a plan of EFA rails only under a UCX without EFA keeps
 *  its rails but sets no UCX variable (pinning UCX_NET_DEVICES to devices
 *  UCX cannot open would leave it no network device), with a note. */
void apply_ucx_limits(const Machine &machine, unsigned ucx_major, unsigned ucx_minor,
                      RailPlan *plan);

/** Multi-line human summary of a plan (p2p_info). */
std::string rail_plan_describe(const RailPlan &plan);

} // namespace topo
} // namespace ucxp2p

#endif
