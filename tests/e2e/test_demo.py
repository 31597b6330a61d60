#!/usr/bin/env python3
"""`make demo`, the README's first command, as a newcomer runs it: the whole
path once (a guest, vmced attached, an AO and an AR error under two guest
processes), then the quick campaign and its report. What it prints is what
a newcomer reads, so that is what is checked."""
import json
import os
import re
import subprocess

from common import Tap, paths, prerequisites

tap = Tap()
prerequisites(tap)
report = os.path.join(paths.build_dir(), "campaigns", "quick", "report.html")
try:
    os.unlink(report)
except FileNotFoundError:
    pass
# the same build directory as the tests' (make check's BUILD)
r = subprocess.run(["make", "-C", paths.ROOT, "demo", f"BUILD={paths.build_dir()}"],
                   capture_output=True, text=True, timeout=900)
out = r.stdout
tap.ok(r.returncode == 0, "make demo exits 0", diag=(out + r.stderr)[-3000:])
tap.ok(re.search(r"got SIGBUS si_code=5 \(BUS_MCEERR_AO\) si_addr=0x[0-9a-f]+ \(its own page\)", out),
       "the first guest process got BUS_MCEERR_AO at its own page", diag=out[-3000:])
tap.ok(re.search(r"got SIGBUS si_code=4 \(BUS_MCEERR_AR\) si_addr=0x[0-9a-f]+ \(its own page\)", out),
       "the second got BUS_MCEERR_AR at its own page")
tap.eq(len(re.findall(r"recovery action for dirty LRU page: Recovered", out)), 2,
       "the guest kernel recovered both pages")
tap.ok("demo: OK" in out and "QEMU still running" in out, "the demo says OK, QEMU ran to the end")
m = re.search(r"campaign quick: (\d+) case\(s\) in .*: (\d+) pass", out)
# the cases that did not pass, each with its reason (results.jsonl), not the
# tail of a long log
results = os.path.join(os.path.dirname(report), "results.jsonl")
others = []
if os.path.exists(results):
    with open(results) as f:
        others = [r for r in map(json.loads, f) if "case" in r and r.get("verdict") != "pass"]
tap.ok(m and m.group(1) == m.group(2), "the quick campaign: every case passed",
       diag="\n".join([m.group(0) if m else out[-2000:]] +
                       [f"{r['verdict']}: {r['case']['id']}: {'; '.join(r.get('reasons') or [])}"
                        for r in others]))
m = re.search(r"Verdicts: (\d+) as expected", out)
tap.ok(m and int(m.group(1)) >= 30, "its verdicts are as expected", diag=m.group(0) if m else None)
tap.ok(os.path.getsize(report) > 10000 if os.path.exists(report) else False,
       f"the report is written ({report})")
left = subprocess.run(["pgrep", "-f", os.path.join(paths.build_dir(), "demo")], capture_output=True, text=True)
tap.eq(left.stdout.split(), [], "nothing of the demo is left running")
tap.done()
