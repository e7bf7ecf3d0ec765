#!/bin/sh
# tools/bench's report and runner (test_bench_report.py): verdicts of
# failed runs, the runner's exit status and options, with stand-in tools.
# SKIP (77) without python3.
command -v python3 >/dev/null 2>&1 || { echo "bench_report_test: SKIP: no python3"; exit 77; }
src=${P2P_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
exec python3 "$src/test/perftest/test_bench_report.py"
