#!/usr/bin/env python3
"""Memory hot-plugged after vmced attached (a pc-dimm through QMP object-add
and device_add). QEMU 7.2 sends no DEVICE_ADDED for it, so vmced's layout
does not have it until it reads the layout again: an address it does not
know makes it do that before it answers (a command) or decides (a held
memory-error stop). The DIMM's memory must then be translated, and an
error in it must reach the guest process that owns the page, at the right
GPA, at once: not "not guest RAM", not passed to QEMU.
"""
import json
import os
import re
import time

from common import (Tap, Vm, Vmced, gpa2hva, prerequisites, start_victim, victim_status,
                    wait_for, wait_sigbus, workdir)
from vmcelab.agent import AgentError

BUS_MCEERR_AO = 5
NAME = "e2e-hotplug"

tap = Tap()
prerequisites(tap)
work = workdir("hotplug")
# room for two DIMMs of 256 MiB beside the boot memory
# (the guest puts new memory to use as it comes, which Debian's 6.1 does
# not by itself; movable, so a process's pages can land in it)
vm = Vm.start(NAME, mem="512M", state_dir=os.path.join(work, "vm"),
              append="memhp_default_state=online_movable",
              extra=["-m", "512M,slots=2,maxmem=2G"])
daemon = None


def plug(q, n):
    """A 256 MiB DIMM; its guest physical address"""
    q.execute("object-add", **{"qom-type": "memory-backend-ram", "id": f"hp-mem{n}",
                               "size": 256 << 20})
    q.execute("device_add", driver="pc-dimm", id=f"hp-dimm{n}", memdev=f"hp-mem{n}")
    devs = q.execute("query-memory-devices")
    return next(d["data"]["addr"] for d in devs if d["data"].get("id") == f"hp-dimm{n}")


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
    victim = None
    for _ in range(20):
        try:
            victim = start_victim(agent, mode="idle", min_gpa=hex(base))
            break
        except AgentError:  # the guest has not put the DIMM online yet
            time.sleep(0.5)
    tap.ok(victim is not None and base <= victim["gpa_int"] < base + (256 << 20),
           f"a guest process has its page in the DIMM (GPA {victim and victim['gpa']})")
    if victim is not None:
        ev = daemon.poison(NAME, "--guest-pid", str(victim["pid"]), "--guest-va", victim["va"],
                           "--kind", "ao")
        tap.eq((ev.get("result"), ev.get("block")), ("injected", "hp-mem0"),
               "the error in the DIMM is injected, in block hp-mem0", )
        tap.eq(int(ev.get("gpa", "0x0"), 16), victim["gpa_int"], "... at the victim's GPA")
        sig = wait_sigbus(agent, victim["pid"])
        tap.ok(sig is not None and sig["code"] == BUS_MCEERR_AO and int(sig["addr"], 16) == victim["va_int"],
               "the victim got BUS_MCEERR_AO at its own VA", diag=victim_status(agent, victim["pid"]))

    # a second DIMM, and a host error by HVA in it at once: before anything
    # has read the layout again
    with vm.qmp() as q:
        base1 = plug(q, 1)
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
finally:
    if daemon is not None:
        daemon.stop()
    vm.stop()
tap.done()
