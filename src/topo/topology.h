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

    /** NUMA node of this process's CPU binding when it lies within one
     *  node (live topology only); -1 otherwise. */
    int binding_numa() const;

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
