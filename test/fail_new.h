/*
 * Allocation failure on demand, for tests. A test program that links
 * test/fail_new.cc has every form of operator new replaced (the library's
 * allocations included: the executable's replacement serves the whole
 * process); while failing is on, the throwing forms throw std::bad_alloc
 * and the nothrow forms return NULL. malloc itself (UCX, hwloc) is left
 * alone. Code that runs while failing is on must not allocate itself.
 */
#ifndef UCXP2P_TEST_FAIL_NEW_H
#define UCXP2P_TEST_FAIL_NEW_H

namespace p2ptest {

/** Allocations of the calling thread only. */
void fail_new_in_this_thread(bool on);
/** Allocations of every thread (e.g. a library's progress thread). */
void fail_new_everywhere(bool on);
/** The calling thread's next n allocations succeed, every later one fails,
 *  until fail_new_in_this_thread(false): to fail each allocation of a call
 *  in turn (n = 0, 1, 2, ... until the call succeeds). */
void fail_new_after(unsigned n);
/** Whether fail_new_after's countdown ran out (an allocation failed, or
 *  would have) in this thread since it was set. */
bool fail_new_reached();

/** The calling thread's allocations fail for this object's scope. */
class NoMemory {
public:
    NoMemory() { fail_new_in_this_thread(true); }
    ~NoMemory() { fail_new_in_this_thread(false); }
    NoMemory(const NoMemory &) = delete;
    NoMemory &operator=(const NoMemory &) = delete;
};

} // namespace p2ptest

#endif
