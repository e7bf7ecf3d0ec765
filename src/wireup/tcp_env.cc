#include "wireup/tcp_env.h"

#include "core/config.h"
#include "core/log.h"
#include "wireup/bootstrap.h"
#include "wireup/tcp_proto.h"
#include "wireup/tcp_socket.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdlib>
#include <unistd.h>

namespace ucxp2p {

namespace {

constexpr uint64_t kMaxRanks = 1u << 18;  // tag layout: 18 rank bits

/** An IPv6 address, also spelled [addr] or with a %scope. */
bool is_ipv6(std::string a) {
    if (a.size() >= 2 && a.front() == '[' && a.back() == ']') a = a.substr(1, a.size() - 2);
    const size_t scope = a.find('%');
    if (scope != std::string::npos) a.resize(scope);
    in6_addr v6;
    return ::inet_pton(AF_INET6, a.c_str(), &v6) == 1;
}

bool parse_u64(const std::string &s, uint64_t max, uint64_t *out) {
    if (s.empty() || s[0] < '0' || s[0] > '9') {
        return false;
    }
    errno = 0;
    char *end = nullptr;
    unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v > max) {
        return false;
    }
    *out = v;
    return true;
}

/** Checks the unsigned value v of the variable named from, if present. */
p2p_status_t check_num(const char *from, const std::string &v, uint64_t min,
                       uint64_t max, bool *present, uint64_t *out) {
    *present = !v.empty();
    if (!*present) {
        return P2P_OK;
    }
    if (!parse_u64(v, max, out) || *out < min) {
        P2P_LOG(P2P_LOG_ERROR,
                "tcp bootstrap: %s='%s' is not an integer in [%llu, %llu]", from,
                v.c_str(), static_cast<unsigned long long>(min),
                static_cast<unsigned long long>(max));
        return P2P_ERR_INVALID_PARAM;
    }
    return P2P_OK;
}

/** Optional unsigned variable (P2P_* first, then fallback). */
p2p_status_t get_num(const char *p2p_name, const char *fallback, uint64_t min,
                     uint64_t max, bool *present, uint64_t *out) {
    const char *from = nullptr;
    std::string v = tcp_env_value(p2p_name, fallback, &from);
    return check_num(from, v, min, max, present, out);
}

/** A variable outside the P2P_* table; "" when unset. */
std::string plain_env(const char *name) {
    const char *v = std::getenv(name);
    return v != nullptr ? v : "";
}

/** The job token: P2P_JOB_TOKEN, else derived from what identifies the job
 *  to its launcher, with the rendezvous port when there is one
 *  (P2P_MASTER_PORT). MASTER_PORT is held by the launcher's (or PyTorch's)
 *  store for the job's lifetime, so no two live jobs with one master host
 *  share it; a fixed P2P_MASTER_PORT is held by rank 0 only while the job
 *  wires up, so alone it does not keep two jobs apart: one whose rank 0
 *  could not bind it would send its other ranks to the first job's rank 0.
 *  TORCHELASTIC_RUN_ID alone may be torchrun's default "none".
 *  *from: the variable named in errors. "" when nothing identifies it. */
p2p_status_t job_token(const TcpConfig &c, std::string *token, const char **from) {
    *from = "P2P_JOB_TOKEN";
    *token = config_get("P2P_JOB_TOKEN");
    if (!token->empty()) {
        return P2P_OK;
    }
    // Without the world size or the address, as spelled by each rank: a
    // rank that disagrees on those gets told so, not "token mismatch".
    bool has_master_port = false;
    uint64_t master_port = 0;
    const std::string mp = plain_env("MASTER_PORT");
    if (c.has_port) {
        // P2P_MASTER_PORT wins over torchrun's variables: a MASTER_PORT that
        // is not a port then just does not name the job.
        has_master_port = parse_u64(mp, 65535, &master_port) && master_port > 0;
    } else {
        p2p_status_t st = check_num("MASTER_PORT", mp, 1, 65535, &has_master_port,
                                    &master_port);
        if (st != P2P_OK) {
            return st;
        }
    }
    std::string name;  // what names the job, beside the rendezvous port
    if (has_master_port) {
        *from = "MASTER_PORT";
        name = "master-port:" + std::to_string(master_port);
    }
    const std::string run_id = plain_env("TORCHELASTIC_RUN_ID");
    if (!run_id.empty()) {
        *from = "TORCHELASTIC_RUN_ID";
        name += (name.empty() ? "" : ":") + std::string("torchrun:") + run_id + ":" +
                plain_env("TORCHELASTIC_RESTART_COUNT");
    }
    if (c.has_port) {
        *token = "ucxp2p:port:" + std::to_string(c.port) + (name.empty() ? "" : ":" + name);
    } else if (!name.empty()) {
        *token = "ucxp2p:" + name;
    }
    return P2P_OK;
}

p2p_status_t parse_range(const std::string &s, uint16_t *lo, uint16_t *hi) {
    size_t dash = s.find('-');
    uint64_t a = 0, b = 0;
    if (dash == std::string::npos || !parse_u64(s.substr(0, dash), 65535, &a) ||
        !parse_u64(s.substr(dash + 1), 65535, &b) || a == 0 || a > b) {
        P2P_LOG(P2P_LOG_ERROR,
                "tcp bootstrap: P2P_PORT_RANGE='%s' is not 'first-last' with "
                "1 <= first <= last <= 65535", s.c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    *lo = static_cast<uint16_t>(a);
    *hi = static_cast<uint16_t>(b);
    return P2P_OK;
}

std::string local_hostname() {
    char buf[256] = {0};
    if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') {
        return "localhost";
    }
    return buf;
}

} // namespace

std::string TcpConfig::master_string() const {
    if (has_port) {
        return master_addr + ":" + std::to_string(port);
    }
    return master_addr + ":[" + std::to_string(port_lo) + "-" +
           std::to_string(port_hi) + "]";
}

std::string tcp_env_value(const char *p2p_name, const char *fallback,
                          const char **from) {
    std::string v = config_get(p2p_name);
    *from = p2p_name;
    if (v.empty() && fallback != nullptr) {
        const char *env = std::getenv(fallback);
        if (env != nullptr && env[0] != '\0') {
            v = env;
            *from = fallback;
        }
    }
    return v;
}

p2p_status_t tcp_config_parse(TcpConfig *out) {
    TcpConfig c;
    bool present = false;
    uint64_t v = 0;
    p2p_status_t st;

    if ((st = get_num("P2P_WORLD_SIZE", "WORLD_SIZE", 1, kMaxRanks, &present,
                      &v)) != P2P_OK) {
        return st;
    }
    if (!present) {
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: WORLD_SIZE (or P2P_WORLD_SIZE) "
                               "is not set");
        return P2P_ERR_INVALID_PARAM;
    }
    c.size = static_cast<uint32_t>(v);
    if ((st = get_num("P2P_RANK", "RANK", 0, c.size - 1, &present, &v)) !=
        P2P_OK) {
        return st;
    }
    if (!present) {
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: RANK (or P2P_RANK) is not set");
        return P2P_ERR_INVALID_PARAM;
    }
    c.rank = static_cast<uint32_t>(v);

    if ((st = get_num("P2P_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", 1, c.size,
                      &c.has_local_size, &v)) != P2P_OK) {
        return st;
    }
    c.local_size = static_cast<uint32_t>(v);
    uint64_t local_max = c.has_local_size ? c.local_size - 1 : c.size - 1;
    if ((st = get_num("P2P_LOCAL_RANK", "LOCAL_RANK", 0, local_max,
                      &c.has_local_rank, &v)) != P2P_OK) {
        return st;
    }
    c.local_rank = static_cast<uint32_t>(v);

    const char *from = nullptr;
    c.master_addr = tcp_env_value("P2P_MASTER_ADDR", "MASTER_ADDR", &from);
    if (c.master_addr.empty()) {
        c.master_addr = "127.0.0.1";
    }
    if (c.size > 1 && is_ipv6(c.master_addr)) {
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: %s='%s' is an IPv6 address; the tcp "
                "bootstrap connects over IPv4 (give rank 0's IPv4 address or a host "
                "name that has one)", from, c.master_addr.c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    // Not a name any resolver answers: say so now, not after the timeout.
    if (c.size > 1 &&
        c.master_addr.find_first_of(" \t\n:/[]%") != std::string::npos) {
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: %s='%s' is not a host name or an IPv4 "
                "address (no port, spaces or brackets: the port is P2P_MASTER_PORT "
                "or P2P_PORT_RANGE)", from, c.master_addr.c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    // Not MASTER_PORT: under torchrun its agent's store listens there, and
    // PyTorch's init_process_group binds it in rank 0. It names the job.
    if ((st = get_num("P2P_MASTER_PORT", nullptr, 1, 65535, &c.has_port, &v)) != P2P_OK) {
        return st;
    }
    c.port = static_cast<uint16_t>(v);
    if ((st = parse_range(config_get("P2P_PORT_RANGE"), &c.port_lo,
                          &c.port_hi)) != P2P_OK) {
        return st;
    }

    c.if_ip = config_get("P2P_IF_IP");
    in_addr ignored;
    if (!c.if_ip.empty() && ::inet_pton(AF_INET, c.if_ip.c_str(), &ignored) != 1) {
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: P2P_IF_IP='%s' is not an IPv4 "
                               "address", c.if_ip.c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    c.ifname = config_get("P2P_IFNAME");

    if ((st = bootstrap_timeout_ms(&c.timeout_ms)) != P2P_OK) {
        return st;
    }
    if ((st = bootstrap_max_msg(&c.max_msg)) != P2P_OK) {
        return st;
    }

    if ((st = job_token(c, &c.token, &from)) != P2P_OK) {
        return st;
    }
    if (c.token.empty() && !c.has_port && c.size > 1) {
        // Scanning, rank 0 of another job in the same range looks just like
        // ours: only a token of the job tells them apart.
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: no rendezvous port (P2P_MASTER_PORT) "
                "and nothing naming the job (P2P_JOB_TOKEN, MASTER_PORT or "
                "TORCHELASTIC_RUN_ID): ranks scanning P2P_PORT_RANGE could join "
                "another job on the same host; set a token unique to the job, "
                "or a rendezvous port");
        return P2P_ERR_INVALID_PARAM;
    }
    if (c.token.size() > tcp::kMaxToken) {
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: %s is longer than %zu bytes",
                from, tcp::kMaxToken);
        return P2P_ERR_INVALID_PARAM;
    }
    c.host = config_get("P2P_HOST_ID");
    if (c.host.empty()) {
        c.host = local_hostname();
    }
    if (c.host.size() > tcp::kMaxHostname) {
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: P2P_HOST_ID is longer than %zu "
                               "bytes", tcp::kMaxHostname);
        return P2P_ERR_INVALID_PARAM;
    }
    *out = std::move(c);
    return P2P_OK;
}

p2p_status_t tcp_listen_addr(const TcpConfig &cfg, in_addr *out) {
    if (!cfg.if_ip.empty()) {
        ::inet_pton(AF_INET, cfg.if_ip.c_str(), out);  // validated at parse
        return P2P_OK;
    }
    if (!cfg.ifname.empty()) {
        if (!tcp::ifname_ipv4(cfg.ifname, out)) {
            P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: P2P_IFNAME='%s' has no IPv4 "
                                   "address", cfg.ifname.c_str());
            return P2P_ERR_INVALID_PARAM;
        }
        return P2P_OK;
    }
    out->s_addr = htonl(INADDR_ANY);
    return P2P_OK;
}

} // namespace ucxp2p
