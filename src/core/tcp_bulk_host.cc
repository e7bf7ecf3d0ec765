/*
 * What a tcp bulk Server (core/tcp_bulk.h) publishes about this host: its
 * token and the IPv4 addresses clients may connect to.
 */
#include "core/tcp_bulk_wire.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<sys/random.h>)
#include <sys/random.h>
#define UCXP2P_HAVE_GETRANDOM 1
#endif
#endif

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

namespace ucxp2p {
namespace tcpb {
namespace wire {

/** Never 0 (0 would read as "no token" in a zeroed Address). */
uint64_t random_token() {
    uint64_t t = 0;
    for (int i = 0; i < 4 && t == 0; ++i) {
#ifdef UCXP2P_HAVE_GETRANDOM
        if (::getrandom(&t, sizeof(t), GRND_NONBLOCK) == static_cast<ssize_t>(sizeof(t))) {
            continue;
        }
#endif
        int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (::read(fd, &t, sizeof(t)) != static_cast<ssize_t>(sizeof(t))) {
                t = 0;
            }
            ::close(fd);
        }
    }
    if (t == 0) {
        // No entropy source at all: the token still tells our connections
        // from a stray one, if not from an attacker.
        t = static_cast<uint64_t>(
                std::chrono::steady_clock::now().time_since_epoch().count()) ^
            (static_cast<uint64_t>(::getpid()) << 32) ^ reinterpret_cast<uintptr_t>(&t);
        t |= 1;
    }
    return t;
}

namespace {

/** devices (a UCX_NET_DEVICES value) names the interface, or is empty or
 *  "all". */
bool named(const std::string &devices, const char *ifname) {
    if (devices.empty() || devices == "all") return true;
    size_t at = 0;
    while (at <= devices.size()) {
        size_t end = devices.find(',', at);
        if (end == std::string::npos) end = devices.size();
        if (devices.compare(at, end - at, ifname) == 0) return true;
        at = end + 1;
    }
    return false;
}

}  // namespace

void local_addresses(Address *a, const std::string &devices) {
    ifaddrs *list = nullptr;
    if (::getifaddrs(&list) != 0) {
        return;
    }
    for (ifaddrs *i = list; i != nullptr && a->naddr < 4; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET ||
            !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK) ||
            !named(devices, i->ifa_name)) {
            continue;
        }
        uint32_t ip = reinterpret_cast<const sockaddr_in *>(i->ifa_addr)->sin_addr.s_addr;
        if ((ntohl(ip) >> 24) == 127 || std::find(a->ipv4, a->ipv4 + a->naddr, ip) !=
                                            a->ipv4 + a->naddr) {
            continue;
        }
        a->ipv4[a->naddr++] = ip;
    }
    ::freeifaddrs(list);
}

}  // namespace wire
}  // namespace tcpb
}  // namespace ucxp2p
