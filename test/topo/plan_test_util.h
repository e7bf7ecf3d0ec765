/* Helpers for the rail plan tests: plan, and read a plan's parts. */
#ifndef UCXP2P_TEST_TOPO_PLAN_UTIL_H
#define UCXP2P_TEST_TOPO_PLAN_UTIL_H

#include "topo/rail_plan.h"
#include "topo/topology.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace topo_test {

inline ucxp2p::topo::PlanInput input(uint32_t rank, uint32_t size) {
    ucxp2p::topo::PlanInput in;
    in.local_rank = rank;
    in.local_size = size;
    return in;
}

/** The plan's rails as UCX names them (mlx5_0:1). */
inline std::vector<std::string> names(const ucxp2p::topo::RailPlan &p) {
    std::vector<std::string> out;
    for (const ucxp2p::topo::PlannedNic &n : p.nics) {
        out.push_back(n.ucx_name());
    }
    return out;
}

/** The value the plan gives UCX variable name, "<unset>" when none. */
inline std::string setting(const ucxp2p::topo::RailPlan &p, const std::string &name) {
    for (const auto &kv : p.ucx_settings) {
        if (kv.first == name) {
            return kv.second;
        }
    }
    return "<unset>";
}

/** The first note that holds part, else "". */
inline std::string note_with(const ucxp2p::topo::RailPlan &p, const std::string &part) {
    for (const std::string &n : p.notes) {
        if (n.find(part) != std::string::npos) {
            return n;
        }
    }
    return "";
}

/** Whether a note holds part. */
inline bool has_note(const ucxp2p::topo::RailPlan &p, const std::string &part) {
    return !note_with(p, part).empty();
}

/** The machine an hwloc XML file describes (empty on failure, reported). */
inline ucxp2p::topo::Machine load(const std::string &path) {
    std::unique_ptr<ucxp2p::topo::Topology> t;
    EXPECT_EQ(P2P_OK, ucxp2p::topo::Topology::load(path, &t)) << path;
    return t ? t->machine() : ucxp2p::topo::Machine{};
}

inline ucxp2p::topo::RailPlan plan_ok(const ucxp2p::topo::Machine &m,
                                      const ucxp2p::topo::PlanInput &in) {
    ucxp2p::topo::RailPlan p;
    EXPECT_EQ(P2P_OK, ucxp2p::topo::plan_rails(m, in, &p));
    return p;
}

} // namespace topo_test

#endif
