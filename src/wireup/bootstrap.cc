/*
 * bootstrap_create: pick the implementation (P2P_BOOTSTRAP for AUTO) and
 * turn every failure into a status (nothing is thrown out of here).
 */
#include "wireup/bootstrap.h"

#include "core/config.h"
#include "core/log.h"
#include "wireup/pmix_bootstrap.h"
#include "wireup/tcp_env.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <strings.h>

namespace ucxp2p {

namespace {

bool env_set(const char *p2p_name, const char *fallback) {
    const char *from = nullptr;
    return !tcp_env_value(p2p_name, fallback, &from).empty();
}

/** A launcher started this process as one of several (its task count
 *  above 1) although neither PMIx nor the torchrun variables are here
 *  (MPICH/Intel MPI Hydra, a build without PMIx under mpirun, srun without
 *  --mpi=pmix -- Slurm's default MpiDefault=none): falling back to a single
 *  process would turn the job into independent rank-0 processes that each
 *  "succeed" alone. Logs why. SLURM_STEP_NUM_TASKS is set for srun's tasks
 *  only, not in a batch script (SLURM_NTASKS is, for the allocation). */
bool launched_as_many() {
    for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
        const char *v = std::getenv(name);
        if (v != nullptr && std::strtoul(v, nullptr, 10) > 1) {
            P2P_LOG(P2P_LOG_ERROR, "bootstrap: %s=%s: launched as one of several "
                    "ranks, but no PMIx server is visible (srun needs --mpi=pmix; "
                    "or this build has no PMIx); set MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE "
                    "for the tcp/env bootstrap, or P2P_BOOTSTRAP=single to run "
                    "each process alone", name, v);
            return true;
        }
    }
    return false;
}

/** P2P_BOOTSTRAP=auto: the innermost launcher. The torchrun-style
 *  environment set in full (a torchrun worker inside an srun or mpirun
 *  task, which PMIx would see as that task's rank, once per worker), else
 *  a PMIx launcher (srun --mpi=pmix, mpirun), else that environment without
 *  MASTER_ADDR (127.0.0.1), else a single process. */
p2p_status_t pick_auto(p2p_bootstrap_type_t *type) {
    const bool rank = env_set("P2P_RANK", "RANK");
    const bool size = env_set("P2P_WORLD_SIZE", "WORLD_SIZE");
    if (rank != size) {
        // Half a torchrun environment is a mistake, not a one-rank job.
        P2P_LOG(P2P_LOG_ERROR, "bootstrap: %s is set but %s is not: set "
                "both for the tcp/env bootstrap, or neither",
                rank ? "RANK (or P2P_RANK)" : "WORLD_SIZE (or P2P_WORLD_SIZE)",
                rank ? "WORLD_SIZE (or P2P_WORLD_SIZE)" : "RANK (or P2P_RANK)");
        return P2P_ERR_INVALID_PARAM;
    }
    if (!pmix_bootstrap_launched()) {
        if (!rank && launched_as_many()) return P2P_ERR_UNSUPPORTED;
        *type = rank ? P2P_BOOTSTRAP_TCP : P2P_BOOTSTRAP_SINGLE;
        return P2P_OK;
    }
    if (rank && env_set("P2P_MASTER_ADDR", "MASTER_ADDR")) {
        P2P_LOG(P2P_LOG_INFO, "bootstrap: RANK, WORLD_SIZE and MASTER_ADDR are "
                "set in a process a PMIx launcher started: using tcp/env, the "
                "innermost launcher (P2P_BOOTSTRAP=pmix for PMIx)");
        *type = P2P_BOOTSTRAP_TCP;
        return P2P_OK;
    }
    if (rank) {
        P2P_LOG(P2P_LOG_WARN, "bootstrap: RANK and WORLD_SIZE are set but "
                "MASTER_ADDR is not: using PMIx (set MASTER_ADDR or "
                "P2P_BOOTSTRAP=tcp for the tcp/env bootstrap)");
    }
    *type = P2P_BOOTSTRAP_PMIX;
    return P2P_OK;
}

p2p_status_t resolve_auto(p2p_bootstrap_type_t *type) {
    std::string v = config_get("P2P_BOOTSTRAP");
    if (v.empty() || strcasecmp(v.c_str(), "auto") == 0) {
        return pick_auto(type);
    } else if (strcasecmp(v.c_str(), "tcp") == 0) {
        *type = P2P_BOOTSTRAP_TCP;
    } else if (strcasecmp(v.c_str(), "single") == 0) {
        *type = P2P_BOOTSTRAP_SINGLE;
    } else if (strcasecmp(v.c_str(), "pmix") == 0) {
        *type = P2P_BOOTSTRAP_PMIX;
    } else {
        P2P_LOG(P2P_LOG_ERROR, "bootstrap: P2P_BOOTSTRAP='%s' is not one of "
                "auto, tcp, single, pmix", v.c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    return P2P_OK;
}

p2p_status_t create(int raw_type, std::unique_ptr<Bootstrap> *out) {
    p2p_bootstrap_type_t type = P2P_BOOTSTRAP_AUTO;
    switch (raw_type) {
    case P2P_BOOTSTRAP_AUTO: {
        p2p_status_t st = resolve_auto(&type);
        if (st != P2P_OK) {
            return st;
        }
        break;
    }
    case P2P_BOOTSTRAP_TCP:
    case P2P_BOOTSTRAP_SINGLE:
    case P2P_BOOTSTRAP_PMIX:
        type = static_cast<p2p_bootstrap_type_t>(raw_type);
        break;
    default:
        P2P_LOG(P2P_LOG_ERROR, "bootstrap: unknown type %d", raw_type);
        return P2P_ERR_INVALID_PARAM;
    }
    switch (type) {
    case P2P_BOOTSTRAP_TCP:
        return tcp_bootstrap_create(out);
    case P2P_BOOTSTRAP_SINGLE:
        return single_bootstrap_create(out);
    case P2P_BOOTSTRAP_PMIX:
    default:
        // P2P_ERR_UNSUPPORTED (logged) outside a PMIx launcher or in a
        // build without PMIx.
        return pmix_bootstrap_create(out);
    }
}

} // namespace

p2p_status_t bootstrap_timeout_ms(uint64_t *out) {
    const uint64_t kMaxTimeoutMs = 24ull * 3600 * 1000;
    // At least 1: PMIx would take 0 as "never", tcp as "already late".
    return config_get_u64("P2P_BOOTSTRAP_TIMEOUT_MS", kMaxTimeoutMs, out, 1);
}

p2p_status_t bootstrap_max_msg(uint64_t *out) {
    const uint64_t kMaxMsgLimit = 1ull << 31;
    return config_get_u64("P2P_BOOTSTRAP_MAX_MSG", kMaxMsgLimit, out, 1);
}

p2p_status_t bootstrap_create(int type, std::unique_ptr<Bootstrap> *out) {
    if (out == nullptr) {
        return P2P_ERR_INVALID_PARAM;
    }
    try {
        std::unique_ptr<Bootstrap> b;
        p2p_status_t st = create(type, &b);
        if (st == P2P_OK) {
            *out = std::move(b);
            // README "Launching": info names the bootstrap a process used.
            P2P_LOG(P2P_LOG_INFO, "bootstrap: %s, rank %u of %u", (*out)->name(),
                    (*out)->rank(), (*out)->size());
        }
        return st;
    } catch (const std::bad_alloc &) {
        P2P_LOG(P2P_LOG_ERROR, "bootstrap: out of memory");
        return P2P_ERR_NO_MEMORY;
    } catch (const std::exception &e) {
        P2P_LOG(P2P_LOG_ERROR, "bootstrap: %s", e.what());
        return P2P_ERR_BOOTSTRAP;
    }
}

} // namespace ucxp2p
