/*
 * Memory kinds through the CUDA driver API, looked up at run time (see
 * core/memtype.h). The values below are the driver API's (cuda.h:
 * CUpointer_attribute, CUmemorytype); a CUDA build checks them against
 * the header.
 */
#include "ucxp2p_config.h"

#include "core/memtype.h"
#include "core/log.h"

#include <atomic>
#include <cstdint>
#include <dlfcn.h>

#ifdef HAVE_CUDA
#include <cuda.h>
#endif

namespace ucxp2p {
namespace memtype {

namespace {

constexpr int kAttrMemoryType = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kAttrIsManaged = 8;   // CU_POINTER_ATTRIBUTE_IS_MANAGED
constexpr unsigned kTypeHost = 1;   // CU_MEMORYTYPE_HOST
constexpr int kSuccess = 0;         // CUDA_SUCCESS

#ifdef HAVE_CUDA
static_assert(kAttrMemoryType == CU_POINTER_ATTRIBUTE_MEMORY_TYPE, "cuda.h");
static_assert(kAttrIsManaged == CU_POINTER_ATTRIBUTE_IS_MANAGED, "cuda.h");
static_assert(kTypeHost == CU_MEMORYTYPE_HOST, "cuda.h");
static_assert(kSuccess == CUDA_SUCCESS, "cuda.h");
#endif

// CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
//                                CUdeviceptr ptr)
using GetAttrFn = int (*)(void *, int, unsigned long long);

/** The driver's cuPointerGetAttribute once the process has loaded the
 *  driver; nullptr before. Looked up again on each call until found: an
 *  application may start CUDA after its first registration. */
GetAttrFn driver_get_attr() {
    static std::atomic<GetAttrFn> cached{nullptr};
    GetAttrFn fn = cached.load(std::memory_order_acquire);
    if (fn != nullptr) return fn;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h == nullptr) return nullptr;  // not loaded: no device memory here
    // Kept open: the driver stays loaded for the process' life anyway.
    fn = reinterpret_cast<GetAttrFn>(dlsym(h, "cuPointerGetAttribute"));
    if (fn == nullptr) {
        dlclose(h);
        return nullptr;
    }
    GetAttrFn expected = nullptr;
    if (cached.compare_exchange_strong(expected, fn, std::memory_order_acq_rel)) {
        P2P_LOG(P2P_LOG_DEBUG, "mem: CUDA driver loaded: registrations are "
                "checked for device memory");
    } else {
        dlclose(h);  // another thread cached it (one reference is enough)
    }
    return fn;
}

} // namespace

const char *kind_name(Kind k) {
    switch (k) {
    case Kind::HOST: return "host";
    case Kind::DEVICE: return "CUDA device";
    case Kind::MANAGED: return "CUDA managed";
    }
    return "?";
}

Kind classify(const void *addr) {
    GetAttrFn get = driver_get_attr();
    if (get == nullptr || addr == nullptr) return Kind::HOST;
    const auto ptr = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(addr));
    unsigned type = 0;
    // Fails for memory CUDA does not know (malloc, stack, mmap) and before
    // cuInit: host memory either way.
    if (get(&type, kAttrMemoryType, ptr) != kSuccess || type == kTypeHost) {
        return Kind::HOST;
    }
    unsigned managed = 0;  // the attribute is a bool (unsigned int)
    if (get(&managed, kAttrIsManaged, ptr) == kSuccess && managed != 0) {
        return Kind::MANAGED;
    }
    return Kind::DEVICE;  // device or array memory: not CPU-addressable
}

p2p_status_t admit(Kind k, bool ucx_cuda) {
    if (k == Kind::DEVICE && !ucx_cuda) return P2P_ERR_UNSUPPORTED;
    return P2P_OK;
}

bool ucx_moves_cuda(ucp_context_h ucp) {
    ucp_context_attr_t attr = {};
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    return ucp_context_query(ucp, &attr) == UCS_OK &&
           (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
}

p2p_status_t check_registration(const void *addr, bool ucx_cuda) {
    const Kind kind = classify(addr);
    const p2p_status_t st = admit(kind, ucx_cuda);
    if (st != P2P_OK) {
        P2P_LOG(P2P_LOG_ERROR, "mem: %p is %s memory, which this UCX cannot move "
                "(built without CUDA: ucx_info -d lists no cuda transport); "
                "register host, pinned or managed memory", addr, kind_name(kind));
    }
    return st;
}

} // namespace memtype
} // namespace ucxp2p
