#include "core/ucx_tls.h"

#include <cstdlib>
#include <initializer_list>

namespace ucxp2p {

namespace {

void add_expanded(const std::string &name, std::set<std::string> *out) {
    static const std::initializer_list<const char *> mm = {"posix", "sysv", "xpmem"};
    static const std::initializer_list<const char *> sm = {"posix", "sysv", "xpmem",
                                                           "knem", "cma"};
    if (name == "mm") {
        out->insert(mm.begin(), mm.end());
    } else if (name == "sm" || name == "shm") {
        out->insert(sm.begin(), sm.end());
    } else {
        out->insert(name);
    }
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

UcxTls UcxTls::from_environment() { return UcxTls(std::getenv("UCX_TLS")); }

bool UcxTls::allows(const std::string &tl) const {
    if (all_) {
        return true;
    }
    bool named = named_.count(tl) != 0;
    return exclude_ ? !named : named;
}

bool UcxTls::allows_shm_am() const {
    return allows("posix") || allows("sysv") || allows("xpmem");
}

} // namespace ucxp2p
