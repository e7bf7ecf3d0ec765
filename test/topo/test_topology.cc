/* hwloc discovery: synthetic fixtures, real machine XML, the live machine. */
#include "ucxp2p_config.h"

#include "topo/topology.h"

#include "topo_test_util.h"

#include <fstream>
#include <sstream>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace ucxp2p::topo;
using topo_test::fixture;
using topo_test::shared_xml;

namespace {

std::unique_ptr<Topology> load_or_fail(const std::string &path) {
    std::unique_ptr<Topology> t;
    EXPECT_EQ(P2P_OK, Topology::load(path, &t)) << path;
    return t;
}

} // namespace

#ifdef HAVE_HWLOC

TEST(Topology, SyntheticGpusNicsBondAndNuma) {
    auto t = load_or_fail(fixture("gpu2_mlx2_bond.xml"));
    ASSERT_TRUE(t);
    const Machine &m = t->machine();
    EXPECT_EQ((std::vector<int>{0, 1}), m.numa_nodes);
    ASSERT_EQ(2u, m.gpus.size());
    EXPECT_EQ("cuda0", m.gpus[0].name);     // CUDA OS device names the GPU
    EXPECT_EQ("0000:18:00.0", m.gpus[0].pci.busid);
    EXPECT_EQ(0, m.gpus[0].pci.numa);
    EXPECT_EQ("cuda1", m.gpus[1].name);
    EXPECT_EQ(1, m.gpus[1].pci.numa);
    ASSERT_EQ(2u, m.nics.size());
    EXPECT_EQ("mlx5_0", m.nics[0].name);
    EXPECT_EQ(NicKind::MLX, m.nics[0].kind);
    EXPECT_EQ((std::vector<std::string>{"ibs19"}), m.nics[0].netdevs);
    EXPECT_EQ("mlx5_bond_0", m.nics[1].name);
    EXPECT_EQ(1, m.nics[1].pci.numa);
    // GPU and NIC under the same PCIe switch share more than the CPU side.
    size_t same = pci_affinity(m.gpus[0].pci, m.nics[0].pci);
    size_t cross = pci_affinity(m.gpus[0].pci, m.nics[1].pci);
    EXPECT_GT(same, m.gpus[0].pci.cpu_depth);
    EXPECT_LT(cross, same);
}

// A device UCX_NET_DEVICES cannot name (no name, a ',' in it) is left
// out: planned, it became "UCX_NET_DEVICES=:1" or split into two names.
TEST(Topology, DevicesWithoutAUsableNameAreLeftOut) {
    std::ifstream in(fixture("nogpu_mlx4.xml"));
    std::stringstream xml;
    xml << in.rdbuf();
    std::string text = xml.str();
    for (const auto &edit : {std::make_pair(std::string(" name=\"mlx5_3\""), std::string()),
                             std::make_pair(std::string("name=\"mlx5_2\""),
                                            std::string("name=\"mlx5,2\""))}) {
        size_t at = text.find(edit.first);
        ASSERT_NE(std::string::npos, at) << edit.first;
        text.replace(at, edit.first.size(), edit.second);
    }
    topo_test::TempDir d;
    d.write("names.xml", text);
    auto t = load_or_fail(d.path() + "/names.xml");
    ASSERT_TRUE(t);
    std::vector<std::string> names;
    for (const Nic &n : t->machine().nics) {
        names.push_back(n.name);
    }
    EXPECT_EQ((std::vector<std::string>{"mlx5_0", "mlx5_1"}), names);
}

TEST(Topology, DeviceNamesUcxCanHold) {
    EXPECT_TRUE(device_name_usable("mlx5_bond_0"));
    EXPECT_TRUE(device_name_usable("rdmap16s27"));
    for (const char *bad : {"", "a,b", "mlx5_0:1", "eth 0", "eth0\n"}) {
        EXPECT_FALSE(device_name_usable(bad)) << bad;
    }
}

TEST(Topology, NvidiaVgaIsAGpuOtherVgaIsNot) {
    auto t = load_or_fail(fixture("gpu1_nonic.xml"));
    ASSERT_TRUE(t);
    const Machine &m = t->machine();
    ASSERT_EQ(1u, m.gpus.size());
    EXPECT_EQ("0000:01:00.0", m.gpus[0].pci.busid);
    EXPECT_EQ(0x10de, m.gpus[0].pci.vendor);
    EXPECT_TRUE(m.nics.empty());
    ASSERT_EQ(1u, m.netifs.size());
    EXPECT_EQ("eth0", m.netifs[0].name);
}

TEST(Topology, P4dHasEightGpusFourEfaTwoNuma) {
    std::string path = shared_xml("p4d.24xlarge.xml");
    SKIP_UNLESS_SHARED(path);
    auto t = load_or_fail(path);
    ASSERT_TRUE(t);
    const Machine &m = t->machine();
    EXPECT_EQ(2u, m.numa_nodes.size());
    ASSERT_EQ(8u, m.gpus.size());
    ASSERT_EQ(4u, m.nics.size());
    for (const Nic &n : m.nics) {
        EXPECT_EQ(NicKind::EFA, n.kind) << n.name;
    }
    EXPECT_EQ("rdmap16s27", m.nics[0].name);
    EXPECT_EQ("rdmap160s27", m.nics[3].name);
    for (size_t g = 0; g < 8; ++g) {
        EXPECT_EQ(g < 4 ? 0 : 1, m.gpus[g].pci.numa) << g;
    }
}

TEST(Topology, P5enHasSixteenEfa) {
    std::string path = shared_xml("p5en.48xlarge.xml");
    SKIP_UNLESS_SHARED(path);
    auto t = load_or_fail(path);
    ASSERT_TRUE(t);
    EXPECT_EQ(8u, t->machine().gpus.size());
    EXPECT_EQ(16u, t->machine().nics.size());
}

TEST(Topology, BadFilesAreInvalidParam) {
    std::unique_ptr<Topology> t;
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, Topology::load("/nonexistent/x.xml", &t));
    EXPECT_FALSE(t);
    topo_test::TempDir d;
    d.write("bad.xml", "<topology>this is not hwloc");
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, Topology::load(d.path() + "/bad.xml", &t));
    EXPECT_FALSE(t);
}

TEST(Topology, LiveMachineLoads) {
    auto t = load_or_fail("");
    ASSERT_TRUE(t);
    EXPECT_EQ("live", t->machine().source);
    EXPECT_GE(t->machine().numa_nodes.size(), 1u);
    Topology::Binding b = t->binding();
    EXPECT_GE(b.numa, -1);
    EXPECT_GE(b.slot, -1);
    if (b.numa < 0) {
        EXPECT_EQ(-1, b.slot);
    }
}

namespace {
/** In a child process bound to cpus: "numa slot" of Topology::binding(),
 *  or "error". */
std::string binding_in_child(const std::vector<int> &cpus) {
    int fds[2];
    if (pipe(fds) != 0) return "error";
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int c : cpus) CPU_SET(c, &set);
        std::string out = "error";
        std::unique_ptr<Topology> t;
        if (sched_setaffinity(0, sizeof(set), &set) == 0 && Topology::load("", &t) == P2P_OK) {
            Topology::Binding b = t->binding();
            out = std::to_string(b.numa) + " " + std::to_string(b.slot);
        }
        ssize_t w = write(fds[1], out.data(), out.size());
        _exit(w == static_cast<ssize_t>(out.size()) ? 0 : 1);
    }
    close(fds[1]);
    char buf[64];
    ssize_t n = pid > 0 ? read(fds[0], buf, sizeof(buf)) : -1;
    close(fds[0]);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "error";
}
} // namespace

// A rank bound to some of a node's CPUs learns its slot there: its first
// CPU's position over its width (the rail plan's position among the ranks
// bound to that node); bound to the whole node it has none.
TEST(Topology, LiveBindingSlotIsPositionWithinNode) {
    cpu_set_t set;
    ASSERT_EQ(0, sched_getaffinity(0, sizeof(set), &set));
    std::vector<int> mine;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &set)) mine.push_back(c);
    }
    auto t = load_or_fail("");
    ASSERT_TRUE(t);
    if (t->machine().numa_nodes.size() != 1 || mine.size() < 2 ||
        static_cast<long>(mine.size()) != sysconf(_SC_NPROCESSORS_ONLN)) {
        GTEST_SKIP() << "needs one numa node and every cpu (two or more) to bind to";
    }
    const std::string node = std::to_string(t->machine().numa_nodes[0]);
    // hwloc orders this machine's cpus as the kernel numbers them when
    // every core has one thread (checked here: otherwise skip).
    EXPECT_EQ(node + " 0", binding_in_child({mine[0]}));
    std::string last = binding_in_child({mine.back()});
    if (last != node + " " + std::to_string(mine.size() - 1)) {
        GTEST_SKIP() << "cpu " << mine.back() << " gave \"" << last
                     << "\": hwloc's order is not the kernel's here";
    }
    if (mine.size() >= 4) {
        EXPECT_EQ(node + " 1", binding_in_child({mine[2], mine[3]}));
    }
    EXPECT_EQ(node + " -1", binding_in_child(mine));
}

#else

TEST(Topology, WithoutHwlocLoadIsUnsupported) {
    std::unique_ptr<Topology> t;
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, Topology::load("", &t));
}

#endif
