/*
 * What a UCX_TLS value lets UCX use, read the way UCX (1.13) reads it: a
 * comma list of transports and aliases, "all", or "^list" for everything
 * but the list; a ":aux" suffix still names the transport. "mm" = posix,
 * sysv, xpmem; "sm" and "shm" = those plus knem and cma. One parser for
 * every decision the library takes from UCX_TLS
 * (single copy, shared-memory error handling, rails and tcp lanes). The
 * InfiniBand aliases (ib, rc, ud, dc and their _v/_x forms) expand as in
 * UCX 1.13 too.
 */
#ifndef UCXP2P_CORE_UCX_TLS_H
#define UCXP2P_CORE_UCX_TLS_H

#include <initializer_list>
#include <set>
#include <string>

namespace ucxp2p {

class UcxTls {
public:
    /** value: the UCX_TLS text; nullptr or "" (unset) allows everything. */
    explicit UcxTls(const char *value);

    /** The environment's UCX_TLS. */
    static UcxTls from_environment();

    /** UCX may use the transport `tl` ("posix", "cma", "tcp"). */
    bool allows(const std::string &tl) const;

    /** UCX may use a shared-memory transport that carries active messages
     *  (posix, sysv or xpmem) -- the lanes that compete with network ones. */
    bool allows_shm_am() const;

    /** UCX may use an rdma transport (verbs or mlx5 rc/ud/dc, EFA's srd):
     *  without one, rdma rails are of no use to it. */
    bool allows_rdma() const;

    /** Every transport UCX may use is one of tls ("all" and "^list" never
     *  are: they allow transports of UCX's choosing). */
    bool allows_only(std::initializer_list<const char *> tls) const;

private:
    bool all_ = true;
    bool exclude_ = false;
    std::set<std::string> named_;  /**< after alias expansion */
};

} // namespace ucxp2p

#endif
