/*
 * When large payloads take ucxp2p's own tcp path (core/tcp_bulk.h): the
 * P2P_TCP_BULK* settings and the decision this process publishes to its
 * peers at p2p_comm_create.
 */
#ifndef UCXP2P_CORE_TCP_BULK_CONFIG_H
#define UCXP2P_CORE_TCP_BULK_CONFIG_H

#include <ucxp2p/p2p.h>

#include <cstddef>

namespace ucxp2p {
namespace tcpb {

/** P2P_ERR_INVALID_PARAM (logged) when P2P_TCP_BULK, P2P_TCP_BULK_THRESH,
 *  P2P_TCP_BULK_LANES or P2P_TCP_BULK_SPIN_US is malformed: context
 *  creation checks them. */
p2p_status_t check_settings();

/** Which peers this process reads payloads from over tcp (read once), as
 *  published in tcpb::Address::scope; 0: none, no Server. on: every peer
 *  single copy does not serve; auto: peers UCX reaches over tcp -- on this
 *  host when UCX_TLS allows tcp and no shared-memory transport, on other
 *  hosts when it allows tcp and either no rdma transport or the host has
 *  no RDMA device; none when UCX_NET_DEVICES names several tcp interfaces
 *  (UCX stripes over them). A pair of ranks uses it where both scopes
 *  agree. */
constexpr uint32_t kSameHost = 1, kOtherHosts = 2;
uint32_t scope();

/** P2P_TCP_BULK_THRESH is auto (the default, read once): from 256 KiB the
 *  sender measures both paths per size class (core/path_choice.h). */
bool threshold_auto();

/** Smallest message sent on the tcp path when P2P_TCP_BULK_THRESH is a
 *  number (read once); 262144 when it is auto. */
size_t threshold();

/** Connections one message is split over (P2P_TCP_BULK_LANES, read once). */
unsigned lanes();

/** Microseconds the path's threads poll before they sleep
 *  (P2P_TCP_BULK_SPIN_US, read once). */
unsigned spin_us();

}  // namespace tcpb
}  // namespace ucxp2p

#endif
