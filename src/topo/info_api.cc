/* p2p_build_print / p2p_ucx_print: build configuration and UCX resources. */
#include "ucxp2p_config.h"

#include <ucxp2p/p2p_topo.h>

#include "core/config.h"
#include "core/context.h"
#include "core/guard.h"
#include "core/log.h"
#include "core/memtype.h"
#include "core/ucx_user.h"

#include <ucp/api/ucp.h>

#include <cstdio>

#ifdef HAVE_HWLOC
#include <hwloc.h>
#endif

namespace {

p2p_status_t build_print(FILE *s) {
    if (s == nullptr) {
        return P2P_ERR_INVALID_PARAM;
    }
    std::fprintf(s, "ucxp2p %s\n", p2p_version());
    std::fprintf(s, "  built against UCX %d.%d\n", UCP_API_MAJOR, UCP_API_MINOR);
#ifdef HAVE_HWLOC
    unsigned v = hwloc_get_api_version();
    std::fprintf(s, "  hwloc: yes (api %u.%u.%u)\n", v >> 16, (v >> 8) & 0xff,
                 v & 0xff);
#else
    std::fprintf(s, "  hwloc: no (no topology-aware rail planning)\n");
#endif
#ifdef HAVE_PMIX
    std::fprintf(s, "  pmix: yes\n");
#else
    std::fprintf(s, "  pmix: no\n");
#endif
#ifdef HAVE_CUDA
    std::fprintf(s, "  cuda: yes\n");
#else
    std::fprintf(s, "  cuda: no\n");
#endif
    return P2P_OK;
}

struct UcpConfig {
    ucp_config_t *cfg = nullptr;
    UcpConfig() = default;
    UcpConfig(const UcpConfig &) = delete;
    UcpConfig &operator=(const UcpConfig &) = delete;
    ~UcpConfig() {
        if (cfg != nullptr) ucp_config_release(cfg);
    }
};

struct UcpContext {
    ucp_context_h ctx = nullptr;
    UcpContext() = default;
    UcpContext(const UcpContext &) = delete;
    UcpContext &operator=(const UcpContext &) = delete;
    ~UcpContext() {
        if (ctx != nullptr) ucp_cleanup(ctx);
    }
};

p2p_status_t ucx_print(FILE *s) {
    if (s == nullptr) {
        return P2P_ERR_INVALID_PARAM;
    }
    std::fprintf(s, "UCX %s (library in use)\n", ucp_get_version_string());
    UcpConfig cfg;
    ucs_status_t st = ucp_config_read(nullptr, nullptr, &cfg.cfg);
    if (st != UCS_OK) {
        P2P_LOG(P2P_LOG_ERROR, "ucx info: ucp_config_read failed: %s",
                ucs_status_string(st));
        return P2P_ERR_TRANSPORT;
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG;
    UcpContext ctx;
    st = ucp_init(&params, cfg.cfg, &ctx.ctx);
    if (st != UCS_OK) {
        ctx.ctx = nullptr;
        P2P_LOG(P2P_LOG_ERROR, "ucx info: ucp_init failed: %s",
                ucs_status_string(st));
        return P2P_ERR_TRANSPORT;
    }
    const bool cuda = ucxp2p::memtype::ucx_moves_cuda(ctx.ctx);
    // What p2p_mem_register does with cudaMalloc memory (core/memtype.h,
    // core/staging.h).
    const std::string staging_value = ucxp2p::config_get("P2P_CUDA_STAGING");
    bool staging = false;
    if (ucxp2p::config_parse_on_off(staging_value, &staging) != P2P_OK) {
        // As context_settings_resolve reads it: no context starts.
        std::fprintf(s, "  CUDA device memory: P2P_CUDA_STAGING='%s' is not on or off "
                     "(p2p_context_create refuses it)\n", staging_value.c_str());
    } else {
        std::fprintf(s, "  CUDA device memory: %s\n",
                     cuda      ? "moved by UCX (same-host single copy off)"
                     : staging ? "staged through host memory (this UCX has no CUDA "
                                 "support; P2P_CUDA_STAGING=on)"
                               : "refused by p2p_mem_register (this UCX has no CUDA "
                                 "support and P2P_CUDA_STAGING=off; host, pinned "
                                 "and managed memory work)");
    }
    // The settings ucxp2p keeps as they are (core/ucx_user.h).
    const ucxp2p::UcxConf user = ucxp2p::ucx_user_settings();
    std::fprintf(s, "  user settings:%s\n", user.empty() ? " none" : "");
    for (const auto &kv : user) {
        std::fprintf(s, "    %s=%s (%s)\n", kv.first.c_str(), kv.second.value.c_str(),
                     kv.second.file.empty() ? "environment" : kv.second.file.c_str());
    }
    // What a context created now would set on top (context_ucx_defaults).
    ucxp2p::ContextSettings cs;
    if (ucxp2p::context_settings_resolve(nullptr, &cs) != P2P_OK) {
        std::fprintf(s, "  ucxp2p's settings: none known (a P2P_* variable is malformed: "
                        "p2p_context_create refuses it)\n");
    } else {
        std::fprintf(s, "  ucxp2p's settings (where the user set none):\n");
        for (const ucxp2p::UcxDefault &d : ucxp2p::context_ucx_default_list(cs)) {
            if (d.user_set()) {
                std::fprintf(s, "    UCX_%s=%s not set: the user's %s=%s stays\n",
                             d.name.c_str(), d.value.c_str(), d.user_name.c_str(),
                             d.user_value.c_str());
            } else {
                std::fprintf(s, "    UCX_%s=%s\n", d.name.c_str(), d.value.c_str());
            }
        }
    }
    ucp_context_print_info(ctx.ctx, s);
    return P2P_OK;
}

} // namespace

extern "C" p2p_status_t p2p_build_print(FILE *s) {
    return ucxp2p::guarded("build print", [&] { return build_print(s); });
}

extern "C" p2p_status_t p2p_ucx_print(FILE *s) {
    return ucxp2p::guarded("ucx print", [&] { return ucx_print(s); });
}
