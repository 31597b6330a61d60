#!/usr/bin/env python3
"""QEMU's own answer to real host memory errors on Arm64 under KVM:
run/armlab. An emulated Arm64 L1 host (TCG on this x86 host: virt with
virtualization=on, Debian 12's arm64 6.1 kernel, KVM built in) runs the
Arm64 guest under its own KVM, under each of Debian's arm64 QEMUs (Debian
12's 7.2, Debian 13's 10.0, trixie-backports' 11.1; each with its own
libraries); L1's kernel poisons the page behind a victim's page and sends
QEMU the real SIGBUS. No vmced: QEMU is the forwarder. One L1 boot, six
L2 boots.

Asserts what L1 and each QEMU give, as a QEMU developer would check it:
- L1 came up with KVM (its kernel's "kvm [1]: VHE mode initialized
  successfully") and every QEMU runs in it, of the version it is named for;
- AO (the page poisoned, early kill): L1's memory_failure() sent QEMU its
  SIGBUS, and the guest is told nothing: no signal to the victim, no error
  line in the guest's log, QEMU and the guest running on, as
  target/arm/kvm.c kvm_arch_on_sigbus_vcpu() says ("we currently don't
  tell the guest at all about BUS_MCEERR_AO");
- AR (the victim then reads its page: L1's KVM sends the vCPU thread
  BUS_MCEERR_AR): QEMU records a CPER memory error in its GHES and injects
  an SEA; the guest logs the GHES record with the victim's GPA as its
  physical_address and "Memory failure:" for that page, and the victim gets
  SIGBUS at its own address (BUS_MCEERR_AO: Debian 12's 6.1 guest runs the
  SEA's memory_failure() in a kworker, and the victim is killed early);
  QEMU and the guest run on.
Suite check-all (make check-all fetches the QEMUs: make armlab-qemus).
"""
import json
import os
import re
import subprocess
import sys

from common import Tap, paths

tap = Tap()
ARMLAB = os.path.join(paths.ROOT, "run", "armlab")
QEMUS = {"debian-7.2-arm64": "7.2", "debian-10.0-arm64": "10.0", "debian-11.1-arm64": "11.1"}
GHES = re.compile(r"Hardware error from APEI Generic Hardware Error Source: \d+")

try:
    res = subprocess.run([sys.executable, ARMLAB, "--json"], capture_output=True, text=True, timeout=1700)
except subprocess.TimeoutExpired as e:
    tap.bail(f"run/armlab did not finish in {e.timeout:.0f} s")
if res.returncode == 2:
    # a part not made: run/armlab said which, and what makes it
    tap.bail(f"{res.stderr.strip().splitlines()[-1]} (make check-all makes the Arm64 lab's parts)")
try:
    out = json.loads(res.stdout)
except ValueError:
    tap.bail(f"run/armlab printed no results (exit {res.returncode}): {res.stderr.strip()[-2000:]}")
tap.diag(res.stderr.strip()[-2500:])
host = out["host"]
tap.ok(host["kvm"] and host.get("kvm_init") and "mode initialized successfully" in host["kvm_init"],
       f"L1 came up in {host['up_s']} s with KVM: \"kvm [1]: {host.get('kvm_init')}\" at "
       f"{host.get('kvm_init_s')} s of its clock", diag=host)
versions = {q["slug"]: q["version"] or "" for q in host.get("qemus", [])}
for name, v in QEMUS.items():
    tap.ok(re.search(rf"version {re.escape(v)}\.\d", versions.get(name, "")),
           f"{name} runs in L1 with its own libraries: {versions.get(name)}")

results = {(r["scenario"]["qemu"], r["scenario"]["kind"]): r for r in out["results"]}
tap.eq(sorted(results), sorted((n, k) for n in QEMUS for k in ("ao", "ar")), "every QEMU x kind ran")


def running(r):
    return r.get("qemu_exit") is None and r.get("vm_status") == "running"


for name in QEMUS:
    r = results.get((name, "ao"))
    if r is not None:
        tap.ok(any("Sending SIGBUS to" in ln for ln in r.get("l1_memory_failure", [])),
               f"{name} AO: L1's memory_failure() sent QEMU its SIGBUS", diag=r.get("l1_memory_failure"))
        tap.ok(r["outcome"] == "nothing" and not r.get("signal") and not r.get("guest_log") and running(r),
               f"{name} AO: the guest is told nothing (no signal, no error line), QEMU and the guest "
               f"run on ({r['outcome']}, L2 booted in {r.get('l2_boot_s')} s)",
               diag={k: r.get(k) for k in ("outcome", "signal", "guest_log", "qemu_log", "qemu_exit", "detail")})
    r = results.get((name, "ar"))
    if r is None:
        continue
    sig = r.get("signal") or {}
    tap.ok(r["outcome"] == "recovered" and sig.get("own_va") and sig.get("code_name") == "BUS_MCEERR_AO",
           f"{name} AR: the victim got SIGBUS {sig.get('code_name')} at its own address {sig.get('addr')} "
           f"(L2 booted in {r.get('l2_boot_s')} s)",
           diag={k: r.get(k) for k in ("outcome", "signal", "qemu_log", "qemu_exit", "detail")})
    log = r.get("guest_log") or []
    gpa = int(r["gpa"], 16) if r.get("gpa") else None
    tap.ok(any(GHES.search(ln) for ln in log)
           and any(f"physical_address: 0x{gpa:016x}" in ln for ln in log if gpa is not None),
           f"{name} AR: the guest read QEMU's CPER from GHES, physical_address the victim's GPA {r.get('gpa')}",
           diag=log)
    tap.ok(gpa is not None and any(f"Memory failure: {gpa >> 12:#x}:" in ln for ln in log),
           f"{name} AR: the guest's memory_failure() took the page", diag=log)
    tap.ok(running(r), f"{name} AR: QEMU and the guest run on ({r.get('vm_status')})",
           diag={k: r.get(k) for k in ("qemu_log", "qemu_exit", "vm_status")})
tap.done()
