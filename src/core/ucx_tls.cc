#include "core/ucx_tls.h"

#include "core/ucx_user.h"

#include <cstdlib>
#include <initializer_list>

namespace ucxp2p {

namespace {

struct Alias {
    const char *name;
    std::initializer_list<const char *> tls;
};

// UCX 1.13's ucp_tl_aliases (":aux" members count as named).
const Alias kAliases[] = {
    {"mm", {"posix", "sysv", "xpmem"}},
    {"sm", {"posix", "sysv", "xpmem", "knem", "cma"}},
    {"shm", {"posix", "sysv", "xpmem", "knem", "cma"}},
    {"ib", {"rc_verbs", "ud_verbs", "rc_mlx5", "ud_mlx5", "dc_mlx5"}},
    {"ud_v", {"ud_verbs"}},
    {"ud_x", {"ud_mlx5"}},
    {"ud", {"ud_mlx5", "ud_verbs"}},
    {"rc_v", {"rc_verbs", "ud_verbs"}},
    {"rc_x", {"rc_mlx5", "ud_mlx5"}},
    {"rc", {"rc_mlx5", "ud_mlx5", "rc_verbs", "ud_verbs"}},
    {"dc", {"dc_mlx5", "ud_mlx5"}},
    {"dc_x", {"dc_mlx5", "ud_mlx5"}},
};

void add_expanded(const std::string &name, std::set<std::string> *out) {
    for (const Alias &a : kAliases) {
        if (name == a.name) {
            out->insert(a.tls.begin(), a.tls.end());
            return;
        }
    }
    out->insert(name);
}

} // namespace

UcxTls::UcxTls(const char *value) {
    if (value == nullptr || *value == '\0') {
        return;
    }
    std::string s(value);
    exclude_ = s[0] == '^';
    if (exclude_) {
        s.erase(0, 1);
    }
    all_ = false;
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t end = s.find(',', pos);
        if (end == std::string::npos) {
            end = s.size();
        }
        std::string tok = s.substr(pos, end - pos);
        size_t colon = tok.find(':');
        if (colon != std::string::npos) {
            tok.erase(colon);  // "ud_verbs:aux" names ud_verbs
        }
        if (tok == "all" && !exclude_) {
            all_ = true;
        } else if (!tok.empty()) {
            add_expanded(tok, &named_);
        }
        pos = end + 1;
    }
}

UcxTls UcxTls::from_environment() { return UcxTls(ucx_user_value("UCX_TLS")); }

bool UcxTls::allows(const std::string &tl) const {
    if (all_) {
        return true;
    }
    bool named = named_.count(tl) != 0;
    return exclude_ ? !named : named;
}

bool UcxTls::allows_only(std::initializer_list<const char *> tls) const {
    if (all_ || exclude_) {
        return false;
    }
    for (const std::string &named : named_) {
        bool listed = false;
        for (const char *tl : tls) {
            listed = listed || named == tl;
        }
        if (!listed) {
            return false;
        }
    }
    return true;
}

bool UcxTls::allows_shm_am() const {
    return allows("posix") || allows("sysv") || allows("xpmem");
}

bool UcxTls::allows_rdma() const {
    for (const char *tl : {"rc_verbs", "rc_mlx5", "ud_verbs", "ud_mlx5", "dc_mlx5", "srd"}) {
        if (allows(tl)) {
            return true;
        }
    }
    return false;
}

} // namespace ucxp2p
