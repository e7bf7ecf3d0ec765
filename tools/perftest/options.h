/*
 * p2p_perftest command line: what to measure and how to print it.
 * Parsing is separate from measuring so it can be read (and tested) alone.
 */
#ifndef UCXP2P_TOOLS_PERFTEST_OPTIONS_H
#define UCXP2P_TOOLS_PERFTEST_OPTIONS_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace perftest {

enum class Format { TABLE, CSV, JSON };

struct Options {
    std::vector<std::string> tests;   /* lat, bw, batch, rate, setup, mem */
    std::vector<size_t> sizes;        /* empty: per-test default */
    uint64_t iters = 0;               /* 0: per-test/per-size default */
    uint64_t warmup = UINT64_MAX;     /* UINT64_MAX: default (iters / 10) */
    uint32_t window = 64;             /* messages in flight (bw, rate) */
    uint32_t batch_count = 128;       /* blocks per batch call */
    size_t batch_size = 512 * 1024;   /* bytes per block */
    bool batch_size_given = false;    /* -b COUNTxSIZE: SIZE wins over -s */
    size_t pool_bytes = 0;            /* 0: reuse one buffer; else rotate */
    bool use_wait = false;            /* p2p_comm_wait instead of poll loop */
    bool check = false;               /* fill and verify payloads */
    bool quiet = false;               /* no progress on stderr */
    double timeout_s = 60.0;          /* bound on one measurement point */
    uint32_t comms = 8;               /* communicators for the mem test */
    Format format = Format::TABLE;
    std::string mem_type = "host";
    bool lib_alloc = false;           /* buffers from p2p_mem_alloc */
    bool post_batch = false;          /* rate: post with the batch calls */
    /* --threads: "multi" or "serialized" (p2p_config_t.thread_mode);
     * empty: P2P_THREAD_MODE decides */
    std::string threads;
    /** The thread mode in effect: --threads, else P2P_THREAD_MODE, else
     *  multi (for the report header). */
    std::string threads_in_effect() const;
};

/**
 * Parse argv into *opts. Returns 0 to run, 1 when help/version was printed
 * (exit 0), -1 on a bad argument, -2 when -m names memory this build or
 * machine does not have (exit 1); messages already printed to stderr.
 */
int options_parse(int argc, char **argv, Options *opts);

/** Parse "8:4M" (doubling), "1K:1M:4" (factor 4), "8,64,1K" or mixes
 *  separated by commas. Returns false on a malformed list. */
bool parse_size_list(const std::string &text, std::vector<size_t> *out);

/** Parse "512K", "4M", "1G", "1T", "100" (binary multipliers; at most 1T). */
bool parse_size(const std::string &text, size_t *out);

void options_usage(const char *prog);

} // namespace perftest

#endif
