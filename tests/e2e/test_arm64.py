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
  GHES still there;
- a second guest on vmce-10.2-arm64 (vmce's 10.2 series built for aarch64,
  `make qemu-10.2-arm64`; skipped, saying so, where it is not built),
  machine type virt (10.2's virt-10.2, whose HEST has the GPIO source
  inject-ghes-v2-error writes to), with vmced attached, which says nothing
  is missing: an AO vmced catches on an idle victim's page (early kill)
  goes through inject-ghes-v2-error (path ghes-qmp), an AR on a page the
  victim reads through x-vmce-inject-sea (path sea, an SEA on the vCPU
  that consumed it); each time the victim gets SIGBUS at its own address
  (in its page) with BUS_MCEERR_AO / BUS_MCEERR_AR (an AR with late kill:
  Debian 12's 6.1 runs the SEA's memory_failure() in a kworker, so with
  early kill the victim gets BUS_MCEERR_AO, which a third error checks),
  the guest kernel logs the GHES record from the HEST source it came
  through and its "Memory failure:" line, HardwareCorrupted grows by the
  page, the journal has the path, the victim's GPA and the latency,
  vmced's guest-answer record says the guest handled it, with that line,
  and the guest and QEMU run on;
- on that guest, a record the guest rejects: an AO at an address of
  QEMU's RAM that its memory map leaves out (mem=448M of 512), which QEMU
  takes and answers success; vmced's guest-answer record says "rejected"
  with the guest's own line, vmcectl events says so, no page is isolated
  and the guest runs on.
make check builds the guest and the QEMU (make image-arm64
qemu-10.2-arm64).
"""
import os
import re
import time

from common import (Tap, Vm, Vmced, prerequisites_arm64, start_victim, thread_states, victim_status, wait_kmsg,
                    wait_sigbus, workdir)
from vmcelab import arm64

BUS_MCEERR_AR = 4
BUS_MCEERR_AO = 5
# what the guest's GHES driver prints of a record it took (drivers/acpi/apei/ghes.c
# and cper.c): the source, then the memory error section with its address
GHES_LINE = r"\[Hardware Error\]: Hardware error from APEI Generic Hardware Error Source: (\d+)"

# how a guest kernel refuses a record's address: GHES itself (6.1's
# ghes_do_memory_failure()), or memory_failure() (6.1.192 and 7.3)
REFUSED = r"Invalid address in generic error data|memory outside kernel control"
# virt's RAM starts at 1 GiB; the forwarding guest's kernel maps 448 MiB of its 512
VIRT_RAM_BASE = 0x40000000
GUEST_MAP_MIB = 448

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
    # one TCG guest at a time on this machine's shared cores
    copy.stop()


def forwarded(fvm, daemon, kind, mode, early_kill):
    """One error vmced catches on a fresh victim's page, told to the guest:
    (the journal's event, the victim, its SIGBUS, the kernel log since)"""
    agent = fvm.agent
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=early_kill)
    hc_before = agent.hardware_corrupted_kb()
    _, since = agent.kmsg()
    victim = start_victim(agent, mode=mode)
    ev = daemon.poison("e2e-arm64-fwd", "--guest-pid", str(victim["pid"]), "--guest-va", victim["va"],
                       "--kind", kind)
    sig = wait_sigbus(agent, victim["pid"])
    # the guest's own lines: what it did with the record
    wait_kmsg(agent, r"Memory failure: 0x[0-9a-f]+: ", since=since, timeout=10)
    lines, _ = agent.kmsg(since)
    return ev, victim, sig, lines, agent.hardware_corrupted_kb() - hc_before


def guest_answer(daemon, seq, timeout=15):
    """vmced's guest-answer record about its error @seq, once journaled"""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for rec in daemon.journal_records():
            if rec.get("type") == "guest-answer" and rec.get("about_seq") == seq:
                return rec
        time.sleep(0.2)
    return None


def judge(fvm, daemon, name, path, code, got, logged=True):
    """@logged: the GHES driver prints a record (ghes_print_estatus():
    at most 2 uncorrected ones in 5 s, a ratelimit)"""
    ev, victim, sig, lines, hc_grew = got
    tap.ok(ev.get("result") == "injected" and ev.get("path") == path,
           f"{name}: vmced told the guest through path {path} (x-vmce-inject-sea)" if path == "sea"
           else f"{name}: vmced told the guest through path {path} (inject-ghes-v2-error)", diag=ev)
    # an AR's is the address the vCPU's load faulted at, in the victim's page
    tap.eq(int(ev.get("gpa") or "0", 16) & ~0xfff, victim["gpa_int"],
           f"{name}: journaled at the victim's GPA ({ev.get('gpa')})")
    tap.ok(isinstance(ev.get("latency_us"), int) and ev["latency_us"] > 0,
           f"{name}: signal-stop to acknowledged journaled ({ev.get('latency_us')} us)")
    tap.ok(sig is not None and sig.get("code") == code, f"{name}: the victim got SIGBUS of code {code}",
           diag=victim_status(fvm.agent, victim["pid"]))
    if sig:
        # an AR's is where the victim's next load faulted, in its page
        tap.eq(int(sig.get("addr") or "0", 16) & ~0xfff, victim["va_int"],
               f"{name}:   at its own address ({sig.get('addr')}, its page {victim['va']})")
    # HEST's sources (hw/arm/virt-acpi-build.c): 0 is the SEA one, 1 the
    # GPIO one inject-ghes-v2-error writes to
    source = "0" if path == "sea" else "1"
    ghes = [m.group(1) for m in (re.search(GHES_LINE, ln) for ln in lines) if m]
    if logged:
        tap.ok(ghes[:1] == [source], f"{name}: the guest's GHES driver logged the record, from HEST source "
               f"{source}", diag="\n".join(lines[-30:]))
    mf = [ln for ln in lines if re.search(r"Memory failure: 0x[0-9a-f]+: ", ln)]
    tap.ok(mf and re.search(r"Recovered|Sending SIGBUS|Killing", mf[0]) is not None,
           f"{name}: the guest kernel's memory_failure() took the page ({mf[:1]})", diag="\n".join(lines[-30:]))
    tap.eq(hc_grew, 4, f"{name}: HardwareCorrupted grew by 4 kB")
    # what vmced read of the guest's answer: memory_failure()'s own line
    ans = guest_answer(daemon, ev.get("seq"))
    mf_prefix = f"Memory failure: {victim['gpa_int'] >> 12:#x}: "
    tap.ok(ans is not None and ans.get("answer") == "handled" and ans.get("path") == path
           and any(mf_prefix in ln for ln in ans.get("lines") or []),
           f"{name}: vmced's guest-answer record: handled, with the guest's line "
           f"({(ans or {}).get('lines', [''])[-1:]}, {(ans or {}).get('waited_ms')} ms)", diag=ans)
    tap.ok(fvm.alive() and fvm.agent.call("ping") is not None and "t" not in thread_states(fvm.pid).values(),
           f"{name}: guest and QEMU run on, no thread of it left stopped")


def case_rejected(fvm, daemon):
    """A record the guest rejects: vmced translates an address of QEMU's RAM
    that the guest's memory map leaves out (mem=), writes its CPER record,
    and QEMU answers success; the guest's GHES refuses it ("Invalid address
    in generic error data", drivers/acpi/apei/ghes.c) and only its log says
    so: vmced's guest-answer record carries that line. Debian 12's 6.1.192
    passes the address on, and memory_failure() refuses it ("memory outside
    kernel control"); GHES's own refusal ("Invalid address in generic error
    data", ghes_do_memory_failure()) is the other line a kernel gives"""
    gpa = VIRT_RAM_BASE + ((GUEST_MAP_MIB + 32) << 20)
    hc_before = fvm.agent.hardware_corrupted_kb()
    ev = daemon.poison("e2e-arm64-fwd", "--gpa", hex(gpa), "--kind", "ao")
    tap.ok(ev.get("result") == "injected" and ev.get("path") == "ghes-qmp",
           f"rejected: vmced told the guest of GPA {gpa:#x}, outside its memory map, and QEMU took it", diag=ev)
    ans = guest_answer(daemon, ev.get("seq"))
    line = [ln for ln in (ans or {}).get("lines") or [] if re.search(REFUSED, ln)]
    tap.ok(ans is not None and ans.get("answer") == "rejected" and line,
           f"rejected: vmced's guest-answer record says the guest rejected it, with its line ({line[:1]})",
           diag=ans)
    text = daemon.ctl("events", "-n", "3").stdout
    tap.ok(re.search(rf"guest-answer vm e2e-arm64-fwd: error {ev.get('seq')} .*the guest rejected: .*({REFUSED})",
                     text) is not None, "rejected: vmcectl events says so in one line", diag=text)
    tap.eq(fvm.agent.hardware_corrupted_kb() - hc_before, 0, "rejected: the guest isolated no page")
    tap.ok(fvm.alive() and fvm.agent.call("ping") is not None and "t" not in thread_states(fvm.pid).values(),
           "rejected: guest and QEMU run on, no thread of it left stopped")


def case_vmced_forwards():
    """vmced's Arm path against vmce's 10.2 built for aarch64"""
    try:
        qemu = arm64.qemu_binary("vmce-10.2-arm64")
    except arm64.Arm64Error as e:
        tap.skip("vmced forwards AO and AR into the Arm64 guest", str(e))
        return
    # mem=: the top of the guest's RAM is QEMU's but not in the guest's
    # memory map (case_rejected)
    fvm = Vm.start("e2e-arm64-fwd", arch="arm64", qemu=qemu, state_dir=os.path.join(work, "fwd"), disk=False,
                   append=f"mem={GUEST_MAP_MIB}M")
    daemon = None
    try:
        tap.diag(f"vmce-10.2-arm64's guest ready in {fvm.wait_ready(timeout=180):.1f} s")
        daemon = Vmced(os.path.join(work, "vmced-fwd"),
                       args=["--pid", str(fvm.pid), "--qmp", fvm.vmced_qmp_path, "--name", "e2e-arm64-fwd",
                             "--agent", fvm.vmced_agent_path])
        info = daemon.wait_attached("e2e-arm64-fwd")
        ghes = info.get("ghes") or {}
        tap.ok(ghes.get("ras") is True and ghes.get("inject_ghes") is True and ghes.get("inject_sea") is True,
               "vmced's attach: ras=on, inject-ghes-v2-error and x-vmce-inject-sea", diag=info)
        said = [ln for ln in daemon.log_text().splitlines() if "Arm64 guest:" in ln]
        tap.ok(not said, "vmced says nothing is missing at attach", diag=said)
        judge(fvm, daemon, "AO", "ghes-qmp", BUS_MCEERR_AO, forwarded(fvm, daemon, "ao", "idle", 1))
        # Debian 12's 6.1 runs memory_failure() for the SEA's record from a
        # workqueue, not in the task that took the abort: the page is
        # unmapped, and the victim gets BUS_MCEERR_AR when it reads it again
        # (late kill) ...
        judge(fvm, daemon, "AR", "sea", BUS_MCEERR_AR, forwarded(fvm, daemon, "ar", "read", 0))
        # ... and BUS_MCEERR_AO at once with early kill, as for any other
        # process mapping the page (7.3 runs it as the task's own work)
        judge(fvm, daemon, "AR, early kill", "sea", BUS_MCEERR_AO, forwarded(fvm, daemon, "ar", "read", 1), logged=False)
        case_rejected(fvm, daemon)
    finally:
        if daemon is not None:
            daemon.stop()
        fvm.stop()


try:
    tap.case("boot", case_boot)
    tap.case("ACPI and GHES", case_acpi_ghes)
    tap.case("guest tools", case_guest_tools)
    tap.case("vmced on a QEMU without GHES injection", case_vmced_refuses)
    tap.case("restore", case_restore)
    tap.case("vmced forwards into vmce-10.2-arm64's guest", case_vmced_forwards)
finally:
    for v in (vm, copy):
        if v is not None:
            v.stop()
tap.done()
