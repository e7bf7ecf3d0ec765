/*
 * What perftest_test's files share: running p2p_perftest and p2p_demo under
 * p2prun with a deadline, with or without fault_send.cc preloaded, and
 * reading their output.
 */
#ifndef UCXP2P_TEST_PERFTEST_UTIL_H
#define UCXP2P_TEST_PERFTEST_UTIL_H

#include "../top_dirs.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace perftest_test {

inline std::string builddir() { return p2ptest::top_builddir(); }

inline std::string perftest() { return builddir() + "/tools/perftest/p2p_perftest"; }
inline std::string demo() { return builddir() + "/tools/demo/p2p_demo"; }
inline std::string p2prun() { return builddir() + "/tools/p2prun/p2prun"; }

struct ProcResult {
    int rc = -1;
    std::string out;
    std::string err;
};

inline std::string slurp(const std::string &path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

/** Run a shell command with a hard deadline; capture stdout and stderr. */
inline ProcResult run(const std::string &cmd, int timeout_s = 90) {
    char tmpl[] = "/tmp/p2p_perftest_test.XXXXXX";
    ProcResult r;
    if (mkdtemp(tmpl) == nullptr) {
        return r;
    }
    std::string dir = tmpl;
    std::string full = "timeout -k 5 " + std::to_string(timeout_s) + " " +
                       cmd + " >" + dir + "/out 2>" + dir + "/err";
    int status = std::system(full.c_str());
    r.rc = (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
    r.out = slurp(dir + "/out");
    r.err = slurp(dir + "/err");
    std::remove((dir + "/out").c_str());
    std::remove((dir + "/err").c_str());
    rmdir(dir.c_str());
    return r;
}

/** 2 ranks under p2prun; UCX restricted to shared memory for speed. */
inline ProcResult run2(const std::string &args) {
    return run("env UCX_TLS=shm,self " + p2prun() +
               " -n 2 --no-prefix --timeout 80 -- " + perftest() +
               " " + args);
}

/** stdout from the first line that starts with `prefix` (UCX prints its
 *  own warnings to stdout by default; they are not ours to parse). */
inline std::string from_line(const std::string &out, const std::string &prefix) {
    size_t pos = 0;
    while (pos < out.size()) {
        if (out.compare(pos, prefix.size(), prefix) == 0) {
            return out.substr(pos);
        }
        size_t nl = out.find('\n', pos);
        if (nl == std::string::npos) {
            break;
        }
        pos = nl + 1;
    }
    return "";
}

inline bool have_p2prun() { return access(p2prun().c_str(), X_OK) == 0; }

/** `prog args` on n ranks with test/perftest/fault_send.cc preloaded:
 *  FAULT (a mode, then any more variables such as FAULT_NTH=N) on rank
 *  FAULT_RANK. */
inline ProcResult run_fault(const std::string &fault, int rank, const std::string &prog, int n,
                            const std::string &args) {
    const char *asan = std::getenv("ASAN_OPTIONS");
    return run("env UCX_TLS=shm,self FAULT=" + fault + " FAULT_RANK=" + std::to_string(rank) +
               " LD_PRELOAD=" + builddir() + "/test/perftest/.libs/libfault_send.so" +
               " ASAN_OPTIONS=verify_asan_link_order=0:" + (asan != nullptr ? asan : "") +
               " " + p2prun() + " -n " + std::to_string(n) + " --no-prefix --timeout 80 -- " +
               prog + " " + args);
}

inline ProcResult run2_fault(const std::string &fault, int rank, const std::string &args) {
    return run_fault(fault, rank, perftest(), 2, args);
}

/** Every comma-separated field of a line, empty ones included. */
inline std::vector<std::string> csv_fields(const std::string &line) {
    std::vector<std::string> f;
    size_t start = 0;
    for (size_t at = line.find(','); at != std::string::npos; at = line.find(',', start)) {
        f.push_back(line.substr(start, at - start));
        start = at + 1;
    }
    f.push_back(line.substr(start));
    return f;
}

/** The errors column (named by the header line) of the first CSV row of
 *  test `test`; -1 when absent. */
inline long csv_errors(const std::string &out, const std::string &test) {
    auto first_line = [](const std::string &text) { return text.substr(0, text.find('\n')); };
    const std::vector<std::string> head = csv_fields(first_line(from_line(out, "test,")));
    const std::vector<std::string> row = csv_fields(first_line(from_line(out, test + ",")));
    for (size_t i = 0; i < head.size() && i < row.size(); ++i) {
        if (head[i] == "errors") return std::strtol(row[i].c_str(), nullptr, 10);
    }
    return -1;
}

} // namespace perftest_test

#endif
