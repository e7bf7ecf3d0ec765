/*
 * Which way a send from an application buffer goes, per size, from the
 * rates the sender measures: UCX or our single-copy rendezvous. One chooser
 * per peer of a communicator that the rendezvous serves, with the band of
 * sizes for its kind of peer (Band): same-host peers (P2P_CMA_THRESH=auto,
 * the default) and peers reached over tcp (P2P_TCP_BULK_THRESH=auto).
 *
 * Two paths move such a message: UCX's shared memory (two copies, the
 * sender's into a FIFO and the receiver's out of it, pipelined over both
 * cores) and our single copy (core/cma.h: process_vm_readv, split between
 * the two ranks from P2P_CMA_SPLIT). Which is faster depends on the machine
 * and on its state: on the benchmark VM the crossover moved from below
 * 16 KiB to above 128 KiB between one hour and the next (docs/
 * PERFORMANCE.md), so a fixed threshold loses in one state or the other.
 *
 * Below kMinBytes UCX always moves the message; from kMaxBytes on single
 * copy always does (it won or tied at every such size in every state
 * measured). Between them each power-of-two size class starts with UCX
 * (the earlier fixed default) and switches when single copy measures
 * faster, and back.
 *
 * Over tcp (kTcpBand) the two paths are UCX's tcp rendezvous and the
 * receiver reading from our own sockets (core/tcp_bulk.h). Which is faster
 * from 256 KiB on also moved with the machine's state: on the benchmark VM
 * the sockets were 1.1-1.3x faster at 512 KiB and 4 MiB in one phase and
 * 0.66-0.9x at 256 KiB - 4 MiB in another (docs/PERFORMANCE.md, 12-01);
 * in the same-minute rounds of 12-01 to 12-02 UCX won more often (11 sets
 * of 16 at 256 KiB - 4 MiB). Below 256 KiB UCX always moves the message;
 * every class from 256 KiB starts with UCX, probes the sockets only after
 * kMinInterval sends (a probe costs a stream of a few hundred messages
 * 11-21% when the probed path is the slower one: it pays off only over a
 * longer one), and the last class takes every larger size.
 *
 * The measure: the sends of a class go in blocks, all on one path, each of
 * at least kBlockBytes and kMinBlockSends. The last send of a block is
 * confirmed by the receiver: a single-copy send completes on the receiver's
 * ACK anyway, and through UCX the block's last send is a synchronous one (it
 * completes once the receiver matched it, so the receiver has taken
 * everything before it; an ordinary UCX send completes when its data left,
 * which flatters UCX by what still sits in the FIFO).
 *
 * A rate is the bytes of the blocks that ended in a span of at least the
 * band's span_bytes over the span's time, per path. Block ends are seen
 * when the sender gets round to them, often many in one progress call (a window
 * posted whole, then polled): a span therefore starts and ends at the last
 * end of such a burst (ends within kBurstNs of each other), and the blocks
 * of the burst it starts after do not count. A band may name the fastest
 * rate any path of its moves (max_rate): then ends closer together than
 * their blocks' bytes could move at it are one burst too (a sender whose
 * core the socket threads keep busy sees a window's ends late and tens of
 * microseconds apart, its poll yielding between them; one that handles a
 * window's acknowledgements in one progress call, a few microseconds
 * apart). Time when nothing of the path was in flight (a block posted
 * after the path's last end: the application idle, or the other path
 * probing) is left out. A UCX synchronous send's
 * end can be reported after single-copy blocks behind it ended, so spans
 * never mix paths.
 *
 * Every `interval` sends of a class (once the path in use has a rate; the
 * first interval is the band's first_probe), a probe sends on the other
 * path until it has a span's rate. If that is more than kSwitchMargin
 * faster than the path in use, it becomes the path in use and the interval
 * starts again at kMinInterval; else the interval grows kIntervalGrowth-fold
 * up to kMaxInterval (a probe of a slower path then costs little). A probe
 * without its rate after kMaxProbeSends sends (its sends never end: a
 * stopped peer, say) is given up; a failed send restarts its path's span.
 *
 * Not thread-safe: its communicator calls it under the worker lock.
 */
#ifndef UCXP2P_CORE_PATH_CHOICE_H
#define UCXP2P_CORE_PATH_CHOICE_H

#include <climits>
#include <cstddef>
#include <cstdint>

namespace ucxp2p {

class PathChooser {
public:
    enum Path : uint8_t { kUcx = 0, kSingleCopy = 1 };

    /** The sizes a chooser decides: power-of-two classes from
     *  2^min_shift bytes; smaller sizes go through UCX. */
    struct Band {
        int min_shift;
        int classes;      // 1..kMaxClasses
        bool open_top;    // the last class takes every larger size; else
                          // larger sizes always go single copy
        Path initial;     // every class's path until a probe says otherwise
        uint64_t span_bytes;  // a rate's bytes at least (see above)
        uint8_t warm_spans;   // a path's first spans in a class not taken
        double max_rate;      // bytes per ns no path exceeds (0: none known)
        uint32_t first_probe; // sends of a class before its first probe
    };
    static constexpr int kMaxClasses = 8;
    static constexpr uint32_t kMinInterval = 512;   // sends between probes
    /** Same-host peers: 16 KiB .. 128 KiB classes, UCX first. A path's
     *  first span in a class is its warm-up (UCX's first 4 MiB to a new
     *  peer read 0.8-1.1 GB/s where it then moved 11-14; single copy's
     *  first, queued behind UCX's sends, read up to 225). No copy between
     *  two processes moves 100 GB/s (single copy's best at these sizes:
     *  ~20 on the benchmark VM and on a quiet 16-core machine): ends
     *  closer than that are one burst (a block of 1 MiB: 10 us). */
    static constexpr Band kSameHostBand = {14, 4, false, kUcx, uint64_t(4) << 20, 1, 100.0, 0};
    /** Peers over tcp: 256 KiB .. 32 MiB and up, UCX first, our sockets
     *  probed from the class's 512th send (kMinInterval); spans
     *  of 10-20 ms (a tcp stream's rate wanders more over a few ms), and a
     *  path's first span in a class is its warm-up (connections, buffer
     *  pools and pages touched first): 0.6-0.9x of its later rate. No
     *  tcp link moves 50 GB/s (400 Gb/s): ends closer than that are one
     *  burst (a block of 2 MiB, the least: 42 us). */
    static constexpr Band kTcpBand = {18, 8, true, kUcx, uint64_t(64) << 20, 1, 50.0,
                                       kMinInterval};

    /** The same-host band's limits. */
    static constexpr size_t kMinBytes = size_t(16) << 10;
    static constexpr size_t kMaxBytes = size_t(256) << 10;
    static constexpr uint64_t kBlockBytes = uint64_t(1) << 20;
    static constexpr uint32_t kMinBlockSends = 8;
    static constexpr int64_t kBurstNs = 5000;
    static constexpr uint32_t kMaxInterval = 65536;
    static constexpr uint32_t kIntervalGrowth = 8;
    static constexpr uint32_t kMaxProbeSends = 1024;
    static constexpr double kSwitchMargin = 1.10;

    explicit PathChooser(const Band &band = kSameHostBand);

    /** The smallest size the band decides. */
    size_t min_bytes() const { return min_bytes_; }
    /** len is chosen per send (in the band). */
    bool adaptive(size_t len) const { return len >= min_bytes_ && len < max_bytes_; }
    /** The same for a chooser of band b (before there is one). */
    static bool adaptive(const Band &b, size_t len) {
        return len >= (size_t(1) << b.min_shift) &&
               (b.open_top || len < (size_t(1) << (b.min_shift + b.classes)));
    }
    /** Sends in a block of sends of len bytes each. */
    static uint32_t block_sends(size_t len);

    /** A send's path. ends_block: it is the last of its block: send it
     *  synchronously when through UCX and report its end with done(),
     *  passing block_start_ns and block_bytes back. */
    struct Pick {
        Path path;
        bool ends_block;
        int64_t block_start_ns;
        uint64_t block_bytes;
        bool starts_probe;     // this send begins a probe of path (for a log)
    };
    /** The path of a send of len bytes posted at now_ns (sizes outside the
     *  band: UCX below it, single copy above it, never ending a block). */
    Pick pick(size_t len, int64_t now_ns);

    /** The send that ended a block (pick's ends_block) ended at now_ns; ok:
     *  it moved its bytes. True when this changed the class's path in use.
     *  When it closed a probe (*probed, switched or not): *from_rate, the
     *  rate of the path in use before, *to_rate, the probed path's, bytes
     *  per ns; for the caller's log. */
    bool done(size_t len, Path path, int64_t block_start_ns, uint64_t block_bytes,
              int64_t now_ns, bool ok, double *from_rate = nullptr,
              double *to_rate = nullptr, bool *probed = nullptr);

    /** The path a class uses outside its probes (fixed sizes: their path). */
    Path in_use(size_t len) const;
    /** Whether the class of len is probing the other path now. */
    bool probing(size_t len) const;
    /** The last measured rate of path for len's class, bytes per ns; 0:
     *  not measured. */
    double rate(size_t len, Path path) const;

private:
    static_assert(kSameHostBand.classes <= kMaxClasses && kTcpBand.classes <= kMaxClasses,
                  "every band's classes fit");
    static_assert((size_t(1) << kSameHostBand.min_shift) == kMinBytes, "first class");
    static_assert((size_t(1) << (kSameHostBand.min_shift + kSameHostBand.classes)) == kMaxBytes,
                  "last class");

    struct Span {
        int64_t start_ns = INT64_MIN;     // INT64_MIN: no end seen yet
        int64_t last_end_ns = INT64_MIN;
        double bytes = 0;
        double idle_ns = 0;
    };
    struct Class {
        Path use = kUcx;
        // The block being posted.
        Path bpath = kUcx;
        uint32_t bsends = 0;         // 0: the next send starts a block
        uint64_t bbytes = 0;
        int64_t bstart_ns = 0;
        // The schedule.
        uint32_t until_probe = 0;    // sends before the next probe is due
        uint32_t interval = kMinInterval;
        bool probe = false;          // a probe is under way
        uint32_t probe_sends = 0;
        // Measures.
        Span span[2];
        double rate[2] = {0, 0};     // bytes per ns, 0: unknown
        uint8_t spans[2] = {0, 0};   // complete spans, up to warm_spans
    };

    int class_of(size_t len) const;
    static Path other(Path p) { return p == kUcx ? kSingleCopy : kUcx; }
    /** Close the probe of c: switch or not; true when it switched. */
    static bool decide(Class &c, double *from_rate, double *to_rate);
    static void give_up_probe(Class &c);
    /** Add a block's end to sp; true with *rate when a span is complete. */
    bool measure(Span &sp, int64_t block_start_ns, uint64_t block_bytes, int64_t now_ns,
                 bool ok, double *rate);

    int min_shift_;
    int nclasses_;
    size_t min_bytes_;
    size_t max_bytes_;   // SIZE_MAX: an open top
    double span_bytes_;
    uint8_t warm_spans_;
    double max_rate_;
    Class classes_[kMaxClasses];
};

} // namespace ucxp2p

#endif
