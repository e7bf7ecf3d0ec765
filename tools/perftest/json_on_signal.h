/*
 * --json when the run is ended by a signal: p2prun's --timeout, Ctrl-C, or
 * p2prun stopping the other ranks after one failed all send SIGTERM (or
 * SIGINT, SIGHUP), and the document, printed at the end, never came. The
 * reporter keeps the document of the points measured so far ("complete":
 * false) up to date here after each point; a handler writes it to stdout
 * (the document's, doc_out.h) with write(2) alone, then lets the signal
 * end the process as before (its default action, so the exit status still
 * names the signal).
 */
#ifndef UCXP2P_TOOLS_PERFTEST_JSON_ON_SIGNAL_H
#define UCXP2P_TOOLS_PERFTEST_JSON_ON_SIGNAL_H

#include <string>

namespace perftest {
namespace json_on_signal {

/** The document to print if a signal ends the run now. The first call
 *  installs the handlers (not over a signal the process ignores). */
void keep(const std::string &doc);

/** Keep nothing: a signal from now on prints no document (until the next
 *  keep). For a process that turned out not to print the run's. */
void forget();

/** Print doc, the final document, and keep nothing any more: a signal
 *  that comes meanwhile (to any thread) waits until doc is out, then ends
 *  the process without printing a second one (it waits at most 5 s for
 *  a stdout nobody reads). When a handler has begun printing the points
 *  so far, prints nothing and waits for that handler to end the process. */
void print_final(const std::string &doc);

} // namespace json_on_signal
} // namespace perftest

#endif
