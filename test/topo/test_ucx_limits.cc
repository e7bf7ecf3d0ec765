/* What the loaded UCX's version changes in a rail plan: the EFA warning
 * (no srd before 1.19), the tcp lane-pairing note (before 1.20), and
 * apply_ucx_limits, which the context and p2p_info's preview both run. */
#include "ucxp2p_config.h"

#include "topo/rail_plan.h"
#include "topo/topology.h"

#include "plan_test_util.h"
#include "topo_test_util.h"

#include <gtest/gtest.h>

using namespace ucxp2p::topo;
using topo_test::input;
using topo_test::plan_ok;
using topo_test::setting;
using topo_test::shared_xml;

TEST(UcxLimits, TcpRailsNoteNeedsTwoTcpRailsAndOldUcx) {
    RailPlan p;
    PlannedNic eth;
    eth.tcp = true;
    eth.nic.name = "eth1";
    p.nics.push_back(eth);
    EXPECT_EQ("", tcp_rails_ucx_note(p, 1, 13));  // one rail: nothing to pair
    eth.nic.name = "eth2";
    p.nics.push_back(eth);
    std::string n = tcp_rails_ucx_note(p, 1, 13);
    EXPECT_NE(std::string::npos, n.find("2 tcp rails")) << n;
    EXPECT_NE(std::string::npos, n.find("1.20")) << n;
    EXPECT_EQ("", tcp_rails_ucx_note(p, 1, 20));
    EXPECT_EQ("", tcp_rails_ucx_note(p, 2, 0));
    p.nics[1].tcp = false;  // an rdma rail beside one tcp rail
    EXPECT_EQ("", tcp_rails_ucx_note(p, 1, 13));
}

TEST(UcxLimits, EfaWarningNeedsEfaAndOldUcx) {
    Machine m;
    EXPECT_EQ("", efa_ucx_warning(m, 1, 13));
    Nic efa;
    efa.name = "rdmap16s27";
    efa.kind = NicKind::EFA;
    m.nics.push_back(efa);
    std::string w = efa_ucx_warning(m, 1, 13);
    EXPECT_NE(std::string::npos, w.find("1.19")) << w;
    EXPECT_NE(std::string::npos, w.find("rdmap16s27")) << w;
    EXPECT_NE(std::string::npos, w.find("Fix")) << w;
    EXPECT_EQ("", efa_ucx_warning(m, 1, 19));
    EXPECT_EQ("", efa_ucx_warning(m, 2, 0));
}

#ifdef HAVE_HWLOC

// p4d's plan is EFA rails only: under a UCX without EFA the context sets
// no UCX variable (UCX_NET_DEVICES=rdmap... would leave UCX no device at
// all) and says so; the preview runs the same function, so p2p_info shows
// what the context will do rather than the bare plan.
TEST(UcxLimits, EfaOnlyPlanUnderOldUcxSetsNothing) {
    std::string path = shared_xml("p4d.24xlarge.xml");
    SKIP_UNLESS_SHARED(path);
    std::unique_ptr<Topology> t;
    ASSERT_EQ(P2P_OK, Topology::load(path, &t));
    RailPlan p = plan_ok(t->machine(), input(2, 8));
    ASSERT_EQ("rdmap32s27:1", setting(p, "UCX_NET_DEVICES"));
    RailPlan kept = p;
    apply_ucx_limits(t->machine(), 1, 19, &kept);
    EXPECT_EQ("rdmap32s27:1", setting(kept, "UCX_NET_DEVICES"));
    EXPECT_EQ(p.notes, kept.notes);
    apply_ucx_limits(t->machine(), 1, 13, &p);
    EXPECT_TRUE(p.ucx_settings.empty());
    ASSERT_EQ(1u, p.nics.size());  // still the rank's NIC, for the log
    ASSERT_FALSE(p.notes.empty());
    EXPECT_EQ("efa rails not applied (UCX 1.13 cannot use them); UCX picks devices itself",
              p.notes.back());
    // A tcp rail beside the EFA one: UCX can use that, the settings stay.
    RailPlan mixed = plan_ok(t->machine(), input(2, 8));
    PlannedNic eth;
    eth.tcp = true;
    eth.nic.name = "eth0";
    mixed.nics.push_back(eth);
    apply_ucx_limits(t->machine(), 1, 13, &mixed);
    EXPECT_FALSE(mixed.ucx_settings.empty());
}

#endif // HAVE_HWLOC
