#!/usr/bin/env python3
"""vmced under load and when things break, with nothing lost.

One 512 MiB TCG guest (Debian's 6.1, which leaves hot-plugged memory
offline) with a 256 MiB DIMM plugged: memory that is guest RAM to QEMU and
vmced, which the guest never touches, so that a thousand simulated host
errors in it can reach the guest (it isolates nothing there, and says so:
"memory outside kernel control") without any of its own pages going bad.

- attaches sent at once to QEMUs of which some are already gone: each gone
  one is refused with one line, journaled once, the others attached;
- a burst of 1000 errors on distinct pages, sent at once on one control
  connection: 1000 answers, 1000 journal records, each page exactly once,
  every machine check injected; the guest and QEMU live on. Under a QEMU
  with vmce's series (VMCE_EXPECT_INJECT=qmp) every one goes through
  inject-mce, with no fixed gap: QEMU says when the guest is still busy;
- vmced SIGKILLed in the middle of a second storm: QEMU and its guest live
  on, no QEMU thread is left stopped, every journal line but a cut-short
  last one is whole, and a new vmced attaches, reads the journal and finds
  the pages the first one had taken away (they stay poisoned, not lost);
- QEMU SIGKILLed in the middle of a third: every request is answered, what
  was answered "injected" is journaled, vmced lives on and lets the VM go.
"""
import json
import os
import signal
import time

from common import Tap, Vm, Vmced, prerequisites, thread_states, wait_for, workdir
from vmcelab.daemon import ControlConnection
from vmcelab.stats import percentile

NAME = "e2e-faults"
BURST = 1000
PAGE = 4096

tap = Tap()
prerequisites(tap)
work = workdir("faults")
vm = Vm.start(NAME, mem="512M", state_dir=os.path.join(work, "vm"),
              extra=["-m", "512M,slots=1,maxmem=1G"])
daemon = None


def memory_errors(path):
    out = []
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if rec["type"] == "memory-error":
                out.append(rec)
    return out


def storm(ctl, gpas, first_id):
    for i, gpa in enumerate(gpas):
        ctl.send("poison", first_id + i, vm=NAME, gpa=hex(gpa), kind="ao")
    ctl.flush()


def no_thread_stopped():
    return "t" not in thread_states(vm.pid).values()


try:
    vm.wait_ready()
    with vm.qmp() as q:
        q.execute("object-add", **{"qom-type": "memory-backend-ram", "id": "dimm-mem",
                                   "size": 256 << 20})
        q.execute("device_add", driver="pc-dimm", id="dimm0", memdev="dimm-mem")
        base = next(d["data"]["addr"] for d in q.execute("query-memory-devices")
                    if d["data"].get("id") == "dimm0")
    daemon = Vmced(os.path.join(work, "vmced"),
                   args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", NAME])
    daemon.wait_attached(NAME)

    # -- attaches at once, some QEMUs already gone (run/bench --only scale
    # does 256): one line and one journal record each, the rest attached
    others = [Vm.start(f"{NAME}-p{i}", mem="16M", extra=["-S"], disk=False,
                       state_dir=os.path.join(work, f"p{i}")) for i in range(4)]
    try:
        wait_for(lambda: all(os.path.exists(o.vmced_qmp_path) for o in others), 30)
        gone = {o.pid for o in others[:2]}
        for o in others[:2]:
            os.kill(o.pid, signal.SIGKILL)
            wait_for(lambda o=o: not o.alive(), 10)
        ctl = ControlConnection(daemon.socket)
        for i, o in enumerate(others, 1):
            ctl.send("attach", i, pid=o.pid, qmp=o.vmced_qmp_path, name=o.name)
        ctl.flush()
        got = ctl.replies(len(others), 60)
        ctl.close()
        refused = {others[i - 1].pid: a["error"]["desc"] for i, a in got.items() if "error" in a}
        tap.ok(len(got) == 4 and set(refused) == gone and all(str(p) in d for p, d in refused.items()),
               "attaches at once, 2 of 4 QEMUs gone: each gone one refused with its pid, the others attached",
               diag=got)
        failed = wait_for(lambda: [r for r in daemon.journal_records() if r["type"] == "attach-failed"], 10) or []
        tap.ok(sorted(r["pid"] for r in failed) == sorted(gone) and all(r["reason"] for r in failed),
               "attaches at once: one attach-failed record for each gone QEMU, with the reason", diag=failed)
        for o in others[2:]:
            daemon.ctl("detach", o.name)
        # detach answers once it has begun: the threads are let go from
        # vmced's main loop just after
        def stopped():
            return {o.name: [tid for tid, st in thread_states(o.pid).items() if st == "t"] for o in others[2:]}
        wait_for(lambda: not any(stopped().values()), 10, interval=0.05)
        tap.ok(daemon.alive() and not any(stopped().values()) and vm.agent.call("ping") is not None,
               "attaches at once: vmced, the attached VM and the live QEMUs run on, no thread left stopped",
               diag={"vmced_alive": daemon.alive(), "stopped": stopped()})
    finally:
        for o in others:
            o.stop()

    # -- a burst: each page exactly once
    ctl = ControlConnection(daemon.socket)
    gpas = [base + i * PAGE for i in range(BURST)]
    t = time.monotonic()
    storm(ctl, gpas, 1)
    answers = ctl.replies(BURST, 600)
    secs = time.monotonic() - t
    ctl.close()
    results = {}
    for a in answers.values():
        r = a.get("return", {}).get("result") if "return" in a else "error: " + a["error"]["desc"]
        results[r] = results.get(r, 0) + 1
    tap.ok(len(answers) == BURST and results == {"injected": BURST},
           f"burst: {BURST} errors on distinct pages sent at once, each answered 'injected' "
           f"({BURST / secs:.0f} errors/s)", diag=results)
    recs = wait_for(lambda: (lambda r: r if len(r) >= BURST else None)(memory_errors(daemon.journal)), 10) \
        or memory_errors(daemon.journal)
    journaled = [int(r["gpa"], 16) for r in recs]
    tap.ok(len(journaled) == BURST and sorted(journaled) == gpas,
           f"burst: the journal holds {BURST} records, one for each page",
           diag=f"{len(journaled)} records, {len(set(journaled))} distinct pages")
    first_seq = min((r["seq"] for r in recs), default=0)
    tap.eq(sorted(r["seq"] - first_seq for r in recs), list(range(BURST)),
           "burst: numbered in a row, none twice, none missing")
    if os.environ.get("VMCE_EXPECT_INJECT") == "qmp":
        tap.ok(all(r["via"] == "qmp" for r in recs),
               "burst: every machine check through inject-mce, no fixed gap between two",
               diag={r["via"] for r in recs})
    tap.diag(f"burst: QEMU said busy {sum(r.get('busy', 0) for r in recs)} time(s), vmced sent those again; "
             f"queued p50 {percentile([r['queued_us'] or 0 for r in recs], 50)} us")
    tap.ok(vm.alive() and vm.agent.call("ping") is not None and no_thread_stopped(),
           "burst: QEMU and the guest run on, no QEMU thread stopped")
    tap.diag(f"vmced RSS after the burst: {daemon.ctl_json('status').get('rss_kb')} kB")

    # -- vmced killed in the middle of a storm
    ctl = ControlConnection(daemon.socket)
    more = [base + (BURST + i) * PAGE for i in range(500)]
    storm(ctl, more, 10001)
    wait_for(lambda: len(memory_errors(daemon.journal)) >= BURST + 50, 60, interval=0.01)
    os.kill(daemon.proc.pid, signal.SIGKILL)
    daemon.proc.wait()
    ctl.close()
    killed_after = len(memory_errors(daemon.journal)) - BURST
    tap.diag(f"vmced killed after {killed_after} of 500 errors were journaled")
    time.sleep(2)
    tap.ok(vm.alive(), "vmced SIGKILLed mid-storm: QEMU lives on")
    tap.ok(no_thread_stopped(), "vmced SIGKILLed mid-storm: no QEMU thread is left stopped",
           diag=thread_states(vm.pid))
    tap.ok(vm.agent.call("ping") is not None, "vmced SIGKILLed mid-storm: the guest answers")
    with open(daemon.journal, "rb") as f:
        lines = f.read().split(b"\n")
    whole = 0
    for i, line in enumerate(lines):
        try:
            json.loads(line)
            whole += 1
        except ValueError:
            if line and i != len(lines) - 1:
                break
    tap.eq(whole, len([l for l in lines if l]) - (0 if lines[-1] == b"" else 1),
           "vmced SIGKILLed mid-storm: every journal line but a cut-short last one is whole")

    # a new vmced takes over from the same journal
    daemon = Vmced(os.path.join(work, "vmced"),
                   args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", NAME])
    info = daemon.wait_attached(NAME)
    poisoned = {int(p["gpa"], 16) for p in info["poisoned"]}
    tap.ok(set(gpas) <= poisoned, "a new vmced knows every page of the burst as poisoned (journal)",
           diag=f"{len(set(gpas) - poisoned)} missing")
    told = {int(r["gpa"], 16) for r in memory_errors(daemon.journal)} - set(gpas)
    tap.ok(told <= poisoned, f"... and the {len(told)} pages journaled before the kill",
           diag=f"{len(told - poisoned)} missing")
    tap.ok(info["simulated_poisoned_host_pages"] >= len(told),
           f"... and takes back the pages the first vmced had taken away "
           f"({info['simulated_poisoned_host_pages']} host pages)", diag=info["poisoned_from"])
    tap.ok(vm.alive() and vm.agent.call("ping") is not None and no_thread_stopped(),
           "QEMU and the guest run on under the new vmced")

    # -- QEMU killed in the middle of a storm: vmced answers what was asked,
    # loses nothing it journaled, and lets the VM go
    before = len(memory_errors(daemon.journal))
    ctl = ControlConnection(daemon.socket)
    last = [base + (2 * BURST + i) * PAGE for i in range(200)]
    storm(ctl, last, 20001)
    wait_for(lambda: len(memory_errors(daemon.journal)) >= before + 20, 60, interval=0.01)
    os.kill(vm.pid, signal.SIGKILL)
    answers = ctl.replies(len(last), 60)
    ctl.close()
    tap.eq(len(answers), len(last),
           "QEMU SIGKILLed mid-storm: every request is answered (injected, or an error)")
    exits = wait_for(lambda: [r for r in daemon.journal_records() if r["type"] == "vm-exit"], 15)
    tap.ok(exits and "killed by signal 9" in exits[-1]["reason"] and daemon.alive(),
           "QEMU SIGKILLed mid-storm: vmced journals its end and lives on", diag=exits)
    injected = {a["return"]["gpa"] for a in answers.values()
                if "return" in a and a["return"].get("result") == "injected"}
    journaled = {r["gpa"] for r in memory_errors(daemon.journal)}
    tap.ok(injected <= journaled, f"QEMU SIGKILLed mid-storm: the {len(injected)} errors answered "
                                  f"'injected' are all in the journal",
           diag=sorted(injected - journaled)[:5])
    tap.eq(daemon.ctl_json("status")["vms"], [], "QEMU SIGKILLed mid-storm: vmced lets the VM go")
finally:
    if daemon is not None:
        rc = daemon.stop()
        tap.eq(rc, 0, "vmced stops cleanly on SIGTERM")
    vm.stop()
tap.done()
