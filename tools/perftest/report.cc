#include "report.h"

#include "doc_out.h"
#include "json_on_signal.h"
#include "table.h"

#include <ucxp2p/p2p.h>

#include <cstdarg>
#include <cstdio>
#include <ctime>

namespace perftest {

namespace {

const char *kCsvHeader =
    "test,size,iterations,msgs_per_iter,time_s,lat_avg_us,lat_min_us,"
    "lat_p50_us,lat_p90_us,lat_p99_us,lat_max_us,bw_MBps,bw_MiBps,msg_rate,"
    "bytes_expected,bytes_sent,bytes_received,errors,extra";

std::string extra_text(const Result &r, char kv, char sep) {
    std::string s;
    char buf[96];
    for (const auto &e : r.extra) {
        std::snprintf(buf, sizeof(buf), "%s%c%.3f", e.first.c_str(), kv,
                      e.second);
        if (!s.empty()) {
            s += sep;
        }
        s += buf;
    }
    return s;
}

/** printf onto the end of *out. */
__attribute__((format(printf, 2, 3))) void appendf(std::string *out, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[512];
    va_list again;
    va_copy(again, ap);
    const int n = std::vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n >= 0 && static_cast<size_t>(n) < sizeof(small)) {
        out->append(small, static_cast<size_t>(n));
    } else if (n >= 0) {
        const size_t at = out->size();
        out->resize(at + static_cast<size_t>(n) + 1);
        std::vsnprintf(&(*out)[at], static_cast<size_t>(n) + 1, fmt, again);
        out->resize(at + static_cast<size_t>(n));
    }
    va_end(again);
}

} // namespace

double result_mbps(const Result &r) {
    return r.time_s > 0 ? r.bytes_expected / r.time_s / 1e6 : 0.0;
}

double result_mibps(const Result &r) {
    return r.time_s > 0 ? r.bytes_expected / r.time_s / 1048576.0 : 0.0;
}

double result_msg_rate(const Result &r) {
    return r.time_s > 0 ? double(r.iters) * r.msgs_per_iter / r.time_s : 0.0;
}

std::string json_escape(const std::string &s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            out += buf;
        } else {
            out += c;
        }
    }
    return out;
}

Reporter::Reporter(const Options &opts, uint32_t world_size,
                   const char *bootstrap)
    : opts_(opts), world_size_(world_size), bootstrap_(bootstrap) {
    if (opts_.format == Format::JSON) {
        json_on_signal::keep(document(false));  // a run ended by a signal
    }
}

void Reporter::header() {
    if (header_done_) {
        return;
    }
    header_done_ = true;
    if (opts_.format == Format::CSV) {
        std::fprintf(doc_out::stream(), "%s\n", kCsvHeader);
    } else if (opts_.format == Format::TABLE) {
        std::fprintf(doc_out::stream(), "# p2p_perftest (ucxp2p %s) ranks=%u bootstrap=%s "
                    "completion=%s buffers=%s mem=%s alloc=%s posts=%s threads=%s\n",
                    p2p_version(), world_size_, bootstrap_.c_str(),
                    opts_.use_wait ? "wait" : "poll",
                    opts_.pool_bytes ? "pool" : "reuse", opts_.mem_type.c_str(),
                    opts_.lib_alloc ? "lib" : "user",
                    opts_.post_batch ? "batch" : "single",
                    opts_.threads_in_effect().c_str());
        for (const std::string &l : table_header()) {
            std::fprintf(doc_out::stream(), "%s\n", l.c_str());
        }
    }
    std::fflush(doc_out::stream());
}

void Reporter::add(const Result &r) {
    header();
    results_.push_back(r);
    if (opts_.format == Format::JSON) {
        json_on_signal::keep(document(false));
    }
    Stats s = stats_of(r.samples_us);
    if (opts_.format == Format::CSV) {
        std::fprintf(doc_out::stream(), "%s,%zu,%llu,%u,%.9g,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,"
                    "%.2f,%.2f,%.1f,%llu,%llu,%llu,%llu,%s\n",
                    r.test.c_str(), r.size, (unsigned long long)r.iters,
                    r.msgs_per_iter, r.time_s, s.avg, s.min, s.p50, s.p90,
                    s.p99, s.max, result_mbps(r), result_mibps(r),
                    result_msg_rate(r), (unsigned long long)r.bytes_expected,
                    (unsigned long long)r.bytes_sent,
                    (unsigned long long)r.bytes_received,
                    (unsigned long long)r.errors,
                    extra_text(r, '=', ';').c_str());
    } else if (opts_.format == Format::TABLE) {
        TableRow row;
        row.test = r.test;
        row.size = r.size;
        row.iters = r.iters;
        row.window = r.msgs_per_iter;
        row.lat = s;
        row.mbps = result_mbps(r);
        row.mibps = result_mibps(r);
        row.msg_rate = result_msg_rate(r);
        row.extra = r.extra;
        row.errors = r.errors;
        for (const std::string &l : table_row(row)) {
            std::fprintf(doc_out::stream(), "%s\n", l.c_str());
        }
    }
    std::fflush(doc_out::stream());
}

void Reporter::finish(bool complete) {
    if (opts_.format == Format::TABLE && header_done_) {
        std::fprintf(doc_out::stream(), "%s\n", table_border().c_str());
    }
    if (opts_.format != Format::JSON) {
        std::fflush(doc_out::stream());
        return;
    }
    json_on_signal::print_final(document(complete));
}

std::string Reporter::document(bool complete) const {
    std::string d;
    appendf(&d, "{\n  \"tool\": \"p2p_perftest\",\n  \"version\": \"%s\",\n"
                "  \"timestamp\": %lld,\n  \"ranks\": %u,\n"
                "  \"bootstrap\": \"%s\",\n  \"completion\": \"%s\",\n"
                "  \"buffers\": \"%s\",\n  \"pool_bytes\": %zu,\n  \"mem_type\": \"%s\",\n"
                "  \"alloc\": \"%s\",\n  \"posts\": \"%s\",\n  \"threads\": \"%s\",\n"
                "  \"window\": %u,\n"
                "  \"check\": %s,\n  \"complete\": %s,\n  \"results\": [",
                json_escape(p2p_version()).c_str(),
                (long long)std::time(nullptr), world_size_,
                json_escape(bootstrap_).c_str(),
                opts_.use_wait ? "wait" : "poll",
                opts_.pool_bytes ? "pool" : "reuse", opts_.pool_bytes,
                json_escape(opts_.mem_type).c_str(), opts_.lib_alloc ? "lib" : "user", opts_.post_batch ? "batch" : "single",
                json_escape(opts_.threads_in_effect()).c_str(), opts_.window, opts_.check ? "true" : "false",
                complete ? "true" : "false");
    for (size_t i = 0; i < results_.size(); ++i) {
        const Result &r = results_[i];
        Stats s = stats_of(r.samples_us);
        appendf(&d, "%s\n    {\"test\": \"%s\", \"size\": %zu, "
                    "\"iterations\": %llu, \"msgs_per_iter\": %u, "
                    "\"time_s\": %.10g,\n     \"latency_us\": {\"avg\": %.10g, "
                    "\"min\": %.10g, \"p50\": %.10g, \"p90\": %.10g, "
                    "\"p99\": %.10g, \"max\": %.10g},\n"
                    "     \"bw_MBps\": %.10g, \"bw_MiBps\": %.10g, "
                    "\"msg_rate\": %.10g,\n     \"bytes_expected\": %llu, "
                    "\"bytes_sent\": %llu, \"bytes_received\": %llu, "
                    "\"errors\": %llu",
                    i ? "," : "", json_escape(r.test).c_str(), r.size,
                    (unsigned long long)r.iters, r.msgs_per_iter, r.time_s,
                    s.avg, s.min, s.p50, s.p90, s.p99, s.max, result_mbps(r),
                    result_mibps(r), result_msg_rate(r),
                    (unsigned long long)r.bytes_expected,
                    (unsigned long long)r.bytes_sent,
                    (unsigned long long)r.bytes_received,
                    (unsigned long long)r.errors);
        appendf(&d, ",\n     \"extra\": {");
        for (size_t k = 0; k < r.extra.size(); ++k) {
            appendf(&d, "%s\"%s\": %.10g", k ? ", " : "",
                        json_escape(r.extra[k].first).c_str(),
                        r.extra[k].second);
        }
        appendf(&d, "}}");
    }
    appendf(&d, "\n  ]\n}\n");
    return d;
}


} // namespace perftest
