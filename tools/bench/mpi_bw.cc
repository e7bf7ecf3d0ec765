/*
 * mpi_bw: the MPI baseline of tools/bench/run_baseline.py. Same methodology
 * as p2p_perftest so ratios compare like with like:
 *   lat   ping-pong, latency = round trip / 2
 *   bw    rank 0 posts a window of W MPI_Isend, rank 1 W MPI_Irecv (the
 *         next window's receives are posted before the 8-byte ack), rank 0
 *         waits for all sends and the ack; bandwidth = bytes / total time
 *   batch same as bw with the window = batch count (128 x 512 KiB)
 *   rate  as ucx_perftest tag_bw and p2p_perftest's rate: rank 0 streams
 *         messages with at most W MPI_Isend in flight, rank 1 keeps W
 *         MPI_Irecv posted (reposting one per completed receive); one 8-byte
 *         ack after the last message ends a phase (warm-up, then timed)
 * Buffers: one per rank reused (default) or a rotating pool (-p BYTES).
 * Prints CSV with p2p_perftest's columns. Built by the runner with mpicxx,
 * not by configure (the library does not depend on MPI).
 */
#define OMPI_SKIP_MPICXX 1 /* C API only; avoids the C++ bindings */
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Opts {
    std::string test = "bw";
    std::vector<size_t> sizes{65536};
    long iters = 100;
    long warmup = 10;
    int window = 64;
    size_t pool = 0;
};

size_t parse_size(const char *t) {
    char *end = nullptr;
    double v = std::strtod(t, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024; break;
    case 'm': case 'M': v *= 1024 * 1024; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
    default: break;
    }
    return static_cast<size_t>(v);
}

/* "8:4M" doubling or "8,64,1K" */
std::vector<size_t> parse_sizes(const std::string &text) {
    std::vector<size_t> out;
    size_t colon = text.find(':');
    if (colon != std::string::npos) {
        size_t lo = parse_size(text.substr(0, colon).c_str());
        size_t hi = parse_size(text.substr(colon + 1).c_str());
        for (size_t v = std::max<size_t>(lo, 1); v <= hi; v *= 2) {
            out.push_back(v);
        }
        return out;
    }
    size_t start = 0;
    while (start <= text.size()) {
        size_t comma = text.find(',', start);
        std::string item = text.substr(start, comma == std::string::npos
                                                  ? std::string::npos
                                                  : comma - start);
        if (!item.empty()) {
            out.push_back(parse_size(item.c_str()));
        }
        if (comma == std::string::npos) {
            break;
        }
        start = comma + 1;
    }
    return out;
}

void usage() {
    std::printf("usage: mpi_bw [-t lat|bw|batch|rate] [-s SIZES] [-n ITERS] "
                "[-w WARMUP] [-W WINDOW] [-p POOL_BYTES]\n(exactly 2 ranks)\n");
}

bool parse(int argc, char **argv, Opts *o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "-h") {
            return false;
        }
        if (i + 1 >= argc) {
            return false;
        }
        const char *v = argv[++i];
        if (a == "-t") o->test = v;
        else if (a == "-s") o->sizes = parse_sizes(v);
        else if (a == "-n") o->iters = std::atol(v);
        else if (a == "-w") o->warmup = std::atol(v);
        else if (a == "-W") o->window = std::atoi(v);
        else if (a == "-p") o->pool = parse_size(v);
        else return false;
    }
    return o->iters > 0 && o->window > 0 && !o->sizes.empty() &&
           (o->test == "lat" || o->test == "bw" || o->test == "batch" ||
            o->test == "rate");
}

double pct(std::vector<double> v, double p) {
    if (v.empty()) {
        return 0;
    }
    std::sort(v.begin(), v.end());
    size_t r = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
    return v[std::min(std::max<size_t>(r, 1), v.size()) - 1];
}

void print_row(const Opts &o, size_t size, int count, double time_s,
               const std::vector<double> &samples, uint64_t bytes) {
    double sum = 0;
    for (double s : samples) {
        sum += s;
    }
    double avg = samples.empty() ? 0 : sum / samples.size();
    std::printf("%s,%zu,%ld,%d,%.6f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.2f,%.2f,"
                "%.1f,%llu,%llu,%llu,0,impl=mpi\n",
                o.test.c_str(), size, o.iters, count, time_s, avg,
                pct(samples, 0), pct(samples, 50), pct(samples, 90),
                pct(samples, 99), pct(samples, 100), bytes / time_s / 1e6,
                bytes / time_s / 1048576.0,
                double(o.iters) * count / time_s, (unsigned long long)bytes,
                (unsigned long long)bytes, (unsigned long long)bytes);
    std::fflush(stdout);
}

/** One streamed phase of messages [first, first + count) (see rate). */
void stream_phase(const Opts &o, int rank, size_t size, char *pool,
                  size_t nslots, long first, long count,
                  std::vector<double> *samples) {
    const int w = o.window;
    const size_t stride = std::max<size_t>((size + 63) / 64 * 64, 64);
    const int n = static_cast<int>(size);
    const int peer = 1 - rank;
    std::vector<MPI_Request> req(w, MPI_REQUEST_NULL);
    auto slot = [&](long m) { return pool + (m % nslots) * stride; };
    char ack[8] = {0};
    if (rank == 0) {
        MPI_Request ack_req;
        MPI_Irecv(ack, 8, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &ack_req);
        double t_mark = MPI_Wtime();
        for (long m = first; m < first + count; ++m) {
            MPI_Request &r = req[m % w];
            MPI_Wait(&r, MPI_STATUS_IGNORE); /* its slot's previous send */
            MPI_Isend(slot(m), n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &r);
            if (samples != nullptr && (m + 1 - first) % w == 0) {
                double t = MPI_Wtime();
                samples->push_back((t - t_mark) * 1e6 / w);
                t_mark = t;
            }
        }
        MPI_Waitall(w, req.data(), MPI_STATUSES_IGNORE);
        MPI_Wait(&ack_req, MPI_STATUS_IGNORE);
        return;
    }
    const long end = first + count;
    for (long m = first; m < std::min(end, first + w); ++m) {
        MPI_Irecv(slot(m), n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &req[m % w]);
    }
    /* MPI does not overtake: the receives complete in message order */
    for (long m = first; m < end; ++m) {
        MPI_Wait(&req[m % w], MPI_STATUS_IGNORE);
        if (m + w < end) {
            MPI_Irecv(slot(m + w), n, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                      &req[m % w]);
        }
    }
    MPI_Send(ack, 8, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
}

void run_rate(const Opts &o, int rank, size_t size, char *pool,
              size_t nslots) {
    std::vector<double> samples;
    MPI_Barrier(MPI_COMM_WORLD);
    stream_phase(o, rank, size, pool, nslots, 0, o.warmup * o.window,
                 nullptr);
    double t_start = MPI_Wtime();
    stream_phase(o, rank, size, pool, nslots, o.warmup * o.window,
                 o.iters * o.window, &samples);
    double t_end = MPI_Wtime();
    if (rank == 0) {
        print_row(o, size, o.window, t_end - t_start, samples,
                  uint64_t(size) * o.window * o.iters);
    }
}

void run_point(const Opts &o, int rank, size_t size, char *pool,
               size_t nslots) {
    if (o.test == "rate") {
        run_rate(o, rank, size, pool, nslots);
        return;
    }
    const bool lat = (o.test == "lat");
    const int count = lat ? 1 : o.window;
    const size_t stride = std::max<size_t>((size + 63) / 64 * 64, 64);
    const int peer = 1 - rank;
    std::vector<MPI_Request> req(count);
    std::vector<double> samples;
    char ack[8] = {0};
    MPI_Request ack_req;
    auto slot = [&](uint64_t m) { return pool + (m % nslots) * stride; };
    const int n = static_cast<int>(size);

    MPI_Barrier(MPI_COMM_WORLD);
    double t_start = 0, total_lat = 0;
    if (!lat && rank == 1) {
        for (int j = 0; j < count; ++j) {
            MPI_Irecv(slot(j), n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &req[j]);
        }
    }
    for (long i = 0; i < o.warmup + o.iters; ++i) {
        if (i == o.warmup) {
            t_start = MPI_Wtime();
        }
        double t0 = MPI_Wtime();
        if (lat) {
            char *b = slot(i);
            if (rank == 0) {
                MPI_Send(b, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(b, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                double half = (MPI_Wtime() - t0) / 2 * 1e6;
                if (i >= o.warmup) {
                    samples.push_back(half);
                    total_lat += half;
                }
            } else {
                MPI_Recv(b, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                MPI_Send(b, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            }
            continue;
        }
        if (rank == 0) {
            MPI_Irecv(ack, 8, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &ack_req);
            for (int j = 0; j < count; ++j) {
                MPI_Isend(slot(i * count + j), n, MPI_BYTE, peer, 1,
                          MPI_COMM_WORLD, &req[j]);
            }
            MPI_Waitall(count, req.data(), MPI_STATUSES_IGNORE);
            MPI_Wait(&ack_req, MPI_STATUS_IGNORE);
            if (i >= o.warmup) {
                samples.push_back((MPI_Wtime() - t0) * 1e6 / count);
            }
        } else {
            MPI_Waitall(count, req.data(), MPI_STATUSES_IGNORE);
            if (i + 1 < o.warmup + o.iters) {
                for (int j = 0; j < count; ++j) {
                    MPI_Irecv(slot((i + 1) * count + j), n, MPI_BYTE, peer, 1,
                              MPI_COMM_WORLD, &req[j]);
                }
            }
            MPI_Send(ack, 8, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
        }
    }
    double t_end = MPI_Wtime();
    if (rank == 0) {
        double time_s = lat ? total_lat / 1e6 : t_end - t_start;
        print_row(o, size, count, time_s, samples,
                  uint64_t(size) * count * o.iters);
    }
}

} // namespace

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    Opts o;
    if (!parse(argc, argv, &o) || size != 2) {
        if (rank == 0) {
            usage();
        }
        MPI_Finalize();
        return 2;
    }
    size_t max_size = *std::max_element(o.sizes.begin(), o.sizes.end());
    size_t stride = std::max<size_t>((max_size + 63) / 64 * 64, 64);
    size_t bytes = std::max(o.pool, stride);
    char *pool = nullptr;
    if (posix_memalign(reinterpret_cast<void **>(&pool), 4096, bytes) != 0) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::memset(pool, 1, bytes);
    if (rank == 0) {
        std::printf("test,size,iterations,msgs_per_iter,time_s,lat_avg_us,"
                    "lat_min_us,lat_p50_us,lat_p90_us,lat_p99_us,lat_max_us,"
                    "bw_MBps,bw_MiBps,msg_rate,bytes_expected,bytes_sent,"
                    "bytes_received,errors,extra\n");
    }
    for (size_t s : o.sizes) {
        size_t st = std::max<size_t>((s + 63) / 64 * 64, 64);
        size_t nslots = o.pool ? std::max<size_t>(o.pool / st, 1) : 1;
        run_point(o, rank, s, pool, nslots);
    }
    std::free(pool);
    MPI_Finalize();
    return 0;
}
