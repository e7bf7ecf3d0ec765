/*
 * Statistics of a point's latency samples: average, minimum, nearest-rank
 * percentiles and maximum.
 */
#ifndef UCXP2P_TOOLS_PERFTEST_STATS_H
#define UCXP2P_TOOLS_PERFTEST_STATS_H

#include <vector>

namespace perftest {

struct Stats {
    double avg = 0, min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};

/** Statistics of a sample list, in any order (empty: all zero). The
 *  percentiles are nearest-rank: the smallest sample with at least p% of
 *  the samples at or below it, always one of the samples (p50 of 1..10 is
 *  5, p99 of 1..100 is 99, p99 of 1..10 is 10). */
Stats stats_of(std::vector<double> samples);

/** Nearest-rank percentile of sorted, non-empty samples: the sample of
 *  rank ceil(percent * n / 100), at least 1 (percent 1..100). */
double percentile(const std::vector<double> &sorted, unsigned percent);

} // namespace perftest

#endif
