#include "core/config.h"
#include "core/guard.h"
#include "core/log.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <unistd.h>

namespace ucxp2p {

namespace {

const ConfigVar kTable[] = {
    {"P2P_LOG_LEVEL", "warn",
     "Log level: error, warn, info, debug, trace (today trace shows what debug "
     "shows: no per-message lines). Messages go to stderr."},
    {"P2P_PROGRESS", "adaptive",
     "Progress thread mode: adaptive (spin P2P_SPIN_US after activity, then "
     "sleep on the worker event fd), busy (never sleep), event (sleep "
     "whenever idle)."},
    {"P2P_THREAD_MODE", "multi",
     "multi: any thread may call at any time; a progress thread completes "
     "operations between calls. serialized: the application makes one call "
     "at a time (MPI_THREAD_SERIALIZED); its poll and wait calls progress, "
     "a backstop thread only while it stays out of the library, and the "
     "per-message path takes no locked instruction."},
    {"P2P_LOCK_BIAS", "on",
     "multi thread mode: on lets the worker lock favour a thread that makes "
     "nearly every call (after a run of calls by it alone it locks without "
     "a locked instruction; another thread's call costs one membarrier and "
     "revokes the bias); off keeps the plain lock for everyone."},
    {"P2P_SPIN_US", "50",
     "Adaptive mode: microseconds to keep polling after the last activity "
     "(0-1000000)."},
    {"P2P_SPIN_BUSY_US", "2000",
     "Adaptive mode: microseconds to keep polling after the last activity "
     "while operations are in flight (a message is probably on its way; "
     "sleeping would add wake-up latency to every fragment). Yields the CPU "
     "between polls. 0-1000000."},
    {"P2P_PEER_TIMEOUT_MS", "3000",
     "Bound on detecting a dead peer; sets UCX_KEEPALIVE_INTERVAL unless the "
     "user set it. 10-3600000."},
    {"P2P_CLOSE_HANDSHAKE", "on",
     "on: a destroyed communicator's endpoint to a peer that still holds its "
     "own stays open (in the context) until the peer closes that one, so "
     "that no keepalive of the peer's names a closed endpoint (UCX 1.13's "
     "tcp crashes on one); off closes every endpoint at destroy."},
    {"P2P_BOOTSTRAP", "auto",
     "Bootstrap: auto, pmix, tcp, single. auto picks the innermost launcher: "
     "tcp when RANK, WORLD_SIZE and MASTER_ADDR (or their P2P_ twins) are all "
     "set (a torchrun worker, even inside an srun or mpirun task), else pmix "
     "when a PMIx launcher (srun --mpi=pmix, mpirun) started the process, "
     "else tcp when RANK/WORLD_SIZE are set, else single. Only one of RANK "
     "and WORLD_SIZE set is an error, and so is an MPI launcher's rank count "
     "above 1 (OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_STEP_NUM_TASKS) with no "
     "PMIx and no RANK."},
    {"P2P_MASTER_ADDR", "",
     "IPv4 address (or host name) of rank 0's rendezvous server; falls back "
     "to MASTER_ADDR, then 127.0.0.1. The tcp bootstrap connects over IPv4: "
     "an IPv6 address is refused."},
    {"P2P_MASTER_PORT", "",
     "Port of rank 0's rendezvous server (p2prun sets one). MASTER_PORT is "
     "not used as one: torchrun's store, or PyTorch's in rank 0, listens "
     "there. Unset: rank 0 binds the first free port of P2P_PORT_RANGE and "
     "the others scan that range, telling their rank 0 from another job's by "
     "the job token."},
    {"P2P_PORT_RANGE", "56800-56900",
     "Ports scanned when no master port is given."},
    {"P2P_IF_IP", "",
     "IPv4 address rank 0 listens on; empty: all "
     "addresses, or the address of P2P_IFNAME."},
    {"P2P_IFNAME", "",
     "Network interface rank 0 listens on (e.g. eth0); ignored when "
     "P2P_IF_IP is set."},
    {"P2P_RANK", "", "Rank of this process; falls back to RANK."},
    {"P2P_WORLD_SIZE", "", "Number of ranks; falls back to WORLD_SIZE."},
    {"P2P_LOCAL_RANK", "",
     "Rank on this host; falls back to LOCAL_RANK, else computed from host "
     "names at rendezvous."},
    {"P2P_LOCAL_WORLD_SIZE", "",
     "Ranks on this host; falls back to LOCAL_WORLD_SIZE, else computed."},
    {"P2P_JOB_TOKEN", "",
     "Value shared by the ranks of one job (an identifier, not a password: "
     "it travels in the clear); connections presenting another are "
     "rejected. p2prun sets a random one. Unset: derived from MASTER_PORT "
     "and torchrun's TORCHELASTIC_RUN_ID/RESTART_COUNT, with P2P_MASTER_PORT "
     "when set; ranks that scan P2P_PORT_RANGE need one of these, and jobs "
     "that share one fixed P2P_MASTER_PORT on a host need one naming each."},
    {"P2P_BOOTSTRAP_TIMEOUT_MS", "60000",
     "Deadline for connecting to rank 0 (with retries; the host name lookup "
     "of the master address included) and for each collective of the "
     "bootstrap; 1 to 86400000 (24 h; PMIx rounds it up to whole seconds)."},
    {"P2P_BOOTSTRAP_MAX_MSG", "16777216",
     "Largest blob one rank may contribute to a bootstrap collective "
     "(1 to 2147483648 bytes)."},
    {"P2P_PMIX_MODEX", "collect",
     "PMIx bootstrap data exchange: collect (each fence brings every rank's "
     "blob to every node, gets are local) or direct (the fence is a barrier "
     "only; each get fetches one peer's blob from its node on demand). See "
     "docs/WIREUP.md for measurements."},
    {"P2P_RAILS", "auto",
     "RDMA NICs (rails) of each local rank: auto (the NICs nearest the "
     "rank's GPU -- or its NUMA node without GPUs -- shared fairly among the "
     "ranks near them), N (the N nearest NICs, 1-64), or a list of device names "
     "(mlx5_0,mlx5_1 or rdmap16s27:1; interface names such as eth1,eth2 give "
     "tcp rails). Applied through UCX_NET_DEVICES, UCX_MAX_RNDV_RAILS and "
     "UCX_MAX_EAGER_RAILS unless the user set those; p2p_info shows the plan."},
    {"P2P_HCA", "",
     "Restrict automatic rail choice to matching RDMA devices, as "
     "NCCL_IB_HCA: comma-separated name prefixes (mlx5), '=' for exact "
     "names (=mlx5_bond_0; before the list it applies to every entry), "
     "':port' to pick a port, a leading '^' to exclude instead (^=mlx5_0,"
     "mlx5_1). Empty: all devices."},
    {"P2P_IB_GID_INDEX", "auto",
     "RoCE GID index given to UCX (UCX_IB_GID_INDEX, unless set): auto "
     "picks RoCE v2 with an IPv4-mapped address, else RoCE v2 IPv6 (not "
     "link-local), else RoCE v1, from /sys/class/infiniband; or a number."},
    {"P2P_IB_ADDR_RANGE", "",
     "RoCE: auto picks the GID index only among addresses in this range "
     "(address/prefix, IPv4 10.1.0.0/16 or IPv6 fd00::/8), as "
     "NCCL_IB_ADDR_RANGE: for ports with addresses on several subnets. "
     "Empty: any address. A number in P2P_IB_GID_INDEX wins over it."},
    {"P2P_HOST_ID", "",
     "Name that groups ranks into hosts when the TCP bootstrap computes "
     "local rank/size (ranks sharing it are ordered by rank); empty: the "
     "host name. Set it when containers on one machine have different host "
     "names, or to simulate several hosts on one."},
    {"P2P_HERRING_SYSFS_ROOT", "/sys/class/infiniband",
     "herring shim: where herringP2PGetRDMADevices lists RDMA devices "
     "(tests point it at a fake tree)."},
    {"P2P_CUDA_STAGING", "on",
     "CUDA device memory (cudaMalloc) where UCX cannot move it (built "
     "without CUDA, as Debian's): on registers it with a host copy of the "
     "same size, copied from the device when a send is posted and to the "
     "device before a receive completes (cuMemcpy, page-locked when the "
     "driver allows); off refuses such registrations "
     "(P2P_ERR_UNSUPPORTED). A UCX built with CUDA moves device memory "
     "itself either way."},
    {"P2P_CMA", "auto",
     "Single-copy transfers between ranks on one host (process_vm_readv "
     "under a ucxp2p rendezvous; UCX endpoints keep peer error handling): "
     "auto (used when both ranks are in one pid namespace on one boot of one "
     "machine, the call is permitted and UCX_TLS allows shared memory -- "
     "unset, all, sm, shm or cma -- and UCX does not move CUDA memory, since "
     "single copy reads with the CPU), or off (UCX moves every byte)."},
    {"P2P_CMA_THRESH", "auto",
     "Smallest message, in bytes, from an application buffer sent by single "
     "copy (process_vm_readv) when P2P_CMA applies; smaller ones go through "
     "UCX's shared memory (two copies, but no system call and no page "
     "pinning per message). auto: below 16 KiB UCX, from 256 KiB single "
     "copy, and in between the sender measures both per peer and size class "
     "and uses the faster, trying the other now and then (which one wins "
     "depends on the machine and its load). A number below 80 (the size of "
     "the single-copy request) counts as 80."},
    {"P2P_CMA_MAPPED_THRESH", "2048",
     "Smallest message, in bytes, from p2p_mem_alloc memory sent by single "
     "copy (memcpy through the receiver's mapping of the sender's memfd); "
     "below 80 counts as 80."},
    {"P2P_CMA_SPLIT", "65536",
     "Smallest single-copy message whose copy is split between the two "
     "ranks: the receiver reads the first half while the sender writes the "
     "second (process_vm_writev), so two cores copy; 0: the receiver copies "
     "everything; another number below 160 counts as 160."},
    {"P2P_TCP_BULK", "auto",
     "Large messages to a peer UCX reaches over tcp (not one P2P_CMA "
     "serves): the receiver reads the payload from the sender on sockets of "
     "ucxp2p's own, straight into its buffer, under the same rendezvous as "
     "single copy (UCX with peer error handling moves tcp rendezvous "
     "through one lane and an extra copy). auto: where UCX_TLS allows tcp, "
     "for peers on other hosts when it allows no rdma transport or the host "
     "has no RDMA device, for peers on this host when it allows no shared "
     "memory; off where UCX_NET_DEVICES (the user's or the rail plan's) "
     "names several tcp interfaces. on: every peer single copy does not "
     "serve. auto and on are off where UCX moves CUDA memory (the path "
     "reads with the CPU). off: UCX moves every byte. Both ranks must want "
     "it; a failed connection falls back to UCX."},
    {"P2P_TCP_BULK_THRESH", "auto",
     "Smallest message, in bytes, sent on the P2P_TCP_BULK path (at least "
     "80, the size of its request). auto: below 256 KiB UCX; from 256 KiB "
     "the sender measures both paths per peer and size class and uses the "
     "faster, trying the other now and then (which one wins depends on the "
     "machine and its load), starting with UCX and trying P2P_TCP_BULK "
     "from a size class's 512th send."},
    {"P2P_TCP_BULK_LANES", "2",
     "Connections a P2P_TCP_BULK message is split over at most (1-16), in "
     "parts of at least 2 MiB: one connection is bound by one core's copy, "
     "but smaller parts lose more to the extra connection than they gain."},
    {"P2P_TCP_BULK_SPIN_US", "20",
     "Microseconds a thread of the P2P_TCP_BULK path keeps polling before it "
     "sleeps (0-100000, yielding the CPU between polls): a reader waiting for "
     "the next bytes of a part, a server thread waiting for the next request "
     "while sends are offered. Saves a wake-up per message and per stall of "
     "the stream; 0 sleeps at once."},
    {nullptr, nullptr, nullptr}};

const ConfigVar *find(const char *name) {
    for (const ConfigVar *v = kTable; v->name != nullptr; ++v) {
        if (std::strcmp(v->name, name) == 0) {
            return v;
        }
    }
    return nullptr;
}

} // namespace

const ConfigVar *config_table() { return kTable; }

namespace {

/** Edit distance of a and b, stopping early once it exceeds limit. */
size_t edit_distance(const std::string &a, const std::string &b, size_t limit) {
    if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > limit) {
        return limit + 1;
    }
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        size_t row_min = cur[0];
        for (size_t j = 1; j <= b.size(); ++j) {
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1,
                               prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
            row_min = std::min(row_min, cur[j]);
        }
        if (row_min > limit) return limit + 1;
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

}  // namespace

std::vector<std::pair<std::string, std::string>> config_misspelled(const char *const *env) {
    constexpr size_t kMaxEdits = 2;
    std::vector<std::pair<std::string, std::string>> out;
    for (; env != nullptr && *env != nullptr; ++env) {
        const char *eq = std::strchr(*env, '=');
        if (std::strncmp(*env, "P2P_", 4) != 0 || eq == nullptr) continue;
        const std::string name(*env, eq);
        if (find(name.c_str()) != nullptr) continue;
        const ConfigVar *best = nullptr;
        size_t best_d = kMaxEdits + 1;
        for (const ConfigVar *v = kTable; v->name != nullptr; ++v) {
            size_t d = edit_distance(name, v->name, kMaxEdits);
            if (d < best_d) {
                best_d = d;
                best = v;
            }
        }
        if (best != nullptr) out.emplace_back(name, best->name);
    }
    return out;
}

void config_warn_misspelled(p2p_log_level_t level) {
    static std::atomic<bool> warned{false};
    if (level < P2P_LOG_WARN || warned.exchange(true)) {
        return;
    }
    for (const auto &m : config_misspelled(environ)) {
        // Not P2P_LOG: its level is still the environment's, not the
        // context's (set once its settings are all resolved).
        log_write(P2P_LOG_WARN, __FILE__, __LINE__, "config: %s is not a ucxp2p variable "
                  "and is ignored; did you mean %s? (p2p_info lists them all)",
                  m.first.c_str(), m.second.c_str());
    }
}

std::string config_get(const char *name) {
    const char *env = std::getenv(name);
    if (env != nullptr) {
        return env;
    }
    const ConfigVar *v = find(name);
    if (v == nullptr) {
        P2P_LOG(P2P_LOG_ERROR, "config: unknown variable %s", name);
        return "";
    }
    return v->default_value;
}

p2p_status_t config_get_u64(const char *name, uint64_t max, uint64_t *out, uint64_t min,
                            const char *keyword) {
    std::string s = config_get(name);
    errno = 0;
    char *end = nullptr;
    // strtoull skips spaces and takes signs: the first character must be a digit.
    const bool digits = !s.empty() && s[0] >= '0' && s[0] <= '9';
    unsigned long long v = digits ? std::strtoull(s.c_str(), &end, 10) : 0;
    if (!digits || errno != 0 || end == s.c_str() || *end != '\0' || v < min || v > max) {
        P2P_LOG(P2P_LOG_ERROR, "config: %s='%s' is not %s%san integer in [%llu, %llu]",
                name, s.c_str(), keyword != nullptr ? keyword : "",
                keyword != nullptr ? " or " : "", static_cast<unsigned long long>(min),
                static_cast<unsigned long long>(max));
        return P2P_ERR_INVALID_PARAM;
    }
    *out = v;
    return P2P_OK;
}

bool config_is(const std::string &value, const char *keyword) {
    return strcasecmp(value.c_str(), keyword) == 0;
}

p2p_status_t config_parse_on_off(const std::string &s, bool *out) {
    if (config_is(s, "on")) {
        *out = true;
    } else if (config_is(s, "off")) {
        *out = false;
    } else {
        return P2P_ERR_INVALID_PARAM;
    }
    return P2P_OK;
}

p2p_status_t config_parse_log_level(const std::string &s, p2p_log_level_t *out) {
    static const char *const names[] = {"error", "warn", "info", "debug",
                                        "trace"};
    for (int i = 0; i < 5; ++i) {
        if (strcasecmp(s.c_str(), names[i]) == 0) {
            *out = static_cast<p2p_log_level_t>(i);
            return P2P_OK;
        }
    }
    return P2P_ERR_INVALID_PARAM;
}

p2p_status_t config_parse_progress(const std::string &s,
                                   p2p_progress_mode_t *out) {
    if (strcasecmp(s.c_str(), "adaptive") == 0) {
        *out = P2P_PROGRESS_ADAPTIVE;
    } else if (strcasecmp(s.c_str(), "busy") == 0) {
        *out = P2P_PROGRESS_BUSY;
    } else if (strcasecmp(s.c_str(), "event") == 0) {
        *out = P2P_PROGRESS_EVENT;
    } else {
        return P2P_ERR_INVALID_PARAM;
    }
    return P2P_OK;
}

p2p_status_t config_parse_thread_mode(const std::string &s, p2p_thread_mode_t *out) {
    if (strcasecmp(s.c_str(), "multi") == 0) {
        *out = P2P_THREAD_MULTI;
    } else if (strcasecmp(s.c_str(), "serialized") == 0) {
        *out = P2P_THREAD_SERIALIZED;
    } else {
        return P2P_ERR_INVALID_PARAM;
    }
    return P2P_OK;
}

} // namespace ucxp2p

extern "C" p2p_status_t p2p_config_print(FILE *stream) {
    return ucxp2p::guarded("config print", [&]() -> p2p_status_t {
        if (stream == nullptr) {
            return P2P_ERR_INVALID_PARAM;
        }
        // Likely typos are listed last, where they are seen (nothing reads
        // them); found first, so that running out of memory prints nothing.
        const auto misspelled = ucxp2p::config_misspelled(environ);
        for (const ucxp2p::ConfigVar *v = ucxp2p::config_table(); v->name != nullptr; ++v) {
            const char *env = std::getenv(v->name);
            std::fprintf(stream, "# %s\n#   default: '%s'\n%s=%s%s\n\n", v->help,
                         v->default_value, v->name, env != nullptr ? env : v->default_value,
                         env != nullptr ? "   (set in environment)" : "");
        }
        for (const auto &m : misspelled) {
            std::fprintf(stream, "# %s is set but is not a ucxp2p variable (ignored); "
                         "did you mean %s?\n", m.first.c_str(), m.second.c_str());
        }
        return P2P_OK;
    });
}
