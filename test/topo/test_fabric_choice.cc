/* Mixed fabrics: which kind of RDMA NIC the automatic plan keeps
 * (keep_one_fabric): the most bandwidth when sysfs gives every port's
 * rate, else the most devices. */
#include "ucxp2p_config.h"

#include "topo/fabric_choice.h"
#include "topo/rail_plan.h"

#include "plan_test_util.h"
#include "topo_test_util.h"

#include <gtest/gtest.h>

using namespace ucxp2p::topo;
using topo_test::add_port;
using topo_test::add_roce_port;
using topo_test::input;
using topo_test::names;
using topo_test::note_with;
using topo_test::plan_ok;
using topo_test::TempDir;

namespace {

Nic nic(const char *name, NicKind kind) {
    Nic n;
    n.name = name;
    n.kind = kind;
    n.pci.numa = 0;
    return n;
}

/** Two on-board ports (bnxt_re0, bnxt_re1: "other") beside one mlx5 bond. */
std::vector<Nic> onboard_and_bond() {
    return {nic("bnxt_re0", NicKind::OTHER), nic("bnxt_re1", NicKind::OTHER),
            nic("mlx5_bond_0", NicKind::MLX)};
}

void rate(const TempDir &d, const char *dev, const char *value,
          const char *state = "4: ACTIVE") {
    add_port(d, dev, 1, "Ethernet", state);
    d.write(std::string(dev) + "/ports/1/rate", value);
}

std::string kept(const std::vector<Nic> &c) {
    std::string s;
    for (const Nic &n : c) s += (s.empty() ? "" : ",") + n.name;
    return s;
}

/** keep_one_fabric over onboard_and_bond() with these port rates in a
 *  sysfs tree: what it kept; *note_p: its note. */
std::string choose(const char *re0, const char *re1, const char *bond,
                   const char *bond_state = "4: ACTIVE", std::string *note_p = nullptr) {
    TempDir d;
    rate(d, "bnxt_re0", re0);
    rate(d, "bnxt_re1", re1);
    rate(d, "mlx5_bond_0", bond, bond_state);
    std::vector<Nic> c = onboard_and_bond();
    std::string note = keep_one_fabric(d.path(), &c);
    if (note_p != nullptr) *note_p = note;
    return kept(c);
}

} // namespace

TEST(FabricChoice, OneKindKeepsEverything) {
    std::vector<Nic> c = {nic("mlx5_0", NicKind::MLX), nic("mlx5_1", NicKind::MLX)};
    EXPECT_EQ("", keep_one_fabric("", &c));
    EXPECT_EQ("mlx5_0,mlx5_1", kept(c));
}

TEST(FabricChoice, WithoutRatesTheMostDevicesWin) {
    std::vector<Nic> c = onboard_and_bond();
    EXPECT_EQ("ignoring mlx5_bond_0 (fewer than the other devices); choose them with "
              "P2P_HCA or P2P_RAILS",
              keep_one_fabric("", &c));
    EXPECT_EQ("bnxt_re0,bnxt_re1", kept(c));
    // Ties: EFA first.
    c = {nic("mlx5_0", NicKind::MLX), nic("rdmap16s27", NicKind::EFA)};
    keep_one_fabric("", &c);
    EXPECT_EQ("rdmap16s27", kept(c));
}

// Two 25 Gb/s on-board ports used to outvote one 200 Gb/s bond: the plan
// then carried everything over the slow ports.
TEST(FabricChoice, TheFastestFabricWinsOverMoreDevices) {
    std::string note;
    EXPECT_EQ("mlx5_bond_0", choose("25 Gb/sec (1X EDR)", "25 Gb/sec (1X EDR)",
                                    "200 Gb/sec (4X HDR)", "4: ACTIVE", &note));
    EXPECT_EQ("ignoring bnxt_re0,bnxt_re1 (50 Gb/s in all, below the mlx devices' "
              "200 Gb/s); choose them with P2P_HCA or P2P_RAILS",
              note);
    // Eight 400 Gb/s ports beside one 100 Gb/s ConnectX: rate and count agree.
    TempDir d8;
    std::vector<Nic> many;
    for (int i = 0; i < 8; ++i) {
        std::string n = "thor" + std::to_string(i);
        rate(d8, n.c_str(), "400 Gb/sec (4X NDR)");
        many.push_back(nic("x", NicKind::OTHER));
        many.back().name = n;
    }
    rate(d8, "mlx5_0", "100 Gb/sec (4X EDR)");
    many.push_back(nic("mlx5_0", NicKind::MLX));
    EXPECT_EQ("ignoring mlx5_0 (fewer than the other devices); choose them with P2P_HCA "
              "or P2P_RAILS",
              keep_one_fabric(d8.path(), &many));
    EXPECT_EQ(8u, many.size());
}

TEST(FabricChoice, APortThatIsDownCarriesNothing) {
    EXPECT_EQ("bnxt_re0,bnxt_re1", choose("25 Gb/sec (1X EDR)", "25 Gb/sec (1X EDR)",
                                          "200 Gb/sec (4X HDR)", "1: DOWN"));
}

TEST(FabricChoice, OneUnknownRateFallsBackToTheCount) {
    EXPECT_EQ("bnxt_re0,bnxt_re1",
              choose("25 Gb/sec (1X EDR)", "garbage", "200 Gb/sec (4X HDR)"));
    std::vector<Nic> c;
    TempDir none;  // no sysfs entries at all
    c = onboard_and_bond();
    keep_one_fabric(none.path(), &c);
    EXPECT_EQ("bnxt_re0,bnxt_re1", kept(c));
}

// Through the planner: a rank without GPU on NUMA 0 takes the bond.
TEST(FabricChoice, PlanUsesTheBond) {
    TempDir d;
    Machine m;
    m.source = "test";
    m.numa_nodes = {0};
    m.nics = onboard_and_bond();
    rate(d, "bnxt_re0", "25 Gb/sec (1X EDR)");
    rate(d, "bnxt_re1", "25 Gb/sec (1X EDR)");
    add_roce_port(d, "mlx5_bond_0", 1, 3, "0000:0000:0000:0000:0000:ffff:0a00:0002");
    d.write("mlx5_bond_0/ports/1/rate", "200 Gb/sec (4X HDR)");
    PlanInput in = input(0, 1);
    in.sysfs_root = d.path();
    RailPlan p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"mlx5_bond_0:1"}), names(p)) << p.reason;
    EXPECT_NE("", note_with(p, "ignoring bnxt_re0,bnxt_re1 (50 Gb/s"));
    in.sysfs_root.clear();  // no rates: the count keeps the on-board ports
    p = plan_ok(m, in);
    EXPECT_EQ((std::vector<std::string>{"bnxt_re0:1", "bnxt_re1:1"}), names(p)) << p.reason;
}
