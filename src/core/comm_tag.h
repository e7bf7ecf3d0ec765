/*
 * A communicator's 64-bit UCP tags (see include/ucxp2p/p2p.h): comm id in
 * bits 63..56, message kind in 55..54, the id's generation in 53..50,
 * source rank in 49..32, tensor_id in 31..0 (offset by a block number
 * taken from bits 63..32: tag_low).
 */
#ifndef UCXP2P_CORE_COMM_TAG_H
#define UCXP2P_CORE_COMM_TAG_H

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace ucxp2p {

constexpr unsigned kRankBits = 18;
constexpr uint32_t kMaxRanks = 1u << kRankBits;

/** Message kinds, tag bits 55..54. A user receive matches DATA only, with
 *  the full mask: UCX hashes such receives by tag, and keeps any other in
 *  one list that every arriving message walks from its head until a
 *  match, so a masked receive costs in proportion to the receives posted
 *  before it (docs/PERFORMANCE.md, 2026-11-29 19:00: 4000 receives met in
 *  reverse order took 9.5-10.7 us a message, 0.65 hashed). A single-copy
 *  request (core/cma.h) is sent as DATA for the same reason: the receive
 *  tells it apart by its payload (Comm::is_rts; a DATA message that would
 *  read as one goes by the request protocol, Comm::mimics_rts). ACK and
 *  PUSH are matched by seq, never by a user receive (bit 55 set). Kind 1
 *  is unused (single-copy requests before wire version 7). */
enum TagKind : uint32_t { KIND_DATA = 0, KIND_ACK = 2, KIND_PUSH = 3 };
constexpr int kKindShift = 54;
constexpr uint64_t kFullMask = ~static_cast<uint64_t>(0);

/** Generation of a communicator id, tag bits 53..50: a communicator that
 *  reuses an id gets a generation none of its ranks used last for it, so
 *  messages of the previous one still arriving (or left unreceived) never
 *  match its receives. */
constexpr int kGenShift = 50;
constexpr uint32_t kGenCount = 16;
/** Bits 63..56 (every kind and generation of one id): what a communicator
 *  leaving drains from UCX's unexpected queue. */
constexpr uint64_t kCommIdMask = static_cast<uint64_t>(0xff) << 56;
/** Bits 63..56 and 53..50 (one id in one generation, every kind): what
 *  its context drops for a communicator destroyed here while no other
 *  holds the id (Context::drop_late_messages). */
constexpr uint64_t kCommGenMask =
    kCommIdMask | (static_cast<uint64_t>(kGenCount - 1) << kGenShift);

/** The bits a communicator puts in every tag: its id and generation. */
inline uint64_t comm_tag_base(uint32_t comm_id, uint32_t gen) {
    return (static_cast<uint64_t>(comm_id & 0xffu) << 56) |
           (static_cast<uint64_t>(gen % kGenCount) << kGenShift);
}

/** The generation for a communicator whose ranks used lasts[0..n) last
 *  for its id (0: never): one after the highest, or past a wrap the next
 *  none of them used. Every rank computes it from the same values. */
inline uint32_t next_comm_gen(const uint8_t *lasts, size_t n) {
    uint32_t last = 0, seen = 0;  // seen: bit g set when a rank used g last
    for (size_t i = 0; i < n; ++i) {
        last = std::max<uint32_t>(last, lasts[i] % kGenCount);
        seen |= 1u << (lasts[i] % kGenCount);
    }
    for (uint32_t k = 1; k <= kGenCount; ++k) {
        uint32_t g = (last + k) % kGenCount;
        if ((seen & (1u << g)) == 0) return g;
    }
    return (last + 1) % kGenCount;  // all 16 in use somewhere: cannot avoid
}

/** Bits 31..0 of a tag: tensor_id (or a seq) plus 64 times a block number
 *  chosen from bits 63..32, mod 2^32 (the receiver computes the same, so
 *  matching is unchanged). Why: UCX 1.13 hashes a tag into 1021 buckets as
 *  (bits 31..0 mod 1021) XOR (bits 63..32 mod 1021). With the tensor_id
 *  alone in the low word, adjacent source ranks differ in a few low bits
 *  of the second term, so the same small tensor ids of two senders shared
 *  buckets; a receiver probing one sender's messages walked the other's
 *  unreceived backlog in each bucket (600000 8-byte messages from two
 *  ranks: 4.6-41 s; 0.16-0.18 s with this offset; docs/PERFORMANCE.md,
 *  2026-12-01). With block (rank mod 16) XOR (high term / 64), the XOR
 *  cancels the high term's bits 9..6: a tensor id below 64 lands in a
 *  bucket whose bits 9..6 are (rank mod 16), so those of 16 consecutive
 *  ranks never meet (but for ids 61..63 of the rank whose block is 15,
 *  which wrap past 1020; core_test Tag.* checks ranks 0..7). Bijective for
 *  a given high word: nothing ever decodes the low word. */
inline uint32_t tag_low(uint32_t high, uint32_t src_rank, uint32_t tensor_id) {
    const uint32_t block = (src_rank % 16u) ^ ((high % 1021u) >> 6);
    return tensor_id + 64u * block;
}

inline uint64_t make_tag(uint64_t base, uint32_t src_rank, uint32_t tensor_id,
                         uint32_t kind = KIND_DATA) {
    const uint64_t high = base | (static_cast<uint64_t>(kind & 3u) << kKindShift) |
                          (static_cast<uint64_t>(src_rank & (kMaxRanks - 1)) << 32);
    return high | tag_low(static_cast<uint32_t>(high >> 32), src_rank, tensor_id);
}

/** The tag make_tag gives for value v, from the one it gives for 0 (same
 *  base, rank and kind): for callers that keep the latter per rank. */
inline uint64_t tag_with_low(uint64_t tag0, uint32_t v) {
    return (tag0 & ~static_cast<uint64_t>(0xffffffffu)) |
           static_cast<uint32_t>(static_cast<uint32_t>(tag0) + v);
}

inline uint32_t tag_kind(uint64_t tag) {
    return static_cast<uint32_t>(tag >> kKindShift) & 3u;
}

} // namespace ucxp2p

#endif
