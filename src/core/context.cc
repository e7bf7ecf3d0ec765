#include "core/context.h"
#include "core/cma.h"
#include "core/config.h"
#include "core/fork_ucx.h"
#include "core/log.h"
#include "core/memtype.h"
#include "core/rails.h"
#include "core/status.h"
#include "core/tcp_bulk.h"
#include "core/tcp_bulk_config.h"
#include "core/ucx_tls.h"
#include "core/ucx_user.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ucxp2p {

namespace {

constexpr uint64_t kKnownFields =
    P2P_CONFIG_FIELD_PROGRESS_MODE | P2P_CONFIG_FIELD_SPIN_US |
    P2P_CONFIG_FIELD_PEER_TIMEOUT_MS | P2P_CONFIG_FIELD_LOG_LEVEL |
    P2P_CONFIG_FIELD_LOCAL_RANK | P2P_CONFIG_FIELD_THREAD_MODE;
constexpr uint64_t kMaxSpinUs = 1000000;        // 1 s
constexpr uint64_t kMaxPeerTimeoutMs = 3600000; // 1 h

/** Set a UCX variable on our config object unless the user set it
 *  (d.user_set()): we never override the user's UCX settings. */
void ucx_default(ucp_config_t *cfg, const UcxDefault &d) {
    if (d.user_set()) {
        P2P_LOG(P2P_LOG_DEBUG, "context: keeping user's %s%s%s", d.user_name.c_str(),
                d.user_file.empty() ? "" : " from ", d.user_file.c_str());
        return;
    }
    ucs_status_t st = ucp_config_modify(cfg, d.name.c_str(), d.value.c_str());
    if (st != UCS_OK) {
        P2P_LOG(P2P_LOG_DEBUG, "context: ucx setting %s=%s not applied: %s",
                d.name.c_str(), d.value.c_str(), ucs_status_string(st));
    }
}

/** The integer a C caller stored in an enum field. Reading the field as the
 *  C++ enum type would be undefined for values outside the enumerators. */
template <class E> int enum_bits(const E &field) {
    int v;
    static_assert(sizeof(E) == sizeof(int), "enum is int-sized");
    std::memcpy(&v, &field, sizeof(v));
    return v;
}

/** An on/off variable: *out, or P2P_ERR_INVALID_PARAM (logged). */
p2p_status_t env_on_off(const char *name, bool *out) {
    const std::string v = config_get(name);
    if (config_parse_on_off(v, out) != P2P_OK) {
        P2P_LOG(P2P_LOG_ERROR, "context: %s='%s' is not on or off", name, v.c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    return P2P_OK;
}

} // namespace

p2p_status_t context_settings_resolve(const p2p_config_t *config,
                                      ContextSettings *out) {
    ContextSettings s{};
    p2p_status_t st;
    uint64_t mask = (config != nullptr) ? config->field_mask : 0;
    if (mask & ~kKnownFields) {
        P2P_LOG(P2P_LOG_ERROR, "context: unknown config field_mask bits 0x%llx",
                static_cast<unsigned long long>(mask & ~kKnownFields));
        return P2P_ERR_INVALID_PARAM;
    }
    if (mask & P2P_CONFIG_FIELD_PROGRESS_MODE) {
        int mode = enum_bits(config->progress_mode);
        if (mode < P2P_PROGRESS_ADAPTIVE || mode > P2P_PROGRESS_EVENT) {
            P2P_LOG(P2P_LOG_ERROR, "context: bad progress_mode %d", mode);
            return P2P_ERR_INVALID_PARAM;
        }
        s.progress_mode = static_cast<p2p_progress_mode_t>(mode);
    } else if (config_parse_progress(config_get("P2P_PROGRESS"),
                                     &s.progress_mode) != P2P_OK) {
        P2P_LOG(P2P_LOG_ERROR, "context: P2P_PROGRESS='%s' is not adaptive, "
                "busy or event", config_get("P2P_PROGRESS").c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    if (mask & P2P_CONFIG_FIELD_THREAD_MODE) {
        int mode = enum_bits(config->thread_mode);
        if (mode != P2P_THREAD_MULTI && mode != P2P_THREAD_SERIALIZED) {
            P2P_LOG(P2P_LOG_ERROR, "context: bad thread_mode %d", mode);
            return P2P_ERR_INVALID_PARAM;
        }
        s.thread_mode = static_cast<p2p_thread_mode_t>(mode);
    } else if (config_parse_thread_mode(config_get("P2P_THREAD_MODE"),
                                        &s.thread_mode) != P2P_OK) {
        P2P_LOG(P2P_LOG_ERROR, "context: P2P_THREAD_MODE='%s' is not multi or "
                "serialized", config_get("P2P_THREAD_MODE").c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    if (mask & P2P_CONFIG_FIELD_LOCAL_RANK) {
        if (config->local_size == 0 || config->local_rank >= config->local_size) {
            P2P_LOG(P2P_LOG_ERROR, "context: local_rank %u of local_size %u is "
                    "not a rank on this host", config->local_rank, config->local_size);
            return P2P_ERR_INVALID_PARAM;
        }
        s.has_local_rank = true;
        s.local_rank = config->local_rank;
        s.local_size = config->local_size;
    }
    if ((st = env_on_off("P2P_LOCK_BIAS", &s.lock_bias)) != P2P_OK ||
        (st = env_on_off("P2P_CLOSE_HANDSHAKE", &s.close_handshake)) != P2P_OK ||
        (st = env_on_off("P2P_CUDA_STAGING", &s.cuda_staging)) != P2P_OK ||
        (st = cma::check_settings()) != P2P_OK ||
        (st = tcpb::check_settings()) != P2P_OK) {
        return st;
    }
    uint64_t v;
    if (mask & P2P_CONFIG_FIELD_SPIN_US) {
        if (config->spin_us > kMaxSpinUs) {
            P2P_LOG(P2P_LOG_ERROR, "context: spin_us %u above %llu",
                    config->spin_us, static_cast<unsigned long long>(kMaxSpinUs));
            return P2P_ERR_INVALID_PARAM;
        }
        s.spin_us = config->spin_us;
    } else {
        if ((st = config_get_u64("P2P_SPIN_US", kMaxSpinUs, &v)) != P2P_OK) {
            return st;
        }
        s.spin_us = static_cast<uint32_t>(v);
    }
    if ((st = config_get_u64("P2P_SPIN_BUSY_US", kMaxSpinUs, &v)) != P2P_OK) {
        return st;
    }
    s.spin_busy_us = static_cast<uint32_t>(v);
    if (mask & P2P_CONFIG_FIELD_PEER_TIMEOUT_MS) {
        v = config->peer_timeout_ms;
        if (v < 10 || v > kMaxPeerTimeoutMs) {
            P2P_LOG(P2P_LOG_ERROR, "context: peer timeout %llu ms outside [10, %llu]",
                    static_cast<unsigned long long>(v),
                    static_cast<unsigned long long>(kMaxPeerTimeoutMs));
            return P2P_ERR_INVALID_PARAM;
        }
    } else if ((st = config_get_u64("P2P_PEER_TIMEOUT_MS", kMaxPeerTimeoutMs,
                                    &v, 10)) != P2P_OK) {
        return st;  // the same range, checked and logged there
    }
    s.peer_timeout_ms = static_cast<uint32_t>(v);
    if (mask & P2P_CONFIG_FIELD_LOG_LEVEL) {
        int level = enum_bits(config->log_level);
        if (level < P2P_LOG_ERROR || level > P2P_LOG_TRACE) {
            P2P_LOG(P2P_LOG_ERROR, "context: bad log_level %d", level);
            return P2P_ERR_INVALID_PARAM;
        }
        s.log_level = static_cast<p2p_log_level_t>(level);
    } else if (config_parse_log_level(config_get("P2P_LOG_LEVEL"), &s.log_level) !=
               P2P_OK) {
        P2P_LOG(P2P_LOG_ERROR, "context: P2P_LOG_LEVEL='%s' unknown",
                config_get("P2P_LOG_LEVEL").c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    config_warn_misspelled(s.log_level);
    *out = s;
    return P2P_OK;
}

std::vector<UcxDefault> context_ucx_default_list(const ContextSettings &settings) {
    std::vector<UcxDefault> out;
    // Shared memory transports must advertise peer-failure support, or UCX
    // drops them for endpoints created with UCP_ERR_HANDLING_MODE_PEER.
    // (Unless UCX_TLS rules them all out: then the setting would only draw
    // an "invalid configuration" warning.)
    if (UcxTls::from_environment().allows_shm_am()) {
        out.push_back({"MM_ERROR_HANDLING", "y"});
        // A FIFO of 64 elements (UCX's default) fills while a window of
        // small sends is in flight: each send past it goes by UCX's pending
        // queue and completes later, through a callback. With 256: 8 B
        // rate +38-45% (medians), 4 KiB bandwidth +43% on 2 cores, RSS
        // unchanged (docs/PERFORMANCE.md, 2026-11-30 04:40).
        out.push_back({"MM_FIFO_SIZE", std::to_string(kMmFifoSize)});
    }
    // Bound the time to detect a dead peer (keepalive rounds).
    out.push_back({"KEEPALIVE_INTERVAL",
                   std::to_string(std::max<uint32_t>(settings.peer_timeout_ms / 3, 5)) + "ms"});
    for (UcxDefault &d : out) {
        const std::string env = "UCX_" + d.name;
        if (const char *v = ucx_user_value(env.c_str(), &d.user_file, &d.user_name)) {
            d.user_value = v;
        }
    }
    return out;
}

void context_ucx_defaults(ucp_config_t *cfg, const ContextSettings &settings) {
    for (const UcxDefault &d : context_ucx_default_list(settings)) {
        ucx_default(cfg, d);
    }
}

p2p_status_t context_check_message_transport() {
    std::string file;
    const char *tls = ucx_user_value("UCX_TLS", &file);
    if (tls == nullptr || !UcxTls(tls).allows_only({"self", "cma", "knem", "cuda_copy",
                                                    "cuda_ipc", "gdr_copy"})) {
        return P2P_OK;
    }
    P2P_LOG(P2P_LOG_ERROR, "context: UCX_TLS='%s'%s%s names no transport that carries "
            "messages (shm, tcp or an rdma one); ucxp2p needs one, also for a process "
            "alone", tls, file.empty() ? "" : " in ", file.c_str());
    return P2P_ERR_NO_DEVICE;
}

p2p_status_t Context::create(const ContextSettings &settings,
                             std::unique_ptr<Context> *out) {
    std::unique_ptr<Context> c(new Context());
    c->settings_ = settings;
    if (settings.thread_mode == P2P_THREAD_SERIALIZED) {
        c->worker_mu_.set_asymmetric();  // one call at a time (core/lock.h)
    } else if (settings.lock_bias) {
        c->worker_mu_.set_biased();  // favours the thread that polls (core/lock.h)
    }
    log_set_level(settings.log_level);

    UcpConfig cfg;
    ucs_status_t st = ucp_config_read(nullptr, nullptr, cfg.out());
    if (st != UCS_OK) {
        P2P_LOG(P2P_LOG_ERROR, "context: ucp_config_read failed: %s",
                ucs_status_string(st));
        return P2P_ERR_TRANSPORT;
    }
    context_ucx_defaults(cfg.get(), settings);
    // A child of a process that ran UCX's async thread (core/fork_ucx.h).
    p2p_status_t fs = fork_limit_transports(cfg.get());
    if (fs != P2P_OK) {
        return fs;
    }

    // Rails (src/core/rails.h): the plan's UCX_NET_DEVICES / rails settings.
    LocalRank given;
    if (settings.has_local_rank) {
        given.rank = settings.local_rank;
        given.size = settings.local_size;
        given.source = "p2p_config_t";
    }
    p2p_status_t rs = rails_apply_ucx(cfg.get(), settings.has_local_rank ? &given : nullptr);
    if (rs != P2P_OK) {
        return rs;
    }

    bool wakeup = settings.progress_mode != P2P_PROGRESS_BUSY;
    ucp_params_t params = {};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_AM | (wakeup ? UCP_FEATURE_WAKEUP : 0);
    params.mt_workers_shared = 0;
    st = ucp_init(&params, cfg.get(), c->ucp_.out());
    // No transport or device to use (UCX_TLS or UCX_NET_DEVICES name none
    // here) is not about events: UCX 1.13 selects the same ones with and
    // without WAKEUP. A retry would only print UCX's error a second time.
    if (st != UCS_OK && st != UCS_ERR_NO_DEVICE && wakeup) {
        P2P_LOG(P2P_LOG_INFO, "context: ucp_init with wakeup failed (%s), "
                "retrying without event support", ucs_status_string(st));
        wakeup = false;
        params.features = UCP_FEATURE_TAG | UCP_FEATURE_AM;
        st = ucp_init(&params, cfg.get(), c->ucp_.out());
    }
    if (st != UCS_OK) {
        P2P_LOG(P2P_LOG_ERROR, "context: ucp_init failed: %s", ucs_status_string(st));
        return st == UCS_ERR_NO_DEVICE ? P2P_ERR_NO_DEVICE : P2P_ERR_TRANSPORT;
    }

    c->ucx_cuda_ = memtype::ucx_moves_cuda(c->ucp_.get());
    P2P_LOG(P2P_LOG_DEBUG, "context: UCX %s CUDA memory", c->ucx_cuda_ ? "moves" : "cannot move");

    ucp_worker_params_t wp = {};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    st = ucp_worker_create(c->ucp_.get(), &wp, c->worker_.out());
    if (st != UCS_OK) {
        P2P_LOG(P2P_LOG_ERROR, "context: ucp_worker_create failed: %s",
                ucs_status_string(st));
        return status_from_ucs(st) == P2P_ERR_NO_MEMORY ? P2P_ERR_NO_MEMORY
                                                        : P2P_ERR_TRANSPORT;
    }
    st = c->listen_for_notes();
    if (st != UCS_OK) {
        P2P_LOG(P2P_LOG_ERROR, "context: cannot set the goodbye handler: %s",
                ucs_status_string(st));
        return P2P_ERR_TRANSPORT;
    }
    st = c->address_.query(c->worker_.get());
    if (st != UCS_OK) {
        P2P_LOG(P2P_LOG_ERROR, "context: ucp_worker_get_address failed: %s",
                ucs_status_string(st));
        return P2P_ERR_TRANSPORT;
    }

    Progress::Options po;
    po.mode = settings.progress_mode;
    po.spin_us = settings.spin_us;
    po.spin_busy_us = std::max(settings.spin_us, settings.spin_busy_us);
    // Wake at least a few times per peer timeout so keepalive runs.
    po.tick_ms = std::min<uint32_t>(100, std::max<uint32_t>(settings.peer_timeout_ms / 10, 1));
    po.wakeup_supported = wakeup;
    po.serialized = settings.thread_mode == P2P_THREAD_SERIALIZED;
    po.periodic = &c->periodic_due_;
    po.period_ns = std::max<int64_t>(int64_t(settings.peer_timeout_ms) * 1000000 / 4, 10000000);
    Context *raw = c.get();
    c->progress_.reset(new Progress(c->worker_.get(), c->worker_mu_, po,
                                    [raw] { raw->run_deferred_hooks(); }));
    p2p_status_t ps = c->progress_->start();
    if (ps != P2P_OK) {
        return ps;
    }
    P2P_LOG(P2P_LOG_INFO, "context: created (threads %s, progress %d, spin %u us, "
            "peer timeout %u ms, wakeup %d)",
            settings.thread_mode == P2P_THREAD_MULTI ? "multi" : "serialized",
            static_cast<int>(settings.progress_mode), settings.spin_us,
            settings.peer_timeout_ms, wakeup ? 1 : 0);
    *out = std::move(c);
    return P2P_OK;
}

Context::~Context() {
    if (progress_) {
        progress_->stop();
    }
    close_gone_eps(/*all=*/true);  // before the worker goes
    flush_lingering();
    close_lingering(/*all=*/true);
    // No communicator is left: what still waits in UCX's unexpected queue
    // (sent to one after its last drain) is nobody's. Dropped here, not by
    // the worker's destroy, which warns once per message.
    // (No worker: creation failed before it was made.)
    const size_t n = worker_.get() ? drop_unexpected(worker_.get(), 0, 0) : 0;
    if (n != 0) {
        P2P_LOG(P2P_LOG_DEBUG, "context: dropped %zu messages nobody received", n);
    }
}

tcpb::Server *Context::bulk_server() {
    std::lock_guard<std::mutex> lock(bulk_mu_);
    if (!bulk_tried_) {
        bulk_tried_ = true;
        int err = 0;
        bulk_owner_ = tcpb::Server::start(static_cast<int>(settings_.peer_timeout_ms), &err,
                                          rails_net_devices());
        if (bulk_owner_) {
            P2P_LOG(P2P_LOG_DEBUG, "context: tcp bulk server on port %u",
                    static_cast<unsigned>(bulk_owner_->address().port));
        } else {
            P2P_LOG(P2P_LOG_INFO, "context: no tcp bulk server (%s); large "
                    "messages over tcp go through UCX", std::strerror(err));
        }
        bulk_.store(bulk_owner_.get(), std::memory_order_release);
    }
    return bulk_owner_.get();
}

void Context::bulk_withdraw(uint32_t seq) {
    if (tcpb::Server *s = bulk_.load(std::memory_order_acquire)) s->withdraw(seq);
}

bool Context::bulk_serving() const {
    const tcpb::Server *s = bulk_.load(std::memory_order_acquire);
    return s != nullptr && s->serving();
}

void Context::keep_until_worker_gone(void *p, void (*free)(void *)) noexcept {
    try {
        orphans_.list.emplace_back(p, free);
    } catch (const std::bad_alloc &) {
        // out of memory: p stays allocated for good, never freed early
    }
}

Context::CommIdSet Context::free_comm_ids(CommIdGens *gens) {
    std::lock_guard<std::mutex> lock(ids_mu_);
    *gens = id_gens_;
    CommIdSet f;
    for (size_t i = 0; i < f.size(); ++i) {
        f[i] = static_cast<uint8_t>(~used_ids_[i]);
    }
    return f;
}

Context::CommIdSet Context::reserve_comm_ids(CommIdGens *gens, bool *contended) {
    std::lock_guard<std::mutex> lock(ids_mu_);
    *gens = id_gens_;
    *contended = false;
    CommIdSet f;
    for (size_t i = 0; i < f.size(); ++i) {
        *contended = *contended || reserved_ids_[i] != 0;
        f[i] = static_cast<uint8_t>(~(used_ids_[i] | reserved_ids_[i]));
        reserved_ids_[i] |= f[i];
    }
    return f;
}

void Context::unreserve_locked(const CommIdSet &held) {
    for (size_t i = 0; i < held.size(); ++i) {
        reserved_ids_[i] &= static_cast<uint8_t>(~held[i]);
    }
}

void Context::claim_reserved_id(unsigned id, uint8_t gen, const CommIdSet &held) {
    std::lock_guard<std::mutex> lock(ids_mu_);
    unreserve_locked(held);
    if (id < kMaxComms) {
        used_ids_[id / 8] |= static_cast<uint8_t>(1u << (id % 8));
        id_gens_[id] = gen;
    }
}

void Context::unreserve_comm_ids(const CommIdSet &held) {
    std::lock_guard<std::mutex> lock(ids_mu_);
    unreserve_locked(held);
}

void Context::release_comm_id(unsigned id) {
    std::lock_guard<std::mutex> lock(ids_mu_);
    if (id < kMaxComms) {
        used_ids_[id / 8] &= static_cast<uint8_t>(~(1u << (id % 8)));
    }
}

void Context::add_deferred_hook(const void *owner, std::function<void()> hook) {
    std::lock_guard<Mutex> lock(worker_mu_);
    hooks_.emplace_back(owner, std::move(hook));
}

void Context::remove_deferred_hook(const void *owner) {
    std::lock_guard<Mutex> lock(worker_mu_);
    for (auto it = hooks_.begin(); it != hooks_.end();) {
        it = (it->first == owner) ? hooks_.erase(it) : it + 1;
    }
}

void Context::run_deferred_hooks() {
    if (!deferred_pending_ && !periodic_due_.load(std::memory_order_relaxed)) {
        return;  // the common case: two loads per progress call
    }
    periodic_run_ = periodic_due_.exchange(false, std::memory_order_relaxed);
    // A few rounds at most: another runs only when a hook took more in
    // (take_in_from_hook) and that asked for deferred work; else what a
    // hook requests runs after the next progress call.
    constexpr int kMaxRounds = 4;
    for (int round = 1;; ++round) {
        deferred_pending_ = false;
        hooks_took_in_ = false;
        answer_gone_hellos();
        drop_late_messages();
        close_gone_eps();
        close_lingering();
        reap_orphans();
        for (auto &h : hooks_) {
            h.second();
        }
        if (!hooks_took_in_ || !deferred_pending_ || round == kMaxRounds) return;
        periodic_run_ = false;  // periodic work once per run
    }
}

unsigned Context::take_in_from_hook() {
    const unsigned n = progress().conclude_and_take_in_locked();
    if (n != 0) hooks_took_in_ = true;
    return n;
}

} // namespace ucxp2p
