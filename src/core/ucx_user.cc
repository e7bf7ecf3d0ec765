#include "core/ucx_user.h"

#include <ucs/type/status.h>

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <sstream>

extern char **environ;

namespace ucxp2p {

namespace {

const char *const kSpace = " \t\r\f\v";

std::string trim(const std::string &s) {
    size_t b = s.find_first_not_of(kSpace);
    if (b == std::string::npos) {
        return "";
    }
    return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

/** The directory of the loaded libucs; "" when unknown. */
std::string libucs_dir() {
    Dl_info info{};
    void *sym = reinterpret_cast<void *>(&ucs_status_string);
    if (dladdr(sym, &info) == 0 || info.dli_fname == nullptr) {
        return "";
    }
    std::string path = info.dli_fname;
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? "" : path.substr(0, slash);
}

} // namespace

void ucx_conf_parse(const std::string &text, const std::string &file, UcxConf *out) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        line = trim(line);
        if (line.empty() || line[0] == ';' || line[0] == '#' || line[0] == '[') {
            continue;
        }
        size_t sep = line.find_first_of("=:");
        if (sep == std::string::npos) {
            continue;  // not name=value: UCX's parser skips it too
        }
        std::string name = trim(line.substr(0, sep));
        std::string value = line.substr(sep + 1);
        for (size_t c = value.find(';'); c != std::string::npos; c = value.find(';', c + 1)) {
            if (c > 0 && std::strchr(kSpace, value[c - 1]) != nullptr) {
                value.erase(c);  // " ; inline comment"
                break;
            }
        }
        if (name.compare(0, 4, "UCX_") == 0 && name.size() > 4) {
            (*out)[name] = UcxUserValue{trim(value), file};
        }
    }
}

std::vector<std::string> ucx_conf_paths(const char *home, const char *config_dir,
                                        const std::string &lib_dir) {
    std::vector<std::string> paths{"/etc/ucx/ucx.conf"};
    if (!lib_dir.empty()) {
        // The system file of a UCX built from source (its sysconfdir under
        // its prefix; newer UCX reads its library-relative file there too),
        // then 1.13's library-relative file.
        paths.push_back(lib_dir + "/../etc/ucx/ucx.conf");
        paths.push_back(lib_dir + "/../etc/ucx.conf");
    }
    if (home != nullptr && *home != '\0') {
        paths.push_back(std::string(home) + "/ucx.conf");
    }
    if (config_dir != nullptr && *config_dir != '\0') {
        paths.push_back(std::string(config_dir) + "/ucx.conf");
    }
    paths.push_back("./ucx.conf");  // the working directory's, read last
    return paths;
}

const UcxConf &ucx_conf_settings() {
    static const UcxConf conf = [] {
        UcxConf c;
        for (const std::string &p : ucx_conf_paths(std::getenv("HOME"),
                                                   std::getenv("UCX_CONFIG_DIR"),
                                                   libucs_dir())) {
            std::ifstream f(p);
            if (!f) {
                continue;
            }
            std::ostringstream text;
            text << f.rdbuf();
            ucx_conf_parse(text.str(), p, &c);
        }
        return c;
    }();
    return conf;
}

std::vector<std::string> ucx_names(const std::string &name) {
    if (name == "UCX_MAX_RNDV_RAILS") return {name, "UCX_MAX_RNDV_LANES"};
    if (name == "UCX_MAX_EAGER_RAILS") return {name, "UCX_MAX_EAGER_LANES"};
    static const std::string mm = "UCX_MM_";
    if (name.compare(0, mm.size(), mm) == 0 && name.size() > mm.size()) {
        // The shared memory transports' own copies of it ("inherits:
        // UCX_MM_..." in `ucx_info -caf`).
        const std::string rest = name.substr(mm.size());
        return {name, "UCX_POSIX_" + rest, "UCX_SYSV_" + rest, "UCX_XPMEM_" + rest};
    }
    return {name};
}

const char *ucx_user_value(const char *name, std::string *file, std::string *which) {
    const std::vector<std::string> names = ucx_names(name);
    for (const std::string &n : names) {
        if (const char *env = std::getenv(n.c_str())) {
            if (file != nullptr) {
                file->clear();
            }
            if (which != nullptr) {
                *which = n;
            }
            return env;
        }
    }
    const UcxConf &conf = ucx_conf_settings();
    for (const std::string &n : names) {
        auto it = conf.find(n);
        if (it != conf.end()) {
            if (file != nullptr) {
                *file = it->second.file;
            }
            if (which != nullptr) {
                *which = n;
            }
            return it->second.value.c_str();
        }
    }
    return nullptr;
}

UcxConf ucx_user_settings() {
    UcxConf all = ucx_conf_settings();
    for (char **e = environ; e != nullptr && *e != nullptr; ++e) {
        const char *eq = std::strchr(*e, '=');
        if (std::strncmp(*e, "UCX_", 4) == 0 && eq != nullptr) {
            all[std::string(*e, static_cast<size_t>(eq - *e))] = UcxUserValue{eq + 1, ""};
        }
    }
    return all;
}

} // namespace ucxp2p
