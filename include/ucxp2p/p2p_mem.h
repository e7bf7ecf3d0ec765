/*
 * ucxp2p -- NUMA-placed, registered memory.
 *
 * Buffers for transfers should live on the NUMA node nearest the NIC(s) the
 * rank sends through. p2p_mem_alloc maps anonymous memory bound (mbind
 * MPOL_BIND) to one NUMA node and registers it with the context, so it can
 * be used with p2p_comm_send / p2p_comm_recv right away. The memory is a
 * shared mapping of a memfd: a receiver on the same host maps a sender's
 * allocation once and copies from it with memcpy, instead of a
 * process_vm_readv system call (which pins the pages) per message. Being a
 * shared mapping, a child created with fork() shares it (writes by either
 * are seen by both) instead of getting a copy-on-write copy.
 */
#ifndef UCXP2P_P2P_MEM_H
#define UCXP2P_P2P_MEM_H

#include <ucxp2p/p2p.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/**
 * Allocate length bytes (rounded up to whole pages, zero-filled) on NUMA
 * node numa_node, or on the node of this rank's rail plan when numa_node is
 * -1 (the node nearest its NICs / GPU; when that is unknown, or the kernel
 * refuses it -- e.g. a cpuset whose mems exclude it -- the memory follows
 * the kernel's default policy, logged at info), and register it with
 * context.
 * Pages are placed when first touched. *address_p and *mem_p are set only
 * on success. Release with p2p_mem_free (not p2p_mem_deregister).
 * Errors: P2P_ERR_INVALID_HANDLE (context), P2P_ERR_INVALID_PARAM (zero
 * length, NULL address_p or mem_p, numa_node < -1 or not a node of this
 * machine), P2P_ERR_NO_MEMORY (mmap failed, or UCX ran out of memory
 * registering it), P2P_ERR_UNSUPPORTED (the kernel refused to bind to
 * numa_node >= 0), P2P_ERR_TRANSPORT (UCX refused the registration).
 */
p2p_status_t p2p_mem_alloc(p2p_context_h context, size_t length, int numa_node,
                           void **address_p, p2p_mem_h *mem_p);

/**
 * Deregister and unmap memory from p2p_mem_alloc. address must be the
 * address it returned and mem its registration (or a registration already
 * released with p2p_mem_deregister; then only the memory is unmapped).
 * Same-host receivers that mapped it to read this rank's messages unmap it
 * when they next read from this rank through a mapping, or when their
 * communicator is destroyed: the system gets the pages back then.
 * Errors: P2P_ERR_INVALID_PARAM (address not from p2p_mem_alloc, already
 * freed, or mem is another registration), P2P_ERR_BUSY (operations using
 * mem are in flight; nothing is released; it progresses as
 * p2p_mem_deregister does), P2P_ERR_NO_MEMORY (the library's bookkeeping;
 * nothing is released).
 */
p2p_status_t p2p_mem_free(void *address, p2p_mem_h mem);

/**
 * NUMA node of the present (touched) pages of [address, address + length),
 * looking at up to 64 pages spread over the range (move_pages query, which
 * touches nothing): the node when all of them lie on one node, -1 when they
 * are spread, none is present, or the kernel cannot tell. For tests and
 * diagnostics.
 */
int p2p_mem_numa_node(const void *address, size_t length);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
