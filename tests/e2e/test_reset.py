#!/usr/bin/env python3
"""A poisoned page across guest reset, vmced restart and migration
(simulated host errors, one 512 MiB TCG guest, real vmced, real ptrace).

In order: a journal of another process with the same pid (not restored);
AO on a page of the direct-boot kernel then QMP system_reset (QEMU rewrites
the kernel into it before it announces the reset); AO on a process's page
then system_reset; AR then the guest's own reboot; vmced killed between an
error and the reset; a journal cut short; a migration with nobody to carry
the page to, refused (migrations that carry it: test_migrate.py). After each
reset the guest must come back with no machine check in its kernel log,
and QEMU must be able to read the page again.
"""
import json
import os
import re
import shutil
import signal
import time

from common import (Tap, Vm, Vmced, gpa2hva, prerequisites, start_victim, thread_states,
                    qemu_reads as common_qemu_reads,
                    victim_status, wait_for, wait_kmsg, wait_sigbus, workdir)

BUS_MCEERR_AR = 4
BUS_MCEERR_AO = 5
NAME = "e2e-reset"
# inside the direct-boot kernel's first ELF segment (QEMU loads it at
# 16 MiB): QEMU's rom_reset() writes it again at every reset
KERNEL_GPA = 0x1200000
# what a machine check during boot, or one the kernel handles, prints
# ("mce: Machine check injector initialized" is mce-inject.ko loading)
MCE_LINE = re.compile(r"(?i)machine check(?! injector)|memory failure|hardware error|hwpoison")

tap = Tap()
prerequisites(tap)
work = workdir("reset")
vm = Vm.start(NAME, mem="512M", state_dir=os.path.join(work, "vm"))
daemon = None
vmced_dir = os.path.join(work, "vmced")


def start_daemon(workdir=vmced_dir, extra=()):
    d = Vmced(workdir, args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", NAME,
                             "--agent", vm.vmced_agent_path, *extra])
    d.wait_attached(NAME)
    return d


def journal(d):
    """The journal's records; a line that is not one (the case that cuts
    the journal short makes one on purpose) is left out"""
    recs = []
    with open(d.journal) as f:
        for line in f:
            try:
                recs.append(json.loads(line))
            except ValueError:
                pass
    return recs


def records(d, since=0, type_=None):
    recs = journal(d)[since:]
    return [r for r in recs if type_ is None or r["type"] == type_]


def qemu_reads(hva, pid=None):
    return common_qemu_reads(hva, pid or vm.pid)


def guest_reset(how):
    """Resets the guest (QMP system_reset, or the guest reboots itself)
    and waits for its agent again; returns the seconds that took"""
    t0 = time.monotonic()
    boot = vm.boot_id()
    if how == "qmp":
        with vm.qmp() as q:
            q.execute("system_reset")
    else:
        vm.reboot()
    vm.wait_rebooted(boot, 120)
    vm.agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)
    return time.monotonic() - t0


def check_reset(what, since, gpa, reason):
    """What a user checks after a reset of a guest with a poisoned page"""
    agent = vm.agent
    resets = wait_for(lambda: records(daemon, since, "reset"), 10) or []
    tap.eq(len(resets), 1, f"{what}: one reset record")
    if resets:
        r = resets[0]
        page = next((p for p in r["pages"] if int(p["gpa"], 16) == gpa), None)
        tap.ok(page is not None and page["result"] in ("replaced", "usable") and r["failed"] == 0,
               f"{what}: the reset record lists GPA {gpa:#x}, replaced or usable already", diag=r)
        if page is not None:
            tap.diag(f"GPA {gpa:#x}: {page['result']}: {page.get('how') or page.get('detail')}")
        tap.eq(r["reason"], reason, f"{what}: the reset record says why ({reason})")
    errors = records(daemon, since, "memory-error")
    tap.eq(errors, [], f"{what}: no memory error while the guest booted again")
    lines = [line for line in agent.kmsg(0)[0] if MCE_LINE.search(line)]
    tap.eq(lines, [], f"{what}: the new boot's kernel log has no machine check")
    hva = gpa2hva(vm, gpa)
    tap.ok(hva is not None and qemu_reads(hva), f"{what}: QEMU can read the page again")
    info = daemon.ctl_json("vm", NAME)
    tap.ok(not any(int(p["gpa"], 16) == gpa for p in info["poisoned"]),
           f"{what}: vmcectl vm no longer lists the page", diag=info["poisoned"])
    tap.ok(vm.alive() and "t" not in thread_states(vm.pid).values(),
           f"{what}: QEMU runs, no thread left stopped")


def poison_victim(kind, mode="idle"):
    agent = vm.agent
    victim = start_victim(agent, mode=mode)
    ev = daemon.poison(NAME, "--guest-pid", str(victim["pid"]), "--guest-va", victim["va"],
                       "--kind", kind)
    return victim, ev


def qemu_identity(pid):
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    with open(f"/proc/{pid}/stat") as f:
        start = f.read().rsplit(")", 1)[1].split()[19]
    return f"{boot}/{pid}/{start}"


def case_other_process():
    """A journal whose pages are for another process that had this pid:
    one clear line, nothing restored"""
    other = os.path.join(work, "vmced-other")
    os.makedirs(other)
    me = qemu_identity(vm.pid)
    boot, pid, start = me.split("/")
    fake = f"{boot}/{pid}/{int(start) - 100}"
    rec = {"type": "memory-error", "seq": 1, "time": "2026-12-03T10:00:00.000000Z", "vm": NAME,
           "pid": vm.pid, "qemu_id": fake, "tid": vm.pid, "thread": "main", "source": "kernel",
           "si_code": "BUS_MCEERR_AO", "hva": "0x7f0000200000", "lsb": 12, "gpa": "0x200000",
           "result": "injected"}
    with open(os.path.join(other, "journal.jsonl"), "w") as f:
        f.write(json.dumps(rec) + "\n")
    d = start_daemon(other)
    try:
        info = d.ctl_json("vm", NAME)
        warnings = [ln for ln in d.log_text().splitlines() if "another process" in ln]
        tap.ok(len(warnings) == 1 and fake in warnings[0] and me in warnings[0],
               "journal of another process with this pid: one line names both processes",
               diag=d.log_text())
        tap.ok(info["poisoned"] == [] and info["poisoned_from"].startswith("none: the journal's"),
               "journal of another process: nothing restored, vmcectl vm says why",
               diag=(info["poisoned"], info["poisoned_from"]))
    finally:
        d.stop()


def case_kernel_page():
    """The report's case: an AO on a page of the direct-boot kernel, then
    system_reset. QEMU's main thread rewrites the kernel into RAM before it
    announces the reset; the page must be replaced then, not reported as
    a consumed error (which made QEMU reset the guest a second time)"""
    _, seq = vm.agent.kmsg()
    ev = daemon.poison(NAME, "--gpa", hex(KERNEL_GPA), "--kind", "ao")
    tap.eq(ev["result"], "injected", "kernel page: AO injected")
    # the guest takes it before the reset: an error still logged in its
    # banks at the reset is what the next boot reports first (as after a
    # warm reset on real hardware), which is not what this case is about
    heard = wait_kmsg(vm.agent, rf"Memory failure: {KERNEL_GPA >> 12:#x}:", seq)
    tap.ok(heard is not None, "kernel page: the guest handled the machine check before the reset")
    since = len(journal(daemon))
    secs = guest_reset("qmp")
    tap.diag(f"guest back {secs:.1f} s after system_reset")
    replaced = records(daemon, since, "page-replaced")
    tap.ok(len(replaced) == 1 and "rom_reset" in replaced[0]["page"]["detail"]
           and "vmlinux" in replaced[0]["page"]["detail"],
           "kernel page: replaced as QEMU rewrote its ROM blob into it, and the journal says so",
           diag=replaced)
    check_reset("kernel page", since, KERNEL_GPA, "host-qmp-system-reset")


def case_ao_reset():
    victim, ev = poison_victim("ao")
    tap.eq(ev["result"], "injected", "AO then reset: AO injected")
    sig = wait_sigbus(vm.agent, victim["pid"])
    tap.ok(sig is not None and sig["code"] == BUS_MCEERR_AO, "AO then reset: the victim got its SIGBUS",
           diag=sig)
    hva = int(ev["hva"], 16)
    tap.ok(not qemu_reads(hva), "AO then reset: the host page is taken away, as the kernel would")
    since = len(journal(daemon))
    guest_reset("qmp")
    check_reset("AO then reset", since, victim["gpa_int"], "host-qmp-system-reset")
    r = records(daemon, since, "reset")
    if r:
        tap.diag(f"vCPUs held {r[0]['held_us']} us, {r[0]['since_reset_us']} us after QEMU's RESET")


def case_ar_reboot():
    victim, ev = poison_victim("ar", mode="read")
    tap.eq((ev["result"], ev["si_code"]), ("injected", "BUS_MCEERR_AR"),
           "AR then reboot: the consumed error is injected")
    sig = wait_sigbus(vm.agent, victim["pid"])
    tap.ok(sig is not None and sig["code"] == BUS_MCEERR_AR, "AR then reboot: the victim got SIGBUS AR",
           diag=sig)
    # the lab's guard against a reboot request that outlives its boot
    # (QEMU hands it to the next boot's agent): another boot's is refused
    boot = vm.boot_id()
    try:
        vm.reboot(boot="00000000-0000-0000-0000-000000000000")
        refused = "answered {}"
    except Exception as e:  # noqa: BLE001 - what it says is checked
        refused = str(e)
    tap.ok("(BootChanged)" in refused, "a reboot asked of another boot is refused (BootChanged)",
           diag=refused)
    time.sleep(0.5)
    tap.eq(vm.boot_id(), boot, "... and the guest goes on in the same boot")
    since = len(journal(daemon))
    guest_reset("guest")
    check_reset("AR then reboot", since, victim["gpa_int"], "guest-reset")


def case_vmced_killed():
    """vmced dies (SIGKILL, as a crash) between the error and the reset:
    the next vmced rebuilds the page set from the journal"""
    global daemon
    victim, ev = poison_victim("ao")
    tap.eq(ev["result"], "injected", "vmced killed: AO injected first")
    hva = int(ev["hva"], 16)
    # the record is written just after the error is handled: on disk first
    tap.ok(wait_for(lambda: journaled(victim["gpa_int"]), 10),
           "vmced killed: the error's record is in the journal")
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait()
    tap.ok(not qemu_reads(hva), "vmced killed: it could not give the taken-away page back")
    daemon = start_daemon()
    info = daemon.ctl_json("vm", NAME)
    page = next((p for p in info["poisoned"] if int(p["gpa"], 16) == victim["gpa_int"]), None)
    tap.ok(page is not None and page["restored"] and info["poisoned_from"].startswith("journal:"),
           "vmced killed: the new vmced rebuilt the page from the journal, and says so",
           diag=(info["poisoned"], info["poisoned_from"]))
    tap.ok("still taken away by an earlier vmced" in daemon.log_text(),
           "vmced killed: it knows the page is still taken away", diag=daemon.log_text())
    since = len(journal(daemon))
    guest_reset("qmp")
    check_reset("vmced killed", since, victim["gpa_int"], "host-qmp-system-reset")


def journaled(gpa):
    return [r for r in records(daemon, 0, "memory-error") if r["gpa"] and int(r["gpa"], 16) == gpa]


def case_record_lost():
    """vmced killed before the error's record reached the disk (or an
    error while no vmced watched): the new vmced finds the page in QEMU's
    own page table, and a reset still replaces it"""
    global daemon
    victim, ev = poison_victim("ao")
    wait_for(lambda: journaled(victim["gpa_int"]), 10)
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait()
    # the error's own record, and only it (the guest may reuse a page an
    # earlier case poisoned, whose records must stay)
    with open(daemon.journal) as f:
        lines = f.readlines()
    last = max(i for i, ln in enumerate(lines)
               if '"type":"memory-error"' in ln and f'"gpa":"{victim["gpa"]}"' in ln)
    with open(daemon.journal, "w") as f:
        f.writelines(lines[:last] + lines[last + 1:])
    daemon = start_daemon()
    info = daemon.ctl_json("vm", NAME)
    page = next((p for p in info["poisoned"] if int(p["gpa"], 16) == victim["gpa_int"]), None)
    tap.ok(page is not None and page.get("found_in_qemu") and "page table" in info["poisoned_from"],
           "record lost: the new vmced found the page in QEMU's page table, and says so",
           diag=(info["poisoned"], info["poisoned_from"]))
    since = len(journal(daemon))
    guest_reset("qmp")
    check_reset("record lost", since, victim["gpa_int"], "host-qmp-system-reset")


def case_journal_cut_short():
    """A journal whose last record was cut short (vmced killed mid-write):
    one line says so, every other record counts, the next record starts on
    a line of its own"""
    global daemon
    victim, ev = poison_victim("ao")
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait()
    with open(daemon.journal, "a") as f:
        f.write('{"type": "memory-error", "seq": 999, "vm": "e2e-reset", "gpa": "0x12')
    n_lines = sum(1 for _ in open(daemon.journal))
    log_before = len(daemon.log_text())
    daemon = start_daemon()
    log = daemon.log_text()[log_before:]
    warns = [ln for ln in log.splitlines() if "warning" in ln]
    tap.ok(len(warns) == 1 and f"journal.jsonl:{n_lines}" in warns[0] and "cut short" in warns[0],
           "journal cut short: one line names the file and line", diag=log)
    info = daemon.ctl_json("vm", NAME)
    tap.ok(any(int(p["gpa"], 16) == victim["gpa_int"] for p in info["poisoned"]),
           "journal cut short: the records before it still count (the page is known)",
           diag=info["poisoned"])
    with open(daemon.journal) as f:
        lines = f.read().splitlines()
    bad = []
    for i, line in enumerate(lines):
        try:
            json.loads(line)
        except ValueError:
            bad.append(i + 1)
    tap.eq(bad, [n_lines], "journal cut short: only that line is broken, the next record has its own")


def case_migration_refused():
    """The default (carry) with no destination vmced watches: a migration of
    a VM with a poisoned page is cancelled, with one clear line; QEMU and
    the guest run on"""
    info = daemon.ctl_json("vm", NAME)
    pages = [int(p["gpa"], 16) for p in info["poisoned"] if p["source"] != "inject"]
    tap.ok(pages, "migration refused: the VM has a poisoned page", diag=info["poisoned"])
    since = len(journal(daemon))
    with vm.qmp() as q:
        q.execute("migrate", uri="exec:cat > /dev/null")
        status = wait_for(lambda: (lambda s: s if s in ("cancelled", "failed", "completed") else None)(
            q.execute("query-migrate").get("status")), 60)
    tap.eq(status, "cancelled", "migration refused: vmced cancelled it")
    recs = wait_for(lambda: [r for r in records(daemon, since, "migration") if r["action"] == "refused"],
                    10) or []
    tap.ok(len(recs) == 1 and all(hex(p) in recs[0]["pages"] for p in pages),
           "migration refused: the journal says so and names the pages", diag=recs)
    lines = [ln for ln in daemon.log_text().splitlines() if "migration refused" in ln]
    tap.eq(len(lines), 1, "migration refused: one line in vmced's log")
    tap.ok(vm.alive() and vm.agent.call("ping") is not None,
           "migration refused: QEMU and the guest run on")
    # a page the migration thread met before the cancel is taken away again
    for gpa in pages:
        hva = gpa2hva(vm, gpa)
        tap.ok(not qemu_reads(hva), f"migration refused: GPA {gpa:#x} is still poisoned for the guest")


try:
    vm.wait_ready()
    vm.agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)
    tap.case("journal of another process", case_other_process)
    daemon = start_daemon()
    for name, func in (("kernel page", case_kernel_page), ("AO then reset", case_ao_reset),
                       ("AR then reboot", case_ar_reboot), ("vmced killed", case_vmced_killed),
                       ("record lost", case_record_lost),
                       ("journal cut short", case_journal_cut_short),
                       ("migration refused", case_migration_refused)):
        tap.case(name, func)
finally:
    if daemon is not None:
        tap.eq(daemon.stop(), 0, "vmced stops cleanly on SIGTERM")
    vm.stop()
    shutil.rmtree(os.path.join(work, "vmced-other"), ignore_errors=True)
tap.done()
