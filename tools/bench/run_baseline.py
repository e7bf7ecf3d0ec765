#!/usr/bin/env python3
"""One-command baseline: ucxp2p (p2p_perftest) against ucx_perftest and MPI.

For each transport (shm: UCX_TLS=shm,self and OpenMPI btl vader; tcp:
UCX_TLS=tcp,self and btl tcp) and each message size it runs, --reps times
each (medians reported):
  * p2p_perftest -t bw           under p2prun -n 2, ranks pinned to cores,
    with application buffers (ucxp2p) and with p2p_mem_alloc buffers
    (ucxp2p_lib, as ucx_perftest's buffers come from ucp_mem_map ALLOCATE)
  * ucx_perftest -t tag_bw       client/server on 127.0.0.1, taskset pinned,
    plain and with -e (peer error handling, as ucxp2p's endpoints have)
  * mpi_bw (tools/bench/mpi_bw.cc, built here with mpicxx) over OpenMPI
    pml ob1 and pml ucx, --bind-to core
with the same window, iterations and buffer mode, then the 8-byte latency
and message-rate points (rate streams as tag_bw does: at most W sends in
flight, W receives posted, one final ack; row rate_batched: the same stream
posted with the batch calls, p2p_perftest --post-batch; row
rate_serialized: the same with --threads serialized), the 128x512K batch
against MPI
with the same window, communicator setup (2 ranks: p2p_comm_create, and
create + first message, which the 1 ms target is judged on) and memory per
communicator (8 ranks).
Writes results.csv (every repetition, failed ones with their status),
summary.csv (medians of the runs that succeeded, ratios, ok/total runs),
summary.md, bw_<transport>.png and prints the ratio table. A run that
failed (exit status, timeout, no result) shows as FAIL; a point with a
target where ucxp2p failed a repetition is FAIL, not met. Exit status 1
when any p2p_perftest run failed (after writing what it could).
Standard library only; the plot uses gnuplot (Debian gnuplot-nox) or
python3-matplotlib, whichever is present.
"""
import argparse
import csv
import datetime
import io
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep the source tree clean
import bench_report  # noqa: E402  (plot + summary, same folder)

TRANSPORTS = {
    "shm": {"ucx_tls": "shm,self", "btl": "self,vader"},
    "tcp": {"ucx_tls": "tcp,self", "btl": "self,tcp"},
}
# The 8-byte rate rows: p2p_perftest variants, each beside the same
# ucx_perftest and MPI numbers (only "rate" carries the target).
RATE_ROWS = ("rate", "rate_batched", "rate_serialized")
MPI_ROOT = ["--allow-run-as-root", "--oversubscribe"]
MPI_UCX = ["--mca", "pml", "ucx", "--mca", "pml_ucx_tls", "any",
           "--mca", "pml_ucx_devices", "any"]


def parse_size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().rstrip("B").rstrip("I")
    if t and t[-1] in mult:
        return int(t[:-1]) * mult[t[-1]]
    return int(t)


def human(size):
    for unit, v in (("M", 1 << 20), ("K", 1 << 10)):
        if size >= v and size % v == 0:
            return "%d%s" % (size // v, unit)
    return str(size)


class Runner:
    def __init__(self, args):
        self.args = args
        self.rows = []          # every repetition, failed ones included
        self.log = open(os.path.join(args.out, "commands.log"), "w")
        self.ncpu = os.cpu_count() or 1
        self.why = None         # why the last tool run gave no result

    # ---------------------------------------------------------------- exec
    def run(self, cmd, env=None, timeout=None):
        timeout = timeout or self.args.timeout
        full_env = dict(os.environ)
        full_env.update(env or {})
        shown = " ".join("%s=%s" % kv for kv in (env or {}).items())
        self.log.write("$ %s %s\n" % (shown, " ".join(cmd)))
        self.log.flush()
        self.why = None
        try:
            p = subprocess.run(cmd, env=full_env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               timeout=timeout)
        except (subprocess.TimeoutExpired, OSError) as e:
            self.why = ("timeout after %ss" % timeout
                        if isinstance(e, subprocess.TimeoutExpired)
                        else "not run: %s" % e)
            self.log.write("  %s\n" % self.why)
            return None
        if p.returncode != 0:
            self.log.write("  rc=%d\n%s\n%s\n" % (p.returncode, p.stdout,
                                                   p.stderr[-4000:]))
            last = [l for l in p.stderr.splitlines() if l.strip()]
            self.why = "rc=%d%s" % (p.returncode,
                                    (": " + last[-1][:160]) if last else "")
            return None
        return p.stdout

    def record(self, transport, impl, test, size, value, unit):
        """One repetition; a run that gave no value is kept as a failure
        (status: why) so that the report shows it."""
        status = "ok"
        if value is None:
            status = self.why or "no value in its output"
        self.rows.append({"transport": transport, "impl": impl,
                          "test": test, "size": size, "value": value,
                          "unit": unit, "status": status})

    # ---------------------------------------------------------------- shapes
    def iters_for(self, size, window):
        """Timed windows for one point: ~budget bytes, bounded."""
        n = self.args.budget // max(size * window, 1)
        return int(min(max(n, 8), self.args.max_iters))

    # ---------------------------------------------------------------- tools
    def p2p(self, tls, test, size, iters, warm, window, nranks=2,
            extra=None):
        cmd = [self.args.p2prun, "-n", str(nranks)]
        if os.path.basename(self.args.p2prun) == "p2prun":
            cmd += ["--no-prefix", "--timeout", str(self.args.timeout)]
        cmd += ["--"]
        if self.args.pin and nranks <= self.ncpu:
            cmd += [self.pin_script]
        cmd += [self.args.perftest, "-t", test, "-s", str(size),
                "-n", str(iters), "-w", str(warm), "-W", str(window),
                "--csv", "-q"] + (extra or [])
        if self.args.pool:
            cmd += ["-p", str(self.args.pool)]
        out = self.run(cmd, env={"UCX_TLS": tls})
        row = first_csv_row(out)
        if out is not None and row is None:
            self.why = "no CSV row in its output"
        return row

    def ucx_perftest(self, tls, test, size, msgs, warm_msgs, err=False):
        self.why = "ucx_perftest failed (see commands.log)"
        port = str(random.randint(20000, 40000))
        base = ["ucx_perftest", "-t", test, "-s", str(size), "-n", str(msgs),
                "-w", str(warm_msgs), "-p", port] + (["-e"] if err else [])
        if test == "tag_bw":
            base += ["-O", str(self.args.window)]
        env = dict(os.environ, UCX_TLS=tls)
        if err:
            # Shared memory transports only offer peer error handling when
            # asked to (ucxp2p's context sets the same default).
            env.setdefault("UCX_MM_ERROR_HANDLING", "y")
            tls = tls + " UCX_MM_ERROR_HANDLING=" + env["UCX_MM_ERROR_HANDLING"]
        pin0 = ["taskset", "-c", "0"] if self.args.pin else []
        pin1 = (["taskset", "-c", str(1 % self.ncpu)]
                if self.args.pin else [])
        self.log.write("$ UCX_TLS=%s %s & %s\n" % (
            tls, " ".join(pin0 + base), " ".join(pin1 + base[:1] +
                                                 ["127.0.0.1"] + base[1:])))
        server = subprocess.Popen(pin0 + base, env=env,
                                  stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            out = None
            deadline = time.time() + 10
            while time.time() < deadline:  # server needs a moment to listen
                time.sleep(0.2)
                try:
                    p = subprocess.run(pin1 + base[:1] + ["127.0.0.1"] +
                                       base[1:] + ["-v"], env=env,
                                       stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True,
                                       timeout=self.args.timeout)
                except subprocess.TimeoutExpired:
                    break
                if p.returncode == 0:
                    out = p.stdout
                    break
            server.wait(timeout=self.args.timeout)
        except subprocess.TimeoutExpired:
            out = None
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        if not out:
            self.log.write("  ucx_perftest failed\n")
            return None
        lines = [l.strip() for l in out.splitlines()
                 if l.strip()[:1].isdigit()]
        if not lines:
            self.why = "no result line in ucx_perftest's output"
            return None
        f = lines[-1].split(",")
        # iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,
        # overall_bw,avg_mr,overall_mr  (bw in 2^20 bytes/s). Latency: the
        # median (robust on a shared machine), as for p2p_perftest below.
        return {"lat_us": float(f[1]), "bw_MiBps": float(f[5]),
                "msg_rate": float(f[7])}

    def mpi(self, pml, transport, test, size, iters, warm, window):
        t = TRANSPORTS[transport]
        cmd = ["mpirun"] + MPI_ROOT + ["-n", "2"]
        cmd += ["--bind-to", "core" if self.args.pin else "none"]
        if pml == "ob1":
            cmd += ["--mca", "pml", "ob1", "--mca", "btl", t["btl"]]
        else:
            cmd += MPI_UCX + ["-x", "UCX_TLS=" + t["ucx_tls"]]
        cmd += [self.mpi_bw, "-t", test, "-s", str(size), "-n", str(iters),
                "-w", str(warm), "-W", str(window)]
        if self.args.pool:
            cmd += ["-p", str(self.args.pool)]
        out = self.run(cmd)
        row = first_csv_row(out)
        if out is not None and row is None:
            self.why = "no CSV row in its output"
        return row

    # ---------------------------------------------------------------- setup
    def prepare(self):
        build = os.path.join(self.args.out, "build")
        os.makedirs(build, exist_ok=True)
        self.mpi_bw = os.path.join(build, "mpi_bw")
        if not self.args.no_mpi:
            cmd = ["mpicxx", "-O2", "-std=c++17", "-o", self.mpi_bw,
                   os.path.join(HERE, "mpi_bw.cc")]
            if subprocess.run(cmd).returncode != 0:
                sys.exit("run_baseline: mpicxx failed (is libopenmpi-dev "
                         "installed?)")
        self.pin_script = os.path.join(build, "pin_rank.sh")
        with open(self.pin_script, "w") as f:
            f.write('#!/bin/sh\n# pin each rank to its own core '
                    '(rank modulo cores)\n'
                    'r=${P2P_RANK:-${RANK:-${OMPI_COMM_WORLD_RANK:-0}}}\n'
                    'exec taskset -c $((r %% %d)) "$@"\n' % self.ncpu)
        os.chmod(self.pin_script, 0o755)

    # ---------------------------------------------------------------- sweep
    def sweep(self):
        a = self.args
        w = a.window
        total = len(a.transports) * len(a.sizes)
        step = 0
        for tr in a.transports:
            tls = TRANSPORTS[tr]["ucx_tls"]
            for size in a.sizes:
                step += 1
                it = self.iters_for(size, w)
                warm = max(2, it // 10)
                progress("[%d/%d] %s bw %s (%d x %d msgs)" %
                         (step, total, tr, human(size), it, w))
                for _ in range(a.reps):
                    r = self.p2p(tls, "bw", size, it, warm, w)
                    self.record(tr, "ucxp2p", "bw", size, fget(r, "bw_MiBps"),
                                "MiB/s")
                    r = self.p2p(tls, "bw", size, it, warm, w,
                                 extra=["--alloc", "lib"])
                    self.record(tr, "ucxp2p_lib", "bw", size,
                                fget(r, "bw_MiBps"), "MiB/s")
                    u = self.ucx_perftest(tls, "tag_bw", size, it * w,
                                          warm * w)
                    self.record(tr, "ucx_perftest", "bw", size,
                                u and u["bw_MiBps"], "MiB/s")
                    # -e: endpoints with peer error handling, as ucxp2p's
                    # (UCX then drops zero-copy RMA lanes whose memory
                    # domain cannot invalidate: tcp, cma).
                    u = self.ucx_perftest(tls, "tag_bw", size, it * w,
                                          warm * w, err=True)
                    self.record(tr, "ucx_perftest_e", "bw", size,
                                u and u["bw_MiBps"], "MiB/s")
                    if not a.no_mpi:
                        for pml in ("ob1", "ucx"):
                            m = self.mpi(pml, tr, "bw", size, it, warm, w)
                            self.record(tr, "mpi_" + pml, "bw", size,
                                        fget(m, "bw_MiBps"), "MiB/s")
            self.small_points(tr, tls)
        self.batch_point()
        self.setup_mem_points()

    def small_points(self, tr, tls):
        a = self.args
        n = a.lat_iters
        progress("%s: 8-byte latency and message rate" % tr)
        for _ in range(a.reps):
            r = self.p2p(tls, "lat", 8, n, n // 10, 1)
            self.record(tr, "ucxp2p", "lat", 8, fget(r, "lat_p50_us"), "us")
            u = self.ucx_perftest(tls, "tag_lat", 8, n, n // 10)
            self.record(tr, "ucx_perftest", "lat", 8, u and u["lat_us"], "us")
            # Rate points move --rate-msgs messages (timed; a tenth more to
            # warm up): at 20000 (the latency count) a point lasted ~4 ms
            # on shm and one scheduling hiccup moved it by a third.
            it = max(a.rate_msgs // a.window, 8)
            r = self.p2p(tls, "rate", 8, it, max(2, it // 10), a.window)
            self.record(tr, "ucxp2p", "rate", 8, fget(r, "msg_rate"), "msg/s")
            # The same stream posted with the batch calls (--post-batch): a
            # row of its own beside the same baselines, no target of its own.
            r = self.p2p(tls, "rate", 8, it, max(2, it // 10), a.window,
                         extra=["--post-batch"])
            self.record(tr, "ucxp2p", "rate_batched", 8, fget(r, "msg_rate"),
                        "msg/s")
            # P2P_THREAD_SERIALIZED (--threads serialized): no locked
            # instruction per message, no progress thread beside the rank.
            r = self.p2p(tls, "rate", 8, it, max(2, it // 10), a.window,
                         extra=["--threads", "serialized"])
            self.record(tr, "ucxp2p", "rate_serialized", 8,
                        fget(r, "msg_rate"), "msg/s")
            u = self.ucx_perftest(tls, "tag_bw", 8, it * a.window,
                                  max(2, it // 10) * a.window)
            for test in RATE_ROWS:
                self.record(tr, "ucx_perftest", test, 8, u and u["msg_rate"],
                            "msg/s")
            if not a.no_mpi:
                for pml in ("ob1", "ucx"):
                    m = self.mpi(pml, tr, "lat", 8, n, n // 10, 1)
                    self.record(tr, "mpi_" + pml, "lat", 8,
                                fget(m, "lat_p50_us"), "us")
                    m = self.mpi(pml, tr, "rate", 8, it, max(2, it // 10),
                                 a.window)
                    for test in RATE_ROWS:
                        self.record(tr, "mpi_" + pml, test, 8,
                                    fget(m, "msg_rate"), "msg/s")

    def batch_point(self):
        a = self.args
        count, size = a.batch
        it = max(self.iters_for(size, count), 10)
        tls = TRANSPORTS["shm"]["ucx_tls"]
        progress("shm: batch %dx%s" % (count, human(size)))
        for _ in range(a.reps):
            r = self.p2p(tls, "batch", size, it, 2, a.window,
                         extra=["-b", "%dx%d" % (count, size)])
            self.record("shm", "ucxp2p", "batch", size, fget(r, "bw_MiBps"),
                        "MiB/s")
            r = self.p2p(tls, "batch", size, it, 2, a.window,
                         extra=["-b", "%dx%d" % (count, size), "--alloc", "lib"])
            self.record("shm", "ucxp2p_lib", "batch", size,
                        fget(r, "bw_MiBps"), "MiB/s")
            if not a.no_mpi:
                for pml in ("ob1", "ucx"):
                    m = self.mpi(pml, "shm", "batch", size, it, 2, count)
                    self.record("shm", "mpi_" + pml, "batch", size,
                                fget(m, "bw_MiBps"), "MiB/s")

    def setup_mem_points(self):
        a = self.args
        tls = TRANSPORTS["shm"]["ucx_tls"]
        progress("shm: communicator setup (2 ranks), memory (%d ranks)" %
                 a.mem_ranks)
        for _ in range(a.reps):
            # The target is judged on create + first message (endpoints
            # are created on first use): the slowest rank's median; the
            # create time alone (same statistic) is shown beside it.
            r = self.p2p(tls, "setup", 8, 20, 0, 1)
            self.record("shm", "ucxp2p", "setup_create", 2,
                        extra_of(r, "create_us_p50_rank_max"), "us")
            self.record("shm", "ucxp2p", "setup_first_msg", 2,
                        extra_of(r, "create_first_msg_us_p50_rank_max"), "us")
        r = self.p2p(tls, "mem", 8, 1, 0, 1, nranks=a.mem_ranks,
                     extra=["-c", "4"])
        self.record("shm", "ucxp2p", "mem_per_comm", a.mem_ranks,
                    extra_of(r, "rss_KiB_per_connected_comm_max"), "KiB")


def first_csv_row(out):
    """First data row of our CSV; skips anything before the header (UCX
    writes its warnings to stdout by default)."""
    if not out:
        return None
    lines = out.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("test,")),
                 None)
    if start is None:
        return None
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))
    return rows[0] if rows else None


def fget(row, key):
    try:
        return float(row[key]) if row else None
    except (KeyError, ValueError):
        return None


def extra_of(row, key):
    if not row:
        return None
    for kv in (row.get("extra") or "").split(";"):
        k, _, v = kv.partition("=")
        if k == key:
            return float(v)
    return None


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except OSError:
        return "?"


def progress(msg):
    print("run_baseline: " + msg, file=sys.stderr, flush=True)


def main():
    top = os.path.abspath(os.path.join(HERE, "..", ".."))
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--builddir", default=os.environ.get("P2P_TOP_BUILDDIR",
                                                        top),
                   help="where p2p_perftest and p2prun were built (%(default)s)")
    p.add_argument("--p2prun", default=None,
                   help="launcher taking '-n N -- prog args' "
                        "(default: BUILDDIR/tools/p2prun/p2prun)")
    p.add_argument("--perftest", default=None,
                   help="p2p_perftest binary (default: BUILDDIR/tools/"
                        "perftest/p2p_perftest)")
    p.add_argument("--out", default=None,
                   help="output folder (default: /tmp/ucxp2p-bench-DATE)")
    p.add_argument("--sizes", default=None,
                   help="comma list of sizes (8,512,4K,64K,512K,4M; "
                        "--quick: 8,64K,4M)")
    p.add_argument("--transports", default="shm,tcp")
    p.add_argument("--reps", type=int, default=5,
                   help="repetitions per point; the median is used (>= 1; "
                        "3 or more for a median that means something)")
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--batch", default="128x512K")
    p.add_argument("--pool", default="0",
                   help="rotating buffer pool bytes for p2p and MPI "
                        "(0: reuse one buffer, as ucx_perftest does)")
    p.add_argument("--budget", default=None,
                   help="bytes per bw measurement (256M; --quick: 64M)")
    p.add_argument("--max-iters", type=int, default=1000)
    p.add_argument("--lat-iters", type=int, default=20000)
    p.add_argument("--rate-msgs", type=int, default=128000,
                   help="messages per 8-byte rate point (%(default)s)")
    p.add_argument("--mem-ranks", type=int, default=8)
    p.add_argument("--timeout", type=int, default=120,
                   help="seconds allowed to one run")
    p.add_argument("--no-pin", dest="pin", action="store_false")
    p.add_argument("--no-mpi", action="store_true")
    p.add_argument("--quick", action="store_true",
                   help="sizes 8,64K,4M and a 64M budget, where --sizes "
                        "and --budget are not given")
    a = p.parse_args()
    # --quick only changes the defaults: --sizes and --budget given
    # beside it stand
    if a.sizes is None:
        a.sizes = "8,64K,4M" if a.quick else "8,512,4K,64K,512K,4M"
    if a.budget is None:
        a.budget = "64M" if a.quick else "256M"
    def sizes_of(option, text, positive=True):
        try:
            v = parse_size(text)
        except ValueError:
            v = -1
        if v < 0 or (positive and v == 0):
            sys.exit("run_baseline: %s: '%s' is not a size (8, 4K, 4M)" % (option, text))
        return v
    a.sizes = [sizes_of("--sizes", s) for s in a.sizes.split(",")]
    a.transports = [t for t in a.transports.split(",") if t]
    for t in a.transports:
        if t not in TRANSPORTS:
            sys.exit("run_baseline: unknown transport %s" % t)
    cnt, _, sz = a.batch.partition("x")
    if not cnt.isdigit() or int(cnt) == 0 or not sz:
        sys.exit("run_baseline: --batch: '%s' is not COUNTxSIZE (128x512K)" % a.batch)
    a.batch = (int(cnt), sizes_of("--batch", sz))
    a.pool = sizes_of("--pool", a.pool, positive=False)
    a.budget = sizes_of("--budget", a.budget)
    if a.reps < 1:
        sys.exit("run_baseline: --reps must be >= 1")
    a.perftest = a.perftest or os.path.join(a.builddir, "tools", "perftest",
                                            "p2p_perftest")
    a.p2prun = a.p2prun or os.path.join(a.builddir, "tools", "p2prun",
                                        "p2prun")
    for exe in (a.perftest, a.p2prun):
        if not os.access(exe, os.X_OK):
            sys.exit("run_baseline: %s not built (make first, or "
                     "--builddir)" % exe)
    if shutil.which("ucx_perftest") is None:
        sys.exit("run_baseline: ucx_perftest missing (apt-get install "
                 "ucx-utils)")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    a.out = a.out or "/tmp/ucxp2p-bench-" + stamp
    os.makedirs(a.out, exist_ok=True)

    load_start = loadavg()
    r = Runner(a)
    r.prepare()
    started = datetime.datetime.now()
    r.sweep()
    meta = {
        "date": started.strftime("%Y-%m-%d %H:%M"),
        "machine": "%s, %s, %d CPUs" % (platform.node(), platform.machine(),
                                        os.cpu_count() or 0),
        "command": " ".join([os.path.relpath(sys.argv[0], top)] +
                            sys.argv[1:]),
        "load": "%s at start, %s at end" % (load_start, loadavg()),
        "window": a.window, "reps": a.reps, "pin": a.pin,
        "pool": a.pool,
    }
    bench_report.write_all(a.out, r.rows, meta)
    print("\nresults in %s" % a.out)
    failed = bench_report.failed_runs(r.rows, prefix="ucxp2p")
    if failed:
        progress("p2p_perftest failed in %s (status in results.csv, "
                 "output in commands.log)" % ", ".join(
                     "%d of %d %s runs" % (f, n, impl)
                     for impl, (f, n) in sorted(failed.items())))
        sys.exit(1)


if __name__ == "__main__":
    main()
