/*
 * A new communicator's exchange and its choice of id: see core/comm_wireup.h.
 */
#include "core/comm_wireup.h"
#include "core/comm_tag.h"
#include "core/log.h"
#include "core/progress.h"
#include "wireup/bootstrap.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <unistd.h>

namespace ucxp2p {

namespace {

constexpr uint32_t kBlobMagic = 0x55325043;  // "U2PC"
constexpr uint32_t kBlobVersion = 8;  // 4: the ids' generations; 5: flags;
                                      // 6: tcp bulk server; 7: requests as DATA;
                                      // 8: tags' low word offset (tag_low)

/** BlobHeader::flags */
constexpr uint32_t kIdsContended = 1;  // another create held ids here
constexpr uint32_t kOutOfTime = 2;     // this rank retried for its timeout

struct BlobHeader {
    uint32_t magic;
    uint32_t version;
    uint32_t flags;
    Context::CommIdSet free_ids;
    Context::CommIdGens id_gens;  // each id's last generation on this rank
    cma::Identity host;
    tcpb::Address bulk;
    uint32_t addr_len;
};

/** The lowest id free in ids, or -1. */
int lowest_id(const Context::CommIdSet &ids) {
    for (int i = 0; i < Context::kMaxComms; ++i) {
        if (ids[i / 8] & (1u << (i % 8))) return i;
    }
    return -1;
}

/** The ids one exchange round reserved on this context; dropped unless
 *  claimed. */
class Held {
public:
    explicit Held(Context &ctx) : ctx_(ctx) {}
    ~Held() { drop(); }
    Held(const Held &) = delete;
    Held &operator=(const Held &) = delete;
    const Context::CommIdSet &take(Context::CommIdGens *gens, bool *contended) {
        ids_ = ctx_.reserve_comm_ids(gens, contended);
        reserved_ = true;
        return ids_;
    }
    void claim(unsigned id, uint8_t gen) {
        ctx_.claim_reserved_id(id, gen, ids_);
        reserved_ = false;
    }
    void drop() {
        if (reserved_) ctx_.unreserve_comm_ids(ids_);
        reserved_ = false;
    }

private:
    Context &ctx_;
    Context::CommIdSet ids_{};
    bool reserved_ = false;
};

/** A random pause before round `round` again: the creates that held each
 *  other's ids rarely meet in the same order twice. */
void pause_before_retry(uint32_t round) {
    thread_local std::minstd_rand rng(static_cast<uint32_t>(
        now_ns() ^ (static_cast<int64_t>(getpid()) << 20) ^
        static_cast<int64_t>(std::hash<std::thread::id>()(std::this_thread::get_id()))));
    const uint32_t cap_us = 50u << std::min<uint32_t>(round, 8);  // 12.8 ms at most
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % cap_us));
}

/** Check and unpack every rank's blob. */
p2p_status_t unpack(std::vector<std::vector<uint8_t>> &all, uint32_t size,
                    std::vector<BlobHeader> *heads, Wireup *out) {
    if (all.size() != size) {
        P2P_LOG(P2P_LOG_ERROR, "comm: allgather returned %zu blobs for %u ranks",
                all.size(), size);
        return P2P_ERR_BOOTSTRAP;
    }
    heads->resize(size);
    out->hosts.resize(size);
    out->bulk.resize(size);
    out->addrs.resize(size);
    for (uint32_t r = 0; r < size; ++r) {
        BlobHeader rh;
        if (all[r].size() < 2 * sizeof(uint32_t)) {
            P2P_LOG(P2P_LOG_ERROR, "comm: rank %u sent a short blob", r);
            return P2P_ERR_BOOTSTRAP;
        }
        std::memcpy(&rh, all[r].data(), 2 * sizeof(uint32_t));
        if (rh.magic == kBlobMagic && rh.version != kBlobVersion) {
            P2P_LOG(P2P_LOG_ERROR, "comm: rank %u speaks wire version %u, this rank %u: "
                    "every rank must run the same ucxp2p (this one is %s)", r, rh.version,
                    kBlobVersion, p2p_version());
            return P2P_ERR_BOOTSTRAP;
        }
        if (all[r].size() >= sizeof(rh)) std::memcpy(&rh, all[r].data(), sizeof(rh));
        if (rh.magic != kBlobMagic || all[r].size() < sizeof(rh) ||
            all[r].size() != sizeof(rh) + rh.addr_len) {
            P2P_LOG(P2P_LOG_ERROR, "comm: rank %u sent a malformed blob (%zu bytes)", r,
                    all[r].size());
            return P2P_ERR_BOOTSTRAP;
        }
        (*heads)[r] = rh;
        out->hosts[r] = rh.host;
        out->bulk[r] = rh.bulk;
        out->addrs[r].assign(all[r].begin() + sizeof(rh), all[r].end());
    }
    return P2P_OK;
}

} // namespace

p2p_status_t comm_wireup(Context &ctx, Bootstrap &bs, uint32_t rank, uint32_t size,
                         const cma::Identity &host, const tcpb::Address &bulk,
                         Wireup *out) {
    // The bound on rounds while other creates on a rank's context hold ids.
    // One rank (the single bootstrap) waits for nobody and ignores the
    // variable (docs/WIREUP.md); other bootstraps checked it already.
    uint64_t timeout_ms = kDefaultBootstrapTimeoutMs;
    p2p_status_t st = size > 1 ? bootstrap_timeout_ms(&timeout_ms) : P2P_OK;
    if (st != P2P_OK) return st;
    const int64_t give_up_ns = now_ns() + static_cast<int64_t>(timeout_ms) * 1000000;
    const UcpAddress &addr = ctx.address();
    for (uint32_t round = 0;; ++round) {
        Held held(ctx);
        bool contended = false;
        BlobHeader h;
        std::memset(&h, 0, sizeof(h));  // no stack bytes on the wire
        h.magic = kBlobMagic;
        h.version = kBlobVersion;
        h.free_ids = held.take(&h.id_gens, &contended);
        h.flags = (contended ? kIdsContended : 0) |
                  (round > 0 && now_ns() > give_up_ns ? kOutOfTime : 0);
        h.host = host;
        h.bulk = bulk;
        h.addr_len = static_cast<uint32_t>(addr.length());
        std::vector<uint8_t> mine(sizeof(h) + addr.length());
        std::memcpy(mine.data(), &h, sizeof(h));
        std::memcpy(mine.data() + sizeof(h), addr.get(), addr.length());

        std::vector<std::vector<uint8_t>> all;
        st = bs.allgather(mine, &all);
        if (st != P2P_OK) {
            P2P_LOG(P2P_LOG_ERROR, "comm: address exchange failed: %s",
                    p2p_status_string(st));
            return st;
        }
        std::vector<BlobHeader> heads;
        st = unpack(all, size, &heads, out);
        if (st != P2P_OK) return st;
        out->rounds = round + 1;
        Context::CommIdSet common;
        common.fill(0xff);
        uint32_t flags = 0;
        for (const BlobHeader &rh : heads) {
            for (size_t i = 0; i < common.size(); ++i) common[i] &= rh.free_ids[i];
            flags |= rh.flags;
        }
        const int id = lowest_id(common);
        if (id >= 0) {
            // A generation no rank used last for this id: what the previous
            // communicator with it left behind never matches this one's tags.
            std::vector<uint8_t> lasts(size);
            for (uint32_t r = 0; r < size; ++r) lasts[r] = heads[r].id_gens[id];
            out->id = static_cast<unsigned>(id);
            out->gen = next_comm_gen(lasts.data(), lasts.size());
            held.claim(out->id, static_cast<uint8_t>(out->gen));
            return P2P_OK;
        }
        if ((flags & kIdsContended) == 0) break;
        if ((flags & kOutOfTime) != 0) {
            P2P_LOG(P2P_LOG_ERROR, "comm: rank %u: no communicator id free on every rank "
                    "after %u exchanges: other creates on a rank's context held them "
                    "for P2P_BOOTSTRAP_TIMEOUT_MS (%llu ms)", rank, round + 1,
                    static_cast<unsigned long long>(timeout_ms));
            return P2P_ERR_BUSY;
        }
        P2P_LOG(P2P_LOG_DEBUG, "comm: rank %u: no id free on every rank while other "
                "creates hold some; exchanging again (round %u)", rank, round + 2);
        held.drop();  // before the pause: the others may take them now
        pause_before_retry(round);
    }
    P2P_LOG(P2P_LOG_ERROR, "comm: rank %u: no communicator id free on every rank "
            "(at most %d alive per context)", rank, Context::kMaxComms);
    return P2P_ERR_BUSY;
}

} // namespace ucxp2p
