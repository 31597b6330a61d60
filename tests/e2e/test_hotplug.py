#!/usr/bin/env python3
"""Memory hot-plugged after vmced attached: pc-dimms (QMP object-add and
device_add) and a virtio-mem device, on vmce-6.1 (virtio-mem and memory
hot-remove built in); and a DIMM unplugged again. QEMU 7.2 sends no DEVICE_ADDED for it, so vmced's layout
does not have it until it reads the layout again: an address it does not
know makes it do that before it answers (a command) or decides (a held
memory-error stop). The DIMM's memory must then be translated, and an
error in it must reach the guest process that owns the page, at the right
GPA, at once: not "not guest RAM", not passed to QEMU. (An error waits
for the guest to put its DIMM online: in memory the guest does not manage
yet it cannot be isolated, and the guest panics when its kernel first uses
the page.) An unplugged DIMM's range leaves vmced's layout (DEVICE_DELETED).
"""
import json
import os
import re
import time

from common import (Tap, Vm, Vmced, gpa2hva, prerequisites, start_victim, victim_status,
                    wait_for, wait_sigbus, workdir)
from vmcelab.agent import AgentError
from vmcelab.kernels import KernelError, resolve

BUS_MCEERR_AO = 5
NAME = "e2e-hotplug"
# QEMU with qemu-patches/ (e2e-hotplug-vmce-10.0, e2e-hotplug-vmce-10.2)
PATCHED = os.environ.get("VMCE_EXPECT_INJECT") == "qmp"

tap = Tap()
prerequisites(tap)
try:
    kernel = resolve("vmce-6.1")
except KernelError as e:
    tap.bail(f"{e} (make check builds it)")
work = workdir("hotplug")
# room for two DIMMs of 256 MiB beside the boot memory
# (the guest puts new memory to use as it comes, which Debian's 6.1 does
# not by itself; movable, so a process's pages can land in it)
victims = []  # guest pids, to stop before a DIMM is unplugged
vm = Vm.start(NAME, mem="512M", state_dir=os.path.join(work, "vm"),
              kernel=kernel.image, initrd=kernel.initrd,
              append="memhp_default_state=online_movable",
              extra=["-m", "512M,slots=2,maxmem=2G"])
daemon = None


def plug(q, n):
    """A 256 MiB DIMM; its guest physical address"""
    q.execute("object-add", **{"qom-type": "memory-backend-ram", "id": f"hp-mem{n}",
                               "size": 256 << 20})
    q.execute("device_add", driver="pc-dimm", id=f"hp-dimm{n}", memdev=f"hp-mem{n}")
    return device_addr(q, f"hp-dimm{n}")


def device_addr(q, dev_id):
    devs = q.execute("query-memory-devices")
    # pc-dimm says addr, virtio-mem memaddr
    return next(d["data"].get("addr", d["data"].get("memaddr")) for d in devs
                if d["data"].get("id") == dev_id)


def victim_at(agent, low, size):
    """A guest process whose page is in [low, low + size): once the guest
    has put that memory to use"""
    # each try that finds nothing there costs an OOM kill in the guest
    for _ in range(3):
        try:
            victim = start_victim(agent, mode="idle", min_gpa=hex(low))
            victims.append(victim["pid"])
            if victim["gpa_int"] < low + size:
                return victim
        except AgentError:  # not online yet
            pass
        time.sleep(1)
    return None


def stop_victims(agent):
    """A victim keeps every page it took on its way up to its GPA: memory a
    DIMM's offlining would have to find room for elsewhere"""
    while victims:
        try:
            agent.call("victim-stop", pid=victims.pop())
        except AgentError:  # it is gone already
            pass


def error_reaches(victim, block, what):
    ev = daemon.poison(NAME, "--guest-pid", str(victim["pid"]), "--guest-va", victim["va"],
                       "--kind", "ao")
    # a device's RAM block is "DEVICE-PATH/ID" in query-ram-layout (its
    # RAMBlock name), "ID" in info mtree (its memory region's)
    got = (ev.get("result"), (ev.get("block") or "").split("/")[-1], ev.get("gpa"))
    tap.eq(got, ("injected", block, victim["gpa"]),
           f"{what}: the error is injected in block {block} at the victim's GPA")
    sig = wait_sigbus(agent, victim["pid"])
    tap.ok(sig is not None and sig["code"] == BUS_MCEERR_AO and int(sig["addr"], 16) == victim["va_int"],
           f"{what}: the victim got BUS_MCEERR_AO at its own VA", diag=victim_status(agent, victim["pid"]))


try:
    vm.wait_ready(timeout=120)
    daemon = Vmced(os.path.join(work, "vmced"),
                   args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", NAME,
                         "--agent", vm.vmced_agent_path])
    before = daemon.wait_attached(NAME)["layout"]
    agent = vm.agent
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)

    with vm.qmp() as q:
        base = plug(q, 0)
    tap.ok(not any(int(r["gpa"], 16) <= base < int(r["gpa"], 16) + int(r["size"], 16) for r in before),
           f"the DIMM at GPA {base:#x} is not in the layout vmced read at attach")

    # a command naming an address in it, right away
    res = daemon.ctl("--json", "translate", NAME, "--gpa", hex(base + 0x1000), check=False)
    tap.ok(res.returncode == 0 and '"hp-mem0"' in res.stdout,
           "vmcectl translate --gpa in the new DIMM: found, in block hp-mem0",
           diag=res.stdout + res.stderr)
    if res.returncode == 0:
        tap.eq(int(json.loads(res.stdout)["hva"], 16), gpa2hva(vm, base + 0x1000),
               "... at the HVA QEMU itself gives for it")

    # a guest process whose page is in the DIMM, and a host error behind it
    victim = victim_at(agent, base, 256 << 20)
    tap.ok(victim is not None, f"a guest process has its page in the DIMM ({victim and victim['gpa']})")
    if victim is not None:
        error_reaches(victim, "hp-mem0", "pc-dimm")

    # a second DIMM, and a host error by HVA in it at once: before anything
    # has read the layout again. With qemu-patches/, QEMU says
    # RAM_LAYOUT_CHANGED as the DIMM is mapped: vmced has it even from a
    # paused guest, which sends no ACPI _OST
    total_kb = agent.call("meminfo")["mem_total_kb"]
    with vm.qmp() as q:
        if PATCHED:
            q.execute("stop")
        base1 = plug(q, 1)
        if PATCHED:
            known = wait_for(lambda: "hp-mem1" in {r["block"] for r in
                                                    daemon.ctl_json("vm", NAME)["layout"]}, 5)
            tap.ok(known, "QEMU with qemu-patches/: vmced knows the DIMM from RAM_LAYOUT_CHANGED, "
                          "with the guest paused and before any address in it was asked for")
            q.execute("cont")
    # the error waits for the guest to put the DIMM online (paused, it does
    # so only once it runs again): a page it does not manage yet cannot be
    # isolated ("memory outside kernel control"), and its first use in the
    # kernel (clear_page()) consumes the error and panics the guest. With
    # Debian's QEMU the error came right after the plug, and in one run of
    # e2e-hotplug-asan the guest lost that race, panicked and rebooted
    online = wait_for(lambda: agent.call("meminfo")["mem_total_kb"] >= total_kb + (200 << 10), 30)
    tap.ok(online, "the guest put the DIMM online before the error")
    hva = gpa2hva(vm, base1 + 0x5000)
    _, seq = agent.kmsg()
    ev = daemon.poison(NAME, "--hva", hex(hva), "--kind", "ao")
    tap.eq((ev.get("result"), ev.get("block"), ev.get("gpa")), ("injected", "hp-mem1", hex(base1 + 0x5000)),
           "a host error by HVA in a DIMM plugged a moment ago: injected at its GPA", )
    pfn = (base1 + 0x5000) >> 12
    said = wait_for(lambda: [l for l in agent.kmsg(seq)[0] if re.search(rf"\b{pfn:#x}\b", l)], 15)
    tap.ok(said, f"the guest kernel heard of pfn {pfn:#x}", diag=said)
    tap.ok(vm.alive(), "QEMU is still running")
    status = daemon.ctl_json("vm", NAME)
    tap.ok({"hp-mem0", "hp-mem1"} <= {r["block"] for r in status["layout"]},
           "vmcectl vm lists both DIMMs' ranges")

    # virtio-mem: its region is mapped whole when the device comes; the
    # guest plugs what requested-size asks (MEMORY_DEVICE_SIZE_CHANGE)
    with vm.qmp() as q:
        q.execute("object-add", **{"qom-type": "memory-backend-ram", "id": "vmem0",
                                   "size": 512 << 20})
        q.execute("device_add", driver="virtio-mem-pci", id="vmem-dev0", memdev="vmem0",
                  **{"requested-size": 128 << 20})
        vbase = device_addr(q, "vmem-dev0")
        plugged = wait_for(lambda: q.execute("qom-get", path="/machine/peripheral/vmem-dev0",
                                             property="size") >= 128 << 20, 30)
    tap.ok(plugged, f"the guest plugged 128 MiB of the virtio-mem device at GPA {vbase:#x}")
    victim = victim_at(agent, vbase, 512 << 20)
    tap.ok(victim is not None, f"a guest process has its page in the virtio-mem memory "
                               f"({victim and victim['gpa']})")
    if victim is not None:
        error_reaches(victim, "vmem0", "virtio-mem")

    # unplugged: the guest offlines and ejects the DIMM, QEMU says
    # DEVICE_DELETED, and its range leaves vmced's layout
    stop_victims(agent)
    with vm.qmp() as q:
        q.execute("device_del", id="hp-dimm1")
        deleted = wait_for(lambda: [e for e in q.poll_events(0.5) if e["event"] == "DEVICE_DELETED"
                                    and e["data"].get("device") == "hp-dimm1"], 30)
    tap.ok(deleted, "the guest gave hp-dimm1 back (DEVICE_DELETED)")
    gone = wait_for(lambda: "hp-mem1" not in {r["block"] for r in daemon.ctl_json("vm", NAME)["layout"]}, 10)
    tap.ok(gone, "vmcectl vm no longer lists the unplugged DIMM's range")
    res = daemon.ctl("--json", "translate", NAME, "--gpa", hex(base1 + 0x5000), check=False)
    tap.ok(res.returncode != 0 and "is not guest RAM" in res.stderr,
           "translate in the unplugged range: not guest RAM", diag=res.stdout + res.stderr)
    tap.ok(vm.alive() and daemon.alive(), "QEMU and vmced run on")
finally:
    if daemon is not None:
        daemon.stop()
    vm.stop()
tap.done()
