/*
 * api_test: the contract of include/ucxp2p/p2p.h, one process
 * (P2P_BOOTSTRAP=single). This file: status strings, version, config,
 * contexts, bootstraps, registrations. api_test_comm.cc: communicators,
 * transfers, queues.
 */
#include "api_util.h"
#include "../ucx_warnings.h"

#include <ucp/api/ucp.h>

#include <cinttypes>
#include <cstdio>
#include <set>
#include <string>

using apitest::bogus_handle;
using apitest::Buf;
using apitest::EnvGuard;

namespace {

/** Runs before main: make every test a single-process job. */
struct SingleJob {
    SingleJob() {
        setenv("P2P_BOOTSTRAP", "single", 1);
        for (const char *v :
             {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
              "P2P_RANK", "P2P_WORLD_SIZE", "P2P_PROGRESS", "P2P_SPIN_US",
              "P2P_LOG_LEVEL", "P2P_PEER_TIMEOUT_MS"}) {
            unsetenv(v);
        }
    }
} g_single_job;

const p2p_status_t kAllStatus[] = {
    P2P_OK,                P2P_IN_PROGRESS,      P2P_ERR_INVALID_PARAM,
    P2P_ERR_INVALID_HANDLE, P2P_ERR_NO_MEMORY,   P2P_ERR_NOT_REGISTERED,
    P2P_ERR_BAD_RANK,      P2P_ERR_TRUNCATED,    P2P_ERR_PEER_FAILURE,
    P2P_ERR_CANCELED,      P2P_ERR_TIMEOUT,      P2P_ERR_BUSY,
    P2P_ERR_SHUTDOWN,      P2P_ERR_BOOTSTRAP,    P2P_ERR_UNSUPPORTED,
    P2P_ERR_TRANSPORT,     P2P_ERR_NO_DEVICE,    P2P_ERR_INTERRUPTED};

} // namespace

// ------------------------------------------------------------------ status, version

TEST(ApiStatus, EveryStatusHasDistinctText) {
    std::set<std::string> seen;
    for (p2p_status_t s : kAllStatus) {
        const char *t = p2p_status_string(s);
        ASSERT_NE(nullptr, t) << s;
        EXPECT_GT(std::strlen(t), 0u) << s;
        EXPECT_TRUE(seen.insert(t).second) << "duplicate text '" << t << "'";
    }
    ASSERT_NE(nullptr, p2p_status_string(static_cast<p2p_status_t>(-999)));
    ASSERT_NE(nullptr, p2p_status_string(static_cast<p2p_status_t>(77)));
}

TEST(ApiVersion, MatchesHeader) {
    const char *v = p2p_version();
    ASSERT_NE(nullptr, v);
    char want[32];
    std::snprintf(want, sizeof(want), "%d.%d.", UCXP2P_VERSION_MAJOR,
                  UCXP2P_VERSION_MINOR);
    EXPECT_EQ(0, std::strncmp(v, want, std::strlen(want))) << v;
}

// ------------------------------------------------------------------ config

TEST(ApiConfig, PrintRejectsNullStream) {
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_config_print(nullptr));
}

TEST(ApiConfig, PrintListsVariables) {
    FILE *f = std::tmpfile();
    ASSERT_NE(nullptr, f);
    ASSERT_EQ(P2P_OK, p2p_config_print(f));
    std::rewind(f);
    std::string text;
    char b[512];
    size_t n;
    while ((n = std::fread(b, 1, sizeof(b), f)) > 0) {
        text.append(b, n);
    }
    std::fclose(f);
    for (const char *v : {"P2P_PROGRESS", "P2P_SPIN_US", "P2P_PEER_TIMEOUT_MS",
                          "P2P_LOG_LEVEL", "P2P_BOOTSTRAP"}) {
        EXPECT_NE(std::string::npos, text.find(v)) << v << " missing in:\n" << text;
    }
}

// ------------------------------------------------------------------ context

TEST(ApiContext, NullOutput) {
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_context_create(nullptr, nullptr));
}

struct BadConfig {
    const char *name;
    p2p_config_t cfg;
};

TEST(ApiContext, BadConfigFieldValues) {
    p2p_config_t mode{}, level{}, flag{}, mode_neg{};
    mode.field_mask = P2P_CONFIG_FIELD_PROGRESS_MODE;
    mode.progress_mode = static_cast<p2p_progress_mode_t>(3);
    mode_neg.field_mask = P2P_CONFIG_FIELD_PROGRESS_MODE;
    mode_neg.progress_mode = static_cast<p2p_progress_mode_t>(-1);
    level.field_mask = P2P_CONFIG_FIELD_LOG_LEVEL;
    level.log_level = static_cast<p2p_log_level_t>(42);
    flag.field_mask = 1u << 20; // no such field
    p2p_config_t lr_past{}, lr_zero{};
    lr_past.field_mask = P2P_CONFIG_FIELD_LOCAL_RANK;
    lr_past.local_rank = 2;
    lr_past.local_size = 2;
    lr_zero.field_mask = P2P_CONFIG_FIELD_LOCAL_RANK;
    p2p_config_t thr{}, thr_neg{};
    thr.field_mask = P2P_CONFIG_FIELD_THREAD_MODE;
    thr.thread_mode = static_cast<p2p_thread_mode_t>(2);
    thr_neg.field_mask = P2P_CONFIG_FIELD_THREAD_MODE;
    thr_neg.thread_mode = static_cast<p2p_thread_mode_t>(-1);
    p2p_config_t timeout_low{}, timeout_high{}, spin_high{};
    timeout_low.field_mask = timeout_high.field_mask = P2P_CONFIG_FIELD_PEER_TIMEOUT_MS;
    timeout_low.peer_timeout_ms = 5;
    timeout_high.peer_timeout_ms = 0xffffffffu;
    spin_high.field_mask = P2P_CONFIG_FIELD_SPIN_US;
    spin_high.spin_us = 0xffffffffu;
    for (const BadConfig &b : {BadConfig{"local rank 2 of 2", lr_past},
                               BadConfig{"peer_timeout_ms 5", timeout_low},
                               BadConfig{"peer_timeout_ms 2^32-1", timeout_high},
                               BadConfig{"spin_us 2^32-1", spin_high},
                               BadConfig{"thread_mode 2", thr},
                               BadConfig{"thread_mode -1", thr_neg},
                               BadConfig{"local size 0", lr_zero},
                               BadConfig{"progress_mode 3", mode},
                               BadConfig{"progress_mode -1", mode_neg},
                               BadConfig{"log_level 42", level},
                               BadConfig{"unknown field bit", flag}}) {
        p2p_context_h ctx = bogus_handle<p2p_context_h>();
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_context_create(&b.cfg, &ctx))
            << b.name;
        EXPECT_EQ(bogus_handle<p2p_context_h>(), ctx)
            << b.name << ": output written on failure";
    }
}

// A field named in field_mask is taken instead of its P2P_* variable: with
// the variable malformed (which alone fails the create, BadEnvironmentValues)
// and a valid field, at both ends of the field's range, the create succeeds.
TEST(ApiContext, ConfigFieldsOverrideTheirVariables) {
    struct Field {
        const char *var;
        uint64_t bit;
        void (*set)(p2p_config_t *c, bool high);
    };
    const Field fields[] = {
        {"P2P_PROGRESS", P2P_CONFIG_FIELD_PROGRESS_MODE,
         [](p2p_config_t *c, bool high) {
             c->progress_mode = high ? P2P_PROGRESS_EVENT : P2P_PROGRESS_ADAPTIVE;
         }},
        {"P2P_SPIN_US", P2P_CONFIG_FIELD_SPIN_US,
         [](p2p_config_t *c, bool high) { c->spin_us = high ? 1000000u : 0u; }},
        {"P2P_PEER_TIMEOUT_MS", P2P_CONFIG_FIELD_PEER_TIMEOUT_MS,
         [](p2p_config_t *c, bool high) { c->peer_timeout_ms = high ? 3600000u : 10u; }},
        {"P2P_LOG_LEVEL", P2P_CONFIG_FIELD_LOG_LEVEL,
         [](p2p_config_t *c, bool high) {
             c->log_level = high ? P2P_LOG_TRACE : P2P_LOG_ERROR;
         }},
        {"P2P_THREAD_MODE", P2P_CONFIG_FIELD_THREAD_MODE,
         [](p2p_config_t *c, bool high) {
             c->thread_mode = high ? P2P_THREAD_SERIALIZED : P2P_THREAD_MULTI;
         }},
    };
    for (const Field &f : fields) {
        EnvGuard bad(f.var, "malformed!");
        p2p_context_h ctx = nullptr;
        ASSERT_EQ(P2P_ERR_INVALID_PARAM, p2p_context_create(nullptr, &ctx))
            << f.var << " malformed alone must fail the create";
        for (bool high : {false, true}) {
            p2p_config_t cfg{};
            cfg.field_mask = f.bit;
            f.set(&cfg, high);
            EXPECT_EQ(P2P_OK, p2p_context_create(&cfg, &ctx))
                << f.var << " (" << (high ? "highest" : "lowest") << " field value)";
            if (ctx != nullptr) {
                EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
            }
            ctx = nullptr;
        }
    }
}

TEST(ApiContext, BadEnvironmentValues) {
    const std::pair<const char *, const char *> bad[] = {
        {"P2P_PROGRESS", "bogus"},  {"P2P_PROGRESS", "busy2"},
        {"P2P_SPIN_US", "abc"},     {"P2P_SPIN_US", "-5"},
        {"P2P_SPIN_US", "12x"},     {"P2P_SPIN_US", "99999999999999999999"},
        {"P2P_PEER_TIMEOUT_MS", "soon"}, {"P2P_LOG_LEVEL", "loud"},
        {"P2P_THREAD_MODE", "single"}, {"P2P_THREAD_MODE", "serial"},
        {"P2P_LOCK_BIAS", "yes"},     {"P2P_LOCK_BIAS", ""},
        {"P2P_PEER_TIMEOUT_MS", "5"}, {"P2P_PEER_TIMEOUT_MS", "99999999999"},
        {"P2P_SPIN_BUSY_US", "x"},    {"P2P_SPIN_BUSY_US", "99999999999999"},
        {"P2P_SPIN_US", "99999999999"},
        // Read only when a communicator is created, checked at context creation.
        {"P2P_CMA", "of"},            {"P2P_CMA", "on"},
        {"P2P_CMA_THRESH", "256k"},   {"P2P_CMA_THRESH", ""},
        {"P2P_CMA_MAPPED_THRESH", "-1"}, {"P2P_CMA_SPLIT", "x"},
        {"P2P_TCP_BULK", "of"},       {"P2P_TCP_BULK_THRESH", "79"},
        {"P2P_TCP_BULK_THRESH", "autox"}, {"P2P_TCP_BULK_THRESH", ""},
        {"P2P_TCP_BULK_LANES", "0"},  {"P2P_TCP_BULK_LANES", "17"},
        {"P2P_TCP_BULK_SPIN_US", "x"}, {"P2P_TCP_BULK_SPIN_US", "100001"}};
    for (const auto &kv : bad) {
        EnvGuard g(kv.first, kv.second);
        p2p_context_h ctx = nullptr;
        p2p_status_t st = p2p_context_create(nullptr, &ctx);
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, st)
            << kv.first << "=" << kv.second << " accepted";
        if (st == P2P_OK) {
            p2p_context_destroy(ctx);
        }
    }
}

TEST(ApiContext, KeywordValuesAreReadWithoutRegardToCase) {
    const std::pair<const char *, const char *> upper[] = {
        {"P2P_LOCK_BIAS", "OFF"},    {"P2P_CLOSE_HANDSHAKE", "On"},
        {"P2P_CUDA_STAGING", "ON"},  {"P2P_CMA", "OFF"},
        {"P2P_CMA", "Auto"},         {"P2P_CMA_THRESH", "AUTO"},
        {"P2P_TCP_BULK_THRESH", "Auto"},
        {"P2P_PROGRESS", "EVENT"},   {"P2P_THREAD_MODE", "Serialized"}};
    for (const auto &kv : upper) {
        EnvGuard g(kv.first, kv.second);
        p2p_context_h ctx = nullptr;
        EXPECT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx))
            << kv.first << "=" << kv.second << " refused";
        if (ctx != nullptr) {
            p2p_context_destroy(ctx);
        }
    }
}

// A misspelled P2P_* name is reported at the level of the context being
// created: not by a context quieted to errors (its log_level field), then
// once by the next one that shows warnings. Once per process, so in a
// child process (a death test, exiting normally).
TEST(ApiContext, MisspelledNameWarnsAtTheContextsLogLevel) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EnvGuard typo("P2P_CMA_TRESH", "4096");
    auto create_destroy = [](const p2p_config_t *cfg) {
        p2p_context_h ctx = nullptr;
        if (p2p_context_create(cfg, &ctx) != P2P_OK) _exit(3);
        p2p_context_destroy(ctx);
    };
    EXPECT_EXIT(
        {
            p2p_config_t quiet{};
            quiet.field_mask = P2P_CONFIG_FIELD_LOG_LEVEL;
            quiet.log_level = P2P_LOG_ERROR;
            create_destroy(&quiet);
            std::fputs("quiet context done\n", stderr);
            create_destroy(nullptr);
            create_destroy(nullptr);
            std::fputs("default contexts done\n", stderr);
            _exit(0);
        },
        testing::ExitedWithCode(0),
        "^quiet context done\n[^\n]*warn: config: P2P_CMA_TRESH is not a ucxp2p "
        "variable and is ignored; did you mean P2P_CMA_THRESH\?[^\n]*\n"
        "default contexts done\n$");
}

// The local rank the rail planner reads, for callers that pick a GPU from
// it (the herring shim): innermost launcher first, a pair only when both
// parse, 0 of 0 when none names it.
TEST(ApiContext, LocalRankQueryReadsThePlannersVariables) {
    uint32_t rank = 99, size = 99;
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_local_rank_query(nullptr, &size));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_local_rank_query(&rank, nullptr));
    EnvGuard a("P2P_LOCAL_RANK", nullptr), b("P2P_LOCAL_WORLD_SIZE", nullptr),
        c("LOCAL_RANK", nullptr), d("LOCAL_WORLD_SIZE", nullptr),
        e("OMPI_COMM_WORLD_LOCAL_RANK", "5"), f("OMPI_COMM_WORLD_LOCAL_SIZE", "8"),
        g("MPI_LOCALRANKID", nullptr), h("SLURM_LOCALID", nullptr),
        i("PMIX_LOCAL_RANK", nullptr);
    ASSERT_EQ(P2P_OK, p2p_local_rank_query(&rank, &size));
    EXPECT_EQ(5u, rank);
    EXPECT_EQ(8u, size);
    {
        EnvGuard lr("LOCAL_RANK", "2"), lws("LOCAL_WORLD_SIZE", "4");  // torchrun in mpirun
        ASSERT_EQ(P2P_OK, p2p_local_rank_query(&rank, &size));
        EXPECT_EQ(2u, rank);
        EXPECT_EQ(4u, size);
        EnvGuard pr("P2P_LOCAL_RANK", "3"), pws("P2P_LOCAL_WORLD_SIZE", "4");
        ASSERT_EQ(P2P_OK, p2p_local_rank_query(&rank, &size));
        EXPECT_EQ(3u, rank);
        EnvGuard bad("P2P_LOCAL_WORLD_SIZE", "3");  // rank 3 of 3: skipped
        ASSERT_EQ(P2P_OK, p2p_local_rank_query(&rank, &size));
        EXPECT_EQ(2u, rank);
    }
    EnvGuard none1("OMPI_COMM_WORLD_LOCAL_RANK", nullptr);
    ASSERT_EQ(P2P_OK, p2p_local_rank_query(&rank, &size));
    EXPECT_EQ(0u, rank);
    EXPECT_EQ(0u, size) << "no variable names the local rank";
}

// A transport list naming nothing this machine has: a distinct status, so
// a caller can tell a misconfiguration from a failure of UCX itself.
// UCX says why once: as many warnings and errors as one ucp_init of the
// same configuration prints (a retry without event support printed them
// all again).
TEST(ApiContext, NoUsableTransportIsNoDevice) {
    EnvGuard g("UCX_TLS", "no_such_transport");
    int once = 0;
    {
        p2ptest::UcxWarnings w;
        ucp_config_t *cfg = nullptr;
        ASSERT_EQ(UCS_OK, ucp_config_read(nullptr, nullptr, &cfg));
        ucp_params_t prm = {};
        prm.field_mask = UCP_PARAM_FIELD_FEATURES;
        prm.features = UCP_FEATURE_TAG;
        ucp_context_h ucp = nullptr;
        EXPECT_EQ(UCS_ERR_NO_DEVICE, ucp_init(&prm, cfg, &ucp));
        if (ucp != nullptr) ucp_cleanup(ucp);
        ucp_config_release(cfg);
        once = w.seen();
    }
    p2ptest::UcxWarnings w;
    p2p_context_h ctx = nullptr;
    p2p_status_t st = p2p_context_create(nullptr, &ctx);
    EXPECT_EQ(P2P_ERR_NO_DEVICE, st) << p2p_status_string(st);
    if (st == P2P_OK) p2p_context_destroy(ctx);
    if (p2ptest::UcxWarnings::audible()) {
        EXPECT_GE(once, 1) << "UCX printed nothing for a transport it lacks";
        EXPECT_EQ(once, w.seen()) << "UCX's error was printed more than once";
    }
}

// UCX_TLS=self (or with cma, knem): UCX starts, but no endpoint can be
// made with the peer error handling every ucxp2p endpoint has, so every
// post failed (peer failure, even to this process itself). Refused at
// once, with the reason logged, as a list naming no transport is.
TEST(ApiContext, TransportsCarryingNoMessagesAreNoDevice) {
    for (const char *tls : {"self", "self,cma", "cma:aux,self,knem"}) {
        EnvGuard g("UCX_TLS", tls);
        p2p_context_h ctx = bogus_handle<p2p_context_h>();
        ::testing::internal::CaptureStderr();
        const p2p_status_t st = p2p_context_create(nullptr, &ctx);
        const std::string err = ::testing::internal::GetCapturedStderr();
        EXPECT_EQ(P2P_ERR_NO_DEVICE, st) << tls << ": " << p2p_status_string(st);
        EXPECT_EQ(bogus_handle<p2p_context_h>(), ctx) << tls;
        EXPECT_NE(std::string::npos, err.find("names no transport that carries messages"))
            << tls << ": " << err;
        if (st == P2P_OK) p2p_context_destroy(ctx);
    }
    // One that carries them, beside self.
    EnvGuard g("UCX_TLS", "posix,self");
    p2p_context_h ctx = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
}

// A UCX variable UCX cannot parse: UCX cannot start (the user's value is
// not overridden, and not ignored either).
TEST(ApiContext, BadUcxVariableIsTransportError) {
    EnvGuard g("UCX_RNDV_THRESH", "not_a_size");
    p2p_context_h ctx = bogus_handle<p2p_context_h>();
    p2p_status_t st = p2p_context_create(nullptr, &ctx);
    EXPECT_EQ(P2P_ERR_TRANSPORT, st) << p2p_status_string(st);
    EXPECT_EQ(bogus_handle<p2p_context_h>(), ctx);
    if (st == P2P_OK) p2p_context_destroy(ctx);
}

TEST(ApiContext, GoodEnvironmentValues) {
    for (const char *threads : {"multi", "serialized", "SERIALIZED"}) {
        for (const char *mode : {"adaptive", "busy", "event"}) {
            EnvGuard t("P2P_THREAD_MODE", threads);
            EnvGuard g("P2P_PROGRESS", mode);
            EnvGuard s("P2P_SPIN_US", "10");
            p2p_context_h ctx = nullptr;
            ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx)) << threads << " " << mode;
            EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx)) << threads << " " << mode;
        }
    }
}

TEST(ApiContext, ConfigFieldOverridesEnvironment) {
    // A field named in field_mask does not come from the environment.
    EnvGuard g("P2P_PROGRESS", "bogus");
    p2p_config_t cfg = apitest::mode_config(P2P_PROGRESS_EVENT);
    p2p_context_h ctx = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(&cfg, &ctx));
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
}

TEST(ApiContext, DestroyInvalidHandles) {
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_context_destroy(nullptr));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE,
              p2p_context_destroy(bogus_handle<p2p_context_h>()));
    p2p_context_h ctx = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    ASSERT_EQ(P2P_OK, p2p_context_destroy(ctx));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_context_destroy(ctx)); // double
}

TEST(ApiContext, UseAfterDestroy) {
    p2p_context_h ctx = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    ASSERT_EQ(P2P_OK, p2p_context_destroy(ctx));
    Buf b(64);
    p2p_mem_h mem = bogus_handle<p2p_mem_h>();
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_mem_register(ctx, b.data(), 64, &mem));
    EXPECT_EQ(bogus_handle<p2p_mem_h>(), mem);
    p2p_bootstrap_h bs = nullptr;
    ASSERT_EQ(P2P_OK, p2p_bootstrap_create(P2P_BOOTSTRAP_SINGLE, &bs));
    p2p_comm_h comm = bogus_handle<p2p_comm_h>();
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_comm_create(ctx, bs, &comm));
    EXPECT_EQ(bogus_handle<p2p_comm_h>(), comm);
    EXPECT_EQ(P2P_OK, p2p_bootstrap_destroy(bs));
}

TEST(ApiContext, SeveralContextsAtOnce) {
    p2p_context_h a = nullptr, b = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &a));
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &b));
    EXPECT_NE(a, b);
    EXPECT_EQ(P2P_OK, p2p_context_destroy(a));
    EXPECT_EQ(P2P_OK, p2p_context_destroy(b));
}

// ------------------------------------------------------------------ bootstrap

TEST(ApiBootstrap, CreateErrors) {
    p2p_bootstrap_h bs = bogus_handle<p2p_bootstrap_h>();
    EXPECT_EQ(P2P_ERR_INVALID_PARAM,
              p2p_bootstrap_create(P2P_BOOTSTRAP_SINGLE, nullptr));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM,
              p2p_bootstrap_create(static_cast<p2p_bootstrap_type_t>(99), &bs));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM,
              p2p_bootstrap_create(static_cast<p2p_bootstrap_type_t>(-1), &bs));
    EXPECT_EQ(bogus_handle<p2p_bootstrap_h>(), bs);
}

TEST(ApiBootstrap, PmixOutsideLauncherFails) {
    // "Not available yet" (UNSUPPORTED); a build with PMIx support outside a
    // PMIx launcher cannot join a job either (BOOTSTRAP).
    p2p_bootstrap_h bs = nullptr;
    p2p_status_t st = p2p_bootstrap_create(P2P_BOOTSTRAP_PMIX, &bs);
    EXPECT_TRUE(st == P2P_ERR_UNSUPPORTED || st == P2P_ERR_BOOTSTRAP)
        << p2p_status_string(st);
    if (st == P2P_OK) {
        p2p_bootstrap_destroy(bs);
    }
}

TEST(ApiBootstrap, BadEnvironment) {
    {
        EnvGuard g("P2P_BOOTSTRAP", "bogus");
        p2p_bootstrap_h bs = nullptr;
        EXPECT_EQ(P2P_ERR_INVALID_PARAM,
                  p2p_bootstrap_create(P2P_BOOTSTRAP_AUTO, &bs));
    }
    const std::pair<const char *, const char *> bad[][2] = {
        {{"RANK", "abc"}, {"WORLD_SIZE", "2"}},
        {{"RANK", "2"}, {"WORLD_SIZE", "2"}},
        {{"RANK", "0"}, {"WORLD_SIZE", "0"}},
        {{"RANK", "0"}, {"WORLD_SIZE", "-3"}},
    };
    for (const auto &kv : bad) {
        EnvGuard t("P2P_BOOTSTRAP", "tcp");
        EnvGuard a(kv[0].first, kv[0].second);
        EnvGuard b(kv[1].first, kv[1].second);
        EnvGuard p("MASTER_PORT", "1"); // never reached: must fail before
        EnvGuard to("P2P_BOOTSTRAP_TIMEOUT_MS", "2000");
        p2p_bootstrap_h bs = nullptr;
        p2p_status_t st = P2P_OK;
        apitest::bounded("p2p_bootstrap_create with bad variables", 20, [&] {
            st = p2p_bootstrap_create(P2P_BOOTSTRAP_TCP, &bs);
        });
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, st)
            << kv[0].first << "=" << kv[0].second << " " << kv[1].first << "="
            << kv[1].second << ": " << p2p_status_string(st);
        if (st == P2P_OK) {
            p2p_bootstrap_destroy(bs);
        }
    }
}

TEST(ApiBootstrap, SingleQueryBarrierDestroy) {
    p2p_bootstrap_h bs = nullptr;
    ASSERT_EQ(P2P_OK, p2p_bootstrap_create(P2P_BOOTSTRAP_AUTO, &bs));
    p2p_bootstrap_info_t info{};
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_bootstrap_query(bs, nullptr));
    ASSERT_EQ(P2P_OK, p2p_bootstrap_query(bs, &info));
    EXPECT_EQ(0u, info.rank);
    EXPECT_EQ(1u, info.size);
    EXPECT_EQ(0u, info.local_rank);
    EXPECT_EQ(1u, info.local_size);
    ASSERT_NE(nullptr, info.name);
    EXPECT_STREQ("single", info.name);
    EXPECT_EQ(P2P_OK, p2p_bootstrap_barrier(bs));
    ASSERT_EQ(P2P_OK, p2p_bootstrap_destroy(bs));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_bootstrap_destroy(bs));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_bootstrap_query(bs, &info));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_bootstrap_barrier(bs));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_bootstrap_destroy(nullptr));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE,
              p2p_bootstrap_destroy(bogus_handle<p2p_bootstrap_h>()));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_bootstrap_query(nullptr, &info));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_bootstrap_barrier(nullptr));
}

// ------------------------------------------------------------------ memory

TEST(ApiMem, RegisterErrors) {
    p2p_context_h ctx = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    Buf b(4096);
    p2p_mem_h mem = bogus_handle<p2p_mem_h>();
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_mem_register(nullptr, b.data(), 64, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE,
              p2p_mem_register(bogus_handle<p2p_context_h>(), b.data(), 64, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_register(ctx, nullptr, 64, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_register(ctx, b.data(), 0, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_register(ctx, b.data(), 64, nullptr));
    EXPECT_EQ(bogus_handle<p2p_mem_h>(), mem) << "output written on failure";
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
}

// A range past the end of the address space is refused before UCX sees it:
// lengths whose end wraps around, by one byte or by all of them.
TEST(ApiMem, RegisterRangePastTheEndOfTheAddressSpace) {
    p2p_context_h ctx = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    Buf b(4096);
    const uintptr_t a = reinterpret_cast<uintptr_t>(b.data());
    p2p_mem_h mem = bogus_handle<p2p_mem_h>();
    for (size_t len : {SIZE_MAX, size_t(UINTPTR_MAX - a) + 2}) {
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_register(ctx, b.data(), len, &mem))
            << "length " << len;
    }
    EXPECT_EQ(bogus_handle<p2p_mem_h>(), mem) << "output written on failure";
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx, b.data(), 4096, &mem));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
}

TEST(ApiMem, DeregisterErrors) {
    p2p_context_h ctx = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    Buf b(4096);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx, b.data(), 4096, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_mem_deregister(nullptr));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_mem_deregister(bogus_handle<p2p_mem_h>()));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_mem_deregister(mem)); // double
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
}

TEST(ApiMem, ContextDestroyReleasesRegistrations) {
    p2p_context_h ctx = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    Buf b(8192);
    p2p_mem_h m1 = nullptr, m2 = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx, b.data(), 8192, &m1));
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx, b.data() + 100, 1000, &m2)); // overlap
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(m2));
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_mem_deregister(m1));
}
