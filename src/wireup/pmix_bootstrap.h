/*
 * PMIx bootstrap: rank, size and the collectives come from the PMIx server
 * of the launcher (srun --mpi=pmix, OpenMPI's mpirun/prterun).
 *
 * allgather: PMIx_Put of a key unique to the collective, Commit, Fence, then
 * PMIx_Get of every rank's key. P2P_PMIX_MODEX selects how the data travels:
 *   collect  Fence with PMIX_COLLECT_DATA: every server receives every
 *            rank's blob during the fence; the Gets are local.
 *   direct   Fence without data (a barrier); each Get asks the server of
 *            the owning rank on demand (PMIx "direct modex").
 * barrier: PMIx_Fence without data.
 *
 * PMIx_Init/PMIx_Finalize are reference counted by the PMIx client library:
 * every bootstrap calls PMIx_Init once and PMIx_Finalize once (only after
 * its own Init succeeded), so it co-exists with MPI initialised before or
 * after it. See docs/WIREUP.md.
 */
#ifndef UCXP2P_WIREUP_PMIX_BOOTSTRAP_H
#define UCXP2P_WIREUP_PMIX_BOOTSTRAP_H

#include "wireup/bootstrap.h"

#include <memory>

namespace ucxp2p {

/**
 * True when this process was started by a PMIx server (PMIX_RANK,
 * PMIX_NAMESPACE or a PMIX_SERVER_URI* variable is in the environment).
 * Cheap: reads the environment only, never calls PMIx_Init. Always false in
 * a build without PMIx.
 */
bool pmix_bootstrap_launched();

/**
 * Connect to the local PMIx server and read rank/size/local rank/local size.
 * Errors: P2P_ERR_UNSUPPORTED (built without PMIx, or PMIx_Init failed, e.g.
 * PMIX_ERR_UNREACH outside a launcher; logged), P2P_ERR_INVALID_PARAM
 * (bad P2P_PMIX_MODEX / P2P_BOOTSTRAP_TIMEOUT_MS), P2P_ERR_BOOTSTRAP (the
 * server did not provide the job's size or this rank's local rank).
 * *out is set only on success.
 */
p2p_status_t pmix_bootstrap_create(std::unique_ptr<Bootstrap> *out);

} // namespace ucxp2p

#endif
