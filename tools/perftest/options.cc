#include "options.h"
#include "gpu_mem.h"

#include <ucxp2p/p2p.h>

#include <cerrno>
#include <cstdio>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <getopt.h>
#include <sstream>

namespace perftest {

namespace {

const char *const kAllTests[] = {"lat", "bw", "batch", "rate", "setup", "mem"};

bool known_test(const std::string &t) {
    for (const char *k : kAllTests) {
        if (t == k) {
            return true;
        }
    }
    return false;
}

/* strtoull skips leading blanks and takes a sign (" -1" is 2^64 - 1):
 * a number here starts with a digit. */
bool starts_with_digit(const char *text) {
    return text != nullptr && std::isdigit(static_cast<unsigned char>(*text)) != 0;
}

bool parse_u64(const char *text, uint64_t *out) {
    if (!starts_with_digit(text)) {
        return false;
    }
    char *end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0') {
        return false;
    }
    *out = v;
    return true;
}

/* Bounds that keep the perftest's own arithmetic (buffer sizes, counts,
 * one latency sample per iteration) far from overflow. */
constexpr uint64_t kMaxBytes = uint64_t(1) << 40;  /* 1 TiB */
constexpr uint64_t kMaxIters = 100000000;

bool parse_iters(const char *text, uint64_t *out) {
    uint64_t v;
    if (!parse_u64(text, &v) || v > kMaxIters) {
        return false;
    }
    *out = v;
    return true;
}

/** Every field, empty ones included ("8,,16" has three; "," two): an
 *  empty field is then refused by its parser, not skipped or crashed on. */
std::vector<std::string> split(const std::string &s, char sep) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t at = s.find(sep); at != std::string::npos; at = s.find(sep, start)) {
        parts.push_back(s.substr(start, at - start));
        start = at + 1;
    }
    parts.push_back(s.substr(start));
    return parts;
}

} // namespace

bool parse_size(const std::string &text, size_t *out) {
    if (!starts_with_digit(text.c_str())) {
        return false;
    }
    char *end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (errno != 0 || end == text.c_str()) {
        return false;
    }
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'B': break;  /* "8B": taken below */
    case 'k': case 'K': shift = 10; ++end; break;
    case 'm': case 'M': shift = 20; ++end; break;
    case 'g': case 'G': shift = 30; ++end; break;
    case 't': case 'T': shift = 40; ++end; break;
    default: return false;
    }
    if (*end == 'i' || *end == 'B' || *end == 'b') { /* "KiB", "KB" */
        end += (*end == 'i') ? 1 : 0;
        if (*end == 'B' || *end == 'b') {
            ++end;
        }
    }
    if (*end != '\0' || (shift != 0 && (v >> (64 - shift)) != 0) ||
        (v << shift) > kMaxBytes) {
        return false;
    }
    *out = static_cast<size_t>(v << shift);
    return true;
}

bool parse_size_list(const std::string &text, std::vector<size_t> *out) {
    std::vector<size_t> sizes;
    for (const std::string &item : split(text, ',')) {
        std::vector<std::string> range = split(item, ':');
        if (range.size() == 1) {
            size_t v;
            if (!parse_size(range[0], &v)) {
                return false;
            }
            sizes.push_back(v);
            continue;
        }
        size_t lo, hi, factor = 2;
        if (range.size() > 3 || !parse_size(range[0], &lo) ||
            !parse_size(range[1], &hi) || lo == 0 || lo > hi ||
            (range.size() == 3 &&
             (!parse_size(range[2], &factor) || factor < 2))) {
            return false;
        }
        size_t last = 0;
        for (size_t v = lo; v <= hi; v *= factor) {
            sizes.push_back(v);
            last = v;
            if (v > SIZE_MAX / factor) {
                break;
            }
        }
        if (last < hi) {
            sizes.push_back(hi);  // the bound itself, where no step lands on it
        }
    }
    if (sizes.empty()) {
        return false;
    }
    *out = sizes;
    return true;
}

void options_usage(const char *prog) {
    std::printf(
        "Usage: %s [options]\n"
        "Point-to-point benchmark of libucxp2p (ucx_perftest-style).\n"
        "Start it with 2 or more ranks under p2prun, mpirun or srun; the\n"
        "bootstrap is P2P_BOOTSTRAP_AUTO. Ranks 0 and 1 measure, rank 0\n"
        "prints; other ranks idle (they only join the collective tests).\n"
        "\n"
        "Tests (-t, comma separated; default lat,bw):\n"
        "  lat    ping-pong; latency = round trip / 2\n"
        "  bw     window of W messages in flight, then a 8-byte ack\n"
        "  batch  one p2p_comm_send_batch/recv_batch of COUNT blocks per\n"
        "         iteration, then an ack (default 128x512K)\n"
        "  rate   messages/s as ucx_perftest tag_bw measures it: the\n"
        "         sender streams with at most W sends in flight, the\n"
        "         receiver keeps W receives posted, one ack at the end\n"
        "         (default size 8)\n"
        "  setup  p2p_comm_create time (after context init) and time to\n"
        "         the first message round trip on the new communicator\n"
        "  mem    RSS and pinned (VmPin) bytes added per communicator and\n"
        "         per connected peer (all ranks take part)\n"
        "\n"
        "Options:\n"
        "  -t LIST        tests to run\n"
        "  -s LIST        sizes: 8:4M (doubling), 1K:1M:4 (factor 4),\n"
        "                 8,64,1K or mixes; a range ends at its bound\n"
        "                 (3:100: 3 6 ... 96 100). Default: lat 8, bw 8:4M,\n"
        "                 rate 8, batch its block size (see -b). Sizes\n"
        "                 take K, M, G, T (powers of 1024); -s, -b, -p are\n"
        "                 at most 1T; 0 is a zero-byte message, a range\n"
        "                 starts at 1 or more\n"
        "  -n N           timed iterations per point (default: scaled by\n"
        "                 size, see docs/PERFORMANCE.md); at most 10^8\n"
        "  -w N           warm-up iterations (default n/10, at least 2);\n"
        "                 at most 10^8\n"
        "  -W N           window: messages in flight for bw/rate (64, at\n"
        "                 most 65536); bw's iteration is one window, rate's\n"
        "                 W messages\n"
        "  -b COUNT[xSIZE] batch shape, e.g. 128x512K (default; COUNT at\n"
        "                 most 65536). A SIZE given here is batch's\n"
        "                 block size even with -s\n"
        "                 (-s then sizes the other tests); -b COUNT alone:\n"
        "                 batch runs at the -s sizes (default 512K)\n"
        "  -p BYTES       rotating buffer pool of BYTES (e.g. 1G) so\n"
        "                 cache effects show; default 0 = reuse one buffer\n"
        "                 per rank for every message (like ucx_perftest)\n"
        "  -m TYPE        memory of the data buffers: host (default), cuda\n"
        "                 (cudaMalloc; moved by a UCX built with CUDA,\n"
        "                 else staged through host memory) or cuda-managed\n"
        "                 (cudaMallocManaged); GPU types need a CUDA build\n"
        "                 and a device, and exclude --check and --alloc lib\n"
        "  -c N           communicators created by the mem test (8, at\n"
        "                 most 200)\n"
        "  --alloc HOW    user: posix_memalign + p2p_mem_register (the\n"
        "                 default: buffers an application brings); lib:\n"
        "                 p2p_mem_alloc (shareable, NUMA-placed; like\n"
        "                 ucx_perftest's UCX-allocated buffers)\n"
        "  --wait         complete with p2p_comm_wait instead of a\n"
        "                 p2p_comm_poll busy loop (the default)\n"
        "  --post-batch   rate: post with p2p_comm_send_batch/recv_batch,\n"
        "                 the sender every free window slot in one call,\n"
        "                 the receiver all receives one poll completed\n"
        "                 (extra column blocks_per_post: rank 0's average)\n"
        "  --threads MODE multi (default) or serialized: the context's\n"
        "                 thread mode (P2P_THREAD_MODE); serialized has no\n"
        "                 progress thread and no per-message locks\n"
        "  --check        fill payloads and verify them on receipt\n"
        "                 (slower; for correctness runs); a fault in\n"
        "                 the warm-up fails the point too; rate then\n"
        "                 uses W slots, whatever -p says\n"
        "  --timeout SEC  bound on one measurement point, whole seconds\n"
        "                 1 to 86400 (60)\n"
        "  --csv          print CSV instead of a table\n"
        "  --json         print JSON instead of a table (under p2prun, give it\n"
        "                 --no-prefix for either: its [RANK] prefixes parse as neither)\n"
        "  -q, --quiet    no progress lines on stderr\n"
        "  -h, --help     this text;  -V, --version  library version\n"
        "\n"
        "Exit status: 0; 1 when the run failed or a point has errors (a\n"
        "payload --check found wrong, or bytes moved other than the\n"
        "bytes_expected its rates are computed from; setup and mem: any\n"
        "rank's totals; -m cuda* where this build or machine has no CUDA\n"
        "device); 2 bad command line, fewer than 2 ranks, or ranks\n"
        "started with different options.\n"
        "\n"
        "Units: MB/s = 1e6 bytes/s, MiB/s = 2^20 bytes/s. Latency columns\n"
        "are microseconds per message (bw/rate/batch: iteration time /\n"
        "messages per iteration; rate: per window of W sends, the first\n"
        "window's posts left out unless it is the only one, the final\n"
        "drain and ack in).\n",
        prog);
}

std::string Options::threads_in_effect() const {
    if (!threads.empty()) return threads;
    const char *e = std::getenv("P2P_THREAD_MODE");
    if (e == nullptr || *e == '\0') return "multi";
    std::string mode(e);  // the library takes any case: report one spelling
    for (char &c : mode) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return mode;
}

int options_parse(int argc, char **argv, Options *opts) {
    enum { OPT_WAIT = 256, OPT_CHECK, OPT_TIMEOUT, OPT_CSV, OPT_JSON, OPT_ALLOC,
           OPT_POST_BATCH, OPT_THREADS };
    static const struct option kLong[] = {
        {"wait", no_argument, nullptr, OPT_WAIT},
        {"check", no_argument, nullptr, OPT_CHECK},
        {"timeout", required_argument, nullptr, OPT_TIMEOUT},
        {"csv", no_argument, nullptr, OPT_CSV},
        {"json", no_argument, nullptr, OPT_JSON},
        {"alloc", required_argument, nullptr, OPT_ALLOC},
        {"post-batch", no_argument, nullptr, OPT_POST_BATCH},
        {"threads", required_argument, nullptr, OPT_THREADS},
        {"quiet", no_argument, nullptr, 'q'},
        {"help", no_argument, nullptr, 'h'},
        {"version", no_argument, nullptr, 'V'},
        {nullptr, 0, nullptr, 0}};
    Options o;
    std::string tests = "lat,bw";
    // Not argv[0]: in a build tree that is libtool's .libs/ path; the
    // runtime's messages say p2p_perftest too.
    const char *prog = "p2p_perftest";
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "t:s:n:w:W:b:p:m:c:qhV", kLong,
                            nullptr)) != -1) {
        bool ok = true;
        uint64_t v = 0;
        switch (c) {
        case 't': tests = optarg; break;
        case 's': ok = parse_size_list(optarg, &o.sizes); break;
        case 'n': ok = parse_iters(optarg, &o.iters) && o.iters > 0; break;
        case 'w': ok = parse_iters(optarg, &o.warmup); break;
        case 'W':
            ok = parse_u64(optarg, &v) && v > 0 && v <= 65536;
            o.window = static_cast<uint32_t>(v);
            break;
        case 'b': {
            /* COUNT or COUNTxSIZE: a SIZE given here is the batch's block
             * size even when -s lists others (those are for the other
             * tests); without one, batch sweeps -s (default 512K) */
            std::vector<std::string> p = split(optarg, 'x');
            size_t bytes = Options().batch_size;
            ok = (p.size() == 1 || p.size() == 2) && parse_u64(p[0].c_str(), &v) &&
                 v > 0 && v <= 65536 && (p.size() == 1 || parse_size(p[1], &bytes));
            o.batch_count = static_cast<uint32_t>(v);
            o.batch_size = bytes;
            o.batch_size_given = p.size() == 2;
            break;
        }
        case 'p': ok = parse_size(optarg, &o.pool_bytes); break;
        case 'm':
            o.mem_type = optarg;
            ok = known_mem_type(o.mem_type);
            break;
        case 'c':
            ok = parse_u64(optarg, &v) && v > 0 && v <= 200;
            o.comms = static_cast<uint32_t>(v);
            break;
        case OPT_WAIT: o.use_wait = true; break;
        case OPT_ALLOC:
            ok = std::strcmp(optarg, "user") == 0 || std::strcmp(optarg, "lib") == 0;
            o.lib_alloc = std::strcmp(optarg, "lib") == 0;
            break;
        case OPT_CHECK: o.check = true; break;
        case OPT_POST_BATCH: o.post_batch = true; break;
        case OPT_THREADS:
            ok = std::strcmp(optarg, "multi") == 0 || std::strcmp(optarg, "serialized") == 0;
            o.threads = optarg;
            break;
        case OPT_TIMEOUT:
            ok = parse_u64(optarg, &v) && v > 0 && v <= 86400;
            o.timeout_s = static_cast<double>(v);
            break;
        case OPT_CSV:
        case OPT_JSON: {
            const Format f = c == OPT_CSV ? Format::CSV : Format::JSON;
            if (o.format != Format::TABLE && o.format != f) {
                std::fprintf(stderr, "%s: --csv and --json exclude each other\n", prog);
                return -1;
            }
            o.format = f;
            break;
        }
        case 'q': o.quiet = true; break;
        case 'h': options_usage(prog); return 1;
        case 'V': std::printf("p2p_perftest (ucxp2p %s)\n", p2p_version());
            return 1;
        default: return -1; /* getopt printed the reason */
        }
        if (!ok) {
            std::string name = std::string("-") + static_cast<char>(c);
            for (const struct option *l = kLong; c >= 256 && l->name != nullptr; ++l) {
                if (l->val == c) name = std::string("--") + l->name;
            }
            std::fprintf(stderr, "%s: bad value for %s: '%s' (--help gives what it takes)\n",
                         prog, name.c_str(), optarg ? optarg : "");
            return -1;
        }
    }
    for (const std::string &t : split(tests, ',')) {
        if (!known_test(t)) {
            std::fprintf(stderr, "%s: unknown test '%s' (lat, bw, batch, "
                         "rate, setup, mem)\n", prog, t.c_str());
            return -1;
        }
        o.tests.push_back(t);
    }
    if (optind < argc) {
        std::fprintf(stderr, "%s: unexpected argument '%s'\n", prog,
                     argv[optind]);
        return -1;
    }
    if (o.tests.empty()) {
        std::fprintf(stderr, "%s: no test given\n", prog);
        return -1;
    }
    if (o.mem_type != "host" && (o.check || o.lib_alloc)) {
        std::fprintf(stderr, "%s: -m %s: %s needs host memory\n", prog,
                     o.mem_type.c_str(), o.check ? "--check" : "--alloc lib");
        return -1;
    }
    std::string why;
    if (!mem_type_usable(o.mem_type, &why)) {
        std::fprintf(stderr, "%s: -m %s: %s\n", prog, o.mem_type.c_str(), why.c_str());
        return -2;  // a machine (or build) without the memory, not a bad option
    }
    *opts = o;
    return 0;
}

} // namespace perftest
