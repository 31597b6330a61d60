#!/usr/bin/env python3
"""Simulated vs real host errors (run/campaign --errors simulated,real):
records matched across the two runs, and what differs said field by field."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "run", "lib"))

from vmcelab import errorcompare  # noqa: E402


def rec(inject, page="anon-dirty", kind="ao", kernel="debian-6.1", code="BUS_MCEERR_AO", lsb=12,
        action=("dirty LRU page", "Recovered"), host_lsb=12, not_run=None, panic=None, own=True,
        verdict="pass"):
    key = f"found/{page}/{kind}/early/{inject}/recovery1/0"
    # vmced's record: inside the real case's, the simulated case's own
    vmced = {"vmced": {"si_code": "BUS_MCEERR_AR" if kind == "ar" else "BUS_MCEERR_AO", "lsb": host_lsb,
                       "result": "injected", "mce": {"kind": "SRAR" if kind == "ar" else "SRAO"}}}
    va = "0x7f0000001000"
    obs = {"signals": [{"pid": 1, "code": 5, "code_name": code, "addr": va if own else "0x1000",
                        "lsb": lsb, "va": va}] if code else [],
           "actions": {"0x1f86c": list(action)} if action else {},
           "injected": [dict(vmced, **({"host": {"pfn": "0x1"}} if inject == "host-real" else {}))
                        if inject == "host-real" else vmced["vmced"]],
           "qemu_alive": True, "guest_alive": True, "panic": panic}
    return {"type": "case", "case": {"id": f"{key}@{kernel}", "key": key, "kernel": kernel, "page": page,
                                     "kind": kind, "inject": inject},
            "verdict": "not run" if not_run else verdict, "not_run": not_run,
            "observed": None if not_run else obs}


class Compare(unittest.TestCase):
    def test_same_case_agrees(self):
        rows = errorcompare.pair([rec("host")], [rec("host-real")])
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["diff"], [])
        self.assertEqual(rows[0]["key"], "found/anon-dirty/ao/early/host/recovery1/0")
        self.assertEqual(errorcompare.agreement(rows), {"debian-6.1": (1, 1, 0)})
        self.assertEqual(errorcompare.differs_text(rows), [])

    def test_each_fact_differs_on_its_own(self):
        cases = {
            "lsb": (rec("host"), rec("host-real", lsb=21)),
            "si_code": (rec("host"), rec("host-real", own=False)),
            "handler": (rec("host"), rec("host-real", action=("unsplit thp", "Ignored"))),
            "host_signal": (rec("host"), rec("host-real", host_lsb=21)),
        }
        for field, (s, r) in cases.items():
            diff = errorcompare.pair([s], [r])[0]["diff"]
            self.assertIn(field, [d[0] for d in diff], field)
        # a panic is another outcome, whatever else the two share
        diff = errorcompare.pair([rec("host")], [rec("host-real", panic="Kernel panic - not syncing")])[0]["diff"]
        self.assertEqual(diff[0], ("outcome", "process killed (AO)", "guest panicked"))
        lines = errorcompare.differs_text(errorcompare.pair([rec("host")], [rec("host-real", lsb=21,
                                                                                verdict="fail")]))
        self.assertEqual(lines, ["found/anon-dirty/ao/early/host/recovery1/0@debian-6.1: lsb: simulated 12, "
                                 "real 21"])
        # both judged pass: outcomes the kernel's table allows either way, and said so
        lines = errorcompare.differs_text(errorcompare.pair([rec("host")], [rec("host-real", lsb=21)]))
        self.assertTrue(lines[0].endswith("real 21 (both pass: the guest kernel gives either)"), lines)

    def test_not_run_is_not_compared(self):
        rows = errorcompare.pair([rec("host"), rec("host", page="slab")],
                                 [rec("host-real", not_run="not a real error here: kernel memory"),
                                  rec("host-real", page="slab")])
        self.assertEqual(errorcompare.agreement(rows), {"debian-6.1": (1, 1, 1)})
        self.assertIn("real: not run (not a real error here: kernel memory)",
                      errorcompare.differs_text(rows)[0])
        # one side missing altogether, and another kernel is another row
        rows = errorcompare.pair([rec("host", kernel="vmce-6.1")], [rec("host-real")])
        self.assertEqual(errorcompare.agreement(rows), {"vmce-6.1": (0, 0, 1), "debian-6.1": (0, 0, 1)})

    def test_guest_made_errors_have_no_row(self):
        self.assertEqual(errorcompare.pair([rec("guest-madvise")], [rec("guest-madvise")]), [])

    def test_page(self):
        rows = errorcompare.pair([rec("host"), rec("host", page="thp")],
                                 [rec("host-real", lsb=21), rec("host-real", page="thp")])
        html = errorcompare.render({"name": "t<x>", "sim_report": "simulated/report.html",
                                    "real_report": "real/report.html"}, rows)
        self.assertIn("t&lt;x&gt;", html)
        self.assertIn("<b>1 of 2</b> cases agree", html)
        self.assertIn("lsb: simulated 12, real 21", html)
        self.assertIn("class=d", html)


if __name__ == "__main__":
    unittest.main(verbosity=2)
