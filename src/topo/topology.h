/*
 * hwloc discovery: RAII owner of an hwloc topology (live machine or XML
 * file) that extracts the plain Machine model of machine.h.
 */
#ifndef UCXP2P_TOPO_TOPOLOGY_H
#define UCXP2P_TOPO_TOPOLOGY_H

#include "topo/machine.h"

#include <ucxp2p/p2p.h>

#include <memory>
#include <string>

namespace ucxp2p {
namespace topo {

class Topology {
public:
    /**
     * Load the live machine (xml_path empty) or an hwloc XML file, with
     * PCI and OS devices. P2P_ERR_UNSUPPORTED when built without hwloc,
     * P2P_ERR_INVALID_PARAM when the file is missing or not hwloc XML.
     */
    static p2p_status_t load(const std::string &xml_path,
                             std::unique_ptr<Topology> *out);

    ~Topology();
    Topology(const Topology &) = delete;
    Topology &operator=(const Topology &) = delete;

    const Machine &machine() const { return machine_; }

    /** This process's CPU binding (live topology only). */
    struct Binding {
        /** NUMA node (OS index) when the binding lies within one node;
         *  -1 otherwise. */
        int numa = -1;
        /** When it covers part of that node: which of the node's
         *  binding-wide slots it takes (its first CPU's position among the
         *  node's CPUs, in hwloc order, over its width). Launchers that bind
         *  each rank to its own cores fill a node's CPUs in rank order
         *  whether they place ranks on nodes in blocks or round-robin, so
         *  this is the rank's position among the ranks on its node. -1:
         *  the whole node, or no binding to one node. */
        int slot = -1;
    };
    Binding binding() const;

private:
    struct Handle;
    explicit Topology(std::unique_ptr<Handle> handle, Machine machine);

    std::unique_ptr<Handle> handle_;
    Machine machine_;
    bool live_ = false;
};

} // namespace topo
} // namespace ucxp2p

#endif
