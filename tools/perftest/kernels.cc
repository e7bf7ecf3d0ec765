#include "kernels.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace perftest {

/* ------------------------------------------------------------ sizing */

size_t slot_stride(size_t size) {
    return std::max<size_t>((size + 63) / 64 * 64, 64);
}

size_t slot_count(const Options &o, size_t size, uint32_t count) {
    size_t n = o.pool_bytes ? std::max<size_t>(o.pool_bytes /
                                               slot_stride(size), 1)
                            : 1;
    if (o.check) {
        n = std::max<size_t>(n, count); /* verified messages never overlap */
    }
    return n;
}

std::vector<size_t> test_sizes(const Options &o, const std::string &test) {
    if (test == "setup" || test == "mem") {
        return {8};
    }
    if (test == "batch" && o.batch_size_given) {
        return {o.batch_size};  /* -b COUNTxSIZE: its SIZE, whatever -s says */
    }
    if (!o.sizes.empty()) {
        return o.sizes;
    }
    if (test == "batch") {
        return {o.batch_size};
    }
    if (test == "bw") {
        std::vector<size_t> v;
        for (size_t s = 8; s <= (4u << 20); s *= 2) {
            v.push_back(s);
        }
        return v;
    }
    return {8}; /* lat, rate */
}

namespace {

uint32_t msgs_per_iter(const Options &o, const std::string &test) {
    if (test == "batch") {
        return o.batch_count;
    }
    if (test == "bw" || test == "rate") {
        return o.window;
    }
    return 1;
}

} // namespace

bool is_collective(const std::string &test) {
    return test == "setup" || test == "mem";
}

size_t buffer_bytes_needed(const Options &o) {
    size_t need = 64;
    for (const std::string &t : o.tests) {
        if (is_collective(t)) continue;  // setup, mem: no payload (nor pool)
        for (size_t size : test_sizes(o, t)) {
            // lat --check takes the echo in a second slot (run_lat).
            uint32_t count = t == "lat" ? 2 : msgs_per_iter(o, t);
            size_t n = slot_count(o, size, count);
            need = std::max(need, n * slot_stride(size));
        }
    }
    return need;
}

uint64_t test_iters(const Options &o, const std::string &test, size_t size,
                    uint32_t count) {
    if (o.iters != 0) {
        return o.iters;
    }
    if (test == "setup") {
        return 20;
    }
    const double budget = (test == "lat") ? 32.0 * (1 << 20)
                                          : 256.0 * (1 << 20);
    const uint64_t max_iters = (test == "lat") ? 10000 : 2000;
    double n = budget / (std::max<size_t>(size, 1) * double(count));
    return static_cast<uint64_t>(std::min<double>(std::max(n, 10.0),
                                                  max_iters));
}

uint64_t test_warmup(const Options &o, uint64_t iters) {
    if (o.warmup != UINT64_MAX) {
        return o.warmup;
    }
    return std::max<uint64_t>(iters / 10, 2);
}

/* ------------------------------------------------------------ payloads */

namespace {

/** Byte j of message m's payload: byte j % 4 of a multiplicative hash of
 *  m (odd multiplier: a bijection on 32 bits), shifted by j. */
inline char pattern_byte(uint32_t seed, size_t j) {
    return static_cast<char>((seed >> ((j & 3) * 8)) + j * 7 + 1);
}

inline uint32_t pattern_seed(uint64_t m) {
    return static_cast<uint32_t>(m) * 2654435761u;
}

} // namespace

void fill_pattern(char *buf, size_t size, uint64_t m) {
    const uint32_t seed = pattern_seed(m);
    for (size_t j = 0; j < size; ++j) {
        buf[j] = pattern_byte(seed, j);
    }
}

bool check_pattern(const char *buf, size_t size, uint64_t m) {
    const uint32_t seed = pattern_seed(m);
    for (size_t j = 0; j < size; ++j) {
        if (buf[j] != pattern_byte(seed, j)) {
            return false;
        }
    }
    return true;
}

uint64_t warmup_faults(const Tally &t, uint64_t expected_bytes) {
    return t.errors + (t.bytes != expected_bytes ? 1 : 0);
}

/* ------------------------------------------------------------ reports */

p2p_status_t send_report(Session &s, Reaper &rp, const PeerReport &rep) {
    char *buf = s.ctrl.data() + kCtrlReportSend;
    std::memcpy(buf, &rep, sizeof(rep));
    p2p_status_t st = p2p_comm_send(s.comm.get(), 0, s.tag_report(), buf,
                                    sizeof(rep), s.ctrl.mem(), nullptr);
    if (st != P2P_OK) {
        return st;
    }
    Tally t;
    rp.set_deadline(s.deadline());
    st = rp.reap(P2P_QUEUE_SEND, 1, &t);
    return st != P2P_OK ? st : t.first_error;
}

p2p_status_t recv_report(Session &s, Reaper &rp, uint32_t from,
                         PeerReport *rep) {
    char *buf = s.ctrl.data() + kCtrlReportRecv;  // one at a time: slot 0
    p2p_status_t st = p2p_comm_recv(s.comm.get(), from, s.tag_report(), buf,
                                    sizeof(*rep), s.ctrl.mem(), nullptr);
    if (st != P2P_OK) {
        return st;
    }
    Tally t;
    rp.set_deadline(s.deadline());
    st = rp.reap(P2P_QUEUE_RECV, 1, &t);
    if (st != P2P_OK || t.first_error != P2P_OK) {
        return st != P2P_OK ? st : t.first_error;
    }
    std::memcpy(rep, buf, sizeof(*rep));
    return P2P_OK;
}

p2p_status_t finish_point(Session &s, Reaper &rp, const Tally &sent,
                          const Tally &received, uint64_t errors, Result *r) {
    if (s.rank == 1) {
        PeerReport rep{};
        rep.bytes_received = received.bytes;
        rep.bytes_sent = sent.bytes;
        rep.errors = errors;
        return send_report(s, rp, rep);
    }
    PeerReport rep{};
    p2p_status_t st = recv_report(s, rp, 1, &rep);
    if (st != P2P_OK) {
        return st;
    }
    r->bytes_expected = uint64_t(r->size) * r->msgs_per_iter * r->iters;
    r->bytes_sent = sent.bytes;
    r->bytes_received = rep.bytes_received;
    r->errors = errors + rep.errors;
    // The rates are computed from bytes_expected: a point that moved
    // other than that is an error, not a number.
    r->errors += (r->bytes_sent != r->bytes_expected) +
                 (r->bytes_received != r->bytes_expected);
    return P2P_OK;
}

/* ------------------------------------------------------------ lat */

p2p_status_t run_lat(Session &s, size_t size, Result *r) {
    const Options &o = s.opts;
    const uint64_t iters = test_iters(o, "lat", size, 1);
    const uint64_t warm = test_warmup(o, iters);
    // --check: rank 0 takes the echo in the next slot, cleared, so that a
    // short or missing echo cannot pass for the pattern it just sent.
    const size_t nslots = slot_count(o, size, o.check ? 2 : 1);
    const size_t stride = slot_stride(size);
    const uint32_t peer = (s.rank == 0) ? 1 : 0;
    const uint32_t tag = s.tag_data(0);
    p2p_comm_h comm = s.comm.get();
    p2p_mem_h mem = s.data.mem();
    Reaper rp(comm, o.use_wait);
    rp.set_deadline(s.deadline());
    Tally ts, tr;
    uint64_t bad = 0, warm_bad = 0;
    std::vector<double> samples;
    samples.reserve(iters);
    double total_us = 0;
    p2p_status_t st = P2P_OK;

    /* ucx_perftest tag_lat's order (run_ping_pong) and mpi_bw's: rank 0
     * sends, then posts the receive for the echo; rank 1 posts its receive,
     * waits, echoes, and posts the next receive after echoing. */
    auto slot = [&](uint64_t i) { return s.data.data() + (i % nslots) * stride; };
    // --check: rank 1 clears a slot before receiving into it, so that a
    // receive that wrote nothing cannot pass on what the slot held.
    auto post_recv = [&](uint64_t i) {
        if (o.check) std::memset(slot(i), 0, size);
        return p2p_comm_recv(comm, peer, tag, slot(i), size, mem, nullptr);
    };
    if (s.rank == 1) {
        st = post_recv(0);
    }
    for (uint64_t i = 0; i < warm + iters && st == P2P_OK; ++i) {
        if (i == warm) {
            // Each rank sent and received warm messages of size bytes.
            warm_bad = bad + warmup_faults(ts, uint64_t(size) * warm) +
                       warmup_faults(tr, uint64_t(size) * warm);
            ts = Tally();
            tr = Tally();
            bad = 0;
        }
        char *buf = slot(i);
        if (s.rank == 0) {
            char *echo = o.check ? slot(i + 1) : buf;
            if (o.check) {
                fill_pattern(buf, size, i);
                std::memset(echo, 0, size);
            }
            double t0 = now_us();
            st = p2p_comm_send(comm, peer, tag, buf, size, mem, nullptr);
            if (st == P2P_OK) {
                /* the echo lands in buf only after rank 1 got all of it */
                st = p2p_comm_recv(comm, peer, tag, echo, size, mem, nullptr);
            }
            if (st == P2P_OK) {
                st = rp.reap_both(1, &ts, 1, &tr);
            }
            double half = (now_us() - t0) / 2;
            if (i >= warm) {
                samples.push_back(half);
                total_us += half;
            }
            /* rank 1 echoes the payload: it must come back unchanged */
            if (o.check && st == P2P_OK && !check_pattern(echo, size, i)) {
                ++bad;
            }
        } else {
            st = rp.reap(P2P_QUEUE_RECV, 1, &tr);
            if (st == P2P_OK) {
                if (o.check && !check_pattern(buf, size, i)) {
                    ++bad;
                }
                st = p2p_comm_send(comm, peer, tag, buf, size, mem, nullptr);
            }
            if (st == P2P_OK && i + 1 < warm + iters) {
                st = post_recv(i + 1);
            }
            if (st == P2P_OK) {
                st = rp.reap(P2P_QUEUE_SEND, 1, &ts);
            }
        }
    }
    if (st != P2P_OK) {
        return st;
    }
    r->test = "lat";
    r->size = size;
    r->iters = iters;
    r->msgs_per_iter = 1;
    r->time_s = total_us / 1e6;
    r->samples_us = std::move(samples);
    if (s.rank == 0 && tr.bytes != uint64_t(size) * iters) {
        ++bad;  // the echoes did not bring back every byte sent
    }
    return finish_point(s, rp, ts, tr, ts.errors + tr.errors + bad + warm_bad, r);
}

/* ------------------------------------------------------------ bw/rate/batch */

namespace {

/** Post `count` transfers of iteration i (sends on rank 0, receives on 1). */
p2p_status_t post_iteration(Session &s, bool batch, size_t size,
                            uint32_t count, uint64_t i, size_t nslots,
                            std::vector<p2p_block_t> *blocks) {
    const size_t stride = slot_stride(size);
    const bool sender = (s.rank == 0);
    const uint32_t peer = sender ? 1 : 0;
    for (uint32_t j = 0; j < count; ++j) {
        uint64_t m = i * count + j;
        char *buf = s.data.data() + (m % nslots) * stride;
        if (s.opts.check) {
            if (sender) {
                fill_pattern(buf, size, m);
            } else {
                std::memset(buf, 0, size);
            }
        }
        if (batch) {
            (*blocks)[j] = p2p_block_t{peer, s.tag_data(j), buf, size,
                                       s.data.mem(), nullptr};
            continue;
        }
        p2p_status_t st =
            sender ? p2p_comm_send(s.comm.get(), peer, s.tag_data(j), buf,
                                   size, s.data.mem(), nullptr)
                   : p2p_comm_recv(s.comm.get(), peer, s.tag_data(j), buf,
                                   size, s.data.mem(), nullptr);
        if (st != P2P_OK) {
            return st;
        }
    }
    if (!batch) {
        return P2P_OK;
    }
    size_t bad_index = 0;
    return sender ? p2p_comm_send_batch(s.comm.get(), blocks->data(), count,
                                        &bad_index)
                  : p2p_comm_recv_batch(s.comm.get(), blocks->data(), count,
                                        &bad_index);
}

uint64_t verify_iteration(Session &s, size_t size, uint32_t count,
                          uint64_t i, size_t nslots) {
    uint64_t bad = 0;
    for (uint32_t j = 0; j < count; ++j) {
        uint64_t m = i * count + j;
        const char *buf = s.data.data() + (m % nslots) * slot_stride(size);
        bad += check_pattern(buf, size, m) ? 0 : 1;
    }
    return bad;
}

} // namespace

p2p_status_t run_stream(Session &s, const std::string &test, size_t size,
                        Result *r) {
    const Options &o = s.opts;
    const bool batch = (test == "batch");
    const uint32_t count = batch ? o.batch_count : o.window;
    const uint64_t iters = test_iters(o, test, size, count);
    const uint64_t warm = test_warmup(o, iters);
    const size_t nslots = slot_count(o, size, count);
    p2p_comm_h comm = s.comm.get();
    char *ack_send = s.ctrl.data() + kCtrlAckSend;
    char *ack_recv = s.ctrl.data() + kCtrlAckRecv;
    std::vector<p2p_block_t> blocks(batch ? count : 0);
    Reaper rp(comm, o.use_wait);
    rp.set_deadline(s.deadline());
    Tally ts, tr;
    uint64_t bad = 0, warm_bad = 0;
    std::vector<double> samples;
    samples.reserve(iters);
    double t_start = 0, t_end = 0;
    p2p_status_t st = P2P_OK;

    if (s.rank == 1) { /* receives of iteration 0 go up before any send */
        st = post_iteration(s, batch, size, count, 0, nslots, &blocks);
    }
    for (uint64_t i = 0; i < warm + iters && st == P2P_OK; ++i) {
        if (i == warm) {
            // The data's bytes: rank 0 sent them, rank 1 received them (the
            // acks the other way count only their errors).
            const uint64_t data = uint64_t(size) * count * warm;
            warm_bad = bad + (s.rank == 0 ? warmup_faults(ts, data) + tr.errors
                                          : warmup_faults(tr, data) + ts.errors);
            ts = Tally();
            tr = Tally();
            bad = 0;
            t_start = now_us();
        }
        if (s.rank == 0) {
            double t0 = now_us();
            st = p2p_comm_recv(comm, 1, s.tag_ack(), ack_recv, 8,
                               s.ctrl.mem(), nullptr);
            if (st == P2P_OK) {
                st = post_iteration(s, batch, size, count, i, nslots,
                                    &blocks);
            }
            if (st == P2P_OK) {
                st = rp.reap_both(count, &ts, 1, &tr);
            }
            if (i >= warm) {
                samples.push_back((now_us() - t0) / count);
            }
        } else {
            st = rp.reap(P2P_QUEUE_RECV, count, &tr);
            if (st == P2P_OK && o.check) {
                bad += verify_iteration(s, size, count, i, nslots);
            }
            if (st == P2P_OK && i + 1 < warm + iters) {
                st = post_iteration(s, batch, size, count, i + 1, nslots,
                                    &blocks);
            }
            if (st == P2P_OK) {
                st = p2p_comm_send(comm, 0, s.tag_ack(), ack_send, 8,
                                   s.ctrl.mem(), nullptr);
            }
            if (st == P2P_OK) {
                Tally ack;
                st = rp.reap(P2P_QUEUE_SEND, 1, &ack);
                ts.errors += ack.errors;
            }
        }
    }
    t_end = now_us();
    if (st != P2P_OK) {
        return st;
    }
    r->test = test;
    r->size = size;
    r->iters = iters;
    r->msgs_per_iter = count;
    r->time_s = (t_end - t_start) / 1e6;
    r->samples_us = std::move(samples);
    return finish_point(s, rp, ts, tr, ts.errors + tr.errors + bad + warm_bad, r);
}

} // namespace perftest
