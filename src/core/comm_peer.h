/*
 * What a communicator knows about one peer rank (Comm::peers_, one per
 * rank): its endpoint, its DATA tags, why it failed or left, and the
 * single-copy and tcp paths to it. Fields are read and written under the
 * worker lock unless their comment says otherwise.
 */
#ifndef UCXP2P_CORE_COMM_PEER_H
#define UCXP2P_CORE_COMM_PEER_H

#include "core/path_choice.h"
#include "core/shm_region.h"
#include "core/tcp_bulk.h"

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace ucxp2p {

struct CommPeer {
    ucp_ep_h ep = nullptr;
    uint64_t data_tag0 = 0;  // make_tag(the comm's tag base, its rank, 0): its DATA tags
    // Its endpoint once it said goodbye: kept open (closing it could cut
    // off what it sent last) but no longer handed out, so posts naming
    // it fail (connect_ep sees failed); closed at destroy.
    ucp_ep_h parked_ep = nullptr;
    bool failed = false;    // no new operations: dead, unreachable or left
    // failed, for a split send's write outside the worker lock: a peer
    // that left or failed wants nothing written into its memory now.
    std::atomic<bool> gone{false};
    bool ep_error = false;  // UCX reported its endpoint failed
    bool cma = false;       // same host or tcp bulk: single copy possible
    bool tcp = false;       // ... with the payload read over tcp (bulk)
    bool cma_off = false;   // the peer answered FALLBACK once
    bool cma_refused = false;  // we could not read the peer once
    bool cma_write_off = false;  // we could not write the peer once
    bool choose = false;    // P2P_CMA_THRESH / P2P_TCP_BULK_THRESH=auto:
                            // a chooser decides sizes in its band
    bool left = false;      // said goodbye (shut down): see on_peer_left
    bool watcher = false;   // said hello: see on_peer_hello
    bool closed_at_shutdown = false;  // close_sending_eps closed its endpoint
    bool peer_closed = false;  // its closing note came: ours need not linger
    bool map_refused = false;  // its regions cannot be mapped here
    // When its failure was last handled (or a receive of a message it
    // sent before dying was posted since): abandon_stuck's clock. 0: none.
    int64_t dead_since_ns = 0;
    uint8_t shut_ops = 0;   // shutdown's scratch: which ops name it
    uint32_t pid = 0;
    bool pid_visible = false;  // pid names its process here (same_pid_space)
    int32_t epoch_fd = -1;  // its epoch table (cma::Identity)
    uint64_t epoch_ino = 0;
    shm::PeerMaps maps;     // its p2p_mem_alloc regions mapped here
                            // (pinned by copies reading them unlocked)
    // choose: the path per size, created at the first send in the band
    // (most peers of a large job never get one).
    std::unique_ptr<PathChooser> chooser;
    // tcp: reads its payloads (core/tcp_bulk.h); set at create, used
    // by copies outside the worker lock, which shutdown waits for.
    std::unique_ptr<tcpb::Client> bulk;
    std::atomic<bool> bulk_failed{false};  // a read failed: no more (Comm::pull)
};

} // namespace ucxp2p

#endif
