#include "wireup_test_util.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

namespace wtest {

namespace {

const char *const kVars[] = {
    "P2P_BOOTSTRAP", "P2P_MASTER_ADDR", "MASTER_ADDR", "P2P_MASTER_PORT",
    "MASTER_PORT", "P2P_PORT_RANGE", "P2P_IF_IP", "P2P_IFNAME", "P2P_RANK",
    "RANK", "P2P_WORLD_SIZE", "WORLD_SIZE", "P2P_LOCAL_RANK", "LOCAL_RANK",
    "P2P_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", "P2P_JOB_TOKEN",
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "P2P_BOOTSTRAP_TIMEOUT_MS",
    "P2P_BOOTSTRAP_MAX_MSG",
    "P2P_HOST_ID", "PMIX_RANK", "PMIX_NAMESPACE", "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE", "SLURM_STEP_NUM_TASKS"};

bool port_free(uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return false;
    }
    sockaddr_in sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    bool ok = ::bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) == 0;
    ::close(fd);
    return ok;
}

} // namespace

EnvGuard::EnvGuard() {
    for (const char *v : kVars) {
        const char *cur = std::getenv(v);
        saved_.push_back({v, {cur != nullptr, cur != nullptr ? cur : ""}});
        ::unsetenv(v);
    }
}

EnvGuard::~EnvGuard() {
    for (const auto &s : saved_) {
        if (s.second.first) {
            ::setenv(s.first.c_str(), s.second.second.c_str(), 1);
        } else {
            ::unsetenv(s.first.c_str());
        }
    }
}

uint16_t free_port_block(int n) {
    // Below the usual ephemeral range (32768+) so the kernel does not hand
    // these ports to outgoing connections meanwhile.
    static std::mt19937 rng(static_cast<unsigned>(getpid() ^ now_ms()));
    std::uniform_int_distribution<int> dist(20000, 32000 - n);
    for (int attempt = 0; attempt < 1000; ++attempt) {
        int base = dist(rng);
        bool ok = true;
        for (int i = 0; i < n && ok; ++i) {
            ok = port_free(static_cast<uint16_t>(base + i));
        }
        if (ok) {
            return static_cast<uint16_t>(base);
        }
    }
    return 0;
}

uint64_t now_ms() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

sockaddr_in loopback(uint16_t port) {
    sockaddr_in sa = {};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sa;
}

int listen_any(uint16_t port, ucxp2p::tcp::Fd *out) {
    in_addr any;
    any.s_addr = htonl(INADDR_ANY);
    return ucxp2p::tcp::tcp_listen(any, port, out);
}

Env job_env(uint32_t r, uint32_t n, uint16_t port, const char *timeout_ms,
            const std::string &token) {
    Env e = {{"RANK", std::to_string(r)},
             {"WORLD_SIZE", std::to_string(n)},
             {"MASTER_ADDR", "127.0.0.1"},
             {"P2P_BOOTSTRAP_TIMEOUT_MS", timeout_ms}};
    if (!token.empty()) {
        e.push_back({"P2P_JOB_TOKEN", token});
    }
    if (port != 0) {
        e.push_back({"P2P_MASTER_PORT", std::to_string(port)});
    }
    return e;
}

StderrCapture::StderrCapture() {
    std::fflush(stderr);
    int fd = ::open(dir_.file("stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                    0600);
    if (fd >= 0) {
        saved_ = ::dup(2);
        ::dup2(fd, 2);
        ::close(fd);
    }
}

StderrCapture::~StderrCapture() { (void)text(); }

std::string StderrCapture::text() {
    if (saved_ >= 0) {
        std::fflush(stderr);
        ::dup2(saved_, 2);
        ::close(saved_);
        saved_ = -1;
    }
    return dir_.read("stderr");
}

int spawn(const Env &env, const std::function<int()> &body,
          const std::string &stderr_path) {
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid = ::fork();
    if (pid != 0) {
        return pid;  // parent (or -1)
    }
    if (!stderr_path.empty()) {
        int fd = ::open(stderr_path.c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) {
            ::dup2(fd, 2);
            ::close(fd);
        }
    }
    for (const auto &e : env) {
        ::setenv(e.first.c_str(), e.second.c_str(), 1);
    }
    int rc = kThrew;
    try {
        rc = body();
    } catch (...) {
        rc = kThrew;
    }
    std::fflush(stderr);
    ::_exit(rc);
}

std::vector<int> wait_all(const std::vector<int> &pids, uint64_t deadline_ms) {
    std::vector<int> codes(pids.size(), -1);
    size_t left = pids.size();
    uint64_t end = now_ms() + deadline_ms;
    while (left > 0 && now_ms() < end) {
        for (size_t i = 0; i < pids.size(); ++i) {
            if (codes[i] != -1 || pids[i] <= 0) {
                if (pids[i] <= 0 && codes[i] == -1) {
                    codes[i] = kKilled;
                    --left;
                }
                continue;
            }
            int status = 0;
            pid_t r = ::waitpid(pids[i], &status, WNOHANG);
            if (r == pids[i]) {
                codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : kSignaled;
                --left;
            }
        }
        if (left > 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    for (size_t i = 0; i < pids.size(); ++i) {
        if (codes[i] == -1) {
            std::fprintf(stderr, "wait_all: killing pid %d at the deadline\n",
                         pids[i]);
            ::kill(pids[i], SIGKILL);
            int status = 0;
            ::waitpid(pids[i], &status, 0);
            codes[i] = kKilled;
        }
    }
    return codes;
}

} // namespace wtest
