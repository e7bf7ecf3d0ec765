/*
 * What the tools (p2p_perftest, p2p_demo) check buffers against before
 * touching them: a buffer larger than the machine can hold fills it until
 * the kernel's OOM killer ends a rank, or another process.
 */
#ifndef UCXP2P_TOOLS_COMMON_MEMINFO_H
#define UCXP2P_TOOLS_COMMON_MEMINFO_H

#include <cstdint>
#include <cstdio>

#include <unistd.h>

namespace p2ptools {

/** MemAvailable of /proc/meminfo in bytes; else the physical memory; 0
 *  when neither is known. */
inline uint64_t memory_available() {
    FILE *f = std::fopen("/proc/meminfo", "r");
    if (f != nullptr) {
        char line[256];
        unsigned long long kb = 0;
        bool found = false;
        while (!found && std::fgets(line, sizeof(line), f) != nullptr) {
            found = std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
        }
        std::fclose(f);
        if (found) {
            return kb * 1024;
        }
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return (pages > 0 && page > 0) ? uint64_t(pages) * uint64_t(page) : 0;
}

} // namespace p2ptools

#endif
