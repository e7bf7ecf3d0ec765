/*
 * Stand-in for SMDDP's libsmddpcpp.so: the vendor symbols, each aborting.
 * herring_app links against it exactly as a real application links the
 * vendor library; when LD_PRELOAD=libucxp2p_herring.so wins, none of these
 * runs. If one does, the preload did not take effect and the test dies.
 */
#include "vendor_herring.hpp"

#include <cstdio>
#include <cstdlib>

namespace {

[[noreturn]] void stub_called(const char *fn) {
    std::fprintf(stderr, "smddp stub: %s called: libucxp2p_herring.so was not preloaded\n",
                 fn);
    std::abort();
}

} // namespace

void *herringP2PRegisterMemory(void *, int) { stub_called(__func__); }
CompletionEntry herringP2PReadCompletion() { stub_called(__func__); }
CompletionEntry herringP2PSendCompletion() { stub_called(__func__); }
void herringP2PSend(int, const void *, void *, uint64_t, int, const void *, uint32_t) {
    stub_called(__func__);
}
void herringP2PRecv(int, void *, void *, uint64_t, int, const void *, uint32_t) {
    stub_called(__func__);
}
void herringP2PGetRDMADevices(std::vector<std::string> &) { stub_called(__func__); }
void herringP2PInitialize() { stub_called(__func__); }
void herringP2PShutdown() { stub_called(__func__); }
int herringLocalDevice() { stub_called(__func__); }
