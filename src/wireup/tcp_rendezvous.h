/*
 * Rendezvous of the TCP bootstrap: rank 0 listens and admits exactly one
 * authenticated connection per other rank (hello: magic, version, job token,
 * rank, world size, host name); the others connect with retries. Ends when
 * rank 0 has sent every rank the roster (host names by rank).
 */
#ifndef UCXP2P_WIREUP_TCP_RENDEZVOUS_H
#define UCXP2P_WIREUP_TCP_RENDEZVOUS_H

#include "wireup/tcp_env.h"
#include "wireup/tcp_socket.h"

#include <ucxp2p/p2p.h>

#include <string>
#include <vector>

namespace ucxp2p {

/** How long a new connection may take to send its hello (capped by the
 *  bootstrap deadline), and how long a client scanning a port range waits
 *  for a welcome before trying the next port. */
constexpr uint64_t kTcpHelloTimeoutMs = 2000;

struct TcpRendezvous {
    tcp::Fd root;                    /**< ranks > 0: connection to rank 0 */
    std::vector<tcp::Fd> peers;      /**< rank 0: index = rank, [0] unused */
    std::vector<std::string> hosts;  /**< index = rank */
};

/** Rank 0. P2P_ERR_TIMEOUT when ranks are missing at the deadline (the ones
 *  that joined are told), P2P_ERR_BOOTSTRAP when the port cannot be bound. */
p2p_status_t tcp_rendezvous_root(const TcpConfig &cfg, TcpRendezvous *out);

/** Ranks > 0. P2P_ERR_TIMEOUT when rank 0 is unreachable until the deadline,
 *  P2P_ERR_BOOTSTRAP when rank 0 rejects us (fixed port) or aborts. */
p2p_status_t tcp_rendezvous_client(const TcpConfig &cfg, TcpRendezvous *out);

/** "1,2,5" (at most 16 listed, then "... (N in all)"). */
std::string tcp_rank_list(const std::vector<uint32_t> &ranks);

} // namespace ucxp2p

#endif
