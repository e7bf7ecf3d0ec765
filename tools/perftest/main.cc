/*
 * p2p_perftest: ucx_perftest-style benchmark of the public ucxp2p API.
 * See options.cc (--help) for the tests and docs/PERFORMANCE.md for how
 * results are produced and compared.
 */
#include "doc_out.h"
#include "json_on_signal.h"
#include "kernels.h"
#include "options.h"
#include "report.h"
#include "runtime.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <strings.h>
#include <vector>

using namespace perftest;

namespace {

struct Point {
    std::string test;
    size_t size;
};

/** Ranks >= 2 sleep in p2p_comm_wait until rank 0 says go (or done). */
p2p_status_t wait_go(Session &s, double deadline_us) {
    Reaper rp(s.comm.get(), true);
    rp.set_deadline(deadline_us);
    char *buf = s.ctrl.data() + kCtrlAckRecv;
    p2p_status_t st = p2p_comm_recv(s.comm.get(), 0, s.tag_go(), buf, 8,
                                    s.ctrl.mem(), nullptr);
    if (st != P2P_OK) {
        return st;
    }
    Tally t;
    st = rp.reap(P2P_QUEUE_RECV, 1, &t);
    return st != P2P_OK ? st : t.first_error;
}

p2p_status_t send_go(Session &s) {
    Reaper rp(s.comm.get(), true);
    rp.set_deadline(s.deadline());
    char *buf = s.ctrl.data() + kCtrlAckSend;
    uint64_t n = 0;
    for (uint32_t p = 2; p < s.size; ++p) {
        p2p_status_t st = p2p_comm_send(s.comm.get(), p, s.tag_go(), buf, 8,
                                        s.ctrl.mem(), nullptr);
        if (st != P2P_OK) {
            return st;
        }
        ++n;
    }
    Tally t;
    p2p_status_t st = rp.reap(P2P_QUEUE_SEND, n, &t);
    return st != P2P_OK ? st : t.first_error;
}

/** What every rank must agree on: the options that decide the message
 *  sequence or what a point measures (not the output format, -q or
 *  --timeout, which only rank 0's or one rank's own). FNV-1a of their
 *  text. */
uint64_t options_fingerprint(const Options &o) {
    std::string t;
    for (const std::string &test : o.tests) {
        t += test + ",";
    }
    t += "|";
    for (size_t size : o.sizes) {
        t += std::to_string(size) + ",";
    }
    for (uint64_t v : {o.iters, o.warmup, uint64_t(o.window), uint64_t(o.batch_count),
                       uint64_t(o.batch_size), uint64_t(o.batch_size_given),
                       uint64_t(o.pool_bytes), uint64_t(o.use_wait), uint64_t(o.check),
                       uint64_t(o.comms), uint64_t(o.lib_alloc), uint64_t(o.post_batch)}) {
        t += "|" + std::to_string(v);
    }
    t += "|" + o.mem_type + "|" + o.threads;
    uint64_t h = 14695981039346656037ull;
    for (unsigned char c : t) {
        h = (h ^ c) * 1099511628211ull;
    }
    return h;
}

/** Fingerprints of peers [from, to) (at most kCtrlReportSlots of them)
 *  against mine, one report slot each; *same turns false on a mismatch. */
p2p_status_t compare_options_with(Session &s, uint64_t mine, uint32_t from, uint32_t to,
                                  bool *same) {
    Reaper rp(s.comm.get(), true);
    rp.set_deadline(s.deadline());
    const char *out = s.ctrl.data() + kCtrlAckSend;
    auto slot = [&](uint32_t p) { return s.ctrl.data() + kCtrlReportRecv + 64 * (p - from); };
    for (uint32_t p = from; p < to; ++p) {
        p2p_status_t st = p2p_comm_recv(s.comm.get(), p, s.tag_report(), slot(p),
                                        sizeof(mine), s.ctrl.mem(), nullptr);
        if (st == P2P_OK) {
            st = p2p_comm_send(s.comm.get(), p, s.tag_report(), out, sizeof(mine),
                               s.ctrl.mem(), nullptr);
        }
        if (st != P2P_OK) {
            return st;
        }
    }
    Tally ts, tr;
    p2p_status_t st = rp.reap_both(to - from, &ts, to - from, &tr);
    if (st != P2P_OK || ts.first_error != P2P_OK || tr.first_error != P2P_OK) {
        return st != P2P_OK ? st : ts.first_error != P2P_OK ? ts.first_error : tr.first_error;
    }
    for (uint32_t p = from; p < to; ++p) {
        uint64_t theirs;
        std::memcpy(&theirs, slot(p), sizeof(theirs));
        if (theirs != mine) {
            *same = false;
            std::fprintf(stderr, "p2p_perftest: rank %u: options differ from rank 0's "
                         "(start every rank with the same options)\n",
                         s.rank == 0 ? p : s.rank);
        }
    }
    return P2P_OK;
}

/** Every rank sends its fingerprint to rank 0, rank 0 sends its own to
 *  every rank (kCtrlReportSlots ranks at a time); *same: what this rank
 *  saw agrees (rank 0: every rank's). */
p2p_status_t compare_options(Session &s, bool *same) {
    const uint64_t mine = options_fingerprint(s.opts);
    std::memcpy(s.ctrl.data() + kCtrlAckSend, &mine, sizeof(mine));
    *same = true;
    const uint32_t first = s.rank == 0 ? 1 : 0, last = s.rank == 0 ? s.size : 1;
    for (uint32_t from = first; from < last; from += kCtrlReportSlots) {
        const uint32_t to = std::min<uint32_t>(last, from + kCtrlReportSlots);
        p2p_status_t st = compare_options_with(s, mine, from, to, same);
        if (st != P2P_OK) {
            return st;
        }
    }
    return P2P_OK;
}

int fail(Session &s, const char *what, p2p_status_t st) {
    report_error(s.rank, what, st);
    return 1;
}

/** fail() before the bootstrap named this process's rank: no rank is
 *  printed (every process would say "rank 0"). */
int fail_unranked(const char *what, p2p_status_t st) {
    std::fprintf(stderr, "p2p_perftest: %s: %s (%d)\n", what, p2p_status_string(st),
                 static_cast<int>(st));
    return 1;
}

/** Before the bootstrap names the ranks: whether this process is its
 *  launcher's first, from the variables the bootstraps read (the
 *  innermost launcher's first: torchrun's inside srun or mpirun); one that
 *  no launcher numbered, or that runs alone by P2P_BOOTSTRAP=single, is. */
bool launched_first() {
    const char *boot = std::getenv("P2P_BOOTSTRAP");
    if (boot != nullptr && strcasecmp(boot, "single") == 0) {
        return true;
    }
    for (const char *name : {"P2P_RANK", "RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK",
                             "PMI_RANK", "SLURM_PROCID"}) {
        const char *v = std::getenv(name);
        if (v != nullptr && v[0] != '\0') {
            return std::strtoul(v, nullptr, 10) == 0;
        }
    }
    return true;
}

/** With --json, what a signal (p2prun stopping the job after another rank
 *  failed, --timeout) prints until the first point: on the process that
 *  prints the run's document, an empty one ("complete": false); on the
 *  others, none. Before the bootstrap, and again once it named the ranks. */
void keep_early_document(Session &s) {
    if (s.opts.format != Format::JSON) {
        return;
    }
    const bool named = s.size != 0;
    if (named ? s.rank == 0 : launched_first()) {
        Reporter(s.opts, s.size, named ? s.boot.info().name : "none");  // keeps its document
    } else {
        json_on_signal::forget();
    }
}

/** A run that ends before its first point: with --json, rank 0 still
 *  prints a document, "complete": false and no results, as a run that
 *  fails later does (before the bootstrap: the launcher's first process,
 *  so that a job prints one document, not one per process). */
int end_early(Session &s, int rc) {
    const bool named = s.size != 0;  // the bootstrap was made and queried
    const bool first = named ? s.rank == 0 : launched_first();
    if (s.opts.format == Format::JSON && first) {
        Reporter(s.opts, s.size, named ? s.boot.info().name : "none")
            .finish(false);
    }
    return rc;
}

/** Context, bootstrap, communicator, options compared, buffers: 0, or the
 *  exit status of a run that ends here (reported). */
int prepare(Session &s) {
    const Options &opts = s.opts;
    keep_early_document(s);
    p2p_status_t st = s.ctx.create(opts.threads);
    if (st != P2P_OK) {
        return fail_unranked("p2p_context_create", st);
    }
    st = s.boot.create();
    if (st != P2P_OK) {
        return fail_unranked("bootstrap", st);
    }
    s.rank = s.boot.info().rank;
    s.size = s.boot.info().size;
    keep_early_document(s);
    if (s.size < 2) {
        std::fprintf(stderr, "p2p_perftest: needs at least 2 ranks (got %u);"
                     " start it with p2prun -n 2, mpirun -n 2 or srun -n 2\n",
                     s.size);
        return 2;
    }
    st = s.comm.create(s.ctx.get(), s.boot.get());
    if (st != P2P_OK) {
        return fail(s, "p2p_comm_create", st);
    }
    st = s.ctrl.create(s.ctx.get(), kCtrlBytes);
    if (st != P2P_OK) {
        return fail(s, "p2p_mem_register", st);
    }
    /* Ranks that parsed other options run other message sequences: they
     * would wait for each other until --timeout, or report good payloads
     * as bad. seq 0 is no point's. */
    bool same = false;
    s.seq = 0;
    st = compare_options(s, &same);
    if (st != P2P_OK) {
        return fail(s, "comparing options with rank 0", st);
    }
    if (!same) {
        return 2;
    }
    /* Ranks past 1 only join setup and mem, which move no payload: a pool
     * there is memory taken from the ranks that measure. */
    const size_t data_bytes = s.rank <= 1 ? buffer_bytes_needed(opts) : 64;
    if (opts.mem_type == "host" && s.rank <= 1) {
        /* Every byte is touched before the first point (--alloc lib's
         * memfd is not even charged at mmap): a pool the machine cannot
         * hold fills it until the OOM killer ends someone, so refuse it
         * now. Ranks 0 and 1 each take one, on one host when it runs
         * two or more ranks. */
        const uint64_t here = s.boot.info().local_size >= 2 ? 2 : 1;
        const uint64_t avail = memory_available();
        if (avail != 0 && uint64_t(data_bytes) > avail / here) {
            std::fprintf(stderr, "p2p_perftest: rank %u: payload buffers of %zu bytes "
                         "(x%llu ranks on this host) are more than the memory available "
                         "(%llu bytes); use smaller -s, -b or -p\n", s.rank, data_bytes,
                         (unsigned long long)here, (unsigned long long)avail);
            return 1;
        }
    }
    st = s.data.create(s.ctx.get(), data_bytes, opts.lib_alloc, opts.mem_type);
    if (st != P2P_OK) {
        return fail(s, opts.lib_alloc ? "p2p_mem_alloc" : "p2p_mem_register", st);
    }
    return 0;
}

int run_main(int argc, char **argv) {
    Options opts;
    int rc = options_parse(argc, argv, &opts);
    if (rc != 0) {
        return rc > 0 ? 0 : rc == -2 ? 1 : 2;
    }
    if (opts.format != Format::TABLE) {
        doc_out::isolate();  // before UCX can log (doc_out.h)
    }
    Session s(opts);
    rc = prepare(s);
    if (rc != 0) {
        return end_early(s, rc);
    }
    p2p_status_t st;

    std::vector<Point> points;
    for (const std::string &t : opts.tests) {
        for (size_t size : test_sizes(opts, t)) {
            points.push_back({t, size});
        }
    }
    /* Ranks past 1 wait for the next collective point (or the end) while
     * ranks 0 and 1 run the points before it, each within --timeout: a
     * bound for any stretch of points, taken anew at each wait (setup,
     * which the idle ranks join, is bounded per iteration, not as a whole,
     * so one from the start of the run was too short after a long one). */
    auto idle_deadline = [&] {
        return now_us() + opts.timeout_s * 1e6 * double(points.size() + 2);
    };
    std::unique_ptr<Reporter> rep;
    if (s.rank == 0) {
        rep = std::make_unique<Reporter>(opts, s.size, s.boot.info().name);
    }
    size_t bad_points = 0;  // rank 0: points whose errors column is not 0

    for (size_t i = 0; i < points.size(); ++i) {
        const Point &pt = points[i];
        s.seq = static_cast<uint32_t>(i + 1);
        const bool coll = is_collective(pt.test);
        if (s.rank >= 2 && !coll) {
            continue; /* ranks 0 and 1 measure; the others idle */
        }
        if (coll && s.size > 2) {
            st = (s.rank == 0) ? send_go(s) : (s.rank >= 2)
                                                  ? wait_go(s, idle_deadline())
                                                  : P2P_OK;
            if (st != P2P_OK) {
                if (rep) {
                    rep->finish(false);
                }
                return fail(s, "start of a collective test", st);
            }
        }
        if (s.rank == 0 && !opts.quiet) {
            std::fprintf(stderr, "p2p_perftest: [%zu/%zu] %s size %zu ...\n",
                         i + 1, points.size(), pt.test.c_str(), pt.size);
        }
        Result r;
        if (pt.test == "lat") {
            st = run_lat(s, pt.size, &r);
        } else if (pt.test == "setup") {
            st = run_setup(s, &r);
        } else if (pt.test == "mem") {
            st = run_mem(s, &r);
        } else if (pt.test == "rate") {
            st = run_rate(s, pt.size, &r);
        } else {
            st = run_stream(s, pt.test, pt.size, &r);
        }
        if (st != P2P_OK) {
            std::string what = "test " + pt.test + " size " +
                               std::to_string(pt.size);
            if (rep) {
                rep->finish(false);  /* the points measured so far */
            }
            return fail(s, what.c_str(), st);
        }
        if (s.rank == 0) {
            bad_points += r.errors != 0;
            rep->add(r);
        }
    }
    /* release the idle ranks, then leave together */
    s.seq = static_cast<uint32_t>(points.size() + 1);
    if (s.size > 2) {
        st = (s.rank == 0) ? send_go(s) : (s.rank >= 2)
                                              ? wait_go(s, idle_deadline())
                                              : P2P_OK;
        if (st != P2P_OK) {
            if (rep) {
                rep->finish(false);
            }
            return fail(s, "end of run", st);
        }
    }
    if (rep) {
        rep->finish();
    }
    st = p2p_bootstrap_barrier(s.boot.get());
    if (st != P2P_OK) {
        return fail(s, "final barrier", st);
    }
    if (bad_points > 0) {
        // A checked run that found bad data (or a point that moved other
        // than the bytes its rates assume) must fail the script using it.
        std::fprintf(stderr, "p2p_perftest: %zu point(s) with errors (errors column)\n",
                     bad_points);
        return 1;
    }
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    try {
        return run_main(argc, argv);
    } catch (const std::bad_alloc &) {
        std::fprintf(stderr, "p2p_perftest: out of memory (fewer iterations with -n?)\n");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "p2p_perftest: %s\n", e.what());
    }
    return 1;
}
