/*
 * The registries behind the public handles, shared by the C entry points:
 * api.cc (contexts, communicators, posts and completions), api_mem.cc
 * (registrations) and api_bootstrap.cc (bootstraps).
 */
#ifndef UCXP2P_CORE_API_HANDLES_H
#define UCXP2P_CORE_API_HANDLES_H

#include "core/comm.h"
#include "core/context.h"
#include "core/handles.h"
#include "core/mem.h"
#include "wireup/bootstrap.h"

#include <ucxp2p/p2p.h>

#include <memory>
#include <mutex>

namespace ucxp2p {
namespace api {

struct ContextEntry {
    std::shared_ptr<Context> ctx;
    uint64_t id = 0;
};

struct BootstrapEntry {
    std::unique_ptr<Bootstrap> bs;
    std::mutex mu;  // bootstrap calls are made one at a time
    /** Fixed at creation: a query never waits for a collective in progress. */
    p2p_bootstrap_info_t info{};
};

struct CommEntry {
    std::unique_ptr<Comm> comm;
};

struct MemEntry {
    std::shared_ptr<Context> ctx;
    Mem mem;
};

// Never destroyed (api_handles.cc): objects the application did not release
// before exit() are left to the OS.
extern Registry<ContextEntry> &g_contexts;
extern Registry<BootstrapEntry> &g_bootstraps;
extern Registry<CommEntry> &g_comms;
extern Registry<MemEntry> &g_mems;

/** Register bs as a bootstrap handle (p2p_bootstrap_create; tests whose
 *  ranks are threads register jobs of their own). nullptr when every slot
 *  is taken. Throws std::bad_alloc. */
p2p_bootstrap_h bootstrap_handle(std::unique_ptr<Bootstrap> bs);

/** Stop the progress threads of contexts never destroyed (registered with
 *  atexit by the first p2p_context_create). */
void stop_all_progress();

/** Release a registration removed from g_mems: unmapped under its
 *  context's worker lock, or left mapped if operations still use it. */
void destroy_mem(Registry<MemEntry>::Ref &ref);

}  // namespace api
}  // namespace ucxp2p

#endif
