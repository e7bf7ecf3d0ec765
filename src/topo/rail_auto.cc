#include "topo/rail_auto.h"

#include <algorithm>
#include <sstream>

namespace ucxp2p {
namespace topo {

namespace {

/** Indexes [j*n/g, (j+1)*n/g) of pool when there are at least as many NICs
 *  as ranks sharing them, else the one NIC pool[j % n]. */
std::vector<size_t> slice(const std::vector<size_t> &pool, size_t j, size_t g) {
    std::vector<size_t> out;
    size_t n = pool.size();
    if (n == 0 || g == 0) {
        return out;
    }
    if (n >= g) {
        for (size_t k = j * n / g; k < (j + 1) * n / g; ++k) {
            out.push_back(pool[k]);
        }
    } else {
        out.push_back(pool[j % n]);
    }
    return out;
}

std::string join_names(const std::vector<Nic> &nics, const std::vector<size_t> &idx) {
    std::string s;
    for (size_t i : idx) {
        s += (s.empty() ? "" : ",") + nics[i].name;
    }
    return s;
}

/** Candidates nearest the GPU: indexes of cands with the longest common
 *  PCIe ancestry. */
std::vector<size_t> nearest(const PciDevice &dev, const std::vector<Nic> &cands,
                            size_t *affinity_p) {
    size_t best = 0;
    for (const Nic &n : cands) {
        best = std::max(best, pci_affinity(dev, n.pci));
    }
    std::vector<size_t> out;
    for (size_t i = 0; i < cands.size(); ++i) {
        if (pci_affinity(dev, cands[i].pci) == best) {
            out.push_back(i);
        }
    }
    *affinity_p = best;
    return out;
}

/**
 * A rank bound to NUMA node in.binding_numa: its position j among the g
 * local ranks bound there. Launchers place ranks on nodes in blocks (srun's
 * default, mpirun --map-by core) or round-robin (mpirun's default above two
 * ranks, --map-by numa or socket); the local rank alone tells which only
 * where just one of the two puts this rank on its node. Where both do, the
 * rank's cores decide: a launcher that binds each rank to its own cores
 * fills the node in rank order either way (in.binding_slot); without that
 * (each rank bound to the whole node, or a slot past the node's rank count)
 * block placement is assumed. Only there: ranks the user bound to the same
 * cores all have slot 0, and where neither placement fits (a binding of
 * the user's own) the local rank spreads them.
 */
void bound_position(const Machine &m, const PlanInput &in, size_t *j_p, size_t *g_p,
                    std::ostringstream &os) {
    const size_t nodes = std::max<size_t>(1, m.numa_nodes.size());
    const size_t r = in.local_rank;
    const size_t n = std::max<uint32_t>(1, in.local_size);
    size_t k = std::find(m.numa_nodes.begin(), m.numa_nodes.end(), in.binding_numa) -
               m.numa_nodes.begin();
    k = std::min(k, nodes - 1);
    // Block: node k holds local ranks [first, end).
    const size_t first = (k * n + nodes - 1) / nodes;
    const size_t end = ((k + 1) * n + nodes - 1) / nodes;
    const bool block = r >= first && r < end;
    // Round-robin: node k holds the local ranks k, k + nodes, ...
    const bool rr = r % nodes == k;
    const size_t rr_count = (n + nodes - 1 - k) / nodes;
    size_t g = block ? end - first : rr ? rr_count : n / nodes;
    g = std::max<size_t>(1, g);
    size_t j;
    const char *how;
    if (block && rr && in.binding_slot >= 0 && static_cast<size_t>(in.binding_slot) < g) {
        j = static_cast<size_t>(in.binding_slot);
        how = "position of its cores";
    } else if (block) {
        j = r - first;
        how = "block placement";
    } else if (rr) {
        j = r / nodes;
        how = "round-robin placement";
    } else {
        j = r % g;
        how = "local rank";
    }
    os << "bound to numa " << in.binding_numa << " (" << how << ": rank " << j + 1
       << " of " << g << " there)";
    *j_p = j;
    *g_p = g;
}

} // namespace

AutoResult plan_with_gpu(const Machine &m, const std::vector<Nic> &cands,
                         size_t gpu, const std::vector<size_t> &gpus,
                         uint32_t local_rank) {
    AutoResult r;
    const Gpu &g = m.gpus[gpu];
    size_t aff = 0;
    std::vector<size_t> near = nearest(g.pci, cands, &aff);
    std::vector<size_t> peers;   // GPUs with the same nearest set
    for (size_t k : gpus) {
        size_t a;
        if (nearest(m.gpus[k].pci, cands, &a) == near) {
            peers.push_back(k);
        }
    }
    size_t pos = std::find(peers.begin(), peers.end(), gpu) - peers.begin();
    r.share = slice(near, pos, peers.size());

    const char *where = "no pcie locality known";
    if (aff > g.pci.cpu_depth && aff > 0) {
        where = "same pcie switch";
    } else if (g.pci.numa >= 0 && cands[near[0]].pci.numa == g.pci.numa) {
        where = "same numa node";
    } else if (aff > 0) {
        where = "other numa node";
    }
    std::ostringstream os;
    os << "gpu " << g.name << " (numa " << g.pci.numa << "): nearest nics "
       << join_names(cands, near) << " (" << where << ") shared by "
       << peers.size() << " gpu(s); this gpu takes " << join_names(cands, r.share);
    r.reason = os.str();

    // Order for P2P_RAILS=N: own share, then by closeness, spreading ranks.
    std::vector<size_t> rest;
    for (size_t i = 0; i < cands.size(); ++i) {
        if (std::find(r.share.begin(), r.share.end(), i) == r.share.end()) {
            rest.push_back(i);
        }
    }
    size_t n = cands.size();
    std::stable_sort(rest.begin(), rest.end(), [&](size_t a, size_t b) {
        size_t aa = pci_affinity(g.pci, cands[a].pci);
        size_t ab = pci_affinity(g.pci, cands[b].pci);
        if (aa != ab) return aa > ab;
        return (a + n - local_rank % n) % n < (b + n - local_rank % n) % n;
    });
    r.order = r.share;
    r.order.insert(r.order.end(), rest.begin(), rest.end());
    return r;
}

AutoResult plan_without_gpu(const Machine &m, const std::vector<Nic> &cands,
                            const PlanInput &in, int numa) {
    AutoResult r;
    std::vector<size_t> pool;
    for (size_t i = 0; i < cands.size(); ++i) {
        if (numa >= 0 && cands[i].pci.numa == numa) {
            pool.push_back(i);
        }
    }
    size_t j;
    size_t g;
    std::ostringstream os;
    os << "no gpu; ";
    if (pool.empty()) {
        for (size_t i = 0; i < cands.size(); ++i) {
            pool.push_back(i);
        }
        j = in.local_rank;
        g = in.local_size;
        os << "numa " << numa << " has no rdma nic, local ranks spread over all "
           << cands.size() << " nics";
    } else {
        size_t nodes = std::max<size_t>(1, m.numa_nodes.size());
        if (in.binding_numa >= 0) {
            bound_position(m, in, &j, &g, os);
        } else {
            // Ranks are spread over NUMA nodes in blocks: find ours.
            size_t node = in.local_rank * nodes / in.local_size;
            size_t first = (node * in.local_size + nodes - 1) / nodes;
            size_t end = ((node + 1) * in.local_size + nodes - 1) / nodes;
            j = in.local_rank - first;
            g = std::max<size_t>(1, end - first);
            os << "local rank placed on numa " << numa;
        }
        os << ", " << g << " rank(s) share its nics " << join_names(cands, pool);
    }
    r.share = slice(pool, j, g);
    os << "; this rank takes " << join_names(cands, r.share);
    r.reason = os.str();
    r.order = r.share;
    for (size_t i : pool) {
        if (std::find(r.order.begin(), r.order.end(), i) == r.order.end()) {
            r.order.push_back(i);
        }
    }
    for (size_t i = 0; i < cands.size(); ++i) {
        if (std::find(r.order.begin(), r.order.end(), i) == r.order.end()) {
            r.order.push_back(i);
        }
    }
    return r;
}

} // namespace topo
} // namespace ucxp2p
