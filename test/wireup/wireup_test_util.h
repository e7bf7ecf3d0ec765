/*
 * Helpers for the wireup tests: a guard that isolates the bootstrap
 * environment variables, a free loopback port finder, and a fork harness
 * (children report through their exit code; the parent waits with a
 * deadline and kills leftovers).
 */
#ifndef UCXP2P_TEST_WIREUP_UTIL_H
#define UCXP2P_TEST_WIREUP_UTIL_H

#include <ucxp2p/p2p.h>

#include "../temp_dir.h"
#include "wireup/tcp_socket.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace wtest {

/** Saves every variable the bootstraps read, unsets them, restores them. */
class EnvGuard {
public:
    EnvGuard();
    ~EnvGuard();
    EnvGuard(const EnvGuard &) = delete;
    EnvGuard &operator=(const EnvGuard &) = delete;

private:
    std::vector<std::pair<std::string, std::pair<bool, std::string>>> saved_;
};

using Env = std::vector<std::pair<std::string, std::string>>;

/** First of n consecutive ports bindable on all addresses (none held). */
uint16_t free_port_block(int n);

/** Exit codes: -status for a bootstrap status (0 = P2P_OK), kCheckFailed for
 *  a failed data check, kTooSlow when a failure took too long. */
constexpr int kCheckFailed = 64;
constexpr int kTooSlow = 65;
constexpr int kThrew = 66;
constexpr int kKilled = 200;   /**< still running at the deadline */
constexpr int kSignaled = 201;

inline int code(p2p_status_t st) { return -static_cast<int>(st); }

/** 127.0.0.1:port. */
sockaddr_in loopback(uint16_t port);

/** Listens on every address at port (a stranger, or a launcher's store);
 *  0 or an errno, as tcp::tcp_listen. */
int listen_any(uint16_t port, ucxp2p::tcp::Fd *out);

/** Environment of rank r of an n-rank job on 127.0.0.1: P2P_MASTER_PORT unless
 *  port is 0 (scan P2P_PORT_RANGE), P2P_JOB_TOKEN unless token is empty. */
Env job_env(uint32_t r, uint32_t n, uint16_t port, const char *timeout_ms,
            const std::string &token);

/** fork(); the child sets env, runs body and _exit()s with its result. Its
 *  stderr goes to stderr_path when that is not empty. */
int spawn(const Env &env, const std::function<int()> &body,
          const std::string &stderr_path = std::string());

/** Sends this process's stderr to a file until text() is called. */
class StderrCapture {
public:
    StderrCapture();
    ~StderrCapture();
    StderrCapture(const StderrCapture &) = delete;
    StderrCapture &operator=(const StderrCapture &) = delete;
    /** Restore stderr; what was written meanwhile. */
    std::string text();

private:
    p2ptest::TempDir dir_;
    int saved_ = -1;
};

/** Wait for every child until deadline_ms; kill the rest. Exit codes in
 *  the order of pids. */
std::vector<int> wait_all(const std::vector<int> &pids, uint64_t deadline_ms);

uint64_t now_ms();

} // namespace wtest

#define CHILD_CHECK(cond)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            std::fprintf(stderr, "child %d: check failed at %s:%d: %s\n",      \
                         static_cast<int>(getpid()), __FILE__, __LINE__,       \
                         #cond);                                               \
            return ::wtest::kCheckFailed;                                      \
        }                                                                      \
    } while (0)

#endif
