/*
 * LD_PRELOAD fault injection for perftest_test: wraps p2p_comm_send and
 * p2p_comm_recv on the rank named by FAULT_RANK (the launcher's RANK) so
 * that tests can show p2p_perftest notices data it did not get.
 * FAULT=half sends the first half of each payload; FAULT=corrupt flips the
 * payload's first byte before sending it; FAULT=fail_big fails every
 * payload send over 4 KiB (a point that cannot run, after smaller ones that
 * could); FAULT=misplace receives a payload one slot of its size further on
 * (a receive that leaves its own buffer as it was). FAULT_NTH=N limits the
 * fault to the rank's Nth payload send (or receive, for misplace), from 1.
 * Payloads are perftest's data messages: tensor ids below its control ids
 * (ack, report, go: the top three of each point's range).
 */
#include <ucxp2p/p2p.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

namespace {

using SendFn = p2p_status_t (*)(p2p_comm_h, uint32_t, uint32_t, const void *, size_t,
                                p2p_mem_h, void *);
using RecvFn = p2p_status_t (*)(p2p_comm_h, uint32_t, uint32_t, void *, size_t, p2p_mem_h,
                                void *);

bool this_rank_faults() {
    const char *want = std::getenv("FAULT_RANK");
    const char *rank = std::getenv("RANK");
    return want != nullptr && rank != nullptr && std::strcmp(want, rank) == 0;
}

bool is_payload(uint32_t tensor_id, size_t length) {
    return (tensor_id & 0xfffffu) < 0xffffdu && length >= 2;
}

/** Whether the fault hits this payload: counts the calls of one kind
 *  (sends or receives) against FAULT_NTH; every one without it. */
bool hits(std::atomic<unsigned long> *calls) {
    static const char *const nth_s = std::getenv("FAULT_NTH");
    static const unsigned long nth = nth_s ? std::strtoul(nth_s, nullptr, 10) : 0;
    const unsigned long k = calls->fetch_add(1) + 1;
    return nth == 0 || k == nth;
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
    static std::atomic<unsigned long> sends{0};
    if (faults && mode != nullptr && is_payload(tensor_id, length) && hits(&sends)) {
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

extern "C" p2p_status_t p2p_comm_recv(p2p_comm_h comm, uint32_t peer, uint32_t tensor_id,
                                      void *buffer, size_t length, p2p_mem_h mem,
                                      void *user_context) {
    static const RecvFn real = reinterpret_cast<RecvFn>(dlsym(RTLD_NEXT, "p2p_comm_recv"));
    static const bool faults = this_rank_faults();
    static const char *const mode = std::getenv("FAULT");
    if (real == nullptr) {
        return P2P_ERR_TRANSPORT;
    }
    static std::atomic<unsigned long> recvs{0};
    if (faults && mode != nullptr && std::strcmp(mode, "misplace") == 0 &&
        is_payload(tensor_id, length) && hits(&recvs)) {
        buffer = static_cast<char *>(buffer) + length;
    }
    return real(comm, peer, tensor_id, buffer, length, mem, user_context);
}
