/*
 * Settings of the TCP bootstrap, read from the environment the way torchrun
 * and RunAI set it (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE), each overridden by its P2P_* twin. An empty variable
 * counts as unset.
 */
#ifndef UCXP2P_WIREUP_TCP_ENV_H
#define UCXP2P_WIREUP_TCP_ENV_H

#include <ucxp2p/p2p.h>

#include <netinet/in.h>

#include <cstdint>
#include <string>

namespace ucxp2p {

struct TcpConfig {
    uint32_t rank = 0;
    uint32_t size = 0;
    bool has_local_rank = false;
    uint32_t local_rank = 0;
    bool has_local_size = false;
    uint32_t local_size = 0;

    std::string master_addr;   /**< host name or dotted IPv4 */
    bool has_port = false;     /**< false: scan [port_lo, port_hi] */
    uint16_t port = 0;
    uint16_t port_lo = 0;
    uint16_t port_hi = 0;

    std::string if_ip;         /**< P2P_IF_IP (validated), may be empty */
    std::string ifname;        /**< P2P_IFNAME, may be empty */

    std::string token;
    std::string host;          /**< groups ranks into hosts (local rank) */
    uint64_t timeout_ms = 0;
    uint64_t max_msg = 0;

    /** Extra time a rank > 0 waits past its own deadline for rank 0's
     *  verdict, so that rank 0 (which knows who is missing) reports first. */
    uint64_t grace_ms() const {
        return timeout_ms / 4 < 1000 ? timeout_ms / 4 : 1000;
    }

    /** "addr:port" or "addr:[lo-hi]" for log lines. */
    std::string master_string() const;
};

/** Parse every setting. P2P_ERR_INVALID_PARAM (logged, naming the variable)
 *  for a malformed or inconsistent value. */
p2p_status_t tcp_config_parse(TcpConfig *out);

/** The P2P_* value if non-empty, else the fallback variable's (may be
 *  nullptr), else "". *from names the variable used. */
std::string tcp_env_value(const char *p2p_name, const char *fallback,
                          const char **from);

/** Resolve the address rank 0 listens on (P2P_IF_IP, else the IPv4 of
 *  P2P_IFNAME, else any). P2P_ERR_INVALID_PARAM when the interface has none. */
p2p_status_t tcp_listen_addr(const TcpConfig &cfg, in_addr *out);

} // namespace ucxp2p

#endif
