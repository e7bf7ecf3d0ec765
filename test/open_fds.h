/*
 * How many descriptors this process has open, for tests that check a call
 * leaves none behind or that size an open file limit.
 */
#ifndef UCXP2P_TEST_OPEN_FDS_H
#define UCXP2P_TEST_OPEN_FDS_H

#include <dirent.h>

namespace p2ptest {

/** Open descriptors, not counting the one this call opens to count them;
 *  -1 when /proc/self/fd cannot be read. */
inline int open_fds() {
    DIR *d = ::opendir("/proc/self/fd");
    if (d == nullptr) return -1;
    int n = -1;  // the directory's own
    while (const dirent *e = ::readdir(d)) {
        n += e->d_name[0] != '.' ? 1 : 0;
    }
    ::closedir(d);
    return n;
}

}  // namespace p2ptest

#endif
