#include "core/rails.h"

#include "core/fork_mutex.h"
#include "core/log.h"
#include "core/ucx_user.h"
#include "topo/rail_plan.h"
#include "topo/topology.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <set>
#include <sstream>
#include <unistd.h>

namespace ucxp2p {

namespace {

bool parse_u32(const char *s, uint32_t *out) {
    if (s == nullptr || *s == '\0' || std::strlen(s) > 9) {
        return false;
    }
    for (const char *p = s; *p != '\0'; ++p) {
        if (*p < '0' || *p > '9') {
            return false;
        }
    }
    *out = static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
    return true;
}

/** Whether text is new to this process (the first call with it). */
bool first_time(const std::string &text) {
    static ForkMutex &mu = *new ForkMutex();  // held across fork(); never destroyed
    static std::set<std::string> &seen = *new std::set<std::string>();
    std::lock_guard<ForkMutex> lock(mu);
    return seen.insert(text).second;
}

/** One source: both variables present, numeric, rank < size. */
bool try_pair(const EnvLookup &env, const char *rank_var, const char *size_var,
              LocalRank *out) {
    const char *r = env(rank_var);
    const char *s = env(size_var);
    if (r == nullptr && s == nullptr) {
        return false;
    }
    uint32_t rank;
    uint32_t size;
    if (!parse_u32(r, &rank) || !parse_u32(s, &size) || size == 0 || rank >= size) {
        // Once per process and values: every context, plan and
        // p2p_local_rank_query call (herringLocalDevice, per step) reads them.
        const std::string what = std::string(rank_var) + "='" + (r ? r : "(unset)") + "' " +
                                 size_var + "='" + (s ? s : "(unset)") + "'";
        P2P_LOG(first_time(what) ? P2P_LOG_WARN : P2P_LOG_DEBUG,
                "rails: ignoring %s (need 0 <= rank < size)", what.c_str());
        return false;
    }
    out->rank = rank;
    out->size = size;
    out->source = std::string(rank_var) + "/" + size_var;
    return true;
}

bool try_slurm(const EnvLookup &env, LocalRank *out) {
    const char *id = env("SLURM_LOCALID");
    if (id == nullptr) {
        return false;
    }
    const char *tpn = env("SLURM_TASKS_PER_NODE");
    const char *node = env("SLURM_NODEID");
    uint32_t rank;
    uint32_t n = 0;
    uint32_t size = 0;
    if (parse_u32(id, &rank) && tpn != nullptr && parse_u32(node ? node : "0", &n)) {
        size = slurm_tasks_on_node(tpn, n);
    }
    if (size == 0 || rank >= size) {
        P2P_LOG(P2P_LOG_WARN, "rails: ignoring SLURM_LOCALID='%s' "
                "SLURM_TASKS_PER_NODE='%s' SLURM_NODEID='%s'",
                id, tpn ? tpn : "(unset)", node ? node : "(unset)");
        return false;
    }
    out->rank = rank;
    out->size = size;
    out->source = "SLURM_LOCALID/SLURM_TASKS_PER_NODE";
    return true;
}

/** Process-wide state: the topology (loaded once) and the latest plan. */
struct RailState {
    ForkMutex mu;  // held across fork(): a child may create a context
    bool loaded = false;
    std::unique_ptr<topo::Topology> topo;
    int numa = -1;
    LocalRank last;  // local rank the latest plan was made for
    std::string net_devices;  // UCX_NET_DEVICES the latest plan set ("": none)
};

RailState &state() {
    static RailState *s = new RailState();  // never destroyed: used at exit
    return *s;
}

std::string read_file(const std::string &path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

} // namespace

uint32_t slurm_tasks_on_node(const std::string &spec, uint32_t node) {
    std::istringstream in(spec);
    std::string item;
    uint64_t seen = 0;
    while (std::getline(in, item, ',')) {
        uint32_t count;
        uint32_t reps = 1;
        size_t paren = item.find('(');
        std::string head = item.substr(0, paren);
        if (!parse_u32(head.c_str(), &count)) {
            return 0;
        }
        if (paren != std::string::npos) {
            if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 ||
                item.back() != ')') {
                return 0;
            }
            std::string r = item.substr(paren + 2, item.size() - paren - 3);
            if (!parse_u32(r.c_str(), &reps)) {
                return 0;
            }
        }
        if (node < seen + reps) {
            return count;
        }
        seen += reps;
    }
    return 0;
}

LocalRank local_rank_detect(const EnvLookup &env) {
    LocalRank lr;
    static const char *const kPairs[][2] = {
        {"P2P_LOCAL_RANK", "P2P_LOCAL_WORLD_SIZE"},
        {"LOCAL_RANK", "LOCAL_WORLD_SIZE"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
        {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    };
    for (const auto &p : kPairs) {
        if (try_pair(env, p[0], p[1], &lr)) {
            return lr;
        }
    }
    if (try_slurm(env, &lr) || try_pair(env, "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE", &lr)) {
        return lr;
    }
    return LocalRank{};
}

bool parse_cpu_list(const std::string &text, std::vector<int> *out) {
    out->clear();
    std::string t = text;
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) {
        t.pop_back();
    }
    if (t.empty()) {
        return true;
    }
    std::istringstream in(t);
    std::string item;
    while (std::getline(in, item, ',')) {
        size_t dash = item.find('-');
        uint32_t lo;
        uint32_t hi;
        if (!parse_u32(item.substr(0, dash).c_str(), &lo)) {
            return false;
        }
        hi = lo;
        if (dash != std::string::npos &&
            (!parse_u32(item.substr(dash + 1).c_str(), &hi) || hi < lo)) {
            return false;
        }
        if (hi >= CPU_SETSIZE) {
            return false;
        }
        for (uint32_t c = lo; c <= hi; ++c) {
            out->push_back(static_cast<int>(c));
        }
    }
    return true;
}

std::vector<int> numa_node_cpus(int numa, const std::string &root) {
    std::vector<int> cpus;
    if (numa < 0) {
        return cpus;
    }
    std::string text = read_file(root + "/node" + std::to_string(numa) + "/cpulist");
    if (!parse_cpu_list(text, &cpus)) {
        cpus.clear();
    }
    return cpus;
}

p2p_status_t rails_apply_ucx(ucp_config_t *cfg, const LocalRank *given) {
    RailState &s = state();
    std::lock_guard<ForkMutex> lock(s.mu);
    if (!s.loaded) {
        s.loaded = true;
        if (topo::Topology::load("", &s.topo) != P2P_OK) {
            P2P_LOG(P2P_LOG_INFO, "rails: topology unavailable; UCX chooses devices");
            s.topo.reset();
        }
    }
    s.numa = -1;
    s.net_devices.clear();
    if (!s.topo) {
        return P2P_OK;
    }
    LocalRank lr = given != nullptr
                       ? *given
                       : local_rank_detect([](const char *n) { return std::getenv(n); });
    if (given == nullptr && lr.source.empty()) {
        // here, not in local_rank_detect: p2p_local_rank_query reports it to its caller
        P2P_LOG(P2P_LOG_INFO, "rails: no local rank in the environment (LOCAL_RANK, "
                "OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, ...); planning as local "
                "rank 0 of 1");
    }
    s.last = lr;
    topo::PlanInput in = topo::PlanInput::from_environment(lr.rank, lr.size);
    topo::Topology::Binding bind = s.topo->binding();
    in.binding_numa = bind.numa;
    in.binding_slot = bind.slot;
    topo::RailPlan plan;
    p2p_status_t st = topo::plan_rails(s.topo->machine(), in, &plan);
    if (st != P2P_OK) {
        return st;
    }
    s.numa = plan.numa;
    {
        unsigned major = 0, minor = 0, release = 0;
        ucp_get_version(&major, &minor, &release);
        // EFA machines with a UCX too old to drive EFA: say so with the fix
        // (once per process), instead of silently falling back to tcp.
        static std::once_flag efa_once;
        std::string warn = topo::efa_ucx_warning(s.topo->machine(), major, minor);
        if (!warn.empty()) {
            std::call_once(efa_once, [&] { P2P_LOG(P2P_LOG_WARN, "rails: %s", warn.c_str()); });
        }
        // What this UCX can do with the plan, as p2p_info previews it
        // (logged with the plan's other notes below).
        topo::apply_ucx_limits(s.topo->machine(), major, minor, &plan);
    }
    P2P_LOG(P2P_LOG_INFO, "rails: local rank %u of %u (%s), numa %d, %zu rail(s): %s",
            lr.rank, lr.size, lr.source.empty() ? "default" : lr.source.c_str(),
            plan.numa, plan.nics.size(), plan.reason.c_str());
    for (const std::string &n : plan.notes) {
        P2P_LOG(P2P_LOG_INFO, "rails: %s", n.c_str());
    }
    for (const auto &kv : plan.ucx_settings) {
        if (kv.first.compare(0, 4, "UCX_") != 0 ||
            ucx_user_value(kv.first.c_str()) != nullptr) {
            continue;  // the plan already skips user settings; be safe
        }
        ucs_status_t us = ucp_config_modify(cfg, kv.first.c_str() + 4, kv.second.c_str());
        if (us != UCS_OK) {
            P2P_LOG(P2P_LOG_WARN, "rails: %s=%s not applied: %s", kv.first.c_str(),
                    kv.second.c_str(), ucs_status_string(us));
        } else {
            P2P_LOG(P2P_LOG_DEBUG, "rails: set %s=%s", kv.first.c_str(),
                    kv.second.c_str());
            if (kv.first == "UCX_NET_DEVICES") s.net_devices = kv.second;
        }
    }
    return P2P_OK;
}

LocalRank rails_local_rank() {
    RailState &s = state();
    std::lock_guard<ForkMutex> lock(s.mu);
    return s.last;
}

std::string rails_net_devices() {
    if (const char *user = ucx_user_value("UCX_NET_DEVICES")) return user;
    RailState &s = state();
    std::lock_guard<ForkMutex> lock(s.mu);
    return s.net_devices;
}

int rails_numa() {
    RailState &s = state();
    std::lock_guard<ForkMutex> lock(s.mu);
    return s.numa;
}

void rails_bind_this_thread(const char *what) {
    int numa = rails_numa();
    if (numa < 0) {
        return;
    }
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (pthread_getaffinity_np(pthread_self(), sizeof(allowed), &allowed) != 0) {
        return;
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online > 0 && CPU_COUNT(&allowed) < online) {
        P2P_LOG(P2P_LOG_DEBUG, "rails: %s thread keeps the user's cpu binding "
                "(%d of %ld cpus)", what, CPU_COUNT(&allowed), online);
        return;
    }
    cpu_set_t want;
    CPU_ZERO(&want);
    for (int c : numa_node_cpus(numa)) {
        if (CPU_ISSET(c, &allowed)) {
            CPU_SET(c, &want);
        }
    }
    if (CPU_COUNT(&want) == 0 || CPU_EQUAL(&want, &allowed)) {
        P2P_LOG(P2P_LOG_DEBUG, "rails: %s thread not rebound (numa %d spans %d "
                "allowed cpu(s))", what, numa, CPU_COUNT(&want));
        return;
    }
    int rc = pthread_setaffinity_np(pthread_self(), sizeof(want), &want);
    if (rc != 0) {
        P2P_LOG(P2P_LOG_INFO, "rails: cannot bind %s thread to numa %d: %s", what,
                numa, std::strerror(rc));
        return;
    }
    P2P_LOG(P2P_LOG_INFO, "rails: %s thread bound to the %d cpu(s) of numa %d",
            what, CPU_COUNT(&want), numa);
}

} // namespace ucxp2p

extern "C" p2p_status_t p2p_local_rank_query(uint32_t *local_rank, uint32_t *local_size) {
    if (local_rank == nullptr || local_size == nullptr) {
        return P2P_ERR_INVALID_PARAM;
    }
    try {
        ucxp2p::LocalRank lr =
            ucxp2p::local_rank_detect([](const char *n) { return std::getenv(n); });
        const bool found = !lr.source.empty();
        *local_rank = found ? lr.rank : 0;
        *local_size = found ? lr.size : 0;
        return P2P_OK;
    } catch (...) {  // the source's name did not fit in memory
        return P2P_ERR_NO_MEMORY;
    }
}
