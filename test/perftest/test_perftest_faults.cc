/*
 * p2p_perftest and p2p_demo with faults injected (fault_send.cc): what they
 * did not get is an error in the report and the exit status, never a
 * number. And bad command lines, and a failure before the bootstrap: a
 * clear message and a nonzero exit status.
 */
#include "../../tools/common/meminfo.h"
#include "../shell.h"
#include "json_mini.h"
#include "perftest_util.h"

#include <gtest/gtest.h>

#include <string>

namespace {

using namespace perftest_test;

/** A fault (fault_send.cc's FAULT value, with any more variables) on one
 *  rank of a 2-rank run, and the test whose CSV row must count it. */
struct FaultCase {
    const char *fault;
    int rank;
    const char *args;
    const char *test;
};

/** Run c clean (when clean_too) and with its fault: the clean run passes,
 *  the faulty one fails with exit status 1 and errors in its row. */
void expect_fault_fails(const FaultCase &c, bool clean_too) {
    SCOPED_TRACE(std::string(c.fault) + " on rank " + std::to_string(c.rank) + ": " + c.args);
    if (clean_too) {
        ProcResult clean = run2(c.args);
        EXPECT_EQ(0, clean.rc) << clean.err;
        EXPECT_EQ(0, csv_errors(clean.out, c.test)) << clean.out;
    }
    ProcResult r = run2_fault(c.fault, c.rank, c.args);
    EXPECT_EQ(1, r.rc) << r.out << r.err;
    EXPECT_GT(csv_errors(r.out, c.test), 0) << r.out;
    EXPECT_NE(std::string::npos, r.err.find("point(s) with errors")) << r.err;
}

// What p2p_perftest did not get is an error in its report and its exit
// status (1), never a number: a corrupted or short echo in lat (the echo
// was checked in the buffer just sent from, so anything passed), a short
// payload in bw (bandwidth was computed from bytes never moved).
TEST(Perftest, BadOrMissingDataFailsTheRun) {
    if (!have_p2prun()) {
        GTEST_SKIP() << "p2prun not built";
    }
    const FaultCase cases[] = {{"corrupt", 1, "-t lat -s 4096 -n 20 -q --check --csv", "lat"},
                 {"half", 1, "-t lat -s 4096 -n 20 -q --csv", "lat"},
                 {"half", 0, "-t bw -s 4096 -n 5 -W 4 -q --csv", "bw"},
                 {"corrupt", 0, "-t bw -s 64 -n 5 -W 4 -q --check --csv", "bw"},
                 /* the collective tests: every rank's totals (a short
                  * echo on rank 1's side, the mem test's rank 0 receives) */
                 {"half", 0, "-t setup -n 4 -q --csv", "setup"},
                 {"half", 1, "-t setup -n 4 -q --csv", "setup"},
                 {"half", 0, "-t mem -c 2 -q --csv", "mem"},
                 {"half", 1, "-t mem -c 2 -q --csv", "mem"}};
    for (const FaultCase &c : cases) {
        expect_fault_fails(c, /*clean_too=*/true);
    }
    /* 3 ranks, short sends on rank 1: ranks 0 and 2 receive short; rank
     * 0's sends and rank 1's receives (the report's columns) are whole */
    ProcResult r = run_fault("half", 1, perftest(), 3, "-t mem -c 2 -q --csv");
    EXPECT_EQ(1, r.rc) << r.out << r.err;
    EXPECT_GT(csv_errors(r.out, "mem"), 0) << r.out;
}

// The warm-up's numbers are not reported, but what went wrong in it still
// fails the point: a corrupted or short payload, or a receive that left
// its buffer untouched where the slot still held the pattern of a message
// 256 earlier (the pattern repeated every 256 messages, and lat's receiver
// did not clear its slot). FAULT_NTH picks one payload: with -n 20 or
// -n 5 the first ones are warm-up (max(n / 10, 2) iterations).
TEST(Perftest, FaultsInTheWarmUpOrAStaleSlotFailThePoint) {
    if (!have_p2prun()) {
        GTEST_SKIP() << "p2prun not built";
    }
    const FaultCase cases[] = {{"corrupt FAULT_NTH=1", 1, "-t lat -s 4096 -n 20 -q --check --csv", "lat"},
                 {"half FAULT_NTH=2", 0, "-t lat -s 4096 -n 20 -q --csv", "lat"},
                 {"corrupt FAULT_NTH=1", 0, "-t bw -s 64 -n 5 -W 4 -q --check --csv", "bw"},
                 {"half FAULT_NTH=3", 0, "-t bw -s 4096 -n 5 -W 4 -q --csv", "bw"},
                 {"half FAULT_NTH=1", 0, "-t rate -s 64 -n 5 -W 4 -q --csv", "rate"},
                 {"misplace FAULT_NTH=300", 1,
                  "-t lat -s 64 -n 400 -w 0 -p 16K -q --check --csv", "lat"}};
    /* clean runs of the same points pass (the misplaced receive: in a
     * pool of 256 slots, where the old pattern hid it, and of 128) */
    for (const FaultCase &c : cases) {
        expect_fault_fails(c, /*clean_too=*/true);
    }
    expect_fault_fails({"misplace FAULT_NTH=300", 1,
                        "-t lat -s 64 -n 400 -w 0 -p 8K -q --check --csv", "lat"},
                       /*clean_too=*/false);
}

// The quick-start job: bytes moved between ranks exclude a rank's tensors
// to itself, every iteration is verified (a payload corrupted in one
// iteration and right in the next failed no check), bad values are usage
// errors.
TEST(Demo, CountsWhatMovedBetweenRanksAndVerifiesEveryIteration) {
    if (!have_p2prun()) {
        GTEST_SKIP() << "p2prun not built";
    }
    ProcResult r = run("env UCX_TLS=shm,self " + p2prun() + " -n 3 --no-prefix --timeout 80 -- " +
                       demo() + " -s 1M -t 1 -i 2");
    ASSERT_EQ(0, r.rc) << r.out << r.err;
    // 1 MiB x 1 tensor x 2 iterations from each of 2 other ranks
    EXPECT_NE(std::string::npos, r.out.find("rank 2: received 4.2 MB from 2 other rank(s) "
                                            "(1 tensors x 1048576 B x 2 iters)")) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("all-to-all of 3 ranks: 12.6 MB moved between "
                                            "ranks in total")) << r.out;
    // Flipped in iteration 0 (and 2), restored in 1: caught in iteration 0.
    r = run_fault("corrupt", 0, demo(), 2, "-s 4096 -t 1 -i 2");
    EXPECT_NE(0, r.rc) << r.out << r.err;
    EXPECT_NE(std::string::npos, r.err.find("iteration 0: byte 0 of tensor 0 from rank 0 is "
                                            "wrong")) << r.err;
    for (const char *bad : {"-s 4x", "-s -1", "-t -1", "-t 4294967297", "-s 2G", "-i 0",
                            "-i 1 extra"}) {
        ProcResult b = run("env P2P_BOOTSTRAP=single " + demo() + " " + bad, 30);
        EXPECT_EQ(2, b.rc) << bad << ": " << b.err;
        EXPECT_NE(std::string::npos, b.err.find("usage: p2p_demo")) << bad << ": " << b.err;
    }
}

} // namespace

// --json prints its document at the end: a run that a signal ended (p2prun
// --timeout, Ctrl-C, p2prun stopping the ranks after one failed: SIGTERM)
// printed nothing, though the README promises a document with the points
// measured before ("complete": false). p2prun is sent SIGTERM once the
// progress lines say the second point began (no clock: on one core the
// first point's pace is anyone's guess), and forwards it; that 4 MiB
// point (240 GB of ping-pong) is still running then.
TEST(Perftest, JsonDocumentWhenASignalEndsTheRun) {
    if (!have_p2prun()) {
        GTEST_SKIP() << "p2prun not built";
    }
    // One sh -c '...' (single quotes: the outer shell expands nothing).
    const std::string script =
        "d=$(mktemp -d) && (env UCX_TLS=shm,self " + p2prun() +
        " -n 2 --no-prefix --timeout 300 -- " + perftest() +
        " -t lat -s 8,4M -n 30000 --wait --json >$d/out 2>$d/err & pid=$!; "
        "i=0; while [ $i -lt 1500 ] && ! grep -q \"lat size 4194304\" $d/err; do "
        "sleep 0.1; i=$((i+1)); done; kill -TERM $pid; wait $pid; rc=$?; "
        "cat $d/out; cat $d/err >&2; rm -rf $d; exit $rc)";
    ProcResult r = run("sh -c '" + script + "'", 240);
    EXPECT_EQ(128 + 15, r.rc) << r.err;  // p2prun, ended by SIGTERM
    jsonmini::Value doc;
    const std::string text = from_line(r.out, "{");  // the parser keeps a reference
    jsonmini::Parser p(text);
    ASSERT_TRUE(p.parse(&doc)) << p.error() << "\n" << r.out << r.err;
    EXPECT_FALSE(doc.at("complete").b) << r.out;
    ASSERT_EQ(doc.at("results").arr.size(), 1u) << r.out;
    EXPECT_EQ(doc.at("results").arr[0].at("size").num, 8) << r.out;
}

// p2p_demo's buffers (a send and a receive buffer of ranks x tensors x
// bytes, per rank) are checked against the memory available on the host
// before they are touched: -n 4 -s 1G -t 1 asked for 32 GiB on a 23 GiB
// machine and the kernel's OOM killer ended a rank (its old bound let up
// to 32 GiB per rank through, saying 16).
TEST(Demo, BuffersLargerThanTheHostsMemoryAreRefused) {
    if (!have_p2prun()) {
        GTEST_SKIP() << "p2prun not built";
    }
    // 2 x 2 ranks x 8 tensors x 1 GiB = 32 GiB per rank: over the bound.
    ProcResult r = run("env UCX_TLS=shm,self " + p2prun() + " -n 2 --no-prefix --timeout 60 -- " +
                           demo() + " -s 1G -t 8 -i 1",
                       60);
    EXPECT_EQ(2, r.rc) << r.out << r.err;
    EXPECT_NE(std::string::npos, r.err.find("is more than 16 GiB of buffers per rank")) << r.err;
    if (p2ptools::memory_available() >= (uint64_t(32) << 30)) {
        GTEST_SKIP() << "32 GiB fit in this machine's available memory";
    }
    // 2 ranks x (send + receive) x 2 ranks x 4 tensors x 1 GiB = 32 GiB.
    r = run("env UCX_TLS=shm,self " + p2prun() + " -n 2 --no-prefix --timeout 60 -- " +
                demo() + " -s 1G -t 4 -i 1",
            60);
    EXPECT_EQ(2, r.rc) << r.out << r.err;
    EXPECT_NE(std::string::npos, r.err.find("more than the memory available")) << r.err;
}

// A run that fails before the bootstrap names the ranks (no transport UCX
// can use) prints one --json document for the job, not one per process:
// stdout held three concatenated documents under p2prun -n 3, which no
// JSON reader takes. Which process prints it follows the launcher's rank
// variables (the innermost launcher's first), or P2P_BOOTSTRAP=single.
TEST(Perftest, JsonBeforeTheBootstrapIsOneDocumentPerJob) {
    if (!have_p2prun()) {
        GTEST_SKIP() << "p2prun not built";
    }
    const std::string tool = perftest() + " -t lat -s 8 -n 10 --json -q";
    ProcResult r = run("env UCX_TLS=no_such_transport " + p2prun() +
                           " -n 3 --no-prefix --timeout 60 -- " + tool,
                       60);
    EXPECT_NE(0, r.rc) << r.err;
    EXPECT_EQ(1u, p2ptest::count_of(r.out, "\"tool\": \"p2p_perftest\"")) << r.out;
    // UCX logs on stdout by default; the three processes' warnings came
    // before, inside or after the document (doc_out.h): stdout is the
    // document alone, and UCX's lines are on stderr.
    EXPECT_EQ(std::string::npos, r.out.find("UCX")) << r.out;
    EXPECT_LE(1u, p2ptest::count_of(r.err, "transport 'no_such_transport' is not available"))
        << r.err;
    jsonmini::Value doc;
    jsonmini::Parser p(r.out);
    ASSERT_TRUE(p.parse(&doc)) << p.error() << "\n" << r.out;
    EXPECT_FALSE(doc.at("complete").b);
    EXPECT_EQ(0u, doc.at("results").arr.size());

    // Without a launcher: the variables alone decide.
    const std::string bare = "env -u P2P_RANK -u RANK -u PMIX_RANK -u OMPI_COMM_WORLD_RANK "
                             "-u PMI_RANK -u SLURM_PROCID -u P2P_BOOTSTRAP "
                             "UCX_TLS=no_such_transport";
    const struct {
        const char *vars;
        size_t docs;
    } cases[] = {{"", 1},
                 {"RANK=0", 1},
                 {"RANK=1", 0},
                 {"P2P_RANK=2 RANK=0", 0},
                 {"PMIX_RANK=1", 0},
                 {"OMPI_COMM_WORLD_RANK=3", 0},
                 {"SLURM_PROCID=1", 0},
                 {"SLURM_PROCID=1 RANK=0", 1},  // torchrun's worker 0 inside an srun task
                 {"P2P_BOOTSTRAP=single SLURM_PROCID=1", 1}};
    for (const auto &c : cases) {
        ProcResult one = run(bare + " " + c.vars + " " + tool, 60);
        EXPECT_NE(0, one.rc) << c.vars << ": " << one.err;
        EXPECT_EQ(c.docs, p2ptest::count_of(one.out, "\"tool\": \"p2p_perftest\""))
            << c.vars << ":\n" << one.out;
    }
}

TEST(Perftest, BadCommandLinesFailCleanly) {
    ProcResult help = run(perftest() + " --help", 20);
    EXPECT_EQ(help.rc, 0);
    EXPECT_NE(help.out.find("cuda-managed"), std::string::npos);
    EXPECT_EQ(run(perftest() + " -t nosuchtest", 20).rc, 2);
    EXPECT_EQ(run(perftest() + " -s 8:x", 20).rc, 2);
    EXPECT_EQ(run(perftest() + " -m gpu", 20).rc, 2);
    /* GPU memory with options that touch buffers from the CPU */
    EXPECT_EQ(run(perftest() + " -m cuda --check", 20).rc, 2);
    EXPECT_EQ(run(perftest() + " -m cuda-managed --alloc lib", 20).rc, 2);
    /* GPU memory where there is none: a failed run (1), not a bad option */
    for (const char *m : {" -m cuda", " -m cuda-managed"}) {
        ProcResult none = run(perftest() + m + " -t bw -s 8", 20);
        if (none.err.find(std::string(m + 1) + ":") != std::string::npos) {
            EXPECT_EQ(none.rc, 1) << m << ": " << none.err;
        }  // else a device is here: the 1-rank run is refused (2) as usual
    }
    EXPECT_EQ(run(perftest() + " -W 0", 20).rc, 2);
    EXPECT_EQ(run(perftest() + " --threads single", 20).rc, 2);
    /* past the bounds that keep buffer sizes and counts from overflowing
     * (these crashed, aborted or ran as the default) */
    /* empty list items (",8" crashed) and long options named in the error */
    for (const char *bad : {" -s 8,,16", " -s ,8", " -s ,", " -s 8:", " -t lat,"}) {
        EXPECT_EQ(run(perftest() + bad, 20).rc, 2) << bad;
    }
    ProcResult to = run(perftest() + " --timeout 0", 20);
    EXPECT_EQ(to.rc, 2);
    EXPECT_NE(to.err.find("bad value for --timeout: '0'"), std::string::npos) << to.err;
    /* strtoull takes blanks and a sign: " -1" wrapped to 2^64 - 1 and
     * " -18446744073709551615" to 1, and ran */
    for (const char *bad : {" -n ' -18446744073709551615'", " -s ' -18446744073709551608'",
                            " -W ' -18446744073709551614'", " -w ' 5'", " -p +1K",
                            " -c ' -1'", " -b ' -1x8'"}) {
        ProcResult r = run(perftest() + bad, 20);
        EXPECT_EQ(r.rc, 2) << bad << ": " << r.err;
        EXPECT_NE(r.err.find("bad value for"), std::string::npos) << bad << ": " << r.err;
    }
    /* one output format: the second used to win silently */
    for (const char *both : {" --csv --json", " --json --csv"}) {
        ProcResult r = run(perftest() + both, 20);
        EXPECT_EQ(r.rc, 2) << both;
        EXPECT_NE(r.err.find("--csv and --json exclude each other"), std::string::npos)
            << both << ": " << r.err;
    }
    EXPECT_EQ(run(perftest() + " --csv --csv --help", 20).rc, 0);
    /* -t without its list takes the next option as the list: named as such */
    ProcResult tl = run(perftest() + " -t -s 8", 20);
    EXPECT_EQ(tl.rc, 2);
    EXPECT_NE(tl.err.find("unknown test '-s'"), std::string::npos) << tl.err;
    /* --help says sizes are at most 1T: 1T (and 1024G) parse, 1025G not */
    for (const char *ok : {" -s 1T", " -s 1024G", " -b 2x1T", " -p 1TiB"}) {
        ProcResult r = run(perftest() + ok + " --help", 20);
        EXPECT_EQ(r.rc, 0) << ok << ": " << r.err;
    }
    for (const char *bad : {" -s 2T", " -s 8:2T", " -s 1025G", " -b 4x", " -b x4", " -s 262144G -W 65536 --check",
                            " -s 18446744073709551615", " -b 4x2T", " -p 2T",
                            " -n 100000001", " -n 18446744073709551615",
                            " -w 18446744073709551614", " -w 18446744073709551615"}) {
        ProcResult r = run(perftest() + bad, 20);
        EXPECT_EQ(r.rc, 2) << bad << ": " << r.err;
        EXPECT_NE(r.err.find("bad value for"), std::string::npos) << bad << ": " << r.err;
    }
    /* one process, no launcher: a clear error, not a hang */
    ProcResult single = run("env -u RANK -u WORLD_SIZE -u P2P_RANK -u "
                     "P2P_WORLD_SIZE -u OMPI_COMM_WORLD_SIZE " + perftest() +
                     " -t lat -n 5", 30);
    EXPECT_EQ(single.rc, 2);
    EXPECT_NE(single.err.find("needs at least 2 ranks"), std::string::npos)
        << single.err;
}

// A failure before the bootstrap (no transport UCX can use) names no rank:
// each process said "rank 0", whichever it was.
TEST(Perftest, FailureBeforeTheBootstrapNamesNoRank) {
    if (!have_p2prun()) {
        GTEST_SKIP() << "p2prun not built";
    }
    ProcResult r = run("env UCX_TLS=no_such_transport " + p2prun() +
                           " -n 2 --timeout 60 -- " + perftest() + " -t lat -s 8 -n 10",
                       60);
    EXPECT_NE(0, r.rc) << r.err;
    const std::string all = r.out + r.err;
    EXPECT_NE(std::string::npos,
              all.find("p2p_perftest: p2p_context_create: no usable device or transport"))
        << all;
    EXPECT_EQ(std::string::npos, all.find("rank 0: p2p_context_create")) << all;
}
