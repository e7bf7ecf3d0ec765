/*
 * LD_PRELOAD fault injection for perftest_test: wraps p2p_comm_send on the
 * rank named by FAULT_RANK (the launcher's RANK) so that tests can show
 * p2p_perftest notices data it did not get. FAULT=half sends the first half
 * of each payload; FAULT=corrupt flips the payload's first byte before
 * sending it; FAULT=fail_big fails every payload send over 4 KiB (a point
 * that cannot run, after smaller ones that could). Payloads are perftest's data messages: tensor ids below its
 * control ids (ack, report, go: the top three of each point's range).
 */
#include <ucxp2p/p2p.h>

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

namespace {

using SendFn = p2p_status_t (*)(p2p_comm_h, uint32_t, uint32_t, const void *, size_t,
                                p2p_mem_h, void *);

bool this_rank_faults() {
    const char *want = std::getenv("FAULT_RANK");
    const char *rank = std::getenv("RANK");
    return want != nullptr && rank != nullptr && std::strcmp(want, rank) == 0;
}

} // namespace

extern "C" p2p_status_t p2p_comm_send(p2p_comm_h comm, uint32_t peer, uint32_t tensor_id,
                                      const void *buffer, size_t length, p2p_mem_h mem,
                                      void *user_context) {
    static const SendFn real = reinterpret_cast<SendFn>(dlsym(RTLD_NEXT, "p2p_comm_send"));
    static const bool faults = this_rank_faults();
    static const char *const mode = std::getenv("FAULT");
    if (real == nullptr) {
        return P2P_ERR_TRANSPORT;
    }
    const bool payload = (tensor_id & 0xfffffu) < 0xffffdu && length >= 2;
    if (faults && payload && mode != nullptr) {
        if (std::strcmp(mode, "half") == 0) {
            length /= 2;
        } else if (std::strcmp(mode, "fail_big") == 0 && length > 4096) {
            return P2P_ERR_TRANSPORT;
        } else if (std::strcmp(mode, "corrupt") == 0) {
            static_cast<unsigned char *>(const_cast<void *>(buffer))[0] ^= 0xff;
        }
    }
    return real(comm, peer, tensor_id, buffer, length, mem, user_context);
}
