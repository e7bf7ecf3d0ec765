/*
 * soak: rounds of random traffic between every pair of ranks, this rank
 * included, mixing everything a real job mixes at once:
 *   - sizes from 0 B to 1 MiB + 3, across UCX's eager and rendezvous
 *     protocols and every same-host single-copy size class;
 *   - few tensor ids, so most messages share their (peer, tensor_id) with
 *     others of other sizes: those must match in posting order (p2p.h),
 *     whichever path each one takes;
 *   - receives longer than their message (by 0-64 bytes), at odd offsets;
 *   - single posts and batches, in a random order on each rank;
 *   - heap memory registered with p2p_mem_register, or p2p_mem_alloc
 *     memory (mapped by same-host receivers), picked per round, freed at
 *     the end of the round and allocated again for the next (a receiver's
 *     cached mapping of the old memory must not be used for the new);
 *   - no barrier between rounds: a fast rank's next round overlaps a slow
 *     one's current round.
 * Both ends derive a pair's messages from (seed, round, source,
 * destination), so the receiver knows each message's size and payload.
 * Checked: one completion per operation with its peer, tensor id and byte
 * count; every payload byte; nothing written past a message's end; send
 * buffers untouched; nothing pending after each round.
 *
 *   mp_rank soak [rounds [seed [max_msgs_per_pair]]]   (20, 1, 16)
 *
 * comm-churn: n (30) times, every rank creates a communicator, exchanges
 * 8 B and 64 KiB with every rank and destroys it. The descriptors this
 * process has open after the last must not exceed those after the third
 * by more than 4: closed endpoints must not leave their connections
 * behind (UCX keeps an endpoint closed without force, and its tcp
 * connections, while the connection is up).
 *
 *   mp_rank comm-churn [n]
 */
#include "mp_common.h"
#include "mp_scenarios.h"

#include "../open_fds.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <tuple>

namespace mp {

namespace {

constexpr uint32_t kTids = 3;       // tensor ids per pair: many repeats
constexpr size_t kMaxSlack = 64;    // receive longer than its message by 0..64
constexpr size_t kGap = 3;          // guard bytes after each receive buffer
constexpr uint8_t kGuard = 0xEE;

const size_t kSizes[] = {0,     1,      7,      8,      64,     4095,
                         8192,  8193,   16384,  20000,  32768,  65537,
                         131072, 262143, 262144, 300001, (size_t(1) << 20) + 3};

/** One message of a pair's round, in the sender's posting order. */
struct Msg {
    uint32_t tid;
    size_t len;
    uint32_t seq;   // unique per pair and round: names the payload
    size_t slack;   // receive length - len
    size_t skew;    // extra offset (0..63) of both buffers
};

std::vector<Msg> plan(uint32_t seed, uint32_t round, uint32_t src, uint32_t dst,
                      uint32_t max_msgs) {
    std::seed_seq ss{seed, round, src, dst};
    std::mt19937 rng(ss);
    std::vector<Msg> v(rng() % (max_msgs + 1));
    for (size_t k = 0; k < v.size(); ++k) {
        v[k].tid = rng() % kTids;
        v[k].len = kSizes[rng() % (sizeof(kSizes) / sizeof(kSizes[0]))];
        v[k].seq = round * 65536u + static_cast<uint32_t>(k);
        v[k].slack = rng() % (kMaxSlack + 1);
        v[k].skew = rng() % 64;
    }
    return v;
}

struct Op {
    Xfer x;        // x.len: the message's length
    size_t post_len;
    uint32_t seq;
};

struct Totals {
    size_t msgs = 0, batches = 0, bytes = 0, lib_rounds = 0;
};

/** Post ops[order[i]] for i in [from, to) as one batch of one kind. */
void post_batch(p2p_comm_h comm, const std::vector<Op> &ops,
                const std::vector<size_t> &order, size_t from, size_t to,
                const RegBuf &sa, const RegBuf &ra) {
    std::vector<p2p_block_t> b;
    for (size_t i = from; i < to; ++i) {
        const Op &o = ops[order[i]];
        const RegBuf &a = o.x.is_send ? sa : ra;
        b.push_back({o.x.peer, o.x.tid, a.data() + o.x.off, o.post_len, a.mem(),
                     ctx_of(order[i])});
    }
    size_t bad = 12345;
    p2p_status_t st = ops[order[from]].x.is_send
                          ? p2p_comm_send_batch(comm, b.data(), b.size(), &bad)
                          : p2p_comm_recv_batch(comm, b.data(), b.size(), &bad);
    MP_CHECK(st == P2P_OK, "%s batch of %zu returned %d (%s), block %zu",
             ops[order[from]].x.is_send ? "send" : "recv", b.size(),
             static_cast<int>(st), p2p_status_string(st), bad);
}

void soak_round(Rank &r, uint32_t seed, uint32_t round, uint32_t max_msgs,
                Totals *t) {
    const uint32_t me = r.rank();
    std::mt19937 rng(seed * 1000003u + round * 7919u + me);
    std::vector<Op> ops;
    size_t soff = 0, roff = 0;
    for (uint32_t p = 0; p < r.size(); ++p) {
        for (const Msg &m : plan(seed, round, me, p, max_msgs)) {
            soff += m.skew;
            ops.push_back({{true, p, m.tid, m.len, soff}, m.len, m.seq});
            soff += m.len;
        }
        for (const Msg &m : plan(seed, round, p, me, max_msgs)) {
            roff += m.skew;
            ops.push_back({{false, p, m.tid, m.len, roff}, m.len + m.slack, m.seq});
            roff += m.len + m.slack + kGap;
        }
    }
    const bool lib = rng() % 2 == 0;
    t->lib_rounds += lib ? 1 : 0;
    RegBuf sa(r.ctx(), soff, 0, lib ? Alloc::lib : Alloc::heap);
    RegBuf ra(r.ctx(), roff, kGuard, rng() % 2 == 0 ? Alloc::lib : Alloc::heap);
    for (const Op &o : ops) {
        if (o.x.is_send) {
            fill_pattern(sa.data() + o.x.off, o.x.len, me, o.x.peer, o.seq);
        }
    }

    // A random posting order that keeps each (kind, peer, tensor id)'s
    // operations in plan order: shuffle, then hand each group's positions
    // to its operations in order.
    std::vector<size_t> order(ops.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::map<std::tuple<bool, uint32_t, uint32_t>, std::vector<size_t>> pos;
    for (size_t i = 0; i < order.size(); ++i) {
        const Xfer &x = ops[order[i]].x;
        pos[std::make_tuple(x.is_send, x.peer, x.tid)].push_back(i);
    }
    std::map<std::tuple<bool, uint32_t, uint32_t>, size_t> next;
    for (size_t k = 0; k < ops.size(); ++k) {  // k ascending: plan order
        const Xfer &x = ops[k].x;
        auto key = std::make_tuple(x.is_send, x.peer, x.tid);
        order[pos[key][next[key]++]] = k;
    }

    for (size_t i = 0; i < order.size();) {
        const Op &o = ops[order[i]];
        size_t j = i + 1;
        if (rng() % 4 == 0) {  // a batch of up to 8 of the same kind
            size_t want = 1 + rng() % 8;
            while (j < order.size() && j - i < want &&
                   ops[order[j]].x.is_send == o.x.is_send) {
                ++j;
            }
            post_batch(r.comm(), ops, order, i, j, sa, ra);
            ++t->batches;
        } else if (o.x.is_send) {
            MP_OK(p2p_comm_send(r.comm(), o.x.peer, o.x.tid, sa.data() + o.x.off,
                                o.post_len, sa.mem(), ctx_of(order[i])));
        } else {
            MP_OK(p2p_comm_recv(r.comm(), o.x.peer, o.x.tid, ra.data() + o.x.off,
                                o.post_len, ra.mem(), ctx_of(order[i])));
        }
        i = j;
    }

    std::vector<Xfer> xs;
    for (const Op &o : ops) xs.push_back(o.x);
    collect(r.comm(), xs, 120);
    expect_quiet(r.comm());

    for (const Op &o : ops) {
        if (o.x.is_send) {
            check_pattern(sa.data() + o.x.off, o.x.len, me, o.x.peer, o.seq,
                          "send buffer after completion");
            continue;
        }
        check_pattern(ra.data() + o.x.off, o.x.len, o.x.peer, me, o.seq, "recv");
        for (size_t g = o.x.len; g < o.post_len + kGap; ++g) {
            MP_CHECK(ra.data()[o.x.off + g] == kGuard,
                     "round %u: byte %zu of a %zu B receive (peer %u tensor %u, "
                     "message %zu B) written: 0x%02x", round, g, o.post_len,
                     o.x.peer, o.x.tid, o.x.len, ra.data()[o.x.off + g]);
        }
        t->msgs += 1;
        t->bytes += o.x.len;
    }
    sa.free_now();  // the next round allocates anew
    ra.free_now();
}

/** Descriptors open once every rank destroyed its communicator and the
 *  count stopped falling: a destroyed communicator's endpoints may linger
 *  until the peer closes its own (core/context.h, Context::Lingering), so
 *  the count right after a destroy depends on how far the peers are. */
int settled_fds(Rank &r) {
    r.barrier();  // every peer destroyed its communicator: their notes are sent
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    int n = p2ptest::open_fds();
    while (n >= 0 && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const int m = p2ptest::open_fds();
        if (m == n) break;
        n = m;
    }
    return n;
}

} // namespace

void run_soak(int argc, char **argv) {
    uint32_t rounds = argc > 0 ? static_cast<uint32_t>(std::strtoul(argv[0], nullptr, 10)) : 20;
    uint32_t seed = argc > 1 ? static_cast<uint32_t>(std::strtoul(argv[1], nullptr, 10)) : 1;
    uint32_t max_msgs = argc > 2 ? static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10)) : 16;
    MP_CHECK(rounds > 0 && rounds < 65536 && max_msgs < 65536,
             "soak: rounds 1..65535, max_msgs 0..65535");
    Rank r;
    set_identity(static_cast<int>(r.rank()), "soak");
    Totals t;
    auto t0 = Clock::now();
    for (uint32_t k = 0; k < rounds; ++k) {
        soak_round(r, seed, k, max_msgs, &t);
    }
    double s = seconds_since(t0);
    r.finish();
    say("soak ok: %u rounds, %zu messages received (%zu batches posted, %.1f MB), "
        "p2p_mem_alloc send memory in %zu rounds, %.1f s",
        rounds, t.msgs, t.batches, t.bytes / 1e6, t.lib_rounds, s);
}

void run_comm_churn(int argc, char **argv) {
    const uint32_t n = argc > 0 ? static_cast<uint32_t>(std::strtoul(argv[0], nullptr, 10)) : 30;
    MP_CHECK(n >= 4, "comm-churn needs n >= 4");
    Rank r;
    set_identity(static_cast<int>(r.rank()), "comm-churn");
    std::vector<uint32_t> peers;
    for (uint32_t p = 0; p < r.size(); ++p) peers.push_back(p);
    int third = 0;
    ExchangeOptions opt;
    for (uint32_t k = 0; k < n; ++k) {
        if (k > 0) r.renew_comm();
        exchange(r, peers, {8, size_t(64) << 10}, 10, opt);
        if (k == 2) {
            r.destroy_comm();
            third = settled_fds(r);
            MP_CHECK(third >= 0, "cannot list /proc/self/fd");
        }
    }
    r.destroy_comm();
    const int last = settled_fds(r);
    MP_CHECK(last <= third + 4, "%d descriptors open after %u communicators were "
             "created and destroyed, %d after 3: they leak", last, n, third);
    r.finish();
    say("comm-churn ok: %d descriptors open after 3 communicators, %d after %u",
        third, last, n);
}

} // namespace mp
