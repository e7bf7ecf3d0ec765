/* RoCE GID detection and HCA matching against fake sysfs trees. */
#include "topo/roce.h"

#include "topo_test_util.h"

using namespace ucxp2p::topo;
using topo_test::add_gid;
using topo_test::add_port;
using topo_test::kZeroGid;
using topo_test::TempDir;

namespace {

const char *kV4 = "0000:0000:0000:0000:0000:ffff:0a00:0105";   // 10.0.1.5
const char *kV6 = "2001:0db8:0000:0000:0000:0000:0000:0005";
const char *kLL = "fe80:0000:0000:0000:0a5f:5fff:fe00:0105";

/** The pod of seed 001: bonded HCA, v1/v2 x link-local/IPv6/IPv4. */
void seed_pod(const TempDir &d) {
    add_port(d, "mlx5_bond_0", 1, "Ethernet", "4: ACTIVE");
    add_gid(d, "mlx5_bond_0", 1, 0, kLL, "IB/RoCE v1", "bond0");
    add_gid(d, "mlx5_bond_0", 1, 1, kLL, "RoCE v2", "bond0");
    add_gid(d, "mlx5_bond_0", 1, 2, kV6, "IB/RoCE v1", "bond0");
    add_gid(d, "mlx5_bond_0", 1, 3, kV6, "RoCE v2", "bond0");
    add_gid(d, "mlx5_bond_0", 1, 8, kV4, "IB/RoCE v1", "bond0");
    add_gid(d, "mlx5_bond_0", 1, 9, kV4, "RoCE v2", "bond0");
    add_gid(d, "mlx5_bond_0", 1, 10, kZeroGid, "", "");   // unused slot
}

} // namespace

TEST(Roce, PrefersRoceV2Ipv4LikeSeed001) {
    TempDir d;
    seed_pod(d);
    GidChoice c;
    ASSERT_EQ(P2P_OK, roce_detect_gid(d.path(), "mlx5_bond_0", 1, "", &c));
    EXPECT_EQ(9, c.index);
    EXPECT_EQ(GidType::ROCE_V2, c.entry.type);
    EXPECT_TRUE(c.entry.ipv4);
    EXPECT_EQ("bond0", c.entry.ndev);
    EXPECT_NE(std::string::npos, c.reason.find("10.0.1.5")) << c.reason;
}

TEST(Roce, FallsBackToV2Ipv6SkippingLinkLocal) {
    TempDir d;
    add_gid(d, "mlx5_0", 1, 0, kLL, "IB/RoCE v1", "eth1");
    add_gid(d, "mlx5_0", 1, 1, kLL, "RoCE v2", "eth1");
    add_gid(d, "mlx5_0", 1, 2, kV6, "IB/RoCE v1", "eth1");
    add_gid(d, "mlx5_0", 1, 3, kV6, "RoCE v2", "eth1");
    GidChoice c;
    ASSERT_EQ(P2P_OK, roce_detect_gid(d.path(), "mlx5_0", 1, "", &c));
    EXPECT_EQ(3, c.index);
    EXPECT_FALSE(c.entry.link_local);
}

TEST(Roce, OnlyV1UsesV1PreferringIpv4) {
    TempDir d;
    add_gid(d, "mlx5_0", 1, 0, kLL, "IB/RoCE v1", "eth1");
    add_gid(d, "mlx5_0", 1, 1, kV4, "IB/RoCE v1", "eth1");
    GidChoice c;
    ASSERT_EQ(P2P_OK, roce_detect_gid(d.path(), "mlx5_0", 1, "", &c));
    EXPECT_EQ(1, c.index);
    EXPECT_EQ(GidType::ROCE_V1, c.entry.type);

    TempDir ll;
    add_gid(ll, "mlx5_0", 1, 0, kLL, "IB/RoCE v1", "eth1");
    ASSERT_EQ(P2P_OK, roce_detect_gid(ll.path(), "mlx5_0", 1, "", &c));
    EXPECT_EQ(0, c.index);
}

TEST(Roce, LinkLocalV2IsNotChosen) {
    TempDir d;
    add_gid(d, "mlx5_0", 1, 0, kLL, "RoCE v2", "eth1");
    GidChoice c;
    EXPECT_EQ(P2P_ERR_NO_DEVICE, roce_detect_gid(d.path(), "mlx5_0", 1, "", &c));
    EXPECT_EQ(-1, c.index);
}

TEST(Roce, NetdevPreferenceBreaksTiesWithinAClass) {
    TempDir d;
    add_gid(d, "mlx5_bond_0", 1, 3, kV4, "RoCE v2", "bond0");
    add_gid(d, "mlx5_bond_0", 1, 5, "0000:0000:0000:0000:0000:ffff:c0a8:6401",
            "RoCE v2", "bond0.100");
    GidChoice c;
    ASSERT_EQ(P2P_OK, roce_detect_gid(d.path(), "mlx5_bond_0", 1, "", &c));
    EXPECT_EQ(3, c.index);
    ASSERT_EQ(P2P_OK, roce_detect_gid(d.path(), "mlx5_bond_0", 1, "bond0.100", &c));
    EXPECT_EQ(5, c.index);
    EXPECT_NE(std::string::npos, c.reason.find("192.168.100.1")) << c.reason;
}

TEST(Roce, SeveralPortsAreReadSeparately) {
    TempDir d;
    add_port(d, "mlx5_0", 1, "Ethernet", "1: DOWN");
    add_port(d, "mlx5_0", 2, "Ethernet", "4: ACTIVE");
    add_gid(d, "mlx5_0", 1, 0, kLL, "IB/RoCE v1", "eth1");
    add_gid(d, "mlx5_0", 2, 0, kLL, "IB/RoCE v1", "eth2");
    add_gid(d, "mlx5_0", 2, 4, kV4, "RoCE v2", "eth2");
    EXPECT_EQ((std::vector<unsigned>{1, 2}), roce_list_ports(d.path(), "mlx5_0"));
    EXPECT_FALSE(roce_port_active(d.path(), "mlx5_0", 1));
    EXPECT_TRUE(roce_port_active(d.path(), "mlx5_0", 2));
    GidChoice c;
    ASSERT_EQ(P2P_OK, roce_detect_gid(d.path(), "mlx5_0", 1, "", &c));
    EXPECT_EQ(0, c.index);
    ASSERT_EQ(P2P_OK, roce_detect_gid(d.path(), "mlx5_0", 2, "", &c));
    EXPECT_EQ(4, c.index);
    EXPECT_EQ("eth2", c.entry.ndev);
}

TEST(Roce, MissingAndBrokenEntriesGiveErrorsNotCrashes) {
    TempDir d;
    GidChoice c;
    // Root absent, device absent, port absent.
    EXPECT_EQ(P2P_ERR_NO_DEVICE, roce_detect_gid(d.path() + "/nope", "mlx5_0", 1, "", &c));
    EXPECT_EQ(P2P_ERR_NO_DEVICE, roce_detect_gid(d.path(), "mlx5_0", 1, "", &c));
    d.mkdir("mlx5_0/ports/1");
    EXPECT_EQ(P2P_ERR_NO_DEVICE, roce_detect_gid(d.path(), "mlx5_0", 1, "", &c));
    // Empty gids directory, then junk: empty file, garbage, missing type.
    d.mkdir("mlx5_0/ports/1/gids");
    EXPECT_EQ(P2P_ERR_NO_DEVICE, roce_detect_gid(d.path(), "mlx5_0", 1, "", &c));
    d.write("mlx5_0/ports/1/gids/0", "");
    d.write("mlx5_0/ports/1/gids/1", "not a gid");
    d.write("mlx5_0/ports/1/gids/x", kV4);
    add_gid(d, "mlx5_0", 1, 2, kV4, "", "");
    add_gid(d, "mlx5_0", 1, 3, kV4, "InfiniBand", "");
    std::vector<GidEntry> gids;
    ASSERT_EQ(P2P_OK, roce_read_gids(d.path(), "mlx5_0", 1, &gids));
    ASSERT_EQ(1u, gids.size());   // only slot 3 has a gid and a type
    EXPECT_EQ(GidType::UNKNOWN, gids[0].type);
    EXPECT_EQ(P2P_ERR_NO_DEVICE, roce_detect_gid(d.path(), "mlx5_0", 1, "", &c));
    // Bad arguments.
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, roce_read_gids(d.path(), "", 1, &gids));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, roce_read_gids(d.path(), "../x", 1, &gids));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, roce_read_gids(d.path(), "mlx5_0", 1, nullptr));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, roce_choose_gid(gids, "", nullptr));
    EXPECT_EQ("", roce_link_layer(d.path(), "mlx5_0", 1));
    EXPECT_TRUE(roce_port_active(d.path(), "mlx5_0", 1));  // no state file
}

TEST(Roce, HcaSpecMatchesPrefixExactPortAndExclusion) {
    EXPECT_TRUE(hca_spec_match("", "mlx5_0"));
    EXPECT_TRUE(hca_spec_match("mlx5", "mlx5_bond_0"));
    EXPECT_FALSE(hca_spec_match("mlx4", "mlx5_0"));
    EXPECT_TRUE(hca_spec_match("mlx5_1", "mlx5_10"));      // prefix
    EXPECT_FALSE(hca_spec_match("=mlx5_1", "mlx5_10"));    // exact
    EXPECT_TRUE(hca_spec_match("=mlx5_1", "mlx5_1"));
    // '=' before the list: every entry exact, as NCCL reads it.
    EXPECT_FALSE(hca_spec_match("=mlx5_0,mlx5_1", "mlx5_10"));
    EXPECT_TRUE(hca_spec_match("=mlx5_0,mlx5_1", "mlx5_1"));
    EXPECT_TRUE(hca_spec_match("=mlx5_0,mlx5_1", "mlx5_0"));
    EXPECT_TRUE(hca_spec_match("^=mlx5_0,mlx5_1", "mlx5_10"));
    EXPECT_FALSE(hca_spec_match("^=mlx5_0,mlx5_1", "mlx5_1"));
    EXPECT_TRUE(hca_spec_match("mlx5_0,=mlx5_1", "mlx5_01"));  // only the 2nd exact
    EXPECT_FALSE(hca_spec_match("mlx5_0,=mlx5_1", "mlx5_10"));
    unsigned port = 9;
    EXPECT_TRUE(hca_spec_match("mlx5_0:2,mlx5_1:1", "mlx5_1", &port));
    EXPECT_EQ(1u, port);
    EXPECT_TRUE(hca_spec_match("mlx5_0", "mlx5_0", &port));
    EXPECT_EQ(0u, port);
    EXPECT_FALSE(hca_spec_match("^mlx5_bond", "mlx5_bond_0"));
    EXPECT_TRUE(hca_spec_match("^mlx5_bond", "mlx5_0"));
    EXPECT_FALSE(hca_spec_match(",,", "mlx5_0"));
}

TEST(Roce, SelectHcasListsMatchingDevices) {
    TempDir d;
    d.mkdir("mlx5_0/ports/1");
    d.mkdir("mlx5_1/ports/1");
    d.mkdir("mlx5_bond_0/ports/1");
    d.write("not_a_device", "file");
    std::vector<std::string> hcas;
    ASSERT_EQ(P2P_OK, roce_select_hcas(d.path(), "mlx5", &hcas));
    EXPECT_EQ((std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_bond_0"}), hcas);
    ASSERT_EQ(P2P_OK, roce_select_hcas(d.path(), "^mlx5_bond", &hcas));
    EXPECT_EQ((std::vector<std::string>{"mlx5_0", "mlx5_1"}), hcas);
    EXPECT_EQ(P2P_ERR_NO_DEVICE, roce_select_hcas(d.path(), "bnxt", &hcas));
    EXPECT_EQ(P2P_ERR_NO_DEVICE, roce_select_hcas(d.path() + "/none", "", &hcas));
}

// P2P_IB_ADDR_RANGE's syntax, as NCCL_IB_ADDR_RANGE: address/prefix.
TEST(Roce, AddrRangeParsesIpv4AndIpv6AndRefusesTheRest) {
    AddrRange r;
    ASSERT_TRUE(addr_range_parse("10.0.0.0/16", &r));
    EXPECT_EQ(112u, r.prefix);  // IPv4-mapped: 96 + 16
    EXPECT_EQ("10.0.0.0/16", r.text);
    EXPECT_TRUE(addr_range_contains(r, kV4));  // 10.0.1.5
    EXPECT_FALSE(addr_range_contains(r, kV6));
    EXPECT_FALSE(addr_range_contains(r, "0000:0000:0000:0000:0000:ffff:0a01:0105"));  // 10.1.1.5
    ASSERT_TRUE(addr_range_parse("10.0.1.5/32", &r));
    EXPECT_TRUE(addr_range_contains(r, kV4));
    ASSERT_TRUE(addr_range_parse("0.0.0.0/0", &r));  // every IPv4 address, no IPv6
    EXPECT_TRUE(addr_range_contains(r, kV4));
    EXPECT_FALSE(addr_range_contains(r, kV6));
    ASSERT_TRUE(addr_range_parse("2001:db8::/32", &r));
    EXPECT_EQ(32u, r.prefix);
    EXPECT_TRUE(addr_range_contains(r, kV6));
    EXPECT_FALSE(addr_range_contains(r, kV4));
    EXPECT_FALSE(addr_range_contains(r, kLL));
    for (const char *bad : {"", "10.0.0.0", "10.0.0.0/", "10.0.0.0/33", "10.0.0/8",
                            "2001:db8::/129", "host/8", "10.0.0.0/8x", "10.0.0.0/-1",
                            "/8", "10.0.0.0/0008"}) {
        EXPECT_FALSE(addr_range_parse(bad, &r)) << bad;
    }
    EXPECT_FALSE(addr_range_contains(r, "not a gid"));
}

// A bond with addresses on two subnets has two RoCE v2 IPv4 GIDs: auto
// takes the lower index, a range takes the one in it; none in the range is
// no GID.
TEST(Roce, AddrRangeChoosesAmongSeveralIpv4Gids) {
    TempDir d;
    seed_pod(d);  // index 9: 10.0.1.5 on bond0
    add_gid(d, "mlx5_bond_0", 1, 11, "0000:0000:0000:0000:0000:ffff:c0a8:0705", "RoCE v2",
            "bond0");  // 192.168.7.5
    GidChoice c;
    ASSERT_EQ(P2P_OK, roce_detect_gid(d.path(), "mlx5_bond_0", 1, "", &c));
    EXPECT_EQ(9, c.index);
    AddrRange r;
    ASSERT_TRUE(addr_range_parse("192.168.0.0/16", &r));
    ASSERT_EQ(P2P_OK, roce_detect_gid(d.path(), "mlx5_bond_0", 1, "", &c, &r));
    EXPECT_EQ(11, c.index);
    EXPECT_NE(std::string::npos, c.reason.find("192.168.7.5 on bond0 (in 192.168.0.0/16)"))
        << c.reason;
    // An IPv6 range: the v2 IPv6 GID, though IPv4 ones exist.
    ASSERT_TRUE(addr_range_parse("2001:db8::/32", &r));
    ASSERT_EQ(P2P_OK, roce_detect_gid(d.path(), "mlx5_bond_0", 1, "", &c, &r));
    EXPECT_EQ(3, c.index);
    ASSERT_TRUE(addr_range_parse("172.16.0.0/12", &r));
    EXPECT_EQ(P2P_ERR_NO_DEVICE, roce_detect_gid(d.path(), "mlx5_bond_0", 1, "", &c, &r));
}
