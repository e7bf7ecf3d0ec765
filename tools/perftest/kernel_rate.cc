/*
 * rate: the message rate measured the way ucx_perftest's tag_bw measures it
 * (src/tools/perf/lib/ucp_tests.cc, run_stream_uni): the sender streams
 * messages back to back with at most W (-W) of its sends in flight, the
 * receiver keeps W receives posted and reposts one as each completes, and the
 * only handshake is one ack after the last message. The time runs on rank 0
 * from its first timed send to that ack. (bw keeps the osu_bw-style window
 * with an ack per window, as the MPI baseline does.)
 *
 * Message m travels with tensor id tag_data(m % W) in slot m % W of the pool
 * when checking (the receive for m + W is posted once m completed, so a slot
 * is never written twice at once), else in slot m % pool slots.
 */
#include "kernels.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace perftest {

namespace {

/** m mod n, a mask when n is a power of two: the loops below take three
 *  or four of these per message, and a 64-bit division costs tens of cycles
 *  (ucx_perftest's own loop divides by nothing). */
class Mod {
public:
    explicit Mod(uint64_t n) : n_(n), mask_(n - 1), pow2_((n & (n - 1)) == 0) {}
    uint64_t operator()(uint64_t m) const { return pow2_ ? m & mask_ : m % n_; }

private:
    uint64_t n_, mask_;
    bool pow2_;  // n is a power of two, 1 included (the default pool: mask 0)
};

struct Stream {
    Session &s;
    size_t size;
    uint32_t window;
    size_t nslots;
    Reaper &rp;
    Mod in_window{window};
    Mod in_pool{nslots};
    size_t stride = slot_stride(size); /* computed once, not per message */
    /* --post-batch: blocks staged for one batch call, and how many calls
     * and blocks went out (rank-local; rank 0 reports its own). */
    std::vector<p2p_block_t> staged{};
    uint64_t batch_calls = 0, batch_blocks = 0;

    void stage(uint64_t m, uint32_t peer) {
        staged.emplace_back();
        p2p_block_t &b = staged.back();
        b.peer = peer;
        b.tensor_id = tag(m);
        b.buffer = slot(m);
        b.length = size;
        b.mem = s.data.mem();
        b.user_context = ctx_of(m);
    }
    /** Post what stage() collected in one call (nothing staged: no call). */
    p2p_status_t flush(bool is_send) {
        if (staged.empty()) {
            return P2P_OK;
        }
        p2p_comm_h comm = s.comm.get();
        p2p_status_t st = is_send
            ? p2p_comm_send_batch(comm, staged.data(), staged.size(), nullptr)
            : p2p_comm_recv_batch(comm, staged.data(), staged.size(), nullptr);
        ++batch_calls;
        batch_blocks += staged.size();
        staged.clear();
        return st;
    }

    char *slot(uint64_t m) const {
        size_t i = s.opts.check ? in_window(m) : in_pool(m);
        return s.data.data() + i * stride;
    }
    uint32_t tag(uint64_t m) const { return s.tag_data(uint32_t(in_window(m))); }
    static void *ctx_of(uint64_t m) { return reinterpret_cast<void *>(m + 1); }
    static uint64_t msg_of(const p2p_completion_t &e) {
        return reinterpret_cast<uintptr_t>(e.user_context) - 1;
    }
};

/** Rank 0: send messages [first, first + n) with at most W in flight, then
 *  wait for the receiver's ack (its receive posted before the first send).
 *  samples gets the mean time per message of each window of W sends but the
 *  first (posted into an empty window: it waits for nothing, so it timed
 *  only the posts), then that of the drain (the last W sends' completions
 *  and the ack): n / W samples that add up to the phase less its first
 *  window's posts; *t_end is where the drain ended. A phase of one window
 *  (-n 1) has no sample but the drain, which then covers the whole phase
 *  from t_phase, posts included: alone it timed what the receiver still
 *  owed after the posts, at 8 B a fifth to all of the phase. */
p2p_status_t send_phase(Stream &x, uint64_t first, uint64_t n, Tally *ts,
                        std::vector<double> *samples, double t_phase,
                        double *t_end) {
    Session &s = x.s;
    p2p_comm_h comm = s.comm.get();
    char *ack = s.ctrl.data() + kCtrlAckRecv;
    p2p_status_t st = p2p_comm_recv(comm, 1, s.tag_ack(), ack, 8,
                                    s.ctrl.mem(), nullptr);
    std::vector<uint8_t> busy(x.window, 0); /* not vector<bool>: bit ops per message */
    std::vector<p2p_completion_t> got(x.window);
    uint64_t inflight = 0;
    double t_mark = now_us();
    uint64_t since_mark = 0; /* --post-batch: messages since t_mark */
    bool first_window = true; /* its time is no sample (see above) */
    for (uint64_t m = first; m < first + n && st == P2P_OK;) {
        if (busy[x.in_window(m)]) { /* its slot's previous message is out */
            size_t k = 0;
            st = x.rp.take(P2P_QUEUE_SEND, got.data(), got.size(), &k, ts);
            for (size_t i = 0; i < k; ++i) {
                busy[x.in_window(Stream::msg_of(got[i]))] = 0;
            }
            inflight -= k;
            continue;
        }
        if (s.opts.post_batch) {
            /* every free slot from m on, in one call */
            uint64_t m0 = m;
            do {
                if (s.opts.check) {
                    fill_pattern(x.slot(m), x.size, m);
                }
                x.stage(m, 1);
                busy[x.in_window(m)] = 1;
                ++m;
            } while (m < first + n && !busy[x.in_window(m)]);
            st = x.flush(true);
            inflight += m - m0;
            since_mark += m - m0;
            if (samples != nullptr && since_mark >= x.window) {
                /* one sample per W messages, as with single posts: a batch
                 * may straddle a window's end, so its time is split
                 * evenly over its messages and the rest carried over */
                double t = now_us();
                double per = (t - t_mark) / double(since_mark);
                while (since_mark >= x.window) {
                    if (!first_window) {
                        samples->push_back(per);
                    }
                    first_window = false;
                    t_mark += per * x.window;
                    since_mark -= x.window;
                }
            }
            continue;
        }
        char *buf = x.slot(m);
        if (s.opts.check) {
            fill_pattern(buf, x.size, m);
        }
        st = p2p_comm_send(comm, 1, x.tag(m), buf, x.size, s.data.mem(),
                           Stream::ctx_of(m));
        busy[x.in_window(m)] = 1;
        ++inflight;
        ++m;
        if (samples != nullptr && x.in_window(m - first) == 0) {
            double t = now_us();
            if (!first_window) {
                samples->push_back((t - t_mark) / x.window);
            }
            first_window = false;
            t_mark = t;
        }
    }
    if (st == P2P_OK) {
        st = x.rp.reap(P2P_QUEUE_SEND, inflight, ts);
    }
    Tally acks;
    if (st == P2P_OK) {
        st = x.rp.reap(P2P_QUEUE_RECV, 1, &acks);
    }
    if (st == P2P_OK && samples != nullptr) {
        /* the drain: what the last window's sends waited for (the whole
         * phase when it was the only window) */
        const double from = samples->empty() ? t_phase : t_mark;
        *t_end = now_us();
        samples->push_back((*t_end - from) / x.window);
    }
    return st != P2P_OK ? st : acks.first_error;
}

/** Rank 1: receive messages [first, first + n) with W receives posted, then
 *  ack. Counts pattern mismatches into *bad when checking. */
p2p_status_t recv_phase(Stream &x, uint64_t first, uint64_t n, Tally *tr,
                        uint64_t *bad) {
    Session &s = x.s;
    p2p_comm_h comm = s.comm.get();
    auto post = [&](uint64_t m) {
        char *buf = x.slot(m);
        if (s.opts.check) {
            std::memset(buf, 0, x.size);
        }
        return p2p_comm_recv(comm, 0, x.tag(m), buf, x.size, s.data.mem(),
                             Stream::ctx_of(m));
    };
    p2p_status_t st = P2P_OK;
    const uint64_t end = first + n;
    for (uint64_t m = first; m < std::min(end, first + x.window) &&
                             st == P2P_OK; ++m) {
        if (s.opts.post_batch) {
            if (s.opts.check) {
                std::memset(x.slot(m), 0, x.size);
            }
            x.stage(m, 0);
        } else {
            st = post(m);
        }
    }
    if (st == P2P_OK) {
        st = x.flush(false);
    }
    std::vector<p2p_completion_t> got(x.window);
    for (uint64_t done = 0; done < n && st == P2P_OK;) {
        size_t k = 0;
        st = x.rp.take(P2P_QUEUE_RECV, got.data(), got.size(), &k, tr);
        for (size_t i = 0; i < k && st == P2P_OK; ++i) {
            uint64_t m = Stream::msg_of(got[i]);
            if (s.opts.check && !check_pattern(x.slot(m), x.size, m)) {
                ++*bad;
            }
            if (m + x.window < end) {
                if (s.opts.post_batch) {
                    if (s.opts.check) {
                        std::memset(x.slot(m + x.window), 0, x.size);
                    }
                    x.stage(m + x.window, 0);
                } else {
                    st = post(m + x.window);
                }
            }
        }
        if (st == P2P_OK) {
            st = x.flush(false);  /* --post-batch: this poll's reposts */
        }
        done += k;
    }
    if (st == P2P_OK) {
        st = p2p_comm_send(comm, 0, s.tag_ack(), s.ctrl.data() + kCtrlAckSend,
                           8, s.ctrl.mem(), nullptr);
    }
    Tally acks;
    if (st == P2P_OK) {
        st = x.rp.reap(P2P_QUEUE_SEND, 1, &acks);
    }
    return st != P2P_OK ? st : acks.first_error;
}

} // namespace

p2p_status_t run_rate(Session &s, size_t size, Result *r) {
    const Options &o = s.opts;
    const uint32_t w = o.window;
    const uint64_t iters = test_iters(o, "rate", size, w);
    const uint64_t warm = test_warmup(o, iters);
    Reaper rp(s.comm.get(), o.use_wait);
    rp.set_deadline(s.deadline());
    Stream x{s, size, w, slot_count(o, size, w), rp};
    x.staged.reserve(w);
    Tally ts, tr, ignored; /* ignored: warm-up bytes (errors still count) */
    uint64_t bad = 0, warm_bad = 0;
    std::vector<double> samples;
    samples.reserve(iters);

    p2p_status_t st;
    double t_start = 0, t_end = 0;
    if (s.rank == 0) {
        st = send_phase(x, 0, warm * w, &ignored, nullptr, now_us(), nullptr);
        t_start = now_us();
        if (st == P2P_OK) {
            /* the phase's time and its samples read the same clock marks */
            st = send_phase(x, warm * w, iters * w, &ts, &samples, t_start, &t_end);
        }
    } else {
        st = recv_phase(x, 0, warm * w, &ignored, &warm_bad);
        if (st == P2P_OK) {
            st = recv_phase(x, warm * w, iters * w, &tr, &bad);
        }
    }
    if (st != P2P_OK) {
        return st;
    }
    r->test = "rate";
    r->size = size;
    r->iters = iters;
    r->msgs_per_iter = w;
    r->time_s = (t_end - t_start) / 1e6;
    r->samples_us = std::move(samples);
    if (o.post_batch) {
        /* rank 0's sends per p2p_comm_send_batch call */
        r->extra = {{"blocks_per_post",
                     x.batch_calls ? double(x.batch_blocks) / double(x.batch_calls) : 0.0}};
    }
    /* each rank's tallies: its own side's bytes; the warm-up's errors and
     * its bytes (each rank's own side: sent on 0, received on 1) count */
    return finish_point(s, rp, ts, tr, ts.errors + tr.errors + bad + warm_bad +
                        warmup_faults(ignored, uint64_t(size) * w * warm), r);
}

} // namespace perftest
