/* The user's UCX settings: UCX's config-file lines read as UCX 1.13 reads
 * them, the files in its order, the environment over the files. */
#include "core/ucx_user.h"

#include "../scoped_env.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

using ucxp2p::UcxConf;
using ucxp2p::ucx_conf_parse;
using ucxp2p::ucx_conf_paths;
using ucxp2p::ucx_user_value;

namespace {

std::string value_of(const UcxConf &c, const std::string &name) {
    auto it = c.find(name);
    return it == c.end() ? "<unset>" : it->second.value;
}

} // namespace

// Each case below was checked against Debian's UCX 1.13 with
// `UCX_CONFIG_DIR=dir ucx_info -c` and the line in dir/ucx.conf.
TEST(UcxConfParse, LinesReadAsUcxReadsThem) {
    UcxConf c;
    ucx_conf_parse("UCX_TLS=tcp\n"
                   "  UCX_NET_DEVICES =  lo  \r\n"
                   "UCX_MAX_RNDV_RAILS : 2\n"
                   "UCX_MAX_EAGER_RAILS=3 ; inline comment\n"
                   "UCX_IB_GID_INDEX=lo;c\n"
                   "UCX_RNDV_THRESH=lo # not a comment\n"
                   "UCX_LOG_LEVEL=\n"
                   "UCX_KEEPALIVE_INTERVAL=\"1s\"\n",
                   "/f", &c);
    EXPECT_EQ("tcp", value_of(c, "UCX_TLS"));
    EXPECT_EQ("lo", value_of(c, "UCX_NET_DEVICES"));
    EXPECT_EQ("2", value_of(c, "UCX_MAX_RNDV_RAILS"));
    EXPECT_EQ("3", value_of(c, "UCX_MAX_EAGER_RAILS"));
    EXPECT_EQ("lo;c", value_of(c, "UCX_IB_GID_INDEX"));
    EXPECT_EQ("lo # not a comment", value_of(c, "UCX_RNDV_THRESH"));
    EXPECT_EQ("", value_of(c, "UCX_LOG_LEVEL"));
    EXPECT_EQ("\"1s\"", value_of(c, "UCX_KEEPALIVE_INTERVAL"));  // quotes kept
    EXPECT_EQ("/f", c.at("UCX_TLS").file);
    EXPECT_EQ(8u, c.size());
}

TEST(UcxConfParse, CommentsSectionsAndOtherNamesAreSkipped) {
    UcxConf c;
    ucx_conf_parse("# UCX_TLS=rc\n"
                   "; UCX_TLS=ud\n"
                   "   # UCX_TLS=dc\n"
                   "[some section]\n"
                   "ucx_tls=tcp\n"        // names are case-sensitive
                   "NET_DEVICES=eth7\n"   // only UCX_ names
                   "UCX_=x\n"
                   "a line without a separator\n"
                   "=value without a name\n"
                   "UCX_NET_DEVICES=eth9\n", // applies under a section (1.13)
                   "/f", &c);
    EXPECT_EQ("<unset>", value_of(c, "UCX_TLS"));
    EXPECT_EQ("eth9", value_of(c, "UCX_NET_DEVICES"));
    EXPECT_EQ(1u, c.size());
}

TEST(UcxConfParse, LaterLinesAndFilesOverrideEarlierOnes) {
    UcxConf c;
    ucx_conf_parse("UCX_TLS=rc\nUCX_TLS=ud\nUCX_NET_DEVICES=lo\n", "/a", &c);
    EXPECT_EQ("ud", value_of(c, "UCX_TLS"));
    ucx_conf_parse("UCX_TLS=tcp\n", "/b", &c);
    EXPECT_EQ("tcp", value_of(c, "UCX_TLS"));
    EXPECT_EQ("/b", c.at("UCX_TLS").file);
    EXPECT_EQ("/a", c.at("UCX_NET_DEVICES").file);
}

TEST(UcxConfPaths, UcxOrderSkippingWhatIsUnset) {
    EXPECT_EQ((std::vector<std::string>{"/etc/ucx/ucx.conf", "/usr/lib/../etc/ucx/ucx.conf",
                                        "/usr/lib/../etc/ucx.conf", "/home/u/ucx.conf",
                                        "/cfg/ucx.conf", "./ucx.conf"}),
              ucx_conf_paths("/home/u", "/cfg", "/usr/lib"));
    EXPECT_EQ((std::vector<std::string>{"/etc/ucx/ucx.conf", "./ucx.conf"}),
              ucx_conf_paths(nullptr, "", ""));
}

// UCX 1.13 reads ucx.conf of the working directory last (ucx_info -c in a
// folder holding one shows its values over $UCX_CONFIG_DIR's and $HOME's):
// a setting there is the user's, and the context's defaults leave it.
// In a fresh process (the threadsafe death test runs the statement in a
// new copy of this program): the files are read once per process.
TEST(UcxUserValue, WorkingDirectoryConfigFileIsTheUsersSetting) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    char dir[] = "/tmp/ucxp2p-ucxconf.XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    const std::string conf = std::string(dir) + "/ucx.conf";
    {
        std::ofstream f(conf);
        f << "UCX_P2P_TEST_CWD_SETTING = from-cwd\n";
    }
    p2ptest::ScopedEnv unset("UCX_P2P_TEST_CWD_SETTING", nullptr);
    EXPECT_EXIT(
        {
            if (chdir(dir) != 0) _exit(3);
            std::string file;
            const char *v = ucx_user_value("UCX_P2P_TEST_CWD_SETTING", &file);
            std::fprintf(stderr, "%s from %s\n", v ? v : "(unset)", file.c_str());
            _exit(v != nullptr && std::string(v) == "from-cwd" ? 0 : 1);
        },
        testing::ExitedWithCode(0), "from-cwd from ./ucx.conf");
    std::remove(conf.c_str());
    rmdir(dir);
}

TEST(UcxUserValue, EnvironmentIsTheUsersSetting) {
    const char *name = "UCX_P2P_TEST_ONLY_SETTING";
    {
        p2ptest::ScopedEnv env(name, "x");
        std::string file = "stale";
        ASSERT_NE(nullptr, ucx_user_value(name, &file));
        EXPECT_STREQ("x", ucx_user_value(name));
        EXPECT_EQ("", file);
        EXPECT_EQ("x", ucxp2p::ucx_user_settings().at(name).value);
    }
    EXPECT_EQ(nullptr, ucx_user_value(name));
    EXPECT_EQ(0u, ucxp2p::ucx_user_settings().count(name));
}

// UCX 1.13 still reads UCX_MAX_RNDV_LANES and UCX_MAX_EAGER_LANES as the
// old names of UCX_MAX_RNDV_RAILS and UCX_MAX_EAGER_RAILS (`ucx_info -caf`:
// "alias of"): a user who set one has set the other.
TEST(UcxUserValue, OldNamesOfRailsSettingsAreTheUsersSetting) {
    p2ptest::ScopedEnv rails("UCX_MAX_RNDV_RAILS", nullptr);
    p2ptest::ScopedEnv lanes("UCX_MAX_RNDV_LANES", "1");
    p2ptest::ScopedEnv eager_rails("UCX_MAX_EAGER_RAILS", nullptr);
    p2ptest::ScopedEnv eager_lanes("UCX_MAX_EAGER_LANES", "3");
    EXPECT_STREQ("1", ucx_user_value("UCX_MAX_RNDV_RAILS"));
    EXPECT_STREQ("3", ucx_user_value("UCX_MAX_EAGER_RAILS"));
}

// The shared memory transports read UCX_MM_<X> unless their own
// UCX_POSIX_<X> / UCX_SYSV_<X> / UCX_XPMEM_<X> is set ("inherits" in
// `ucx_info -caf`): a user who set a transport's copy set the setting, and
// the context's MM_ defaults (MM_FIFO_SIZE, MM_ERROR_HANDLING) leave it.
TEST(UcxUserValue, TransportCopiesOfAnMmSettingAreTheUsersSetting) {
    p2ptest::ScopedEnv mm("UCX_MM_FIFO_SIZE", nullptr);
    p2ptest::ScopedEnv posix("UCX_POSIX_FIFO_SIZE", nullptr);
    p2ptest::ScopedEnv xpmem("UCX_XPMEM_FIFO_SIZE", nullptr);
    {
        p2ptest::ScopedEnv sysv("UCX_SYSV_FIFO_SIZE", "128");
        std::string file = "stale", which;
        EXPECT_STREQ("128", ucx_user_value("UCX_MM_FIFO_SIZE", &file, &which));
        EXPECT_EQ("UCX_SYSV_FIFO_SIZE", which);  // the name the log shows
        EXPECT_EQ("", file);
    }
    {
        p2ptest::ScopedEnv sysv("UCX_SYSV_FIFO_SIZE", nullptr);
        EXPECT_EQ(nullptr, ucx_user_value("UCX_MM_FIFO_SIZE"));
    }
    const std::vector<std::string> names = ucxp2p::ucx_names("UCX_MM_ERROR_HANDLING");
    const std::vector<std::string> want = {"UCX_MM_ERROR_HANDLING", "UCX_POSIX_ERROR_HANDLING",
                                           "UCX_SYSV_ERROR_HANDLING", "UCX_XPMEM_ERROR_HANDLING"};
    EXPECT_EQ(want, names);
    // Only the MM_ prefix fans out; a name that merely contains it does not.
    EXPECT_EQ(std::vector<std::string>{"UCX_MM_"}, ucxp2p::ucx_names("UCX_MM_"));
    EXPECT_EQ(std::vector<std::string>{"UCX_XMM_FIFO_SIZE"},
              ucxp2p::ucx_names("UCX_XMM_FIFO_SIZE"));
}
