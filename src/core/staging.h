/*
 * Staged device memory: CUDA device memory (cudaMalloc) registered in a
 * context whose UCX cannot move it (built without CUDA, as Debian's).
 *
 * The registration gets a host copy ("shadow") of the same size, and UCX
 * moves the shadow: a send copies its bytes from the device into the
 * shadow when it is posted, and a receive lands in the shadow and is
 * copied to the device before its completion is queued. Offsets are kept,
 * so a block at device address base + k is sent from or received into
 * shadow + k, and two operations on different parts of one registration
 * never share shadow bytes. The application sees device memory semantics
 * unchanged: its data must be ready on the device when it posts a send (as
 * with a UCX that moves CUDA memory), and a receive's data is on the
 * device when its completion is popped.
 *
 * The copies are synchronous cuMemcpyDtoH/HtoD calls in the registration's
 * CUDA context (the one the memory names, else the one current on the
 * registering thread), made on the calling thread; a receive's copy of
 * 256 KiB or more runs outside the worker lock (core/comm_copy.cc), so
 * other threads' posts do not wait for it. The shadow is page-locked with cuMemHostRegister where the
 * driver allows, for full copy bandwidth; else the copies go through the
 * driver's own staging, slower but correct.
 */
#ifndef UCXP2P_CORE_STAGING_H
#define UCXP2P_CORE_STAGING_H

#include "core/memtype.h"

#include <ucxp2p/p2p.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ucxp2p {
namespace memtype {

class Shadow {
public:
    /** A shadow of the device memory [dev, dev + len): P2P_OK and *out;
     *  P2P_ERR_UNSUPPORTED when the CUDA driver is not loaded, or neither
     *  dev nor the calling thread has a CUDA context; P2P_ERR_NO_MEMORY.
     *  Logged. */
    static p2p_status_t create(const void *dev, size_t len, std::unique_ptr<Shadow> *out);
    ~Shadow();
    Shadow(const Shadow &) = delete;
    Shadow &operator=(const Shadow &) = delete;

    /** The shadow's first byte (mirrors the device base). */
    void *host() const { return host_; }
    bool pinned() const { return pinned_; }

    /** Where the device address dev (inside the registration) lives in
     *  the shadow. */
    void *to_host(const void *dev) const {
        return static_cast<char *>(host_) + (reinterpret_cast<uintptr_t>(dev) - dev_);
    }
    /** Copy n bytes at the shadow address host (from to_host) from the
     *  device into the shadow: a send's bytes, at its post.
     *  P2P_ERR_TRANSPORT if the driver failed (logged). */
    p2p_status_t pull(const void *host, size_t n) const { return copy(false, host, n); }
    /** Copy n bytes at the shadow address host to the device: a receive's
     *  bytes, before its completion. P2P_ERR_TRANSPORT likewise. */
    p2p_status_t push(const void *host, size_t n) const { return copy(true, host, n); }

private:
    Shadow() = default;
    p2p_status_t copy(bool to_device, const void *host, size_t n) const;

    const Driver *drv_ = nullptr;  // the driver it was made with
    void *ctx_ = nullptr;  // CUcontext of the device memory
    uintptr_t dev_ = 0;
    void *host_ = nullptr;
    size_t len_ = 0;
    size_t map_len_ = 0;   // len_ rounded up to pages (the mmap)
    bool pinned_ = false;
};

} // namespace memtype
} // namespace ucxp2p

#endif
