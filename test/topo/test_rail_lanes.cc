/* Rail planner: the user's UCX settings (environment, old variable names)
 * are never overridden, and the lanes a plan adds for each transport mix.
 * Other plans: test_rail_plan.cc. */
#include "ucxp2p_config.h"

#include "topo/rail_plan.h"
#include "topo/topology.h"

#include "plan_test_util.h"
#include "topo_test_util.h"

using namespace ucxp2p::topo;
using topo_test::fixture;
using topo_test::has_note;
using topo_test::input;
using topo_test::load;
using topo_test::names;
using topo_test::plan_ok;
using topo_test::setting;

#ifdef HAVE_HWLOC

TEST(RailPlan, UserUcxSettingsAreNeverOverridden) {
    Machine m = load(fixture("nogpu_mlx4.xml"));
    PlanInput in = input(0, 4);
    in.user_ucx = {{"UCX_NET_DEVICES", "mlx5_3:1,eth0"}, {"UCX_MAX_RNDV_RAILS", "3"}};
    in.rails = "mlx5_0";
    RailPlan p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"mlx5_3:1"}), names(p));
    EXPECT_EQ("<unset>", setting(p, "UCX_NET_DEVICES"));
    EXPECT_EQ("<unset>", setting(p, "UCX_MAX_RNDV_RAILS"));
    EXPECT_EQ("1", setting(p, "UCX_MAX_EAGER_RAILS"));
    EXPECT_NE(std::string::npos, p.reason.find("set by the user"));
    bool kept = false;
    bool ignored = false;
    for (const std::string &n : p.notes) {
        kept |= n.find("kept UCX_MAX_RNDV_RAILS=3") != std::string::npos;
        ignored |= n.find("P2P_RAILS=mlx5_0 ignored") != std::string::npos;
    }
    EXPECT_TRUE(kept);
    EXPECT_TRUE(ignored);
}

TEST(RailPlan, OldUcxNamesOfRailsSettingsAreNeverOverridden) {
    // UCX 1.13 reads UCX_MAX_RNDV_LANES / UCX_MAX_EAGER_LANES as
    // UCX_MAX_RNDV_RAILS / UCX_MAX_EAGER_RAILS; setting the new names
    // would override what the user chose.
    Machine m = load(fixture("nogpu_mlx4.xml"));
    PlanInput in = input(0, 1);
    in.user_ucx = {{"UCX_MAX_RNDV_LANES", "1"}, {"UCX_MAX_EAGER_LANES", "1"}};
    RailPlan p = plan_ok(m, in);
    EXPECT_EQ(2u, p.nics.size());
    EXPECT_EQ("<unset>", setting(p, "UCX_MAX_RNDV_RAILS"));
    EXPECT_EQ("<unset>", setting(p, "UCX_MAX_EAGER_RAILS"));
    EXPECT_TRUE(has_note(p, "kept UCX_MAX_RNDV_LANES=1 set by the user"));

    // No rdma rail, network-only transports: the extra eager lanes too.
    Machine nonic = load(fixture("gpu1_nonic.xml"));
    in.user_ucx = {{"UCX_TLS", "tcp"}, {"UCX_MAX_EAGER_LANES", "1"}};
    EXPECT_EQ("<unset>", setting(plan_ok(nonic, in), "UCX_MAX_EAGER_RAILS"));
    in.user_ucx = {{"UCX_TLS", "tcp"}, {"UCX_MAX_RNDV_LANES", "3"}};
    EXPECT_EQ("3", setting(plan_ok(nonic, in), "UCX_MAX_EAGER_RAILS"));
}

TEST(RailPlan, NetworkOnlyTransportsGetRendezvousLanes) {
    Machine m = load(fixture("gpu1_nonic.xml"));
    PlanInput in = input(0, 1);
    in.user_ucx = {{"UCX_TLS", "tcp,self"}};
    RailPlan p = plan_ok(m, in);
    EXPECT_TRUE(p.nics.empty());
    EXPECT_EQ("no rdma devices", p.reason);
    EXPECT_EQ("2", setting(p, "UCX_MAX_EAGER_RAILS"));  // UCX's rndv default
    EXPECT_EQ("<unset>", setting(p, "UCX_NET_DEVICES"));
    EXPECT_TRUE(has_note(p, "UCX_TLS=tcp,self has no shared memory"));

    in.user_ucx = {{"UCX_TLS", "^sm"}, {"UCX_MAX_RNDV_RAILS", "3"}};
    EXPECT_EQ("3", setting(plan_ok(m, in), "UCX_MAX_EAGER_RAILS"));
}

TEST(RailPlan, NetworkLanesKeepUsersEagerRails) {
    Machine m = load(fixture("gpu1_nonic.xml"));
    PlanInput in = input(0, 1);
    in.user_ucx = {{"UCX_TLS", "tcp"}, {"UCX_MAX_EAGER_RAILS", "1"}};
    RailPlan p = plan_ok(m, in);
    EXPECT_EQ("<unset>", setting(p, "UCX_MAX_EAGER_RAILS"));
    EXPECT_TRUE(has_note(p, "kept UCX_MAX_EAGER_RAILS=1 set by the user"));
    EXPECT_FALSE(has_note(p, "has no shared memory"));
}

TEST(RailPlan, SharedMemoryTransportsGetNoExtraLanes) {
    // Same-host endpoints would stripe over shm and tcp together.
    Machine m = load(fixture("gpu1_nonic.xml"));
    for (const char *tls : {"tcp,sm,self", "tcp,posix", "^tcp", "all", "mm,tcp"}) {
        PlanInput in = input(0, 1);
        in.user_ucx = {{"UCX_TLS", tls}};
        RailPlan p = plan_ok(m, in);
        EXPECT_TRUE(p.ucx_settings.empty()) << tls;
        EXPECT_FALSE(has_note(p, "has no shared memory")) << tls;
    }
}

TEST(RailPlan, RdmaRailsDecideEagerRailsUnderNetworkOnlyTransports) {
    Machine m = load(fixture("nogpu_mlx4.xml"));
    PlanInput in = input(0, 4);
    in.rails = "mlx5_0";
    in.user_ucx = {{"UCX_TLS", "rc,self"}};
    RailPlan p = plan_ok(m, in);
    EXPECT_EQ("1", setting(p, "UCX_MAX_EAGER_RAILS"));
    EXPECT_FALSE(has_note(p, "has no shared memory"));
}

TEST(RailPlan, TcpOnlyTransportsPlanNoRdmaRails) {
    // A tcp-only UCX given UCX_NET_DEVICES=mlx5_X:1 would have no device.
    Machine m = load(fixture("nogpu_mlx4.xml"));
    PlanInput in = input(0, 4);
    in.user_ucx = {{"UCX_TLS", "tcp"}};
    RailPlan p = plan_ok(m, in);
    EXPECT_TRUE(p.nics.empty());
    EXPECT_EQ("UCX_TLS=tcp has no rdma transport", p.reason);
    EXPECT_EQ("<unset>", setting(p, "UCX_NET_DEVICES"));
    EXPECT_EQ("2", setting(p, "UCX_MAX_EAGER_RAILS"));  // network lanes instead

    in.user_ucx = {{"UCX_TLS", "tcp,sm,self"}};
    in.smddp_devices = "mlx5_0";
    p = plan_ok(m, in);
    EXPECT_TRUE(p.nics.empty());
    EXPECT_TRUE(p.ucx_settings.empty());
    EXPECT_TRUE(has_note(p, "SMDATAPARALLEL_DEVICE_NAME=mlx5_0 ignored: UCX_TLS"));

    in.smddp_devices.clear();
    in.rails = "mlx5_0";  // explicit: kept, but said to be unusable
    p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"mlx5_0:1"}), names(p));
    EXPECT_TRUE(has_note(p, "has no rdma transport: UCX cannot use"));

    in.rails = "auto";
    in.user_ucx = {{"UCX_TLS", "rc_x,sm"}};
    EXPECT_FALSE(plan_ok(m, in).nics.empty());
}

TEST(RailPlan, AutoIsReadWithoutRegardToCase) {
    Machine m = load(fixture("nogpu_mlx4.xml"));
    PlanInput in = input(0, 4);
    const RailPlan lower = plan_ok(m, in);
    ASSERT_FALSE(lower.nics.empty());
    in.rails = "AUTO";
    in.gid_index = "Auto";
    const RailPlan upper = plan_ok(m, in);
    EXPECT_EQ(names(lower), names(upper));
    EXPECT_EQ(lower.ucx_settings, upper.ucx_settings);
}

#endif // HAVE_HWLOC
