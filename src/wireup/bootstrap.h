/*
 * Bootstrap interface: how the processes of a job find each other.
 * Shaped like ucx_perftest's rte ops: identity, allgather of byte blobs,
 * barrier, abort. One implementation per file (tcp_bootstrap.cc,
 * single_bootstrap.cc, later pmix_bootstrap.cc). Core code sees only this.
 */
#ifndef UCXP2P_WIREUP_BOOTSTRAP_H
#define UCXP2P_WIREUP_BOOTSTRAP_H

#include <ucxp2p/p2p.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ucxp2p {

class Bootstrap {
public:
    virtual ~Bootstrap() = default;

    virtual uint32_t rank() const = 0;
    virtual uint32_t size() const = 0;
    virtual uint32_t local_rank() const = 0;
    virtual uint32_t local_size() const = 0;
    virtual const char *name() const = 0;

    /**
     * Every rank contributes `mine` (sizes may differ per rank); on success
     * all_p[r] holds rank r's blob on every rank. Collective.
     * Returns P2P_ERR_BOOTSTRAP / P2P_ERR_TIMEOUT on failure (logged).
     */
    virtual p2p_status_t allgather(const std::vector<uint8_t> &mine,
                                   std::vector<std::vector<uint8_t>> *all_p) = 0;

    /** Collective barrier. */
    virtual p2p_status_t barrier() = 0;

    /** Best effort: tell the other ranks to give up (e.g. on fatal error). */
    virtual void abort(const char *reason) = 0;
};

/**
 * Create the bootstrap of the requested type (a p2p_bootstrap_type_t, taken
 * as int: a C caller may pass any value) from the environment.
 * P2P_BOOTSTRAP_AUTO follows P2P_BOOTSTRAP (env); its auto picks TCP when
 * RANK, WORLD_SIZE and MASTER_ADDR are set, else PMIx under a PMIx launcher,
 * else TCP when RANK and WORLD_SIZE are, else single (only one of the two:
 * P2P_ERR_INVALID_PARAM). Returns the status; *out set only on success.
 */
p2p_status_t bootstrap_create(int type, std::unique_ptr<Bootstrap> *out);

/** P2P_BOOTSTRAP_TIMEOUT_MS, read the same way by every bootstrap:
 *  P2P_ERR_INVALID_PARAM (logged) when malformed, 0 or above a day. */
p2p_status_t bootstrap_timeout_ms(uint64_t *out);
/** Its default (the config table's), for a single-process run, which
 *  waits for nobody and ignores the variable. */
constexpr uint64_t kDefaultBootstrapTimeoutMs = 60000;

/** P2P_BOOTSTRAP_MAX_MSG, the same bound for every bootstrap: 1 to 2^31
 *  bytes (PMIx sizes are 32-bit); INVALID_PARAM (logged) outside it. */
p2p_status_t bootstrap_max_msg(uint64_t *out);

/** Implementations (one file each). */
p2p_status_t tcp_bootstrap_create(std::unique_ptr<Bootstrap> *out);
/** P2P_ERR_INVALID_PARAM when P2P_BOOTSTRAP_MAX_MSG is malformed. */
p2p_status_t single_bootstrap_create(std::unique_ptr<Bootstrap> *out);

/** True when the env/TCP variables (RANK & WORLD_SIZE or P2P_RANK &
 *  P2P_WORLD_SIZE) are present. */
bool tcp_bootstrap_env_present();

} // namespace ucxp2p

#endif
