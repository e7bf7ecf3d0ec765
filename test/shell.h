/* Test helper: run a shell command and collect what it prints; count
 * what occurs in it. */
#ifndef UCXP2P_TEST_SHELL_H
#define UCXP2P_TEST_SHELL_H

#include <cstdio>
#include <string>

namespace p2ptest {

struct ShellResult {
    int status = -1;   /**< pclose()'s: 0 when the command exited 0 */
    std::string out;   /**< its stdout (add 2>&1 to the command for stderr) */
};

/** Runs cmd with /bin/sh; status -1 when it could not be started. */
inline ShellResult run_shell(const std::string &cmd) {
    ShellResult r;
    FILE *p = popen(cmd.c_str(), "r");
    if (p == nullptr) {
        return r;
    }
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
    r.status = pclose(p);
    return r;
}

/** How many times what occurs in text (overlapping ones too). */
inline size_t count_of(const std::string &text, const std::string &what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
        ++n;
    }
    return n;
}

} // namespace p2ptest

#endif
