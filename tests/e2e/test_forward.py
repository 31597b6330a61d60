#!/usr/bin/env python3
"""vmced forwards simulated host memory errors into a real guest.

One 512 MiB TCG guest and one vmced serve every case, in order:
AO with early kill, late kill, AR on access, bad input, an error outside
guest RAM (passed on to QEMU), QEMU killed while attached.
"""
import json
import os
import signal
import subprocess
import time

from common import (Tap, Vm, Vmced, gpa2hva, pagemap_pfn, paths, prerequisites, start_victim, thread_states,
                    victim_status, wait_for, wait_kmsg, wait_sigbus, workdir)
from vmcelab.agent import AgentError

BUS_MCEERR_AR = 4
BUS_MCEERR_AO = 5

tap = Tap()
prerequisites(tap)
work = workdir("forward")
vm = Vm.start("e2e-forward", mem="512M", state_dir=os.path.join(work, "vm"))
daemon = None


def memory_errors():
    return [r for r in daemon.journal_records() if r["type"] == "memory-error"]


def poison_victim(victim, kind, *extra):
    return daemon.poison("e2e-forward", "--guest-pid", str(victim["pid"]), "--guest-va",
                         victim["va"], "--kind", kind, *extra)


def case_ao_early_kill():
    agent = vm.agent
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)
    hc_before = agent.hardware_corrupted_kb()
    _, since = agent.kmsg()
    victim = start_victim(agent, mode="idle")
    ev = poison_victim(victim, "ao")
    tap.eq(ev["result"], "injected", "AO: vmced injected the machine check")
    # QMP inject-mce where QEMU has it (qemu-patches/), HMP mce otherwise;
    # VMCE_EXPECT_INJECT says which QEMU this run is meant to test
    want = os.environ.get("VMCE_EXPECT_INJECT") or ev.get("via")
    tap.eq(ev.get("via"), want, f"AO: the journal says it went through {want}")
    if want == "qmp":
        # qemu-patches/ 0003: the layout came as data, not as HMP text
        info = daemon.ctl_json("vm", "e2e-forward")
        tap.eq(info.get("layout_via"), "qmp query-ram-layout",
               "AO: vmced read the RAM layout with query-ram-layout")
    if ev.get("via") == "qmp":
        # inject-mce answers before the vCPU runs: QEMU's event comes on its
        # own, and (qemu-patches/ 0002) names the page and the vCPU
        # (or, when the vCPU ran it before vmced read the answer, in the
        # error's own record)
        def qemu_event():
            for r in daemon.journal_records():
                if r["type"] == "qemu-event" and r.get("about_seq") == ev["seq"]:
                    return r["data"]
                if r["type"] == "memory-error" and r["seq"] == ev["seq"] and r.get("qemu_event"):
                    return r["qemu_event"]
            return None
        data = wait_for(qemu_event, 10)
        tap.ok(data is not None and data.get("gpa") == int(ev["gpa"], 16)
               and data.get("cpu") == ev.get("vcpu") and data["action"] == "inject",
               "AO: QEMU's MEMORY_FAILURE names the page and vCPU, journaled with the error it answers",
               diag=data)
    sig = wait_sigbus(agent, victim["pid"])
    tap.ok(sig is not None, "AO: the victim got a SIGBUS", diag=victim_status(agent, victim["pid"]))
    if sig:
        tap.eq(sig["code"], BUS_MCEERR_AO, "AO: si_code is BUS_MCEERR_AO")
        tap.eq(int(sig["addr"], 16), victim["va_int"], "AO: si_addr is the victim's own VA")
        tap.eq(sig["lsb"], 12, "AO: si_addr_lsb is 12")
    tap.eq(agent.hardware_corrupted_kb() - hc_before, 4, "AO: HardwareCorrupted grew by 4 kB")
    pfn = victim["gpa_int"] >> 12
    line = wait_kmsg(agent, rf"Memory failure: {pfn:#x}: recovery action for dirty LRU page: Recovered",
                     since)
    tap.ok(line is not None, "AO: the guest kernel recovered the dirty LRU page",
           diag="\n".join(agent.kmsg(since)[0][-10:]))
    # written through io_uring a moment after the answer: give it that moment
    recs = wait_for(lambda: [r for r in memory_errors()
                             if r["gpa"] and int(r["gpa"], 16) == victim["gpa_int"]], 10) or []
    tap.eq(len(recs), 1, "AO: the journal holds the event with the GPA the victim reported")
    if recs:
        r = recs[0]
        tap.eq((r["si_code"], r["thread"], r["handled_by"], r["source"]),
               ("BUS_MCEERR_AO", "main", "vmced", "simulated"),
               "AO: journal says AO on QEMU's main thread, handled by vmced")
        tap.eq(int(r["hva"], 16), gpa2hva(vm, victim["gpa_int"]),
               "AO: the journal's HVA is where QEMU itself maps that GPA")
        tap.eq(r["mce"]["status"], "0xbd000000000000c0", "AO: SRAO status injected")
        tap.ok(isinstance(r["latency_us"], int) and r["latency_us"] > 0,
               f"AO: acknowledged {r['latency_us']} us after the signal-stop")
        check_host_pfn(r)
    tap.ok(vm.alive(), "AO: QEMU is still running")
    tap.ok("t" not in thread_states(vm.pid).values(), "AO: no QEMU thread is left stopped")


def check_host_pfn(r):
    """The record names the host page (a simulated error's page is still
    mapped, taken away with PROT_NONE), and `vmcectl events --pfn` finds
    the error by it, naming the guest and its page"""
    want = pagemap_pfn(vm.pid, int(r["hva"], 16))
    tap.ok(want and (r.get("host_pfn"), r.get("host_pfn_from")) == (want, "present"),
           "AO: the journal names the host page, the pfn QEMU's pagemap maps the HVA to",
           diag=f"pagemap {want}, record {r.get('host_pfn')} {r.get('host_pfn_from')} {r.get('host_pfn_why')}")
    res = daemon.ctl("--json", "events", "--pfn", hex(want or 0))
    found = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    tap.eq([(e["seq"], e["vm"], e["gpa"], e["host_page"]) for e in found], [(r["seq"], "e2e-forward", r["gpa"], None)],
           "AO: vmcectl events --pfn finds that error by its host page (no rasdaemon record: a simulated error)")
    text = daemon.ctl("events", "--pfn", str(want or 0)).stdout
    tap.ok(f"vm e2e-forward: GPA {r['gpa']}, HVA {r['hva']}" in text,
           "AO: vmcectl events --pfn (decimal) names the guest, its GPA and the HVA", diag=text)
    for arg, says in (("page", "--pfn"), ("0x80000000000000", "no page frame number")):
        bad = daemon.ctl("events", "--pfn", arg, check=False)
        tap.ok(bad.returncode != 0 and bad.stderr.count("\n") == 1 and says in bad.stderr,
               f"AO: vmcectl events --pfn {arg}: one error line", diag=bad.stderr)


def case_late_kill():
    agent = vm.agent
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=0)
    hc_before = agent.hardware_corrupted_kb()
    _, since = agent.kmsg()
    victim = start_victim(agent, mode="idle")
    ev = poison_victim(victim, "ao")
    tap.eq(ev["result"], "injected", "late kill: machine check injected")
    pfn = victim["gpa_int"] >> 12
    line = wait_kmsg(agent, rf"Memory failure: {pfn:#x}: recovery action", since)
    tap.ok(line is not None, "late kill: the guest handled the page", diag=agent.kmsg(since)[0][-10:])
    time.sleep(0.5)
    st = victim_status(agent, victim["pid"])
    tap.ok(st["alive"] and st["sigbus"] is None,
           "late kill: the victim runs on, not signalled, until it touches the page", diag=st)
    agent.call("victim-touch", pid=victim["pid"])
    sig = wait_sigbus(agent, victim["pid"])
    tap.ok(sig is not None and sig["code"] == BUS_MCEERR_AR and int(sig["addr"], 16) == victim["va_int"],
           "late kill: touching it gives BUS_MCEERR_AR at its own VA", diag=sig)
    tap.eq(agent.hardware_corrupted_kb() - hc_before, 4, "late kill: HardwareCorrupted grew by 4 kB")
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)


def case_ar():
    agent = vm.agent
    hc_before = agent.hardware_corrupted_kb()
    victim = start_victim(agent, mode="read")
    # the host page goes away; the vCPU reading it is what brings the error
    ev = poison_victim(victim, "ar")
    tap.eq((ev["result"], ev["si_code"]), ("injected", "BUS_MCEERR_AR"),
           "AR: consumed poison reported as BUS_MCEERR_AR and injected")
    tap.eq(ev["thread"], "vcpu 0", "AR: the signal came on the vCPU thread, and SRAR went to it")
    tap.eq(ev["mce"]["status"], "0xbd80000000000134", "AR: SRAR status injected")
    sig = wait_sigbus(agent, victim["pid"])
    tap.ok(sig is not None and sig["code"] == BUS_MCEERR_AR,
           "AR: the victim got SIGBUS BUS_MCEERR_AR", diag=victim_status(agent, victim["pid"]))
    if sig:
        tap.eq(int(sig["addr"], 16), victim["va_int"], "AR: si_addr is the victim's own VA")
    tap.eq(agent.hardware_corrupted_kb() - hc_before, 4, "AR: HardwareCorrupted grew by 4 kB")
    tap.ok(agent.call("ping") is not None and vm.alive(), "AR: guest and QEMU are alive")


def case_bad_input():
    before = len(daemon.journal_records())
    res = daemon.ctl("poison", "e2e-forward", "--gpa", "0x7fff0000000", check=False)
    tap.ok(res.returncode != 0 and "not guest RAM" in res.stderr and res.stderr.count("\n") == 1,
           "bad input: a GPA outside guest RAM gets one clear error line", diag=res.stderr)
    res = daemon.ctl("poison", "no-such-vm", "--gpa", "0x1000", check=False)
    tap.ok(res.returncode != 0 and "no-such-vm" in res.stderr,
           "bad input: an unknown vm is named in the error", diag=res.stderr)
    res = daemon.ctl("attach", "--pid", "999999", "--qmp", vm.vmced_qmp_path, check=False)
    tap.ok(res.returncode != 0 and "no process with pid 999999" in res.stderr,
           "bad input: an unknown pid gets one clear error line", diag=res.stderr)
    second = os.path.join(work, "second")
    res = subprocess.run([paths.vmced(), "--socket", os.path.join(second, "sock"),
                          "--journal", os.path.join(second, "journal.jsonl"),
                          "--pid", str(vm.pid), "--qmp", vm.qmp_path],
                         capture_output=True, text=True, timeout=60)
    errors = [ln for ln in res.stderr.splitlines() if "error" in ln]
    tap.ok(res.returncode != 0 and len(errors) == 1 and "already traced" in errors[0],
           "bad input: a second vmced on the same QEMU says, in one line, it is already traced",
           diag=res.stderr)
    # the refused attach is kept, once (an operator asks later which QEMU
    # was not watched, and why); nothing else is added, nothing lost
    added = daemon.journal_records()[before:]
    tap.eq([(r["type"], r.get("pid")) for r in added], [("attach-failed", 999999)],
           "bad input: one attach-failed record for the unknown pid, nothing else added or lost")
    tap.ok("t" not in thread_states(vm.pid).values() and vm.alive(),
           "bad input: QEMU runs, no thread left stopped")


def case_policies():
    """ignore-ao drops the AO (the guest is not told); stop pauses the VM"""
    agent = vm.agent
    hc = agent.hardware_corrupted_kb()
    daemon.ctl("policy", "e2e-forward", "ignore-ao")
    victim = start_victim(agent, mode="idle")
    ev = poison_victim(victim, "ao")
    time.sleep(0.5)
    st = victim_status(agent, victim["pid"])
    tap.ok(ev["result"] == "ignored" and ev["mce"] is None and st["sigbus"] is None
           and agent.hardware_corrupted_kb() == hc,
           "policy ignore-ao: AO journaled as ignored, nothing injected, the guest not told",
           diag=(ev, st))
    daemon.ctl("policy", "e2e-forward", "stop")
    victim = start_victim(agent, mode="idle")
    ev = poison_victim(victim, "ao")
    with vm.qmp() as q:
        status = wait_for(lambda: (lambda s: s if s == "paused" else None)(
            q.execute("query-status")["status"]), 10)
        tap.ok(ev["result"] == "stopped" and status == "paused",
               "policy stop: the VM is paused and the journal says why", diag=(ev, status))
        q.execute("cont")
    daemon.ctl("policy", "e2e-forward", "forward")
    tap.ok(agent.call("ping") is not None, "policy stop: the guest runs on after cont")


def heap_address(pid):
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            if line.rstrip().endswith("[heap]"):
                return int(line.split("-")[0], 16)
    return None


def case_inject_in_progress():
    """qemu-patches/ 0001: a second uncorrected error while the first is in
    progress is refused with an error that says so, not a guest reset. The
    guest is paused in between, so the first one's MCG_STATUS.MCIP stays
    set: no race."""
    if os.environ.get("VMCE_EXPECT_INJECT") != "qmp":
        tap.skip("inject-mce refuses an error while one is in progress", "QEMU without qemu-patches/")
        return
    agent = vm.agent
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)
    victim = start_victim(agent, mode="idle")
    with vm.qmp() as q:
        q.execute("stop")
        q.execute("inject-mce", cpu=0, gpa=victim["gpa_int"], kind="ao")
        # the first is queued on the (paused) vCPU, or has run and set
        # MCIP, which the paused guest cannot clear: refused either way
        refusal = None
        try:
            q.execute("inject-mce", cpu=0, gpa=victim["gpa_int"] + 0x1000, kind="ao")
        except Exception as e:  # QmpError: what the client reads
            refusal = str(e)
        tap.ok(refusal is not None and "still in progress" in refusal,
               "in progress: a second error is refused, and the error says why", diag=refusal)
        q.execute("cont")
        status = q.execute("query-status")["status"]
    sig = wait_sigbus(agent, victim["pid"])
    tap.ok(sig is not None and int(sig["addr"], 16) == victim["va_int"] and status == "running",
           "in progress: the first error reached the guest, which runs on (no reset)",
           diag={"signal": sig, "status": status})


def case_outside_ram():
    """An error in QEMU's own memory is not the guest's: vmced journals it
    and passes the signal on, and QEMU handles it as it would without vmced."""
    heap = heap_address(vm.pid)
    stops = main_sigbus_stops()
    ev = daemon.poison("e2e-forward", "--hva", hex(heap), "--kind", "ao")
    tap.eq((ev.get("result"), ev.get("handled_by"), ev.get("gpa")), ("passed", "qemu", None),
           "HVA outside guest RAM: journaled and passed on to QEMU")
    tap.ok(ev.get("detail") == "HVA is not guest RAM", "HVA outside guest RAM: the record says why",
           diag=ev)
    said = wait_for(lambda: f"Hardware memory error at addr {heap:#x}" in vm.qemu_log(), 10)
    tap.ok(said, "HVA outside guest RAM: QEMU got the signal itself and reported it",
           diag=vm.qemu_log()[-500:])
    tap.ok(vm.alive() and vm.agent.call("ping") is not None,
           "HVA outside guest RAM: QEMU and the guest run on")
    tap.ok(main_sigbus_stops() > stops,
           "vmcectl vm counts the signal stop it cost QEMU's main thread (main SIGBUS)",
           diag=daemon.ctl_json("vm", "e2e-forward").get("stops"))


def main_sigbus_stops():
    stops = daemon.ctl_json("vm", "e2e-forward")["stops"]
    return sum(s["count"] for s in stops if s["thread"] == "main" and s["stop"] == "SIGBUS")


def case_workload():
    """The agent's timed workload (run/bench --overhead): it counts what it
    did, and refuses what it cannot run"""
    r = vm.agent.call("workload", kind="cpu", ms=300)
    tap.ok(r["kind"] == "cpu" and r["ops"] > 0 and 300e6 <= r["ns"] < 5e9,
           "agent workload cpu: ops counted over the time asked for", diag=r)
    for kind, why, what in (("disk", "kind must be cpu, io or ipi", "an unknown kind"),
                            ("ipi", "needs two online CPUs", "ipi on a 1-vCPU guest")):
        try:
            r = vm.agent.call("workload", kind=kind, ms=300)
            tap.ok(False, f"agent workload {what}: refused", diag=r)
        except AgentError as e:
            tap.ok(why in str(e), f"agent workload {what}: refused", diag=str(e))


def case_qemu_exits():
    before = daemon.journal_records()
    os.kill(vm.pid, signal.SIGKILL)
    rec = wait_for(lambda: [r for r in daemon.journal_records() if r["type"] == "vm-exit"], 15)
    tap.ok(rec and "killed by signal 9" in rec[0]["reason"],
           "QEMU killed while attached: the journal says so", diag=rec)
    tap.ok(daemon.alive(), "QEMU killed while attached: vmced lives on")
    after = daemon.journal_records()
    tap.eq(after[:len(before)], before, "QEMU killed while attached: no journal record lost")
    status = daemon.ctl_json("status")
    tap.eq(status["vms"], [], "QEMU killed while attached: vmced no longer lists it")


try:
    vm.wait_ready()
    tap.diag(f"guest ready {vm.ready_seconds:.1f} s after QEMU started")
    # at SCHED_FIFO 1, as the shipped vmced.conf runs it
    daemon = Vmced(os.path.join(work, "vmced"),
                   args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", "e2e-forward",
                         "--agent", vm.vmced_agent_path, "--realtime-priority", "1"])
    daemon.wait_attached("e2e-forward")
    with open(f"/proc/{daemon.proc.pid}/stat") as f:
        stat = f.read().rsplit(") ", 1)[1].split()
    refused = [ln for ln in daemon.log_text().splitlines() if "cannot run at SCHED_FIFO" in ln]
    if refused:
        # a kernel or cgroup that gives this root no real-time time at all
        tap.skip("vmced at SCHED_FIFO 1", f"refused here, and vmced said so: {refused[0]}")
    else:
        tap.ok(stat[38] == "1" and stat[37] == "1", "vmced runs at SCHED_FIFO priority 1 (--realtime-priority)",
               diag=f"policy {stat[38]}, rt_priority {stat[37]}")
    att = wait_for(lambda: [r for r in daemon.journal_records() if r["type"] == "attach"], 10)
    tap.ok(att and att[0]["vm"]["name"] == "e2e-forward", "vmced attached to the running QEMU",
           diag=daemon.log_text())
    for name, func in (("AO early kill", case_ao_early_kill), ("late kill", case_late_kill),
                       ("AR on access", case_ar), ("policies", case_policies),
                       ("bad input", case_bad_input), ("in progress", case_inject_in_progress),
                       ("outside guest RAM", case_outside_ram), ("workload", case_workload),
                       ("QEMU exits", case_qemu_exits)):
        tap.case(name, func)
finally:
    if daemon is not None:
        rc = daemon.stop()
        tap.eq(rc, 0, "vmced stops cleanly on SIGTERM")
    vm.stop()
tap.done()
