/*
 * Results of one measurement point and their output as a table, CSV or JSON.
 */
#ifndef UCXP2P_TOOLS_PERFTEST_REPORT_H
#define UCXP2P_TOOLS_PERFTEST_REPORT_H

#include "options.h"
#include "stats.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace perftest {

/** One measured point (one test at one size). Filled on rank 0. */
struct Result {
    std::string test;
    size_t size = 0;              /* bytes per message (block) */
    uint64_t iters = 0;           /* timed iterations */
    uint32_t msgs_per_iter = 1;   /* window / batch count / 1 */
    double time_s = 0;            /* total timed seconds */
    std::vector<double> samples_us; /* per-message latency of each iteration */
    uint64_t bytes_expected = 0;  /* timed payload bytes rank 0 -> rank 1 */
    uint64_t bytes_sent = 0;      /* sum of rank 0's send completions */
    uint64_t bytes_received = 0;  /* sum of rank 1's receive completions */
    uint64_t errors = 0;          /* failed completions + bad payloads */
    /* extra named values (setup, mem); printed as extra columns/fields */
    std::vector<std::pair<std::string, double>> extra;
};

/** Bandwidth from bytes_expected / time_s; 0 when time is 0. */
double result_mbps(const Result &r);   /* 1e6 bytes/s */
double result_mibps(const Result &r);  /* 2^20 bytes/s */
double result_msg_rate(const Result &r);

class Reporter {
public:
    Reporter(const Options &opts, uint32_t world_size, const char *bootstrap);
    /** Print one result as soon as it is known (table/CSV: a row). */
    void add(const Result &r);
    /** Print what must come at the end (JSON document). complete: false
     *  when the run stopped before its last point (JSON "complete"). With
     *  --json, a run ended by SIGTERM, SIGINT or SIGHUP before this
     *  prints the document of the points so far (json_on_signal.h). */
    void finish(bool complete = true);

private:
    void header();
    /** The JSON document of the points so far. */
    std::string document(bool complete) const;
    const Options &opts_;
    uint32_t world_size_;
    std::string bootstrap_;
    bool header_done_ = false;
    std::vector<Result> results_;
};

/** JSON string escaping for the few strings we print. */
std::string json_escape(const std::string &s);

} // namespace perftest

#endif
