/* Which GPUs the rail plan gives local ranks: the CUDA devices of the
 * topology, else CUDA_VISIBLE_DEVICES over the PCI-ordered GPUs, so local
 * rank r plans for the GPU cuda:r really is (herringLocalDevice). */
#include "ucxp2p_config.h"

#include "topo/gpu_visible.h"
#include "topo/rail_plan.h"
#include "topo/topology.h"

#include "../shell.h"
#include "plan_test_util.h"
#include "topo_test_util.h"

using namespace ucxp2p::topo;
using topo_test::fixture;
using topo_test::names;
using topo_test::note_with;
using topo_test::plan_ok;
using topo_test::shared_xml;

namespace {

/** n GPUs named gpuK, no locality. */
Machine gpus_only(size_t n) {
    Machine m;
    m.numa_nodes = {0};
    for (size_t k = 0; k < n; ++k) {
        m.gpus.push_back(Gpu{"gpu" + std::to_string(k), PciDevice{}});
    }
    return m;
}

std::vector<size_t> order(const Machine &m, const char *cvd) {
    return visible_gpus(m, cvd != nullptr ? std::optional<std::string>(cvd)
                                          : std::nullopt).order;
}

using Order = std::vector<size_t>;

PciDevice at(std::vector<uint64_t> ancestry, int numa) {
    PciDevice d;
    d.ancestry = std::move(ancestry);
    d.cpu_depth = 2;
    d.numa = numa;
    return d;
}

PlanInput input(uint32_t rank, uint32_t size, const char *cvd) {
    PlanInput in;
    in.local_rank = rank;
    in.local_size = size;
    if (cvd != nullptr) {
        in.cuda_visible_devices = cvd;
    }
    return in;
}

} // namespace

// CUDA's rules: indexes in the given order, up to the first entry that is
// not a valid index; "" hides every GPU; unset shows all.
TEST(GpuVisible, CudaVisibleDevicesSelectsPciOrderedGpus) {
    Machine m = gpus_only(8);
    EXPECT_EQ((Order{0, 1, 2, 3, 4, 5, 6, 7}), order(m, nullptr));
    EXPECT_EQ("", visible_gpus(m, std::nullopt).note);
    EXPECT_EQ((Order{4, 5, 6, 7}), order(m, "4,5,6,7"));
    EXPECT_EQ((Order{2, 0}), order(m, "2,0"));
    EXPECT_EQ((Order{3, 1}), order(m, " 3 , 1"));
    EXPECT_EQ((Order{1}), order(m, "1,x,2"));
    EXPECT_EQ((Order{1}), order(m, "1,8,2")) << "beyond the GPU count ends the list";
    EXPECT_EQ((Order{1}), order(m, "1,-2,2"));
    EXPECT_EQ((Order{1}), order(m, "1,,2"));
    EXPECT_EQ((Order{1}), order(m, "1,1,2"));
    EXPECT_EQ(Order{}, order(m, ""));
    EXPECT_EQ(Order{}, order(m, "-1"));
    EXPECT_EQ("gpus: 4 of 8 visible through CUDA_VISIBLE_DEVICES=4,5,6,7 (cuda devices "
              "0-3 are gpus 4,5,6,7)", visible_gpus(m, std::string("4,5,6,7")).note);
    EXPECT_EQ("gpus: 1 of 8 visible through CUDA_VISIBLE_DEVICES=5 (cuda device 0 is gpu 5)",
              visible_gpus(m, std::string("5")).note);
    EXPECT_EQ("gpus: 0 of 8 visible through an empty CUDA_VISIBLE_DEVICES; planned as "
              "without gpu", visible_gpus(m, std::string("")).note);
}

// A UUID or MIG id needs the driver to find its PCI device: every GPU,
// and the note says why.
TEST(GpuVisible, UuidsAndMigIdsKeepEveryGpu) {
    Machine m = gpus_only(4);
    for (const char *cvd : {"GPU-8a3bc1e2-0000-1111-2222-333344445555", "0,GPU-8a3b",
                            "MIG-GPU-8a3bc1e2/1/0", "mig-4f1e"}) {
        VisibleGpus v = visible_gpus(m, std::string(cvd));
        EXPECT_EQ((Order{0, 1, 2, 3}), v.order) << cvd;
        EXPECT_NE(std::string::npos, v.note.find("uuid or mig id")) << v.note;
        EXPECT_NE(std::string::npos, v.note.find(cvd)) << v.note;
    }
}

// GPUs CUDA hides are no local rank's: they do not take a share of the
// NICs they sit beside.
TEST(GpuVisible, HiddenGpusDoNotShareNics) {
    Machine m;
    m.numa_nodes = {0};
    m.gpus = {Gpu{"0000:18:00.0", at({1, 2, 10, 11, 12}, 0)},
              Gpu{"0000:1a:00.0", at({1, 2, 10, 11, 13}, 0)}};
    for (int k = 0; k < 2; ++k) {
        Nic n;
        n.name = "mlx5_" + std::to_string(k);
        n.kind = NicKind::MLX;
        n.pci = at({1, 2, 10, 11, static_cast<uint64_t>(14 + k)}, 0);
        m.nics.push_back(n);
    }
    RailPlan p = plan_ok(m, input(0, 1, "1"));
    EXPECT_EQ(1, p.gpu);
    EXPECT_EQ(0, p.cuda_device);
    EXPECT_EQ((std::vector<std::string>{"mlx5_0:1", "mlx5_1:1"}), names(p));
    EXPECT_NE(std::string::npos, rail_plan_describe(p).find(
                                     "gpu 1 (0000:1a:00.0) = cuda device 0 numa 0"))
        << rail_plan_describe(p);
    p = plan_ok(m, input(0, 1, nullptr));  // both visible: half each
    EXPECT_EQ((std::vector<std::string>{"mlx5_0:1"}), names(p));
}

#ifdef HAVE_HWLOC

// A topology with CUDA devices lists those, by CUDA number, each at its PCI
// device; CUDA_VISIBLE_DEVICES was already applied when they were found.
TEST(GpuVisible, TopologyCudaDevicesAreTheGpusInCudaOrder) {
    std::unique_ptr<Topology> t;
    ASSERT_EQ(P2P_OK, Topology::load(fixture("gpu3_cuda2_mlx3.xml"), &t));
    const Machine &m = t->machine();
    EXPECT_TRUE(m.gpus_cuda);
    ASSERT_EQ(2u, m.gpus.size());
    EXPECT_EQ("cuda0", m.gpus[0].name);
    EXPECT_EQ("0000:b1:00.0", m.gpus[0].pci.busid);
    EXPECT_EQ(1, m.gpus[0].pci.numa);
    EXPECT_EQ("cuda1", m.gpus[1].name);
    EXPECT_EQ("0000:18:00.0", m.gpus[1].pci.busid);
    EXPECT_EQ(0, m.gpus[1].pci.numa);

    for (const char *cvd : {static_cast<const char *>(nullptr), "1", ""}) {
        SCOPED_TRACE(cvd != nullptr ? cvd : "unset");
        RailPlan p0 = plan_ok(m, input(0, 2, cvd));
        EXPECT_EQ(0, p0.gpu);
        EXPECT_EQ(1, p0.numa);
        EXPECT_EQ((std::vector<std::string>{"mlx5_2:1"}), names(p0));
        EXPECT_NE("", note_with(p0, "gpus: the topology's 2 cuda device(s), in cuda order"));
        // The GPU without a CUDA device is no rank's: cuda1 has both NICs
        // of its switch to itself.
        RailPlan p1 = plan_ok(m, input(1, 2, cvd));
        EXPECT_EQ(1, p1.gpu);
        EXPECT_EQ(0, p1.numa);
        EXPECT_EQ((std::vector<std::string>{"mlx5_0:1", "mlx5_1:1"}), names(p1));
    }
}

// A job given GPUs 4-7 of a p4d: cuda:r is physical GPU 4+r, on NUMA 1
// behind rdmap144s27 / rdmap160s27.
TEST(GpuVisible, P4dJobWithTheUpperFourGpus) {
    std::string path = shared_xml("p4d.24xlarge.xml");
    SKIP_UNLESS_SHARED(path);
    std::unique_ptr<Topology> t;
    ASSERT_EQ(P2P_OK, Topology::load(path, &t));
    const char *efa[] = {"rdmap144s27:1", "rdmap144s27:1", "rdmap160s27:1", "rdmap160s27:1"};
    for (uint32_t r = 0; r < 4; ++r) {
        SCOPED_TRACE("local rank " + std::to_string(r));
        RailPlan p = plan_ok(t->machine(), input(r, 4, "4,5,6,7"));
        EXPECT_EQ(static_cast<int>(4 + r), p.gpu);
        EXPECT_EQ(static_cast<int>(r), p.cuda_device);
        EXPECT_EQ(1, p.numa);
        EXPECT_EQ((std::vector<std::string>{efa[r]}), names(p));
        EXPECT_NE("", note_with(p, "gpus: 4 of 8 visible through CUDA_VISIBLE_DEVICES=4,5,6,7"));
    }
    RailPlan p = plan_ok(t->machine(), input(0, 4, ""));
    EXPECT_EQ(-1, p.gpu);
    EXPECT_EQ(0u, p.reason.find("no gpu; ")) << p.reason;
}

TEST(GpuVisible, P2pInfoFollowsCudaVisibleDevices) {
    std::string path = shared_xml("p4d.24xlarge.xml");
    SKIP_UNLESS_SHARED(path);
    p2ptest::ShellResult sh = p2ptest::run_shell(
        "env CUDA_VISIBLE_DEVICES=4,5,6,7 timeout 60 " + topo_test::builddir() +
        "/tools/info/p2p_info --topology " + path +
        " --local-size 4 --no-ucx --no-config 2>&1");
    EXPECT_NE(std::string::npos,
              sh.out.find("local rank 0: gpu 4 (0000:90:1c.0) = cuda device 0 numa 1"))
        << sh.out;
    EXPECT_NE(std::string::npos,
              sh.out.find("local rank 3: gpu 7 (0000:a0:1d.0) = cuda device 3 numa 1"))
        << sh.out;
    EXPECT_NE(std::string::npos,
              sh.out.find("note: gpus: 4 of 8 visible through CUDA_VISIBLE_DEVICES=4,5,6,7"))
        << sh.out;
}

#endif // HAVE_HWLOC
