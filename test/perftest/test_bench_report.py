#!/usr/bin/env python3
"""tools/bench: bench_report.py's verdicts from repetitions that failed, and
run_baseline.py's exit status and options, with stand-in tools (a fake
launcher, p2p_perftest and ucx_perftest written here: no measurement).
Run by bench_report_test.sh."""
import contextlib
import csv
import io
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("P2P_TOP_SRCDIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BENCH = os.path.join(SRC, "tools", "bench")
sys.path.insert(0, BENCH)
sys.dont_write_bytecode = True  # keep the source tree clean
import bench_report  # noqa: E402


def row(impl, test, value, status="ok", transport="shm", size=65536,
        unit="MiB/s"):
    return {"transport": transport, "impl": impl, "test": test, "size": size,
            "value": value, "unit": unit, "status": status}


def summary(raw):
    return {(r["transport"], r["test"], r["size"]): r
            for r in bench_report.summary_rows(bench_report.medians(raw))}


class Verdicts(unittest.TestCase):
    def test_met_and_missed(self):
        s = summary([row("ucxp2p", "bw", 100.0), row("ucx_perftest", "bw", 100.0),
                     row("ucxp2p", "rate", 50.0, unit="msg/s", size=8),
                     row("ucx_perftest", "rate", 100.0, unit="msg/s", size=8)])
        self.assertEqual(s[("shm", "bw", 65536)]["target_met"], "yes")
        self.assertEqual(s[("shm", "rate", 8)]["target_met"], "NO")
        self.assertEqual(s[("shm", "bw", 65536)]["reps"], "1/1")

    def test_every_run_failed_is_fail_not_blank(self):
        s = summary([row("ucxp2p", "bw", None, "rc=1"),
                     row("ucx_perftest", "bw", 100.0)])
        r = s[("shm", "bw", 65536)]
        self.assertEqual(r["target_met"], "FAIL")
        self.assertEqual(r["reps"], "0/1")
        self.assertIn("ucxp2p", r["failed"])
        self.assertIn("FAIL", bench_report.table_text([r]))

    def test_a_failed_repetition_fails_the_target(self):
        # the two good runs alone would meet it
        raw = [row("ucxp2p", "bw", 100.0), row("ucxp2p", "bw", 100.0),
               row("ucxp2p", "bw", None, "timeout after 120s")]
        raw += [row("ucx_perftest", "bw", 100.0)] * 5
        r = summary(raw)[("shm", "bw", 65536)]
        self.assertEqual(r["ucxp2p"], 100.0)
        self.assertEqual(r["target_met"], "FAIL")
        # ucxp2p's count, not the most any tool ran
        self.assertEqual(r["reps"], "2/3")
        self.assertEqual(r["failed_runs"], "ucxp2p:1/3")

    def test_rows_of_failed_points_are_kept(self):
        raw = [row("ucxp2p", "batch", None, "rc=1", size=524288),
               row("ucxp2p", "setup_create", None, "rc=1", size=2, unit="us"),
               row("ucxp2p", "setup_first_msg", None, "rc=1", size=2, unit="us"),
               row("ucxp2p", "mem_per_comm", None, "rc=1", size=8, unit="KiB")]
        s = summary(raw)
        self.assertEqual(s[("shm", "batch", 524288)]["target_met"], "FAIL")
        self.assertEqual(s[("shm", "setup_first_msg", 2)]["target_met"], "FAIL")
        self.assertEqual(s[("shm", "mem_per_comm", 8)]["target_met"], "FAIL")
        self.assertEqual(s[("shm", "setup_create", 2)]["target_met"], "")

    def test_setup_target_is_create_plus_first_message(self):
        s = summary([row("ucxp2p", "setup_create", 400.0, size=2, unit="us"),
                     row("ucxp2p", "setup_first_msg", 1200.0, size=2, unit="us")])
        self.assertEqual(s[("shm", "setup_first_msg", 2)]["target_met"], "NO")
        self.assertEqual(s[("shm", "setup_create", 2)]["target"], "")

    def test_no_baseline_is_not_a_verdict(self):
        s = summary([row("ucxp2p", "batch", 100.0, size=524288)])
        self.assertEqual(s[("shm", "batch", 524288)]["target_met"], "n/a")

    def test_failed_runs_by_prefix(self):
        raw = [row("ucxp2p", "bw", None, "rc=1"), row("ucxp2p_lib", "bw", 1.0),
               row("ucx_perftest", "bw", None, "failed")]
        self.assertEqual(bench_report.failed_runs(raw, "ucxp2p"),
                         {"ucxp2p": (1, 1)})

    def test_files_show_the_failures(self):
        d = tempfile.mkdtemp()
        try:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                bench_report.write_all(d, [row("ucxp2p", "bw", None, "rc=1"),
                                           row("ucx_perftest", "bw", 10.0)],
                                       {"date": "d", "machine": "m", "command": "c",
                                        "load": "l", "window": 64, "reps": 1,
                                        "pin": False, "pool": 0})
            self.assertIn("FAIL", printed.getvalue())
            with open(os.path.join(d, "results.csv")) as f:
                res = list(csv.DictReader(f))
            self.assertEqual(res[0]["status"], "rc=1")
            with open(os.path.join(d, "summary.csv")) as f:
                summ = list(csv.DictReader(f))
            self.assertEqual(summ[0]["target_met"], "FAIL")
            self.assertEqual(summ[0]["reps"], "0/1")
        finally:
            shutil.rmtree(d)


FAKE_LAUNCHER = """#!/bin/sh
while [ "$1" != "--" ]; do shift; done
shift
exec "$@"
"""
# p2p_perftest's CSV: bw_MiBps 1000, msg_rate 1e7, lat_p50_us 0.1 (and
# every extra value the runner reads)
FAKE_PERFTEST = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/perftest.args"
echo "test,size,lat_p50_us,bw_MiBps,msg_rate,extra"
echo "x,8,0.1,1000,10000000,create_us_p50_rank_max=50;\
create_first_msg_us_p50_rank_max=150;rss_KiB_per_connected_comm_max=100"
"""
FAKE_UCX_PERFTEST = """#!/bin/sh
[ "$1" = 127.0.0.1 ] || exit 0
echo "1000,0.1,0.1,0.1,1000,1000,10000000,10000000"
"""


class Runner(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        for name, text in (("launcher", FAKE_LAUNCHER),
                           ("p2p_perftest", FAKE_PERFTEST),
                           ("ucx_perftest", FAKE_UCX_PERFTEST)):
            path = os.path.join(self.dir, name)
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, 0o755)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def run_baseline(self, perftest, *args):
        out = os.path.join(self.dir, "out")
        env = dict(os.environ, PATH=self.dir + os.pathsep + os.environ["PATH"])
        p = subprocess.run([sys.executable, os.path.join(BENCH, "run_baseline.py"),
                            "--p2prun", os.path.join(self.dir, "launcher"),
                            "--perftest", perftest, "--no-mpi", "--no-pin",
                            "--transports", "shm", "--reps", "1",
                            "--out", out] + list(args),
                           env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=120)
        with open(os.path.join(out, "summary.csv")) as f:
            return p, list(csv.DictReader(f))

    def test_a_failing_perftest_fails_the_run(self):
        p, rows = self.run_baseline("/bin/false", "--sizes", "64K")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("p2p_perftest failed", p.stderr)
        bw = [r for r in rows if r["test"] == "bw"][0]
        self.assertEqual(bw["target_met"], "FAIL")
        self.assertTrue(any(r["test"] == "setup_first_msg" for r in rows))

    def test_quick_keeps_the_sizes_and_budget_given(self):
        fake = os.path.join(self.dir, "p2p_perftest")
        p, rows = self.run_baseline(fake, "--quick", "--sizes", "1M",
                                    "--budget", "1G")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(sorted({r["size"] for r in rows if r["test"] == "bw"}),
                         [str(1 << 20)])
        with open(os.path.join(self.dir, "perftest.args")) as f:
            bw = [l.split() for l in f if l.startswith("-t bw")]
        # 1G / (1M x window 64) = 16 timed windows (--quick's 64M: 8)
        self.assertEqual(bw[0][bw[0].index("-n") + 1], "16")
        setup = [r for r in rows if r["test"] == "setup_first_msg"][0]
        self.assertEqual((setup["ucxp2p"], setup["target_met"]), ("150.0", "yes"))
        p, rows = self.run_baseline(fake, "--quick")
        self.assertEqual(sorted({int(r["size"]) for r in rows if r["test"] == "bw"}),
                         [8, 65536, 4 << 20])


if __name__ == "__main__":
    unittest.main(verbosity=2)
