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

p2p_status_t run_setup(Session &s, Result *r) {
    const Options &o = s.opts;
    const uint64_t iters = test_iters(o, "setup", 8, 1);
    const size_t msg = 8;
    char *sbuf = s.ctrl.data() + kCtrlAckSend;
    char *rbuf = s.ctrl.data() + kCtrlAckRecv;
    std::vector<double> create_us, first_us;
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
        p2p_status_t dst = c.destroy();
        st = (st != P2P_OK) ? st : dst;
    }
    if (st != P2P_OK) {
        return st;
    }
    Reaper rp(s.comm.get(), true);
    if (s.rank == 1) {
        PeerReport rep{};
        rep.bytes_received = tr.bytes;
        rep.bytes_sent = ts.bytes;
        rep.errors = tr.errors + ts.errors;
        return send_report(s, rp, rep);
    }
    if (s.rank != 0) {
        return P2P_OK;
    }
    PeerReport rep{};
    st = recv_report(s, rp, 1, &rep);
    if (st != P2P_OK) {
        return st;
    }
    Stats f = stats_of(first_us);
    Stats c = stats_of(create_us);
    r->test = "setup";
    r->size = msg;
    r->iters = iters;
    r->msgs_per_iter = 1;
    r->time_s = 0; /* no bandwidth: the samples are the create times */
    r->samples_us = create_us;
    r->bytes_expected = msg * iters;
    r->bytes_sent = ts.bytes;
    r->bytes_received = rep.bytes_received;
    r->errors = ts.errors + tr.errors + rep.errors;
    r->extra = {{"create_us_p50", c.p50},
                {"create_us_max", c.max},
                {"first_msg_us_avg", f.avg},
                {"first_msg_us_p50", f.p50},
                {"first_msg_us_max", f.max},
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
    Reaper rp(s.comm.get(), true);
    if (s.rank != 0) {
        return send_report(s, rp, mine);
    }
    std::vector<PeerReport> all(s.size);
    all[0] = mine;
    for (uint32_t p = 1; p < s.size && st == P2P_OK; ++p) {
        st = recv_report(s, rp, p, &all[p]);
    }
    if (st != P2P_OK) {
        return st;
    }
    double avg[5] = {0}, mx[5] = {0};
    uint64_t errors = 0;
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
    r->bytes_expected = uint64_t(8) * k * (s.size - 1);
    r->bytes_sent = ts.bytes;
    r->bytes_received = all.size() > 1 ? all[1].bytes_received : 0;
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
