/*
 * Where --csv and --json documents go. UCX prints its own log lines
 * (warnings such as "transport 'x' is not available") on stdout unless
 * UCX_LOG_FILE says otherwise, and under a launcher every rank's stdout is
 * one stream: a UCX warning from another process could land inside or after
 * the document, which no reader then takes. With --csv or --json the tool
 * keeps the original stdout for the document alone and points file
 * descriptor 1 at stderr, so anything else written to stdout (UCX's log,
 * a library's printf) comes out on stderr. The table stays on stdout as is.
 */
#ifndef UCXP2P_TOOLS_PERFTEST_DOC_OUT_H
#define UCXP2P_TOOLS_PERFTEST_DOC_OUT_H

#include <cstdio>

namespace perftest {
namespace doc_out {

/** Give the document the original stdout and send the rest of stdout to
 *  stderr. Call before anything loads or logs (before the context). When
 *  a step fails (no descriptor left), nothing changes and stdout is used
 *  for both, as before. */
void isolate();

/** The stream the document and table go to (stdout unless isolate()). */
FILE *stream();

/** Its file descriptor, for write(2) in a signal handler. */
int fd();

} // namespace doc_out
} // namespace perftest

#endif
