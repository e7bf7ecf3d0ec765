#include "stats.h"

#include <algorithm>

namespace perftest {

double percentile(const std::vector<double> &sorted, unsigned percent) {
    const size_t n = sorted.size();
    // in integers: a double p / 100 * n can land just above a whole rank
    size_t rank = (size_t(percent) * n + 99) / 100;
    rank = std::min(std::max<size_t>(rank, 1), n);
    return sorted[rank - 1];
}

Stats stats_of(std::vector<double> samples) {
    Stats s;
    if (samples.empty()) {
        return s;
    }
    std::sort(samples.begin(), samples.end());
    double sum = 0;
    for (double v : samples) {
        sum += v;
    }
    s.avg = sum / double(samples.size());
    s.min = samples.front();
    s.max = samples.back();
    s.p50 = percentile(samples, 50);
    s.p90 = percentile(samples, 90);
    s.p99 = percentile(samples, 99);
    return s;
}

} // namespace perftest
