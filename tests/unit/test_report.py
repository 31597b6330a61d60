#!/usr/bin/env python3
"""The report writer: one HTML file, well-formed inline SVG, every case in it."""
import os
import sys
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "run", "lib"))

from vmcelab.report import (COLOURS, kernel_section, matrix_svg, outcome, render,  # noqa: E402
                            timeline_svg, times_svg)


def result(page, kind, verdict, ms=120.0, kill="early", inject="host"):
    case = dict(id=f"m/{page}/{kind}/{kill}/{inject}/recovery1/0", page=page, kind=kind, kill=kill,
                inject=inject, recovery=1, burst=1, repeat=False)
    obs = dict(actions={"0x42": ["dirty LRU page", "Recovered"]}, ms_to_action=ms,
               signals=[{"pid": 1, "code_name": "BUS_MCEERR_AO", "addr": "0x1000", "lsb": 12}],
               checks=[], panic=None, trouble=["WARNING: <odd> & \"quoted\""], hardware_corrupted_kb=4)
    return dict(case=case, verdict=verdict, observed=obs, reasons=["because <reasons>"],
                expected={"summary": "dirty LRU page: Recovered"}, not_run=None)


RESULTS = [result("anon-dirty", "ao", "pass"), result("anon-dirty", "ar", "fail", 300),
           result("shmem", "ao", "unexpected"), result("ksm", "ao", "not run", None),
           result("anon-dirty", "ao", "pass", kill="late")]
TIMELINE = [dict(vm="g-0", event="boot", start=0.0, end=3.0, boot=1),
            dict(vm="g-0", event="case", start=3.0, end=4.5, case="x", verdict="pass"),
            dict(vm="g-1", event="case", start=1.0, end=9.0, case="y", verdict="fail")]


class Report(unittest.TestCase):
    def test_svgs_are_well_formed(self):
        for svg in (matrix_svg(RESULTS), times_svg(RESULTS), timeline_svg(TIMELINE)):
            root = ET.fromstring(svg)
            self.assertTrue(root.tag.endswith("svg"))

    def test_matrix_cells_coloured_by_verdict(self):
        svg = matrix_svg(RESULTS)
        for verdict in ("pass", "fail", "unexpected", "not run"):
            self.assertIn(COLOURS[verdict], svg)
        # page types are rows, injections columns
        self.assertIn(">anon-dirty<", svg)
        self.assertIn(">AO late<", svg)

    def test_whole_report(self):
        page = render({"name": "t & <x>", "seed": 1, "time": 0}, RESULTS, TIMELINE)
        self.assertTrue(page.startswith("<!DOCTYPE html>"))
        self.assertIn("t &amp; &lt;x&gt;", page)
        self.assertNotIn("<odd>", page)  # escaped
        for r in RESULTS:
            self.assertIn(r["case"]["id"], page)
        self.assertEqual(page.count("<svg"), 3)
        # self-contained: nothing fetched from elsewhere
        self.assertNotIn("src=", page)
        self.assertNotIn("href=", page)

    def test_one_kernel_no_comparison(self):
        self.assertEqual(kernel_section(RESULTS), "")

    def test_kernels_side_by_side(self):
        def on(kernel, action, codes, crash=None, nearest=False):
            r = result("ksm", "ao", "pass")
            r["case"].update(kernel=kernel, key=r["case"]["id"], id=r["case"]["id"] + "@" + kernel)
            r["observed"]["actions"] = {"0x2baf": list(action)}
            r["observed"]["signals"] = [{"pid": p, "code_name": c} for p, c in codes]
            r["observed"]["aftermath"] = {"how": "ksm-merge", "crash": crash}
            r["expected"] = {"summary": "-", "nearest": nearest, "table": "debian-6.12"}
            return r
        same = [on(k, ("dirty LRU page", "Recovered"), [(1, "BUS_MCEERR_AO")]) for k in ("a", "b")]
        results = [
            on("debian-6.1", ("unmapping failed page", "Ignored"), [], crash="Fatal machine check"),
            on("vmce-6.1", ("dirty LRU page", "Recovered"), [(170, "BUS_MCEERR_AO")]),
            # addresses differ from run to run, not between kernels
            on("debian-6.12", ("dirty LRU page", "Recovered"), [(171, "BUS_MCEERR_AO")],
               crash="BUG: unable to handle page fault for address: ffff888002baf000"),
            on("/boot/vmlinuz-6.11", ("dirty LRU page", "Recovered"), [(2, "BUS_MCEERR_AO")],
               crash="BUG: unable to handle page fault for address: ffff888002ba3000", nearest=True),
        ]
        html = kernel_section(results)
        for k in ("debian-6.1", "vmce-6.1", "debian-6.12", "/boot/vmlinuz-6.11 (judged as debian-6.12)"):
            self.assertIn(f"<th>{k}</th>", html)
        self.assertIn("&asymp;", html)
        self.assertEqual(html.count("<li>"), 1, "one case, and it differs")
        self.assertEqual(outcome(results[2]), outcome(results[3]))
        self.assertIn("unmapping failed page: Ignored · no signal · then Fatal machine check", html)
        self.assertIn("nothing: every case came out the same", kernel_section(same))
        page = render({"name": "k"}, results, [])
        self.assertIn("Guest kernels side by side", page)

    def test_empty_times(self):
        self.assertIn("No case", times_svg([result("ksm", "ao", "not run", None)]))


if __name__ == "__main__":
    unittest.main(testRunner=unittest.TextTestRunner(stream=sys.stdout, verbosity=2))
