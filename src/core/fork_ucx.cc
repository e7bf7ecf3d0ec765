#include "core/fork_ucx.h"

#include "core/log.h"
#include "core/ucx_tls.h"
#include "core/ucx_user.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

namespace ucxp2p {

namespace {

std::atomic<bool> g_inherited{false};  // a child copies it, so descendants keep it
std::atomic<bool> g_at_fork{false};    // the forking process's answer, for its child

void before_fork() {
    if (!g_inherited.load()) {
        g_at_fork.store(fork_ucx_detail::async_thread_running());
    }
}

void in_parent() { g_at_fork.store(false); }

void in_child() {
    if (g_at_fork.load()) {
        g_inherited.store(true);
    }
}

const bool g_handlers = pthread_atfork(before_fork, in_parent, in_child) == 0;

/** Transports that add no UCX async handler in 1.13 (grep of its
 *  ucs_async_set_event_handler and ucs_async_add_timer callers). */
bool async_free(const UcxTls &tls) {
    return tls.allows_only({"posix", "sysv", "xpmem", "knem", "cma", "self", "cuda_copy",
                            "cuda_ipc", "gdr_copy"});
}

} // namespace

namespace fork_ucx_detail {

bool async_thread_running() {
    DIR *dir = opendir("/proc/self/task");
    if (dir == nullptr) {
        return false;
    }
    bool found = false;
    while (const dirent *e = readdir(dir)) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char path[300];  // "/proc/self/task/" + a d_name (at most 255)
        std::snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        const int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            continue;  // the thread ended meanwhile
        }
        char name[32];
        const ssize_t n = read(fd, name, sizeof(name));
        close(fd);
        if ((n == 5 || (n == 6 && name[5] == '\n')) && std::memcmp(name, "async", 5) == 0) {
            found = true;
            break;
        }
    }
    closedir(dir);
    return found;
}

} // namespace fork_ucx_detail

bool ucx_async_inherited() {
    (void)g_handlers;
    return g_inherited.load();
}

p2p_status_t fork_limit_transports(ucp_config_t *cfg) {
    if (!ucx_async_inherited()) {
        return P2P_OK;
    }
    std::string file;
    const char *user = ucx_user_value("UCX_TLS", &file);
    if (user != nullptr) {
        if (async_free(UcxTls(user))) {
            return P2P_OK;
        }
        P2P_LOG(P2P_LOG_ERROR, "context: this process was forked while UCX's async thread "
                "ran in its parent; UCX 1.13 has none here, and UCX_TLS='%s'%s%s allows "
                "transports that need it (tcp, InfiniBand): they would never connect. Use "
                "UCX_TLS=shm,self (peers on this host), or create the parent's context after "
                "the fork, or exec", user, file.empty() ? "" : " from ", file.c_str());
        return P2P_ERR_UNSUPPORTED;
    }
    const ucs_status_t st = ucp_config_modify(cfg, "TLS", "shm,self");
    if (st != UCS_OK) {
        P2P_LOG(P2P_LOG_ERROR, "context: cannot limit UCX_TLS to shm,self after a fork: %s",
                ucs_status_string(st));
        return P2P_ERR_TRANSPORT;
    }
    P2P_LOG(P2P_LOG_WARN, "context: this process was forked while UCX's async thread ran "
            "in its parent (UCX 1.13 has none here, and tcp and InfiniBand need it): "
            "UCX_TLS=shm,self for this context; peers on other hosts are unreachable");
    return P2P_OK;
}

} // namespace ucxp2p
