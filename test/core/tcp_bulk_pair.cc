/*
 * The tcp path's Server and Client (core/tcp_bulk.h) alone, between two
 * processes on loopback: how fast reads of one offered buffer go, with no
 * UCX, progress thread or rendezvous around them. A diagnostic, not a
 * test (docs/PERFORMANCE.md 2026-11-29 22:30: the buffer's page offset
 * decided the rate until the server padded its headers); not built by
 * configure or make check:
 *
 *   g++ -O2 -std=c++17 -Isrc -Iinclude test/core/tcp_bulk_pair.cc -o /tmp/tcp_bulk_pair \
 *       .libs/libp2pcore.a -lucp -luct -lucs -lhwloc -lpmix -lpthread -ldl
 *   taskset -c 0 /tmp/tcp_bulk_pair serve FILE SIZE OFFSET &
 *   taskset -c 1 /tmp/tcp_bulk_pair read FILE SIZE OFFSET LANES COUNT
 *
 * serve offers SIZE bytes starting OFFSET bytes past a page boundary,
 * writes its address to FILE and serves until a reader has read (it exits
 * when FILE is removed); read reads the whole buffer COUNT times over
 * LANES connections into a buffer at the same page offset, prints MiB/s
 * and removes FILE.
 */
#include "core/tcp_bulk.h"

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace ucxp2p;

namespace {

struct Published {
    tcpb::Address addr;
    uint64_t buffer;
};

char *at_offset(std::vector<char> &mem, size_t offset) {
    uintptr_t a = reinterpret_cast<uintptr_t>(mem.data());
    a = (a + 4095) / 4096 * 4096 + offset;
    return reinterpret_cast<char *>(a);
}

int usage() {
    std::fprintf(stderr, "usage: tcp_bulk_pair serve FILE SIZE OFFSET\n"
                         "       tcp_bulk_pair read FILE SIZE OFFSET LANES COUNT\n");
    return 2;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 5) return usage();
    const std::string mode = argv[1], file = argv[2];
    const size_t size = std::strtoull(argv[3], nullptr, 0);
    const size_t offset = std::strtoull(argv[4], nullptr, 0);
    if (size == 0 || offset >= 4096) return usage();
    std::vector<char> mem(size + 8192, 1);
    char *buf = at_offset(mem, offset);
    if (mode == "serve" && argc == 5) {
        int err = 0;
        std::unique_ptr<tcpb::Server> s = tcpb::Server::start(10000, &err);
        if (!s) {
            std::fprintf(stderr, "tcp_bulk_pair: server: %s\n", std::strerror(err));
            return 1;
        }
        s->offer(1, buf, size);
        Published p = {s->address(), reinterpret_cast<uintptr_t>(buf)};
        const std::string tmp = file + ".tmp";
        FILE *f = std::fopen(tmp.c_str(), "wb");
        if (f == nullptr || std::fwrite(&p, sizeof(p), 1, f) != 1 || std::fclose(f) != 0 ||
            std::rename(tmp.c_str(), file.c_str()) != 0) {
            std::perror("tcp_bulk_pair: publish");
            return 1;
        }
        while (access(file.c_str(), F_OK) == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return 0;
    }
    if (mode != "read" || argc != 7) return usage();
    const unsigned lanes = static_cast<unsigned>(std::atoi(argv[5]));
    const long count = std::atol(argv[6]);
    if (lanes < 1 || lanes > tcpb::Client::kMaxLanes || count < 1) return usage();
    Published p{};
    for (int tries = 0;; ++tries) {  // the server may start late: 10 s
        FILE *f = std::fopen(file.c_str(), "rb");
        const bool got = f != nullptr && std::fread(&p, sizeof(p), 1, f) == 1;
        if (f != nullptr) std::fclose(f);
        if (got) break;
        if (tries == 200) {
            std::fprintf(stderr, "tcp_bulk_pair: no server published %s\n", file.c_str());
            return 1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    tcpb::Client c(p.addr, /*same_host=*/true, lanes, 10000);
    int rc = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < count; ++i) {
        int err = 0;
        if (c.read(1, p.buffer, 0, size, buf, &err) != cma::ReadResult::OK) {
            std::fprintf(stderr, "tcp_bulk_pair: read %ld failed: %s\n", i, std::strerror(err));
            rc = 1;
            break;
        }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rc == 0) std::printf("%.1f MiB/s\n", double(size) * count / s / 1048576.0);
    std::remove(file.c_str());
    return rc;
}
