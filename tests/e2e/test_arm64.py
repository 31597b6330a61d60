#!/usr/bin/env python3
"""The Arm64 guest boots under TCG and can be told of a memory error.

One 512 MiB Arm64 guest (run/vm start --arch arm64: qemu-system-aarch64,
virt with ras=on, Debian's AAVMF, Debian 12's arm64 kernel, vmce's guest
tools cross-compiled), in order:
- it runs on ACPI, not a device tree: the kernel booted through UEFI and
  has QEMU's HEST, and the kernel's GHES driver took its error source (the
  agent's `firmware`, read from /sys), as its log says too;
- its guest tools run: vmce-victim owns a dirty page, and an error put on
  that page from inside the guest (hwpoison-inject) reaches it as an AO
  SIGBUS at its own address, so the arm64 kernel's memory_failure() and the
  tools' reports work there;
- vmced attaches to its QEMU (Debian 12's 7.2) and says once, at attach,
  what that QEMU lacks for an Arm64 guest (QEMU 10.2's inject-ghes-v2-error,
  vmce's x-vmce-inject-sea); an AO vmced catches there is refused in one
  line naming it, journaled with its GPA and path "refused", the guest
  process not signalled, QEMU running and no thread of it left stopped,
  and vmced lets it go when it stops;
- it is restored from its first boot as the x86 guests are (Vm.save_state,
  then a copy started with incoming=): the copy answers as the same boot,
  GHES still there.
Suite check-all (make check-all builds the guest: make image-arm64).
"""
import os
import re
import time

from common import (Tap, Vm, Vmced, prerequisites_arm64, start_victim, thread_states, victim_status, wait_kmsg,
                    wait_sigbus, workdir)

BUS_MCEERR_AO = 5

tap = Tap()
prerequisites_arm64(tap)
work = workdir("arm64")
# no data disk: a restored copy would get a fresh one under a guest that had
# mounted the saved one
vm = Vm.start("e2e-arm64", arch="arm64", state_dir=os.path.join(work, "vm"), disk=False)
copy = None


def case_boot():
    seconds = vm.wait_ready(timeout=180)
    tap.diag(f"the Arm64 guest was ready in {seconds:.1f} s")
    pong = vm.agent.call("ping")
    tap.ok(pong["release"].endswith("-arm64"), f"the guest runs Debian's arm64 kernel ({pong['release']})")
    log = vm.console()
    tap.ok("EFI stub: Booting Linux Kernel" in log, "the kernel was booted by UEFI (AAVMF), its EFI stub says so",
           diag=log[-2000:])


def case_acpi_ghes():
    fw = vm.agent.call("firmware")
    tap.ok(fw["efi"], "the guest has /sys/firmware/efi")
    tap.ok("HEST" in fw["acpi_tables"], "ACPI's HEST is in /sys/firmware/acpi/tables",
           diag=f"tables: {fw['acpi_tables']}")
    tap.ok(any(d.startswith("GHES") for d in fw["ghes"]),
           "the kernel's GHES driver took QEMU's error source", diag=f"bound to GHES: {fw['ghes']}")
    hest = wait_kmsg(vm.agent, r"^ACPI: HEST 0x", timeout=5)
    tap.ok(hest is not None, f"the kernel log lists the HEST table ({hest})")
    parsed = wait_kmsg(vm.agent, r"^HEST: Table parsing has been initialized", timeout=5)
    tap.ok(parsed is not None, "the kernel parsed HEST")


def case_guest_tools():
    agent = vm.agent
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)
    _, since = agent.kmsg()
    victim = start_victim(agent, mode="idle")
    # virt's RAM starts at 1 GiB
    tap.ok(victim["gpa_int"] >= 0x40000000, f"vmce-victim's page is in virt's RAM (GPA {victim['gpa']})")
    res = agent.call("inject", method="corrupt-pfn", pfn=int(victim["pfn"], 16))
    tap.ok(res.get("error") is None, "hwpoison-inject took the victim's page", diag=str(res))
    sig = wait_sigbus(agent, victim["pid"])
    tap.ok(sig is not None, "vmce-victim got a SIGBUS")
    if sig:
        tap.eq(sig.get("code"), BUS_MCEERR_AO, "  of code BUS_MCEERR_AO (early kill)")
        tap.eq(int(sig.get("addr") or "0", 16), victim["va_int"], "  at the victim's own address")
    line = wait_kmsg(agent, r"Memory failure: 0x[0-9a-f]+: ", since=since, timeout=10)
    tap.ok(line is not None and re.search(r"Recovered|Sending SIGBUS", line or "") is not None,
           f"the arm64 kernel handled the error ({line})")
    agent.call("victim-stop", pid=victim["pid"])


def case_vmced_refuses():
    """What vmced does on a QEMU with no way to tell an Arm64 guest"""
    daemon = Vmced(os.path.join(work, "vmced"),
                   args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", "e2e-arm64",
                         "--agent", vm.vmced_agent_path])
    try:
        info = daemon.wait_attached("e2e-arm64")
        ghes = info.get("ghes") or {}
        tap.ok(info.get("arch") == "aarch64" and ghes.get("ras") is True and not ghes.get("inject_ghes"),
               "vmced's attach: an Arm64 QEMU with ras=on and no inject-ghes-v2-error", diag=info)
        said = [ln for ln in daemon.log_text().splitlines() if "Arm64 guest:" in ln]
        tap.ok(len(said) == 1 and "10.2" in said[0], "vmced says once at attach what this QEMU lacks",
               diag=said or daemon.log_text()[-1500:])
        agent = vm.agent
        victim = start_victim(agent, mode="idle")
        ev = daemon.poison("e2e-arm64", "--guest-pid", str(victim["pid"]), "--guest-va", victim["va"],
                           "--kind", "ao")
        tap.ok(ev.get("result") == "refused" and ev.get("path") == "refused"
               and "inject-ghes-v2-error" in (ev.get("detail") or "") and "\n" not in ev.get("detail", ""),
               f"an AO is refused in one line naming what it takes: {ev.get('detail')}", diag=ev)
        tap.eq(int(ev.get("gpa") or "0", 16), victim["gpa_int"], "  journaled at the victim's GPA")
        tap.ok(wait_sigbus(agent, victim["pid"], timeout=3) is None,
               "the guest process was not signalled (the guest was told nothing)",
               diag=victim_status(agent, victim["pid"]))
        tap.ok(vm.alive() and "t" not in thread_states(vm.pid).values(),
               "QEMU runs on, no thread of it left stopped")
    finally:
        daemon.stop()
    tap.ok(not any(st == "t" for st in thread_states(vm.pid).values()) and vm.alive(),
           "vmced stopped: QEMU running, untraced")


def case_restore():
    global copy
    boot = vm.boot_id()
    vm.agent.close()
    vm.agent = None
    template = os.path.join(work, "arm64.template")
    vm.save_state(template)
    vm.stop()
    t = time.monotonic()
    copy = Vm.start("e2e-arm64-copy", arch="arm64", state_dir=os.path.join(work, "copy"), disk=False,
                    incoming=template)
    copy.resume()
    copy.wait_ready(timeout=60)
    tap.diag(f"the restored copy answered {time.monotonic() - t:.1f} s after its QEMU was started")
    tap.eq(copy.boot_id(), boot, "the restored copy is the saved boot (same boot id)")
    fw = copy.agent.call("firmware")
    tap.ok("HEST" in fw["acpi_tables"] and fw["ghes"], "the copy still has HEST and its GHES source")


try:
    tap.case("boot", case_boot)
    tap.case("ACPI and GHES", case_acpi_ghes)
    tap.case("guest tools", case_guest_tools)
    tap.case("vmced on a QEMU without GHES injection", case_vmced_refuses)
    tap.case("restore", case_restore)
finally:
    for v in (vm, copy):
        if v is not None:
            v.stop()
tap.done()
