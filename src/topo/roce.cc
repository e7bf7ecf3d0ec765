#include "topo/roce.h"

#include "core/log.h"
#include "topo/dir_names.h"
#include "topo/machine.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

namespace ucxp2p {
namespace topo {

const char *const kDefaultSysfsRoot = "/sys/class/infiniband";

namespace {

/** First line of a file without trailing whitespace; false if unreadable. */
bool read_line(const std::string &path, std::string *out) {
    std::ifstream in(path);
    if (!in) {
        return false;
    }
    std::string line;
    if (!std::getline(in, line) && !in.eof()) {
        return false;
    }
    if (in.bad()) {
        return false;
    }
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) {
        line.pop_back();
    }
    *out = line;
    return true;
}

bool is_dir(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/** Names in a directory (no dot entries); empty when unreadable. */
std::vector<std::string> list_dir(const std::string &path) {
    std::vector<std::string> names = dir_names(path.c_str());
    std::sort(names.begin(), names.end());
    return names;
}

/** Non-negative decimal number, or false. */
bool parse_uint(const std::string &s, unsigned *out) {
    if (s.empty() || s.size() > 9 ||
        !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return false;
    }
    *out = static_cast<unsigned>(std::strtoul(s.c_str(), nullptr, 10));
    return true;
}

/** 8 groups of 4 hex digits separated by ':'. */
bool valid_gid(const std::string &g) {
    if (g.size() != 39) {
        return false;
    }
    for (size_t i = 0; i < g.size(); ++i) {
        bool colon = (i % 5) == 4;
        if (colon ? g[i] != ':' : !std::isxdigit(static_cast<unsigned char>(g[i]))) {
            return false;
        }
    }
    return true;
}

GidType parse_type(std::string t) {
    std::transform(t.begin(), t.end(), t.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (t.find("v2") != std::string::npos) {
        return GidType::ROCE_V2;
    }
    if (t.find("v1") != std::string::npos) {
        return GidType::ROCE_V1;
    }
    return GidType::UNKNOWN;
}

std::string ipv4_of(const std::string &gid) {
    // last two groups: "0a00:0001" -> 10.0.0.1
    unsigned long hi = std::strtoul(gid.substr(30, 4).c_str(), nullptr, 16);
    unsigned long lo = std::strtoul(gid.substr(35, 4).c_str(), nullptr, 16);
    return std::to_string(hi >> 8) + "." + std::to_string(hi & 0xff) + "." +
           std::to_string(lo >> 8) + "." + std::to_string(lo & 0xff);
}

std::string port_dir(const std::string &root, const std::string &dev,
                     unsigned port) {
    return root + "/" + dev + "/ports/" + std::to_string(port);
}

} // namespace

std::vector<std::string> roce_list_devices(const std::string &root) {
    std::vector<std::string> devs;
    for (const std::string &n : list_dir(root)) {
        if (is_dir(root + "/" + n) && device_name_usable(n)) {
            devs.push_back(n);
        }
    }
    return devs;
}

std::vector<unsigned> roce_list_ports(const std::string &root,
                                      const std::string &dev) {
    std::vector<unsigned> ports;
    for (const std::string &n : list_dir(root + "/" + dev + "/ports")) {
        unsigned p;
        if (parse_uint(n, &p)) {
            ports.push_back(p);
        }
    }
    std::sort(ports.begin(), ports.end());
    return ports;
}

std::string roce_link_layer(const std::string &root, const std::string &dev,
                            unsigned port) {
    std::string s;
    if (!read_line(port_dir(root, dev, port) + "/link_layer", &s)) {
        return "";
    }
    return s;
}

bool roce_port_active(const std::string &root, const std::string &dev,
                      unsigned port) {
    std::string s;
    if (!read_line(port_dir(root, dev, port) + "/state", &s)) {
        return true;
    }
    return s.find("ACTIVE") != std::string::npos;
}

double roce_port_rate_gbps(const std::string &root, const std::string &dev,
                           unsigned port) {
    std::string s;
    if (!read_line(port_dir(root, dev, port) + "/rate", &s)) {
        return -1;
    }
    char *end = nullptr;
    double g = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || !(g >= 0) || s.find("Gb/sec", end - s.c_str()) == std::string::npos) {
        return -1;
    }
    return roce_port_active(root, dev, port) ? g : 0;
}

p2p_status_t roce_read_gids(const std::string &root, const std::string &dev,
                            unsigned port, std::vector<GidEntry> *out) {
    if (out == nullptr || dev.empty() || dev.find('/') != std::string::npos) {
        return P2P_ERR_INVALID_PARAM;
    }
    const std::string dir = port_dir(root, dev, port);
    if (!is_dir(dir + "/gids")) {
        P2P_LOG(P2P_LOG_DEBUG, "roce: %s/gids does not exist", dir.c_str());
        return P2P_ERR_NO_DEVICE;
    }
    std::vector<GidEntry> gids;
    for (const std::string &n : list_dir(dir + "/gids")) {
        GidEntry e;
        std::string type;
        if (!parse_uint(n, &e.index) || !read_line(dir + "/gids/" + n, &e.gid) ||
            !valid_gid(e.gid) ||
            e.gid == "0000:0000:0000:0000:0000:0000:0000:0000") {
            continue; // unused slot or junk
        }
        // The kernel refuses to read the type of an unused slot.
        if (!read_line(dir + "/gid_attrs/types/" + n, &type)) {
            continue;
        }
        e.type = parse_type(type);
        if (!read_line(dir + "/gid_attrs/ndevs/" + n, &e.ndev)) {
            e.ndev.clear();
        }
        std::string lower = e.gid;
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char c) { return std::tolower(c); });
        e.gid = lower;
        e.ipv4 = lower.compare(0, 30, "0000:0000:0000:0000:0000:ffff:") == 0;
        e.link_local = lower.compare(0, 3, "fe8") == 0 ||
                       lower.compare(0, 3, "fe9") == 0 ||
                       lower.compare(0, 3, "fea") == 0 ||
                       lower.compare(0, 3, "feb") == 0;
        gids.push_back(std::move(e));
    }
    std::sort(gids.begin(), gids.end(),
              [](const GidEntry &a, const GidEntry &b) { return a.index < b.index; });
    *out = std::move(gids);
    return P2P_OK;
}

bool addr_range_parse(const std::string &text, AddrRange *out) {
    const size_t slash = text.find('/');
    if (slash == std::string::npos || slash + 1 >= text.size() || out == nullptr) {
        return false;
    }
    const std::string addr = text.substr(0, slash), bits = text.substr(slash + 1);
    if (bits.size() > 3 || !std::all_of(bits.begin(), bits.end(), ::isdigit)) {
        return false;
    }
    const unsigned prefix = static_cast<unsigned>(std::stoul(bits));
    AddrRange r;
    r.text = text;
    in_addr v4;
    if (inet_pton(AF_INET, addr.c_str(), &v4) == 1) {
        if (prefix > 32) return false;
        r.addr[10] = r.addr[11] = 0xff;  // ::ffff:a.b.c.d, as a RoCE GID
        std::memcpy(r.addr + 12, &v4, 4);
        r.prefix = 96 + prefix;
    } else if (inet_pton(AF_INET6, addr.c_str(), r.addr) == 1) {
        if (prefix > 128) return false;
        r.prefix = prefix;
    } else {
        return false;
    }
    *out = std::move(r);
    return true;
}

bool addr_range_contains(const AddrRange &range, const std::string &gid) {
    unsigned char a[16];
    if (inet_pton(AF_INET6, gid.c_str(), a) != 1) return false;
    for (unsigned bit = 0; bit < range.prefix; ++bit) {
        const unsigned char m = static_cast<unsigned char>(0x80u >> (bit % 8));
        if ((a[bit / 8] & m) != (range.addr[bit / 8] & m)) return false;
    }
    return true;
}

p2p_status_t roce_choose_gid(const std::vector<GidEntry> &gids,
                             const std::string &netdev, GidChoice *out,
                             const AddrRange *range) {
    if (out == nullptr) {
        return P2P_ERR_INVALID_PARAM;
    }
    // Rank: lower is better; -1 means not usable.
    auto rank = [](const GidEntry &e) {
        if (e.type == GidType::ROCE_V2 && e.ipv4) return 0;
        if (e.type == GidType::ROCE_V2 && !e.link_local) return 1;
        if (e.type == GidType::ROCE_V1 && e.ipv4) return 2;
        if (e.type == GidType::ROCE_V1 && !e.link_local) return 3;
        if (e.type == GidType::ROCE_V1) return 4;
        return -1;
    };
    const GidEntry *best = nullptr;
    int best_rank = 0;
    bool best_on_netdev = false;
    for (const GidEntry &e : gids) {
        int r = rank(e);
        if (r < 0 || (range != nullptr && !addr_range_contains(*range, e.gid))) {
            continue;
        }
        bool on_netdev = !netdev.empty() && e.ndev == netdev;
        if (best == nullptr || r < best_rank ||
            (r == best_rank && on_netdev && !best_on_netdev)) {
            best = &e;
            best_rank = r;
            best_on_netdev = on_netdev;
        }
    }
    if (best == nullptr) {
        return P2P_ERR_NO_DEVICE;
    }
    GidChoice c;
    c.index = static_cast<int>(best->index);
    c.entry = *best;
    c.reason = best->type == GidType::ROCE_V2 ? "roce v2" : "roce v1";
    if (best->ipv4) {
        c.reason += ", ipv4 " + ipv4_of(best->gid);
    } else {
        c.reason += best->link_local ? ", ipv6 link-local " : ", ipv6 ";
        c.reason += best->gid;
    }
    if (!best->ndev.empty()) {
        c.reason += " on " + best->ndev;
    }
    if (range != nullptr) {
        c.reason += " (in " + range->text + ")";
    }
    if (best_rank > 0) {
        c.reason += best_rank == 1 ? " (no roce v2 ipv4 gid)" : " (no roce v2 gid)";
    }
    *out = std::move(c);
    return P2P_OK;
}

p2p_status_t roce_detect_gid(const std::string &root, const std::string &dev,
                             unsigned port, const std::string &netdev,
                             GidChoice *out, const AddrRange *range) {
    std::vector<GidEntry> gids;
    p2p_status_t st = roce_read_gids(root, dev, port, &gids);
    if (st != P2P_OK) {
        P2P_LOG(P2P_LOG_INFO, "roce: %s port %u: no gid table under %s",
                dev.c_str(), port, root.c_str());
        return st;
    }
    st = roce_choose_gid(gids, netdev, out, range);
    if (st != P2P_OK) {
        P2P_LOG(P2P_LOG_INFO, "roce: %s port %u: none of %zu gids is roce v1/v2%s%s",
                dev.c_str(), port, gids.size(), range != nullptr ? " in " : "",
                range != nullptr ? range->text.c_str() : "");
    }
    return st;
}

bool hca_spec_match(const std::string &spec_in, const std::string &name,
                    unsigned *port_p) {
    if (port_p != nullptr) {
        *port_p = 0;
    }
    if (spec_in.empty()) {
        return true;
    }
    bool exclude = spec_in[0] == '^';
    std::string spec = exclude ? spec_in.substr(1) : spec_in;
    // '=' before the list (after any '^') makes every entry exact, as
    // NCCL reads "==mlx5_0,mlx5_1" and "^=mlx5_0,mlx5_1".
    const bool all_exact = !spec.empty() && spec[0] == '=';
    if (all_exact) {
        spec.erase(0, 1);
    }
    bool hit = false;
    size_t pos = 0;
    while (pos <= spec.size() && !hit) {
        size_t comma = spec.find(',', pos);
        std::string entry = spec.substr(pos, comma == std::string::npos
                                                 ? std::string::npos
                                                 : comma - pos);
        pos = comma == std::string::npos ? spec.size() + 1 : comma + 1;
        bool exact = all_exact || (!entry.empty() && entry[0] == '=');
        if (!entry.empty() && entry[0] == '=') {
            entry.erase(0, 1);
        }
        unsigned port = 0;
        size_t colon = entry.find(':');
        if (colon != std::string::npos) {
            if (!parse_uint(entry.substr(colon + 1), &port)) {
                port = 0;
            }
            entry.erase(colon);
        }
        if (entry.empty()) {
            continue;
        }
        hit = exact ? name == entry : name.compare(0, entry.size(), entry) == 0;
        if (hit && port_p != nullptr && !exclude) {
            *port_p = port;
        }
    }
    return exclude ? !hit : hit;
}

bool hca_spec_valid(const std::string &spec_in, std::string *bad) {
    std::string spec = !spec_in.empty() && spec_in[0] == '^' ? spec_in.substr(1) : spec_in;
    size_t pos = 0;
    while (pos < spec.size()) {
        size_t comma = spec.find(',', pos);
        std::string e = spec.substr(pos, comma == std::string::npos ? std::string::npos
                                                                    : comma - pos);
        pos = comma == std::string::npos ? spec.size() : comma + 1;
        std::string name = e.empty() || e[0] != '=' ? e : e.substr(1);
        size_t colon = name.find(':');
        unsigned port = 0;
        // No device name holds whitespace (device_name_usable): such an
        // entry would match nothing, silently.
        const bool space = std::any_of(e.begin(), e.end(), [](char c) {
            return std::isspace(static_cast<unsigned char>(c)) != 0;
        });
        if (!e.empty() && (space || name.empty() || colon == 0 ||
                           (colon != std::string::npos &&
                            (!parse_uint(name.substr(colon + 1), &port) || port == 0 ||
                             port > 255)))) {
            *bad = e;
            return false;
        }
    }
    return true;
}

p2p_status_t roce_select_hcas(const std::string &root, const std::string &spec,
                              std::vector<std::string> *out) {
    if (out == nullptr) {
        return P2P_ERR_INVALID_PARAM;
    }
    std::vector<std::string> hits;
    for (const std::string &d : roce_list_devices(root)) {
        if (hca_spec_match(spec, d)) {
            hits.push_back(d);
        }
    }
    if (hits.empty()) {
        return P2P_ERR_NO_DEVICE;
    }
    *out = std::move(hits);
    return P2P_OK;
}

} // namespace topo
} // namespace ucxp2p
