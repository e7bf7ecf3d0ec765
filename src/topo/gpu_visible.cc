#include "topo/gpu_visible.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace ucxp2p {
namespace topo {

namespace {

std::string trimmed(const std::string &s) {
    size_t b = 0;
    size_t e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(b, e - b);
}

bool starts_with_nocase(const std::string &s, const char *prefix) {
    size_t i = 0;
    for (; prefix[i] != '\0'; ++i) {
        if (i >= s.size() ||
            std::toupper(static_cast<unsigned char>(s[i])) != prefix[i]) {
            return false;
        }
    }
    return true;
}

/** "(cuda devices 0-3 are gpus 4,5,6,7)" */
std::string cuda_map(const std::vector<size_t> &order) {
    std::string s = order.size() == 1 ? "(cuda device 0 is gpu "
                                      : "(cuda devices 0-" +
                                            std::to_string(order.size() - 1) + " are gpus ";
    for (size_t k = 0; k < order.size(); ++k) {
        s += (k == 0 ? "" : ",") + std::to_string(order[k]);
    }
    return s + ")";
}

} // namespace

VisibleGpus visible_gpus(const Machine &m, const std::optional<std::string> &cuda_visible) {
    VisibleGpus v;
    const size_t total = m.gpus.size();
    const std::string total_s = std::to_string(total);
    if (m.gpus_cuda || !cuda_visible || total == 0) {
        for (size_t i = 0; i < total; ++i) {
            v.order.push_back(i);
        }
        if (m.gpus_cuda && total > 0) {
            v.note = "gpus: the topology's " + total_s + " cuda device(s), in cuda order" +
                     (cuda_visible ? " (CUDA_VISIBLE_DEVICES=" + *cuda_visible +
                                         " applied when hwloc found them)"
                                   : std::string());
        }
        return v;
    }
    const std::string var = cuda_visible->empty()
                                ? std::string("an empty CUDA_VISIBLE_DEVICES")
                                : "CUDA_VISIBLE_DEVICES=" + *cuda_visible;
    size_t pos = 0;
    while (!cuda_visible->empty() && pos <= cuda_visible->size()) {
        size_t comma = std::min(cuda_visible->find(',', pos), cuda_visible->size());
        const std::string e = trimmed(cuda_visible->substr(pos, comma - pos));
        pos = comma + 1;
        if (starts_with_nocase(e, "GPU-") || starts_with_nocase(e, "MIG-")) {
            v.order.clear();
            for (size_t i = 0; i < total; ++i) {
                v.order.push_back(i);
            }
            v.note = "gpus: " + var + " names gpus by uuid or mig id, which cannot be "
                     "matched to pci devices without the cuda driver; planning with "
                     "all " + total_s + " gpus in pci bus order";
            return v;
        }
        if (e.empty() || e.size() > 6 ||
            !std::all_of(e.begin(), e.end(),
                         [](char c) { return c >= '0' && c <= '9'; })) {
            break;  // CUDA ignores the rest of the list too
        }
        size_t idx = std::strtoul(e.c_str(), nullptr, 10);
        if (idx >= total ||
            std::find(v.order.begin(), v.order.end(), idx) != v.order.end()) {
            break;
        }
        v.order.push_back(idx);
    }
    v.note = "gpus: " + std::to_string(v.order.size()) + " of " + total_s +
             " visible through " + var +
             (v.order.empty() ? "; planned as without gpu" : " " + cuda_map(v.order));
    return v;
}

} // namespace topo
} // namespace ucxp2p
