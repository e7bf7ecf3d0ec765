"""Summary, ratio table, CSV and PNG plot for run_baseline.py.

Input rows: {transport, impl, test, size, value, unit, status}, one per
repetition; a failed run has value None and status saying why (anything
but "ok"). Values are the median of the repetitions that succeeded; a tool
whose every repetition failed shows FAIL, and a target whose ucxp2p column
had a failed repetition is FAIL rather than judged on the rest.
"""
import csv
import os
import shutil
import statistics
import subprocess

# ucxp2p: buffers the application brings (posix_memalign + p2p_mem_register);
# ucxp2p_lib: buffers from p2p_mem_alloc, as ucx_perftest's come from UCX.
# ucx_perftest_e: ucx_perftest -e (peer error handling, like ucxp2p's
# endpoints; the targets are against plain ucx_perftest).
IMPLS = ["ucxp2p", "ucxp2p_lib", "ucx_perftest", "ucx_perftest_e", "mpi_ob1",
         "mpi_ucx"]


def human(size):
    for unit, v in (("M", 1 << 20), ("K", 1 << 10)):
        if size >= v and size % v == 0:
            return "%d%s" % (size // v, unit)
    return str(size)


def ok(row):
    return row.get("status", "ok") == "ok" and row["value"] is not None


def medians(rows):
    """{(transport, test, size): {impl: (median, unit, n_ok, n_runs)}};
    median None when no repetition succeeded."""
    groups = {}
    for r in rows:
        key = (r["transport"], r["test"], r["size"])
        groups.setdefault(key, {}).setdefault(r["impl"], []).append(r)
    out = {}
    for key, by_impl in groups.items():
        out[key] = {}
        for impl, rs in by_impl.items():
            vals = [x["value"] for x in rs if ok(x)]
            out[key][impl] = (statistics.median(vals) if vals else None,
                              rs[0]["unit"], len(vals), len(rs))
    return out


def failed_runs(rows, prefix=""):
    """{impl: (failed, runs)} for the impls starting with prefix that had
    a failed run."""
    runs, bad = {}, {}
    for r in rows:
        if r["impl"].startswith(prefix):
            runs[r["impl"]] = runs.get(r["impl"], 0) + 1
            bad[r["impl"]] = bad.get(r["impl"], 0) + (not ok(r))
    return {i: (bad[i], runs[i]) for i in runs if bad[i]}


# test -> (target text, baseline impl or None, met(value, baseline))
TARGETS = {
    "bw": (">=0.97x tag_bw", "ucx_perftest", lambda v, b: v / b >= 0.97),
    "lat": ("<= tag_lat+0.2us", "ucx_perftest", lambda v, b: v <= b + 0.2),
    "rate": (">=0.9x tag_bw rate", "ucx_perftest",
             lambda v, b: v / b >= 0.9),
    "batch": (">=1.2x MPI ob1", "mpi_ob1", lambda v, b: v / b >= 1.2),
    # communicator setup: create + first message, slowest rank's median
    "setup_first_msg": ("<=1000us", None, lambda v, b: v <= 1000),
    "mem_per_comm": ("<=8MB", None, lambda v, b: v * 1024 <= 8e6),
}


def target_of(transport, test, size, med, impl="ucxp2p"):
    """(text, verdict) for the issue's targets: verdict "yes", "NO",
    "FAIL" (impl had a failed run, or no value) or "n/a" (no baseline
    value to judge against); None when no target applies or impl was not
    run at this point."""
    if test not in TARGETS or impl not in med:
        return None
    if (test == "bw" and size < 65536) or (test == "lat" and
                                           transport != "shm"):
        return None
    text, base_impl, met = TARGETS[test]
    value, _, n_ok, n_runs = med[impl]
    if value is None or n_ok < n_runs:
        return (text, "FAIL")
    base = med.get(base_impl, (None,))[0] if base_impl else 1.0
    if not base:
        return (text, "n/a")
    return (text, "yes" if met(value, base) else "NO")


def runs_text(m, impl):
    """"ok/runs" of impl at this point, "" when it did not run there."""
    return "%d/%d" % (m[impl][2], m[impl][3]) if impl in m else ""


def ratio(a, b):
    return (a / b) if (a is not None and b) else None


def fmt(v, digits=2):
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return "%.0f" % v
    return ("%." + str(digits) + "f") % v


def summary_rows(med):
    rows = []
    order = {"bw": 0, "lat": 1, "rate": 2, "rate_batched": 3,
             "rate_serialized": 4, "batch": 5, "setup_create": 6,
             "setup_first_msg": 7, "mem_per_comm": 8}
    for key in sorted(med, key=lambda k: (k[0], order.get(k[1], 9), k[2])):
        transport, test, size = key
        m = med[key]
        val = {i: m[i][0] if i in m else None for i in IMPLS}
        unit = next(iter(m.values()))[1]
        # latency: lower is better, so the ratio is inverted to keep
        # "> 1 means ucxp2p is better" everywhere
        inv = unit == "us"
        def r(other, mine="ucxp2p"):
            if inv:
                return ratio(val[other], val[mine])
            return ratio(val[mine], val[other])
        t = target_of(transport, test, size, m)
        tl = target_of(transport, test, size, m, "ucxp2p_lib")
        rows.append({
            "transport": transport, "test": test,
            "size": size, "unit": unit,
            "ucxp2p": val["ucxp2p"], "ucxp2p_lib": val["ucxp2p_lib"],
            "ucx_perftest": val["ucx_perftest"],
            "ucx_perftest_e": val["ucx_perftest_e"],
            "mpi_ob1": val["mpi_ob1"], "mpi_ucx": val["mpi_ucx"],
            "ratio_ucx_perftest": r("ucx_perftest"),
            "ratio_lib_ucx_perftest": r("ucx_perftest", "ucxp2p_lib"),
            "ratio_ucx_perftest_e": r("ucx_perftest_e"),
            "ratio_mpi_ob1": r("mpi_ob1"),
            "ratio_lib_mpi_ob1": r("mpi_ob1", "ucxp2p_lib"),
            "ratio_mpi_ucx": r("mpi_ucx"),
            # ucxp2p's own repetitions (ok/runs), not another tool's
            "reps": runs_text(m, "ucxp2p"),
            "reps_lib": runs_text(m, "ucxp2p_lib"),
            "failed_runs": " ".join("%s:%d/%d" % (i, m[i][3] - m[i][2],
                                                  m[i][3])
                                    for i in IMPLS if i in m and
                                    m[i][2] < m[i][3]),
            "failed": [i for i in IMPLS if i in m and m[i][0] is None],
            "target": t[0] if t else "",
            "target_met": t[1] if t else "",
            "target_met_lib": tl[1] if tl else "",
        })
    return rows


def size_label(row):
    if row["test"] in ("setup_create", "setup_first_msg", "mem_per_comm"):
        return "%d ranks" % row["size"]
    return human(row["size"])


def table_text(rows, markdown=False):
    head = ["transport", "test", "size", "unit", "ucxp2p", "ucxp2p_lib",
            "ucx_perftest", "ucx_pt_-e", "mpi_ob1", "mpi_ucx", "p2p/ucx",
            "lib/ucx", "p2p/ucx-e", "p2p/ob1", "lib/ob1", "p2p/mpi-ucx",
            "target", "met", "met(lib)", "reps", "failed runs"]
    lines = []
    body = []
    for r in rows:
        def val(impl):  # every repetition failed: FAIL, not a blank
            return "FAIL" if impl in r["failed"] else fmt(r[impl])
        body.append([r["transport"], r["test"], size_label(r), r["unit"],
                     val("ucxp2p"), val("ucxp2p_lib"),
                     val("ucx_perftest"), val("ucx_perftest_e"),
                     val("mpi_ob1"), val("mpi_ucx"),
                     fmt(r["ratio_ucx_perftest"]),
                     fmt(r["ratio_lib_ucx_perftest"]),
                     fmt(r["ratio_ucx_perftest_e"]),
                     fmt(r["ratio_mpi_ob1"]), fmt(r["ratio_lib_mpi_ob1"]),
                     fmt(r["ratio_mpi_ucx"]), r["target"], r["target_met"],
                     r["target_met_lib"], r["reps"] or "-",
                     r["failed_runs"] or "-"])
    if markdown:
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for b in body:
            lines.append("| " + " | ".join(b) + " |")
        return "\n".join(lines)
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    for row in [head] + body:
        lines.append("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    return "\n".join(lines)


def plot(out_dir, rows, meta):
    """bw vs size for each transport; returns the PNG paths written."""
    written = []
    for transport in sorted({r["transport"] for r in rows}):
        pts = [r for r in rows if r["transport"] == transport and
               r["test"] == "bw"]
        if not pts:
            continue
        dat = os.path.join(out_dir, "bw_%s.dat" % transport)
        with open(dat, "w") as f:
            f.write("# size " + " ".join(IMPLS) + "  (MiB/s, medians)\n")
            for r in pts:
                f.write("%d %s\n" % (r["size"], " ".join(
                    "%.3f" % r[i] if r[i] is not None else "NaN"
                    for i in IMPLS)))
        png = os.path.join(out_dir, "bw_%s.png" % transport)
        title = "bandwidth vs size, %s (%s, window %s, median of %s)" % (
            transport, meta["date"], meta["window"], meta["reps"])
        if shutil.which("gnuplot"):
            script = (
                'set terminal pngcairo noenhanced size 900,560\n'
                'set output "%s"\nset title "%s"\nset logscale x 2\n'
                'set xlabel "message size"\nset format x "%%.0b%%B"\n'
                'set ylabel "MiB/s"\nset key top left\nset grid\n'
                'set datafile missing "NaN"\nplot ' % (png, title) +
                ", ".join('"%s" using 1:%d with linespoints title "%s"' %
                          (dat, k + 2, name) for k, name in enumerate(IMPLS))
                + "\n")
            p = subprocess.run(["gnuplot"], input=script, text=True,
                               capture_output=True)
            if p.returncode == 0:
                written.append(png)
                continue
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("bench_report: no gnuplot (apt-get install gnuplot-nox) "
                  "and no matplotlib: no PNG")
            return written
        fig, ax = plt.subplots(figsize=(9, 5.6))
        for impl in IMPLS:
            xs = [r["size"] for r in pts if r[impl] is not None]
            ys = [r[impl] for r in pts if r[impl] is not None]
            if xs:
                ax.plot(xs, ys, marker="o", label=impl)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("MiB/s")
        ax.set_title(title)
        ax.grid(True)
        ax.legend()
        fig.savefig(png)
        written.append(png)
    return written


def write_all(out_dir, raw, meta):
    with open(os.path.join(out_dir, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["transport", "impl", "test",
                                          "size", "value", "unit", "status"])
        w.writeheader()
        w.writerows(dict(r, status=r.get("status", "ok")) for r in raw)
    rows = summary_rows(medians(raw))
    with open(os.path.join(out_dir, "summary.csv"), "w", newline="") as f:
        fields = [k for k in rows[0] if k != "failed"] if rows else ["transport"]
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    pngs = plot(out_dir, rows, meta)
    head = ("date: %(date)s  machine: %(machine)s  load(1m): %(load)s\n"
            "command: %(command)s\nwindow %(window)s, median of %(reps)s, "
            "pinned: %(pin)s, pool bytes: %(pool)s\n" % meta)
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(head.replace("\n", "  \n") + "\n" +
                table_text(rows, markdown=True) + "\n")
    print(head)
    print(table_text(rows))
    print("\nratios: > 1 means ucxp2p is better (latency ratios are "
          "other/ucxp2p); ucxp2p: application buffers registered with "
          "p2p_mem_register; ucxp2p_lib: buffers from p2p_mem_alloc (as "
          "ucx_perftest's come from UCX); reps: ucxp2p's runs that "
          "succeeded / runs; FAIL: every run failed (value) or ucxp2p "
          "failed a run (met); setup_first_msg: p2p_comm_create + first "
          "message, setup_create: p2p_comm_create alone (slowest rank's "
          "median)")
    for p in pngs:
        print("plot: %s" % p)
