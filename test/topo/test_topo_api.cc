/*
 * include/ucxp2p/p2p_topo.h called directly: every documented error of every
 * function (NULL arguments, bogus and destroyed handles, bad files, bad
 * rail settings, devices[] overflow, failed allocations, UCX that cannot
 * start) and the success paths on the fixtures.
 */
#include "ucxp2p_config.h"

#include <ucxp2p/p2p_topo.h>
#include <ucp/api/ucp.h>

#include "../fail_new.h"
#include "../scoped_env.h"
#include "topo_test_util.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

using p2ptest::ScopedEnv;
using topo_test::fixture;
using topo_test::shared_xml;
using topo_test::TempDir;

namespace {

/** f() with every allocation of this thread failing (until f returns or
 *  throws: an exception escaping the API then fails the test cleanly). */
template <class F> p2p_status_t without_memory(F &&f) {
    p2ptest::NoMemory failing;
    return f();
}

struct Printed {
    p2p_status_t status = P2P_ERR_TRANSPORT;
    std::string text;
};

/** f(stream) with what it writes to the stream. */
template <class F> Printed printed(F &&f) {
    char *buf = nullptr;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    Printed r;
    if (m == nullptr) {
        ADD_FAILURE() << "open_memstream failed";
        return r;
    }
    r.status = f(m);
    std::fclose(m);
    r.text.assign(buf, len);
    std::free(buf);
    return r;
}

bool contains(const std::string &hay, const std::string &needle) {
    return hay.find(needle) != std::string::npos;
}

/** A handle that was never loaded (points at a live object, not a topo). */
p2p_topo_h made_up_handle() {
    static int not_a_topo;
    return reinterpret_cast<p2p_topo_h>(&not_a_topo);
}

p2p_topo_h loaded(const std::string &path) {
    p2p_topo_h t = nullptr;
    EXPECT_EQ(P2P_OK, p2p_topo_load(path.c_str(), &t)) << path;
    return t;
}

const char *const kV4Gid = "0000:0000:0000:0000:0000:ffff:0a00:0105";

/** A sysfs tree whose mlx5_bond_0 port 1 is RoCE with a v2 IPv4 GID at 3. */
void roce_tree(const TempDir &d) {
    topo_test::add_port(d, "mlx5_bond_0", 1, "Ethernet", "4: ACTIVE");
    topo_test::add_gid(d, "mlx5_bond_0", 1, 3, kV4Gid, "RoCE v2", "bond0");
}

/** The rail variables unset, so the environment of the run does not leak
 *  into the plans (each test sets what it needs). */
class TopoApi : public ::testing::Test {
protected:
    void TearDown() override {
        if (topo_ != nullptr) {
            EXPECT_EQ(P2P_OK, p2p_topo_destroy(topo_));
        }
    }
    /** Load path into topo_ (destroyed at the end of the test). */
    p2p_topo_h load(const std::string &path) {
        topo_ = loaded(path);
        return topo_;
    }
    /** topo_'s plan of rank out of size (a failure fails the test). */
    p2p_rail_plan_info_t plan(uint32_t rank, uint32_t size) {
        p2p_rail_plan_info_t info{};
        EXPECT_EQ(P2P_OK, p2p_topo_plan_query(topo_, rank, size, &info))
            << "rank " << rank << " of " << size;
        return info;
    }
    /** The same plan as p2p_topo_plan_print shows it. */
    std::string plan_text(uint32_t rank, uint32_t size) {
        Printed p = printed([&](FILE *s) { return p2p_topo_plan_print(topo_, rank, size, s); });
        EXPECT_EQ(P2P_OK, p.status) << "rank " << rank << " of " << size;
        return p.text;
    }

    ScopedEnv rails_{"P2P_RAILS", nullptr};
    ScopedEnv hca_{"P2P_HCA", nullptr};
    ScopedEnv gid_{"P2P_IB_GID_INDEX", nullptr};
    ScopedEnv addr_range_{"P2P_IB_ADDR_RANGE", nullptr};
    ScopedEnv smddp_{"SMDATAPARALLEL_DEVICE_NAME", nullptr};
    ScopedEnv net_devices_{"UCX_NET_DEVICES", nullptr};
    ScopedEnv tls_{"UCX_TLS", nullptr};
    ScopedEnv cuda_visible_{"CUDA_VISIBLE_DEVICES", nullptr};  // a GPU runner's
    p2p_topo_h topo_ = nullptr;
};

/** The plans p2p_topo_plan_query and p2p_topo_plan_print refuse with
 *  P2P_ERR_INVALID_PARAM: bad ranks, malformed variables, unknown devices. */
struct BadPlan {
    const char *var;    // nullptr: none set
    const char *value;
    uint32_t rank;
    uint32_t size;
};

const BadPlan kBadPlans[] = {
    {nullptr, nullptr, 2, 2},                         // local_rank >= local_size
    {nullptr, nullptr, 0, 0},                         // local_size 0
    {"P2P_RAILS", "0", 0, 1},                         // malformed
    {"P2P_RAILS", "mlx5_0:x", 0, 1},                  // malformed port
    {"P2P_RAILS", "nosuch0", 0, 1},                   // no such device
    {"P2P_IB_GID_INDEX", "abc", 0, 1},                // malformed
    {"P2P_IB_ADDR_RANGE", "10.0.0.0", 0, 1},          // no prefix length
    {"SMDATAPARALLEL_DEVICE_NAME", "nosuch0", 0, 1},  // no such device
};

std::string describe(const BadPlan &b) {
    return std::string(b.var != nullptr ? b.var : "(none)") + "=" +
           (b.value != nullptr ? b.value : "") + " rank " + std::to_string(b.rank) +
           " of " + std::to_string(b.size);
}

/** UCX_NET_DEVICES naming mlx5_0:1 n times ("mlx5_0:1,mlx5_0:1,..."). */
std::string repeated_device(size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) {
        s += (i == 0 ? "" : ",") + std::string("mlx5_0:1");
    }
    return s;
}

} // namespace

// ------------------------------------------------- no handle needed

TEST_F(TopoApi, LoadWithoutAnOutPointerIsInvalidParam) {
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_topo_load(fixture("gpu1_nonic.xml").c_str(), nullptr));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_topo_load(nullptr, nullptr));
}

TEST_F(TopoApi, HandlesNeverLoadedOrDestroyedAreInvalid) {
    std::vector<p2p_topo_h> bad = {nullptr, made_up_handle()};
#ifdef HAVE_HWLOC
    p2p_topo_h gone = loaded(fixture("gpu1_nonic.xml"));
    ASSERT_NE(nullptr, gone);
    ASSERT_EQ(P2P_OK, p2p_topo_destroy(gone));
    bad.push_back(gone);
#endif
    p2p_topo_info_t info{};
    p2p_rail_plan_info_t plan{};
    for (p2p_topo_h h : bad) {
        EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_topo_destroy(h));
        EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_topo_set_sysfs(h, "/tmp"));
        EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_topo_query(h, &info));
        EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_topo_plan_query(h, 0, 1, &plan));
        Printed p = printed([&](FILE *s) { return p2p_topo_print(h, s); });
        EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p.status);
        EXPECT_EQ("", p.text);
        p = printed([&](FILE *s) { return p2p_topo_plan_print(h, 0, 1, s); });
        EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p.status);
        EXPECT_EQ("", p.text);
    }
}

TEST_F(TopoApi, NullStreamsAreInvalidParam) {
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_roce_print(nullptr, nullptr));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_build_print(nullptr));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_ucx_print(nullptr));
}

TEST_F(TopoApi, BuildPrintNamesVersionAndFeatures) {
    Printed p = printed([](FILE *s) { return p2p_build_print(s); });
    ASSERT_EQ(P2P_OK, p.status);
    EXPECT_TRUE(contains(p.text, std::string("ucxp2p ") + p2p_version())) << p.text;
#ifdef HAVE_HWLOC
    EXPECT_TRUE(contains(p.text, "hwloc: yes")) << p.text;
#else
    EXPECT_TRUE(contains(p.text, "hwloc: no")) << p.text;
#endif
}

TEST_F(TopoApi, UcxPrintShowsTheUcxInUse) {
    Printed p = printed([](FILE *s) { return p2p_ucx_print(s); });
    ASSERT_EQ(P2P_OK, p.status);
    EXPECT_TRUE(contains(p.text, "(library in use)")) << p.text;
    // Debian's UCX has no CUDA memory type: device memory is staged, or
    // refused with P2P_CUDA_STAGING=off.
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG;
    ucp_context_h ctx = nullptr;
    ASSERT_EQ(UCS_OK, ucp_init(&params, nullptr, &ctx));
    ucp_context_attr_t attr{};
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    ASSERT_EQ(UCS_OK, ucp_context_query(ctx, &attr));
    const bool cuda = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
    ucp_cleanup(ctx);
    EXPECT_TRUE(contains(p.text, cuda ? "CUDA device memory: moved by UCX"
                                      : "CUDA device memory: staged")) << p.text;
    p2ptest::ScopedEnv off("P2P_CUDA_STAGING", "off");
    Printed q = printed([](FILE *s) { return p2p_ucx_print(s); });
    ASSERT_EQ(P2P_OK, q.status);
    EXPECT_TRUE(contains(q.text, cuda ? "CUDA device memory: moved by UCX"
                                      : "CUDA device memory: refused")) << q.text;
}

// The UCX settings a context makes where the user made none
// (context_ucx_defaults), and which of the user's stays instead.
TEST_F(TopoApi, UcxPrintListsTheSettingsAContextMakes) {
    ScopedEnv mm("UCX_MM_FIFO_SIZE", nullptr);
    ScopedEnv sysv("UCX_SYSV_FIFO_SIZE", nullptr);
    ScopedEnv xpmem("UCX_XPMEM_FIFO_SIZE", nullptr);
    ScopedEnv eh("UCX_MM_ERROR_HANDLING", nullptr);
    ScopedEnv ka("UCX_KEEPALIVE_INTERVAL", nullptr);
    ScopedEnv pt("P2P_PEER_TIMEOUT_MS", "3000");
    ScopedEnv tls("UCX_TLS", "shm,self");
    {
        ScopedEnv posix("UCX_POSIX_FIFO_SIZE", nullptr);
        Printed p = printed([](FILE *s) { return p2p_ucx_print(s); });
        ASSERT_EQ(P2P_OK, p.status) << p.text;
        EXPECT_TRUE(contains(p.text, "    UCX_MM_FIFO_SIZE=256\n")) << p.text;
        EXPECT_TRUE(contains(p.text, "    UCX_MM_ERROR_HANDLING=y\n")) << p.text;
        EXPECT_TRUE(contains(p.text, "    UCX_KEEPALIVE_INTERVAL=1000ms\n")) << p.text;
    }
    {
        ScopedEnv posix("UCX_POSIX_FIFO_SIZE", "64");
        Printed p = printed([](FILE *s) { return p2p_ucx_print(s); });
        ASSERT_EQ(P2P_OK, p.status) << p.text;
        EXPECT_TRUE(contains(p.text, "UCX_MM_FIFO_SIZE=256 not set: the user's "
                                     "UCX_POSIX_FIFO_SIZE=64 stays")) << p.text;
    }
    {
        // The plain spelling, and the error-handling default likewise.
        ScopedEnv posix("UCX_POSIX_FIFO_SIZE", nullptr);
        ScopedEnv user_mm("UCX_MM_FIFO_SIZE", "128");
        ScopedEnv user_eh("UCX_POSIX_ERROR_HANDLING", "n");
        Printed p = printed([](FILE *s) { return p2p_ucx_print(s); });
        ASSERT_EQ(P2P_OK, p.status) << p.text;
        EXPECT_TRUE(contains(p.text, "UCX_MM_FIFO_SIZE=256 not set: the user's "
                                     "UCX_MM_FIFO_SIZE=128 stays")) << p.text;
        EXPECT_TRUE(contains(p.text, "UCX_MM_ERROR_HANDLING=y not set: the user's "
                                     "UCX_POSIX_ERROR_HANDLING=n stays")) << p.text;
        EXPECT_FALSE(contains(p.text, "    UCX_MM_ERROR_HANDLING=y\n")) << p.text;
    }
    {
        ScopedEnv posix("UCX_POSIX_FIFO_SIZE", nullptr);
        ScopedEnv tcp("UCX_TLS", "tcp,self");  // no shared memory: no MM_ settings
        Printed p = printed([](FILE *s) { return p2p_ucx_print(s); });
        ASSERT_EQ(P2P_OK, p.status) << p.text;
        EXPECT_FALSE(contains(p.text, "UCX_MM_")) << p.text;
        EXPECT_TRUE(contains(p.text, "    UCX_KEEPALIVE_INTERVAL=1000ms\n")) << p.text;
    }
    ScopedEnv bad("P2P_PEER_TIMEOUT_MS", "soon");
    Printed p = printed([](FILE *s) { return p2p_ucx_print(s); });
    ASSERT_EQ(P2P_OK, p.status) << p.text;
    EXPECT_TRUE(contains(p.text, "ucxp2p's settings: none known")) << p.text;
}

TEST_F(TopoApi, UcxPrintIsTransportErrorWhenUcxCannotStart) {
    {
        ScopedEnv bad("UCX_RNDV_THRESH", "not-a-size");  // ucp_config_read fails
        Printed p = printed([](FILE *s) { return p2p_ucx_print(s); });
        EXPECT_EQ(P2P_ERR_TRANSPORT, p.status) << p.text;
    }
    ScopedEnv tls("UCX_TLS", "no-such-transport");    // ucp_init fails
    Printed p = printed([](FILE *s) { return p2p_ucx_print(s); });
    EXPECT_EQ(P2P_ERR_TRANSPORT, p.status) << p.text;
}

TEST_F(TopoApi, RocePrintOfAMissingTreeSaysNoDevices) {
    Printed p = printed([](FILE *s) { return p2p_roce_print("/nonexistent/sysfs", s); });
    ASSERT_EQ(P2P_OK, p.status);
    EXPECT_TRUE(contains(p.text, "no rdma devices")) << p.text;
    // NULL: this machine's /sys/class/infiniband, whatever it holds.
    p = printed([](FILE *s) { return p2p_roce_print(nullptr, s); });
    EXPECT_EQ(P2P_OK, p.status);
    EXPECT_TRUE(contains(p.text, "/sys/class/infiniband")) << p.text;
}

TEST_F(TopoApi, RocePrintShowsPortsAndTheChosenGid) {
    TempDir d;
    roce_tree(d);
    Printed p = printed([&](FILE *s) { return p2p_roce_print(d.path().c_str(), s); });
    ASSERT_EQ(P2P_OK, p.status);
    EXPECT_TRUE(contains(p.text, "mlx5_bond_0:1 link Ethernet, active, gid index 3"))
        << p.text;
}

TEST_F(TopoApi, RocePrintIsNoMemoryWhenAllocationFails) {
    TempDir d;
    roce_tree(d);
    char *buf = nullptr;
    size_t len = 0;
    FILE *s = open_memstream(&buf, &len);
    ASSERT_NE(nullptr, s);
    EXPECT_EQ(P2P_ERR_NO_MEMORY,
              without_memory([&] { return p2p_roce_print(d.path().c_str(), s); }));
    std::fclose(s);
    std::free(buf);
}

#ifdef HAVE_HWLOC

// ------------------------------------------------------------ p2p_topo_load

TEST_F(TopoApi, LoadOfAMissingOrNonHwlocFileIsInvalidParam) {
    TempDir d;
    d.write("plain.txt", "not xml at all");
    d.write("other.xml", "<?xml version=\"1.0\"?>\n<html><body/></html>");
    d.write("cut.xml", "<topology>this is not hwloc");
    for (const std::string &path : {std::string("/nonexistent/x.xml"), d.path(),
                                    d.path() + "/plain.txt", d.path() + "/other.xml",
                                    d.path() + "/cut.xml"}) {
        p2p_topo_h t = made_up_handle();
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_topo_load(path.c_str(), &t)) << path;
        EXPECT_EQ(made_up_handle(), t) << path;  // untouched
    }
}

TEST_F(TopoApi, LoadOfTheLiveMachine) {
    for (const char *path : {static_cast<const char *>(nullptr), ""}) {
        p2p_topo_h t = nullptr;
        ASSERT_EQ(P2P_OK, p2p_topo_load(path, &t));
        p2p_topo_info_t info{};
        EXPECT_EQ(P2P_OK, p2p_topo_query(t, &info));
        EXPECT_GE(info.num_numa_nodes, 1u);
        Printed p = printed([&](FILE *s) { return p2p_topo_print(t, s); });
        EXPECT_EQ(P2P_OK, p.status);
        EXPECT_TRUE(contains(p.text, "topology: live")) << p.text;
        EXPECT_EQ(P2P_OK, p2p_topo_destroy(t));
    }
}

TEST_F(TopoApi, LoadIsNoDeviceWhenHwlocCannotInspectTheMachine) {
    ScopedEnv none("HWLOC_COMPONENTS", "stop");  // no discovery component
    p2p_topo_h t = made_up_handle();
    EXPECT_EQ(P2P_ERR_NO_DEVICE, p2p_topo_load(nullptr, &t));
    EXPECT_EQ(made_up_handle(), t);
}

TEST_F(TopoApi, LoadIsNoMemoryWhenAllocationFails) {
    std::string path = fixture("gpu2_mlx2_bond.xml");
    for (const char *p : {path.c_str(), static_cast<const char *>(nullptr)}) {
        p2p_topo_h t = made_up_handle();
        EXPECT_EQ(P2P_ERR_NO_MEMORY, without_memory([&] { return p2p_topo_load(p, &t); }));
        EXPECT_EQ(made_up_handle(), t);
    }
}

// ----------------------------------------------------------- p2p_topo_query

TEST_F(TopoApi, QueryCountsTheFixtures) {
    struct Want {
        const char *file;
        uint32_t numa, gpus, nics;
    };
    for (const Want &w : {Want{"gpu2_mlx2_bond.xml", 2, 2, 2}, Want{"nogpu_mlx4.xml", 2, 0, 4},
                          Want{"gpu1_nonic.xml", 1, 1, 0}}) {
        p2p_topo_h t = loaded(fixture(w.file));
        ASSERT_NE(nullptr, t) << w.file;
        p2p_topo_info_t info{};
        ASSERT_EQ(P2P_OK, p2p_topo_query(t, &info)) << w.file;
        EXPECT_EQ(w.numa, info.num_numa_nodes) << w.file;
        EXPECT_EQ(w.gpus, info.num_gpus) << w.file;
        EXPECT_EQ(w.nics, info.num_nics) << w.file;
        EXPECT_EQ(0u, info.num_efa_nics) << w.file;
        EXPECT_EQ(P2P_OK, p2p_topo_destroy(t));
    }
}

TEST_F(TopoApi, QueryWithoutAnOutPointerIsInvalidParam) {
    ASSERT_NE(nullptr, load(fixture("gpu1_nonic.xml")));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_topo_query(topo_, nullptr));
}

// ----------------------------------------------------------- p2p_topo_print

TEST_F(TopoApi, PrintShowsGpusNicsAndNetdevs) {
    std::string path = fixture("gpu2_mlx2_bond.xml");
    ASSERT_NE(nullptr, load(path));
    Printed p = printed([&](FILE *s) { return p2p_topo_print(topo_, s); });
    ASSERT_EQ(P2P_OK, p.status);
    EXPECT_TRUE(contains(p.text, "topology: " + path)) << p.text;
    EXPECT_TRUE(contains(p.text, "numa nodes: 2 (0,1)")) << p.text;
    EXPECT_TRUE(contains(p.text, "gpu 1: cuda1")) << p.text;
    EXPECT_TRUE(contains(p.text, "mlx5_0 (mlx) [pci")) << p.text;
    EXPECT_TRUE(contains(p.text, "netdev ibs19")) << p.text;
    EXPECT_FALSE(contains(p.text, "WARNING")) << p.text;
}

TEST_F(TopoApi, PrintWithoutAStreamIsInvalidParam) {
    ASSERT_NE(nullptr, load(fixture("gpu1_nonic.xml")));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_topo_print(topo_, nullptr));
}

// The EFA warning is the part of the print that allocates.
TEST_F(TopoApi, PrintOfP4dWarnsAboutOldUcxAndIsNoMemoryWithoutMemory) {
    std::string path = shared_xml("p4d.24xlarge.xml");
    SKIP_UNLESS_SHARED(path);
    ASSERT_NE(nullptr, load(path));
    p2p_topo_info_t info{};
    ASSERT_EQ(P2P_OK, p2p_topo_query(topo_, &info));
    EXPECT_EQ(8u, info.num_gpus);
    EXPECT_EQ(4u, info.num_nics);
    EXPECT_EQ(4u, info.num_efa_nics);
    Printed p = printed([&](FILE *s) { return p2p_topo_print(topo_, s); });
    ASSERT_EQ(P2P_OK, p.status);
    if (!contains(p.text, "WARNING: ")) {
        GTEST_SKIP() << "this UCX drives EFA: no warning, nothing allocated";
    }
    EXPECT_TRUE(contains(p.text, "UCX >= 1.19")) << p.text;
    p = printed([&](FILE *s) { return without_memory([&] { return p2p_topo_print(topo_, s); }); });
    EXPECT_EQ(P2P_ERR_NO_MEMORY, p.status);
}

// ------------------------------------------------------- p2p_topo_set_sysfs

TEST_F(TopoApi, SysfsTreeGivesTheRoceGidAndNullDisablesIt) {
    ASSERT_NE(nullptr, load(fixture("gpu2_mlx2_bond.xml")));
    EXPECT_EQ(-1, plan(1, 2).gid_index);  // an XML file reads no sysfs
    TempDir d;
    roce_tree(d);
    ASSERT_EQ(P2P_OK, p2p_topo_set_sysfs(topo_, d.path().c_str()));
    EXPECT_EQ(3, plan(1, 2).gid_index);
    std::string text = plan_text(1, 2);
    EXPECT_TRUE(contains(text, "UCX_IB_GID_INDEX=3")) << text;
    for (const char *off : {static_cast<const char *>(nullptr), ""}) {
        ASSERT_EQ(P2P_OK, p2p_topo_set_sysfs(topo_, off));
        EXPECT_EQ(-1, plan(1, 2).gid_index);
    }
}

TEST_F(TopoApi, SetSysfsIsNoMemoryAndKeepsTheSettingWhenAllocationFails) {
    ASSERT_NE(nullptr, load(fixture("gpu2_mlx2_bond.xml")));
    TempDir d;
    roce_tree(d);
    ASSERT_EQ(P2P_OK, p2p_topo_set_sysfs(topo_, d.path().c_str()));
    std::string other = d.path() + "/a/path/too/long/for/the/small/string/buffer";
    EXPECT_EQ(P2P_ERR_NO_MEMORY,
              without_memory([&] { return p2p_topo_set_sysfs(topo_, other.c_str()); }));
    EXPECT_EQ(3, plan(1, 2).gid_index);
}

// -------------------------------------- p2p_topo_plan_query / _plan_print

TEST_F(TopoApi, PlanQueryGivesEachRankTheNicNearItsGpu) {
    ASSERT_NE(nullptr, load(fixture("gpu2_mlx2_bond.xml")));
    p2p_rail_plan_info_t r0 = plan(0, 2);
    EXPECT_EQ(1u, r0.num_rails);
    EXPECT_EQ(0, r0.numa_node);
    EXPECT_EQ(0, r0.gpu);
    EXPECT_EQ(-1, r0.gid_index);
    EXPECT_STREQ("mlx5_0:1", r0.devices);
    p2p_rail_plan_info_t r1 = plan(1, 2);
    EXPECT_EQ(1, r1.numa_node);
    EXPECT_EQ(1, r1.gpu);
    EXPECT_STREQ("mlx5_bond_0:1", r1.devices);
    std::string text = plan_text(1, 2);
    EXPECT_TRUE(contains(text, "UCX_NET_DEVICES=mlx5_bond_0:1")) << text;
}

TEST_F(TopoApi, PlanOfAMachineWithoutRdmaIsEmpty) {
    ASSERT_NE(nullptr, load(fixture("gpu1_nonic.xml")));
    p2p_rail_plan_info_t info = plan(0, 1);
    EXPECT_EQ(0u, info.num_rails);
    EXPECT_EQ(0, info.gpu);
    EXPECT_STREQ("", info.devices);
    std::string text = plan_text(0, 1);
    EXPECT_TRUE(contains(text, "no rdma devices")) << text;
}

TEST_F(TopoApi, PlanOfP4dRankSevenUsesTheLastEfa) {
    std::string path = shared_xml("p4d.24xlarge.xml");
    SKIP_UNLESS_SHARED(path);
    ASSERT_NE(nullptr, load(path));
    p2p_rail_plan_info_t info = plan(7, 8);
    EXPECT_EQ(7, info.gpu);
    EXPECT_EQ(1, info.numa_node);
    EXPECT_STREQ("rdmap160s27:1", info.devices);
}

TEST_F(TopoApi, PlanWithoutAnOutPointerOrStreamIsInvalidParam) {
    ASSERT_NE(nullptr, load(fixture("gpu2_mlx2_bond.xml")));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_topo_plan_query(topo_, 0, 1, nullptr));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_topo_plan_print(topo_, 0, 1, nullptr));
}

TEST_F(TopoApi, BadRanksAndRailSettingsAreInvalidParam) {
    ASSERT_NE(nullptr, load(fixture("gpu2_mlx2_bond.xml")));
    for (const BadPlan &b : kBadPlans) {
        ScopedEnv var(b.var != nullptr ? b.var : "P2P_RAILS", b.value);
        p2p_rail_plan_info_t info{};
        info.num_rails = 77;
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_topo_plan_query(topo_, b.rank, b.size, &info))
            << describe(b);
        EXPECT_EQ(77u, info.num_rails) << describe(b);  // untouched
        Printed p = printed([&](FILE *s) { return p2p_topo_plan_print(topo_, b.rank, b.size, s); });
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, p.status) << describe(b);
        EXPECT_EQ("", p.text) << describe(b);
    }
}

TEST_F(TopoApi, DeviceListLongerThanDevicesIsNoMemoryForQueryOnly) {
    ASSERT_NE(nullptr, load(fixture("gpu2_mlx2_bond.xml")));
    p2p_rail_plan_info_t info{};
    // Just fits: 28 x "mlx5_0:1" plus 27 commas is 251 characters.
    std::string fits = repeated_device(28);
    ASSERT_LT(fits.size(), sizeof(info.devices));
    {
        ScopedEnv nd("UCX_NET_DEVICES", fits.c_str());
        info = plan(0, 1);
        EXPECT_EQ(fits, info.devices);
        EXPECT_EQ(28u, info.num_rails);
    }
    std::string too_long = repeated_device(29);
    ASSERT_GE(too_long.size(), sizeof(info.devices));
    ScopedEnv nd("UCX_NET_DEVICES", too_long.c_str());
    info.num_rails = 77;
    EXPECT_EQ(P2P_ERR_NO_MEMORY, p2p_topo_plan_query(topo_, 0, 1, &info));
    EXPECT_EQ(77u, info.num_rails);  // untouched
    std::string text = plan_text(0, 1);  // the print has no length limit
    EXPECT_TRUE(contains(text, too_long)) << text;
}

TEST_F(TopoApi, PlanIsNoMemoryWhenAllocationFails) {
    ASSERT_NE(nullptr, load(fixture("gpu2_mlx2_bond.xml")));
    p2p_rail_plan_info_t info{};
    info.num_rails = 77;
    EXPECT_EQ(P2P_ERR_NO_MEMORY,
              without_memory([&] { return p2p_topo_plan_query(topo_, 0, 1, &info); }));
    EXPECT_EQ(77u, info.num_rails);
    Printed p = printed([&](FILE *s) {
        return without_memory([&] { return p2p_topo_plan_print(topo_, 0, 1, s); });
    });
    EXPECT_EQ(P2P_ERR_NO_MEMORY, p.status);
}

#else // !HAVE_HWLOC

TEST_F(TopoApi, WithoutHwlocLoadIsUnsupported) {
    p2p_topo_h t = made_up_handle();
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, p2p_topo_load(nullptr, &t));
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, p2p_topo_load(fixture("gpu1_nonic.xml").c_str(), &t));
    EXPECT_EQ(made_up_handle(), t);
}

#endif
