/*
 * core/memtype: which registrations p2p_mem_register accepts. The CUDA
 * driver's answers for real device memory are tested by test/cuda (needs a
 * GPU); here the decision table and host memory, which is HOST whether or
 * not a driver is loaded.
 */
#include "core/memtype.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <sys/mman.h>

using ucxp2p::memtype::Admit;
using ucxp2p::memtype::admit;
using ucxp2p::memtype::check_registration;
using ucxp2p::memtype::classify;
using ucxp2p::memtype::Kind;
using ucxp2p::memtype::kind_name;

TEST(MemType, DeviceMemoryStagedOrRefusedWhereUcxCannotMoveIt) {
    EXPECT_EQ(Admit::STAGED, admit(Kind::DEVICE, false, true));
    EXPECT_EQ(Admit::REFUSED, admit(Kind::DEVICE, false, false));
    EXPECT_EQ(Admit::DIRECT, admit(Kind::DEVICE, true, true));
    EXPECT_EQ(Admit::DIRECT, admit(Kind::DEVICE, true, false));
}

TEST(MemType, HostAndManagedMemoryAlwaysDirect) {
    for (bool ucx_cuda : {false, true}) {
        for (bool staging : {false, true}) {
            EXPECT_EQ(Admit::DIRECT, admit(Kind::HOST, ucx_cuda, staging));
            EXPECT_EQ(Admit::DIRECT, admit(Kind::MANAGED, ucx_cuda, staging));
        }
    }
}

TEST(MemType, HostPointersClassifyAsHost) {
    std::unique_ptr<char[]> heap(new char[4096]);
    char stack[64];
    static char data[64];
    void *map = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, map);
    EXPECT_EQ(Kind::HOST, classify(heap.get()));
    EXPECT_EQ(Kind::HOST, classify(stack));
    EXPECT_EQ(Kind::HOST, classify(data));
    EXPECT_EQ(Kind::HOST, classify(map));
    EXPECT_EQ(Kind::HOST, classify(nullptr));
    EXPECT_EQ(Admit::DIRECT, check_registration(map, false, false));
    munmap(map, 1 << 20);
}

TEST(MemType, KindNames) {
    EXPECT_STREQ("host", kind_name(Kind::HOST));
    EXPECT_STREQ("CUDA device", kind_name(Kind::DEVICE));
    EXPECT_STREQ("CUDA managed", kind_name(Kind::MANAGED));
}
