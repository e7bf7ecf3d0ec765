/*
 * p2p_perftest's default output: a table like ucx_perftest's, one row per
 * point, printed as each point ends (so its columns have fixed widths).
 * A value wider than its column is shown with fewer decimals, then with a
 * unit or an exponent, so the borders stay aligned for any size the
 * options accept (up to 1 TiB) and any time. A point's named extras (setup,
 * mem) and its error count follow the row, wrapped inside the border.
 */
#ifndef UCXP2P_TOOLS_PERFTEST_TABLE_H
#define UCXP2P_TOOLS_PERFTEST_TABLE_H

#include "stats.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace perftest {

struct TableRow {
    std::string test;
    uint64_t size = 0, iters = 0, window = 0;
    Stats lat;
    double mbps = 0, mibps = 0, msg_rate = 0;
    std::vector<std::pair<std::string, double>> extra;
    uint64_t errors = 0;
};

/** The border line (also the table's last line). */
std::string table_border();
/** The column titles: three lines, the border around them included. */
std::vector<std::string> table_header();
/** One point: its row, then its extras and errors, if any, on lines of
 *  the same width. */
std::vector<std::string> table_row(const TableRow &r);

/** v in at most width characters: with up to max_decimals decimals, fewer
 *  where it does not fit, else in exponent form. */
std::string fit_fixed(double v, int width, int max_decimals);
/** A byte count in at most width characters: in bytes, else in KiB..TiB
 *  with a K/M/G/T suffix (as -s accepts). */
std::string fit_bytes(uint64_t v, int width);

} // namespace perftest

#endif
