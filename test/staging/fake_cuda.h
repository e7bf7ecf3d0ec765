/*
 * A stand-in for the CUDA driver (core/memtype.h's Driver) so staged
 * device memory (core/staging.h) is tested on machines without a GPU.
 *
 * Fake device memory is a memfd mapped twice: the "device" view, which the
 * library is given, is PROT_NONE, so any CPU access the library makes to it
 * (instead of going through the driver's copies) faults; the copies use
 * the second, writable view, which tests read and fill too.
 *
 * The fake checks what the real driver would refuse: a copy outside a
 * fake allocation, or with no context (or another one) current on the
 * calling thread.
 */
#ifndef UCXP2P_TEST_STAGING_FAKE_CUDA_H
#define UCXP2P_TEST_STAGING_FAKE_CUDA_H

#include "core/memtype.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace fakecuda {

/** Counters and failure switches; each fail_* makes that many next calls
 *  fail. */
struct Stats {
    std::atomic<long> dtoh{0}, htod{0};           // copies made
    std::atomic<long> dtoh_bytes{0}, htod_bytes{0};
    std::atomic<long> bad_ctx{0};                 // copies with no/wrong context
    std::atomic<long> bad_range{0};               // copies outside an allocation
    std::atomic<long> pinned{0}, unpinned{0};     // host_register / unregister
    std::atomic<int> fail_dtoh{0}, fail_htod{0}, fail_pin{0};
    // The memory names no context (as stream-ordered pool memory): the
    // pointer's context attribute answers a null context.
    std::atomic<bool> no_ptr_ctx{false};
    // While hold_htod is set, the next copy to the device of 256 KiB or
    // more sets htod_held and waits until htod_release is set.
    std::atomic<bool> hold_htod{false}, htod_held{false}, htod_release{false};
};
Stats &stats();

/** The fake, for memtype::set_driver_for_test. */
const ucxp2p::memtype::Driver *driver();

/** The fake's one context (what the memory names, and what copies need
 *  current). */
void *context();

/** len bytes of fake device memory (its PROT_NONE view), zeroed;
 *  nullptr on failure. */
void *alloc(size_t len);
void free(void *dev);
/** The writable view of the fake device address dev. */
uint8_t *backing(const void *dev);

/** Fake device memory for a scope (alloc / free); p is nullptr if the
 *  allocation failed. */
struct Mem {
    void *p;
    explicit Mem(size_t len) : p(alloc(len)) {}
    ~Mem() { free(p); }
    Mem(const Mem &) = delete;
    Mem &operator=(const Mem &) = delete;
};

/** Installs the fake for a scope. */
struct Installed {
    Installed() { ucxp2p::memtype::set_driver_for_test(driver()); }
    ~Installed() { ucxp2p::memtype::set_driver_for_test(nullptr); }
    Installed(const Installed &) = delete;
    Installed &operator=(const Installed &) = delete;
};

} // namespace fakecuda

#endif
