#!/usr/bin/env python3
"""Real host memory errors: the host lab's L1 kernel runs memory_failure()
and sends QEMU the SIGBUS itself (run/hostlab --check: one L1 boot carries
every QEMU asked for; a fresh L1 takes over after nine KVM guests).

The L1 host: $VMCE_HOSTLAB_L1 (run/hostlab --l1), else debian-12. It runs
its Debian's rasdaemon as a host does: the debian-13 L1 Debian 13's, whose
row for the pfn (page type, action result as the kernel's tracepoint says)
vmced's host-page record must hold; the debian-12 L1 Debian 12's, which
keeps no memory-failure records, as vmced's host-page record must say.
The QEMUs: $VMCE_HOSTLAB_QEMUS (names or PATHs, comma-separated), else
$VMCE_QEMU, else debian-7.2 (run/lib/vmcelab/qemus.py). A QEMU that is not
built skips its rows, saying why. What each row asserts follows from what
that QEMU does by itself (qemus.BEHAVIOUR, read from its source and checked
here) and what it can give a guest (qemus FEATURES):
  tcg    vmced   the victim gets BUS_MCEERR_AO/AR at its own VA, whatever the
                 QEMU: L1 sent QEMU the SIGBUS, the journal has the GPA and
                 (AO) the host pfn L1 poisoned, which L1's
                 ras:memory_failure_event names too, rasdaemon's row (or its
                 saying none) and `vmcectl events --pfn`; for
                 AR the host's early AO is held back (ignore-ao) and the vCPU
                 consumes the page, which vmced replaces
  tcg    qemu    tcg_sigbus forward: QEMU forwards it itself, the victim
                 recovers; abort: QEMU dies (SIGABRT of the early AO; for an
                 AR, SIGBUS when the vCPU's own AR is handled first)
  kvm    vmced   on this AMD L1 kvm_amd hides MCG_SER_P: with SUCCOR (the
                 QEMU has it: the guest CPU gets succor=on) the victim
                 recovers (AO: the host records joined by pfn, as for tcg), without it vmced refuses and says why (AO: the
                 guest runs on, AR: the VM is paused); a second SRAR into the
                 same guest recovers too wherever QEMU has inject-mce
  kvm    qemu    amd_kvm recover: the victim recovers; panic: the AMD guest
                 panics on QEMU's Intel-style injection
  then reboot    the guest reboots with the host page poisoned in L1: after
                 vmced it comes back clean, the page punched out of the RAM
                 file (also for a vmced started again without its journal);
                 after QEMU's own forwarding, reset discard: back clean, the
                 page punched out; remap-same: QEMU maps the same poisoned
                 page again (the RAM file's page reads EIO) and the next boot
                 meets it. A reboot that hangs by nested SVM's own trouble
                 (lab.reboot_hang(): no RESET, or a new boot that never
                 prints a line) is reset once more by QMP, and judged the same
  bad input      a pfn that is not guest RAM is refused and the guest carries
                 on; an unknown QEMU name and a PATH that is not an x86_64
                 QEMU are refused in one line, exit status 2, before L1 boots;
                 an L1 that cannot boot is a clear error, its console kept

  test_hostlab.py                 runs run/hostlab --check and judges it
  test_hostlab.py --results FILE  judges a run already made (results.json
                                  of run/hostlab --matrix: make hostlab)
"""
import json
import os
import subprocess
import sys

from common import Tap, paths

sys.path.insert(0, os.path.join(paths.ROOT, "run", "lib"))
from vmcelab import l1hosts, qemus  # noqa: E402

HOSTLAB = os.path.join(paths.ROOT, "run", "hostlab")

tap = Tap()
if os.geteuid() != 0:
    tap.skip("host lab", "it needs root")
    tap.done()

given = None
if len(sys.argv) == 3 and sys.argv[1] == "--results":
    with open(sys.argv[2]) as f:
        given = json.load(f)
elif len(sys.argv) > 1:
    tap.bail(f"usage: {sys.argv[0]} [--results FILE]")


def hostlab(*args, timeout):
    return subprocess.run([sys.executable, HOSTLAB, *args], capture_output=True, text=True, timeout=timeout)


def error_lines(res):
    return [ln for ln in res.stderr.splitlines() if "error:" in ln]


# -- bad input that must not boot anything (seconds)
if given is None:
    for what, arg, says in (("an unknown QEMU name", "qemu-9.9", "unknown QEMU 'qemu-9.9'"),
                            ("a PATH that is not a QEMU", "/bin/true", "/bin/true is not a QEMU"),
                            ("a QEMU that is not x86_64", "/usr/bin/qemu-system-i386", "not qemu-system-x86_64")):
        if arg.startswith("/") and not os.path.exists(arg):
            tap.skip(f"bad input: {what}", f"{arg} is not on this host")
            continue
        res = hostlab("--check", "--qemus", f"debian-7.2,{arg}", timeout=120)
        errs = error_lines(res)
        tap.ok(res.returncode == 2 and len(errs) == 1 and says in errs[0] and "booting" not in res.stderr,
               f"bad input: {what} ({arg}): one error line, exit status 2, before L1 boots",
               diag=res.stderr[-800:])

# -- the L1 host ($VMCE_HOSTLAB_L1, else the default): which Debian it is
# decides which rasdaemon it runs, and what that one records
L1 = os.environ.get("VMCE_HOSTLAB_L1") or l1hosts.DEFAULT
if L1 not in l1hosts.KNOWN:
    tap.bail(f"VMCE_HOSTLAB_L1={L1}: not an L1 (known: {', '.join(l1hosts.NAMES)})")

# -- the QEMUs
if given is None:
    spelled = [x.strip() for x in (os.environ.get("VMCE_HOSTLAB_QEMUS") or qemus.spelling()).split(",")
               if x.strip()]
    qs = []
    for name in spelled:
        try:
            qs.append(qemus.resolve(name))
        except qemus.QemuError as e:
            tap.skip(f"{name}: every row", f"QEMU {name} is not there: {e}")
    if not qs:
        tap.done()
    res = hostlab("--check", "--json", "--qemus", ",".join(q.name for q in qs), "--l1", L1, timeout=1750)
    if not res.stdout.strip().startswith("{"):
        tap.bail(f"run/hostlab --check failed ({res.returncode}): {res.stderr.strip()[-2000:]}")
    lab = json.loads(res.stdout)
    tap.ok(res.returncode == 0, "run/hostlab --check: every scenario ran (exit 0)", diag=res.stderr[-1500:])
else:
    lab = given
host = lab["host"]
L1 = host.get("l1") or L1
RASDAEMON_RECORDS = l1hosts.KNOWN[L1].rasdaemon_records
tap.diag(f"L1 {L1}: kernel {host['kernel']}, {host['cpu_vendor']}, KVM {host['kvm']}, "
         f"{(host.get('rasdaemon') or {}).get('version')}; QEMUs in L1: "
         + "; ".join(f"{x['slug']}: {x['version']}" for x in host.get("qemus", [])))
for sk in lab.get("skipped", []):
    tap.skip(f"{sk['name']}: every row", sk["why"])


def events(r, result=None):
    return [e for e in r.get("journal", []) if e["type"] == "memory-error"
            and (result is None or e["result"] == result)]


def l1_sent_sigbus(r):
    return any("Sending SIGBUS to qemu-system-x86" in ln for ln in r["l1_memory_failure"])


def got(r, code):
    sig = r.get("signal") or {}
    return (sig.get("code_name"), sig.get("own_va")) == (code, True)


def abort_signals(kind):
    """How a QEMU that aborts under TCG dies (7.2 and 10.0 alike, measured:
    make hostlab). The kernel's early AO goes to QEMU's main thread, whose
    kvm_on_sigbus() takes KVM's path without KVM and trips an assertion
    (qemu_mutex_lock_impl: mutex->initialized): SIGABRT. For an AR the
    vCPU's own BUS_MCEERR_AR races it: kvm_on_sigbus_vcpu() marks it pending
    for a KVM exit that TCG never makes, the load faults again, and the
    second one is re-raised: SIGBUS, when the vCPU gets there first"""
    return ("SIGABRT",) if kind == "ao" else ("SIGABRT", "SIGBUS")


def check_tcg_vmced(label, r, kind):
    if kind == "ao":
        sig = r.get("signal") or {}
        tap.eq((sig.get("code_name"), sig.get("own_va"), sig.get("lsb")), ("BUS_MCEERR_AO", True, 12),
               f"{label}: BUS_MCEERR_AO at the victim's own VA, lsb 12")
        tap.ok(l1_sent_sigbus(r), f"{label}: L1's memory_failure() sent SIGBUS to QEMU", diag=r["l1_memory_failure"])
        ev = events(r, "injected")
        tap.ok(ev and ev[0]["gpa"] == r["gpa"] and ev[0]["source"] == "kernel"
               and ev[0]["si_code"] == "BUS_MCEERR_AO" and ev[0]["hva"] == r["hva"],
               f"{label}: the journal holds the kernel's AO with the victim's GPA", diag=r["journal"])
        check_host_records(label, r, ev[0] if ev else {})
        return
    tap.ok(got(r, "BUS_MCEERR_AR"), f"{label}: BUS_MCEERR_AR at the victim's own VA", diag=r.get("signal"))
    ignored = events(r, "ignored")
    ar = [e for e in events(r, "injected") if e["si_code"] == "BUS_MCEERR_AR"]
    tap.ok(ignored and ignored[0]["si_code"] == "BUS_MCEERR_AO",
           f"{label}: the host's early AO was held back by policy ignore-ao", diag=r["journal"])
    # the kernel reports the address that was loaded from, not the page
    tap.ok(ar and ar[0]["thread"].startswith("vcpu") and int(ar[0]["gpa"], 16) & ~0xfff == int(r["gpa"], 16)
           and "replaced" in (ar[0]["detail"] or ""),
           f"{label}: the vCPU consumed it; SRAR injected in the victim's page, the host page replaced", diag=ar)


def check_host_records(label, r, ev):
    """The host's own records of the page, joined with vmced's by the pfn:
    the page L1 poisoned, the kernel's ras:memory_failure_event, rasdaemon's
    database, and `vmcectl events --pfn` in L1 naming the guest and its GPA.
    Which rasdaemon L1 runs is its Debian's (l1hosts.py): Debian 13's
    records the page, and its row must be the tracepoint's (pfn, page type,
    action result) and the one vmced's host-page record holds; Debian 12's
    is built without memory-failure support, keeps none, and vmced's
    host-page record must say so"""
    want = int(r["host_pfn"], 16) if isinstance(r.get("host_pfn"), str) else r.get("host_pfn")
    tap.ok((ev.get("host_pfn"), ev.get("host_pfn_from")) == (want, "hwpoison-entry"),
           f"{label}: vmced's record names the host page L1 poisoned, read from QEMU's hwpoison entry",
           diag={k: ev.get(k) for k in ("host_pfn", "host_pfn_from", "host_pfn_why")})
    j = next((x for x in r.get("host_records") or [] if x["seq"] == ev.get("seq")), {})
    trace = [t for t in j.get("tracepoint", []) if int(t["pfn"], 16) == want]
    tap.ok(trace, f"{label}: L1's ras:memory_failure_event names the same pfn ({want:#x})",
           diag=j.get("tracepoint"))
    hp, row, ras = j.get("host_page") or {}, j.get("rasdaemon"), host.get("rasdaemon") or {}
    tap.diag(f"{label}: pfn {want:#x}; L1's {ras.get('version') or 'rasdaemon'}: {row}")
    if RASDAEMON_RECORDS:
        ok = isinstance(row, dict) and "error" not in row
        tap.ok(ok and int(row["pfn"], 16) == want and trace
               and (row["page_type"], row["action_result"]) == (trace[-1]["page_type"], trace[-1]["action_result"]),
               f"{label}: L1's {ras.get('version') or 'rasdaemon'} recorded the page as the kernel's "
               "tracepoint says: pfn, page type, action result"
               + (f" ({row['pfn']}, {row['page_type']}: {row['action_result']})" if ok else ""),
               diag={"rasdaemon": row, "tracepoint": trace, "l1": ras})
        tap.ok(ok and hp.get("host_pfn") == want and hp.get("rasdaemon") == row,
               f"{label}: vmced's host-page record holds rasdaemon's row for the pfn",
               diag={"vmced": hp, "rasdaemon": row})
    else:
        tap.ok(ras.get("db") and not ras.get("memory_failure") and hp.get("host_pfn") == want
               and hp.get("rasdaemon") is None and "memory_failure_event" in (hp.get("detail") or ""),
               f"{label}: L1's {ras.get('version') or 'rasdaemon'} runs but keeps no memory-failure records, "
               "and vmced's host-page record says so", diag={"vmced": hp, "rasdaemon": row, "l1": ras})
    q = j.get("vmcectl") or [{}]
    tap.ok(len(q) == 1 and (q[0].get("vm"), q[0].get("gpa")) == (ev.get("vm"), r["gpa"])
           and (q[0].get("host_page") or {}).get("about_seq") == ev.get("seq"),
           f"{label}: vmcectl events --pfn in L1 names the guest and its GPA, with the host-page record",
           diag=q)


def check_row(q, r):
    sc = r["scenario"]
    accel, kind, fwd = sc["accel"], sc["kind"], sc["forwarder"]
    b = q["behaviour"]
    name = sc.get("name") or ""
    label = f"{q['label']} {accel}/{kind}/{fwd}" + (" again" if name.endswith("-again") else "") \
        + (" (vmced detached first)" if sc.get("reuse") == "detach-vmced" else "")
    if sc.get("expect_error"):
        tap.ok(r["outcome"] == "error" and sc["expect_error"] in (r.get("detail") or ""),
               f"{label}: bad input: a pfn that is not guest RAM is refused ({sc['expect_error']}), nothing poisoned",
               diag=r.get("detail"))
        return
    if r["outcome"] == "error":
        tap.ok(False, f"{label}: the scenario ran", diag=r.get("detail"))
        return
    if sc.get("policy"):
        tap.diag(f"{label} (policy {sc['policy']}): {r['outcome']}")
        return
    if accel == "tcg" and fwd == "vmced":
        tap.eq(r["outcome"], "recovered", f"{label}: the victim recovered")
        check_tcg_vmced(label, r, kind)
    elif accel == "tcg" and b["tcg_sigbus"] == "forward":
        # QEMU also gets the kernel's early AO (it asks for early kill) and
        # forwards it on its main thread: whether the victim's vCPU consumes
        # the page first (AR) or the guest isolates it first (AO) is a race,
        # and either is a recovery
        codes = ("BUS_MCEERR_AR", "BUS_MCEERR_AO") if kind == "ar" else ("BUS_MCEERR_AO",)
        tap.eq(r["outcome"], "recovered", f"{label}: QEMU forwards it under TCG itself (tcg_sigbus forward), "
               "the victim recovered")
        tap.ok(any(got(r, c) for c in codes), f"{label}: {' or '.join(codes)} at the victim's own VA",
               diag=r.get("signal"))
        tap.ok(r.get("ms_to_injection") is not None and r.get("qemu_exit") is None,
               f"{label}: QEMU announced its injection (MEMORY_FAILURE) and runs on",
               diag={"qemu_log": r.get("qemu_log"), "exit": r.get("qemu_exit")})
    elif accel == "tcg":
        want = [f"killed by signal {n} ({sig})" for sig, n in (("SIGABRT", 6), ("SIGBUS", 7))
                if sig in abort_signals(kind)]
        tap.ok(r["outcome"] == "qemu-died" and r.get("qemu_exit") in want,
               f"{label}: QEMU takes KVM's path under TCG and dies of it (tcg_sigbus abort): "
               f"{r.get('qemu_exit')}", diag={"outcome": r["outcome"], "exit": r.get("qemu_exit"), "want": want})
        tap.ok(l1_sent_sigbus(r), f"{label}: it was L1's real SIGBUS", diag=r["l1_memory_failure"])
        if "SIGABRT" in (r.get("qemu_exit") or ""):
            tap.ok(any("mutex->initialized" in ln for ln in r.get("qemu_log", [])),
                   f"{label}: QEMU's last words: the assertion in KVM's path", diag=r.get("qemu_log"))
    elif fwd == "vmced" or name.endswith("-again"):
        check_kvm_vmced(q, r, label, kind)
    elif b["amd_kvm"] == "recover":
        tap.ok("succor=on" in r.get("l2_cpu_model", ""), f"{label}: the guest CPU has succor=on",
               diag=r.get("l2_cpu_model"))
        tap.eq(r["outcome"], "recovered", f"{label}: QEMU gives the AMD guest SUCCOR and AMD encodings "
               "(amd_kvm recover): the victim recovered")
        tap.ok(any("injected" in ln for ln in r["qemu_log"]), f"{label}: QEMU logged its injection",
               diag=r["qemu_log"])
    else:
        tap.eq(r["outcome"], "guest-panic", f"{label}: QEMU injects Intel-style into the AMD guest without "
               "SUCCOR (amd_kvm panic): it panics")
        tap.ok(any("Uncorrected error without MCA Recovery" in ln or "Fatal" in ln for ln in r["guest_log"]),
               f"{label}: the guest log says why", diag=r["guest_log"])
        tap.ok(any("injected" in ln for ln in r["qemu_log"]), f"{label}: QEMU logged its injection",
               diag=r["qemu_log"])
    if sc.get("then") == "reboot":
        check_reboot(q, r, label)


def check_kvm_vmced(q, r, label, kind):
    """KVM on L1's AMD CPU, vmced forwarding: the guest recovers where its
    QEMU gives it SUCCOR, and vmced refuses (and says why) where not"""
    cpu = r.get("guest_cpu", {})
    tap.eq(r.get("cpu_help_succor"), q["succor"], f"{label}: QEMU's -cpu help "
           f"{'has' if q['succor'] else 'has no'} succor, as qemus says")
    if q["succor"]:
        tap.ok(cpu.get("succor") is True, f"{label}: the AMD guest was given SUCCOR ({r['l2_cpu_model']})",
               diag=cpu)
        tap.eq(r["outcome"], "recovered", f"{label}: vmced forwards AMD encodings to a guest with SUCCOR: "
               "the victim recovered")
        tap.ok(got(r, "BUS_MCEERR_AO" if kind == "ao" else "BUS_MCEERR_AR"),
               f"{label}: at the victim's own VA", diag=r.get("signal"))
        if kind == "ao":
            ev = events(r, "injected")
            check_host_records(label, r, ev[0] if ev else {})
    else:
        refused = events(r, "refused")
        tap.eq(r["outcome"], "refused",
               f"{label}: the guest cannot recover ({cpu.get('vendor')}, SER_P {cpu.get('ser_p')}, SUCCOR "
               f"{cpu.get('succor')} on {r.get('host_vendor')}): vmced refuses")
        tap.ok(refused and ("SUCCOR" in refused[-1]["detail"] or "MCG_SER_P" in refused[-1]["detail"]),
               f"{label}: the journal says why", diag=refused)
        tap.eq(r.get("vm_status"), "paused" if kind == "ar" else "running",
               f"{label}: " + ("the VM is paused rather than left to fault forever" if kind == "ar"
                               else "the guest runs on, not told"))


def check_reboot(q, r, label):
    """`then: reboot`: the guest reboots with the host page still poisoned in
    L1's RAM file (a shmem page: punching the hole is what gets rid of it)"""
    label += " then reboot"
    a = r.get("after_reboot")
    if a is None:
        tap.ok(r["outcome"] == "qemu-died", f"{label}: rebooted, unless QEMU died of the error",
               diag=r["outcome"])
        return
    # what follows is of the reset the lab asked for: a guest that restarted
    # before (its boot id changed, or QEMU's RESET came first) had the page
    # replaced then, by whoever watched, and the rows after it would meet
    # that restart (the lab no longer sends its reboot on to the next boot)
    if not tap.ok(not a.get("unasked"), f"{label}: the guest restarted only when the lab asked it to "
                  f"(RESET events at {[x['s'] for x in a.get('resets', [])]} s from the request)",
                  diag=dict(unasked=a.get("unasked"), steps=a.get("steps"), resets=a.get("resets"))):
        return
    # a page in a ROM blob (the -kernel image: the guest kernel's freed init
    # memory) is written back by QEMU's own main thread at the reset
    tap.diag(f"{label}: the page {r['gpa']} is " + (f"in ROM blob {r['gpa_in_rom']}" if r.get("gpa_in_rom")
                                                    else "in no ROM blob"))
    if r["scenario"]["forwarder"] == "qemu" and q["behaviour"]["reset"] == "remap-same":
        tap.eq(a.get("file_page"), "poisoned", f"{label}: QEMU's own reset maps the same file page again "
               "(reset remap-same): still poisoned in the RAM file")
        tap.ok(not a["back"] or a["qemu_exit"] or a["guest_mce_log"],
               f"{label}: the next boot met it ({'QEMU ' + a['qemu_exit'] if a['qemu_exit'] else ''}"
               f"{'; did not come back' if not a['back'] else ''}; MCE lines {a['guest_mce_log'][-2:]})",
               diag=a)
        return
    who = "vmced" if r["scenario"]["forwarder"] == "vmced" else "QEMU's own reset (reset discard)"
    # the diag leads with what says where it stopped (CI keeps its start):
    # the lab's steps and QEMU's RESETs, the console and vmced's log
    first = ("detail", "qemu_exit", "steps", "resets", "held_threads", "qemu_threads", "console_tail", "qemu_log",
             "vmced_log")
    if a.get("lab_hang"):
        # the lab's nested SVM under TCG, not the scenario's: reset once more
        # (lab.reboot_hang()); what vmced did at that reset is judged below
        tap.diag(f"{label}: {a['lab_hang']}; the lab reset it once more (QMP system_reset)")
    tap.ok(a["back"] and a["qemu_exit"] is None,
           f"{label}: the guest came back ({a['how']} reboot"
           + (", the lab's second reset" if a.get("lab_hang") else "") + f", {a['boot_s']} s), QEMU runs",
           diag=json.dumps({**{k: a[k] for k in first if k in a}, **a}, indent=1))
    tap.eq(a["guest_mce_log"], [], f"{label}: its new boot's kernel log has no machine check")
    tap.eq(a.get("file_page"), "readable", f"{label}: {who} punched the page out of the RAM file")
    if r["scenario"]["forwarder"] != "vmced":
        return
    w = a.get("vmced_without_journal")
    if r["scenario"].get("forget"):
        hit = next((p for p in (w or {}).get("poisoned", [])
                    if int(p["gpa"], 16) == int(r["gpa"], 16)), None)
        tap.ok(hit is not None and hit.get("found_in_qemu") and "page table" in w["poisoned_from"],
               f"{label}: a vmced started again without its journal found the page in QEMU's page "
               "table (its hwpoison entry)", diag=w)
    resets = [rec for rec in a["journal"] if rec["type"] == "reset"]
    page = next((p for rec in resets for p in rec["pages"]
                 if int(p["gpa"], 16) & ~0xfff == int(r["gpa"], 16)), None)
    tap.ok(page is not None and page["result"] == "replaced" and "MADV_REMOVE" in page["how"]
           and "/dev/shm/" in page["backing"],
           f"{label}: the journal's reset record: vmced replaced the page, punched out of the RAM file",
           diag=resets)


by_slug = {q["slug"]: q for q in lab["qemus"]}
for q in lab["qemus"]:
    b = q["behaviour"]
    tap.diag(f"{q['label']}: {q['release']}; by itself: TCG {b['tcg_sigbus']}, AMD KVM {b['amd_kvm']}, "
             f"reset {b['reset']}; SUCCOR {q['succor']}, inject-mce {q['inject_mce']}"
             + (f" (judged as {q['nearest']})" if q.get("nearest") else ""))
    mine = [r for r in lab["results"] if r["scenario"].get("qemu") == q["slug"]]
    tap.ok(mine and all((r.get("qemu") or {}).get("release") == q["release"] for r in mine),
           f"{q['label']}: its rows ran, each recording its QEMU ({q['release']})")
    in_l1 = next((x for x in host.get("qemus", []) if x["slug"] == q["slug"]), {})
    tap.ok((in_l1.get("version") or "").endswith(q["release"]) or q["release"] in (in_l1.get("version") or ""),
           f"{q['label']}: the QEMU staged in L1 is the one asked for ({in_l1.get('version')})")
    for r in mine:
        check_row(q, r)

if given is None and lab["qemus"] and lab["qemus"][0]["name"] == "debian-7.2":
    # an L1 that cannot boot (the image of the run above: nothing to build)
    res = hostlab("--l1-mem", "100M", "--qemus", ",".join(q["name"] for q in lab["qemus"]), timeout=600)
    errors = error_lines(res)
    console = errors[0].split("console ")[-1].split(" ")[0].rstrip(":") if errors else ""
    tap.ok(res.returncode != 0 and errors and "L1 did not come up" in errors[0] and os.path.exists(console),
           "bad input: an L1 that cannot boot: a clear error, exit non-zero, its console log kept",
           diag=res.stderr[-1500:])
tap.done()
