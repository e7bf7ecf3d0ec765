// Rails: local rank detection order, Slurm task lists, cpu lists, NUMA cpus
// from a fake sysfs tree, network interfaces as tcp rails in the plan, and
// the plan applied to a UCX config without overriding the user.
#include "core/context.h"
#include "core/rails.h"
#include "topo/rail_plan.h"

#include "../scoped_env.h"
#include "../shell.h"
#include "../top_dirs.h"

#include <ucp/api/ucp.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <pthread.h>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace ucxp2p;

namespace {

EnvLookup env_of(const std::map<std::string, std::string> &m) {
    return [m](const char *n) -> const char * {
        auto it = m.find(n);
        return it == m.end() ? nullptr : it->second.c_str();
    };
}

using p2ptest::ScopedEnv;

/** The value UCX will use for NAME (without UCX_), via ucp_config_print. */
std::string ucx_value(ucp_config_t *cfg, const char *name) {
    char *buf = nullptr;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ucp_config_print(cfg, f, nullptr, UCS_CONFIG_PRINT_CONFIG);
    std::fclose(f);
    std::string text = "\n" + std::string(buf, len);
    std::free(buf);
    std::string key = std::string("UCX_") + name + "=";
    size_t pos = text.find("\n" + key);
    if (pos == std::string::npos) return "<absent>";
    size_t start = pos + 1 + key.size();
    return text.substr(start, text.find('\n', start) - start);
}

} // namespace

TEST(LocalRank, OrderOfSources) {
    LocalRank lr = local_rank_detect(env_of({{"LOCAL_RANK", "1"},
                                             {"LOCAL_WORLD_SIZE", "4"},
                                             {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                             {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}));
    EXPECT_EQ(1u, lr.rank);
    EXPECT_EQ(4u, lr.size);
    EXPECT_EQ("LOCAL_RANK/LOCAL_WORLD_SIZE", lr.source);

    lr = local_rank_detect(env_of({{"P2P_LOCAL_RANK", "0"}, {"P2P_LOCAL_WORLD_SIZE", "2"},
                                   {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}}));
    EXPECT_EQ(0u, lr.rank);
    EXPECT_EQ(2u, lr.size);

    lr = local_rank_detect(env_of({{"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                                   {"SLURM_LOCALID", "0"},
                                   {"SLURM_TASKS_PER_NODE", "8"}}));
    EXPECT_EQ(2u, lr.rank);
    EXPECT_EQ(3u, lr.size);
}

TEST(LocalRank, SlurmAndPmix) {
    LocalRank lr = local_rank_detect(env_of({{"SLURM_LOCALID", "2"},
                                             {"SLURM_TASKS_PER_NODE", "4(x2),3"},
                                             {"SLURM_NODEID", "2"}}));
    EXPECT_EQ(2u, lr.rank);
    EXPECT_EQ(3u, lr.size);
    lr = local_rank_detect(env_of({{"PMIX_LOCAL_RANK", "5"}, {"PMIX_LOCAL_SIZE", "8"}}));
    EXPECT_EQ(5u, lr.rank);
    EXPECT_EQ(8u, lr.size);
}

TEST(LocalRank, InvalidSourcesAreSkipped) {
    // rank >= size, garbage, half a pair: each skipped for the next source.
    LocalRank lr = local_rank_detect(env_of({{"P2P_LOCAL_RANK", "4"},
                                             {"P2P_LOCAL_WORLD_SIZE", "4"},
                                             {"LOCAL_RANK", "x"},
                                             {"LOCAL_WORLD_SIZE", "4"},
                                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                             {"MPI_LOCALRANKID", "1"},
                                             {"MPI_LOCALNRANKS", "2"}}));
    EXPECT_EQ(1u, lr.rank);
    EXPECT_EQ(2u, lr.size);
    EXPECT_EQ("MPI_LOCALRANKID/MPI_LOCALNRANKS", lr.source);
    lr = local_rank_detect(env_of({}));
    EXPECT_EQ(0u, lr.rank);
    EXPECT_EQ(1u, lr.size);
    EXPECT_EQ("", lr.source);
    lr = local_rank_detect(env_of({{"SLURM_LOCALID", "3"}, {"SLURM_TASKS_PER_NODE", "2(x4)"}}));
    EXPECT_EQ(1u, lr.size);  // 3 >= 2: skipped, default
}

TEST(LocalRank, SlurmTaskList) {
    EXPECT_EQ(8u, slurm_tasks_on_node("8", 0));
    EXPECT_EQ(0u, slurm_tasks_on_node("8", 1));
    EXPECT_EQ(2u, slurm_tasks_on_node("2(x3),1", 2));
    EXPECT_EQ(1u, slurm_tasks_on_node("2(x3),1", 3));
    EXPECT_EQ(0u, slurm_tasks_on_node("2(x3", 0));
    EXPECT_EQ(0u, slurm_tasks_on_node("2(y3)", 0));
    EXPECT_EQ(0u, slurm_tasks_on_node("", 0));
}

TEST(CpuList, Parse) {
    std::vector<int> c;
    ASSERT_TRUE(parse_cpu_list("0-3,8,10-11\n", &c));
    EXPECT_EQ((std::vector<int>{0, 1, 2, 3, 8, 10, 11}), c);
    ASSERT_TRUE(parse_cpu_list("\n", &c));
    EXPECT_TRUE(c.empty());
    EXPECT_FALSE(parse_cpu_list("3-1", &c));
    EXPECT_FALSE(parse_cpu_list("a", &c));
    EXPECT_FALSE(parse_cpu_list("0-99999", &c));
}

TEST(CpuList, NumaNodeCpusFromFakeSysfs) {
    char dir[] = "/tmp/p2p-rails-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    std::string node1 = std::string(dir) + "/node1";
    ASSERT_EQ(0, mkdir(node1.c_str(), 0700));
    { std::ofstream(node1 + "/cpulist") << "4-5,7\n"; }
    EXPECT_EQ((std::vector<int>{4, 5, 7}), numa_node_cpus(1, dir));
    EXPECT_TRUE(numa_node_cpus(0, dir).empty());
    EXPECT_TRUE(numa_node_cpus(-1, dir).empty());
    std::remove((node1 + "/cpulist").c_str());
    rmdir(node1.c_str());
    rmdir(dir);
}

TEST(TcpRails, NetworkInterfacesNamedInP2pRails) {
    topo::Machine m;
    m.numa_nodes = {0};
    topo::PlanInput in;
    in.rails = "veth0,veth1";
    in.netdevs = {"lo", "veth0", "veth1"};
    topo::RailPlan plan;
    ASSERT_EQ(P2P_OK, topo::plan_rails(m, in, &plan));
    ASSERT_EQ(2u, plan.nics.size());
    EXPECT_TRUE(plan.nics[0].tcp);
    EXPECT_EQ("veth0", plan.nics[0].ucx_name());
    std::map<std::string, std::string> s(plan.ucx_settings.begin(), plan.ucx_settings.end());
    EXPECT_EQ("veth0,veth1", s["UCX_NET_DEVICES"]);
    EXPECT_EQ("2", s["UCX_MAX_RNDV_RAILS"]);
    EXPECT_NE(std::string::npos, topo::rail_plan_describe(plan).find("veth1 [tcp]"));

    in.rails = "veth0,nosuch";  // neither rdma nor a network interface
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, topo::plan_rails(m, in, &plan));
    in.rails = "veth0:1";       // a port makes it an rdma name
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, topo::plan_rails(m, in, &plan));
}

static bool has_note(const topo::RailPlan &plan, const std::string &text) {
    for (const std::string &n : plan.notes) {
        if (n.find(text) != std::string::npos) return true;
    }
    return false;
}

TEST(TcpRails, SharedMemoryBesideTcpRailsIsNoted) {
    // UCX 1.13 would give same-host endpoints a tcp lane beside shm.
    topo::Machine m;
    m.numa_nodes = {0};
    topo::PlanInput in;
    in.rails = "veth0,veth1";
    in.netdevs = {"veth0", "veth1"};
    topo::RailPlan plan;
    ASSERT_EQ(P2P_OK, topo::plan_rails(m, in, &plan));
    EXPECT_TRUE(has_note(plan, "tcp rails with shared memory allowed"));
    in.user_ucx = {{"UCX_TLS", "tcp,self"}};
    ASSERT_EQ(P2P_OK, topo::plan_rails(m, in, &plan));
    EXPECT_FALSE(has_note(plan, "tcp rails with shared memory allowed"));
    in.user_ucx.clear();
    in.rails = "veth0";  // one tcp rail: one lane, nothing to stripe
    ASSERT_EQ(P2P_OK, topo::plan_rails(m, in, &plan));
    EXPECT_FALSE(has_note(plan, "tcp rails with shared memory allowed"));
}

TEST(ApplyUcx, NetworkOnlyTransportsGetRendezvousLanes) {
    ScopedEnv nd("UCX_NET_DEVICES", nullptr);
    ScopedEnv rr("UCX_MAX_RNDV_RAILS", nullptr);
    ScopedEnv er("UCX_MAX_EAGER_RAILS", nullptr);
    ScopedEnv rails("P2P_RAILS", nullptr);
    ScopedEnv tls("UCX_TLS", "tcp,self");
    DIR *ib = opendir("/sys/class/infiniband");
    bool rdma = false;
    for (dirent *e; ib != nullptr && (e = readdir(ib)) != nullptr;) {
        rdma |= e->d_name[0] != '.';
    }
    if (ib != nullptr) closedir(ib);
    if (rdma) {
        GTEST_SKIP() << "rdma devices present: the rail plan decides";
    }
    ucp_config_t *cfg = nullptr;
    ASSERT_EQ(UCS_OK, ucp_config_read(nullptr, nullptr, &cfg));
    EXPECT_EQ(P2P_OK, rails_apply_ucx(cfg));
    EXPECT_EQ("2", ucx_value(cfg, "MAX_EAGER_RAILS"));
    ucp_config_release(cfg);

    ScopedEnv user("UCX_MAX_EAGER_RAILS", "1");
    ASSERT_EQ(UCS_OK, ucp_config_read(nullptr, nullptr, &cfg));
    EXPECT_EQ(P2P_OK, rails_apply_ucx(cfg));
    EXPECT_EQ("1", ucx_value(cfg, "MAX_EAGER_RAILS"));
    ucp_config_release(cfg);
}

TEST(ApplyUcx, PlanSettingsReachUcxConfig) {
    ScopedEnv nd("UCX_NET_DEVICES", nullptr);
    ScopedEnv rr("UCX_MAX_RNDV_RAILS", nullptr);
    ScopedEnv rails("P2P_RAILS", "lo");
    ucp_config_t *cfg = nullptr;
    ASSERT_EQ(UCS_OK, ucp_config_read(nullptr, nullptr, &cfg));
    EXPECT_EQ(P2P_OK, rails_apply_ucx(cfg));
    EXPECT_EQ("lo", ucx_value(cfg, "NET_DEVICES"));
    EXPECT_EQ("1", ucx_value(cfg, "MAX_RNDV_RAILS"));
    ucp_config_release(cfg);
}

TEST(ApplyUcx, UserSettingsWin) {
    ScopedEnv nd("UCX_NET_DEVICES", "all");
    ScopedEnv rr("UCX_MAX_RNDV_RAILS", "3");
    ScopedEnv rails("P2P_RAILS", "lo");
    ucp_config_t *cfg = nullptr;
    ASSERT_EQ(UCS_OK, ucp_config_read(nullptr, nullptr, &cfg));
    EXPECT_EQ(P2P_OK, rails_apply_ucx(cfg));
    EXPECT_EQ("all", ucx_value(cfg, "NET_DEVICES"));
    EXPECT_EQ("3", ucx_value(cfg, "MAX_RNDV_RAILS"));
    ucp_config_release(cfg);
}

// The context's own UCX settings (context_ucx_defaults) never replace
// what the user set either. Read back through KEEPALIVE_INTERVAL: the other
// ones (MM_ERROR_HANDLING, MM_FIFO_SIZE) are transport settings that UCP
// keeps aside until it opens its transports, so ucp_config_print does not
// show them; all go through the same check of the user's environment
// (core_test UcxUserValue.* covers the names that check reads).
TEST(ApplyUcx, ContextDefaultsYieldToUserSettings) {
    ContextSettings cs{};
    cs.peer_timeout_ms = 3000;
    // How UCX prints an interval set to `text` (its own unit and format).
    auto printed = [](const char *text) {
        ScopedEnv ka("UCX_KEEPALIVE_INTERVAL", nullptr);
        ucp_config_t *cfg = nullptr;
        EXPECT_EQ(UCS_OK, ucp_config_read(nullptr, nullptr, &cfg));
        EXPECT_EQ(UCS_OK, ucp_config_modify(cfg, "KEEPALIVE_INTERVAL", text));
        std::string v = ucx_value(cfg, "KEEPALIVE_INTERVAL");
        ucp_config_release(cfg);
        return v;
    };
    const std::string ours = printed("1000ms"), users = printed("7s");
    ASSERT_NE(ours, users);
    for (const char *user : {static_cast<const char *>(nullptr), "7s"}) {
        SCOPED_TRACE(user == nullptr ? "unset" : user);
        ScopedEnv ka("UCX_KEEPALIVE_INTERVAL", user);
        ucp_config_t *cfg = nullptr;
        ASSERT_EQ(UCS_OK, ucp_config_read(nullptr, nullptr, &cfg));
        context_ucx_defaults(cfg, cs);
        EXPECT_EQ(user == nullptr ? ours : users, ucx_value(cfg, "KEEPALIVE_INTERVAL"));
        ucp_config_release(cfg);
    }
}

TEST(ApplyUcx, BadRailsFailContextCreation) {
    ScopedEnv nd("UCX_NET_DEVICES", nullptr);
    ScopedEnv rails("P2P_RAILS", "no_such_device0");
    ucp_config_t *cfg = nullptr;
    ASSERT_EQ(UCS_OK, ucp_config_read(nullptr, nullptr, &cfg));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, rails_apply_ucx(cfg));
    ucp_config_release(cfg);
    p2p_context_h ctx = nullptr;
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_context_create(nullptr, &ctx));
}

TEST(ApplyUcx, LocalRankFromConfigReplacesTheLaunchersVariables) {
    ScopedEnv nd("UCX_NET_DEVICES", nullptr);
    ScopedEnv rails("P2P_RAILS", "lo");
    ScopedEnv plr("P2P_LOCAL_RANK", nullptr);
    ScopedEnv plw("P2P_LOCAL_WORLD_SIZE", nullptr);
    ScopedEnv lr("LOCAL_RANK", "0");
    ScopedEnv lw("LOCAL_WORLD_SIZE", "4");
    ucp_config_t *cfg = nullptr;
    ASSERT_EQ(UCS_OK, ucp_config_read(nullptr, nullptr, &cfg));
    ASSERT_EQ(P2P_OK, rails_apply_ucx(cfg));
    ucp_config_release(cfg);
    if (rails_numa() < 0) {
        GTEST_SKIP() << "no topology (built without hwloc?): no plan is made";
    }
    LocalRank seen = rails_local_rank();
    EXPECT_EQ(0u, seen.rank);
    EXPECT_EQ(4u, seen.size);
    // Through the public API: the application's value wins.
    p2p_config_t c{};
    c.field_mask = P2P_CONFIG_FIELD_LOCAL_RANK;
    c.local_rank = 1;
    c.local_size = 2;
    p2p_context_h ctx = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(&c, &ctx));
    seen = rails_local_rank();
    EXPECT_EQ(1u, seen.rank);
    EXPECT_EQ(2u, seen.size);
    EXPECT_EQ("p2p_config_t", seen.source);
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
}

TEST(Numa, PlanNodeIsKnownAndThreadStaysRunnable) {
    ScopedEnv rails("P2P_RAILS", nullptr);
    ucp_config_t *cfg = nullptr;
    ASSERT_EQ(UCS_OK, ucp_config_read(nullptr, nullptr, &cfg));
    ASSERT_EQ(P2P_OK, rails_apply_ucx(cfg));
    ucp_config_release(cfg);
    int numa = rails_numa();
    if (numa < 0) {
        GTEST_SKIP() << "no topology (built without hwloc?)";
    }
    EXPECT_FALSE(numa_node_cpus(numa).empty());
    rails_bind_this_thread("test");
    cpu_set_t set;
    ASSERT_EQ(0, pthread_getaffinity_np(pthread_self(), sizeof(set), &set));
    std::vector<int> cpus = numa_node_cpus(numa);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &set)) {
            EXPECT_NE(cpus.end(), std::find(cpus.begin(), cpus.end(), c)) << c;
        }
    }
}

// On an EFA machine whose UCX is too old to drive EFA (UCX 1.13 here), the
// plan must warn with the fix and must not pin UCX_NET_DEVICES to EFA
// devices UCX cannot open (that would leave it without a network device).
// Runs in a child process: the topology is loaded once per process.
TEST(ApplyUcx, EfaRailsNotPinnedWhenUcxCannotDriveEfa) {
    std::string xml = p2ptest::top_srcdir() + "/../shared/data/topology/p4d.24xlarge.xml";
    if (access(xml.c_str(), R_OK) != 0) {
        GTEST_SKIP() << "shared topology " << xml << " absent";
    }
    unsigned major = 0, minor = 0, release = 0;
    ucp_get_version(&major, &minor, &release);
    if (major > 1 || (major == 1 && minor >= 19)) {
        GTEST_SKIP() << "UCX " << major << "." << minor << " can drive EFA";
    }
    std::string cmd = "env -u UCX_NET_DEVICES -u P2P_RAILS HWLOC_XMLFILE=" + xml +
                      " LOCAL_RANK=2 LOCAL_WORLD_SIZE=8 P2P_LOG_LEVEL=info P2P_BOOTSTRAP=single " +
                      p2ptest::top_builddir() + "/tools/demo/p2p_demo -i 1 -s 64 -t 1 2>&1";
    p2ptest::ShellResult r = p2ptest::run_shell(cmd);
    const std::string &out = r.out;
    EXPECT_EQ(0, r.status) << out;
    EXPECT_NE(std::string::npos, out.find("EFA needs UCX >= 1.19")) << out;
    EXPECT_NE(std::string::npos, out.find("efa rails not applied")) << out;
    EXPECT_EQ(std::string::npos, out.find("is not available")) << out;  // UCX's warning
    EXPECT_NE(std::string::npos, out.find("payload verified")) << out;
}
