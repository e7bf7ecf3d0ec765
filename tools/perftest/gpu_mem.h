/*
 * p2p_perftest -m cuda / cuda-managed: GPU buffers through the CUDA
 * runtime, where configure found it (P2P_PERFTEST_CUDA); without it every
 * GPU memory type is refused with the reason.
 */
#ifndef UCXP2P_TOOLS_PERFTEST_GPU_MEM_H
#define UCXP2P_TOOLS_PERFTEST_GPU_MEM_H

#include <cstddef>
#include <string>

namespace perftest {

/** host, cuda (cudaMalloc) or cuda-managed (cudaMallocManaged). */
bool known_mem_type(const std::string &type);

/** Whether buffers of type can be had here; else *why says why not (built
 *  without CUDA, no usable device). host always can. */
bool mem_type_usable(const std::string &type, std::string *why);

/** bytes of GPU memory of type, zeroed; nullptr with *why on failure. */
void *gpu_alloc(const std::string &type, size_t bytes, std::string *why);
void gpu_free(const std::string &type, void *p);

} // namespace perftest

#endif
