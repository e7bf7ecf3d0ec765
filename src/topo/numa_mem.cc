/*
 * p2p_mem_alloc / p2p_mem_free / p2p_mem_numa_node (include/ucxp2p/p2p_mem.h):
 * shared mappings of a memfd bound to a NUMA node with mbind, registered
 * with the memfd named (core/mem.h) so same-host receivers may map it once
 * and copy with memcpy (core/shm_region.h); anonymous memory when no memfd
 * can be made. The mappings we made are remembered (address -> length,
 * registration, fd) so p2p_mem_free can check its input.
 */
#include <ucxp2p/p2p_mem.h>

#include "core/fork_mutex.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/rails.h"
#include "core/shm_region.h"
#include "topo/numa_mem.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

constexpr int kMpolBind = 2;           // MPOL_BIND (linux/mempolicy.h)
constexpr int kMaxNodes = 1024;        // bits in our node mask
constexpr size_t kSamplePages = 64;

/** The memory of one p2p_mem_alloc: a memfd region (shm::Region) that
 *  same-host peers may map, or anonymous memory when no memfd can be made. */
class Block {
public:
    Block() = default;
    ~Block() {
        if (anon_ != nullptr) munmap(anon_, anon_len_);
    }
    Block(const Block &) = delete;
    Block &operator=(const Block &) = delete;
    Block(Block &&o) noexcept
        : region_(std::move(o.region_)), anon_(o.anon_), anon_len_(o.anon_len_) {
        o.anon_ = nullptr;
    }

    /** Map len bytes (a page multiple); false + errno. */
    bool map(size_t len) {
        if (region_.create(len, "ucxp2p")) {
            return true;
        }
        P2P_LOG(P2P_LOG_DEBUG, "mem alloc: no shareable memory (%s); anonymous "
                "memory instead", std::strerror(errno));
        void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            return false;
        }
        anon_ = p;
        anon_len_ = len;
        return true;
    }
    void *data() const { return anon_ != nullptr ? anon_ : region_.data(); }
    int fd() const { return region_.fd(); }        // -1: anonymous
    uint64_t ino() const { return region_.ino(); }

private:
    ucxp2p::shm::Region region_;
    void *anon_ = nullptr;
    size_t anon_len_ = 0;
};

struct Mapping {
    size_t length;
    p2p_mem_h mem;
    Block block;
    bool freeing = false;  // a p2p_mem_free of it is deregistering it
};

ucxp2p::ForkMutex &maps_mu() {  // held across fork(): a child may allocate
    static auto *m = new ucxp2p::ForkMutex();
    return *m;
}

std::map<uintptr_t, Mapping> &maps() {
    static auto *m = new std::map<uintptr_t, Mapping>();
    return *m;
}

bool node_exists(int node) {
    struct stat sb;
    std::string p = "/sys/devices/system/node/node" + std::to_string(node);
    return stat(p.c_str(), &sb) == 0;
}

/** mbind(MPOL_BIND) of [addr, addr + len) to node; 0 or errno. */
int mbind_node(void *addr, size_t len, int node) {
    unsigned long mask[kMaxNodes / (8 * sizeof(unsigned long))] = {};
    mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
    long rc = syscall(SYS_mbind, addr, len, kMpolBind, mask,
                      static_cast<unsigned long>(kMaxNodes + 1), 0UL);
    return rc == 0 ? 0 : errno;
}

std::atomic<ucxp2p::MbindFn> g_mbind_for_test{nullptr};

int bind_to_node(void *addr, size_t len, int node) {
    ucxp2p::MbindFn fn = g_mbind_for_test.load();
    return fn != nullptr ? fn(addr, len, node) : mbind_node(addr, len, node);
}

p2p_status_t mem_alloc(p2p_context_h context, size_t length, int numa_node,
                       void **address_p, p2p_mem_h *mem_p) {
    if (length == 0 || address_p == nullptr || mem_p == nullptr ||
        numa_node < -1 || numa_node >= kMaxNodes) {
        P2P_LOG(P2P_LOG_ERROR, "mem alloc: bad arguments (length %zu, numa %d)",
                length, numa_node);
        return P2P_ERR_INVALID_PARAM;
    }
    if (!ucxp2p::context_alive(context)) {  // before anything is mapped
        return P2P_ERR_INVALID_HANDLE;
    }
    if (numa_node >= 0 && !node_exists(numa_node)) {
        P2P_LOG(P2P_LOG_ERROR, "mem alloc: numa node %d does not exist", numa_node);
        return P2P_ERR_INVALID_PARAM;
    }
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    if (length > SIZE_MAX - page) {
        return P2P_ERR_NO_MEMORY;
    }
    size_t len = (length + page - 1) / page * page;
    int node = numa_node >= 0 ? numa_node : ucxp2p::rails_numa();
    Block block;
    if (!block.map(len)) {
        P2P_LOG(P2P_LOG_ERROR, "mem alloc: mmap of %zu bytes failed: %s", len,
                std::strerror(errno));
        return P2P_ERR_NO_MEMORY;
    }
    void *p = block.data();
    if (node >= 0) {
        int err = bind_to_node(p, len, node);
        if (err != 0 && numa_node >= 0) {
            P2P_LOG(P2P_LOG_ERROR, "mem alloc: mbind to numa node %d failed: %s",
                    node, std::strerror(err));
            return P2P_ERR_UNSUPPORTED;
        }
        if (err != 0) {
            // Best effort (-1): e.g. a cpuset whose mems exclude the node
            // nearest the NICs. Memory elsewhere beats no memory.
            P2P_LOG(P2P_LOG_INFO, "mem alloc: mbind to numa node %d of the rail "
                    "plan refused (%s); the kernel's default policy places it",
                    node, std::strerror(err));
            node = -1;
        }
    }
    // Kept in the map before it is registered: once registered, nothing
    // may fail (a registration naming memory already unmapped). The entry
    // has no registration yet, so p2p_mem_free cannot match it meanwhile.
    const int fd = block.fd();
    const uint64_t ino = block.ino();
    const uintptr_t key = reinterpret_cast<uintptr_t>(p);
    {
        std::lock_guard<ucxp2p::ForkMutex> lock(maps_mu());
        maps().emplace(key, Mapping{len, nullptr, std::move(block)});  // may throw
    }
    p2p_mem_h mem = nullptr;
    p2p_status_t st = ucxp2p::mem_register(context, p, len, fd, ino, &mem);
    std::lock_guard<ucxp2p::ForkMutex> lock(maps_mu());
    if (st != P2P_OK) {
        maps().erase(key);  // unmaps (and closes the memfd)
        return st;
    }
    maps().find(key)->second.mem = mem;
    P2P_LOG(P2P_LOG_DEBUG, "mem alloc: %zu bytes at %p on numa %d", len, p, node);
    *address_p = p;
    *mem_p = mem;
    return P2P_OK;
}

p2p_status_t mem_free(void *address, p2p_mem_h mem) {
    const uintptr_t key = reinterpret_cast<uintptr_t>(address);
    {
        std::lock_guard<ucxp2p::ForkMutex> lock(maps_mu());
        auto it = maps().find(key);
        if (address == nullptr || mem == nullptr || it == maps().end() ||
            it->second.mem != mem || it->second.freeing) {
            P2P_LOG(P2P_LOG_ERROR, "mem free: %p is not memory from p2p_mem_alloc "
                    "with this registration", address);
            return P2P_ERR_INVALID_PARAM;
        }
        it->second.freeing = true;  // only this call erases it now
    }
    // Outside the map's lock, which stays a leaf (core/fork_mutex.h): the
    // deregistration takes the handle registry's and the worker's locks.
    p2p_status_t st = p2p_mem_deregister(mem);
    {
        std::lock_guard<ucxp2p::ForkMutex> lock(maps_mu());
        auto it = maps().find(key);
        if (st == P2P_ERR_BUSY) {
            it->second.freeing = false;
            return st;
        }
        // INVALID_HANDLE: the user deregistered it already (or the context
        // is gone); the mapping is still ours to release.
        maps().erase(it);  // unmaps (and closes the memfd)
    }
    // After the close: a peer that sees the count move finds the fd gone.
    // (The epoch table's first use takes its own lock: not under ours.)
    ucxp2p::mem_region_closed();
    return P2P_OK;
}

} // namespace

void ucxp2p::mem_set_mbind_for_test(MbindFn fn) { g_mbind_for_test.store(fn); }

extern "C" p2p_status_t p2p_mem_alloc(p2p_context_h context, size_t length,
                                      int numa_node, void **address_p,
                                      p2p_mem_h *mem_p) {
    try {
        return mem_alloc(context, length, numa_node, address_p, mem_p);
    } catch (...) {
        return P2P_ERR_NO_MEMORY;  // bookkeeping allocation failed
    }
}

extern "C" p2p_status_t p2p_mem_free(void *address, p2p_mem_h mem) {
    try {
        return mem_free(address, mem);
    } catch (...) {
        return P2P_ERR_NO_MEMORY;
    }
}

extern "C" int p2p_mem_numa_node(const void *address, size_t length) {
    if (address == nullptr || length == 0) {
        return -1;
    }
    uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    uintptr_t first = reinterpret_cast<uintptr_t>(address) / page * page;
    uintptr_t last = (reinterpret_cast<uintptr_t>(address) + length - 1) / page * page;
    size_t npages = (last - first) / page + 1;
    size_t n = npages < kSamplePages ? npages : kSamplePages;
    void *pages[kSamplePages];
    int status[kSamplePages];
    for (size_t i = 0; i < n; ++i) {
        size_t k = n == 1 ? 0 : i * (npages - 1) / (n - 1);
        pages[i] = reinterpret_cast<void *>(first + k * page);
    }
    if (syscall(SYS_move_pages, 0, n, pages, nullptr, status, 0) != 0) {
        return -1;
    }
    int node = -1;
    for (size_t i = 0; i < n; ++i) {
        if (status[i] < 0) {
            continue;  // not present
        }
        if (node >= 0 && status[i] != node) {
            return -1;
        }
        node = status[i];
    }
    return node;
}
