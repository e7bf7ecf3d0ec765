#include "job_env.h"

#include "unique_fd.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>

namespace p2prun {

namespace {

// Inherited variables that would override what p2prun sets (the library reads
// P2P_X before X), so a p2prun started inside another job still works.
// P2P_IFNAME and P2P_IF_IP choose where rank 0 listens: one inherited from a
// multi-host setup would make it listen on an address other than the
// MASTER_ADDR=127.0.0.1 the others connect to (they hang until the bootstrap
// timeout). P2P_IF_IP is set to 127.0.0.1 instead; -x may still set either.
const char *const kScrubbed[] = {
    "P2P_RANK",        "P2P_WORLD_SIZE",  "P2P_LOCAL_RANK",
    "P2P_LOCAL_WORLD_SIZE", "P2P_MASTER_ADDR", "P2P_MASTER_PORT",
    "P2P_IF_IP",       "P2P_IFNAME",
};

/** The kernel's ephemeral port range (bind to port 0, connect). */
bool ephemeral_range(int *lo, int *hi) {
    FILE *f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
    if (f == nullptr) {
        return false;
    }
    bool ok = std::fscanf(f, "%d %d", lo, hi) == 2 && *lo > 0 && *lo <= *hi;
    std::fclose(f);
    return ok;
}

/** Rank 0 can listen on port: bindable on every address as its listener
 *  binds it (SO_REUSEADDR, so connections in TIME_WAIT do not count). */
bool port_bindable(int port) {
    UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    if (!sock.valid() ||
        ::setsockopt(sock.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
        return false;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    return ::bind(sock.get(), reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0;
}

} // namespace

int pick_free_loopback_port(std::string *error) {
    // Below the ephemeral range when there is room: the port is free only
    // until rank 0 listens on it, and in between any socket that binds port
    // 0 or connects -- UCX's tcp endpoints, of this job or another -- could
    // be given it by the kernel ("Address already in use" at rank 0). Ports
    // outside the range are only taken by explicit binds.
    // 10000-19999 unless the range starts lower.
    constexpr int kLow = 10000;
    int elo = 0, ehi = 0;
    if (ephemeral_range(&elo, &ehi) && std::min(elo, 20000) - kLow >= 1024) {
        std::mt19937 gen(std::random_device{}());
        std::uniform_int_distribution<int> pick(kLow, std::min(elo, 20000) - 1);
        for (int tries = 0; tries < 64; ++tries) {
            int port = pick(gen);
            if (port_bindable(port)) {
                return port;
            }
        }
    }
    UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!sock.valid()) {
        *error = std::string("socket: ") + std::strerror(errno);
        return 0;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(sock.get(), reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0) {
        *error = std::string("bind 127.0.0.1:0: ") + std::strerror(errno);
        return 0;
    }
    socklen_t len = sizeof(addr);
    if (::getsockname(sock.get(), reinterpret_cast<sockaddr *>(&addr), &len) != 0) {
        *error = std::string("getsockname: ") + std::strerror(errno);
        return 0;
    }
    return ntohs(addr.sin_port);
}

std::string make_job_token(std::string *error) {
    UniqueFd fd(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) {
        *error = std::string("/dev/urandom: ") + std::strerror(errno);
        return std::string();
    }
    unsigned char bytes[16];
    size_t got = 0;
    while (got < sizeof(bytes)) {
        ssize_t n = ::read(fd.get(), bytes + got, sizeof(bytes) - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            *error = std::string("/dev/urandom: ") +
                     (n == 0 ? "unexpected end of file" : std::strerror(errno));
            return std::string();
        }
        got += static_cast<size_t>(n);
    }
    static const char kHex[] = "0123456789abcdef";
    std::string token;
    for (unsigned char b : bytes) {
        token += kHex[b >> 4];
        token += kHex[b & 0xf];
    }
    return token;
}

std::vector<std::string> rank_environment(
    const char *const *base_env, const JobInfo &job, int rank,
    const std::vector<std::pair<std::string, std::string>> &extra) {
    // Keep the order of the base environment; replace or append the rest.
    std::vector<std::string> out;
    std::map<std::string, size_t> index;
    auto set = [&](const std::string &name, const std::string &value) {
        auto it = index.find(name);
        if (it != index.end()) {
            out[it->second] = name + "=" + value;
        } else {
            index[name] = out.size();
            out.push_back(name + "=" + value);
        }
    };
    for (const char *const *e = base_env; e != nullptr && *e != nullptr; ++e) {
        std::string entry = *e;
        size_t eq = entry.find('=');
        if (eq == std::string::npos) {
            continue;
        }
        std::string name = entry.substr(0, eq);
        bool scrub = false;
        for (const char *s : kScrubbed) {
            scrub = scrub || name == s;
        }
        if (!scrub) {
            set(name, entry.substr(eq + 1));
        }
    }
    set("RANK", std::to_string(rank));
    set("WORLD_SIZE", std::to_string(job.world_size));
    set("LOCAL_RANK", std::to_string(rank));
    set("LOCAL_WORLD_SIZE", std::to_string(job.world_size));
    set("MASTER_ADDR", "127.0.0.1");
    set("P2P_IF_IP", "127.0.0.1");  // rank 0 listens where MASTER_ADDR points
    set("P2P_MASTER_PORT", std::to_string(job.master_port));
    set("MASTER_PORT", std::to_string(job.store_port));
    set("P2P_JOB_TOKEN", job.job_token);
    set("P2P_BOOTSTRAP", "tcp");
    for (const auto &kv : extra) {
        set(kv.first, kv.second);
    }
    return out;
}

} // namespace p2prun
