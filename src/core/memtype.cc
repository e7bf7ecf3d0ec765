/*
 * Memory kinds through the CUDA driver API, looked up at run time (see
 * core/memtype.h). The values below are the driver API's (cuda.h:
 * CUpointer_attribute, CUmemorytype); a CUDA build checks them against
 * the header.
 */
#include "ucxp2p_config.h"

#include "core/memtype.h"
#include "core/fork_mutex.h"
#include "core/log.h"

#include <atomic>
#include <cstdint>
#include <dlfcn.h>
#include <mutex>

#ifdef HAVE_CUDA
#include <cuda.h>
#endif

namespace ucxp2p {
namespace memtype {

namespace {

constexpr int kSuccess = 0;  // CUDA_SUCCESS

#ifdef HAVE_CUDA
static_assert(kAttrContext == CU_POINTER_ATTRIBUTE_CONTEXT, "cuda.h");
static_assert(kAttrMemoryType == CU_POINTER_ATTRIBUTE_MEMORY_TYPE, "cuda.h");
static_assert(kAttrIsManaged == CU_POINTER_ATTRIBUTE_IS_MANAGED, "cuda.h");
static_assert(kTypeHost == CU_MEMORYTYPE_HOST, "cuda.h");
static_assert(kTypeDevice == CU_MEMORYTYPE_DEVICE, "cuda.h");
static_assert(kSuccess == CUDA_SUCCESS, "cuda.h");
#endif

/** Bind every call of Driver in h; false if one is missing. The _v2 names
 *  are the ones cuda.h's macros select (the unsuffixed symbols keep older
 *  ABIs: 32-bit device pointers, the old context stack). */
bool bind(void *h, Driver *d) {
    struct Sym {
        const char *name;
        void **slot;
    };
    const Sym syms[] = {
        {"cuPointerGetAttribute", reinterpret_cast<void **>(&d->get_attr)},
        {"cuCtxPushCurrent_v2", reinterpret_cast<void **>(&d->ctx_push)},
        {"cuCtxPopCurrent_v2", reinterpret_cast<void **>(&d->ctx_pop)},
        {"cuCtxGetCurrent", reinterpret_cast<void **>(&d->ctx_get_current)},
        {"cuMemcpyDtoH_v2", reinterpret_cast<void **>(&d->copy_dtoh)},
        {"cuMemcpyHtoD_v2", reinterpret_cast<void **>(&d->copy_htod)},
        {"cuMemHostRegister_v2", reinterpret_cast<void **>(&d->host_register)},
        {"cuMemHostUnregister", reinterpret_cast<void **>(&d->host_unregister)},
    };
    for (const Sym &s : syms) {
        *s.slot = dlsym(h, s.name);
        if (*s.slot == nullptr) {
            P2P_LOG(P2P_LOG_WARN, "mem: the CUDA driver has no %s: device "
                    "memory is treated as host memory", s.name);
            return false;
        }
    }
    return true;
}

std::atomic<const Driver *> g_test_driver{nullptr};

/** The real driver once loaded. Looked up again on each call until found:
 *  an application may start CUDA after its first registration. */
const Driver *real_driver() {
    static Driver bound;
    static std::atomic<const Driver *> cached{nullptr};
    static ForkMutex &mu = *new ForkMutex();  // held across fork(); never destroyed
    const Driver *d = cached.load(std::memory_order_acquire);
    if (d != nullptr) return d;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h == nullptr) return nullptr;  // not loaded: no device memory here
    std::lock_guard<ForkMutex> lock(mu);
    if ((d = cached.load(std::memory_order_acquire)) == nullptr) {
        // Kept open: the driver stays loaded for the process' life anyway.
        if (!bind(h, &bound)) {
            dlclose(h);
            return nullptr;
        }
        cached.store(&bound, std::memory_order_release);
        P2P_LOG(P2P_LOG_DEBUG, "mem: CUDA driver loaded: registrations are "
                "checked for device memory");
        return &bound;
    }
    dlclose(h);  // another thread bound it (one reference is enough)
    return d;
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

const Driver *driver() {
    const Driver *t = g_test_driver.load(std::memory_order_acquire);
    return t != nullptr ? t : real_driver();
}

void set_driver_for_test(const Driver *d) {
    g_test_driver.store(d, std::memory_order_release);
}

Kind classify(const void *addr) {
    const Driver *drv = driver();
    if (drv == nullptr || addr == nullptr) return Kind::HOST;
    const auto ptr = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(addr));
    unsigned type = 0;
    // Fails for memory CUDA does not know (malloc, stack, mmap) and before
    // cuInit: host memory either way.
    if (drv->get_attr(&type, kAttrMemoryType, ptr) != kSuccess || type == kTypeHost) {
        return Kind::HOST;
    }
    unsigned managed = 0;  // the attribute is a bool (unsigned int)
    if (drv->get_attr(&managed, kAttrIsManaged, ptr) == kSuccess && managed != 0) {
        return Kind::MANAGED;
    }
    return Kind::DEVICE;  // device or array memory: not CPU-addressable
}

Admit admit(Kind k, bool ucx_cuda, bool staging) {
    if (k != Kind::DEVICE || ucx_cuda) return Admit::DIRECT;
    return staging ? Admit::STAGED : Admit::REFUSED;
}

bool ucx_moves_cuda(ucp_context_h ucp) {
    ucp_context_attr_t attr = {};
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    return ucp_context_query(ucp, &attr) == UCS_OK &&
           (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
}

Admit check_registration(const void *addr, bool ucx_cuda, bool staging, Kind *kind_p) {
    const Kind kind = classify(addr);
    if (kind_p != nullptr) *kind_p = kind;
    const Admit a = admit(kind, ucx_cuda, staging);
    if (a == Admit::REFUSED) {
        P2P_LOG(P2P_LOG_ERROR, "mem: %p is %s memory, which this UCX cannot move "
                "(built without CUDA: ucx_info -d lists no cuda transport) and "
                "P2P_CUDA_STAGING is off; register host, pinned or managed "
                "memory, or set P2P_CUDA_STAGING=on", addr, kind_name(kind));
    }
    return a;
}

} // namespace memtype
} // namespace ucxp2p
