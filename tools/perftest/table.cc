#include "table.h"

#include <cstdio>

namespace perftest {

namespace {

constexpr int kTest = 5, kSize = 10, kIters = 9, kWin = 5, kLat = 8, kBw = 9, kRate = 11;

std::string pad_left(const std::string &s, int width) {
    return s.size() >= size_t(width) ? s : std::string(size_t(width) - s.size(), ' ') + s;
}

std::string pad_right(const std::string &s, int width) {
    return s.size() >= size_t(width) ? s : s + std::string(size_t(width) - s.size(), ' ');
}

std::string dashes(int n) {
    return std::string(size_t(n) + 2, '-');
}

/** "%.*f" of v. */
std::string fixed(double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
    return buf;
}

/** The latency cells, one string: 5 columns of kLat. */
constexpr int kLatBlock = 5 * kLat + 4;
/** The bandwidth cells: 2 columns of kBw. */
constexpr int kBwBlock = 2 * kBw + 1;

/** Cells between "|", each padded to its width. */
std::string line(const std::vector<std::pair<std::string, int>> &cells, bool left_first) {
    std::string out = "|";
    for (size_t i = 0; i < cells.size(); ++i) {
        const auto &c = cells[i];
        out += ' ';
        out += (i == 0 && left_first) ? pad_right(c.first, c.second) : pad_left(c.first, c.second);
        out += " |";
    }
    return out;
}

/** Text after a row, inside the border: "|       | <words> ... |". */
std::vector<std::string> note_lines(const std::string &words) {
    const int inner = int(table_border().size()) - (kTest + 4) - 3;
    std::vector<std::string> out;
    std::string cur;
    size_t at = 0;
    while (at < words.size()) {
        size_t end = words.find(' ', at);
        if (end == std::string::npos) {
            end = words.size();
        }
        const std::string word = words.substr(at, end - at);
        at = end + 1;
        if (!cur.empty() && cur.size() + 1 + word.size() > size_t(inner)) {
            out.push_back(cur);
            cur.clear();
        }
        cur += (cur.empty() ? "" : " ") + word;
    }
    if (!cur.empty()) {
        out.push_back(cur);
    }
    for (std::string &l : out) {
        l = "| " + std::string(kTest, ' ') + " | " + pad_right(l, inner) + " |";
    }
    return out;
}

} // namespace

std::string fit_fixed(double v, int width, int max_decimals) {
    for (int d = max_decimals; d >= 0; --d) {
        std::string s = fixed(v, d);
        if (s.size() <= size_t(width)) {
            return s;
        }
    }
    char buf[64];
    for (int d = width - 6; d >= 0; --d) {  // "1.5e+09": 5 characters past the mantissa's
        std::snprintf(buf, sizeof(buf), "%.*e", d, v);
        if (std::string(buf).size() <= size_t(width)) {
            return buf;
        }
    }
    std::snprintf(buf, sizeof(buf), "%.0e", v);
    return buf;
}

std::string fit_bytes(uint64_t v, int width) {
    std::string s = std::to_string(v);
    if (s.size() <= size_t(width)) {
        return s;
    }
    const char *units = "KMGT";
    double x = double(v);
    for (int u = 0; u < 4; ++u) {
        x /= 1024.0;
        if (x < 1024.0 || u == 3) {
            return fit_fixed(x, width - 1, 2) + units[u];
        }
    }
    return s;
}

std::string table_border() {
    return "+" + dashes(kTest) + "+" + dashes(kSize) + "+" + dashes(kIters) + "+" + dashes(kWin) +
           "+" + dashes(kLatBlock) + "+" + dashes(kBwBlock) + "+" + dashes(kRate) + "+";
}

std::vector<std::string> table_header() {
    const std::string lat = pad_left("latency (usec/msg)", (kLatBlock + 18) / 2);
    return {table_border(),
            line({{"", kTest}, {"", kSize}, {"", kIters}, {"", kWin},
                  {pad_right(lat, kLatBlock), kLatBlock}, {pad_right("bandwidth", kBwBlock), kBwBlock},
                  {"", kRate}},
                 true),
            line({{"test", kTest}, {"size", kSize}, {"iters", kIters}, {"win", kWin},
                  {pad_left("avg", kLat) + " " + pad_left("min", kLat) + " " +
                       pad_left("p50", kLat) + " " + pad_left("p90", kLat) + " " +
                       pad_left("p99", kLat),
                   kLatBlock},
                  {pad_left("MB/s", kBw) + " " + pad_left("MiB/s", kBw), kBwBlock},
                  {"msg/s", kRate}},
                 true),
            table_border()};
}

std::vector<std::string> table_row(const TableRow &r) {
    std::string lat;
    for (double v : {r.lat.avg, r.lat.min, r.lat.p50, r.lat.p90, r.lat.p99}) {
        lat += (lat.empty() ? "" : " ") + pad_left(fit_fixed(v, kLat, 3), kLat);
    }
    const std::string bw = pad_left(fit_fixed(r.mbps, kBw, 1), kBw) + " " +
                           pad_left(fit_fixed(r.mibps, kBw, 1), kBw);
    std::vector<std::string> out = {
        line({{r.test, kTest},
              {fit_bytes(r.size, kSize), kSize},
              {fit_fixed(double(r.iters), kIters, 0), kIters},
              {fit_fixed(double(r.window), kWin, 0), kWin},
              {lat, kLatBlock},
              {bw, kBwBlock},
              {fit_fixed(r.msg_rate, kRate, 0), kRate}},
             true)};
    std::string notes;
    for (const auto &e : r.extra) {
        notes += (notes.empty() ? "" : " ") + e.first + "=" + fixed(e.second, 3);
    }
    if (r.errors != 0) {
        notes += (notes.empty() ? "" : " ") + std::string("ERRORS=") + std::to_string(r.errors);
    }
    for (std::string &l : note_lines(notes)) {
        out.push_back(std::move(l));
    }
    return out;
}

} // namespace perftest
