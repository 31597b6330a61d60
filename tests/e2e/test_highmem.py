#!/usr/bin/env python3
"""A 5 GiB guest: RAM split around the PCI hole, in two RAM blocks.

Two NUMA nodes, each its own memory backend (1 GiB and 4 GiB). Node 1's
RAM sits partly below 4 GiB and partly above, at a non-zero offset in its
block. The victim takes a page above 4 GiB from node 1; the AO error on it
must reach it, and vmced's HVA for it must be QEMU's own.
"""
import os

from common import (Tap, Vm, Vmced, gpa2hva, prerequisites, start_victim, victim_status,
                    wait_for, wait_sigbus, workdir)

BUS_MCEERR_AO = 5
FOUR_GIB = 1 << 32

tap = Tap()
prerequisites(tap)
work = workdir("highmem")
vm = Vm.start("e2e-highmem", mem="5G", numa=["1G", "4G"], state_dir=os.path.join(work, "vm"))
daemon = None
try:
    vm.wait_ready(timeout=120)
    tap.diag(f"5 GiB guest ready {vm.ready_seconds:.1f} s after QEMU started")
    daemon = Vmced(os.path.join(work, "vmced"),
                   args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", "e2e-highmem",
                         "--agent", vm.vmced_agent_path])
    layout = daemon.wait_attached("e2e-highmem")["layout"]
    blocks = sorted({r["block"] for r in layout if not r["rom"]})
    tap.ok({"ram-node0", "ram-node1"} <= set(blocks), "vmced sees both RAM blocks", diag=layout)
    above = [r for r in layout if int(r["gpa"], 16) >= FOUR_GIB]
    tap.ok(above and all(r["block"] == "ram-node1" and int(r["offset"], 16) > 0 for r in above),
           "the RAM above 4 GiB is node 1's, at a non-zero offset in its block", diag=layout)

    agent = vm.agent
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)
    victim = start_victim(agent, mode="idle", node=1, min_gpa=hex(FOUR_GIB))
    tap.ok(victim["gpa_int"] >= FOUR_GIB, f"the victim's page is above 4 GiB (GPA {victim['gpa']})")
    hc_before = agent.hardware_corrupted_kb()
    ev = daemon.poison("e2e-highmem", "--guest-pid", str(victim["pid"]), "--guest-va",
                       victim["va"], "--kind", "ao")
    tap.eq((ev["result"], ev["block"]), ("injected", "ram-node1"),
           "the error is injected, in block ram-node1")
    tap.eq(int(ev["gpa"], 16), victim["gpa_int"], "the journal's GPA is the one the victim reported")
    tap.eq(int(ev["hva"], 16), gpa2hva(vm, victim["gpa_int"]),
           "the HVA vmced poisoned is where QEMU maps that GPA")
    sig = wait_sigbus(agent, victim["pid"])
    tap.ok(sig is not None and sig["code"] == BUS_MCEERR_AO and int(sig["addr"], 16) == victim["va_int"],
           "the victim got BUS_MCEERR_AO at its own VA", diag=victim_status(agent, victim["pid"]))
    tap.eq(agent.hardware_corrupted_kb() - hc_before, 4, "HardwareCorrupted grew by 4 kB")
    tap.ok(vm.alive(), "QEMU is still running")

    # policy pass: QEMU gets the signal as if vmced were not there. A TCG
    # QEMU 7.2 takes its KVM path for it and aborts: what the host lab's
    # table shows for unmodified QEMU, here with a simulated error
    daemon.ctl("policy", "e2e-highmem", "pass")
    victim = start_victim(agent, mode="idle")
    ev = daemon.poison("e2e-highmem", "--guest-pid", str(victim["pid"]), "--guest-va",
                       victim["va"], "--kind", "ao")
    tap.eq((ev.get("result"), ev.get("handled_by"), ev.get("policy")), ("passed", "qemu", "pass"),
           "policy pass: the signal went to QEMU untouched")
    rec = wait_for(lambda: [r for r in daemon.journal_records() if r["type"] == "vm-exit"], 15)
    tap.ok(rec and "signal 6" in rec[0]["reason"],
           "policy pass: unmodified QEMU under TCG aborts on it, and the journal says so",
           diag=(rec, vm.qemu_log()[-300:]))
finally:
    if daemon is not None:
        daemon.stop()
    vm.stop()
tap.done()
