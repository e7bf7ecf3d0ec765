/* The RoCE GID index a rail plan hands UCX: UCX_IB_GID_INDEX is one value
 * for every device, so it is set only when it is right for all RoCE rails
 * and the user chose GIDs no other UCX way. */
#include "ucxp2p_config.h"

#include "topo/rail_plan.h"

#include "../shell.h"
#include "plan_test_util.h"
#include "topo_test_util.h"

using namespace ucxp2p::topo;
using topo_test::add_roce_port;
using topo_test::fixture;
using topo_test::note_with;
using topo_test::plan_ok;
using topo_test::setting;
using topo_test::TempDir;

namespace {

const char *kV4a = "0000:0000:0000:0000:0000:ffff:0a00:0001";  // 10.0.0.1
const char *kV4b = "0000:0000:0000:0000:0000:ffff:0a00:0002";  // 10.0.0.2

/** RoCE port 1 of mlx5_0 and of mlx5_1, each with one RoCE v2 IPv4 GID
 *  at the index given. */
void roce_pair(const TempDir &d, unsigned index0, unsigned index1) {
    add_roce_port(d, "mlx5_0", 1, index0, kV4a);
    add_roce_port(d, "mlx5_1", 1, index1, kV4b);
}

/** mlx5_0 and mlx5_1 (no locality), planned by name. */
PlanInput two_rails(const TempDir &d) {
    PlanInput in;
    in.rails = "mlx5_0,mlx5_1";
    in.sysfs_root = d.path();
    return in;
}

Machine two_nics() {
    Machine m;
    m.numa_nodes = {0};
    for (const char *name : {"mlx5_0", "mlx5_1"}) {
        Nic n;
        n.name = name;
        n.kind = NicKind::MLX;
        m.nics.push_back(n);
    }
    return m;
}

} // namespace

// mlx5_0's RoCE v2 IPv4 GID is index 3, mlx5_1's is 5: a global index of 3
// would give mlx5_1 the wrong GID. UCX's own auto picks per device.
TEST(GidPlan, RailsThatDifferLeaveTheIndexToUcx) {
    TempDir d;
    roce_pair(d, 3, 5);
    RailPlan p = plan_ok(two_nics(), two_rails(d));
    EXPECT_EQ("<unset>", setting(p, "UCX_IB_GID_INDEX"));
    EXPECT_EQ(-1, p.gid.index);
    EXPECT_EQ("roce rails differ in gid index (mlx5_0:1: 3, mlx5_1:1: 5); "
              "UCX_IB_GID_INDEX left unset: UCX picks each device's gid itself",
              note_with(p, "differ"));
    EXPECT_EQ("", note_with(p, "is global"));
    EXPECT_EQ(std::string::npos, rail_plan_describe(p).find("gid index:"));

    // A number given by the user is still applied to every rail.
    PlanInput in = two_rails(d);
    in.gid_index = "4";
    p = plan_ok(two_nics(), in);
    EXPECT_EQ("4", setting(p, "UCX_IB_GID_INDEX"));
    EXPECT_EQ("", note_with(p, "differ"));
}

TEST(GidPlan, RailsThatAgreeGetTheIndex) {
    TempDir d;
    roce_pair(d, 3, 3);
    RailPlan p = plan_ok(two_nics(), two_rails(d));
    EXPECT_EQ("3", setting(p, "UCX_IB_GID_INDEX"));
    EXPECT_EQ(3, p.gid.index);
    EXPECT_EQ(0u, p.gid.reason.find("mlx5_0:1: ")) << p.gid.reason;
    EXPECT_EQ("", note_with(p, "differ"));
}

// A user who chose GIDs another UCX way keeps that choice alone: a
// per-transport GID_INDEX would be overridden for other transports, and
// UCX >= 1.18 refuses a GID index together with a RoCE subnet.
TEST(GidPlan, OtherUserGidChoicesSuppressTheIndex) {
    TempDir d;
    roce_pair(d, 3, 3);
    PlanInput in = two_rails(d);
    in.user_ucx = {{"UCX_RC_MLX5_GID_INDEX", "1"}};
    RailPlan p = plan_ok(two_nics(), in);
    EXPECT_EQ("<unset>", setting(p, "UCX_IB_GID_INDEX"));
    EXPECT_EQ("UCX_IB_GID_INDEX=3 not set: UCX_RC_MLX5_GID_INDEX=1 set by the user "
              "chooses the gids", note_with(p, "not set"));

    in.user_ucx = {{"UCX_TLS", "rc,self"}, {"UCX_IB_ROCE_SUBNET_LIST", "10.0.0.0/8"}};
    in.user_ucx_files = {{"UCX_IB_ROCE_SUBNET_LIST", "/etc/ucx/ucx.conf"}};
    in.gid_index = "4";  // a number from the user too
    p = plan_ok(two_nics(), in);
    EXPECT_EQ("<unset>", setting(p, "UCX_IB_GID_INDEX"));
    EXPECT_EQ("UCX_IB_GID_INDEX=4 not set: UCX_IB_ROCE_SUBNET_LIST=10.0.0.0/8 set in "
              "/etc/ucx/ucx.conf chooses the gids (UCX >= 1.18 refuses "
              "UCX_IB_GID_INDEX with a roce subnet)", note_with(p, "not set"));

    in.user_ucx = {{"UCX_TLS", "rc,self"}, {"UCX_IB_TX_QUEUE_LEN", "256"}};
    in.user_ucx_files.clear();
    p = plan_ok(two_nics(), in);
    EXPECT_EQ("4", setting(p, "UCX_IB_GID_INDEX")) << "unrelated settings do not count";
    EXPECT_EQ("", note_with(p, "not set"));
}

#ifdef HAVE_HWLOC
// The reviewer's preview: p2p_info with a fake sysfs.
TEST(GidPlan, P2pInfoShowsNoGlobalIndexForRailsThatDiffer) {
    TempDir d;
    roce_pair(d, 3, 5);
    p2ptest::ShellResult sh = p2ptest::run_shell(
        "env -u UCX_IB_GID_INDEX P2P_RAILS=mlx5_0,mlx5_1 timeout 60 " +
        topo_test::builddir() + "/tools/info/p2p_info --topology " +
        fixture("nogpu_mlx4.xml") + " --sysfs " + d.path() +
        " --local-size 1 --no-ucx --no-config 2>&1");
    EXPECT_NE(std::string::npos, sh.out.find("set UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1"))
        << sh.out;
    EXPECT_EQ(std::string::npos, sh.out.find("UCX_IB_GID_INDEX=")) << sh.out;
    EXPECT_NE(std::string::npos, sh.out.find("note: roce rails differ in gid index "
                                             "(mlx5_0:1: 3, mlx5_1:1: 5)"))
        << sh.out;
}
#endif

// P2P_IB_GID_INDEX=N is applied where sysfs cannot tell the link layer (a
// preview without sysfs, a port without link_layer), with a note; in auto
// mode nothing can be chosen there. It used to be dropped without a word.
TEST(GidPlan, ExplicitIndexIsAppliedWhereTheLinkLayerIsUnknown) {
    TempDir d;  // empty: no device in sysfs
    PlanInput in = two_rails(d);
    in.gid_index = "3";
    RailPlan p = plan_ok(two_nics(), in);
    EXPECT_EQ("3", setting(p, "UCX_IB_GID_INDEX"));
    EXPECT_EQ("mlx5_0:1: link layer unknown (not in sysfs); P2P_IB_GID_INDEX=3 applied as given",
              note_with(p, "mlx5_0:1: link layer"));
    in.gid_index = "auto";
    p = plan_ok(two_nics(), in);
    EXPECT_EQ("<unset>", setting(p, "UCX_IB_GID_INDEX"));
    EXPECT_EQ("", note_with(p, "link layer unknown"));
}

// P2P_IB_ADDR_RANGE in a plan: the GID in the range on each rail; a rail
// with none keeps UCX's default, with a note; a malformed range is an
// error; a number in P2P_IB_GID_INDEX wins over it.
TEST(GidPlan, AddrRangePicksTheGidOnThatSubnet) {
    TempDir d;
    roce_pair(d, 3, 3);  // 10.0.0.1 / 10.0.0.2 at index 3
    for (const char *dev : {"mlx5_0", "mlx5_1"}) {
        topo_test::add_gid(d, dev, 1, 6, "0000:0000:0000:0000:0000:ffff:c0a8:0001", "RoCE v2",
                           "eth1");  // 192.168.0.1
    }
    PlanInput in = two_rails(d);
    EXPECT_EQ("3", setting(plan_ok(two_nics(), in), "UCX_IB_GID_INDEX"));
    in.addr_range = "192.168.0.0/24";
    RailPlan p = plan_ok(two_nics(), in);
    EXPECT_EQ("6", setting(p, "UCX_IB_GID_INDEX"));
    EXPECT_NE(std::string::npos, p.gid.reason.find("(in 192.168.0.0/24)")) << p.gid.reason;

    in.addr_range = "172.16.0.0/12";
    p = plan_ok(two_nics(), in);
    EXPECT_EQ("<unset>", setting(p, "UCX_IB_GID_INDEX"));
    EXPECT_EQ("roce mlx5_0:1: no usable gid found in P2P_IB_ADDR_RANGE=172.16.0.0/12; UCX "
              "keeps its default", note_with(p, "roce mlx5_0:1: no usable"));

    in.gid_index = "4";
    EXPECT_EQ("4", setting(plan_ok(two_nics(), in), "UCX_IB_GID_INDEX"));

    in.gid_index = "auto";
    in.addr_range = "192.168.0.0/33";
    RailPlan bad;
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, plan_rails(two_nics(), in, &bad));
}
