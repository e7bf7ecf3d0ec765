/* The fake CUDA driver of fake_cuda.h. */
#include "fake_cuda.h"

#include <cstring>
#include <mutex>
#include <sys/mman.h>
#include <unistd.h>

namespace fakecuda {

namespace {

constexpr int kOk = 0;
constexpr int kInvalidValue = 1;     // CUDA_ERROR_INVALID_VALUE
constexpr int kOutOfMemory = 2;      // CUDA_ERROR_OUT_OF_MEMORY
constexpr int kInvalidContext = 201; // CUDA_ERROR_INVALID_CONTEXT
void *const kCtx = reinterpret_cast<void *>(uintptr_t{0xC0DA});

struct Region {
    char *dev = nullptr;
    char *rw = nullptr;
    size_t len = 0;
};
constexpr int kMaxRegions = 64;
Region g_regions[kMaxRegions];
std::mutex g_mu;

thread_local void *t_ctx_stack[4];
thread_local int t_depth = 0;

/** The region holding [p, p + n), or nullptr. */
Region *find(uintptr_t p, size_t n) {
    std::lock_guard<std::mutex> lock(g_mu);
    for (Region &r : g_regions) {
        const uintptr_t b = reinterpret_cast<uintptr_t>(r.dev);
        if (r.dev != nullptr && p >= b && p - b <= r.len && n <= r.len - (p - b)) return &r;
    }
    return nullptr;
}

bool ctx_ok() {
    if (t_depth > 0 && t_ctx_stack[t_depth - 1] == kCtx) return true;
    ++stats().bad_ctx;
    return false;
}

int get_attr(void *data, int attr, unsigned long long ptr) {
    if (find(static_cast<uintptr_t>(ptr), 1) == nullptr) return kInvalidValue;
    switch (attr) {
    case ucxp2p::memtype::kAttrContext:
        *static_cast<void **>(data) = stats().no_ptr_ctx ? nullptr : kCtx;
        return kOk;
    case ucxp2p::memtype::kAttrMemoryType:
        *static_cast<unsigned *>(data) = ucxp2p::memtype::kTypeDevice;
        return kOk;
    case ucxp2p::memtype::kAttrIsManaged:
        *static_cast<unsigned *>(data) = 0;
        return kOk;
    default:
        return kInvalidValue;
    }
}

int ctx_push(void *ctx) {
    if (t_depth == 4) return kInvalidValue;
    t_ctx_stack[t_depth++] = ctx;
    return kOk;
}

int ctx_pop(void **ctx) {
    if (t_depth == 0) return kInvalidContext;
    *ctx = t_ctx_stack[--t_depth];
    return kOk;
}

int ctx_get_current(void **ctx) {
    *ctx = t_depth > 0 ? t_ctx_stack[t_depth - 1] : nullptr;
    return kOk;
}

bool take_failure(std::atomic<int> &f) {
    int v = f.load();
    while (v > 0) {
        if (f.compare_exchange_weak(v, v - 1)) return true;
    }
    return false;
}

/** A copy between host memory and the fake device address dev, checked
 *  as the driver would. */
int copy(bool to_device, void *host, unsigned long long dev, size_t n) {
    if (!ctx_ok()) return kInvalidContext;
    Region *r = find(static_cast<uintptr_t>(dev), n);
    if (r == nullptr) {
        ++stats().bad_range;
        return kInvalidValue;
    }
    if (take_failure(to_device ? stats().fail_htod : stats().fail_dtoh)) return kInvalidValue;
    char *rw = r->rw + (static_cast<uintptr_t>(dev) - reinterpret_cast<uintptr_t>(r->dev));
    if (to_device) {
        if (n >= (size_t(256) << 10) && stats().hold_htod.exchange(false)) {
            stats().htod_held = true;
            while (!stats().htod_release.load()) usleep(1000);
        }
        std::memcpy(rw, host, n);
        ++stats().htod;
        stats().htod_bytes += static_cast<long>(n);
    } else {
        std::memcpy(host, rw, n);
        ++stats().dtoh;
        stats().dtoh_bytes += static_cast<long>(n);
    }
    return kOk;
}

int copy_dtoh(void *dst, unsigned long long src, size_t n) { return copy(false, dst, src, n); }

int copy_htod(unsigned long long dst, const void *src, size_t n) {
    return copy(true, const_cast<void *>(src), dst, n);
}

int host_register(void *, size_t, unsigned) {
    if (!ctx_ok()) return kInvalidContext;
    if (take_failure(stats().fail_pin)) return kOutOfMemory;
    ++stats().pinned;
    return kOk;
}

int host_unregister(void *) {
    if (!ctx_ok()) return kInvalidContext;
    ++stats().unpinned;
    return kOk;
}

const ucxp2p::memtype::Driver kDriver = {get_attr,  ctx_push,      ctx_pop,
                                         ctx_get_current, copy_dtoh, copy_htod,
                                         host_register,   host_unregister};

} // namespace

Stats &stats() {
    static Stats s;
    return s;
}

const ucxp2p::memtype::Driver *driver() { return &kDriver; }

void *context() { return kCtx; }

void *alloc(size_t len) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t map_len = (len + page - 1) / page * page;
    int fd = memfd_create("fake-cuda", MFD_CLOEXEC);
    if (fd < 0) return nullptr;
    void *dev = MAP_FAILED, *rw = MAP_FAILED;
    if (ftruncate(fd, static_cast<off_t>(map_len)) == 0) {
        dev = mmap(nullptr, map_len, PROT_NONE, MAP_SHARED, fd, 0);
        rw = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    close(fd);  // the mappings keep the memory
    if (dev == MAP_FAILED || rw == MAP_FAILED) {
        if (dev != MAP_FAILED) munmap(dev, map_len);
        if (rw != MAP_FAILED) munmap(rw, map_len);
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(g_mu);
    for (Region &r : g_regions) {
        if (r.dev == nullptr) {
            r.dev = static_cast<char *>(dev);
            r.rw = static_cast<char *>(rw);
            r.len = len;
            return dev;
        }
    }
    munmap(dev, map_len);
    munmap(rw, map_len);
    return nullptr;
}

void free(void *dev) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    std::lock_guard<std::mutex> lock(g_mu);
    for (Region &r : g_regions) {
        if (r.dev == dev && dev != nullptr) {
            const size_t map_len = (r.len + page - 1) / page * page;
            munmap(r.dev, map_len);
            munmap(r.rw, map_len);
            r = Region{};
            return;
        }
    }
}

uint8_t *backing(const void *dev) {
    Region *r = find(reinterpret_cast<uintptr_t>(dev), 0);
    if (r == nullptr) return nullptr;
    return reinterpret_cast<uint8_t *>(r->rw) +
           (reinterpret_cast<uintptr_t>(dev) - reinterpret_cast<uintptr_t>(r->dev));
}

} // namespace fakecuda
