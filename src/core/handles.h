/*
 * Handle registry: the public opaque handles are ids, never raw pointers.
 * Ids come from one counter shared by every object type and are never
 * reused, so a destroyed, finalized, foreign or wrong-type handle is always
 * detected (P2P_ERR_INVALID_HANDLE) instead of touching freed memory. A
 * lookup returns a shared_ptr that keeps the object alive for the call even
 * if another thread destroys the handle concurrently.
 */
#ifndef UCXP2P_CORE_HANDLES_H
#define UCXP2P_CORE_HANDLES_H

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

namespace ucxp2p {

uint64_t handle_next_id();

template <class T> class Registry {
public:
    /** Store obj; returns its id (never 0). */
    uint64_t add(std::shared_ptr<T> obj) {
        uint64_t id = handle_next_id();
        std::unique_lock<std::shared_mutex> lock(mu_);
        map_.emplace(id, std::move(obj));
        return id;
    }

    std::shared_ptr<T> get(uint64_t id) const {
        std::shared_lock<std::shared_mutex> lock(mu_);
        auto it = map_.find(id);
        return it == map_.end() ? nullptr : it->second;
    }

    /** Remove and return (nullptr when absent: double destroy). */
    std::shared_ptr<T> remove(uint64_t id) {
        std::unique_lock<std::shared_mutex> lock(mu_);
        auto it = map_.find(id);
        if (it == map_.end()) {
            return nullptr;
        }
        std::shared_ptr<T> obj = std::move(it->second);
        map_.erase(it);
        return obj;
    }

    /** Call f(obj) for every object (registry lock held: f must not call
     *  back into the registry). */
    template <class F> void for_each(F f) const {
        std::shared_lock<std::shared_mutex> lock(mu_);
        for (const auto &kv : map_) f(*kv.second);
    }

    /** Remove every object for which pred(obj) is true; returns them. */
    template <class Pred> std::vector<std::shared_ptr<T>> remove_if(Pred pred) {
        std::vector<std::shared_ptr<T>> out;
        std::unique_lock<std::shared_mutex> lock(mu_);
        for (auto it = map_.begin(); it != map_.end();) {
            if (pred(*it->second)) {
                out.push_back(std::move(it->second));
                it = map_.erase(it);
            } else {
                ++it;
            }
        }
        return out;
    }

private:
    mutable std::shared_mutex mu_;
    std::unordered_map<uint64_t, std::shared_ptr<T>> map_;
};

template <class H> inline uint64_t handle_id(H h) {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(h));
}
template <class H> inline H handle_from_id(uint64_t id) {
    return reinterpret_cast<H>(static_cast<uintptr_t>(id));
}

} // namespace ucxp2p

#endif
