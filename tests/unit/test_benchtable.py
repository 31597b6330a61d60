#!/usr/bin/env python3
"""make bench's table (run/lib/vmcelab/benchtable.py): a figure whose part
did not run, or could not measure it, is "not measured" with why, never a
number; a measured one shows its value against its target; the JSON holds
the machine it was measured on."""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "run", "lib"))

from vmcelab import benchtable  # noqa: E402


def s(median, p99):
    return {"n": 200, "median": median, "p99": p99, "min": median, "max": p99}


TAIL = {"tail": {
    "hmp": {"measured": True, "ao": {"latency_us": s(1200, 5300), "to_monitor_us": s(60, 200),
                                     "qemu_us": s(1100, 5000), "held_us": s(14, 400)},
            "ar": {"latency_us": s(1800, 5900), "to_monitor_us": s(200, 900),
                   "qemu_us": s(1600, 5000), "held_us": s(1500, 4000)}},
    "inject-mce": {"measured": False, "why": "build/qemus/vmce-10.0/build/qemu-system-x86_64 is not "
                                             "built (make qemu)"}}}
def ov(ratios, bound, stops=None):
    xs = sorted(ratios)
    return {"measured": True, "ratio": xs[len(xs) // 2], "ratios": ratios,
            "ratio_interval": [xs[1], xs[-2], 0.961], "bound": bound, "stops_per_s": stops or {},
            "stopped_us": 0, "vmced_cpu_us": 3000, "attached_s": 18.2}


OVERHEAD = {"overhead_tcg": {
    "cpu": ov([0.995] * 9, 0.9998),
    "io": {"measured": False, "why": "disk-up: no data disk (/dev/vda) (NotFound)"},
    "ipi": ov([0.97] * 9, 0.9999, {"vcpu SIGUSR1": 12.5}),
    "noisy": ov([0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4], 0.9998),
    "noisy-costly": ov([0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4], 0.95),
    "old": {"measured": True, "ratio": 0.9, "signal_stops_per_s": {},
            "ops_per_s_detached": [1.0, 1.5], "ops_per_s_attached": [0.9, 1.2]}}}


class Table(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def write(self, name, data):
        with open(os.path.join(self.dir, f"bench-{name}.json"), "w") as f:
            json.dump(data, f)

    def rows(self):
        return {r["figure"]: r for r in benchtable.build(self.dir).rows}

    def test_nothing_measured_is_said_row_by_row(self):
        rows = self.rows()
        self.assertTrue(rows)
        for r in rows.values():
            self.assertTrue(r["value"].startswith("not measured: "), r)
            self.assertIsNone(r["met"], r)
            self.assertIn(r["how"], r["value"], "says which command measures it")

    def test_a_column_that_could_not_run_says_why(self):
        self.write("tail", TAIL)
        rows = self.rows()
        hmp = rows["AO signal-stop to injection acknowledged, hmp (median / p99)"]
        self.assertTrue(hmp["value"].startswith("1200 / 5300 us"), hmp)
        self.assertIn("vmced 60", hmp["value"])
        qmp = rows["AR signal-stop to injection acknowledged, inject-mce (median / p99)"]
        self.assertEqual(qmp["value"], "not measured: " + TAIL["tail"]["inject-mce"]["why"])
        self.assertIsNone(qmp["met"])
        self.assertNotIn("AO inject-mce over HMP, median", rows, "no ratio without both columns")

    def test_targets_met_and_missed(self):
        self.write("overhead", OVERHEAD)
        rows = self.rows()
        name = "throughput with vmced attached over not, TCG: "
        self.assertTrue(rows[name + "cpu"]["met"])
        self.assertEqual(rows[name + "cpu"]["target"], ">= 0.99")
        self.assertFalse(rows[name + "ipi"]["met"], "a direct interval wholly below fails whatever the bound")
        self.assertIn("12.5 stops/s", rows[name + "ipi"]["value"])
        self.assertIn("no data disk", rows[name + "io"]["value"])
        noisy = rows[name + "noisy"]
        self.assertTrue(noisy["met"], "an interval across the target is judged by the bound")
        self.assertIn("by the bound", noisy["value"])
        costly = rows[name + "noisy-costly"]
        self.assertIsNone(costly["met"], "neither the interval nor the bound can judge it")
        self.assertIn("spans", costly["value"])
        self.assertTrue(rows[name + "old"]["value"].startswith("not measured: "), "no verdict from old figures")

    def test_p1_per_qemu(self):
        # run/hostlab --bench --qemus: a row per QEMU; a side the bench left
        # out by design (QEMU cannot recover there) is no row; both run and
        # not both recovered is "not measured" with why
        def row(accel, vm, qm, why=None):
            r = {"accel": accel, "kind": "ar", "to": "the guest's first machine-check line", "n": 10,
                 "vmced_ms": vm, "qemu_ms": qm, "ratio": vm / qm if vm and qm else None}
            if why:
                r["why"] = why
            return r
        self.write("p1", {"p1": [], "by_qemu": {
            "debian-7.2": [row("tcg", 128, None, "no recovery by both to time: vmced recovered; QEMU not run"),
                           row("kvm", None, None, "no recovery by both to time: vmced guest-panic; "
                                                  "QEMU guest-panic")],
            "vmce-10.0": [row("kvm", 143, 154), row("tcg", 300, 150)]}})
        rows = {k: v for k, v in self.rows().items() if "vmced over QEMU's own" in k}
        name = "{} {} ar: host poison to the guest's first machine-check line, vmced over QEMU's own (median of 10)"
        self.assertEqual(len(rows), 3, sorted(rows))
        self.assertNotIn(name.format("debian-7.2", "tcg"), rows, "a side not run by design is no row")
        self.assertIn("guest-panic", rows[name.format("debian-7.2", "kvm")]["value"])
        self.assertTrue(rows[name.format("vmce-10.0", "kvm")]["met"])
        self.assertFalse(rows[name.format("vmce-10.0", "tcg")]["met"], "2.00x misses <= 1.5x")

    def test_a_cut_short_file_is_not_measured(self):
        with open(os.path.join(self.dir, "bench-tail.json"), "w") as f:
            f.write('{"tail": {"hmp": ')  # a bench interrupted while writing
        rows = self.rows()
        r = rows["signal-stop to injection acknowledged (median / p99)"]
        self.assertTrue(r["value"].startswith("not measured"), r)

    def test_the_json_names_the_machine(self):
        self.write("overhead", OVERHEAD)
        with open(os.devnull, "w") as null:
            out, sys.stdout = sys.stdout, null
            try:
                path = benchtable.write(self.dir)
            finally:
                sys.stdout = out
        with open(path) as f:
            data = json.load(f)
        m = data["machine"]
        self.assertEqual(m["cores"], os.cpu_count())
        self.assertTrue(m["kernel"] and m["cpu_model"])
        self.assertIn("qemu", m)
        self.assertEqual(len(data["rows"]), len(benchtable.build(self.dir).rows))


if __name__ == "__main__":
    unittest.main()
