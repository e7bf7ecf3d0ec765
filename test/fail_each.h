/*
 * A call with each of its allocations failing in turn (test/fail_new.h):
 * the first, then the second, ... until it succeeds. For GoogleTest
 * programs that link test/fail_new.cc.
 */
#ifndef UCXP2P_TEST_FAIL_EACH_H
#define UCXP2P_TEST_FAIL_EACH_H

#include "fail_new.h"

#include <ucxp2p/p2p.h>

#include <gtest/gtest.h>

namespace p2ptest {

/** call() with allocation k failing, for k = 0, 1, ... until it succeeds:
 *  every failure must be P2P_ERR_NO_MEMORY, and undo(st) runs after each
 *  try (it checks and cleans up). Returns how many tries failed. */
template <class Call, class Undo> unsigned fail_each_allocation(Call call, Undo undo) {
    unsigned k = 0;
    for (; k < 500; ++k) {
        fail_new_after(k);
        const p2p_status_t st = call();
        fail_new_in_this_thread(false);
        undo(st);
        if (st == P2P_OK) return k;
        EXPECT_EQ(P2P_ERR_NO_MEMORY, st) << "with allocation " << k << " failing";
        if (st != P2P_ERR_NO_MEMORY) return k;
    }
    ADD_FAILURE() << "still failing after " << k << " allocations";
    return k;
}

} // namespace p2ptest

#endif
