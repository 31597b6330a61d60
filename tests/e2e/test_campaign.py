#!/usr/bin/env python3
"""The quick campaign (run/campaigns/quick.ini) end to end, on vmce's own
guest kernel (vmce-6.1: Debian's 6.1 with guest-kernel/patches/): one real
guest, reused, every case judged. Each case's verdict must be pass, and the
evidence behind the main verdicts is checked here again, independently of
the judge: the victim's own SIGBUS, the handler's line, HardwareCorrupted,
fsync's EIO, the journal's GPA, QEMU alive; and what vmce's patches change:
a KSM page recovers, an mlocked page is reported as one. Then: resuming repeats nothing,
and bad campaign files and a case that cannot be set up are refused the way
run/campaigns/README.md says. The report, drawn by headless Chromium at
1280 px, fits the page and its summary names the cases that end the guest.
"""
import json
import os
import re
import subprocess
import sys

import report_browser
from common import Tap, paths, prerequisites, workdir

tap = Tap()
prerequisites(tap)
CAMPAIGN = os.path.join(paths.ROOT, "run", "campaign")


def campaign(*args, timeout=1200):
    return subprocess.run([sys.executable, CAMPAIGN, *args], capture_output=True, text=True,
                          timeout=timeout)


def results(outdir):
    with open(os.path.join(outdir, "results.jsonl")) as f:
        recs = [json.loads(line) for line in f]
    return {r["case"]["id"]: r for r in recs if r.get("type") == "case"}


out = workdir("campaign")
KERNEL = ("--kernels", "vmce-6.1")
res = campaign("--quick", *KERNEL, "--fresh", "--out", out)
tap.diag(res.stdout.strip().splitlines()[-1] if res.stdout.strip() else res.stderr[-2000:])
tap.eq(res.returncode, 0, "run/campaign --quick --kernels vmce-6.1: exit 0 (every case passed)")
cases = results(out)
tap.ok(len(cases) >= 30, f"the quick matrix ran ({len(cases)} cases)")
words = " ".join(res.stdout.split())
tap.ok(re.search(r"Guest kernel vmce-6\.1 \([^)]*\) survives \d+ of \d+ error kinds; it panics on: ", words)
       and "slab" in words.split("survives", 1)[-1],
       "run/campaign ends with what the guest survives and panics on, in words", diag=res.stdout[-600:])
for cid, r in sorted(cases.items()):
    tap.ok(r["verdict"] == "pass", f"{cid}: pass", diag="; ".join(r.get("reasons") or []))

# the guests after a guest-ending case are copies restored from the first boot
with open(os.path.join(out, "results.jsonl")) as f:
    timeline = [e for line in f for e in json.loads(line).get("timeline", [])]
restored = {e["boot"] for e in timeline if e["event"] == "boot" and e.get("restored")}
on_copies = [r for r in cases.values() if r["boot"] in restored]
tap.ok(restored and on_copies and all(r["verdict"] == "pass" for r in on_copies),
       f"{len(on_copies)} cases ran on {len(restored)} restored guests, and passed",
       diag=f"restored boots {sorted(restored)}")

with open(os.path.join(out, "vmced", "journal.jsonl")) as f:
    journal = [json.loads(line) for line in f]
journal_gpas = {e["gpa"] for e in journal if e["type"] == "memory-error" and e["result"] == "injected"}


def case(prefix):
    hits = [r for cid, r in cases.items() if cid.startswith(prefix)]
    if not hits:
        tap.ok(False, f"{prefix}: in the results")
        return None
    return hits[0]["observed"]


def own_signal(obs, pid, code, lsb=12):
    w = obs["workloads"][0]
    sig = [s for s in obs["signals"] if s["pid"] == pid]
    mask = ~((1 << lsb) - 1)
    return bool(sig) and sig[0]["code"] == code and sig[0]["lsb"] == lsb and \
        int(sig[0]["addr"], 16) & mask == int(w["va"], 16) & mask


obs = case("page-types/anon-dirty/ao/early/host")
if obs:
    w = obs["workloads"][0]
    tap.ok(own_signal(obs, w["pid"], 5), "anon-dirty, AO, early kill: BUS_MCEERR_AO at the process's own VA",
           diag=obs["signals"])
    tap.eq(obs["actions"][w["pfn"]], ["dirty LRU page", "Recovered"], "anon-dirty: the handler recovered it")
    tap.eq(obs["hardware_corrupted_kb"], 4, "anon-dirty: HardwareCorrupted grew by 4 kB")
    tap.ok(w["gpa"] in {hex(int(g, 16)) for g in journal_gpas}, "anon-dirty: the journal has the event at its GPA",
           diag=f"{w['gpa']} not in {sorted(journal_gpas)[:8]}...")
    tap.ok(obs["qemu_alive"] and obs["guest_alive"], "anon-dirty: QEMU and the guest are alive")
obs = case("late-kill/anon-dirty/ao/late")
if obs:
    tap.ok(own_signal(obs, obs["workloads"][0]["pid"], 4), "late kill: the touch gets BUS_MCEERR_AR at its VA",
           diag=obs["signals"])
obs = case("consumed/anon-dirty/ar")
if obs:
    tap.ok(own_signal(obs, obs["workloads"][0]["pid"], 4), "consumed: BUS_MCEERR_AR at the consumer's VA",
           diag=obs["signals"])
obs = case("page-types/hugetlb/ao/early")
if obs:
    tap.ok(own_signal(obs, obs["workloads"][0]["pid"], 5, lsb=21), "hugetlb: AO with si_addr_lsb 21",
           diag=obs["signals"])
obs = case("page-types/pagecache-dirty/ao/early")
if obs:
    tap.eq([c.get("fsync_errno") for c in obs["checks"]], [5], "dirty page cache: the writer's fsync returns EIO")
obs = case("page-types/pagecache-clean/ao/early")
if obs:
    tap.eq([c.get("reread_ok") for c in obs["checks"]], [True], "clean page cache: the reader reads the right data")
    tap.eq(obs["signals"], [], "clean page cache: nobody signalled")
obs = case("page-types/shared/ao/early")
if obs:
    w = obs["workloads"][0]
    tap.eq(sorted({s["pid"] for s in obs["signals"] if s["code"] == 5}), sorted(w["pids"]),
           "shared page: every process that maps it gets AO")
obs = case("recovery-off/")
if obs:
    tap.ok(obs["panic"], "memory_failure_recovery=0: the guest panics", diag=obs)
obs = case("ksm/ksm/ao/early")
if obs:
    w = obs["workloads"][0]
    action = list(obs["actions"].values())[0] or ["", ""]
    tap.eq(action[1], "Recovered", f"ksm: the KSM page recovers ({action[0]})")
    tap.eq(sorted({s["pid"] for s in obs["signals"] if s["code"] == 5}), sorted(w["pids"]),
           "ksm: every process mapping it gets BUS_MCEERR_AO")
    after = obs.get("aftermath") or {}
    tap.ok(obs["guest_alive"] and not obs["panic"] and not after.get("crash"),
           "ksm: no panic, even when ksmd merges the same data again", diag=after)
obs = case("page-types/mlock-dirty/ao/early")
if obs:
    tap.eq(list(obs["actions"].values())[0], ["dirty mlocked LRU page", "Recovered"],
           "mlock-dirty: reported as an mlocked page")

# interrupted or not, running again repeats nothing
again = campaign("--quick", *KERNEL, "--out", out, timeout=120)
tap.ok(again.returncode == 0 and "0 to go" in again.stdout, "running again resumes: nothing is repeated",
       diag=again.stdout[-800:] + again.stderr[-800:])
tap.eq(len(results(out)), len(cases), "resuming keeps every result")
report = os.path.join(out, "report.html")
page = open(report).read()
tap.ok(os.path.getsize(report) > 10000 and '<table class="matrix">' in page and page.count("<svg") >= 2,
       "the report has its outcome matrix and two charts")
# the report as a browser draws it (Debian's chromium, headless, 1280 px):
# nothing wider than the page, the guest-ending cases named in its summary
if report_browser.chromium():
    report_browser.check(tap, report, list(cases.values()), "the quick campaign's report")
else:
    tap.skip("the quick campaign's report in headless chromium at 1280 px",
             "no chromium (run/install-deps installs it)")

# bad input: named by file and line before anything runs
bad = os.path.join(out, "bad")
os.makedirs(bad, exist_ok=True)
specs = {
    "unknown-key.ini": ("[campaign]\nname = b\ncolour = red\n", "unknown-key.ini:3: unknown key 'colour'"),
    "no-hugepages.ini": ("[campaign]\nname = b\n[guest g]\nmem = 256M\n[case c]\nguest = g\npage = hugetlb\n",
                         "no-hugepages.ini:7: page hugetlb needs hugepages"),
    "no-guest.ini": ("[campaign]\nname = b\n[case c]\nguest = nosuch\n", "no-guest.ini:4:"),
}
for name, (text, want) in specs.items():
    path = os.path.join(bad, name)
    with open(path, "w") as f:
        f.write(text)
    r = campaign(path, "--out", os.path.join(bad, "out"), timeout=60)
    lines = r.stderr.strip().splitlines()
    tap.ok(r.returncode == 2 and len(lines) == 1 and want in lines[0] and not r.stdout,
           f"{name}: exit 2, one error line naming file and line, nothing run",
           diag=f"rc {r.returncode}: {r.stderr.strip()} {r.stdout.strip()}")

# a case the guest cannot set up when it runs: not run, with why, never pass
path = os.path.join(bad, "one-hugepage.ini")
with open(path, "w") as f:
    f.write("[campaign]\nname = one-hugepage\n[guest g]\nmem = 256M\nhugepages = 1\n"
            "[case two-huge]\nguest = g\npage = hugetlb\nburst = 2\n")
r = campaign(path, "--fresh", "--out", os.path.join(bad, "one-hugepage"), timeout=300)
got = results(os.path.join(bad, "one-hugepage"))
rec = next(iter(got.values()), {})
tap.ok(r.returncode == 1 and rec.get("verdict") == "not run" and "hugepage" in (rec.get("not_run") or ""),
       "a case that cannot be set up is 'not run', with why, and the exit status says so",
       diag=f"rc {r.returncode}: {rec.get('verdict')}: {rec.get('not_run')}")
tap.done()
