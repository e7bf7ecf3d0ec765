/*
 * Internals of p2p_mem_alloc (numa_mem.cc) that tests reach: the NUMA
 * binding step, replaceable so a refusal can be provoked on any machine.
 */
#ifndef UCXP2P_TOPO_NUMA_MEM_H
#define UCXP2P_TOPO_NUMA_MEM_H

#include <cstddef>

namespace ucxp2p {

/** Binds [addr, addr + len) to NUMA node `node`: 0, or the errno. */
using MbindFn = int (*)(void *addr, size_t len, int node);

/** Test seam: p2p_mem_alloc binds with fn instead of mbind(2) until called
 *  again with nullptr. */
void mem_set_mbind_for_test(MbindFn fn);

} // namespace ucxp2p

#endif
