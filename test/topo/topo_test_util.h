/* Helpers for the topo tests: fixture paths and fake sysfs trees. */
#ifndef UCXP2P_TEST_TOPO_UTIL_H
#define UCXP2P_TEST_TOPO_UTIL_H

#include "../temp_dir.h"
#include "../top_dirs.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace topo_test {

inline std::string srcdir() { return p2ptest::top_srcdir(); }

inline std::string builddir() { return p2ptest::top_builddir(); }

inline std::string fixture(const std::string &name) {
    return srcdir() + "/test/topo/fixtures/" + name;
}

/** Real machine XML from ../shared (CI clones it beside the repo). */
inline std::string shared_xml(const std::string &name) {
    return srcdir() + "/../shared/data/topology/" + name;
}

inline bool exists(const std::string &path) {
    return std::filesystem::exists(path);
}

#define SKIP_UNLESS_SHARED(path)                                               \
    do {                                                                       \
        if (!topo_test::exists(path)) {                                        \
            GTEST_SKIP() << "shared topology " << (path)                       \
                         << " absent (clone shared/ beside the repo)";         \
        }                                                                      \
    } while (0)

using p2ptest::TempDir;

/** One GID slot of DEV port PORT in a fake sysfs tree. type "" leaves the
 *  type file out (as the kernel does for an unused slot). */
inline void add_gid(const TempDir &d, const std::string &dev, int port, int index,
                    const std::string &gid, const std::string &type,
                    const std::string &ndev) {
    std::string base = dev + "/ports/" + std::to_string(port) + "/";
    std::string k = std::to_string(index);
    d.write(base + "gids/" + k, gid);
    if (!type.empty()) {
        d.write(base + "gid_attrs/types/" + k, type);
    }
    if (!ndev.empty()) {
        d.write(base + "gid_attrs/ndevs/" + k, ndev);
    }
}

inline void add_port(const TempDir &d, const std::string &dev, int port,
                     const std::string &link_layer, const std::string &state) {
    std::string base = dev + "/ports/" + std::to_string(port) + "/";
    d.write(base + "link_layer", link_layer);
    d.write(base + "state", state);
}

/** One RoCE port (ACTIVE unless state says otherwise) with one RoCE v2
 *  GID. */
inline void add_roce_port(const TempDir &d, const char *dev, unsigned port,
                          unsigned gid_index, const char *gid,
                          const char *state = "4: ACTIVE") {
    add_port(d, dev, port, "Ethernet", state);
    add_gid(d, dev, port, gid_index, gid, "RoCE v2", "eth" + std::to_string(port));
}

constexpr const char *kZeroGid = "0000:0000:0000:0000:0000:0000:0000:0000";

} // namespace topo_test

#endif
