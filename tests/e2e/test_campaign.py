#!/usr/bin/env python3
"""The quick campaign (run/campaigns/quick.ini) end to end, on vmce's own
guest kernel (vmce-6.1: Debian's 6.1 with guest-kernel/patches/), under
two QEMUs in one run (Debian's 7.2 and bookworm-backports' 10.0): one real
guest per QEMU, reused, every case judged. Each case's verdict must be
pass, and the evidence behind the main verdicts is checked here again,
independently of the judge: the victim's own SIGBUS, the handler's line,
HardwareCorrupted, fsync's EIO, the journal's GPA, QEMU alive; and what
vmce's patches change: a KSM page recovers, an mlocked page is reported as
one. Each QEMU's guests ran that QEMU's binary and were restored only from
its own saved boot; the records and the report name each QEMU with its
release, with a summary sentence each.

Then run/campaigns/qemus.ini under every QEMU built here: host errors left
to QEMU (forwarder = qemu) kill Debian's QEMUs (SIGABRT, its assertion in
qemu.log) and are forwarded by vmce's, whose guest recovers; each is a pass.

Then: resuming repeats nothing, and bad campaign files (bad QEMUs among
them) and a case that cannot be set up are refused the way
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
from vmcelab import qemus as qemus_mod

tap = Tap()
prerequisites(tap)
CAMPAIGN = os.path.join(paths.ROOT, "run", "campaign")


def built(name):
    """(Qemu, None) where QEMU @name is built here, else (None, why not)"""
    try:
        return qemus_mod.resolve(name), None
    except qemus_mod.QemuError as e:
        return None, str(e)


def version_line(binary):
    """What the binary itself says it is: the records are checked against it"""
    return subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.splitlines()[0]


def campaign(*args, timeout=1200):
    return subprocess.run([sys.executable, CAMPAIGN, *args], capture_output=True, text=True,
                          timeout=timeout)


def results(outdir):
    with open(os.path.join(outdir, "results.jsonl")) as f:
        recs = [json.loads(line) for line in f]
    return {r["case"]["id"]: r for r in recs if r.get("type") == "case"}


out = workdir("campaign")
KERNEL = ("--kernels", "vmce-6.1")
# Debian's 10.0 beside Debian's 7.2 (make qemus unpacks it), in the same run
QEMUS = ["debian-7.2"]
q10, why = built("debian-10.0")
if q10:
    QEMUS.append("debian-10.0")
else:
    tap.skip("the quick campaign under debian-10.0", why)
res = campaign("--quick", *KERNEL, "--qemus", ",".join(QEMUS), "--fresh", "--out", out)
tap.diag(res.stdout.strip().splitlines()[-1] if res.stdout.strip() else res.stderr[-2000:])
tap.eq(res.returncode, 0, f"run/campaign --quick --kernels vmce-6.1 --qemus {','.join(QEMUS)}: exit 0 "
                          "(every case passed)")
cases = results(out)
per_qemu = {q: {cid: r for cid, r in cases.items() if r["case"].get("qemu") == q} for q in QEMUS}
tap.ok(all(len(c) >= 30 for c in per_qemu.values()) and sum(map(len, per_qemu.values())) == len(cases),
       f"the quick matrix ran under each QEMU ({', '.join(f'{q}: {len(c)}' for q, c in per_qemu.items())} cases)")
words = " ".join(res.stdout.split())
for q in QEMUS:
    under = rf" under QEMU {re.escape(q)} \([^)]*\)\)?" if len(QEMUS) > 1 else ""
    said = re.search(rf"Guest kernel vmce-6\.1 \([^)]*\){under} survives \d+ of \d+ error kinds; it panics on: "
                     r"[^.]*slab", words)
    tap.ok(said, f"run/campaign ends with what the guest survives and panics on under {q}, in words",
           diag=res.stdout[-900:])
for cid, r in sorted(cases.items()):
    tap.ok(r["verdict"] == "pass", f"{cid}: pass", diag="; ".join(r.get("reasons") or []))

# each record says which QEMU it ran under, as that QEMU says it itself
releases = {q: version_line(qemus_mod.resolve(q).binary).split("version", 1)[1].strip() for q in QEMUS}
wrong = [cid for cid, r in cases.items()
         if (r["case"]["qemu_info"] or {}).get("release") != releases.get(r["case"].get("qemu"))
         or r["case"]["qemu_info"].get("table") != r["case"]["qemu"] or r["case"]["qemu_info"].get("nearest")]
tap.ok(not wrong, "every record carries its QEMU: name, release (as its --version says), table, not nearest",
       diag=wrong[:3])
if len(QEMUS) > 1:
    tap.ok(all(cid.endswith(f"@vmce-6.1@qemu={r['case']['qemu']}") for cid, r in cases.items()),
           "with two QEMUs, each case id ends in @KERNEL@qemu=QEMU")

# the guests after a guest-ending case are copies restored from the first
# boot, each from its own QEMU's: every VM ran its QEMU's binary
with open(os.path.join(out, "results.jsonl")) as f:
    timeline = [e for line in f for e in json.loads(line).get("timeline", [])]
for q in QEMUS:
    mine = per_qemu[q]
    vms = {r["vm"] for r in mine.values()}
    boots = [e for e in timeline if e["event"] == "boot" and e["vm"] in vms]
    restored = {e["boot"] for e in boots if e.get("restored")}
    on_copies = [r for r in mine.values() if r["boot"] in restored]
    tap.ok(restored and on_copies and all(r["verdict"] == "pass" for r in on_copies)
           and sum(1 for e in boots if not e.get("restored")) == 1,
           f"{q}: booted once, {len(on_copies)} cases ran on {len(restored)} restored guests, and passed",
           diag=f"restored boots {sorted(restored)}; boots {boots}")
    ran = set()
    for vm in vms:
        for d in os.listdir(out):
            if d.startswith(vm + ".") and os.path.exists(os.path.join(out, d, "vm.json")):
                with open(os.path.join(out, d, "vm.json")) as f:
                    ran.add(json.load(f)["command"][0])
    tap.eq(sorted(ran), [qemus_mod.resolve(q).binary], f"{q}: its guests (and their copies) ran its binary")

with open(os.path.join(out, "vmced", "journal.jsonl")) as f:
    journal = [json.loads(line) for line in f]
journal_gpas = {e["gpa"] for e in journal if e["type"] == "memory-error" and e["result"] == "injected"}


def case(prefix, qemu):
    hits = [r for cid, r in per_qemu[qemu].items() if cid.startswith(prefix)]
    if not hits:
        tap.ok(False, f"{prefix} under {qemu}: in the results")
        return None
    return hits[0]["observed"]


def own_signal(obs, pid, code, lsb=12):
    w = obs["workloads"][0]
    sig = [s for s in obs["signals"] if s["pid"] == pid]
    mask = ~((1 << lsb) - 1)
    return bool(sig) and sig[0]["code"] == code and sig[0]["lsb"] == lsb and \
        int(sig[0]["addr"], 16) & mask == int(w["va"], 16) & mask


for q in QEMUS:
    obs = case("page-types/anon-dirty/ao/early/host", q)
    if obs:
        w = obs["workloads"][0]
        tap.ok(own_signal(obs, w["pid"], 5),
               f"{q}: anon-dirty, AO, early kill: BUS_MCEERR_AO at the process's own VA", diag=obs["signals"])
        tap.eq(obs["actions"][w["pfn"]], ["dirty LRU page", "Recovered"], f"{q}: anon-dirty: the handler recovered it")
        tap.eq(obs["hardware_corrupted_kb"], 4, f"{q}: anon-dirty: HardwareCorrupted grew by 4 kB")
        tap.ok(w["gpa"] in {hex(int(g, 16)) for g in journal_gpas},
               f"{q}: anon-dirty: the journal has the event at its GPA",
               diag=f"{w['gpa']} not in {sorted(journal_gpas)[:8]}...")
        tap.ok(obs["qemu_alive"] and obs["guest_alive"], f"{q}: anon-dirty: QEMU and the guest are alive")
    obs = case("late-kill/anon-dirty/ao/late", q)
    if obs:
        tap.ok(own_signal(obs, obs["workloads"][0]["pid"], 4),
               f"{q}: late kill: the touch gets BUS_MCEERR_AR at its VA", diag=obs["signals"])
    obs = case("consumed/anon-dirty/ar", q)
    if obs:
        tap.ok(own_signal(obs, obs["workloads"][0]["pid"], 4),
               f"{q}: consumed: BUS_MCEERR_AR at the consumer's VA", diag=obs["signals"])
    obs = case("page-types/hugetlb/ao/early", q)
    if obs:
        tap.ok(own_signal(obs, obs["workloads"][0]["pid"], 5, lsb=21), f"{q}: hugetlb: AO with si_addr_lsb 21",
               diag=obs["signals"])
    obs = case("page-types/pagecache-dirty/ao/early", q)
    if obs:
        tap.eq([c.get("fsync_errno") for c in obs["checks"]], [5],
               f"{q}: dirty page cache: the writer's fsync returns EIO")
    obs = case("page-types/pagecache-clean/ao/early", q)
    if obs:
        tap.eq([c.get("reread_ok") for c in obs["checks"]], [True],
               f"{q}: clean page cache: the reader reads the right data")
        tap.eq(obs["signals"], [], f"{q}: clean page cache: nobody signalled")
    obs = case("page-types/shared/ao/early", q)
    if obs:
        w = obs["workloads"][0]
        tap.eq(sorted({s["pid"] for s in obs["signals"] if s["code"] == 5}), sorted(w["pids"]),
               f"{q}: shared page: every process that maps it gets AO")
    obs = case("recovery-off/", q)
    if obs:
        tap.ok(obs["panic"], f"{q}: memory_failure_recovery=0: the guest panics", diag=obs)
    obs = case("ksm/ksm/ao/early", q)
    if obs:
        w = obs["workloads"][0]
        action = list(obs["actions"].values())[0] or ["", ""]
        tap.eq(action[1], "Recovered", f"{q}: ksm: the KSM page recovers ({action[0]})")
        tap.eq(sorted({s["pid"] for s in obs["signals"] if s["code"] == 5}), sorted(w["pids"]),
               f"{q}: ksm: every process mapping it gets BUS_MCEERR_AO")
        after = obs.get("aftermath") or {}
        tap.ok(obs["guest_alive"] and not obs["panic"] and not after.get("crash"),
               f"{q}: ksm: no panic, even when ksmd merges the same data again", diag=after)
    obs = case("page-types/mlock-dirty/ao/early", q)
    if obs:
        tap.eq(list(obs["actions"].values())[0], ["dirty mlocked LRU page", "Recovered"],
               f"{q}: mlock-dirty: reported as an mlocked page")

# interrupted or not, running again repeats nothing
again = campaign("--quick", *KERNEL, "--qemus", ",".join(QEMUS), "--out", out, timeout=120)
tap.ok(again.returncode == 0 and "0 to go" in again.stdout, "running again resumes: nothing is repeated",
       diag=again.stdout[-800:] + again.stderr[-800:])
tap.eq(len(results(out)), len(cases), "resuming keeps every result")
report = os.path.join(out, "report.html")
page = open(report).read()
tap.ok(os.path.getsize(report) > 10000 and '<table class="matrix">' in page and page.count("<svg") >= 2,
       "the report has its outcome matrix and two charts")


def summary_of(page):
    m = re.search(r'<section id="summary">(.*?)</section>', page, re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", m.group(1) if m else "").split())


def meta_of(page):
    m = re.search(r'<p class="meta">(.*?)</p>', page, re.S)
    return m.group(1) if m else ""


if len(QEMUS) > 1:
    said = summary_of(page)
    for q in QEMUS:
        tap.ok(re.search(rf"Guest kernel vmce-6\.1 \([^)]*\) under QEMU {re.escape(q)} "
                         rf"\({re.escape(releases[q])}\) survives \d+ of \d+ error kinds", said),
               f"report.html: a summary sentence for {q}, with its release", diag=said[:600])
    tap.ok(all(f"{q} ({releases[q]})" in meta_of(page) for q in QEMUS),
           "report.html: the run names every QEMU with its release", diag=meta_of(page))
    tap.ok('<table class="matrix qemus">' in page and 'id="side-by-side"' in page,
           "report.html: page type x QEMU, and the QEMUs side by side")
# the report as a browser draws it (Debian's chromium, headless, 1280 px):
# nothing wider than the page, the guest-ending cases named in its summary
if report_browser.chromium():
    report_browser.check(tap, report, list(cases.values()), "the quick campaign's report")
else:
    tap.skip("the quick campaign's report in headless chromium at 1280 px",
             "no chromium (run/install-deps installs it)")

# host errors left to QEMU (run/campaigns/qemus.ini), under every QEMU built
# here: Debian's die of them, vmce's forward them into the guest
QEMUS_INI = os.path.join(paths.ROOT, "run", "campaigns", "qemus.ini")
by_qemu = []
for name in ("debian-7.2", "debian-10.0", "vmce-10.0", "vmce-10.2", "debian-11.1"):
    q, why = built(name)
    if q:
        by_qemu.append(name)
    else:
        tap.skip(f"qemus.ini under {name}", why)
qout = os.path.join(out, "qemus")
res = campaign(QEMUS_INI, "--qemus", ",".join(by_qemu), "--fresh", "--out", qout, timeout=900)
tap.diag(res.stdout.strip().splitlines()[-1] if res.stdout.strip() else res.stderr[-2000:])
tap.eq(res.returncode, 0, f"qemus.ini under {', '.join(by_qemu)}: exit 0 (every case passed)")
qcases = results(qout)
qpage = open(os.path.join(qout, "report.html")).read()
qsaid = summary_of(qpage)
if any(qemus_mod.BEHAVIOUR[n]["tcg_sigbus"] == "abort" for n in by_qemu):
    tap.ok(">QEMU died</span>" in qpage and ('<table class="matrix qemus">' in qpage or len(by_qemu) < 2),
           "qemus.ini report: its cells say where QEMU died" + (", page type by QEMU" if len(by_qemu) > 1 else ""))
for name in by_qemu:
    mine = {"/".join((r["case"]["page"], r["case"]["kind"], r["case"]["forwarder"])): r
            for r in qcases.values() if r["case"]["qemu"] == name}
    binary = qemus_mod.resolve(name).binary
    release = version_line(binary).split("version", 1)[1].strip()
    tap.ok(len(mine) == 4 and all(r["verdict"] == "pass" for r in mine.values()),
           f"qemus.ini under {name}: 4 cases, each a pass",
           diag={k: (r["verdict"], r.get("reasons")) for k, r in mine.items()})
    tap.ok(all(r["case"]["qemu_info"]["release"] == release and r["case"]["qemu_info"]["table"] == name
               for r in mine.values()), f"{name}: every record names it, with its release {release}")
    vmced = (mine.get("anon-dirty/ao/vmced") or {}).get("observed") or {}
    tap.ok(vmced.get("qemu_alive") and any(s.get("code") == 5 for s in vmced.get("signals") or []),
           f"{name}: forwarded by vmced, the mapper gets BUS_MCEERR_AO and QEMU lives on")
    for page_ in ("anon-dirty", "free"):
        r = mine.get(f"{page_}/ao/qemu") or {}
        obs = r.get("observed") or {}
        passed = [x for x in obs.get("injected") or [] if isinstance(x, dict)]
        handed = bool(passed) and all(x.get("handled_by") == "qemu" and x.get("result") == "passed"
                                      for x in passed)
        if qemus_mod.BEHAVIOUR[name]["tcg_sigbus"] == "abort":
            ended = obs.get("qemu_exit") or {}
            tap.ok(handed and obs.get("qemu_alive") is False and ended.get("how") == "killed by signal 6 (SIGABRT)"
                   and "Assertion" in (ended.get("said") or ""),
                   f"{name}: {page_} AO left to QEMU: vmced passed it on, QEMU died of SIGABRT, its assertion "
                   "in qemu.log", diag=(passed, ended))
            tap.ok((r.get("expected") or {}).get("guest") == "qemu-died"
                   and "QEMU died (killed by signal 6 (SIGABRT)" in " ".join(r.get("reasons") or []),
                   f"{name}: {page_}: 'QEMU died' was expected of {name}, and the verdict says how it ended",
                   diag=r.get("reasons"))
        else:
            recovered = (obs.get("actions") or {}).values()
            w = (obs.get("workloads") or [{}])[0]
            ao = page_ != "anon-dirty" or own_signal(obs, w.get("pid"), 5)
            tap.ok(handed and obs.get("qemu_alive") and obs.get("guest_alive") and ao
                   and all(a and a[1] == "Recovered" for a in recovered) and recovered,
                   f"{name}: {page_} AO left to QEMU: QEMU forwarded it itself and the guest recovered"
                   + (" (the mapper got BUS_MCEERR_AO at its own VA)" if page_ == "anon-dirty" else ""),
                   diag=(passed, obs.get("actions"), obs.get("signals")))
    # consumed: the vCPU's own load faults. Debian's QEMUs block SIGBUS in
    # their TCG vCPU threads, and the kernel forces it at its default
    # action (vmced passes it on so): QEMU is killed by SIGBUS
    r = mine.get("anon-dirty/ar/qemu") or {}
    obs = r.get("observed") or {}
    fatal = qemus_mod.BEHAVIOUR[name]["tcg_sigbus"] == "abort"
    if fatal:
        ended = obs.get("qemu_exit") or {}
        tap.ok(obs.get("qemu_alive") is False and ended.get("how") == "killed by signal 7 (SIGBUS)"
               and (r.get("expected") or {}).get("guest") == "qemu-died",
               f"{name}: AR left to QEMU: QEMU killed by SIGBUS, as the host kernel forces it, and expected",
               diag=(ended, r.get("reasons")))
    else:
        w = (obs.get("workloads") or [{}])[0]
        tap.ok(obs.get("qemu_alive") and obs.get("guest_alive") and own_signal(obs, w.get("pid"), 4),
               f"{name}: AR left to QEMU: QEMU forwarded the SRAR itself, the reader got BUS_MCEERR_AR at "
               "its own VA", diag=obs.get("signals"))
    sentence = re.search(rf"Guest kernel debian-6\.1 \([^)]*\) under QEMU {re.escape(name)} \({re.escape(release)}\) "
                         rf"survives (\d) of 4 error kinds([^.]*)\.", qsaid)
    tap.ok(sentence and (sentence.group(1), "QEMU dies on: anon-dirty AO by QEMU" in sentence.group(2))
           == (("1", True) if fatal else ("4", False)),
           f"qemus.ini report: {name}'s summary sentence says " +
           ("QEMU dies on the errors left to it" if fatal else "the guest survives all 4"), diag=qsaid[:900])

# bad input: named by file and line before anything runs
bad = os.path.join(out, "bad")
os.makedirs(bad, exist_ok=True)
specs = {
    "unknown-key.ini": ("[campaign]\nname = b\ncolour = red\n", "unknown-key.ini:3: unknown key 'colour'"),
    "no-hugepages.ini": ("[campaign]\nname = b\n[guest g]\nmem = 256M\n[case c]\nguest = g\npage = hugetlb\n",
                         "no-hugepages.ini:7: page hugetlb needs hugepages"),
    "no-guest.ini": ("[campaign]\nname = b\n[case c]\nguest = nosuch\n", "no-guest.ini:4:"),
    "unknown-qemu.ini": ("[campaign]\nname = b\n[guest g]\nqemu = debian-7.2, debian-8.2\n[case c]\n",
                         "unknown-qemu.ini:4: unknown QEMU 'debian-8.2' (known: debian-7.2, debian-10.0, "
                         "vmce-10.0, vmce-10.2, debian-11.1, or a PATH to a qemu-system-x86_64)"),
    "retired-qemu.ini": ("[campaign]\nname = b\n[guest g]\nqemu = vmce-7.2\n[case c]\n",
                         "retired-qemu.ini:4: QEMU vmce-7.2 was retired in part 20: its series is in git at "
                         "0093f79"),
    "not-a-qemu.ini": ("[campaign]\nname = b\n[guest g]\nqemu = /bin/true\n[case c]\n",
                       "not-a-qemu.ini:4: /bin/true is not a QEMU"),
    "too-old.ini": ("[campaign]\nname = b\n[guest amd]\nqemu = debian-7.2\ncpu = EPYC,succor=on\n[case c]\n",
                    re.compile(r"too-old\.ini:5: QEMU debian-7\.2 \(7\.2[^)]*\) is too old for succor "
                               r"\(-cpu EPYC,succor=on\)")),
}
for name, (text, want) in specs.items():
    path = os.path.join(bad, name)
    with open(path, "w") as f:
        f.write(text)
    r = campaign(path, "--out", os.path.join(bad, "out"), timeout=60)
    lines = r.stderr.strip().splitlines()
    said = lines and (want.search(lines[0]) if isinstance(want, re.Pattern) else want in lines[0])
    tap.ok(r.returncode == 2 and len(lines) == 1 and said and not r.stdout,
           f"{name}: exit 2, one error line naming file and line, nothing run",
           diag=f"rc {r.returncode}: {r.stderr.strip()} {r.stdout.strip()}")
# on the command line: the --qemus value; a QEMU not built: what makes it
quick = os.path.join(paths.ROOT, "run", "campaigns", "quick.ini")
r = campaign(quick, "--qemus", "debian-7.2,qemu-9", "--out", os.path.join(bad, "out"), timeout=60)
lines = r.stderr.strip().splitlines()
tap.ok(r.returncode == 2 and len(lines) == 1 and "--qemus: unknown QEMU 'qemu-9'" in lines[0] and not r.stdout,
       "an unknown QEMU in --qemus: exit 2, one error line naming the value, nothing run",
       diag=f"rc {r.returncode}: {r.stderr.strip()}")
# a known QEMU missing from the build: a build directory of its own, with
# the guest kernel, image and disk of this one
empty = os.path.join(bad, "no-qemus-built")
os.makedirs(empty, exist_ok=True)
env = dict(os.environ, VMCE_BUILD_DIR=empty, VMCE_KERNEL=paths.kernel(), VMCE_INITRD=paths.initrd(),
           VMCE_DISK=paths.disk())
r = subprocess.run([sys.executable, CAMPAIGN, quick, "--qemus", "vmce-10.0", "--out", os.path.join(bad, "out")],
                   capture_output=True, text=True, timeout=60, env=env)
lines = r.stderr.strip().splitlines()
tap.ok(r.returncode == 2 and len(lines) == 1 and re.search(r"QEMU vmce-10\.0 is missing at \S+: run `make qemu`$",
                                                            lines[0]) and not r.stdout,
       "a QEMU not built: exit 2, one line saying what to run to make it", diag=f"rc {r.returncode}: {r.stderr}")

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
