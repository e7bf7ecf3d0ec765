/*
 * The 64-bit tag: fields do not overlap, a user receive's mask keeps the
 * generation, and a communicator reusing an id never gets a generation
 * one of its ranks used last for it.
 */
#include "core/comm.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

using namespace ucxp2p;

namespace {

struct Fields {
    uint32_t id, kind, gen, rank, tensor;
};

Fields split(uint64_t tag) {
    return {static_cast<uint32_t>(tag >> 56), tag_kind(tag),
            static_cast<uint32_t>(tag >> kGenShift) & (kGenCount - 1),
            static_cast<uint32_t>(tag >> 32) & (kMaxRanks - 1),
            static_cast<uint32_t>(tag)};
}

} // namespace

TEST(Tag, FieldsRoundTripWithoutOverlap) {
    const Fields cases[] = {{0, 0, 0, 0, 0},
                            {255, 3, kGenCount - 1, kMaxRanks - 1, 0xffffffffu},
                            {7, 1, 5, 123456, 42},
                            {128, 2, 9, 1, 0x80000000u}};
    for (const Fields &f : cases) {
        Fields g = split(make_tag(comm_tag_base(f.id, f.gen), f.rank, f.tensor, f.kind));
        EXPECT_EQ(f.id, g.id);
        EXPECT_EQ(f.kind, g.kind);
        EXPECT_EQ(f.gen, g.gen);
        EXPECT_EQ(f.rank, g.rank);
        EXPECT_EQ(f.tensor, g.tensor);
    }
    // Every bit belongs to exactly one field.
    uint64_t all = make_tag(comm_tag_base(255, kGenCount - 1), kMaxRanks - 1,
                            0xffffffffu, 3);
    EXPECT_EQ(~uint64_t(0), all);
}

TEST(Tag, UserMasksTellGenerationsApart) {
    uint64_t a = make_tag(comm_tag_base(3, 1), 9, 77);
    uint64_t b = make_tag(comm_tag_base(3, 2), 9, 77);
    EXPECT_NE(0u, (a ^ b) & kFullMask);
    // ...but a communicator leaving drains every generation of its id.
    EXPECT_EQ(0u, (a ^ b) & kCommIdMask);
    EXPECT_NE(0u, (a ^ make_tag(comm_tag_base(4, 1), 9, 77)) & kCommIdMask);
}

TEST(Tag, NextGenerationAvoidsEveryRanksLast) {
    const uint8_t never[] = {0, 0, 0};
    EXPECT_EQ(1u, next_comm_gen(never, 3));
    const uint8_t mixed[] = {0, 4, 2};
    EXPECT_EQ(5u, next_comm_gen(mixed, 3));
    const uint8_t wrap[] = {15, 0, 1};
    EXPECT_EQ(2u, next_comm_gen(wrap, 3));
    std::mt19937 rng(7);
    for (int round = 0; round < 2000; ++round) {
        std::vector<uint8_t> lasts(1 + rng() % 12);
        for (auto &l : lasts) l = static_cast<uint8_t>(rng() % kGenCount);
        uint32_t g = next_comm_gen(lasts.data(), lasts.size());
        ASSERT_LT(g, kGenCount);
        for (uint8_t l : lasts) ASSERT_NE(l, g) << "round " << round;
    }
}
