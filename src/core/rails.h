/*
 * Rails: apply this process's rail plan (src/topo/rail_plan.h) to UCX and
 * place the progress thread on the plan's NUMA node.
 *
 * The context is created before any bootstrap, so the local rank comes from
 * the launcher's environment (local_rank_detect). The plan is computed at
 * each context creation (the topology is loaded once per process) and
 * remembered process-wide: the progress thread and p2p_mem_alloc read the
 * NUMA node of the latest plan.
 */
#ifndef UCXP2P_CORE_RAILS_H
#define UCXP2P_CORE_RAILS_H

#include <ucxp2p/p2p.h>
#include <ucp/api/ucp.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ucxp2p {

struct LocalRank {
    uint32_t rank = 0;
    uint32_t size = 1;
    std::string source;   /**< variables it came from; "" when defaulted */
};

using EnvLookup = std::function<const char *(const char *)>;

/**
 * Local rank and size from the first source that is present and valid:
 *   1. P2P_LOCAL_RANK / P2P_LOCAL_WORLD_SIZE (ours, overrides everything)
 *   2. LOCAL_RANK / LOCAL_WORLD_SIZE (torchrun, p2prun)
 *   3. OMPI_COMM_WORLD_LOCAL_RANK / OMPI_COMM_WORLD_LOCAL_SIZE (mpirun)
 *   4. MPI_LOCALRANKID / MPI_LOCALNRANKS (MPICH hydra)
 *   5. SLURM_LOCALID with SLURM_TASKS_PER_NODE + SLURM_NODEID (srun)
 *   6. PMIX_LOCAL_RANK / PMIX_LOCAL_SIZE (exported by some PMIx launchers)
 * A source whose values are malformed or inconsistent (rank >= size) is
 * logged (warn) and skipped. None: rank 0 of 1 with an empty source
 * (rails_apply_ucx logs that at info; p2p_local_rank_query returns it).
 */
LocalRank local_rank_detect(const EnvLookup &env);

/** "2(x3),1" style Slurm task counts: the count of node `node`; 0 when
 *  malformed or out of range. */
uint32_t slurm_tasks_on_node(const std::string &spec, uint32_t node);

/** CPU list in sysfs syntax ("0-3,8,10-11") -> CPU ids; false if malformed. */
bool parse_cpu_list(const std::string &text, std::vector<int> *out);

/**
 * Plan the rails of this process (live topology, local rank from the
 * environment, P2P_RAILS/P2P_HCA/...) and set the plan's UCX_* settings on
 * cfg through ucp_config_modify, never one the user set in the environment.
 * A machine that cannot be inspected (no hwloc, load failure) gives no plan
 * and P2P_OK. P2P_ERR_INVALID_PARAM when the user's rail settings are
 * invalid (bad P2P_RAILS, P2P_LOCAL_RANK >= P2P_LOCAL_WORLD_SIZE is only skipped).
 * given (the application's p2p_config_t local rank) replaces detection.
 */
p2p_status_t rails_apply_ucx(ucp_config_t *cfg, const LocalRank *given = nullptr);

/** Local rank the latest plan was made for (default 0 of 1, no source,
 *  when no plan was made). */
LocalRank rails_local_rank();

/** NUMA node of the latest plan; -1 when unknown. */
int rails_numa();

/** The network devices UCX was told to use: the user's UCX_NET_DEVICES,
 *  else the latest plan's; "" when neither (UCX takes all). */
std::string rails_net_devices();

/**
 * Bind the calling thread to the CPUs of the plan's NUMA node, unless the
 * process is already restricted to fewer CPUs than are online (the user
 * placed it), the node is unknown, or it already covers every allowed CPU.
 * Never fails: problems are logged. `what` names the thread in the log.
 */
void rails_bind_this_thread(const char *what);

/** CPUs of NUMA node `numa` under a sysfs root (default
 *  /sys/devices/system/node); empty when unknown. */
std::vector<int> numa_node_cpus(int numa,
                                const std::string &root = "/sys/devices/system/node");

} // namespace ucxp2p

#endif
