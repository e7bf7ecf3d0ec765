/* Rail planner: per-rank plans on real and synthetic machines, overrides,
 * RoCE GID through a fake sysfs (the user's UCX settings and the lanes per
 * transport mix: test_rail_lanes.cc; what the loaded UCX version changes:
 * test_ucx_limits.cc). */
#include "ucxp2p_config.h"

#include "topo/rail_plan.h"
#include "topo/topology.h"

#include "plan_test_util.h"
#include "topo_test_util.h"

#include <algorithm>
#include <set>

using namespace ucxp2p::topo;
using topo_test::add_gid;
using topo_test::add_port;
using topo_test::add_roce_port;
using topo_test::fixture;
using topo_test::has_note;
using topo_test::input;
using topo_test::load;
using topo_test::names;
using topo_test::plan_ok;
using topo_test::setting;
using topo_test::shared_xml;
using topo_test::TempDir;

#ifdef HAVE_HWLOC

TEST(RailPlan, P4dGpuPairsShareTheEfaOfTheirSwitch) {
    std::string path = shared_xml("p4d.24xlarge.xml");
    SKIP_UNLESS_SHARED(path);
    Machine m = load(path);
    const char *efa[] = {"rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27"};
    for (uint32_t r = 0; r < 8; ++r) {
        RailPlan p = plan_ok(m, input(r, 8));
        SCOPED_TRACE("local rank " + std::to_string(r));
        EXPECT_EQ(static_cast<int>(r), p.gpu);
        EXPECT_EQ(r < 4 ? 0 : 1, p.numa);
        ASSERT_EQ(1u, p.nics.size());
        EXPECT_EQ(efa[r / 2], p.nics[0].nic.name);
        EXPECT_EQ(std::string(efa[r / 2]) + ":1", setting(p, "UCX_NET_DEVICES"));
        EXPECT_EQ("1", setting(p, "UCX_MAX_RNDV_RAILS"));
        EXPECT_NE(std::string::npos, p.reason.find("same pcie switch")) << p.reason;
        EXPECT_EQ(-1, p.gid.index);
    }
}

TEST(RailPlan, P4dCountOverrideAddsTheNextNearestNic) {
    std::string path = shared_xml("p4d.24xlarge.xml");
    SKIP_UNLESS_SHARED(path);
    Machine m = load(path);
    PlanInput in = input(0, 8);
    in.rails = "2";
    RailPlan p = plan_ok(m, in);
    // Own switch first, then the other EFA of NUMA 0.
    EXPECT_EQ((std::vector<std::string>{"rdmap16s27:1", "rdmap32s27:1"}), names(p));
    EXPECT_EQ("2", setting(p, "UCX_MAX_RNDV_RAILS"));
    in.rails = "9";
    p = plan_ok(m, in);
    EXPECT_EQ(4u, p.nics.size());
    EXPECT_EQ("4", setting(p, "UCX_MAX_RNDV_RAILS"));
    ASSERT_FALSE(p.notes.empty());
}

TEST(RailPlan, P4dExplicitNamesAndSmddpDevice) {
    std::string path = shared_xml("p4d.24xlarge.xml");
    SKIP_UNLESS_SHARED(path);
    Machine m = load(path);
    PlanInput in = input(0, 8);
    in.smddp_devices = "rdmap144s27";
    RailPlan p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"rdmap144s27:1"}), names(p));
    EXPECT_NE(std::string::npos, p.reason.find("SMDATAPARALLEL_DEVICE_NAME"));
    in.rails = "rdmap160s27,rdmap32s27";   // P2P_RAILS names win over SMDDP
    p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"rdmap160s27:1", "rdmap32s27:1"}), names(p));
    in.rails = "rdmap999";
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, plan_rails(m, in, &p));
    in.rails = "rdmap16s27:x";
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, plan_rails(m, in, &p));
}

TEST(RailPlan, P5enEachGpuGetsTwoOwnEfas) {
    std::string path = shared_xml("p5en.48xlarge.xml");
    SKIP_UNLESS_SHARED(path);
    Machine m = load(path);
    std::set<std::string> used;
    for (uint32_t r = 0; r < 8; ++r) {
        RailPlan p = plan_ok(m, input(r, 8));
        SCOPED_TRACE("local rank " + std::to_string(r));
        ASSERT_EQ(2u, p.nics.size());
        EXPECT_EQ("2", setting(p, "UCX_MAX_RNDV_RAILS"));
        for (const PlannedNic &n : p.nics) {
            EXPECT_EQ(p.numa, n.nic.pci.numa);
            EXPECT_TRUE(used.insert(n.nic.name).second) << n.nic.name << " twice";
        }
    }
    EXPECT_EQ(16u, used.size());
}

TEST(RailPlan, P6MixedFabricsKeepEfaUnlessHcaChosen) {
    std::string path = shared_xml("p6-b200.48xlarge.xml");
    SKIP_UNLESS_SHARED(path);
    Machine m = load(path);
    RailPlan p = plan_ok(m, input(4, 8));
    ASSERT_EQ(1u, p.nics.size());
    EXPECT_EQ(NicKind::EFA, p.nics[0].nic.kind);
    ASSERT_FALSE(p.notes.empty());
    EXPECT_NE(std::string::npos, p.notes[0].find("ibp115s0f0"));
    PlanInput in = input(4, 8);
    in.hca = "ibp";
    p = plan_ok(m, in);
    ASSERT_FALSE(p.nics.empty());
    for (const PlannedNic &n : p.nics) {
        EXPECT_EQ(0u, n.nic.name.rfind("ibp", 0)) << n.nic.name;
    }
}

TEST(RailPlan, SyntheticGpuPicksNicOnItsSwitch) {
    Machine m = load(fixture("gpu2_mlx2_bond.xml"));
    RailPlan p0 = plan_ok(m, input(0, 2));
    RailPlan p1 = plan_ok(m, input(1, 2));
    EXPECT_EQ((std::vector<std::string>{"mlx5_0:1"}), names(p0));
    EXPECT_EQ("cuda0", p0.gpu_name);
    EXPECT_EQ(0, p0.numa);
    EXPECT_EQ((std::vector<std::string>{"mlx5_bond_0:1"}), names(p1));
    EXPECT_EQ(1, p1.numa);
    // More ranks than GPUs: rank 2 shares GPU 0 and its NIC.
    RailPlan p2 = plan_ok(m, input(2, 4));
    EXPECT_EQ(0, p2.gpu);
    EXPECT_EQ((std::vector<std::string>{"mlx5_0:1"}), names(p2));
    // An explicit GPU index is honoured; a bad one is rejected.
    PlanInput in = input(0, 1);
    in.gpu = 1;
    EXPECT_EQ((std::vector<std::string>{"mlx5_bond_0:1"}), names(plan_ok(m, in)));
    in.gpu = 2;
    RailPlan bad;
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, plan_rails(m, in, &bad));
}

TEST(RailPlan, HcaFilterRestrictsAutomaticChoice) {
    Machine m = load(fixture("gpu2_mlx2_bond.xml"));
    PlanInput in = input(0, 2);
    in.hca = "=mlx5_bond_0";
    RailPlan p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"mlx5_bond_0:1"}), names(p));
    in.hca = "bnxt";
    p = plan_ok(m, in);
    EXPECT_TRUE(p.nics.empty());
    EXPECT_NE(std::string::npos, p.reason.find("P2P_HCA")) << p.reason;
    EXPECT_TRUE(p.ucx_settings.empty());
}

TEST(RailPlan, NoGpuSpreadsRanksOverNicsOfTheirNuma) {
    Machine m = load(fixture("nogpu_mlx4.xml"));
    const char *expect4[] = {"mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"};
    for (uint32_t r = 0; r < 4; ++r) {
        RailPlan p = plan_ok(m, input(r, 4));
        EXPECT_EQ(-1, p.gpu);
        EXPECT_EQ(r < 2 ? 0 : 1, p.numa) << r;
        EXPECT_EQ((std::vector<std::string>{expect4[r]}), names(p)) << r;
    }
    // One rank: it sits on NUMA 0 and takes both of its NICs.
    RailPlan one = plan_ok(m, input(0, 1));
    EXPECT_EQ((std::vector<std::string>{"mlx5_0:1", "mlx5_1:1"}), names(one));
    EXPECT_EQ("2", setting(one, "UCX_MAX_RNDV_RAILS"));
    // Eight ranks: four per NUMA node, round-robin over its two NICs.
    const char *expect8[] = {"mlx5_0:1", "mlx5_1:1", "mlx5_0:1", "mlx5_1:1",
                             "mlx5_2:1", "mlx5_3:1", "mlx5_2:1", "mlx5_3:1"};
    for (uint32_t r = 0; r < 8; ++r) {
        EXPECT_EQ((std::vector<std::string>{expect8[r]}), names(plan_ok(m, input(r, 8))))
            << r;
    }
    // A CPU binding to NUMA 1 wins over the block placement (rank 0 would
    // be on NUMA 0); with one rank per node it takes both NICs of NUMA 1,
    // with two per node each takes one.
    PlanInput in = input(0, 2);
    in.binding_numa = 1;
    RailPlan b = plan_ok(m, in);
    EXPECT_EQ(1, b.numa);
    EXPECT_EQ((std::vector<std::string>{"mlx5_2:1", "mlx5_3:1"}), names(b));
}

namespace {
/** NICs local rank r of n takes on nogpu_mlx4.xml (NUMA 0: mlx5_0, mlx5_1;
 *  NUMA 1: mlx5_2, mlx5_3) when bound to NUMA numa, at slot (-1: bound to
 *  the whole node); the reason line must say how its place was found. */
std::string bound_nic(const Machine &m, uint32_t r, uint32_t n, int numa, int slot) {
    PlanInput in = input(r, n);
    in.binding_numa = numa;
    in.binding_slot = slot;
    RailPlan p = plan_ok(m, in);
    EXPECT_EQ(numa, p.numa);
    std::string s;
    for (const std::string &x : names(p)) s += (s.empty() ? "" : ",") + x;
    return s + " by " + p.reason.substr(p.reason.find('(') + 1, p.reason.find(':') -
                                                               p.reason.find('(') - 1);
}
} // namespace

TEST(RailPlan, NoGpuBoundRanksRoundRobinOverNumaUseEveryNic) {
    Machine m = load(fixture("nogpu_mlx4.xml"));
    // mpirun's default above two ranks (--map-by numa, --bind-to core):
    // local rank r on NUMA r % 2, on the node's next core. Ranks 0 and 2
    // both took mlx5_0 (1 and 3 mlx5_3) when the position was taken from
    // the local rank as in block placement: half the NICs stayed idle.
    // Ranks 1 and 2 fit round-robin placement only; 0 and 3 either, and
    // both placements give them the same place.
    const char *rr4[] = {"mlx5_0:1 by position of its cores",
                         "mlx5_2:1 by round-robin placement",
                         "mlx5_1:1 by round-robin placement",
                         "mlx5_3:1 by position of its cores"};
    for (uint32_t r = 0; r < 4; ++r) {
        EXPECT_EQ(rr4[r], bound_nic(m, r, 4, r % 2, r / 2)) << r;
    }
    // Bound to the whole node: the same NICs.
    EXPECT_EQ("mlx5_0:1 by block placement", bound_nic(m, 0, 4, 0, -1));
    EXPECT_EQ("mlx5_1:1 by round-robin placement", bound_nic(m, 2, 4, 0, -1));
    EXPECT_EQ("mlx5_3:1 by block placement", bound_nic(m, 3, 4, 1, -1));
    // Eight ranks: rank 2 fits either placement on NUMA 0 (block says 3rd
    // of 4, round-robin 2nd); its cores tell.
    const char *rr8[] = {"mlx5_0:1", "mlx5_2:1", "mlx5_1:1", "mlx5_3:1",
                         "mlx5_0:1", "mlx5_2:1", "mlx5_1:1", "mlx5_3:1"};
    for (uint32_t r = 0; r < 8; ++r) {
        std::string got = bound_nic(m, r, 8, r % 2, r / 2);
        EXPECT_EQ(rr8[r], got.substr(0, got.find(' '))) << r << ": " << got;
    }
    EXPECT_EQ("mlx5_1:1 by position of its cores", bound_nic(m, 2, 8, 0, 1));
    // Block placement bound to cores, or to the whole node, gives what it
    // gave unbound.
    const char *block8[] = {"mlx5_0:1", "mlx5_1:1", "mlx5_0:1", "mlx5_1:1",
                            "mlx5_2:1", "mlx5_3:1", "mlx5_2:1", "mlx5_3:1"};
    for (uint32_t r = 0; r < 8; ++r) {
        for (int slot : {static_cast<int>(r % 4), -1}) {
            std::string got = bound_nic(m, r, 8, static_cast<int>(r / 4), slot);
            EXPECT_EQ(block8[r], got.substr(0, got.find(' '))) << r << ": " << got;
        }
    }
    // A slot past the ranks the node holds (cores with gaps between ranks)
    // is not a position.
    EXPECT_EQ("mlx5_3:1 by block placement", bound_nic(m, 3, 4, 1, 5));
    // Ranks the user bound to the same cores (all slot 0) where neither
    // placement fits: the local rank spreads them, as before.
    EXPECT_EQ("mlx5_2:1 by local rank", bound_nic(m, 0, 4, 1, 0));
    EXPECT_EQ("mlx5_1:1 by local rank", bound_nic(m, 3, 4, 0, 0));
}

TEST(RailPlan, MachineWithoutNicGivesEmptyPlan) {
    Machine m = load(fixture("gpu1_nonic.xml"));
    RailPlan p = plan_ok(m, input(0, 1));
    EXPECT_TRUE(p.nics.empty());
    EXPECT_EQ("no rdma devices", p.reason);
    EXPECT_TRUE(p.ucx_settings.empty());
    EXPECT_EQ(0, p.gpu);
}

TEST(RailPlan, LiveMachineWithoutRdmaIsGraceful) {
    std::unique_ptr<Topology> t;
    ASSERT_EQ(P2P_OK, Topology::load("", &t));
    if (!t->machine().nics.empty()) {
        GTEST_SKIP() << "this machine has rdma devices";
    }
    PlanInput in = input(0, 1);
    in.sysfs_root = "/nonexistent-sysfs";
    RailPlan p = plan_ok(t->machine(), in);
    EXPECT_TRUE(p.nics.empty());
    EXPECT_EQ("no rdma devices", p.reason);
}

// The other rail inputs the user's UCX_NET_DEVICES overrides are noted too.
TEST(RailPlan, RailCountAndHcaIgnoredUnderUserNetDevicesAreNoted) {
    Machine m = load(fixture("nogpu_mlx4.xml"));
    PlanInput in = input(0, 4);
    in.user_ucx = {{"UCX_NET_DEVICES", "mlx5_3:1"}};
    in.rails = "2";
    in.hca = "mlx5_0";
    RailPlan p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"mlx5_3:1"}), names(p));
    EXPECT_TRUE(has_note(p, "P2P_RAILS=2 ignored: UCX_NET_DEVICES is set"));
    EXPECT_TRUE(has_note(p, "P2P_HCA=mlx5_0 ignored: UCX_NET_DEVICES is set"));
}

// A P2P_HCA entry with a malformed port is refused, as in P2P_RAILS (it
// quietly meant every port).
TEST(RailPlan, MalformedHcaPortIsRefused) {
    Machine m = load(fixture("nogpu_mlx4.xml"));
    PlanInput in = input(0, 1);
    RailPlan p;
    for (const char *bad : {"mlx5_0:abc", "mlx5_0:0", "mlx5_0:", "mlx5_0:256", "^=", "=:1",
                            "mlx5_0,mlx5_1:x"}) {
        in.hca = bad;
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, plan_rails(m, in, &p)) << bad;
    }
    for (const char *good : {"^=mlx5_0,mlx5_1:2", "mlx5_0,", "=mlx5_0:1", "mlx5"}) {
        in.hca = good;
        EXPECT_EQ(P2P_OK, plan_rails(m, in, &p)) << good;
    }
}

TEST(RailPlan, HcaEntryWithWhitespaceIsRefused) {
    // No device name holds whitespace: " mlx5_1" would match nothing and
    // silently drop mlx5_1 from the rails.
    Machine m = load(fixture("nogpu_mlx4.xml"));
    PlanInput in = input(0, 1);
    RailPlan p;
    for (const char *bad : {"mlx5_0, mlx5_1", "mlx5_0 ", " =mlx5_0", "^mlx5_0,\tmlx5_1"}) {
        in.hca = bad;
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, plan_rails(m, in, &p)) << bad;
    }
}

TEST(RailPlan, SmddpDeviceNameIgnoredUnderUserNetDevicesIsNoted) {
    Machine m = load(fixture("nogpu_mlx4.xml"));
    PlanInput in = input(0, 4);
    in.user_ucx = {{"UCX_NET_DEVICES", "mlx5_3:1"}};
    in.smddp_devices = "mlx5_9";  // does not exist: not checked, but noted
    RailPlan p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"mlx5_3:1"}), names(p));
    bool noted = false;
    for (const std::string &n : p.notes) {
        noted |= n.find("SMDATAPARALLEL_DEVICE_NAME=mlx5_9 ignored: UCX_NET_DEVICES "
                        "is set") != std::string::npos;
    }
    EXPECT_TRUE(noted);
}

TEST(RailPlan, RoceGidAndPortComeFromSysfs) {
    Machine m = load(fixture("nogpu_mlx4.xml"));
    TempDir d;
    add_port(d, "mlx5_0", 1, "Ethernet", "1: DOWN");
    add_port(d, "mlx5_0", 2, "Ethernet", "4: ACTIVE");
    add_gid(d, "mlx5_0", 2, 0, "fe80:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1", "eth2");
    add_gid(d, "mlx5_0", 2, 3, "0000:0000:0000:0000:0000:ffff:0a00:0002", "RoCE v2", "eth2");
    add_port(d, "mlx5_1", 1, "InfiniBand", "4: ACTIVE");
    PlanInput in = input(0, 1);
    in.sysfs_root = d.path();
    RailPlan p = plan_ok(m, in);
    // Port 1 of mlx5_0 is down: port 2 is used; mlx5_1 is IB (no GID).
    EXPECT_EQ((std::vector<std::string>{"mlx5_0:2", "mlx5_1:1"}), names(p));
    EXPECT_EQ(3, p.gid.index);
    EXPECT_EQ("3", setting(p, "UCX_IB_GID_INDEX"));
    EXPECT_EQ("mlx5_0:2,mlx5_1:1", setting(p, "UCX_NET_DEVICES"));

    in.gid_index = "5";
    p = plan_ok(m, in);
    EXPECT_EQ("5", setting(p, "UCX_IB_GID_INDEX"));
    in.user_ucx = {{"UCX_IB_GID_INDEX", "1"}};
    p = plan_ok(m, in);
    EXPECT_EQ("<unset>", setting(p, "UCX_IB_GID_INDEX"));
    in.gid_index = "five";
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, plan_rails(m, in, &p));
}

/** The first note that starts with prefix, else "". */
std::string note_starting(const RailPlan &p, const std::string &prefix) {
    for (const std::string &n : p.notes) {
        if (n.rfind(prefix, 0) == 0) return n;
    }
    return std::string();
}

// UCX_IB_GID_INDEX is one for all devices: a RoCE rail with no usable GID
// of its own must not be forced onto the index found for another, so none
// is set and UCX picks each device's GID itself; the notes say so.
TEST(RailPlan, RoceRailWithoutGidLeavesTheIndexToUcx) {
    Machine m = load(fixture("nogpu_mlx4.xml"));
    TempDir d;
    add_roce_port(d, "mlx5_0", 1, 0, "fe80:0000:0000:0000:0000:0000:0000:0001");
    add_roce_port(d, "mlx5_1", 1, 3, "0000:0000:0000:0000:0000:ffff:0a00:0002");
    PlanInput in = input(0, 1);
    in.sysfs_root = d.path();
    in.rails = "mlx5_0,mlx5_1";
    RailPlan p = plan_ok(m, in);
    EXPECT_EQ("<unset>", setting(p, "UCX_IB_GID_INDEX"));
    EXPECT_EQ(-1, p.gid.index);
    const std::string prefix = "roce mlx5_0:1: no usable gid found; ";
    EXPECT_EQ(prefix + "UCX keeps its default", note_starting(p, prefix));
    EXPECT_EQ("roce rails differ in gid index (mlx5_0:1: none, mlx5_1:1: 3); "
              "UCX_IB_GID_INDEX left unset: UCX picks each device's gid itself",
              note_starting(p, "roce rails differ"));
    in.rails = "mlx5_0";  // alone: no index is set
    p = plan_ok(m, in);
    EXPECT_EQ("<unset>", setting(p, "UCX_IB_GID_INDEX"));
    EXPECT_EQ(prefix + "UCX keeps its default", note_starting(p, prefix));
    EXPECT_EQ("", note_starting(p, "roce rails differ"));
}

// A port the user names stays, down or not (UCX is given it, so the GID is
// that port's); only a port the device lacks is replaced, with a note.
TEST(RailPlan, NamedRocePortIsKept) {
    Machine m = load(fixture("nogpu_mlx4.xml"));
    TempDir d;
    add_roce_port(d, "mlx5_0", 1, 2, "0000:0000:0000:0000:0000:ffff:0a00:0001", "1: DOWN");
    add_roce_port(d, "mlx5_0", 2, 3, "0000:0000:0000:0000:0000:ffff:0a00:0002");
    PlanInput in = input(0, 1);
    in.sysfs_root = d.path();
    in.rails = "mlx5_0:1";
    RailPlan p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"mlx5_0:1"}), names(p));
    EXPECT_EQ(2, p.gid.index) << "the named port's GID";
    EXPECT_EQ("mlx5_0:1 is not active; kept as named", note_starting(p, "mlx5_0:1 is"));
    in.rails = "mlx5_0:7";
    p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"mlx5_0:2"}), names(p));
    EXPECT_EQ("mlx5_0 has no port 7; using port 2", note_starting(p, "mlx5_0 has no"));
    in.rails = "mlx5_0";  // no port named: the active one
    p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"mlx5_0:2"}), names(p));
}

// A device named twice is one rail: two UCX lanes on one port would only
// split its bandwidth (UCX_NET_DEVICES=mlx5_0:1,mlx5_0:1 was planned).
TEST(RailPlan, DeviceNamedTwiceIsOneRail) {
    Machine m = load(fixture("nogpu_mlx4.xml"));
    PlanInput in = input(0, 1);
    in.rails = "mlx5_0,mlx5_0:1,mlx5_1,mlx5_0";
    RailPlan p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"mlx5_0:1", "mlx5_1:1"}), names(p));
    EXPECT_EQ("mlx5_0:1,mlx5_1:1", setting(p, "UCX_NET_DEVICES"));
    EXPECT_EQ("2", setting(p, "UCX_MAX_RNDV_RAILS"));
    EXPECT_EQ(1u, std::count(p.notes.begin(), p.notes.end(),
                             "mlx5_0:1 named more than once: one rail"));
    in.rails = "mlx5_0:1,mlx5_0:2";  // two ports are two rails
    p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"mlx5_0:1", "mlx5_0:2"}), names(p));
    EXPECT_EQ("", note_starting(p, "mlx5_0:"));
    // Port 1 down: the unported entry moves to port 2, which is named too.
    TempDir d;
    add_roce_port(d, "mlx5_0", 1, 2, "0000:0000:0000:0000:0000:ffff:0a00:0001", "1: DOWN");
    add_roce_port(d, "mlx5_0", 2, 3, "0000:0000:0000:0000:0000:ffff:0a00:0002");
    in.sysfs_root = d.path();
    in.rails = "mlx5_0,mlx5_0:2";
    p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"mlx5_0:2"}), names(p));
    EXPECT_EQ("mlx5_0:2 named more than once: one rail", note_starting(p, "mlx5_0:2 named"));
}

// A setting from a UCX config file is kept like one from the environment,
// and the note says which file set it.
TEST(RailPlan, ConfigFileSettingsAreKeptAndTheFileNamed) {
    Machine m = load(fixture("nogpu_mlx4.xml"));
    PlanInput in = input(0, 1);
    in.rails = "mlx5_0,mlx5_1";
    in.user_ucx = {{"UCX_MAX_RNDV_RAILS", "1"}};
    in.user_ucx_files = {{"UCX_MAX_RNDV_RAILS", "/etc/ucx/ucx.conf"}};
    RailPlan p = plan_ok(m, in);
    EXPECT_EQ("<unset>", setting(p, "UCX_MAX_RNDV_RAILS"));
    EXPECT_EQ("kept UCX_MAX_RNDV_RAILS=1 set in /etc/ucx/ucx.conf (plan wanted 2)",
              note_starting(p, "kept UCX_MAX_RNDV_RAILS"));
    in.user_ucx = {{"UCX_NET_DEVICES", "mlx5_1:1"}};
    in.user_ucx_files = {{"UCX_NET_DEVICES", "/home/u/ucx.conf"}};
    p = plan_ok(m, in);
    EXPECT_EQ("UCX_NET_DEVICES=mlx5_1:1 set in /home/u/ucx.conf", p.reason);
}

#endif // HAVE_HWLOC

TEST(RailPlan, SysfsDevicesAreUsedWhenHwlocSeesNone) {
    // A pod whose hwloc shows no PCI devices but has /sys/class/infiniband.
    Machine m;
    m.numa_nodes = {0};
    TempDir d;
    add_port(d, "mlx5_bond_0", 1, "Ethernet", "4: ACTIVE");
    add_gid(d, "mlx5_bond_0", 1, 0, "fe80:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1", "bond0");
    add_gid(d, "mlx5_bond_0", 1, 9, "0000:0000:0000:0000:0000:ffff:0a00:0002", "RoCE v2", "bond0");
    PlanInput in = input(0, 1);
    in.sysfs_root = d.path();
    RailPlan p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"mlx5_bond_0:1"}), names(p));
    EXPECT_EQ(9, p.gid.index);
    EXPECT_NE(std::string::npos, p.reason.find("sysfs")) << p.reason;
    EXPECT_NE(std::string::npos, rail_plan_describe(p).find("gid index: 9"));
}

TEST(RailPlan, BadRankAndRailsAreRejected) {
    Machine m;
    RailPlan p;
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, plan_rails(m, input(1, 1), &p));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, plan_rails(m, input(0, 0), &p));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, plan_rails(m, input(0, 1), nullptr));
    PlanInput in = input(0, 1);
    in.rails = "0";
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, plan_rails(m, in, &p));
    in.rails = "65";  // above the count's range, and no device name
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, plan_rails(m, in, &p));
    in.rails = "99999999999999999999999";
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, plan_rails(m, in, &p));
    in.rails = "64";
    EXPECT_EQ(P2P_OK, plan_rails(m, in, &p));
    in.rails = "auto";
    p = plan_ok(m, in);
    EXPECT_EQ("no rdma devices", p.reason);
}
