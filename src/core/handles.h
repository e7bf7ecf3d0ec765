/*
 * Handle registry: the public opaque handles are ids, never raw pointers.
 *
 * An id is (sequence << kIndexBits) | slot: the sequence comes from one
 * counter shared by every object type and is never reused, so a destroyed,
 * finalized, foreign or wrong-type handle is always detected
 * (P2P_ERR_INVALID_HANDLE) instead of touching freed memory; the slot names
 * where the object lives, so a lookup is an index, not a search.
 *
 * Lookups take no lock: a slot holds a reference count (the registry's own
 * reference plus one per lookup in progress) and slots are never freed, only
 * recycled, so a lookup may touch a stale slot safely. A lookup increments
 * the count only while it is non-zero, then checks the slot still holds its
 * id; the object is destroyed by whoever drops the last reference (the
 * remover, or a lookup still using it), so a destroy racing with a call on
 * the same handle never frees the object under that call.
 *
 * The per-message calls use peek() instead: no reference count, valid
 * inside a ReadSection (core/rcu.h). remove() waits for the sections that
 * may have found the object before it hands back the registry's reference.
 */
#ifndef UCXP2P_CORE_HANDLES_H
#define UCXP2P_CORE_HANDLES_H

#include "core/rcu.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace ucxp2p {

/** Next value of the sequence shared by every registry (never 0). */
uint64_t handle_next_id();

template <class T> class Registry {
    static constexpr unsigned kIndexBits = 20;  // 1M live objects per type
    static constexpr uint64_t kIndexMask = (uint64_t(1) << kIndexBits) - 1;
    static constexpr unsigned kChunkBits = 10;
    static constexpr uint32_t kChunkSize = 1u << kChunkBits;
    static constexpr uint32_t kChunks = 1u << (kIndexBits - kChunkBits);

    struct alignas(64) Slot {  // own cache line: no false sharing
        std::atomic<uint64_t> id{0};    // 0 while free
        std::atomic<uint32_t> refs{0};  // 0 while free
        T *obj = nullptr;               // written only while refs == 0
        uint32_t next_free = 0;         // free list link (under mu_)
        uint32_t index = 0;             // own index, set once
    };

public:
    /** A counted reference to a registered object (like a shared_ptr). */
    class Ref {
    public:
        Ref() = default;
        Ref(Ref &&o) noexcept : reg_(o.reg_), slot_(o.slot_) { o.slot_ = nullptr; }
        Ref &operator=(Ref &&o) noexcept {
            if (this != &o) {
                reset();
                reg_ = o.reg_;
                slot_ = o.slot_;
                o.slot_ = nullptr;
            }
            return *this;
        }
        Ref(const Ref &) = delete;
        Ref &operator=(const Ref &) = delete;
        ~Ref() { reset(); }

        explicit operator bool() const { return slot_ != nullptr; }
        T *get() const { return slot_ ? slot_->obj : nullptr; }
        T *operator->() const { return slot_->obj; }
        T &operator*() const { return *slot_->obj; }
        void reset() {
            if (slot_ != nullptr) {
                reg_->unref(slot_);
                slot_ = nullptr;
            }
        }
        /** Give this reference up without releasing it: the object is
         *  never freed (for what something outside may still use). */
        void leak() { slot_ = nullptr; }

    private:
        friend class Registry;
        Ref(Registry *reg, Slot *slot) : reg_(reg), slot_(slot) {}
        Registry *reg_ = nullptr;
        Slot *slot_ = nullptr;
    };

    Registry() = default;
    Registry(const Registry &) = delete;
    Registry &operator=(const Registry &) = delete;
    ~Registry() {
        for (uint32_t c = 0; c < kChunks; ++c) {
            Slot *chunk = chunks_[c].load(std::memory_order_relaxed);
            if (chunk == nullptr) continue;
            for (uint32_t i = 0; i < kChunkSize; ++i) delete chunk[i].obj;
            delete[] chunk;
        }
    }

    /** Store obj; returns its id, or 0 when every slot is taken. */
    uint64_t add(std::unique_ptr<T> obj) {
        std::lock_guard<std::mutex> lock(mu_);
        uint32_t index;
        if (free_head_ != kNone) {
            index = free_head_;
            free_head_ = slot_at(index)->next_free;
        } else {
            if (used_ == (uint64_t(1) << kIndexBits)) {
                return 0;
            }
            index = static_cast<uint32_t>(used_);
            uint32_t c = index >> kChunkBits;
            if (chunks_[c].load(std::memory_order_relaxed) == nullptr) {
                Slot *chunk = new Slot[kChunkSize];
                for (uint32_t i = 0; i < kChunkSize; ++i) {
                    chunk[i].index = (c << kChunkBits) | i;
                }
                chunks_[c].store(chunk, std::memory_order_release);
            }
            ++used_;
        }
        Slot *s = slot_at(index);
        uint64_t id = (handle_next_id() << kIndexBits) | index;
        s->obj = obj.release();
        s->id.store(id, std::memory_order_release);   // publishes obj to peek()
        s->refs.store(1, std::memory_order_release);  // publishes obj and id to get()
        return id;
    }

    /** The object of id, or an empty Ref (unknown, destroyed, other type). */
    Ref get(uint64_t id) {
        if ((id >> kIndexBits) == 0) {
            return Ref();  // no sequence: never issued (a free slot's id is 0)
        }
        Slot *s = slot_at(id & kIndexMask);
        if (s == nullptr || !try_ref(s)) {
            return Ref();
        }
        if (s->id.load(std::memory_order_acquire) != id) {
            unref(s);  // recycled for another object meanwhile
            return Ref();
        }
        return Ref(this, s);
    }

    /** The object of id without taking a reference, or nullptr (unknown,
     *  destroyed, other type). Call inside a ReadSection; the pointer is
     *  valid until the section ends. */
    T *peek(uint64_t id) const {
        if ((id >> kIndexBits) == 0) {
            return nullptr;  // never issued (a free slot's id is 0)
        }
        Slot *s = slot_at(id & kIndexMask);
        if (s == nullptr || s->id.load(std::memory_order_acquire) != id) {
            return nullptr;
        }
        // remove() clears the id, then waits for this section to end
        // before the object can be freed or the slot reused.
        return s->obj;
    }

    /** Unregister id; returns the registry's reference (empty when absent:
     *  double destroy). The object dies when the last Ref goes. Waits for
     *  read sections (core/rcu.h): see there where not to call it. */
    Ref remove(uint64_t id) {
        if ((id >> kIndexBits) == 0) {
            return Ref();  // never issued; would match a free slot's 0
        }
        Slot *s = slot_at(id & kIndexMask);
        if (s == nullptr) {
            return Ref();
        }
        uint64_t expect = id;
        if (!s->id.compare_exchange_strong(expect, 0, std::memory_order_acq_rel)) {
            return Ref();
        }
        rcu_synchronize();  // no peek() still holds the object
        return Ref(this, s);
    }

    /** Call f(obj) for every registered object. f may call the registry. */
    template <class F> void for_each(F f) {
        for (uint32_t i = 0; i < capacity(); ++i) {
            Slot *s = slot_at(i);
            if (s->id.load(std::memory_order_acquire) == 0 || !try_ref(s)) continue;
            Ref r(this, s);
            if (s->id.load(std::memory_order_acquire) != 0) f(*s->obj);
        }
    }

    /** Unregister every object for which pred(obj) is true, handing each
     *  reference to f(Ref &) as it goes. Allocates nothing: teardown (a
     *  context's destroy) must not fail half done for want of memory. */
    template <class Pred, class F> void remove_each(Pred pred, F f) {
        for (uint32_t i = 0; i < capacity(); ++i) {
            Slot *s = slot_at(i);
            uint64_t id = s->id.load(std::memory_order_acquire);
            if (id == 0 || !try_ref(s)) continue;
            Ref probe(this, s);
            if (s->id.load(std::memory_order_acquire) != id || !pred(*s->obj)) continue;
            Ref r = remove(id);
            if (r) f(r);
        }
    }

    /** fork() support (pthread_atfork): hold the registry's lock across
     *  the fork, so that the child's copy is not left locked by a thread
     *  that does not exist there. */
    void lock_for_fork() { mu_.lock(); }
    void unlock_after_fork() { mu_.unlock(); }

    /** In a child made by fork(), single-threaded, after unlock_after_fork:
     *  forget every object without destroying it. The parent still owns
     *  what they hold (UCX workers, threads, shared memory): tearing them
     *  down here would break the parent. Their ids stop matching, so the
     *  child's calls on inherited handles fail as on destroyed ones. The
     *  slots keep their objects (never freed, still reachable: no leak
     *  report) and are not reused; free slots stay free. */
    void abandon_in_child() {
        for (uint32_t i = 0; i < static_cast<uint32_t>(used_); ++i) {
            Slot *s = slot_at(i);
            s->id.store(0, std::memory_order_relaxed);
            s->refs.store(0, std::memory_order_relaxed);  // lookups fail
        }
    }

private:
    static constexpr uint32_t kNone = ~0u;

    uint32_t capacity() const {
        std::lock_guard<std::mutex> lock(mu_);
        return static_cast<uint32_t>(used_);
    }

    Slot *slot_at(uint64_t index) const {
        Slot *chunk = chunks_[index >> kChunkBits].load(std::memory_order_acquire);
        return chunk == nullptr ? nullptr : &chunk[index & (kChunkSize - 1)];
    }

    /** Take a reference unless the slot is free. */
    static bool try_ref(Slot *s) {
        uint32_t r = s->refs.load(std::memory_order_relaxed);
        do {
            if (r == 0) return false;
        } while (!s->refs.compare_exchange_weak(r, r + 1, std::memory_order_acquire,
                                                std::memory_order_relaxed));
        return true;
    }

    void unref(Slot *s) {
        if (s->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) {
            return;
        }
        // Last reference: the id was cleared by remove() before the
        // registry's reference was dropped, so no lookup can succeed now.
        delete s->obj;
        s->obj = nullptr;
        std::lock_guard<std::mutex> lock(mu_);
        s->next_free = free_head_;
        free_head_ = s->index;
    }

    mutable std::mutex mu_;  // add, slot recycling
    std::atomic<Slot *> chunks_[kChunks] = {};
    uint64_t used_ = 0;      // slots ever handed out (under mu_)
    uint32_t free_head_ = kNone;
};

template <class H> inline uint64_t handle_id(H h) {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(h));
}
template <class H> inline H handle_from_id(uint64_t id) {
    return reinterpret_cast<H>(static_cast<uintptr_t>(id));
}

} // namespace ucxp2p

#endif
