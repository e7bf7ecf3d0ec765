/*
 * The names in a directory, without the dot entries, in readdir order;
 * empty when it cannot be opened. The DIR is closed on every path, a
 * std::bad_alloc from the vector included.
 */
#ifndef UCXP2P_TOPO_DIR_NAMES_H
#define UCXP2P_TOPO_DIR_NAMES_H

#include <dirent.h>

#include <memory>
#include <string>
#include <vector>

namespace ucxp2p {
namespace topo {

inline std::vector<std::string> dir_names(const char *path) {
    std::vector<std::string> names;
    std::unique_ptr<DIR, int (*)(DIR *)> d(opendir(path), closedir);
    if (!d) {
        return names;
    }
    while (const struct dirent *e = readdir(d.get())) {
        if (e->d_name[0] != '.') {
            names.emplace_back(e->d_name);
        }
    }
    return names;
}

} // namespace topo
} // namespace ucxp2p

#endif
