#!/usr/bin/env python3
"""vmced in libvirt mode, with a private libvirtd (run/libvirt/private-libvirtd:
its own config, state, runtime and socket directories; stopped at the end)
and transient domains from run/lib/vmcelab/libvirt.py. Asserts: vmced
--all-domains attaches to three domains started after it, each poison
reaches the right guest (its victim's SIGBUS at its own VA, the journal
names the domain and its UUID with the victim's GPA), a domain destroyed
mid-run is let go without error, a libvirtd restarted ten times under a
CPU hog per core is reconnected every time and the same three QEMUs taken
again, no thread left stopped, the run/virsh/campaign script
completes and its summary matches the journal; libvirt marks each domain
vmced took "tainted: custom monitor control commands issued" (virsh
dominfo's Messages), once in the domain's log and in libvirtd's, however
many commands, injections and libvirtd restarts came after (vmced speaks
QMP through virDomainQemuMonitorCommand: docs/operator.md); bad input.
"""
import os
import re
import shutil
import subprocess
import sys
import time

from common import (PRIVATE_LIBVIRTD, Tap, Virsh, Vmced, paths, prerequisites, private_libvirtd,  # noqa: E402
                    thread_states, wait_for, wait_sigbus, workdir)

sys.path.insert(0, os.path.join(paths.ROOT, "run", "lib"))
from vmcelab import agent as agentmod  # noqa: E402
from vmcelab.libvirt import domain_xml  # noqa: E402

tap = Tap()
prerequisites(tap)
if not shutil.which("libvirtd") or not shutil.which("virsh"):
    tap.skip("libvirt mode", "libvirtd or virsh is missing (run/install-deps installs them)")
    tap.done()

PRIVATE = PRIVATE_LIBVIRTD
RESTARTS = 10
work = workdir("libvirt")
lv = os.path.join(work, "libvirt")
uri = private_libvirtd(tap, lv)
virsh = Virsh(uri)
daemon = None


def create(name, **kw):
    state = os.path.join(work, name)
    os.makedirs(state, exist_ok=True)
    xml = os.path.join(state, "domain.xml")
    with open(xml, "w") as f:
        f.write(domain_xml(name, state, **kw))
    virsh("create", xml)
    return state


def agent_of(state):
    a, _ = agentmod.wait_ready(os.path.join(state, "agent.sock"), 120)
    return a


def poison_victim(name, agent):
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)
    victim = agent.call("victim-start", mode="idle")
    ev = daemon.poison(name, "--guest-pid", str(victim["pid"]), "--guest-va", victim["va"], "--kind", "ao")
    sig = wait_sigbus(agent, victim["pid"])
    return victim, ev, sig


def custom_monitor_taint(names):
    """What the operator sees of vmced's monitor passthrough, after its
    attach, injections, a campaign and libvirtd's restarts: the custom-monitor
    taint in virsh dominfo, and one line for it in the domain's log
    (/var/log/libvirt/qemu/NAME.log, the private instance's) and in
    libvirtd's own (its warning)"""
    info = {n: virsh("dominfo", n) for n in names}
    logs = {}
    for n in names:
        with open(os.path.join(lv, "log", "qemu", f"{n}.log"), errors="replace") as f:
            logs[n] = [ln.strip() for ln in f if "is tainted: custom-monitor" in ln]
    with open(os.path.join(lv, "libvirtd.log"), errors="replace") as f:
        warned = [ln for ln in f if "is tainted: custom-monitor" in ln]
    tap.ok(all("tainted: custom monitor control commands issued" in info[n] for n in names)
           and all(len(v) == 1 and re.search(r"Domain id=\d+ is tainted: custom-monitor$", v[0])
                   for v in logs.values())
           and all(sum(f"name='{n}'" in ln for ln in warned) == 1 for n in names),
           "libvirt marks each domain vmced took: virsh dominfo says 'tainted: custom monitor control "
           "commands issued', its log and libvirtd's say 'is tainted: custom-monitor' once, after "
           f"{RESTARTS} libvirtd restarts and every injection",
           diag=(info, logs, warned))


try:
    daemon = Vmced(os.path.join(work, "vmced"), args=["--connect", uri, "--all-domains"])
    names = [f"vmce-lv{i}" for i in range(3)]
    # the first has room for a DIMM (and is destroyed later on)
    states = {n: create(n, max_mem="1G" if i == 0 else None) for i, n in enumerate(names)}
    attached = {n: daemon.wait_attached(n, timeout=120) for n in names}
    tap.ok(all(a["state"] == "attached" for a in attached.values()),
           "vmced --all-domains attached to three domains started after it")
    uuids = {n: virsh("domuuid", n) for n in names}
    tap.eq({n: a.get("uuid") for n, a in attached.items()}, uuids, "vmced knows each domain's UUID")
    tap.eq({n: a["qmp"] for n, a in attached.items()}, {n: "libvirt" for n in names},
           "the monitor is reached through libvirt")
    agents = {n: agent_of(states[n]) for n in names}
    for n in names:
        victim, ev, sig = poison_victim(n, agents[n])
        tap.ok(sig is not None and sig["code"] == 5 and sig["addr"] == victim["va"],
               f"{n}: the victim got BUS_MCEERR_AO at its own VA", diag=sig)
        tap.ok(ev.get("vm") == n and ev.get("uuid") == uuids[n] and
               int(ev["gpa"], 16) == int(victim["gpa"], 16) and ev["result"] == "injected",
               f"{n}: the journal names the domain and its UUID, with the victim's GPA", diag=ev)

    # a DIMM hot-plugged with virsh into a paused domain: libvirt's
    # device-added event is all vmced hears (QEMU 7.2 says nothing for a
    # pc-dimm, and a paused guest sends no ACPI _OST)
    dimm = os.path.join(states[names[0]], "dimm.xml")
    with open(dimm, "w") as f:
        f.write("<memory model='dimm'><target><size unit='MiB'>128</size><node>0</node></target>"
                "</memory>")
    blocks = {r["block"] for r in daemon.ctl_json("vm", names[0])["layout"]}
    virsh("suspend", names[0])
    virsh("attach-device", names[0], dimm, "--live")
    new = wait_for(lambda: {r["block"] for r in daemon.ctl_json("vm", names[0])["layout"]} - blocks, 10)
    tap.ok(bool(new) and all(r["size"] == hex(128 << 20) for r in daemon.ctl_json("vm", names[0])["layout"]
                             if r["block"] in new),
           f"{names[0]}: a DIMM attached with virsh to the paused domain is in vmced's layout "
           "(libvirt's device-added event)", diag=new)
    virsh("resume", names[0])

    # a domain destroyed mid-run
    gone = names.pop(0)
    virsh("destroy", gone)
    tap.ok(wait_for(lambda: daemon.ctl("vm", gone, check=False).returncode != 0, 30),
           f"{gone} destroyed: vmced let it go")
    errors = [ln for ln in daemon.log_text().splitlines() if "error" in ln.lower()]
    tap.eq(errors, [], "no error from a destroyed domain")
    records = daemon.journal_records()
    tap.ok(any(r["type"] in ("vm-exit", "detach") and r.get("vm") == gone and r.get("uuid") == uuids[gone]
               for r in records),
           f"the journal says {gone} went (name and UUID)", diag=[r["type"] for r in records])
    pids = {n: attached[n]["pid"] for n in names}
    tap.ok(all("t" not in thread_states(p).values() for p in pids.values()),
           "no thread of the other QEMUs is left stopped")

    # a third domain again, for the restarts
    names.append("vmce-lv3")
    states["vmce-lv3"] = create("vmce-lv3")
    agents["vmce-lv3"] = agent_of(states["vmce-lv3"])
    attached["vmce-lv3"] = daemon.wait_attached("vmce-lv3", timeout=120)
    uuids["vmce-lv3"] = virsh("domuuid", "vmce-lv3")
    pids = {n: attached[n]["pid"] for n in names}

    # libvirtd restarted mid-run, RESTARTS times, with a CPU hog per core
    # (a loaded host: part 12): every time, libvirt keeps every domain and
    # vmced takes the same QEMUs again, leaving no thread stopped
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(os.cpu_count() or 1)]
    failures, let_go, back_s = [], 0, []
    try:
        for i in range(RESTARTS):
            with open(os.path.join(lv, "libvirtd.pid")) as f:
                os.kill(int(f.read()), 15)
            if wait_for(lambda: all(daemon.ctl("vm", n, check=False).returncode != 0 for n in names), 30):
                let_go += 1
            stopped = {n: p for n, p in pids.items() if "t" in thread_states(p).values()}
            if stopped:
                failures.append(f"restart {i + 1}: libvirtd gone, QEMU threads left stopped: {stopped}")
            t = time.monotonic()
            res = subprocess.run([PRIVATE, "start", lv], capture_output=True, text=True, timeout=120)
            if res.returncode != 0:
                failures.append(f"restart {i + 1}: libvirtd did not start: {res.stderr.strip()}")
                break
            again = {}
            for n in names:
                try:
                    again[n] = daemon.wait_attached(n, timeout=90)["pid"]
                except RuntimeError:
                    pass
            back_s.append(time.monotonic() - t)
            listed = set(virsh("list", "--name", check=False).split())
            if again != pids or not set(names) <= listed:
                failures.append(f"restart {i + 1}: taken again {again}, expected {pids}; libvirt lists "
                                f"{sorted(listed)}")
            stopped = {n: p for n, p in pids.items() if "t" in thread_states(p).values()}
            if stopped:
                failures.append(f"restart {i + 1}: QEMU threads left stopped: {stopped}")
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    tap.eq(let_go, RESTARTS, f"libvirtd gone ({RESTARTS} times, under a CPU hog per core): vmced let its "
           "domains go, cleanly, each time")
    tap.eq(failures, [], f"libvirtd restarted {RESTARTS} times under load: every time libvirt kept the three "
           "domains, vmced took the same QEMUs again and left no QEMU thread stopped"
           + (f" (all back in {max(back_s):.1f} s at most)" if back_s else ""))

    # the virsh + vmcectl campaign
    for a in agents.values():
        a.close()  # one client per port: the script's turn
    summary = os.path.join(work, "summary.txt")
    env = dict(os.environ, VMCE_SOCKET=daemon.socket, VMCECTL=paths.vmcectl())
    t = time.monotonic()
    res = subprocess.run([os.path.join(paths.ROOT, "run", "virsh", "campaign"), "--connect", uri,
                          "--rounds", "2", "--summary", summary, *names],
                         capture_output=True, text=True, timeout=600, env=env)
    tap.diag(res.stdout.strip())
    tap.ok(res.returncode == 0 and res.stdout.strip().endswith(f"{2 * len(names)} passed, 0 failed"),
           f"run/virsh/campaign: {2 * len(names)} injections, every victim signalled ({time.monotonic() - t:.0f} s)",
           diag=res.stderr)
    rows = []
    if os.path.exists(summary):
        with open(summary) as f:
            rows = [line.split() for line in f.read().splitlines()[1:]]
    events = [r for r in daemon.journal_records() if r["type"] == "memory-error"]
    tap.ok(len(rows) == 2 * len(names) and all(any(e["vm"] == row[0] and int(e["gpa"], 16) == int(row[3], 16)
                                      and e["result"] == "injected" for e in events) for row in rows),
           "every summary line has its journal record (domain, GPA, injected)", diag=rows)
    libvirt_events = {n: int(line.split()[-1]) for line in res.stdout.splitlines()
                      for n in names if line.strip().startswith(n + ":")}
    tap.eq(libvirt_events, {n: 2 for n in names}, "libvirt saw each injection (memory-failure events)")
    custom_monitor_taint(names)

    # bad input
    r = subprocess.run([paths.vmced(), "--socket", os.path.join(work, "bad.sock"), "--journal",
                        os.path.join(work, "bad.jsonl"), "--connect",
                        "qemu:///system?socket=/nonexistent/sock", "--all-domains"],
                       capture_output=True, text=True, timeout=60)
    errs = [ln for ln in r.stderr.splitlines() if "error" in ln]
    tap.ok(r.returncode != 0 and len(errs) == 1 and "cannot connect" in errs[0],
           "a URI that cannot be reached: one error line, exit status 1", diag=r.stderr)
    notqemu = Vmced(os.path.join(work, "vmced-test-driver"), args=["--connect", "test:///default",
                                                                     "--all-domains"])
    try:
        wait_for(lambda: "cannot attach" in notqemu.log_text(), 10)
        lines = [ln for ln in notqemu.log_text().splitlines() if "domain test" in ln]
        tap.ok(len(lines) == 1 and "cannot attach" in lines[0] and notqemu.proc.poll() is None
               and notqemu.ctl("status", check=False).returncode == 0,
               "a domain that is not QEMU (libvirt's test driver): one line, vmced serves on",
               diag=notqemu.log_text())
    finally:
        notqemu.stop()
    daemon.stop()  # one tracer per QEMU: the next vmced's turn
    daemon = None
    conf = os.path.join(work, "vmced.conf")
    with open(conf, "w") as f:
        f.write(f"[vmced]\npolicy = forward\n\n[libvirt]\nuri = {uri}\ndomains = nosuch;{names[0]}\n\n"
                f"[domain {names[0]}]\npolicy = ignore-ao\n")
    other = Vmced(os.path.join(work, "vmced-named"), args=["--config", conf])
    try:
        vm = other.wait_attached(names[0], timeout=60)
        log = other.log_text()
        tap.ok(vm["state"] == "attached" and log.count("nosuch") == 1 and "no such domain" in log,
               "--config naming an unknown domain: said once, the other is served", diag=log)
        tap.eq(vm["policy"], "ignore-ao", "--config: the domain's own policy")
        with open(conf, "a") as f:
            f.write("colour = red\n")
        other.proc.send_signal(1)
        wait_for(lambda: "keeping the configuration" in other.log_text(), 10)
        bad = [ln for ln in other.log_text().splitlines() if "keeping the configuration" in ln]
        tap.ok(len(bad) == 1 and f"{conf}:10: unknown key 'colour'" in bad[0]
               and other.ctl_json("vm", names[0])["state"] == "attached",
               "SIGHUP with a broken config: one line with file and line, the domain still served",
               diag=other.log_text()[-1500:])
        with open(conf, "w") as f:
            f.write(f"[libvirt]\nuri = {uri}\nall-domains = true\n[domain {names[0]}]\npolicy = stop\n")
        other.proc.send_signal(1)
        tap.ok(wait_for(lambda: other.ctl_json("vm", names[0])["policy"] == "stop", 10),
               "SIGHUP with a good config: the new policy applies")
    except RuntimeError as e:
        tap.ok(False, "--config naming an unknown domain: said once, the other is served", diag=str(e))
    finally:
        other.stop()
    r = subprocess.run([paths.vmced(), "--config", conf + ".missing"], capture_output=True, text=True,
                       timeout=30)
    tap.ok(r.returncode == 1 and r.stderr.count("\n") == 1 and ".missing" in r.stderr,
           "a config file that is not there: one error line", diag=r.stderr)
finally:
    if daemon is not None:
        daemon.stop()
    subprocess.run([PRIVATE, "stop", lv], capture_output=True, timeout=120)
tap.done()
