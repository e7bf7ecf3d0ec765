/*
 * mp_test's fixture: a test runs an mp_rank scenario through p2prun, once
 * per transport (the Transports instantiation, in mp_test.cc).
 */
#ifndef UCXP2P_TEST_MP_MP_TEST_H
#define UCXP2P_TEST_MP_MP_TEST_H

#include "mp_launch.h"
#include "../top_dirs.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <ostream>
#include <regex>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace mpt {

using mptest::Launch;

struct Transport {
    const char *name;
    std::vector<std::string> env; // NAME=VALUE passed with -x
};

// gtest prints parameters of failing tests with this.
inline void PrintTo(const Transport &t, std::ostream *os) { *os << t.name; }

// For tests whose scenario keeps a UCX send of 64 KiB or more in flight
// to a rank that never receives it (it stopped, left or died): that send
// must be rendezvous. Sent eagerly it completes P2P_OK at once, as
// documented, and over tcp a peer's death with eager zero-copy sends out
// meets UCX 1.13's abort (README, Peer failure). UCX's own threshold
// depends on the machine: an H200's 16-core host sent 128 KiB over shared
// memory eagerly, where this VM uses rendezvous.
const char *const kRendezvous = "UCX_RNDV_THRESH=16K";
// And for tests whose sender must finish small sends (4 KiB) before its
// receiver posts: those must be eager (a user's UCX_RNDV_THRESH=1K made
// them rendezvous, and the sender waited for good).
const char *const kEagerSmall = "UCX_RNDV_THRESH=64K";

// Over tcp, messages from 256 KiB take the library's own tcp path
// (core/tcp_bulk.h) from the first: with the default (auto) a size class
// starts through UCX and tries the path only from its 512th send, so the
// scenarios' few large messages would never reach it. The tests of the
// choice itself (mp_test_tcp_bulk.cc) set auto again.
const char *const kTcpPath = "P2P_TCP_BULK_THRESH=262144";
const Transport kShm = {"shm", {"UCX_TLS=shm,self"}};
const Transport kTcp = {"tcp", {"UCX_TLS=tcp", "UCX_NET_DEVICES=lo", kTcpPath}};
// P2P_THREAD_SERIALIZED: no progress thread; every scenario but `threads`
// makes one call at a time, so its own polls and waits must move the data
// (and detect dead peers).
const Transport kShmSerial = {"shm_serialized",
                              {"UCX_TLS=shm,self", "P2P_THREAD_MODE=serialized"}};
const Transport kTcpSerial = {"tcp_serialized", {"UCX_TLS=tcp", "UCX_NET_DEVICES=lo",
                                                 kTcpPath, "P2P_THREAD_MODE=serialized"}};

inline bool is_tcp(const Transport &t) { return std::string(t.name).rfind("tcp", 0) == 0; }
// Same-host single copy (src/core/cma.h) applies to the shm runs only:
// UCX_TLS=tcp turns it off.
inline bool single_copy(const Transport &t) { return !is_tcp(t); }
inline bool is_serialized(const Transport &t) {
    return std::string(t.name).find("serialized") != std::string::npos;
}

inline std::string p2prun_path() { return p2ptest::top_builddir() + "/tools/p2prun/p2prun"; }
inline std::string mp_rank_path() { return p2ptest::top_builddir() + "/test/mp/mp_rank"; }

inline bool executable(const std::string &p) { return access(p.c_str(), X_OK) == 0; }

struct RunSpec {
    int ranks = 2;
    int timeout_s = 90;
    std::vector<std::string> args;     // after "mp_rank"
    std::vector<std::string> env;      // extra -x NAME=VALUE
    bool keep_going = false;
    std::vector<std::string> wrap;     // runs mp_rank (e.g. sh -c '...')
};

class MpTest : public ::testing::TestWithParam<Transport> {
protected:
    void SetUp() override {
        ASSERT_TRUE(executable(p2prun_path())) << p2prun_path() << " not built";
        ASSERT_TRUE(executable(mp_rank_path())) << mp_rank_path() << " not built";
    }

    std::vector<std::string> command(const RunSpec &s) const {
        std::vector<std::string> argv = {p2prun_path(), "-n",
                                         std::to_string(s.ranks), "--timeout",
                                         std::to_string(s.timeout_s)};
        if (s.keep_going) {
            argv.push_back("--keep-going");
        }
        // The harness's default first: a later -x of the same name wins, so
        // a test's own setting (s.env) takes effect.
        std::vector<std::string> env = {"P2P_PEER_TIMEOUT_MS=2000"};
        env.insert(env.end(), GetParam().env.begin(), GetParam().env.end());
        env.insert(env.end(), s.env.begin(), s.env.end());
        for (const std::string &e : env) {
            argv.push_back("-x");
            argv.push_back(e);
        }
        argv.push_back("--");
        argv.insert(argv.end(), s.wrap.begin(), s.wrap.end());
        argv.push_back(mp_rank_path());
        argv.insert(argv.end(), s.args.begin(), s.args.end());
        return argv;
    }

    static std::string joined(const std::vector<std::string> &v) {
        std::string s;
        for (const std::string &a : v) {
            s += (s.empty() ? "" : " ") + a;
        }
        return s;
    }

    /** 2 ranks (--keep-going) where rank 1 dies by SIGKILL: p2prun reports
     *  it, the output says `ok` and nothing failed. Returns the output. */
    std::string expect_rank_killed(std::vector<std::string> args, const char *ok,
                                   std::vector<std::string> env = {}) {
        RunSpec s;
        s.keep_going = true;
        s.timeout_s = 90;
        s.args = std::move(args);
        s.env = std::move(env);
        std::string out;
        int st = run(s, &out);
        EXPECT_EQ(137, st) << "p2prun must report rank 1's SIGKILL\n" << out;
        EXPECT_NE(std::string::npos, out.find(ok)) << out;
        EXPECT_EQ(std::string::npos, out.find("FAIL")) << out;
        return out;
    }

    /** Run to the end; returns p2prun's status, output in *out. */
    int run(const RunSpec &s, std::string *out) {
        std::vector<std::string> argv = command(s);
        Launch l(argv);
        EXPECT_TRUE(l.started()) << joined(argv);
        auto t0 = std::chrono::steady_clock::now();
        int st = l.wait(s.timeout_s + 30);
        double took = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - t0).count();
        *out = l.output();
        RecordProperty("seconds", std::to_string(took));
        std::printf("[ mp_test  ] %s: status %d in %.1f s\n", joined(s.args).c_str(),
                    st, took);
        return st;
    }

    /** The scenario must exit 0 and print `ok_word` once per rank.
     *  Returns the output for further checks. */
    std::string expect_pass(const RunSpec &s, const std::string &ok_word) {
        std::string out;
        int st = run(s, &out);
        EXPECT_EQ(0, st) << joined(command(s)) << "\n" << out;
        EXPECT_EQ(static_cast<size_t>(s.ranks), count(out, ok_word))
            << "expected '" << ok_word << "' from every rank:\n" << out;
        return out;
    }

    /** expect_pass of scenario args[0] on `ranks` ranks with nothing else
     *  set: each rank must print "<scenario> ok". */
    void expect_scenario(const std::vector<std::string> &args, int ranks = 2) {
        RunSpec s;
        s.ranks = ranks;
        s.args = args;
        expect_pass(s, args.at(0) + " ok");
    }

    static size_t count(const std::string &text, const std::string &word) {
        size_t n = 0;
        for (size_t p = text.find(word); p != std::string::npos;
             p = text.find(word, p + word.size())) {
            ++n;
        }
        return n;
    }
};

inline std::string tcp_or(const char *shm_value, const char *tcp_value,
                   const Transport &t) {
    return is_tcp(t) ? tcp_value : shm_value;
}

} // namespace mpt

#endif
