// The README's configuration table must name every P2P_* variable of the
// config table, so the documentation cannot silently fall behind the code.
#include "core/config.h"

#include "../top_dirs.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

TEST(Docs, ReadmeListsEveryVariable) {
    const std::string dir = p2ptest::top_srcdir();
    std::ifstream f(dir + "/README.md");
    ASSERT_TRUE(f.good()) << "cannot read " << dir << "/README.md";
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string readme = ss.str();
    for (const ucxp2p::ConfigVar *v = ucxp2p::config_table(); v->name != nullptr; ++v) {
        EXPECT_NE(std::string::npos, readme.find(std::string("`") + v->name))
            << v->name << " is missing from README.md's configuration table";
    }
}
