/*
 * UCX in a process made by fork() while its parent ran UCX's async thread.
 *
 * UCX 1.13 starts one async thread per process, on first need, and counts
 * its users; it has no fork handler. A child inherits the count and the
 * thread's state but not the thread, and its epoll instance is the
 * parent's: every UCX event handler the child adds goes to a thread that
 * is not there (or, through the shared epoll, to the parent's). The tcp
 * transport accepts its connections from that thread, the InfiniBand ones
 * take device events and ud timers there, so a child's context over them
 * connects to nothing and every operation waits forever (measured: a
 * 10-byte send to itself over UCX_TLS=tcp,self never completes). Shared
 * memory, cma and self add no handler that matters and work.
 *
 * So ucxp2p watches for that thread at every fork (a thread named "async"
 * -- UCX's name for it -- in the forking process, UCX used by ucxp2p or by
 * anything else, MPI included) and, in such a child and its descendants,
 * limits a new context to shared memory when the user named no
 * transports, and refuses one whose UCX_TLS allows another.
 */
#ifndef UCXP2P_CORE_FORK_UCX_H
#define UCXP2P_CORE_FORK_UCX_H

#include <ucxp2p/p2p.h>

#include <ucp/api/ucp.h>

namespace ucxp2p {

/** This process descends, through fork(), from one whose UCX async thread
 *  was running at the fork. */
bool ucx_async_inherited();

/** The transports a context in such a process may use, applied to cfg
 *  (UCX_TLS=shm,self when the user set no UCX_TLS; logged at warn, as
 *  peers on other hosts become unreachable), or P2P_ERR_UNSUPPORTED
 *  (logged) when the user's UCX_TLS allows a transport that needs the
 *  async thread. P2P_OK and nothing done elsewhere. */
p2p_status_t fork_limit_transports(ucp_config_t *cfg);

namespace fork_ucx_detail {
/** Whether a thread of this process is named "async" (/proc/self/task). */
bool async_thread_running();
}

} // namespace ucxp2p

#endif
