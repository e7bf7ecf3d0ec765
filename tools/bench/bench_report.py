"""Summary, ratio table, CSV and PNG plot for run_baseline.py.

Input rows: {transport, impl, test, size, value, unit}, one per repetition.
Everything is reported as the median of the repetitions.
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


def medians(rows):
    """{(transport, test, size): {impl: (median, unit, n)}}"""
    groups = {}
    for r in rows:
        key = (r["transport"], r["test"], r["size"])
        groups.setdefault(key, {}).setdefault(r["impl"], []).append(r)
    out = {}
    for key, by_impl in groups.items():
        out[key] = {}
        for impl, rs in by_impl.items():
            out[key][impl] = (statistics.median(x["value"] for x in rs),
                              rs[0]["unit"], len(rs))
    return out


def target_of(transport, test, size, med, impl="ucxp2p"):
    """(text, met) for the issue's targets; None when none applies."""
    p2p = med.get(impl, (None,))[0]
    ucx = med.get("ucx_perftest", (None,))[0]
    ob1 = med.get("mpi_ob1", (None,))[0]
    if p2p is None:
        return None
    if test == "bw" and size >= 65536 and ucx:
        return (">=0.97x tag_bw", p2p / ucx >= 0.97)
    if test == "lat" and transport == "shm" and ucx:
        return ("<= tag_lat+0.2us", p2p <= ucx + 0.2)
    if test == "rate" and ucx:
        return (">=0.9x tag_bw rate", p2p / ucx >= 0.9)
    if test == "batch" and ob1:
        return (">=1.2x MPI ob1", p2p / ob1 >= 1.2)
    if test == "setup":
        return ("<=1000us", p2p <= 1000)
    if test == "mem_per_comm":
        return ("<=8MB", p2p * 1024 <= 8e6)
    return None


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
             "rate_serialized": 4, "batch": 5, "setup": 6, "first_msg": 7,
             "mem_per_comm": 8}
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
            "reps": max(v[2] for v in m.values()),
            "target": t[0] if t else "",
            "target_met": ("yes" if t[1] else "NO") if t else "",
            "target_met_lib": ("yes" if tl[1] else "NO") if tl else "",
        })
    return rows


def size_label(row):
    if row["test"] in ("setup", "first_msg", "mem_per_comm"):
        return "%d ranks" % row["size"]
    return human(row["size"])


def table_text(rows, markdown=False):
    head = ["transport", "test", "size", "unit", "ucxp2p", "ucxp2p_lib",
            "ucx_perftest", "ucx_pt_-e", "mpi_ob1", "mpi_ucx", "p2p/ucx",
            "lib/ucx", "p2p/ucx-e", "p2p/ob1", "lib/ob1", "p2p/mpi-ucx",
            "target", "met", "met(lib)"]
    lines = []
    body = []
    for r in rows:
        body.append([r["transport"], r["test"], size_label(r), r["unit"],
                     fmt(r["ucxp2p"]), fmt(r["ucxp2p_lib"]),
                     fmt(r["ucx_perftest"]), fmt(r["ucx_perftest_e"]),
                     fmt(r["mpi_ob1"]), fmt(r["mpi_ucx"]),
                     fmt(r["ratio_ucx_perftest"]),
                     fmt(r["ratio_lib_ucx_perftest"]),
                     fmt(r["ratio_ucx_perftest_e"]),
                     fmt(r["ratio_mpi_ob1"]), fmt(r["ratio_lib_mpi_ob1"]),
                     fmt(r["ratio_mpi_ucx"]), r["target"], r["target_met"],
                     r["target_met_lib"]])
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
                                          "size", "value", "unit"])
        w.writeheader()
        w.writerows(raw)
    rows = summary_rows(medians(raw))
    with open(os.path.join(out_dir, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()) if rows
                           else ["transport"])
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
          "ucx_perftest's come from UCX)")
    for p in pngs:
        print("plot: %s" % p)
