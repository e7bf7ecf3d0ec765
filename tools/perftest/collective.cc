/*
 * Collective tests: communicator setup time and memory per communicator /
 * per connected peer. Every rank of the job calls these (p2p_comm_create is
 * collective over the bootstrap).
 */
#include "kernels.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace perftest {

namespace {

/** Rank 0: one count per (rank, direction) whose bytes differ from what
 *  that rank should have moved: the point's numbers assume every byte. */
uint64_t short_totals(const std::vector<PeerReport> &all,
                      const std::vector<uint64_t> &expected) {
    uint64_t bad = 0;
    for (size_t p = 0; p < all.size(); ++p) {
        bad += (all[p].bytes_sent != expected[p]) +
               (all[p].bytes_received != expected[p]);
    }
    return bad;
}

/** Every rank but 0 sends `mine`; rank 0 gets them all in *all (its own
 *  first). */
p2p_status_t gather_reports(Session &s, const PeerReport &mine,
                            std::vector<PeerReport> *all) {
    Reaper rp(s.comm.get(), true);
    if (s.rank != 0) {
        return send_report(s, rp, mine);
    }
    all->assign(s.size, PeerReport{});
    (*all)[0] = mine;
    p2p_status_t st = P2P_OK;
    for (uint32_t p = 1; p < s.size && st == P2P_OK; ++p) {
        st = recv_report(s, rp, p, &(*all)[p]);
    }
    return st;
}

} // namespace

p2p_status_t run_setup(Session &s, Result *r) {
    const Options &o = s.opts;
    const uint64_t iters = test_iters(o, "setup", 8, 1);
    const size_t msg = 8;
    char *sbuf = s.ctrl.data() + kCtrlAckSend;
    char *rbuf = s.ctrl.data() + kCtrlAckRecv;
    /* create: p2p_comm_create; first: the first round trip on the new
     * communicator (ranks 0 and 1); ready: both, the time until the
     * communicator has moved its first message (the setup target's) */
    std::vector<double> create_us, first_us, ready_us;
    Tally ts, tr;
    p2p_status_t st = P2P_OK;

    for (uint64_t i = 0; i < iters && st == P2P_OK; ++i) {
        st = p2p_bootstrap_barrier(s.boot.get());
        if (st != P2P_OK) {
            break;
        }
        Comm c;
        double t0 = now_us();
        st = c.create(s.ctx.get(), s.boot.get());
        double t1 = now_us();
        if (st != P2P_OK) {
            break;
        }
        if (s.rank <= 1) {
            /* first round trip on the fresh communicator: endpoints are
             * created here, on first use */
            Reaper rp(c.get(), o.use_wait);
            rp.set_deadline(s.deadline());
            uint32_t peer = 1 - s.rank;
            st = p2p_comm_recv(c.get(), peer, 1, rbuf, msg, s.ctrl.mem(),
                               nullptr);
            if (st == P2P_OK && s.rank == 0) {
                st = p2p_comm_send(c.get(), peer, 1, sbuf, msg, s.ctrl.mem(),
                                   nullptr);
                if (st == P2P_OK) {
                    st = rp.reap_both(1, &ts, 1, &tr);
                }
            } else if (st == P2P_OK) {
                st = rp.reap(P2P_QUEUE_RECV, 1, &tr);
                if (st == P2P_OK) {
                    st = p2p_comm_send(c.get(), peer, 1, sbuf, msg,
                                       s.ctrl.mem(), nullptr);
                }
                if (st == P2P_OK) {
                    st = rp.reap(P2P_QUEUE_SEND, 1, &ts);
                }
            }
        }
        double t2 = now_us();
        create_us.push_back(t1 - t0);
        first_us.push_back(t2 - t1);
        ready_us.push_back(t2 - t0);
        p2p_status_t dst = c.destroy();
        st = (st != P2P_OK) ? st : dst;
    }
    if (st != P2P_OK) {
        return st;
    }
    Stats c = stats_of(create_us), ready = stats_of(ready_us);
    PeerReport mine{};
    mine.bytes_received = tr.bytes;
    mine.bytes_sent = ts.bytes;
    mine.errors = tr.errors + ts.errors;
    mine.values[0] = c.p50;
    mine.values[1] = ready.p50;
    mine.values[2] = ready.max;
    std::vector<PeerReport> all;
    st = gather_reports(s, mine, &all);
    if (st != P2P_OK || s.rank != 0) {
        return st;
    }
    /* ranks 0 and 1 each sent and received one message per iteration
     * (a short echo counts as much as a short message); the others moved
     * nothing */
    std::vector<uint64_t> expected(s.size, 0);
    expected[0] = expected[1] = msg * iters;
    uint64_t errors = short_totals(all, expected);
    double create_p50 = 0, ready_p50 = 0, ready_max = 0;
    for (const PeerReport &p : all) {
        create_p50 = std::max(create_p50, p.values[0]);
        ready_p50 = std::max(ready_p50, p.values[1]);
        ready_max = std::max(ready_max, p.values[2]);
        errors += p.errors;
    }
    Stats f = stats_of(first_us);
    r->test = "setup";
    r->size = msg;
    r->iters = iters;
    r->msgs_per_iter = 1;
    r->time_s = 0; /* no bandwidth: the samples are the create times */
    r->samples_us = create_us;
    r->bytes_expected = msg * iters;
    r->bytes_sent = all[0].bytes_sent;
    r->bytes_received = all[1].bytes_received;
    r->errors = errors;
    /* rank 0's create and first round trip; then, over all ranks, the
     * largest median create time and median and max create + first
     * message time (ranks past 1 move no message: their create time) */
    r->extra = {{"create_us_p50", c.p50},
                {"create_us_max", c.max},
                {"first_msg_us_avg", f.avg},
                {"first_msg_us_p50", f.p50},
                {"first_msg_us_max", f.max},
                {"create_us_p50_rank_max", create_p50},
                {"create_first_msg_us_p50_rank_max", ready_p50},
                {"create_first_msg_us_max", ready_max},
                {"ranks", double(s.size)}};
    return P2P_OK;
}

namespace {

/** Every rank exchanges one 8-byte message with every other rank of c. */
p2p_status_t connect_all(Session &s, p2p_comm_h c, Buffer &buf, Tally *ts,
                         Tally *tr) {
    Reaper rp(c, true); /* not a latency path: do not spin on 2 cores */
    rp.set_deadline(s.deadline());
    uint32_t posted = 0;
    for (uint32_t p = 0; p < s.size; ++p) {
        if (p == s.rank) {
            continue;
        }
        p2p_status_t st = p2p_comm_recv(c, p, 2, buf.data() + 64 * p, 8,
                                        buf.mem(), nullptr);
        if (st != P2P_OK) {
            return st;
        }
        ++posted;
    }
    char *src = buf.data() + 64 * s.rank;
    for (uint32_t p = 0; p < s.size; ++p) {
        if (p == s.rank) {
            continue;
        }
        p2p_status_t st = p2p_comm_send(c, p, 2, src, 8, buf.mem(), nullptr);
        if (st != P2P_OK) {
            return st;
        }
    }
    return rp.reap_both(posted, ts, posted, tr);
}

double kib(uint64_t after, uint64_t before, double per) {
    return per > 0 ? (double(after) - double(before)) / 1024.0 / per : 0.0;
}

} // namespace

p2p_status_t run_mem(Session &s, Result *r) {
    const Options &o = s.opts;
    const uint32_t k = o.comms;
    const double peers = double(k) * (s.size - 1);
    Buffer buf;
    p2p_status_t st = buf.create(s.ctx.get(), 64 * size_t(s.size));
    if (st != P2P_OK) {
        return st;
    }
    std::vector<Comm> comms(k);
    Tally ts, tr;
    st = p2p_bootstrap_barrier(s.boot.get());
    uint64_t rss0 = rss_bytes(), pin0 = pinned_bytes();
    for (uint32_t i = 0; i < k && st == P2P_OK; ++i) {
        st = comms[i].create(s.ctx.get(), s.boot.get());
    }
    if (st == P2P_OK) {
        st = p2p_bootstrap_barrier(s.boot.get());
    }
    uint64_t rss1 = rss_bytes(), pin1 = pinned_bytes();
    for (uint32_t i = 0; i < k && st == P2P_OK; ++i) {
        st = connect_all(s, comms[i].get(), buf, &ts, &tr);
    }
    if (st == P2P_OK) {
        st = p2p_bootstrap_barrier(s.boot.get());
    }
    uint64_t rss2 = rss_bytes(), pin2 = pinned_bytes();
    if (st != P2P_OK) {
        return st;
    }
    comms.clear();
    PeerReport mine{};
    mine.bytes_received = tr.bytes;
    mine.bytes_sent = ts.bytes;
    mine.errors = ts.errors + tr.errors;
    mine.values[0] = kib(rss1, rss0, k);
    mine.values[1] = kib(rss2, rss1, peers);
    mine.values[2] = kib(pin1, pin0, k);
    mine.values[3] = kib(pin2, pin1, peers);
    mine.values[4] = kib(rss2, rss0, k); /* per fully connected comm */
    std::vector<PeerReport> all;
    st = gather_reports(s, mine, &all);
    if (st != P2P_OK || s.rank != 0) {
        return st;
    }
    /* every rank sent 8 bytes to and received 8 from each other rank, on
     * each communicator: a short total on any rank is an error */
    const uint64_t per_rank = uint64_t(8) * k * (s.size - 1);
    double avg[5] = {0}, mx[5] = {0};
    uint64_t errors = short_totals(all, std::vector<uint64_t>(s.size, per_rank));
    for (const PeerReport &p : all) {
        for (int v = 0; v < 5; ++v) {
            avg[v] += p.values[v] / s.size;
            mx[v] = std::max(mx[v], p.values[v]);
        }
        errors += p.errors;
    }
    r->test = "mem";
    r->size = 8;
    r->iters = k;
    r->msgs_per_iter = s.size - 1;
    r->time_s = 0;
    r->bytes_expected = per_rank;
    r->bytes_sent = ts.bytes;
    r->bytes_received = all[1].bytes_received;
    r->errors = errors;
    r->extra = {{"rss_KiB_per_comm_avg", avg[0]},
                {"rss_KiB_per_comm_max", mx[0]},
                {"rss_KiB_per_peer_avg", avg[1]},
                {"rss_KiB_per_peer_max", mx[1]},
                {"pinned_KiB_per_comm_max", mx[2]},
                {"pinned_KiB_per_peer_max", mx[3]},
                {"rss_KiB_per_connected_comm_max", mx[4]},
                {"ranks", double(s.size)}};
    return P2P_OK;
}

} // namespace perftest
