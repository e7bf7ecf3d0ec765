/*
 * Per-size path choice for same-host sends. See core/path_choice.h.
 */
#include "core/path_choice.h"

#include <algorithm>
#include <cstdint>

namespace ucxp2p {

PathChooser::PathChooser(const Band &band)
    : min_shift_(band.min_shift),
      nclasses_(std::max(1, std::min(band.classes, kMaxClasses))),
      min_bytes_(size_t(1) << band.min_shift),
      max_bytes_(band.open_top ? SIZE_MAX : size_t(1) << (band.min_shift + nclasses_)),
      span_bytes_(static_cast<double>(band.span_bytes)),
      warm_spans_(band.warm_spans),
      max_rate_(band.max_rate) {
    for (Class &c : classes_) {
        c.use = c.bpath = band.initial;
        c.until_probe = band.first_probe;
    }
}

int PathChooser::class_of(size_t len) const {
    int c = 0;
    while (c + 1 < nclasses_ && len >= (size_t(1) << (min_shift_ + c + 1))) {
        ++c;
    }
    return c;
}

uint32_t PathChooser::block_sends(size_t len) {
    const uint64_t n = (kBlockBytes + len - 1) / len;
    return n < kMinBlockSends ? kMinBlockSends : static_cast<uint32_t>(n);
}

void PathChooser::give_up_probe(Class &c) {
    c.probe = false;
    c.interval = std::min(c.interval * kIntervalGrowth, kMaxInterval);
    c.until_probe = c.interval;
}

PathChooser::Pick PathChooser::pick(size_t len, int64_t now_ns) {
    if (len < min_bytes_) return {kUcx, false, 0, 0, false};
    if (len >= max_bytes_) return {kSingleCopy, false, 0, 0, false};
    Class &c = classes_[class_of(len)];
    bool starts_probe = false;
    if (c.bsends == 0) {  // a block starts: its path
        if (!c.probe && c.until_probe == 0 && c.rate[c.use] > 0) {
            starts_probe = true;
            c.probe = true;  // due, and there is a rate to beat
            c.probe_sends = 0;
            c.span[other(c.use)] = Span{};
        }
        c.bpath = c.probe ? other(c.use) : c.use;
        c.bstart_ns = now_ns;
        c.bbytes = 0;
    }
    if (c.probe) {
        if (++c.probe_sends >= kMaxProbeSends) give_up_probe(c);
    } else if (c.until_probe > 0) {
        --c.until_probe;
    }
    Pick r{c.bpath, false, c.bstart_ns, 0, starts_probe};
    c.bbytes += len;
    if (++c.bsends >= kMinBlockSends && c.bbytes >= kBlockBytes) {
        r.ends_block = true;
        r.block_bytes = c.bbytes;
        c.bsends = 0;
    }
    return r;
}

bool PathChooser::decide(Class &c, double *from_rate, double *to_rate) {
    const Path o = other(c.use);
    c.probe = false;
    const double cur = c.rate[c.use];
    const bool faster = cur > 0 && c.rate[o] > cur * kSwitchMargin;
    if (from_rate != nullptr) *from_rate = cur;
    if (to_rate != nullptr) *to_rate = c.rate[o];
    if (faster) {
        c.use = o;
        c.interval = kMinInterval;
    } else {
        c.interval = std::min(c.interval * kIntervalGrowth, kMaxInterval);
    }
    c.until_probe = c.interval;
    return faster;
}

bool PathChooser::measure(Span &sp, int64_t block_start_ns, uint64_t block_bytes,
                          int64_t now_ns, bool ok, double *rate) {
    if (!ok) {
        sp = Span{};
        return false;
    }
    if (sp.start_ns == INT64_MIN) {
        sp.start_ns = sp.last_end_ns = now_ns;
        return false;
    }
    // Closer than kBurstNs, or than the block's bytes take at max_rate_:
    // still the burst of the last end.
    int64_t burst_ns = kBurstNs;
    if (max_rate_ > 0) {
        burst_ns = std::max(burst_ns, static_cast<int64_t>(static_cast<double>(block_bytes) /
                                                           max_rate_));
    }
    const bool new_burst = now_ns - sp.last_end_ns > burst_ns;
    bool complete = false;
    if (new_burst && sp.bytes >= span_bytes_) {
        // The span ends with the burst before this end.
        const double ns = static_cast<double>(sp.last_end_ns - sp.start_ns) - sp.idle_ns;
        if (ns > 0) {
            *rate = sp.bytes / ns;
            complete = true;
        }
        const int64_t from = sp.last_end_ns;
        sp = Span{};
        sp.start_ns = sp.last_end_ns = from;
    }
    if (block_start_ns > sp.last_end_ns) {  // nothing was in flight meanwhile
        sp.idle_ns += static_cast<double>(block_start_ns - sp.last_end_ns);
    }
    if (sp.bytes == 0 && !new_burst) {
        sp.start_ns = now_ns;  // still the burst the span starts after
        sp.idle_ns = 0;
    } else {
        sp.bytes += static_cast<double>(block_bytes);
    }
    sp.last_end_ns = std::max(sp.last_end_ns, now_ns);
    return complete;
}

bool PathChooser::done(size_t len, Path path, int64_t block_start_ns,
                       uint64_t block_bytes, int64_t now_ns, bool ok,
                       double *from_rate, double *to_rate, bool *probed) {
    if (probed != nullptr) *probed = false;
    if (!adaptive(len)) return false;
    Class &c = classes_[class_of(len)];
    double r = 0;
    if (!measure(c.span[path], block_start_ns, block_bytes, now_ns, ok, &r)) {
        return false;
    }
    if (c.spans[path] < warm_spans_) {
        ++c.spans[path];  // warm-up: the next span counts
        return false;
    }
    if (path == c.use) {
        c.rate[path] = c.rate[path] == 0 ? r : (3 * c.rate[path] + r) / 4;
        return false;
    }
    if (!c.probe) return false;  // a late span of a probe given up
    c.rate[path] = r;            // fresh, not averaged with an old probe's
    if (probed != nullptr) *probed = true;
    return decide(c, from_rate, to_rate);
}

PathChooser::Path PathChooser::in_use(size_t len) const {
    if (len < min_bytes_) return kUcx;
    if (len >= max_bytes_) return kSingleCopy;
    return classes_[class_of(len)].use;
}

bool PathChooser::probing(size_t len) const {
    return adaptive(len) && classes_[class_of(len)].probe;
}

double PathChooser::rate(size_t len, Path path) const {
    return adaptive(len) ? classes_[class_of(len)].rate[path] : 0;
}

} // namespace ucxp2p
