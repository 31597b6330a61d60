#!/usr/bin/env python3
"""Judged campaigns on the Arm64 guest (arch = arm64), end to end.

run/campaigns/arm64-small.ini on vmce-10.2-arm64 (skipped, saying so, where
it is not built): an AO with early kill and an AR with late kill on a dirty
anonymous page, vmced's simulated host errors told through GHES and SEA.
Both pass, and the evidence behind each verdict is checked here again, as a
user would: the journal's path (ghes-qmp, sea) and the workload's GPA, the
victim's SIGBUS code (BUS_MCEERR_AO, BUS_MCEERR_AR) at its own page, the
handler's "recovery action" line, HardwareCorrupted +4 kB, the guest alive;
the records carry arch arm64 and the QEMU's commands, the report names the
arm64 kernel.

Then the same AO and AR under Debian 12's own qemu-system-aarch64
(debian-7.2-arm64): vmced refuses each in one line (its expected outcome,
"refused"), the guest is told nothing, and the refused AR leaves the VM
paused. And what an arm64 guest cannot have is refused in one line with the
file's line, exit status 2, before anything runs.
Suite check-all (make check-all builds the guest and the QEMU).
"""
import json
import os
import subprocess
import sys

from common import Tap, paths, prerequisites_arm64, workdir
from vmcelab import arm64

BUS_MCEERR_AR = 4
BUS_MCEERR_AO = 5

tap = Tap()
prerequisites_arm64(tap)
work = workdir("arm64-campaign")
CAMPAIGN = os.path.join(paths.ROOT, "run", "campaign")
SMALL = os.path.join(paths.ROOT, "run", "campaigns", "arm64-small.ini")


def campaign(*args, timeout=900):
    return subprocess.run([sys.executable, CAMPAIGN, *args], capture_output=True, text=True, timeout=timeout)


def results(outdir):
    with open(os.path.join(outdir, "results.jsonl")) as f:
        recs = [json.loads(line) for line in f]
    return [r for r in recs if r.get("type") == "case"]


def check_told(rec, name, path, code):
    """A told error's evidence, read from its record as a user reads it"""
    obs = rec.get("observed") or {}
    tap.eq(rec["verdict"], "pass", f"{name}: pass ({'; '.join(rec.get('reasons') or [])[:200]})")
    w = (obs.get("workloads") or [{}])[0]
    ev = next((i for i in obs.get("injected") or [] if isinstance(i, dict)), {})
    tap.ok(ev.get("result") == "injected" and ev.get("path") == path,
           f"{name}: vmced told the guest through path {path}", diag=ev)
    tap.eq(int(ev.get("gpa") or "0", 16) >> 12, int(w.get("gpa") or "0", 16) >> 12,
           f"{name}: journaled at the workload's GPA ({ev.get('gpa')}, page {w.get('gpa')})")
    sig = (obs.get("signals") or [{}])[0]
    tap.eq(sig.get("code"), code, f"{name}: the process got SIGBUS code {code}")
    tap.eq(int(sig.get("addr") or "0", 16) >> 12, int(w.get("va") or "0", 16) >> 12,
           f"{name}:   at its own page ({sig.get('addr')})")
    tap.eq(tuple((obs.get("actions") or {}).get(w.get("pfn")) or ()), ("dirty LRU page", "Recovered"),
           f"{name}: the handler's line: recovery action for dirty LRU page: Recovered")
    tap.eq(obs.get("hardware_corrupted_kb"), 4, f"{name}: HardwareCorrupted grew by 4 kB")
    tap.ok(obs.get("guest_alive") and obs.get("qemu_alive"), f"{name}: guest and QEMU alive")


def case_forwarded():
    try:
        arm64.qemu_binary(arm64.DEFAULT_QEMU)
    except arm64.Arm64Error as e:
        tap.skip("the small Arm64 campaign on vmce-10.2-arm64", str(e))
        return
    out = os.path.join(work, "small")
    res = campaign("--fresh", "--out", out, SMALL)
    tap.ok(res.returncode == 0, "run/campaign arm64-small.ini exits 0", diag=res.stdout[-3000:] + res.stderr[-2000:])
    recs = {r["case"]["kind"]: r for r in results(out)}
    tap.eq(sorted(recs), ["ao", "ar"], "an AO and an AR ran")
    for r in recs.values():
        tap.ok(r["case"]["arch"] == "arm64" and r["case"]["kernel"] == arm64.KERNEL
               and (r["case"]["qemu_info"] or {}).get("sea") is True,
               f"{r['case']['kind']}: recorded as arm64, {arm64.KERNEL}, a QEMU with x-vmce-inject-sea",
               diag=r["case"])
    if "ao" in recs:
        check_told(recs["ao"], "AO, early kill", "ghes-qmp", BUS_MCEERR_AO)
    if "ar" in recs:
        check_told(recs["ar"], "AR, late kill", "sea", BUS_MCEERR_AR)
    with open(os.path.join(out, "report.html")) as f:
        page = f.read()
    tap.ok(f"guest kernel {arm64.KERNEL}" in page.lower(), "the report's summary names the arm64 kernel")


def case_refused():
    spec = os.path.join(work, "refused.ini")
    with open(spec, "w") as f:
        f.write(open(SMALL).read().replace("disk = false", f"disk = false\nqemu = {arm64.DEBIAN_QEMU}"))
    out = os.path.join(work, "refused")
    res = campaign("--fresh", "--out", out, spec)
    tap.ok(res.returncode == 0, "under Debian's qemu-system-aarch64 the campaign exits 0 (refusal expected)",
           diag=res.stdout[-3000:] + res.stderr[-2000:])
    for r in results(out):
        obs, kind = r.get("observed") or {}, r["case"]["kind"]
        ev = next((i for i in obs.get("injected") or [] if isinstance(i, dict)), {})
        tap.ok(r["verdict"] == "pass" and ev.get("result") == "refused" and "\n" not in (ev.get("detail") or ""),
               f"{kind}: vmced refused it in one line: {ev.get('detail')}", diag=r.get("reasons"))
        tap.ok(not obs.get("signals"), f"{kind}: nobody in the guest was signalled")
        if kind == "ar":
            tap.eq(obs.get("qemu_status"), "paused", "ar: the VM is left paused, QEMU alive")
        else:
            tap.ok(obs.get("guest_alive"), "ao: the guest runs on")


def case_bad_files():
    for text, said in (("accel = kvm", "TCG only"), ("cpu = Skylake-Client", "not a CPU model"),
                       ("kernel = debian-6.1", "an x86 guest kernel")):
        spec = os.path.join(work, "bad.ini")
        with open(spec, "w") as f:
            f.write(f"[guest arm]\narch = arm64\nqemu = {arm64.DEBIAN_QEMU}\n{text}\n[case c]\n")
        res = campaign("--fresh", "--out", os.path.join(work, "bad"), spec, timeout=60)
        lines = res.stderr.strip().splitlines()
        tap.ok(res.returncode == 2 and len(lines) == 1 and f"{spec}:4:" in lines[0] and said in lines[0],
               f"{text}: refused in one line with its line ({lines[-1] if lines else ''})", diag=res.stderr)


tap.case("a small campaign on vmce-10.2-arm64", case_forwarded)
tap.case("refused under Debian's qemu-system-aarch64", case_refused)
tap.case("what an arm64 guest cannot have", case_bad_files)
tap.done()
