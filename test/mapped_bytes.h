/*
 * How much address space this process maps, for tests that check a call
 * leaves no mapping behind.
 */
#ifndef UCXP2P_TEST_MAPPED_BYTES_H
#define UCXP2P_TEST_MAPPED_BYTES_H

#include <unistd.h>

#include <cstddef>
#include <fstream>

namespace p2ptest {

/** Bytes of address space mapped now (VmSize); 0 when unreadable. */
inline size_t mapped_bytes() {
    std::ifstream f("/proc/self/statm");
    size_t pages = 0;
    f >> pages;
    return pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace p2ptest

#endif
