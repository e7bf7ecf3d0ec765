/*
 * ucxp2p: topology, rail plan and diagnostics (what p2p_info shows).
 *
 * A p2p_topo_h is a snapshot of a machine: the live one, or an hwloc XML
 * file captured elsewhere (lstopo --of xml), so the rail plan of another
 * machine can be previewed. Plans follow the P2P_RAILS, P2P_HCA,
 * P2P_IB_GID_INDEX and CUDA_VISIBLE_DEVICES variables and never override a
 * UCX_* variable the user set, in the environment or in a UCX config file
 * (ucx.conf). Every
 * function is thread-safe for distinct handles and never throws:
 * besides the errors listed with each, an allocation failure inside it is
 * P2P_ERR_NO_MEMORY and an unexpected internal error P2P_ERR_TRANSPORT
 * (both logged).
 */
#ifndef UCXP2P_P2P_TOPO_H
#define UCXP2P_P2P_TOPO_H

#include <ucxp2p/p2p.h>

/* The library is built with -fvisibility=hidden; these are its API. */
#if defined(__GNUC__)
#define P2P_TOPO_API __attribute__((visibility("default")))
#else
#define P2P_TOPO_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct p2p_topo *p2p_topo_h;

/**
 * Load a topology: the live machine when xml_path is NULL or "", else an
 * hwloc XML file. The live machine reads RoCE GIDs from
 * /sys/class/infiniband; an XML file reads none (see p2p_topo_set_sysfs).
 * *topo_p is set only on success.
 * Errors: P2P_ERR_INVALID_PARAM (topo_p NULL, file missing or not hwloc
 * XML), P2P_ERR_NO_DEVICE (hwloc could not inspect the live machine),
 * P2P_ERR_UNSUPPORTED (built without hwloc), P2P_ERR_NO_MEMORY.
 */
P2P_TOPO_API p2p_status_t p2p_topo_load(const char *xml_path, p2p_topo_h *topo_p);

/** Errors: P2P_ERR_INVALID_HANDLE (NULL, unknown or already destroyed). */
P2P_TOPO_API p2p_status_t p2p_topo_destroy(p2p_topo_h topo);

/**
 * Read RoCE ports and GIDs from another sysfs tree (laid out as
 * /sys/class/infiniband: DEV/ports/N/gids/K ...); NULL or "" disables it.
 * Errors: P2P_ERR_INVALID_HANDLE, P2P_ERR_NO_MEMORY (the setting is then
 * unchanged).
 */
P2P_TOPO_API p2p_status_t p2p_topo_set_sysfs(p2p_topo_h topo, const char *sysfs_root);

typedef struct {
    uint32_t num_numa_nodes;
    uint32_t num_gpus;
    uint32_t num_nics;        /**< RDMA devices (OpenFabrics) */
    uint32_t num_efa_nics;
} p2p_topo_info_t;

/** Errors: P2P_ERR_INVALID_HANDLE, P2P_ERR_INVALID_PARAM (info_p NULL). */
P2P_TOPO_API p2p_status_t p2p_topo_query(p2p_topo_h topo, p2p_topo_info_t *info_p);

/**
 * Print NUMA nodes, GPUs, RDMA NICs (with PCIe bus id, NUMA node and
 * network interfaces) and, when EFA devices exist but the UCX in use is
 * older than 1.19, a warning with the fix.
 * Errors: P2P_ERR_INVALID_HANDLE, P2P_ERR_INVALID_PARAM (stream NULL),
 * P2P_ERR_NO_MEMORY (output may then be partial).
 */
P2P_TOPO_API p2p_status_t p2p_topo_print(p2p_topo_h topo, FILE *stream);

typedef struct {
    uint32_t num_rails;       /**< 0: no RDMA device chosen */
    int32_t  numa_node;       /**< -1: unknown */
    int32_t  gpu;             /**< index into the GPUs p2p_topo_print
                                   lists (CUDA order when the topology has
                                   CUDA devices, else PCI bus order); the
                                   GPU of CUDA device local_rank modulo the
                                   GPUs CUDA_VISIBLE_DEVICES leaves; -1:
                                   none */
    int32_t  gid_index;       /**< RoCE GID index, -1: not RoCE/unknown,
                                   or the RoCE rails differ (UCX picks
                                   per device) */
    char     devices[256];    /**< UCX device list, "mlx5_0:1,mlx5_1:1";
                                   "" when none */
} p2p_rail_plan_info_t;

/**
 * The rail plan of local rank local_rank out of local_size ranks on this
 * machine, under the current environment.
 * Errors: P2P_ERR_INVALID_HANDLE, P2P_ERR_INVALID_PARAM (info_p NULL,
 * local_size 0, local_rank >= local_size, malformed P2P_RAILS, P2P_HCA or
 * P2P_IB_GID_INDEX, a device named in P2P_RAILS or SMDATAPARALLEL_DEVICE_NAME
 * that does not exist), P2P_ERR_NO_MEMORY (device list longer
 * than devices[], or an allocation failed). *info_p is set only on success.
 */
P2P_TOPO_API p2p_status_t p2p_topo_plan_query(p2p_topo_h topo, uint32_t local_rank,
                                 uint32_t local_size,
                                 p2p_rail_plan_info_t *info_p);

/** Print the plan (rails, reason, GID, UCX settings, notes) of one local
 *  rank. Errors: as p2p_topo_plan_query but P2P_ERR_NO_MEMORY only for a
 *  failed allocation (no length limit), plus P2P_ERR_INVALID_PARAM (stream
 *  NULL). */
P2P_TOPO_API p2p_status_t p2p_topo_plan_print(p2p_topo_h topo, uint32_t local_rank,
                                 uint32_t local_size, FILE *stream);

/**
 * Print every RDMA device under sysfs_root (NULL: /sys/class/infiniband):
 * ports, link layer, state and the GID index chosen for RoCE ports.
 * A missing tree prints "no rdma devices". Errors: P2P_ERR_INVALID_PARAM
 * (stream NULL), P2P_ERR_NO_MEMORY (output may then be partial).
 */
P2P_TOPO_API p2p_status_t p2p_roce_print(const char *sysfs_root, FILE *stream);

/** Print the library version and compiled-in features (hwloc, PMIx, CUDA,
 *  UCX version built against). Errors: P2P_ERR_INVALID_PARAM (stream
 *  NULL). */
P2P_TOPO_API p2p_status_t p2p_build_print(FILE *stream);

/**
 * Print the UCX library version in use, whether it moves CUDA device
 * memory (else p2p_mem_register stages such memory through host memory,
 * or refuses it with P2P_CUDA_STAGING=off), the UCX_* settings of the
 * user (environment and UCX config files, which ucxp2p never overrides)
 * with where each came from, the UCX_* settings a context created now would
 * make where the user set none (and which user setting stays instead), and
 * the transports/devices UCX finds (a short-lived UCP context; honours
 * UCX_* variables).
 * Errors: P2P_ERR_INVALID_PARAM (stream NULL), P2P_ERR_TRANSPORT (UCX
 * could not start: bad UCX_* variable, no usable transport).
 */
P2P_TOPO_API p2p_status_t p2p_ucx_print(FILE *stream);

#ifdef __cplusplus
}
#endif

#endif /* UCXP2P_P2P_TOPO_H */
