// p2prun: relays one rank's output stream to one of p2prun's own, in whole
// lines, each prefixed with "[rank] ".
#ifndef P2PRUN_LINE_RELAY_H
#define P2PRUN_LINE_RELAY_H

#include "output_sink.h"

#include <cstddef>
#include <string>
#include <utility>

namespace p2prun {

class LineRelay {
public:
    // A partial line longer than this is written out as a line of its own so
    // that a rank that never writes '\n' cannot exhaust memory (without a
    // prefix, as it is: no '\n' is added).
    static constexpr size_t kMaxLine = 64 * 1024;

    // out: where lines go (not owned). prefix: e.g. "[3] " or "" for none.
    LineRelay(OutputSink *out, std::string prefix) : out_(out), prefix_(std::move(prefix)) {}

    OutputSink *sink() const { return out_; }

    // Consumes a chunk read from the rank; queues every line it completes.
    void feed(const char *data, size_t len);

    // The rank's stream ended: queues a pending partial line (with a '\n'
    // added when prefixing, so the next rank's line starts on its own line).
    void finish();

    // What is buffered (a partial line); for tests.
    const std::string &pending() const { return partial_; }

private:
    void emit(const char *line, size_t len, bool add_newline);

    OutputSink *out_;
    std::string prefix_;
    std::string partial_;
    std::string batch_;  // whole prefixed lines, queued at once
    // The last partial line was cut at kMaxLine with a '\n' added: a '\n'
    // that comes next ends that line, it is not an empty line of its own.
    bool just_split_ = false;
};

} // namespace p2prun

#endif
