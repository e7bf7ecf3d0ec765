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
    const uint32_t high = static_cast<uint32_t>(tag >> 32);
    const uint32_t rank = high & (kMaxRanks - 1);
    return {static_cast<uint32_t>(tag >> 56), tag_kind(tag),
            static_cast<uint32_t>(tag >> kGenShift) & (kGenCount - 1), rank,
            static_cast<uint32_t>(tag) - tag_low(high, rank, 0)};
}

/** UCX 1.13's bucket of a tag in its tag-matching hash (ucp/tag/tag_match.inl:
 *  1021 buckets; the two 32-bit halves, each mod 1021, XORed). */
size_t ucx_bucket(uint64_t tag) {
    return (static_cast<uint32_t>(tag) % 1021u) ^ (static_cast<uint32_t>(tag >> 32) % 1021u);
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
    // Every bit of the high word belongs to exactly one field.
    uint64_t all = make_tag(comm_tag_base(255, kGenCount - 1), kMaxRanks - 1, 0, 3);
    EXPECT_EQ(~uint64_t(0) << 32, all & (~uint64_t(0) << 32));
}

// The low word is the tensor id plus an offset fixed by the high word: two
// tensor ids of one sender never share a tag, whatever their values.
TEST(Tag, LowWordIsOneToOnePerSender) {
    const uint64_t base = comm_tag_base(17, 3);
    for (uint32_t rank : {0u, 1u, 15u, 16u, kMaxRanks - 1}) {
        const uint64_t t0 = make_tag(base, rank, 0);
        for (uint32_t tid : {1u, 63u, 64u, 1020u, 0x7fffffffu, 0xffffffffu}) {
            const uint64_t t = make_tag(base, rank, tid);
            EXPECT_EQ(t0 >> 32, t >> 32);
            EXPECT_EQ(tid, static_cast<uint32_t>(t - t0)) << "rank " << rank;
        }
    }
}

// The per-rank shortcut the data path takes gives make_tag's tags.
TEST(Tag, TagWithLowMatchesMakeTag) {
    for (uint32_t id : {0u, 5u, 255u}) {
        for (uint32_t rank : {0u, 1u, 2u, 17u, kMaxRanks - 1}) {
            for (uint32_t kind : {0u, 2u, 3u}) {
                const uint64_t base = comm_tag_base(id, 9);
                const uint64_t t0 = make_tag(base, rank, 0, kind);
                for (uint32_t v : {0u, 1u, 64u, 999u, 0x80000000u, 0xffffffffu}) {
                    EXPECT_EQ(make_tag(base, rank, v, kind), tag_with_low(t0, v))
                        << id << " " << rank << " " << kind << " " << v;
                }
            }
        }
    }
}

// Why the offset: tensor ids 0..63 of ranks 0..7 land in 512 different
// buckets of UCX's tag hash for every communicator id and generation (the
// tensor id alone in the low word put ranks 1 and 2 in the same buckets:
// a receive probing one sender walked the other's backlog).
TEST(Tag, SmallTensorIdsOfEightRanksShareNoUcxBucket) {
    size_t plain_shared = 0;
    for (uint32_t id = 0; id < 256; ++id) {
        for (uint32_t gen = 0; gen < kGenCount; ++gen) {
            const uint64_t base = comm_tag_base(id, gen);
            std::vector<int> load(1024, 0), plain(1024, 0);
            for (uint32_t rank = 0; rank < 8; ++rank) {
                for (uint32_t tid = 0; tid < 64; ++tid) {
                    const size_t b = ucx_bucket(make_tag(base, rank, tid));
                    ASSERT_LT(b, load.size());
                    ASSERT_EQ(0, load[b]++) << "comm " << id << " gen " << gen
                                            << ": rank " << rank << " tensor " << tid
                                            << " shares a bucket";
                    const uint64_t unmixed = base | (uint64_t(rank) << 32) | tid;
                    if (plain[ucx_bucket(unmixed)]++ != 0) ++plain_shared;
                }
            }
        }
    }
    EXPECT_GT(plain_shared, 0u) << "the unmixed layout was expected to collide";
}

// And any 16 consecutive ranks, tensor ids 0..60 (comm_tag.h, tag_low: ids
// 61..63 of the rank whose block is 15 wrap past bucket 1020).
TEST(Tag, SixteenConsecutiveRanksShareNoUcxBucket) {
    for (uint32_t id = 0; id < 256; id += 5) {
        for (uint32_t gen = 0; gen < kGenCount; ++gen) {
            const uint64_t base = comm_tag_base(id, gen);
            for (uint32_t first : {0u, 7u, 100u, 4093u, kMaxRanks - 16}) {
                std::vector<int> load(1024, 0);
                for (uint32_t rank = first; rank < first + 16; ++rank) {
                    for (uint32_t tid = 0; tid <= 60; ++tid) {
                        ASSERT_EQ(0, load[ucx_bucket(make_tag(base, rank, tid))]++)
                            << "comm " << id << " gen " << gen << " rank " << rank
                            << " tensor " << tid;
                    }
                }
            }
        }
    }
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
