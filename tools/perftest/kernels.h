/*
 * Measurement kernels. Every rank runs the same sequence of points (they
 * all parsed the same command line); ranks 0 and 1 measure, rank 0 reports.
 *
 * Tensor ids of one point: (seq << 20) | j for payload j, then the ack,
 * report and go ids at the top of that range. seq advances by one per point
 * on every rank, so points never match each other's messages.
 */
#ifndef UCXP2P_TOOLS_PERFTEST_KERNELS_H
#define UCXP2P_TOOLS_PERFTEST_KERNELS_H

#include "options.h"
#include "report.h"
#include "runtime.h"

#include <cstdint>
#include <string>

namespace perftest {

/* offsets inside the control buffer */
enum : size_t {
    kCtrlAckSend = 0,
    kCtrlAckRecv = 64,
    kCtrlReportSend = 128,
    kCtrlReportRecv = 512, /* report slot i at + i * 64 */
    kCtrlReportSlots = 4096, /* reports received at once, at most */
    kCtrlBytes = kCtrlReportRecv + 64 * kCtrlReportSlots
};

/** What rank 1 (or any rank, mem test) tells rank 0 after a point. */
struct PeerReport {
    uint64_t bytes_received;
    uint64_t bytes_sent;
    uint64_t errors;
    double values[5];
};

struct Session {
    explicit Session(const Options &o) : opts(o) {}
    const Options &opts;
    Context ctx;
    Bootstrap boot;
    Comm comm;
    Buffer data;  /* payload pool (see buffer_bytes_needed) */
    Buffer ctrl;  /* acks and reports */
    uint32_t rank = 0;
    uint32_t size = 0;
    uint32_t seq = 0;

    uint32_t tag_data(uint32_t j) const { return ((seq & 0xfffu) << 20) | j; }
    uint32_t tag_ack() const { return tag_data(0xffffdu); }
    uint32_t tag_report() const { return tag_data(0xffffeu); }
    uint32_t tag_go() const { return tag_data(0xfffffu); }
    double deadline() const { return now_us() + opts.timeout_s * 1e6; }
};

/** Distance between consecutive message slots of `size` bytes. */
size_t slot_stride(size_t size);
/** Slots the pool holds for messages of `size`, `count` in flight. */
size_t slot_count(const Options &o, size_t size, uint32_t count);
/** Bytes the payload buffer needs for every point of this run. */
size_t buffer_bytes_needed(const Options &o);

/** setup and mem: every rank takes part, and no payload moves. */
bool is_collective(const std::string &test);

/** Sizes a test sweeps (its default when -s was not given). */
std::vector<size_t> test_sizes(const Options &o, const std::string &test);
/** Timed iterations for one point (-n, else scaled by bytes). */
uint64_t test_iters(const Options &o, const std::string &test, size_t size,
                    uint32_t count);
uint64_t test_warmup(const Options &o, uint64_t iters);

/** End of a point measured by ranks 0 and 1: rank 1 reports its byte
 *  counts and `errors` to rank 0; rank 0, whose r already names the point
 *  (test, size, iters, msgs_per_iter, time, samples), adds its own and rank
 *  1's totals. */
p2p_status_t finish_point(Session &s, Reaper &rp, const Tally &sent,
                          const Tally &received, uint64_t errors, Result *r);

/** Ping-pong between ranks 0 and 1. */
p2p_status_t run_lat(Session &s, size_t size, Result *r);
/** bw (window of sends, ack per window) and batch (one batch call per iteration). */
p2p_status_t run_stream(Session &s, const std::string &test, size_t size,
                        Result *r);
/** rate: streamed sends, W in flight, one ack at the end (kernel_rate.cc). */
p2p_status_t run_rate(Session &s, size_t size, Result *r);
/** Collective tests: every rank calls them. */
p2p_status_t run_setup(Session &s, Result *r);
p2p_status_t run_mem(Session &s, Result *r);

/** Fill / verify a payload for message number m. The pattern's first four
 *  bytes carry a 32-bit mix of m, so a payload of 4 bytes or more tells
 *  message m from every other one of the next 2^32 (a slot that kept an
 *  older message's bytes never passes for the one expected). */
void fill_pattern(char *buf, size_t size, uint64_t m);
bool check_pattern(const char *buf, size_t size, uint64_t m);

/** What a warm-up left wrong: its failed completions, and 1 when the bytes
 *  it counted are not the bytes it should have moved. A point's numbers
 *  exclude its warm-up, its verdict does not. */
uint64_t warmup_faults(const Tally &t, uint64_t expected_bytes);

/** Send a PeerReport to rank 0 and wait for its completion. */
p2p_status_t send_report(Session &s, Reaper &rp, const PeerReport &rep);
/** On rank 0: receive the PeerReport of `from`. */
p2p_status_t recv_report(Session &s, Reaper &rp, uint32_t from,
                         PeerReport *rep);

} // namespace perftest

#endif
