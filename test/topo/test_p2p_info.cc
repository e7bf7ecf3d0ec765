/* p2p_info end to end: --topology preview, --help, bad arguments. */
#include "ucxp2p_config.h"

#include "../shell.h"
#include "topo_test_util.h"

#include <cstdio>
#include <ucp/api/ucp.h>
#include <sys/wait.h>

using topo_test::fixture;
using topo_test::shared_xml;

namespace {

struct Result {
    int status = -1;
    std::string out;
};

/** Run p2p_info with args (bounded by timeout(1)); stdout and stderr. The
 *  plans expect every GPU visible, also on a runner that limits them. */
Result run(const std::string &args, const std::string &env = "") {
    std::string cmd = "env -u CUDA_VISIBLE_DEVICES " + env + " timeout 60 " +
                      topo_test::builddir() +
                      "/tools/info/p2p_info " + args + " 2>&1";
    p2ptest::ShellResult sh = p2ptest::run_shell(cmd);
    Result r;
    r.out = std::move(sh.out);
    r.status = sh.status != -1 && WIFEXITED(sh.status) ? WEXITSTATUS(sh.status) : -1;
    return r;
}

size_t count(const std::string &hay, const std::string &needle) {
    size_t c = 0;
    for (size_t pos = hay.find(needle); pos != std::string::npos;
         pos = hay.find(needle, pos + 1)) {
        ++c;
    }
    return c;
}

} // namespace

TEST(P2pInfo, HelpExitsZero) {
    Result r = run("--help");
    EXPECT_EQ(0, r.status);
    EXPECT_NE(std::string::npos, r.out.find("--topology FILE.xml")) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("--local-size")) << r.out;
}

TEST(P2pInfo, BadArgumentsExitTwoWithAMessage) {
    for (const char *args : {"--bogus", "--local-size", "--local-size 0",
                             "--local-size -3", "--local-size 2x", "--topology",
                             "--topology /nonexistent.xml --no-ucx",
                             "--local-size 2 --local-rank 5 --no-ucx",
                             "--sysfs /nonexistent --no-ucx"}) {
        Result r = run(args);
        EXPECT_EQ(2, r.status) << args << "\n" << r.out;
        EXPECT_NE(std::string::npos, r.out.find("p2p_info: ")) << args << "\n" << r.out;
        // Refused before the report starts, not after half of it.
        EXPECT_EQ(std::string::npos, r.out.find("== build")) << args << "\n" << r.out;
    }
}

#ifdef HAVE_HWLOC
// The live topology leaves out hwloc's opencl and gl plugins (they start
// GPU runtimes and X connections in every rank, and changed the process
// environment on a GPU machine). hwloc's own component log says which ran.
TEST(P2pInfo, LiveTopologySkipsOpenclAndGl) {
    Result r = run("--no-ucx --no-config", "HWLOC_COMPONENTS_VERBOSE=1");
    ASSERT_EQ(0, r.status) << r.out;
    const std::string key = "Final list of enabled discovery components: ";
    size_t at = r.out.find(key);
    ASSERT_NE(std::string::npos, at) << r.out;
    const std::string list = r.out.substr(at + key.size(),
                                          r.out.find('\n', at) - at - key.size());
    EXPECT_NE(std::string::npos, list.find("linux(")) << list;
    EXPECT_EQ(std::string::npos, list.find("opencl(")) << list;
    EXPECT_EQ(std::string::npos, list.find("gl(")) << list;
    // Where the plugins are installed (Debian's hwloc), they were offered
    // and excluded: the check above is not empty.
    if (r.out.find("Registered discovery component `opencl'") != std::string::npos) {
        EXPECT_NE(std::string::npos,
                  r.out.find("Excluding blacklisted discovery component `opencl'"))
            << r.out;
    }
}


TEST(P2pInfo, PreviewsP4dPlanForEveryRank) {
    std::string path = shared_xml("p4d.24xlarge.xml");
    SKIP_UNLESS_SHARED(path);
    Result r = run("--topology " + path + " --local-size 8 --no-ucx");
    ASSERT_EQ(0, r.status) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("rail plan (8 local ranks)")) << r.out;
    EXPECT_EQ(2u, count(r.out, "rails: rdmap16s27:1 [efa"));
    EXPECT_EQ(2u, count(r.out, "rails: rdmap160s27:1 [efa"));
    EXPECT_NE(std::string::npos, r.out.find("local rank 7: gpu 7 (0000:a0:1d.0) numa 1"))
        << r.out;
    unsigned major = 0, minor = 0, release = 0;
    ucp_get_version(&major, &minor, &release);
    if (major == 1 && minor < 19) {
        // EFA with a UCX without it (Debian's 1.13): the warning and its
        // fix, and the preview shows what a context does -- no UCX
        // variable set -- not the bare plan (it showed
        // UCX_NET_DEVICES=rdmap... the context never set).
        EXPECT_NE(std::string::npos, r.out.find("UCX >= 1.19")) << r.out;
        EXPECT_EQ(0u, count(r.out, "set UCX_NET_DEVICES="));
        EXPECT_EQ(8u, count(r.out, "note: efa rails not applied (UCX 1."));
    } else {
        EXPECT_EQ(2u, count(r.out, "set UCX_NET_DEVICES=rdmap16s27:1\n"));
        EXPECT_EQ(2u, count(r.out, "set UCX_NET_DEVICES=rdmap160s27:1\n"));
    }
    // Configuration with help texts, including the new variables.
    EXPECT_NE(std::string::npos, r.out.find("P2P_RAILS=auto")) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("P2P_IB_GID_INDEX=auto")) << r.out;
}

TEST(P2pInfo, OneRankAndEnvironmentOverride) {
    Result r = run("--topology " + fixture("nogpu_mlx4.xml") +
                       " --local-size 4 --local-rank 3 --no-ucx --no-config",
                   "P2P_RAILS=mlx5_0,mlx5_1");
    ASSERT_EQ(0, r.status) << r.out;
    EXPECT_EQ(1u, count(r.out, "local rank "));
    EXPECT_NE(std::string::npos, r.out.find("set UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1"))
        << r.out;
    EXPECT_NE(std::string::npos, r.out.find("reason: P2P_RAILS=mlx5_0,mlx5_1")) << r.out;
}

TEST(P2pInfo, BadPlanSettingIsARuntimeFailure) {
    Result r = run("--topology " + fixture("nogpu_mlx4.xml") + " --no-ucx --no-config",
                   "P2P_RAILS=mlx9_9");
    EXPECT_EQ(1, r.status) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("mlx9_9")) << r.out;
}

TEST(P2pInfo, RoceSectionReadsTheSysfsTree) {
    topo_test::TempDir d;
    topo_test::add_port(d, "mlx5_bond_0", 1, "Ethernet", "4: ACTIVE");
    topo_test::add_gid(d, "mlx5_bond_0", 1, 9, "0000:0000:0000:0000:0000:ffff:0a00:0002",
                       "RoCE v2", "bond0");
    Result r = run("--topology " + fixture("gpu1_nonic.xml") + " --sysfs " + d.path() +
                   " --no-ucx --no-config");
    ASSERT_EQ(0, r.status) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("mlx5_bond_0:1 link Ethernet, active, gid index 9"))
        << r.out;
}

#endif

// UCX's config files are the user's settings too: the plan keeps what they
// set, says which file set it, and the environment wins over them, as in
// UCX (src/core/ucx_user.h).
TEST(P2pInfo, PlanKeepsWhatUcxConfigFilesSet) {
    topo_test::TempDir home;
    topo_test::TempDir cfg;
    ASSERT_FALSE(home.path().empty() || cfg.path().empty());
    home.write("ucx.conf", "# site settings\nUCX_NET_DEVICES = lo");
    cfg.write("ucx.conf", "UCX_MAX_RNDV_RAILS=3");
    const std::string env = "env -u UCX_NET_DEVICES -u UCX_MAX_RNDV_RAILS -u UCX_TLS "
                            "-u UCX_CONFIG_DIR P2P_RAILS=lo";

    Result r = run("--no-ucx --no-config", env + " HOME=" + home.path());
    ASSERT_EQ(0, r.status) << r.out;
    EXPECT_NE(std::string::npos,
              r.out.find("reason: UCX_NET_DEVICES=lo set in " + home.path() + "/ucx.conf"))
        << r.out;
    EXPECT_NE(std::string::npos, r.out.find("P2P_RAILS=lo ignored")) << r.out;
    EXPECT_EQ(std::string::npos, r.out.find("set UCX_NET_DEVICES")) << r.out;

    r = run("--no-ucx --no-config", env + " HOME=/nonexistent UCX_CONFIG_DIR=" + cfg.path());
    ASSERT_EQ(0, r.status) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("set UCX_NET_DEVICES=lo\n")) << r.out;
    EXPECT_NE(std::string::npos,
              r.out.find("kept UCX_MAX_RNDV_RAILS=3 set in " + cfg.path() + "/ucx.conf"))
        << r.out;

    r = run("--no-ucx --no-config", env + " HOME=" + home.path() + " UCX_NET_DEVICES=all");
    ASSERT_EQ(0, r.status) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("reason: UCX_NET_DEVICES=all set by the user"))
        << r.out;

    // The ucx section lists the user's settings and where each came from.
    r = run("--no-config", env + " HOME=" + home.path() + " UCX_CONFIG_DIR=" + cfg.path() +
                               " UCX_MAX_EAGER_RAILS=1");
    ASSERT_EQ(0, r.status) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("    UCX_NET_DEVICES=lo (" + home.path() +
                                            "/ucx.conf)\n")) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("    UCX_MAX_RNDV_RAILS=3 (" + cfg.path() +
                                            "/ucx.conf)\n")) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("    UCX_MAX_EAGER_RAILS=1 (environment)\n"))
        << r.out;
}

TEST(P2pInfo, LiveMachineRunsWithUcx) {
    Result r = run("--no-config");
    ASSERT_EQ(0, r.status) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("ucxp2p ")) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("UCX 1.")) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("local rank 0")) << r.out;
}

// The configuration section checks the values it prints with a context
// (printing alone accepted P2P_SPIN_US=abc with exit status 0, which
// p2p_context_create refuses), and a UCX that cannot start is a runtime
// failure (it exited 0).
TEST(P2pInfo, ConfigurationValuesAreChecked) {
    Result ok = run("");
    ASSERT_EQ(0, ok.status) << ok.out;
    EXPECT_NE(std::string::npos, ok.out.find("values accepted by p2p_context_create"))
        << ok.out;
    for (const char *env : {"P2P_SPIN_US=abc", "P2P_PROGRESS=fast", "P2P_CMA=maybe"}) {
        Result r = run("", env);
        EXPECT_EQ(1, r.status) << env << r.out;
        EXPECT_NE(std::string::npos, r.out.find("values refused by p2p_context_create"))
            << env << r.out;
        // The library's error names it: NAME='value'.
        std::string quoted(env);
        quoted.insert(quoted.find('=') + 1, "'");
        EXPECT_NE(std::string::npos, r.out.find(quoted + "'")) << env << r.out;
    }
    Result skipped = run("--no-ucx", "P2P_SPIN_US=abc");
    EXPECT_EQ(0, skipped.status) << skipped.out;
    EXPECT_NE(std::string::npos, skipped.out.find("values not checked (--no-ucx")) << skipped.out;
}

// A local size in the environment that is not a number is said to be
// ignored (it silently became 1, or the number of GPUs).
TEST(P2pInfo, MalformedLocalSizeInTheEnvironmentIsNamed) {
    Result r = run("--no-ucx --no-config", "LOCAL_WORLD_SIZE=abc");
    EXPECT_EQ(0, r.status) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("LOCAL_WORLD_SIZE='abc' is not a number")) << r.out;
}

TEST(P2pInfo, UcxThatCannotStartIsARuntimeFailure) {
    Result r = run("--no-config", "UCX_TLS=bogus");
    EXPECT_EQ(1, r.status) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("ucx could not start")) << r.out;
}

TEST(P2pInfo, MalformedCudaStagingIsNotShownAsStaging) {
    // p2p_context_create refuses anything but on or off; the preview must
    // not describe such a value as staging (nor refusing) device memory.
    Result r = run("--no-config", "P2P_CUDA_STAGING=yes");
    ASSERT_EQ(0, r.status) << r.out;
    EXPECT_EQ(std::string::npos, r.out.find("staged through host memory")) << r.out;
    EXPECT_EQ(std::string::npos, r.out.find("refused by p2p_mem_register")) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("P2P_CUDA_STAGING='yes' is not on or off"))
        << r.out;
}

TEST(P2pInfo, CudaStagingIsReadWithoutRegardToCase) {
    // As p2p_context_create reads it (config_parse_on_off): OFF is off.
    Result r = run("--no-config", "P2P_CUDA_STAGING=OFF");
    ASSERT_EQ(0, r.status) << r.out;
    EXPECT_EQ(std::string::npos, r.out.find("is not on or off")) << r.out;
    EXPECT_EQ(std::string::npos, r.out.find("staged through host memory")) << r.out;
    const bool refused = r.out.find("refused by p2p_mem_register") != std::string::npos;
    const bool by_ucx = r.out.find("moved by UCX") != std::string::npos;
    EXPECT_TRUE(refused || by_ucx) << r.out;
}
