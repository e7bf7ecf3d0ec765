/*
 * What kind of memory a registration names, and whether this UCX can move
 * it.
 *
 * UCX built without CUDA (Debian's) treats every address as host memory:
 * a send from cudaMalloc memory faults inside UCX's copy, and tcp sends
 * garbage. p2p_mem_register asks the CUDA driver about the address first
 * and refuses device memory that UCX cannot move.
 *
 * The driver is asked only when the process has loaded it already
 * (dlopen with RTLD_NOLOAD): a process that never loaded libcuda.so.1 has
 * no device memory, and a host-only process pays no driver start-up. No
 * CUDA header or library is needed to build this.
 */
#ifndef UCXP2P_CORE_MEMTYPE_H
#define UCXP2P_CORE_MEMTYPE_H

#include <ucxp2p/p2p.h>

#include <ucp/api/ucp.h>

namespace ucxp2p {
namespace memtype {

enum class Kind {
    HOST,     // pageable or pinned host memory, or not known to CUDA
    DEVICE,   // cudaMalloc: not addressable by the CPU
    MANAGED,  // cudaMallocManaged: the CPU may touch it (pages migrate)
};

const char *kind_name(Kind k);

/** The kind of the memory at addr. Never fails: anything the driver does
 *  not describe (no driver loaded, not initialized, unknown pointer) is
 *  HOST. */
Kind classify(const void *addr);

/** Whether p2p_mem_register accepts memory of kind k in a context whose
 *  UCX can move CUDA memory (ucx_cuda) or not: P2P_OK, or
 *  P2P_ERR_UNSUPPORTED for device memory without a CUDA-capable UCX. */
p2p_status_t admit(Kind k, bool ucx_cuda);

/** Whether UCX moves CUDA memory in ucp (CUDA among the memory types
 *  ucp_context_query reports; false if the query fails). */
bool ucx_moves_cuda(ucp_context_h ucp);

/** classify + admit for p2p_mem_register, logging a refusal. */
p2p_status_t check_registration(const void *addr, bool ucx_cuda);

} // namespace memtype
} // namespace ucxp2p

#endif
