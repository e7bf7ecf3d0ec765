/*
 * Owners for UCX handles: one class per handle type, copy deleted, release
 * in the destructor.
 */
#ifndef UCXP2P_CORE_UCX_RAII_H
#define UCXP2P_CORE_UCX_RAII_H

#include <ucp/api/ucp.h>

namespace ucxp2p {

#define P2P_NO_COPY(T)                                                         \
    T(const T &) = delete;                                                     \
    T &operator=(const T &) = delete

class UcpConfig {
public:
    UcpConfig() = default;
    ~UcpConfig() { if (cfg_ != nullptr) ucp_config_release(cfg_); }
    P2P_NO_COPY(UcpConfig);
    ucp_config_t **out() { return &cfg_; }
    ucp_config_t *get() const { return cfg_; }
private:
    ucp_config_t *cfg_ = nullptr;
};

class UcpContext {
public:
    UcpContext() = default;
    ~UcpContext() { if (ctx_ != nullptr) ucp_cleanup(ctx_); }
    P2P_NO_COPY(UcpContext);
    ucp_context_h *out() { return &ctx_; }
    ucp_context_h get() const { return ctx_; }
private:
    ucp_context_h ctx_ = nullptr;
};

class UcpWorker {
public:
    UcpWorker() = default;
    ~UcpWorker() { reset(); }
    P2P_NO_COPY(UcpWorker);
    ucp_worker_h *out() { return &w_; }
    ucp_worker_h get() const { return w_; }
    void reset() {
        if (w_ != nullptr) {
            ucp_worker_destroy(w_);
            w_ = nullptr;
        }
    }
private:
    ucp_worker_h w_ = nullptr;
};

/** Worker address (ucp_worker_get_address / release). */
class UcpAddress {
public:
    UcpAddress() = default;
    ~UcpAddress() { if (addr_ != nullptr) ucp_worker_release_address(w_, addr_); }
    P2P_NO_COPY(UcpAddress);
    ucs_status_t query(ucp_worker_h w) {
        w_ = w;
        return ucp_worker_get_address(w, &addr_, &len_);
    }
    const ucp_address_t *get() const { return addr_; }
    size_t length() const { return len_; }
private:
    ucp_worker_h w_ = nullptr;
    ucp_address_t *addr_ = nullptr;
    size_t len_ = 0;
};

} // namespace ucxp2p

#endif
