/*
 * Read sections for handle lookups without a reference count.
 *
 * The per-message calls (post, poll) look up their communicator and
 * registration on every call. A counted lookup (Registry::get) costs two
 * atomic read-modify-writes per handle, and a locked instruction waits for
 * every store still in flight: after a shared-memory send, a cache miss to
 * the peer's core (docs/PERFORMANCE.md, message rate). Instead those calls
 * run inside a ReadSection and use Registry::peek; Registry::remove waits
 * (rcu_synchronize) until every section that may have seen the object has
 * ended before the registry's reference can be dropped, so an object never
 * dies under a section that found it.
 *
 * Each thread owns a reader record whose sequence number is odd while the
 * thread is inside a section. Entering stores it and fences; the remover
 * clears the handle's id, fences, then waits for every record it sees odd
 * to change (a Dekker pair: either the reader's lookup sees the cleared id,
 * or the remover sees the reader inside). The reader's fence is the light
 * side of core/fence.h's asymmetric pair: no locked instruction per call.
 *
 * Rules: a section must not block for long (it delays every destroy), must
 * not nest, and rcu_synchronize must not be called inside a section or
 * while holding a lock that a section may take (the worker lock, a
 * completion queue's lock).
 */
#ifndef UCXP2P_CORE_RCU_H
#define UCXP2P_CORE_RCU_H

#include "core/fence.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ucxp2p {

namespace rcu_detail {

struct alignas(64) Reader {  // own cache line: written on every call
    std::atomic<uint64_t> seq{0};     // odd inside a section; its thread writes
    std::atomic<bool> taken{false};   // owned by a live thread
    Reader *next = nullptr;           // list link, set before publication
};

/** This thread's record (nullptr until its first section). __thread, not
 *  thread_local: no initialization wrapper on the per-call path. The
 *  initial-exec model makes it one %fs-relative load instead of a
 *  __tls_get_addr call (~15 instructions per post in a shared library);
 *  one pointer fits the static TLS glibc reserves for libraries loaded
 *  with dlopen. */
#define UCXP2P_TLS_IE __attribute__((tls_model("initial-exec")))
extern __thread Reader *t_reader UCXP2P_TLS_IE;

/** Take a record for this thread (slow path: first section of a thread).
 *  Throws std::bad_alloc. */
Reader *attach();

/** Records in the list (taken or free); for tests. */
size_t record_count();

} // namespace rcu_detail

class ReadSection {
public:
    ReadSection() {
        r_ = rcu_detail::t_reader;
        if (r_ == nullptr) r_ = rcu_detail::attach();
        // Only this thread writes its record: no read-modify-write.
        r_->seq.store(r_->seq.load(std::memory_order_relaxed) + 1,
                      std::memory_order_relaxed);
        light_fence();  // the store above before any lookup's load
    }
    ~ReadSection() {
        // Release: the section's reads of the object happen before a
        // remover that sees the new value frees it.
        r_->seq.store(r_->seq.load(std::memory_order_relaxed) + 1,
                      std::memory_order_release);
    }
    ReadSection(const ReadSection &) = delete;
    ReadSection &operator=(const ReadSection &) = delete;

private:
    rcu_detail::Reader *r_;
};

/** Return once every read section that was running when this was called
 *  has ended (sections starting later see what the caller changed before
 *  the call). See the rules above. */
void rcu_synchronize();

} // namespace ucxp2p

#endif
