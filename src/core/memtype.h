/*
 * What kind of memory a registration names, and whether this UCX can move
 * it.
 *
 * UCX built without CUDA (Debian's) treats every address as host memory:
 * a send from cudaMalloc memory faults inside UCX's copy, and tcp sends
 * garbage. p2p_mem_register asks the CUDA driver about the address first;
 * device memory that UCX cannot move goes through a host copy
 * (core/staging.h), or is refused with P2P_CUDA_STAGING=off.
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

#include <cstddef>

namespace ucxp2p {
namespace memtype {

enum class Kind {
    HOST,     // pageable or pinned host memory, or not known to CUDA
    DEVICE,   // cudaMalloc: not addressable by the CPU
    MANAGED,  // cudaMallocManaged: the CPU may touch it (pages migrate)
};

const char *kind_name(Kind k);

/** The CUDA driver API calls the library makes, bound at run time once the
 *  process has loaded the driver. Each returns a CUresult (0: success).
 *  Pointers are CUdeviceptr values; contexts are CUcontext. */
struct Driver {
    int (*get_attr)(void *data, int attribute, unsigned long long ptr);
    int (*ctx_push)(void *ctx);
    int (*ctx_pop)(void **ctx);
    int (*ctx_get_current)(void **ctx);
    int (*copy_dtoh)(void *dst, unsigned long long src, size_t bytes);
    int (*copy_htod)(unsigned long long dst, const void *src, size_t bytes);
    int (*host_register)(void *p, size_t bytes, unsigned flags);
    int (*host_unregister)(void *p);
};

/** CU_POINTER_ATTRIBUTE_* and CU_MEMORYTYPE_* values the library asks for
 *  (cuda.h's; a CUDA build checks them against the header). */
constexpr int kAttrContext = 1;
constexpr int kAttrMemoryType = 2;
constexpr int kAttrIsManaged = 8;
constexpr unsigned kTypeHost = 1;
constexpr unsigned kTypeDevice = 2;

/** The driver's calls once the process has loaded libcuda.so.1 (the
 *  application started CUDA), else nullptr. */
const Driver *driver();

/** Tests: use d instead of the CUDA driver (nullptr: the real one again).
 *  Not for concurrent use with registrations. */
void set_driver_for_test(const Driver *d);

/** The kind of the memory at addr. Never fails: anything the driver does
 *  not describe (no driver loaded, not initialized, unknown pointer) is
 *  HOST. */
Kind classify(const void *addr);

/** How p2p_mem_register takes the memory at addr. */
enum class Admit {
    DIRECT,   // registered with UCX as it is
    STAGED,   // device memory UCX cannot move: through a host copy
              // (core/staging.h)
    REFUSED,  // P2P_ERR_UNSUPPORTED (logged)
};

/** How p2p_mem_register takes memory of kind k in a context whose UCX can
 *  move CUDA memory (ucx_cuda) or not, with P2P_CUDA_STAGING on or off:
 *  device memory is REFUSED only where UCX cannot move it and staging is
 *  off. */
Admit admit(Kind k, bool ucx_cuda, bool staging);

/** Whether UCX moves CUDA memory in ucp (CUDA among the memory types
 *  ucp_context_query reports; false if the query fails). */
bool ucx_moves_cuda(ucp_context_h ucp);

/** classify + admit for p2p_mem_register: device memory that UCX cannot
 *  move is STAGED when staging is on, else REFUSED (logged). *kind_p (if
 *  not NULL): the kind found. */
Admit check_registration(const void *addr, bool ucx_cuda, bool staging,
                         Kind *kind_p = nullptr);

} // namespace memtype
} // namespace ucxp2p

#endif
