#!/usr/bin/env python3
"""Real host memory errors: the host lab's L1 kernel runs memory_failure()
and sends QEMU the SIGBUS itself (run/hostlab --check, one L1 boot).

Rows and what they assert, for Debian's QEMU 7.2 in the lab (with VMCE_QEMU,
the patched one: its own TCG forwarding, tcg ao/ar qemu, recovers; the KVM
rows recover, since the AMD guest gets SUCCOR):
  tcg ao vmced   the victim gets BUS_MCEERR_AO at its own VA; L1's kernel
                 says it sent SIGBUS to QEMU; the journal has the GPA
  tcg ar vmced   the host's AO is ignored (policy), the vCPU consumes the
                 page, the victim gets BUS_MCEERR_AR at its own VA
  kvm ao vmced   on this AMD L1, kvm_amd hides MCG_SER_P and QEMU 7.2 cannot
                 give the guest SUCCOR: vmced refuses and says why; with a
                 QEMU that gives SUCCOR, the victim recovers
  kvm ar vmced   refused and the VM paused; recovers with SUCCOR
  kvm ao qemu    QEMU injects Intel-style into the AMD guest: it panics
The AO rows then reboot the guest (`then: reboot`), the host page still
poisoned: with vmced the guest comes back with no machine check in its new
boot's log, and the journal's reset record has the page punched out of the
RAM file; QEMU's own forwarding goes through the same steps for comparison
(QEMU 7.2 remaps the same file page at reset: the next boot consumes it).
"""
import json
import os
import subprocess
import sys

from common import Tap, paths

tap = Tap()
if os.geteuid() != 0:
    tap.skip("host lab", "it needs root")
    tap.done()

# VMCE_QEMU: the QEMU for L2 inside L1 (the patched one, qemu-patches/)
qemu = os.environ.get("VMCE_QEMU")
res = subprocess.run([sys.executable, os.path.join(paths.ROOT, "run", "hostlab"), "--check", "--json"]
                     + (["--qemu", qemu] if qemu else []), capture_output=True, text=True, timeout=900)
if res.returncode != 0 or not res.stdout.strip().startswith("{"):
    tap.bail(f"run/hostlab --check failed ({res.returncode}): {res.stderr.strip()[-2000:]}")
lab = json.loads(res.stdout)
host = lab["host"]
tap.diag(f"L1: kernel {host['kernel']}, {host['cpu_vendor']}, KVM {host['kvm']}, {host['qemu']}")
rows = {(r["scenario"]["accel"], r["scenario"]["kind"], r["scenario"]["forwarder"]): r
        for r in lab["results"] if not r["scenario"].get("name", "").endswith("-again")}
again = next((r for r in lab["results"] if r["scenario"].get("name") == "kvm-ar-vmced-again"), None)


def row(accel, kind, fwd):
    r = rows.get((accel, kind, fwd))
    if r is None or r["outcome"] == "error":
        tap.ok(False, f"{accel}/{kind}/{fwd}: the scenario ran", diag=r)
        return None
    return r


def events(r, result=None):
    return [e for e in r.get("journal", []) if e["type"] == "memory-error"
            and (result is None or e["result"] == result)]


def l1_sent_sigbus(r):
    return any("Sending SIGBUS to qemu-system-x86" in ln for ln in r["l1_memory_failure"])


def got(r, code):
    sig = r.get("signal") or {}
    return (sig.get("code_name"), sig.get("own_va")) == (code, True)


if qemu:
    # qemu-patches/ 0005: QEMU forwards the real SIGBUS under TCG itself
    # For ar, QEMU also gets the kernel's early AO (it asks for early kill)
    # and forwards it on its main thread: whether the victim's vCPU
    # consumes the page first (AR) or the guest isolates it first (AO) is a
    # race, and either is a recovery
    for kind, codes in (("ao", ("BUS_MCEERR_AO",)), ("ar", ("BUS_MCEERR_AR", "BUS_MCEERR_AO"))):
        r = row("tcg", kind, "qemu")
        if r:
            tap.eq(r["outcome"], "recovered", f"tcg/{kind}/qemu: patched QEMU forwarded it under TCG, "
                   "the victim recovered")
            tap.ok(any(got(r, c) for c in codes), f"tcg/{kind}/qemu: {' or '.join(codes)} at the "
                   "victim's own VA", diag=r.get("signal"))
            tap.ok(r.get("ms_to_injection") is not None and r.get("qemu_exit") is None,
                   f"tcg/{kind}/qemu: QEMU announced its injection (MEMORY_FAILURE) and runs on",
                   diag={"qemu_log": r.get("qemu_log"), "exit": r.get("qemu_exit")})

r = row("tcg", "ao", "vmced") if not qemu else None
if r:
    tap.eq(r["outcome"], "recovered", "tcg/ao/vmced: the victim recovered")
    sig = r.get("signal") or {}
    tap.eq((sig.get("code_name"), sig.get("own_va"), sig.get("lsb")), ("BUS_MCEERR_AO", True, 12),
           "tcg/ao/vmced: BUS_MCEERR_AO at the victim's own VA, lsb 12")
    tap.ok(l1_sent_sigbus(r), "tcg/ao/vmced: L1's memory_failure() sent SIGBUS to QEMU",
           diag=r["l1_memory_failure"])
    ev = events(r, "injected")
    tap.ok(ev and ev[0]["gpa"] == r["gpa"] and ev[0]["source"] == "kernel"
           and ev[0]["si_code"] == "BUS_MCEERR_AO" and ev[0]["hva"] == r["hva"],
           "tcg/ao/vmced: the journal holds the kernel's AO with the victim's GPA", diag=r["journal"])

r = row("tcg", "ar", "vmced") if not qemu else None
if r:
    tap.eq(r["outcome"], "recovered", "tcg/ar/vmced: the victim recovered")
    sig = r.get("signal") or {}
    tap.eq((sig.get("code_name"), sig.get("own_va")), ("BUS_MCEERR_AR", True),
           "tcg/ar/vmced: BUS_MCEERR_AR at the victim's own VA")
    ignored = events(r, "ignored")
    ar = [e for e in events(r, "injected") if e["si_code"] == "BUS_MCEERR_AR"]
    tap.ok(ignored and ignored[0]["si_code"] == "BUS_MCEERR_AO",
           "tcg/ar/vmced: the host's early AO was held back by policy ignore-ao", diag=r["journal"])
    # the kernel reports the address that was loaded from, not the page
    tap.ok(ar and ar[0]["thread"].startswith("vcpu")
           and int(ar[0]["gpa"], 16) & ~0xfff == int(r["gpa"], 16)
           and "replaced" in (ar[0]["detail"] or ""),
           "tcg/ar/vmced: the vCPU consumed it; SRAR injected in the victim's page, the host "
           "page replaced", diag=ar)

for kind in ("ao", "ar"):
    r = row("kvm", kind, "vmced")
    if not r:
        continue
    cpu = r.get("guest_cpu", {})
    if cpu.get("recovery") != "none":
        tap.eq(r["outcome"], "recovered", f"kvm/{kind}/vmced: the guest can recover ({cpu}), and did")
        continue
    refused = events(r, "refused")
    tap.eq(r["outcome"], "refused",
           f"kvm/{kind}/vmced: the guest cannot recover ({cpu.get('vendor')}, SER_P "
           f"{cpu.get('ser_p')}, SUCCOR {cpu.get('succor')} on {r.get('host_vendor')}): vmced refuses")
    tap.ok(refused and ("SUCCOR" in refused[-1]["detail"] or "MCG_SER_P" in refused[-1]["detail"]),
           f"kvm/{kind}/vmced: the journal says why", diag=refused)
    if kind == "ar":
        tap.eq(r.get("vm_status"), "paused",
               "kvm/ar/vmced: the VM is paused rather than left to fault forever")
    else:
        tap.eq(r.get("vm_status"), "running", "kvm/ao/vmced: the guest runs on, not told")

if qemu:
    # qemu-patches/ 0001: under KVM, QEMU's copy of MCG_STATUS keeps the MCIP
    # of the last injection; inject-mce read it and refused every later one
    tap.ok(again is not None and again["outcome"] == "recovered",
           "kvm/ar/vmced again: a second SRAR into the same guest recovers too (inject-mce reads "
           "MCIP where it is current)", diag=again and [e for e in again.get("journal", [])
                                                       if e["type"] == "memory-error"])

r = row("kvm", "ao", "qemu")
if r and "succor=on" in r.get("l2_cpu_model", ""):
    # qemu-patches/ 0004: the AMD guest has SUCCOR, QEMU sends a deferred error
    tap.eq(r["outcome"], "recovered", "kvm/ao/qemu: QEMU with SUCCOR and AMD encodings: the AMD "
           "guest recovers")
    tap.ok(any("injected" in ln for ln in r["qemu_log"]), "kvm/ao/qemu: QEMU logged its injection",
           diag=r["qemu_log"])
elif r:
    tap.eq(r["outcome"], "guest-panic", "kvm/ao/qemu: QEMU 7.2 injects SRAO and the AMD guest panics")
    tap.ok(any("Uncorrected error without MCA Recovery" in ln or "Fatal" in ln
               for ln in r["guest_log"]), "kvm/ao/qemu: the guest log says why", diag=r["guest_log"])
    tap.ok(any("injected" in ln for ln in r["qemu_log"]), "kvm/ao/qemu: QEMU logged its injection",
           diag=r["qemu_log"])

def check_reboot(accel, kind, fwd):
    """`then: reboot`: the guest reboots with the host page still poisoned
    (in L1's RAM file, a shmem page: punching the hole is what gets rid of
    it). vmced's rows must come back clean; QEMU's own forwarding goes
    through the same steps in the adjacent row, for comparison."""
    r = rows.get((accel, kind, fwd))
    label = f"{accel}/{kind}/{fwd} then reboot"
    if r is None or r["outcome"] == "error" or r.get("after_reboot") is None:
        tap.ok(False, f"{label}: the guest was rebooted after the error", diag=r)
        return
    a = r["after_reboot"]
    # a page in a ROM blob (the -kernel image: the guest kernel's freed
    # init memory) is written back by QEMU's own main thread at the reset
    tap.diag(f"{label}: the page {r['gpa']} is " + (f"in ROM blob {r['gpa_in_rom']}" if r.get("gpa_in_rom")
                                                    else "in no ROM blob"))
    if fwd == "qemu" and qemu:
        # qemu-patches/ 0006 (and 0005's page-aligned list): QEMU punches the
        # page out of the RAM file itself at reset
        tap.ok(a["back"] and a["qemu_exit"] is None and a["guest_mce_log"] == [],
               f"{label}: patched QEMU's own forwarding: the guest comes back, no machine check "
               "(0006)", diag=a)
        return
    if fwd == "qemu":
        tap.ok("back" in a and a["how"] in ("guest", "qmp"),
               f"{label}: QEMU's own forwarding, same steps, recorded", diag=a)
        tap.diag(f"{label}: {'came back' if a['back'] else 'did not come back'}"
                 f"{', QEMU ' + a['qemu_exit'] if a['qemu_exit'] else ''}; "
                 f"MCE lines at boot: {a['guest_mce_log'][-2:]}")
        return
    tap.ok(a["back"] and a["qemu_exit"] is None,
           f"{label}: the guest came back ({a['how']} reboot, {a['boot_s']} s), QEMU runs", diag=a)
    tap.eq(a["guest_mce_log"], [], f"{label}: its new boot's kernel log has no machine check")
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
           f"{label}: vmced replaced the page, punched out of the RAM file", diag=resets)


if qemu:
    for accel, fwd in (("tcg", "qemu"), ("kvm", "vmced"), ("kvm", "qemu")):
        check_reboot(accel, "ao", fwd)
    tap.skip("bad input", "checked in the run with Debian's QEMU")
    tap.done()

for accel, fwd in (("tcg", "vmced"), ("kvm", "vmced"), ("kvm", "qemu")):
    check_reboot(accel, "ao", fwd)

# bad input: a pfn that is not the guest's, an L1 that cannot boot
res = subprocess.run([sys.executable, os.path.join(paths.ROOT, "run", "hostlab"), "--accel", "kvm",
                      "--pfn", "0x1"], capture_output=True, text=True, timeout=600)
errors = [ln for ln in res.stderr.splitlines() if "error:" in ln]
tap.ok(res.returncode != 0 and len(errors) == 1 and "not guest RAM" in errors[0],
       "bad input: poisoning a pfn that is not guest RAM is refused, in one line, exit non-zero",
       diag=res.stderr[-1500:])
res = subprocess.run([sys.executable, os.path.join(paths.ROOT, "run", "hostlab"), "--l1-mem", "100M"],
                     capture_output=True, text=True, timeout=600)
errors = [ln for ln in res.stderr.splitlines() if "error:" in ln]
console = errors[0].split("console ")[-1].split(" ")[0] if errors else ""
tap.ok(res.returncode != 0 and errors and "L1 did not come up" in errors[0] and os.path.exists(console),
       "bad input: an L1 that cannot boot: a clear error, exit non-zero, its console log kept",
       diag=res.stderr[-1500:])
tap.done()
