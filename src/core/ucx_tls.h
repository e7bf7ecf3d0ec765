/*
 * What a UCX_TLS value lets UCX use, read the way UCX (1.13) reads it: a
 * comma list of transports and aliases, "all", or "^list" for everything
 * but the list; a ":aux" suffix still names the transport. Aliases that
 * matter here: "mm" = posix, sysv, xpmem; "sm" and "shm" = those plus knem
 * and cma. One parser for every decision the library takes from UCX_TLS
 * (single copy, shared-memory error handling, tcp lanes).
 */
#ifndef UCXP2P_CORE_UCX_TLS_H
#define UCXP2P_CORE_UCX_TLS_H

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

private:
    bool all_ = true;
    bool exclude_ = false;
    std::set<std::string> named_;  /**< after alias expansion */
};

} // namespace ucxp2p

#endif
