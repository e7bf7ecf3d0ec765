/*
 * p2p_perftest's statistics and table, in process (stats.cc, table.cc):
 * nearest-rank percentiles pinned to known samples, and rows whose
 * borders line up for the widest values the options accept.
 */
#include "../../tools/perftest/stats.h"
#include "../../tools/perftest/table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace perftest;

std::vector<double> one_to(int n) {
    std::vector<double> v;
    for (int i = 1; i <= n; ++i) {
        v.push_back(i);
    }
    std::shuffle(v.begin(), v.end(), std::mt19937(7));  // stats_of sorts its copy
    return v;
}

/** Every line as wide as the border, with its '|' where the border has
 *  '+' (the row's own columns) or only at both ends (a note line). */
void expect_aligned(const std::vector<std::string> &lines) {
    const std::string border = table_border();
    for (size_t i = 0; i < lines.size(); ++i) {
        const std::string &l = lines[i];
        SCOPED_TRACE(l);
        ASSERT_EQ(border.size(), l.size());
        EXPECT_EQ('|', l.front());
        EXPECT_EQ('|', l.back());
        if (i == 0) {
            for (size_t c = 0; c < border.size(); ++c) {
                EXPECT_EQ(border[c] == '+', l[c] == '|') << "column " << c;
            }
        }
    }
}

TableRow row_of(const char *test, uint64_t size, uint64_t iters, uint64_t window) {
    TableRow r;
    r.test = test;
    r.size = size;
    r.iters = iters;
    r.window = window;
    return r;
}

} // namespace

TEST(PerftestStats, NearestRankPercentiles) {
    Stats s = stats_of(one_to(100));
    EXPECT_DOUBLE_EQ(50.5, s.avg);
    EXPECT_EQ(1, s.min);
    EXPECT_EQ(50, s.p50);
    EXPECT_EQ(90, s.p90);
    EXPECT_EQ(99, s.p99);
    EXPECT_EQ(100, s.max);

    s = stats_of(one_to(10));
    EXPECT_EQ(5, s.p50);
    EXPECT_EQ(9, s.p90);
    EXPECT_EQ(10, s.p99);  // rank ceil(9.9) = 10: a sample, not an interpolation

    s = stats_of(one_to(1000));
    EXPECT_EQ(500, s.p50);
    EXPECT_EQ(900, s.p90);
    EXPECT_EQ(990, s.p99);

    s = stats_of({3.5});
    EXPECT_EQ(3.5, s.avg);
    EXPECT_EQ(3.5, s.min);
    EXPECT_EQ(3.5, s.p50);
    EXPECT_EQ(3.5, s.p99);
    EXPECT_EQ(3.5, s.max);

    s = stats_of({});
    EXPECT_EQ(0, s.avg);
    EXPECT_EQ(0, s.p99);
    EXPECT_EQ(0, s.max);
}

// Every whole rank: ceil(p * n / 100) exactly, for n up to 1000 (in
// doubles, p / 100 * n lands above a whole rank for some p and n).
TEST(PerftestStats, PercentileRankIsExact) {
    for (unsigned n = 1; n <= 1000; ++n) {
        std::vector<double> sorted;
        for (unsigned i = 1; i <= n; ++i) {
            sorted.push_back(i);
        }
        for (unsigned p : {1u, 7u, 50u, 90u, 99u, 100u}) {
            const unsigned rank = std::max(1u, (p * n + 99) / 100);
            ASSERT_EQ(double(rank), percentile(sorted, p)) << "p" << p << " of " << n;
        }
    }
}

TEST(PerftestTable, HeaderAndRowLineUp) {
    const std::vector<std::string> head = table_header();
    ASSERT_EQ(4u, head.size());
    EXPECT_EQ(table_border(), head.front());
    EXPECT_EQ(table_border(), head.back());
    for (const char *col : {"test", "size", "iters", "win", "avg", "min", "p50", "p90", "p99",
                            "MB/s", "MiB/s", "msg/s", "latency (usec/msg)", "bandwidth"}) {
        EXPECT_NE(std::string::npos, (head[1] + head[2]).find(col)) << col;
    }
    expect_aligned({head[1]});
    expect_aligned({head[2]});

    TableRow r = row_of("lat", 8, 1000, 1);
    r.lat = stats_of({1.25, 2.5});
    r.mbps = 6.4;
    r.mibps = 6.1;
    r.msg_rate = 800000;
    const std::vector<std::string> row = table_row(r);
    ASSERT_EQ(1u, row.size());
    expect_aligned(row);
    EXPECT_EQ(0u, row[0].find("| lat   |          8 |      1000 |     1 |    1.875    1.250"))
        << row[0];
    EXPECT_NE(std::string::npos, row[0].find("|       6.4       6.1 |      800000 |")) << row[0];
}

// The widest values the options allow (1 TiB, 10^8 iterations, a 65536
// window) and times or rates no column was sized for keep the borders.
TEST(PerftestTable, WideValuesKeepTheBorders) {
    TableRow r = row_of("batch", uint64_t(1) << 40, 100000000, 65536);
    r.lat.avg = 123456789.0;
    r.lat.min = 0.0004;
    r.lat.p50 = 99999.9996;
    r.lat.p90 = 1e12;
    r.lat.p99 = 12345.678;
    r.mbps = 1e10;
    r.mibps = 123456.78;
    r.msg_rate = 1e15;
    const std::vector<std::string> row = table_row(r);
    ASSERT_EQ(1u, row.size());
    expect_aligned(row);
    EXPECT_NE(std::string::npos, row[0].find(" 1.00T |")) << row[0];
    EXPECT_NE(std::string::npos, row[0].find(" 100000000 |")) << row[0];
    EXPECT_NE(std::string::npos, row[0].find(" 65536 |")) << row[0];
    EXPECT_NE(std::string::npos, row[0].find(" 12345.68 ")) << row[0];  // fewer decimals

    EXPECT_EQ("9999999999", fit_bytes(9999999999ull, 10));
    EXPECT_EQ("9.31G", fit_bytes(10000000000ull, 10));
    EXPECT_EQ("1.500", fit_fixed(1.5, 8, 3));
    EXPECT_EQ("12345.68", fit_fixed(12345.678, 8, 3));
    EXPECT_EQ("99999999", fit_fixed(99999999.4, 8, 3));
    EXPECT_EQ("1.23e+08", fit_fixed(123456789.0, 8, 3));
}

// setup's and mem's named values, and a point's errors, go on lines of
// their own inside the border, every value whole and in order.
TEST(PerftestTable, ExtrasAndErrorsWrapInsideTheBorder) {
    TableRow r = row_of("setup", 8, 50, 1);
    std::string expected_words;
    for (int i = 0; i < 12; ++i) {
        const std::string key = "value_number_" + std::to_string(i) + "_us";
        r.extra.emplace_back(key, i + 0.5);
        expected_words += (i ? " " : "") + key + "=" + std::to_string(i) + ".500";
    }
    r.errors = 3;
    expected_words += " ERRORS=3";
    const std::vector<std::string> lines = table_row(r);
    ASSERT_GE(lines.size(), 3u);
    expect_aligned(lines);
    std::string words;
    for (size_t i = 1; i < lines.size(); ++i) {
        EXPECT_EQ(0u, lines[i].find("|       | ")) << lines[i];
        std::string inner = lines[i].substr(10, lines[i].size() - 12);
        inner.erase(inner.find_last_not_of(' ') + 1);
        words += (words.empty() ? "" : " ") + inner;
    }
    EXPECT_EQ(expected_words, words);
}
