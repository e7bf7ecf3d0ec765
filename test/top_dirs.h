/*
 * Where the tests find the tree: $P2P_TOP_SRCDIR / $P2P_TOP_BUILDDIR (make
 * check sets both; so can a run from elsewhere), else the configure-time
 * paths test/Makefile.include compiles in. An empty variable counts as unset.
 */
#ifndef UCXP2P_TEST_TOP_DIRS_H
#define UCXP2P_TEST_TOP_DIRS_H

#include <cstdlib>
#include <string>

namespace p2ptest {

namespace detail {
inline std::string env_or(const char *name, const char *fallback) {
    const char *v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : fallback;
}
}  // namespace detail

inline std::string top_srcdir() { return detail::env_or("P2P_TOP_SRCDIR", P2P_TOP_SRCDIR); }

inline std::string top_builddir() {
    return detail::env_or("P2P_TOP_BUILDDIR", P2P_TOP_BUILDDIR);
}

}  // namespace p2ptest

#endif
