#!/bin/bash
# p2p_perftest under the PMIx launchers (make check; p2prun runs are
# test/perftest's): every test (lat, bw, batch, rate, setup, mem) with 2
# ranks under
#   1. mpirun -np 2 --allow-run-as-root --oversubscribe (OpenMPI)
#   2. srun --mpi=pmix -n 2 inside a private Slurm (slurm_harness.sh)
# forced onto the PMIx bootstrap (P2P_BOOTSTRAP=pmix), with --check and
# --json: the document must parse, name the pmix bootstrap, hold every
# test's points, and count every byte (bytes sent and received equal to
# bytes expected, no errors). Exit 77 (skip) only when not root or a
# launcher is not installed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${P2P_TOP_BUILDDIR:-$(cd "$here/../.." && pwd)}
prog=$build/tools/perftest/p2p_perftest
[ -x "$prog" ] || { echo "perftest_launchers: $prog not built" >&2; exit 99; }
if [ "$(id -u)" != 0 ]; then
    echo "perftest_launchers: SKIP: must run as root (Slurm daemons; mpirun as root)"
    exit 77
fi
for tool in mpirun srun python3; do
    command -v "$tool" >/dev/null 2>&1 ||
        { echo "perftest_launchers: SKIP: $tool not installed"; exit 77; }
done
. "$here/../launcher_env.sh"
unset_launcher_vars tcp

out=$(mktemp -d /tmp/perftest_launchers.XXXXXX) || exit 99
trap 'rm -rf "$out"' EXIT
tests=lat,bw,batch,rate,setup,mem
args=(-t $tests -s 8,64K -n 20 -w 2 -b 4x64K -c 2 --check --json -q)
export UCX_TLS=shm,self P2P_BOOTSTRAP=pmix

# The JSON document of one run (rank 0's stdout; a libtool wrapper or the
# launcher adds nothing there) against what a correct run reports.
check() {  # label file
    python3 - "$1" "$2" "$tests" <<'PY'
import json, sys
label, path, tests = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
try:
    doc = json.load(open(path))
except ValueError as e:
    sys.exit("FAIL: %s: output is not one JSON document (%s)" % (label, e))
bad = []
if doc.get("bootstrap") != "pmix":
    bad.append("bootstrap %r, expected pmix" % doc.get("bootstrap"))
if doc.get("ranks") != 2 or doc.get("complete") is not True:
    bad.append("ranks %r complete %r" % (doc.get("ranks"), doc.get("complete")))
seen = set()
for r in doc.get("results", []):
    seen.add(r["test"])
    where = "%s %s" % (r["test"], r["size"])
    if r["errors"] != 0:
        bad.append("%s: %d errors" % (where, r["errors"]))
    if not (r["bytes_expected"] > 0 and
            r["bytes_sent"] == r["bytes_expected"] == r["bytes_received"]):
        bad.append("%s: bytes expected %d sent %d received %d" %
                   (where, r["bytes_expected"], r["bytes_sent"], r["bytes_received"]))
missing = [t for t in tests if t not in seen]
if missing:
    bad.append("no points for " + ",".join(missing))
if bad:
    sys.exit("FAIL: %s: %s" % (label, "; ".join(bad)))
print("PASS: %s: %d points of %s, every byte counted" %
      (label, len(doc["results"]), ",".join(tests)))
PY
}

failed=0
label="mpirun -np 2 p2p_perftest -t $tests"
timeout -k 5 120 mpirun -np 2 --allow-run-as-root --oversubscribe \
    -x UCX_TLS -x P2P_BOOTSTRAP "$prog" "${args[@]}" >"$out/mpirun.json" 2>"$out/mpirun.err"
rc=$?
if [ $rc != 0 ]; then
    echo "FAIL: $label: exit status $rc"; cat "$out/mpirun.err"; failed=1
else
    check "$label" "$out/mpirun.json" || { cat "$out/mpirun.err"; failed=1; }
fi

label="srun --mpi=pmix -n 2 p2p_perftest -t $tests"
# srun exports the whole environment to the tasks.
"$here/slurm_harness.sh" -t 120 -- timeout -k 5 100 srun --mpi=pmix -n 2 -O \
    "$prog" "${args[@]}" >"$out/srun.json" 2>"$out/srun.err"
rc=$?
if [ $rc != 0 ]; then
    echo "FAIL: $label: exit status $rc"; cat "$out/srun.err"; failed=1
else
    check "$label" "$out/srun.json" || { cat "$out/srun.err"; failed=1; }
fi
exit $failed
