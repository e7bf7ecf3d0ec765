/*
 * Staged device memory through the CUDA driver (core/staging.h).
 */
#include "core/staging.h"

#include "core/log.h"
#include "core/memtype.h"

#include <new>
#include <sys/mman.h>
#include <unistd.h>

namespace ucxp2p {
namespace memtype {

namespace {

constexpr int kSuccess = 0;  // CUDA_SUCCESS

unsigned long long dev_ptr(uintptr_t p) { return static_cast<unsigned long long>(p); }

/** ctx current on this thread for the guard's life (the driver's copies
 *  and registrations act in the current context; the calling thread may
 *  be the progress thread, which has none). */
class CtxScope {
public:
    CtxScope(const Driver *d, void *ctx) : d_(d) { ok_ = d_->ctx_push(ctx) == kSuccess; }
    ~CtxScope() {
        if (ok_) {
            void *popped = nullptr;
            d_->ctx_pop(&popped);
        }
    }
    CtxScope(const CtxScope &) = delete;
    CtxScope &operator=(const CtxScope &) = delete;
    bool ok() const { return ok_; }

private:
    const Driver *d_;
    bool ok_ = false;
};

} // namespace

p2p_status_t Shadow::create(const void *dev, size_t len, std::unique_ptr<Shadow> *out) {
    const Driver *d = driver();
    const uintptr_t base = reinterpret_cast<uintptr_t>(dev);
    void *ctx = nullptr;
    if (d != nullptr && (d->get_attr(&ctx, kAttrContext, dev_ptr(base)) != kSuccess ||
                         ctx == nullptr)) {
        // Memory of no one context (stream-ordered pools, cuMemMap'd
        // ranges, as PyTorch's expandable segments) names none: copy in
        // the context the registering thread uses.
        ctx = nullptr;
        if (d->ctx_get_current(&ctx) != kSuccess) ctx = nullptr;
    }
    if (ctx == nullptr) {
        P2P_LOG(P2P_LOG_ERROR, "mem: no CUDA context for device memory at %p: "
                "cannot stage it (make its device's context current on the "
                "registering thread, e.g. cudaSetDevice)", dev);
        return P2P_ERR_UNSUPPORTED;
    }
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t map_len = (len + page - 1) / page * page;
    if (map_len < len) return P2P_ERR_NO_MEMORY;  // wrapped
    void *host = mmap(nullptr, map_len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (host == MAP_FAILED) {
        P2P_LOG(P2P_LOG_ERROR, "mem: no host memory (%zu bytes) to stage device "
                "memory at %p", map_len, dev);
        return P2P_ERR_NO_MEMORY;
    }
    // Not a throwing new: the mapping would be left behind (the caller's
    // exception barrier reports NO_MEMORY but cannot unmap it).
    std::unique_ptr<Shadow> s(new (std::nothrow) Shadow());
    if (!s) {
        munmap(host, map_len);
        return P2P_ERR_NO_MEMORY;
    }
    s->drv_ = d;
    s->ctx_ = ctx;
    s->dev_ = base;
    s->host_ = host;
    s->len_ = len;
    s->map_len_ = map_len;
    {
        CtxScope scope(d, ctx);
        s->pinned_ = scope.ok() && d->host_register(host, map_len, 0) == kSuccess;
    }
    if (!s->pinned_) {
        P2P_LOG(P2P_LOG_WARN, "mem: host copy of device memory at %p could not be "
                "page-locked: its copies go through the driver's staging "
                "(slower)", dev);
    }
    P2P_LOG(P2P_LOG_DEBUG, "mem: device memory at %p (%zu bytes) staged through "
            "host memory at %p (%s)", dev, len, host, s->pinned_ ? "page-locked" : "pageable");
    *out = std::move(s);
    return P2P_OK;
}

Shadow::~Shadow() {
    if (pinned_) {
        CtxScope scope(drv_, ctx_);
        if (!scope.ok() || drv_->host_unregister(host_) != kSuccess) {
            // The context may be gone (the application reset the device):
            // its page-locking went with it.
            P2P_LOG(P2P_LOG_DEBUG, "mem: host copy at %p: no unregistration", host_);
        }
    }
    munmap(host_, map_len_);
}

p2p_status_t Shadow::copy(bool to_device, const void *host, size_t n) const {
    if (n == 0) return P2P_OK;
    const size_t off = static_cast<size_t>(static_cast<const char *>(host) -
                                           static_cast<const char *>(host_));
    char *h = static_cast<char *>(host_) + off;
    CtxScope scope(drv_, ctx_);
    int rc = -1;
    if (scope.ok()) {
        rc = to_device ? drv_->copy_htod(dev_ptr(dev_ + off), h, n)
                       : drv_->copy_dtoh(h, dev_ptr(dev_ + off), n);
    }
    if (rc != kSuccess) {
        P2P_LOG(P2P_LOG_ERROR, "mem: copy of %zu bytes %s device memory at %p "
                "failed (CUDA error %d)", n, to_device ? "to" : "from",
                reinterpret_cast<void *>(dev_ + off), rc);
        return P2P_ERR_TRANSPORT;
    }
    return P2P_OK;
}

} // namespace memtype
} // namespace ucxp2p
