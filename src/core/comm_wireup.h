/*
 * A new communicator's exchange over its bootstrap: every rank's worker
 * address and host identity, and a communicator id free on every rank.
 *
 * Ids and concurrent creates: p2p_comm_create may run on one context from
 * several threads at once, each over its own bootstrap. Each rank
 * advertises the ids free on it and the ranks take the lowest free on all.
 * For that choice to hold on every rank, a create reserves the ids it
 * advertises until the choice is made: a concurrent create on the same
 * context sees them taken, so two creates never choose the same id, and a
 * choice never fails on one rank while it holds on the others. A create
 * that finds no id free on every rank while another create held ids on
 * some rank (it says so in its blob) exchanges again after a random pause,
 * until the ids come free or P2P_BOOTSTRAP_TIMEOUT_MS passes on a rank;
 * every rank decides from the same blobs, so all retry or all fail.
 */
#ifndef UCXP2P_CORE_COMM_WIREUP_H
#define UCXP2P_CORE_COMM_WIREUP_H

#include "core/cma.h"
#include "core/context.h"
#include "core/tcp_bulk.h"

#include <ucxp2p/p2p.h>

#include <cstdint>
#include <vector>

namespace ucxp2p {

class Bootstrap;

/** What the exchange agreed on. */
struct Wireup {
    std::vector<cma::Identity> hosts;          // each rank's host identity
    std::vector<tcpb::Address> bulk;           // each rank's tcp bulk server
    std::vector<std::vector<uint8_t>> addrs;   // each rank's worker address
    unsigned id = 0;                           // claimed on this context
    uint32_t gen = 0;                          // the id's generation
    uint32_t rounds = 0;                       // exchanges it took
};

/**
 * Exchange with every rank of bs (rank `rank` of `size`, already checked)
 * and claim the agreed id on ctx (the caller releases it). host: this
 * rank's identity as the peers should see it; bulk: its tcp bulk server
 * (port 0: none).
 * Errors: P2P_ERR_BOOTSTRAP (exchange failed, malformed or other-version
 * blob), P2P_ERR_BUSY (no id free on every rank, also after other creates
 * on a rank held them for P2P_BOOTSTRAP_TIMEOUT_MS), P2P_ERR_INVALID_PARAM
 * (bad P2P_BOOTSTRAP_TIMEOUT_MS), P2P_ERR_TIMEOUT, P2P_ERR_NO_MEMORY.
 */
p2p_status_t comm_wireup(Context &ctx, Bootstrap &bs, uint32_t rank, uint32_t size,
                         const cma::Identity &host, const tcpb::Address &bulk,
                         Wireup *out);

} // namespace ucxp2p

#endif
