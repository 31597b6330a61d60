#!/usr/bin/env python3
"""A campaign with real host memory errors, side by side with the same
cases simulated: run/campaign --errors simulated,real runs
run/campaigns/hostlab.ini here with vmced's simulated errors, and (through
run/hostlab --campaign) inside the host lab's L1, whose kernel poisons the
page behind each guest page (inject = host-real), sends QEMU the real
SIGBUS, and vmced forwards it. One L1 boot, one L2 guest reused; one case
per page type the guest survives, and slab last.

Asserts, per case: the verdict against the Linux 6.1 table is pass, real
and simulated; L1 poisoned a host page and vmced journaled the kernel's
signal (AO, or AR for consumed cases) with the workload's own GPA; the two
runs agree on the guest's outcome, the victim's si_code and lsb and the
handler's line; then that the reports were written, and the bad input: the same file on a host that cannot poison is
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
res = subprocess.run([sys.executable, os.path.join(paths.ROOT, "run", "campaign"), "--errors", "simulated,real",
                      SPEC, "--out", out], capture_output=True, text=True, timeout=1800)
results_path = os.path.join(out, "real", "results.jsonl")
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

# the same cases with vmced's simulated errors, here
sim_path = os.path.join(out, "simulated", "results.jsonl")
sim = {r["case"]["id"]: r for r in (json.loads(ln) for ln in open(sim_path) if ln.strip())
       if r.get("type") == "case"} if os.path.exists(sim_path) else {}
sim_wanted = Campaign.load(SPEC, errors="simulated").cases
tap.ok(sorted(sim) == sorted(c.id for c in sim_wanted)
       and all(r["verdict"] == "pass" for r in sim.values()),
       f"the {len(sim_wanted)} cases simulated here all pass",
       diag={i: r.get("reasons") or r.get("not_run") for i, r in sim.items() if r["verdict"] != "pass"})

# side by side: every case compared, and the same on every fact. Kernel
# memory is the one exception: whether the guest kernel reads its poisoned
# slab page within the case's window is the guest's timing, not the
# simulation's (both are outcomes the table allows, and both runs must
# still pass)
TIMING = ("slab",)
compare_path = os.path.join(out, "errors.json")
rows = json.load(open(compare_path)) if os.path.exists(compare_path) else []
tap.eq(len(rows), len(wanted), "errors.json has a row per case")
for row in rows:
    page = row["key"].split("/")[1]
    same = row["diff"] == [] or (page in TIMING and row["diff"] is not None
                                 and all(d[0] == "outcome" for d in row["diff"]))
    tap.ok(row["sim_facts"] and row["real_facts"] and same,
           f"{row['key']}: simulated and real agree on si_code, lsb, handler line, the host's signal"
           + (" (the outcome may differ in timing)" if page in TIMING else ", and the guest's outcome"),
           diag={"simulated": row["sim_facts"], "real": row["real_facts"], "diff": row["diff"]})
agree = sum(1 for row in rows if row["diff"] == [])

report = os.path.join(out, "real", "report.html")
tap.ok(os.path.exists(report) and "host lab" in open(report).read(),
       "the real run's HTML report was written, and says the errors were real host errors")
page = os.path.join(out, "errors.html")
tap.ok(os.path.exists(page) and f"<b>{agree} of {len(wanted)}</b> cases agree" in open(page).read(),
       "errors.html puts the two side by side and counts the agreement")
tap.ok(res.returncode == 0 and f"{len(wanted)} pass" in res.stdout
       and f"debian-6.1: {agree} of {len(wanted)} cases agree" in res.stdout,
       "run/campaign --errors simulated,real exits 0 and sums up both runs and the agreement",
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
res = subprocess.run([sys.executable, HOSTLAB, "--campaign", SPEC, "--kernels", "debian-9.9"],
                     capture_output=True, text=True, timeout=120)
errors = [ln for ln in res.stderr.splitlines() if "error:" in ln]
tap.ok(res.returncode == 2 and len(errors) == 1 and "unknown kernel 'debian-9.9'" in errors[0]
       and "booting" not in res.stderr,
       "bad input: a kernel the lab cannot stage is refused in one line before L1 boots", diag=res.stderr[-800:])
res = subprocess.run([sys.executable, os.path.join(paths.ROOT, "run", "campaign"), "--errors", "real,bogus", SPEC],
                     capture_output=True, text=True, timeout=60)
tap.ok(res.returncode == 2 and res.stderr.count("error:") == 1 and "--errors real,bogus" in res.stderr,
       "bad input: --errors with a way that is not one: one error line, nothing run", diag=res.stderr[-800:])
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
