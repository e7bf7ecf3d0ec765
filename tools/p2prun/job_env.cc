#include "job_env.h"

#include "unique_fd.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <map>

namespace p2prun {

namespace {

// Inherited variables that would override what p2prun sets (the library reads
// P2P_X before X), so a p2prun started inside another job still works.
const char *const kScrubbed[] = {
    "P2P_RANK",        "P2P_WORLD_SIZE",  "P2P_LOCAL_RANK",
    "P2P_LOCAL_WORLD_SIZE", "P2P_MASTER_ADDR", "P2P_MASTER_PORT",
};

} // namespace

int pick_free_loopback_port(std::string *error) {
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
    set("MASTER_PORT", std::to_string(job.master_port));
    set("P2P_JOB_TOKEN", job.job_token);
    set("P2P_BOOTSTRAP", "tcp");
    for (const auto &kv : extra) {
        set(kv.first, kv.second);
    }
    return out;
}

} // namespace p2prun
