/*
 * herringP2PGetRDMADevices for the libstdc++ string ABI selected by
 * _GLIBCXX_USE_CXX11_ABI=0 and =1 (this file is compiled twice, once per
 * libstdc++ string ABI, by plugins/herring/Makefile.include): an
 * application built with either ABI finds its own mangled symbol. Only
 * const char* crosses into the rest of the shim.
 */
#include "herring_internal.h"

#if !defined(_GLIBCXX_USE_CXX11_ABI)
#error "build this file with -D_GLIBCXX_USE_CXX11_ABI=0 and with =1"
#endif

void herringP2PGetRDMADevices(std::vector<std::string> &devices) {
    try {
        devices.clear();
        herring::list_rdma_devices(
            nullptr,
            [](const char *name, void *arg) {
                static_cast<std::vector<std::string> *>(arg)->emplace_back(name);
            },
            &devices);
    } catch (...) {
        herring::log(P2P_LOG_ERROR, "rdma devices: out of memory");
    }
}
