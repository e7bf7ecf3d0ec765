/*
 * The exported herring* functions (vendor signatures, C++ linkage): thin
 * wrappers over herring:: internals. No exception leaves them.
 * herringP2PGetRDMADevices lives in herring_devices_abi{0,1}.cc, one per
 * libstdc++ string ABI.
 */
#include "herring_internal.h"

namespace {

CompletionEntry failed_entry() {
    CompletionEntry e;
    e.context = nullptr;
    e.dst_rank = 0xffffffffu;
    e.tensor_id = 0xffffffffu;
    e.error_code = RDMA_READ_FAIL;
    return e;
}

} // namespace

void herringP2PInitialize() {
    try {
        herring::initialize();
    } catch (...) {
        herring::log(P2P_LOG_ERROR, "initialize: unexpected exception");
    }
}

void herringP2PShutdown() {
    try {
        herring::shutdown();
    } catch (...) {
        herring::log(P2P_LOG_ERROR, "shutdown: unexpected exception");
    }
}

void *herringP2PRegisterMemory(void *buff, int buff_len) {
    try {
        return herring::register_memory(buff, buff_len);
    } catch (...) {
        herring::log(P2P_LOG_ERROR, "register memory: unexpected exception");
        return nullptr;
    }
}

void herringP2PSend(int rank, const void *buffer, void *mr, uint64_t length, int tensor_id,
                    const void *context, uint32_t /*imm_data*/) {
    try {
        herring::post(P2P_QUEUE_SEND, rank, const_cast<void *>(buffer), mr, length, tensor_id,
                      context);
    } catch (...) {
        herring::log(P2P_LOG_ERROR, "send: unexpected exception; no completion entry");
    }
}

void herringP2PRecv(int rank, void *buffer, void *mr, uint64_t length, int tensor_id,
                    const void *context, uint32_t /*imm_data*/) {
    try {
        herring::post(P2P_QUEUE_RECV, rank, buffer, mr, length, tensor_id, context);
    } catch (...) {
        herring::log(P2P_LOG_ERROR, "recv: unexpected exception; no completion entry");
    }
}

CompletionEntry herringP2PSendCompletion() {
    try {
        return herring::pop_completion(P2P_QUEUE_SEND);
    } catch (...) {
        herring::log(P2P_LOG_ERROR, "send completion: unexpected exception");
        return failed_entry();
    }
}

CompletionEntry herringP2PReadCompletion() {
    try {
        return herring::pop_completion(P2P_QUEUE_RECV);
    } catch (...) {
        herring::log(P2P_LOG_ERROR, "read completion: unexpected exception");
        return failed_entry();
    }
}

int herringLocalDevice() {
    try {
        uint32_t local = herring::local_rank();
        int devices = herring::cuda_device_count();
        return static_cast<int>(devices > 0 ? local % static_cast<uint32_t>(devices) : local);
    } catch (...) {
        herring::log(P2P_LOG_ERROR, "local device: unexpected exception");
        return 0;
    }
}
