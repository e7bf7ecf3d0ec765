/*
 * See fail_new.h. Every form is replaced, the over-aligned ones included
 * (not just the one the others call by default) so that under a
 * sanitizer, which replaces them too, memory is still freed by the
 * allocator that made it.
 */
#include "fail_new.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

thread_local bool t_fail = false;
thread_local long t_left = -1;  // allocations until t_fail; -1: no countdown
std::atomic<bool> g_fail{false};

void *checked_malloc(std::size_t n) noexcept {
    if (t_left >= 0 && t_left-- == 0) t_fail = true;
    if (t_fail || g_fail.load(std::memory_order_relaxed)) return nullptr;
    return std::malloc(n == 0 ? 1 : n);
}

void *malloc_or_throw(std::size_t n) {
    void *p = checked_malloc(n);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}

// The over-aligned forms (types declared alignas(64), such as the
// library's per-thread records): aligned_alloc wants a size that is a
// multiple of the alignment.
void *checked_aligned(std::size_t n, std::align_val_t a) noexcept {
    if (t_left >= 0 && t_left-- == 0) t_fail = true;
    if (t_fail || g_fail.load(std::memory_order_relaxed)) return nullptr;
    const std::size_t al = static_cast<std::size_t>(a);
    return std::aligned_alloc(al, ((n == 0 ? 1 : n) + al - 1) / al * al);
}

void *aligned_or_throw(std::size_t n, std::align_val_t a) {
    void *p = checked_aligned(n, a);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}

} // namespace

namespace p2ptest {

void fail_new_in_this_thread(bool on) {
    t_fail = on;
    t_left = -1;
}
void fail_new_after(unsigned n) {
    t_fail = false;
    t_left = static_cast<long>(n);
}
bool fail_new_reached() { return t_fail; }
void fail_new_everywhere(bool on) { g_fail.store(on); }

} // namespace p2ptest

void *operator new(std::size_t n) { return malloc_or_throw(n); }
void *operator new[](std::size_t n) { return malloc_or_throw(n); }
void *operator new(std::size_t n, const std::nothrow_t &) noexcept { return checked_malloc(n); }
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept { return checked_malloc(n); }
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { std::free(p); }

void *operator new(std::size_t n, std::align_val_t a) { return aligned_or_throw(n, a); }
void *operator new[](std::size_t n, std::align_val_t a) { return aligned_or_throw(n, a); }
void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
    return checked_aligned(n, a);
}
void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
    return checked_aligned(n, a);
}
void operator delete(void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept {
    std::free(p);
}
