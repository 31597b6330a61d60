#!/usr/bin/env python3
"""A campaign with real host memory errors: run/hostlab --campaign runs
run/campaigns/hostlab.ini inside the host lab's L1, whose kernel poisons
the page behind each guest page (inject = host-real), sends QEMU the real
SIGBUS, and vmced forwards it. One L1 boot, one L2 guest reused.

Asserts, per case: the verdict against the Linux 6.1 table is pass; L1
poisoned a host page and vmced journaled the kernel's signal (AO, or AR
for consumed cases) with the workload's own GPA; then that the report was
written, and the bad input: the same file on a host that cannot poison is
refused with its file:line before anything runs, and a broken campaign
file is refused before L1 boots.
"""
import json
import os
import subprocess
import sys
import tempfile

from common import Tap, paths

sys.path.insert(0, os.path.join(paths.ROOT, "run", "lib"))
from vmcelab.campaign import Campaign, host_can_poison  # noqa: E402

tap = Tap()
if os.geteuid() != 0:
    tap.skip("host lab campaign", "it needs root")
    tap.done()

SPEC = os.path.join(paths.ROOT, "run", "campaigns", "hostlab.ini")
HOSTLAB = os.path.join(paths.ROOT, "run", "hostlab")
out = tempfile.mkdtemp(prefix="hostlab-campaign-", dir=os.path.join(paths.build_dir(), "e2e"))
res = subprocess.run([sys.executable, HOSTLAB, "--campaign", SPEC, "--out", out],
                     capture_output=True, text=True, timeout=1800)
results_path = os.path.join(out, "results.jsonl")
if not os.path.exists(results_path):
    tap.bail(f"run/hostlab --campaign wrote no results ({res.returncode}): {res.stderr.strip()[-2000:]}")
records = [json.loads(ln) for ln in open(results_path) if ln.strip()]
cases = {r["case"]["id"]: r for r in records if r.get("type") == "case"}
wanted = Campaign.load(SPEC).cases
tap.eq(sorted(cases), sorted(c.id for c in wanted), "every case of hostlab.ini ran and was recorded")

for case in wanted:
    r = cases.get(case.id)
    if r is None:
        continue
    tap.ok(r["verdict"] == "pass", f"{case.id}: pass",
           diag={"reasons": r.get("reasons"), "not_run": r.get("not_run")})
    obs = r.get("observed") or {}
    injected = (obs.get("injected") or [{}])[0]
    host, rec = injected.get("host") or {}, injected.get("vmced") or {}
    gpa = (obs.get("workloads") or [{}])[0].get("gpa")
    want = "BUS_MCEERR_AR" if case.kind == "ar" else "BUS_MCEERR_AO"
    tap.ok(host.get("pfn") and rec.get("source") == "kernel" and rec.get("si_code") == want
           and rec.get("result") == "injected" and rec.get("gpa") == gpa,
           f"{case.id}: L1 poisoned host pfn {host.get('pfn')}; vmced journaled the kernel's "
           f"{want} at the workload's GPA {gpa}", diag={"host": host, "vmced": rec})

report = os.path.join(out, "report.html")
tap.ok(os.path.exists(report) and "host lab" in open(report).read(),
       "the HTML report was written, and says the errors were real host errors")
tap.ok(res.returncode == 0 and f"{len(wanted)} pass" in res.stdout, "run/hostlab --campaign exits 0 and sums up",
       diag=res.stdout[-800:] + res.stderr[-800:])

# bad input
if host_can_poison():
    tap.skip("host-real refused on a host without MEMORY_FAILURE", "this host's kernel has it")
else:
    res = subprocess.run([sys.executable, os.path.join(paths.ROOT, "run", "campaign"), SPEC,
                          "--out", tempfile.mkdtemp(dir=out)], capture_output=True, text=True, timeout=60)
    errors = [ln for ln in res.stderr.splitlines() if "error:" in ln]
    tap.ok(res.returncode == 2 and len(errors) == 1 and "hostlab.ini:" in errors[0]
           and "needs a host kernel with MEMORY_FAILURE" in errors[0] and "run/hostlab --campaign" in errors[0],
           "bad input: host-real on a host that cannot poison: one error line with file:line, "
           "the way out, nothing run", diag=res.stderr[-800:])
broken = os.path.join(out, "broken.ini")
with open(broken, "w") as f:
    f.write("[case a]\ninject = host-real\nrepeat = true\n")
res = subprocess.run([sys.executable, HOSTLAB, "--campaign", broken], capture_output=True, text=True,
                     timeout=120)
errors = [ln for ln in res.stderr.splitlines() if "error:" in ln]
tap.ok(res.returncode == 2 and len(errors) == 1 and "broken.ini:3: repeat needs inject = host" in errors[0]
       and "booting" not in res.stderr,
       "bad input: a campaign file hostlab cannot run is refused with file:line before L1 boots",
       diag=res.stderr[-800:])
tap.done()
