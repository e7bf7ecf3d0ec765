/* See gpu_mem.h. */
#include "gpu_mem.h"

#ifdef P2P_PERFTEST_CUDA
#include <cuda_runtime_api.h>
#endif

namespace perftest {

bool known_mem_type(const std::string &type) {
    return type == "host" || type == "cuda" || type == "cuda-managed";
}

#ifdef P2P_PERFTEST_CUDA

bool mem_type_usable(const std::string &type, std::string *why) {
    if (type == "host") return true;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        *why = std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")";
        return false;
    }
    if (n == 0) {
        *why = "no CUDA device";
        return false;
    }
    return true;
}

void *gpu_alloc(const std::string &type, size_t bytes, std::string *why) {
    void *p = nullptr;
    cudaError_t e = type == "cuda" ? cudaMalloc(&p, bytes)
                                   : cudaMallocManaged(&p, bytes);
    if (e == cudaSuccess) e = cudaMemset(p, 0, bytes);  // outside timed loops
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        *why = std::string(type == "cuda" ? "cudaMalloc" : "cudaMallocManaged") +
               ": " + cudaGetErrorString(e);
        if (p != nullptr) cudaFree(p);
        return nullptr;
    }
    return p;
}

void gpu_free(const std::string &, void *p) {
    if (p != nullptr) cudaFree(p);
}

#else

bool mem_type_usable(const std::string &type, std::string *why) {
    if (type == "host") return true;
    *why = "this p2p_perftest was built without CUDA (configure found no "
           "CUDA runtime)";
    return false;
}

void *gpu_alloc(const std::string &, size_t, std::string *why) {
    *why = "built without CUDA";
    return nullptr;
}

void gpu_free(const std::string &, void *) {}

#endif

} // namespace perftest
