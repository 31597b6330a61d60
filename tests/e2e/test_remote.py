#!/usr/bin/env python3
"""vmcectl reaches vmced on other hosts over ssh (--connect ssh://...): two
"hosts", each a real sshd of its own (Debian's, on 127.0.0.1, keys made for
the run) and a real vmced, one 256 MiB TCG guest that moves from the first
vmced to the second. Asserts: every command works through ssh as it does
locally (status, vm, translate, policy, guest, poison, events, detach and
attach), the victim of a poison sent over ssh gets its SIGBUS; events of
both hosts merged by time with the host first; --follow over both goes on
when one host goes, with one line naming it; bad input (unreachable host,
no vmced there, wrong key, no vmcectl there, a bad target): one line each,
naming the host, the other hosts still answered; the guest agent's socket
gone on a host (vmced asks the agent there) and a relative socket path for
a vmced over ssh: one line each, naming the host.
"""
import json
import os
import re
import subprocess
import time

from common import Tap, Vm, Vmced, paths, prerequisites, start_victim, wait_for, wait_sigbus, workdir
from vmcelab import sshd as sshdmod

BUS_MCEERR_AO = 5

tap = Tap()
prerequisites(tap)
why = sshdmod.available()
if why:
    tap.skip("vmcectl --connect ssh://", why)
    tap.done()

work = workdir("remote")
VMCECTL = paths.vmcectl()
hosts, daemons, follow = [], [], None
vm = Vm.start("e2e-remote", mem="256M", state_dir=os.path.join(work, "vm"))


def ctl(*targets, args, check=True, timeout=60):
    cmd = [VMCECTL]
    for t in targets:
        cmd += ["--connect", t]
    r = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"vmcectl {' '.join(args)}: {r.stderr.strip()}")
    return r


def ctl_json(target, *args):
    return json.loads(ctl(target, args=["--json", *args]).stdout)


def without(d, *keys):
    return {k: v for k, v in d.items() if k not in keys}


try:
    hosts = [sshdmod.Sshd(os.path.join(work, f"host-{c}")) for c in "ab"]
    daemons = [Vmced(os.path.join(work, f"vmced-{c}")) for c in "ab"]
    a, b = (h.target(d.socket, vmcectl=VMCECTL) for h, d in zip(hosts, daemons))
    la, lb = hosts[0].label, hosts[1].label
    vm.wait_ready()
    agent = vm.agent
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)

    # first host: attached over ssh
    t = time.monotonic()
    r = ctl(a, args=["attach", "--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", "e2e-remote",
                     "--agent", vm.vmced_agent_path])
    daemons[0].wait_attached("e2e-remote")
    tap.ok(r.returncode == 0, f"attach over ssh ({time.monotonic() - t:.1f} s)", diag=r.stderr)
    local, remote = daemons[0].ctl_json("status"), ctl_json(a, "status")
    for st in (local, remote):
        st["vms"] = [without(v, "attached_ms", "stops") for v in st["vms"]]
    tap.eq(without(remote, "uptime_s", "rss_kb"), without(local, "uptime_s", "rss_kb"),
           "status over ssh is the local one")
    local, remote = daemons[0].ctl_json("vm", "e2e-remote"), ctl_json(a, "vm", "e2e-remote")
    tap.eq(without(remote, "attached_ms", "stops"), without(local, "attached_ms", "stops"),
           "vm over ssh is the local one")
    tap.eq(ctl(a, args=["translate", "e2e-remote", "--gpa", "0x100000"]).stdout,
           daemons[0].ctl("translate", "e2e-remote", "--gpa", "0x100000").stdout, "translate over ssh")
    ctl(a, args=["policy", "e2e-remote", "forward"])
    tap.eq(daemons[0].ctl_json("vm", "e2e-remote")["policy"], "forward", "policy set over ssh")
    r = ctl(a, args=["guest", "e2e-remote", "ping"], check=False)
    tap.ok(r.returncode == 0, "the guest agent over ssh", diag=r.stderr)

    victim = start_victim(agent, mode="idle")
    r = ctl(a, args=["--json", "poison", "e2e-remote", "--guest-pid", str(victim["pid"]), "--guest-va",
                     victim["va"], "--kind", "ao"], check=False)
    ev = json.loads(r.stdout) if r.stdout.startswith("{") else {}
    sig = wait_sigbus(agent, victim["pid"])
    tap.ok(ev.get("result") == "injected" and sig is not None and sig["code"] == BUS_MCEERR_AO
           and int(sig["addr"], 16) == victim["va_int"],
           "poison over ssh: injected, the victim got BUS_MCEERR_AO at its own VA", diag=(ev, sig, r.stderr))
    tap.eq(ctl(a, args=["events", "-n", "3"]).stdout, daemons[0].ctl("events", "-n", "3").stdout,
           "events over ssh are the local ones")

    # the guest moves to the second host's vmced
    ctl(a, args=["detach", "e2e-remote"])
    wait_for(lambda: daemons[0].ctl("vm", "e2e-remote", check=False).returncode != 0, 20)
    ctl(b, args=["attach", "--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", "e2e-remote",
                 "--agent", vm.vmced_agent_path])
    daemons[1].wait_attached("e2e-remote")
    victim = start_victim(agent, mode="idle")
    ev_b = daemons[1].poison("e2e-remote", "--guest-pid", str(victim["pid"]), "--guest-va", victim["va"],
                             "--kind", "ao")
    wait_sigbus(agent, victim["pid"])

    # both hosts' records, merged by time, the host first
    r = ctl(a, b, args=["events", "-n", "0"])
    lines = [ln for ln in r.stdout.splitlines() if re.match(r"\S+\s+\d{4}-\d\d-\d\dT", ln)]
    order = [ln.split()[0] for ln in lines]
    times = [ln.split()[1] for ln in lines]
    tap.ok(r.returncode == 0 and set(order) == {la, lb} and times == sorted(times)
           and order.index(lb) > max(i for i, h in enumerate(order) if h == la),
           "events of two hosts: merged by time, each line led by its host", diag=r.stdout[-1500:])
    r = ctl(a, b, args=["--json", "events", "-n", "0"])
    recs = [json.loads(ln) for ln in r.stdout.splitlines()]
    tap.ok(any(x.get("host") == lb and x.get("gpa") == ev_b["gpa"] for x in recs),
           "--json: each record carries its host", diag=recs[-2:])

    # --follow over both: an event on one, then the other host goes
    follow = subprocess.Popen([VMCECTL, "--connect", a, "--connect", b, "events", "--follow", "-n", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)  # both subscribed (over ssh)

    def poison_on_b_and_follow():
        """an AO on the second host; the lines --follow printed up to it"""
        victim = start_victim(agent, mode="idle")
        ev = daemons[1].poison("e2e-remote", "--guest-pid", str(victim["pid"]), "--guest-va", victim["va"],
                               "--kind", "ao")
        lines = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(ev["gpa"] in ln for ln in lines):
            lines.append(follow.stdout.readline())
        return ev, lines
    ev_b, got = poison_on_b_and_follow()
    tap.ok(any(ln.startswith(lb) and f"GPA {ev_b['gpa']}" in ln for ln in got),
           "--follow over two hosts: the new record, led by its host", diag=got[-4:])
    hosts[0].stop()  # the first host is gone: its sshd and its sessions
    daemons[0].stop()
    ev_b, got = poison_on_b_and_follow()
    tap.ok(any(ln.startswith(lb) and f"GPA {ev_b['gpa']}" in ln for ln in got) and follow.poll() is None,
           "--follow: one host gone, the other still followed", diag=got[-4:])
    follow.terminate()
    _, err = follow.communicate(timeout=10)
    follow = None
    errs = [ln for ln in err.splitlines() if ln.strip()]
    tap.ok(len(errs) == 1 and errs[0].startswith(f"vmcectl: error: {la}: "),
           "--follow: the host that went is one error line naming it", diag=err)

    # bad input: one line each, naming the host
    down = sshdmod.free_port()
    stranger = sshdmod.keygen(os.path.join(work, "stranger_key"))
    live = hosts[1]
    cases = [
        ("an unreachable host", f"ssh://root@127.0.0.1:{down}?no_verify=1&keyfile={live.user_key}",
         f"127.0.0.1:{down}: cannot reach vmced over ssh: "),
        ("a host without vmced", live.target(os.path.join(work, "none.sock"), vmcectl=VMCECTL),
         f"{lb}: cannot reach vmced over ssh: cannot reach vmced at "),
        ("wrong keys", live.target(daemons[1].socket, vmcectl=VMCECTL, key=stranger),
         f"{lb}: cannot reach vmced over ssh: "),
        ("no vmcectl there", live.target(daemons[1].socket, vmcectl="/nonexistent/vmcectl"),
         f"{lb}: cannot reach vmced over ssh: "),
        ("a target that is not one", "ssh://127.0.0.1/system", "ssh://127.0.0.1/system: "),
    ]
    for what, target, says in cases:
        r = ctl(target, b, args=["status"], check=False, timeout=60)
        errs = [ln for ln in r.stderr.splitlines() if ln.strip()]
        tap.ok(r.returncode == 1 and len(errs) == 1 and errs[0].startswith("vmcectl: error: " + says)
               and re.search(rf"^{re.escape(lb)}\s+1 vm\(s\)", r.stdout, re.M) is not None,
               f"{what}: one line naming the host, the other host still answered", diag=(r.stderr, r.stdout))
    # the agent is asked by vmced, at the socket it knows, on its own host
    os.rename(vm.vmced_agent_path, vm.vmced_agent_path + ".away")
    try:
        r = ctl(b, args=["guest", "e2e-remote", "ping"], check=False)
    finally:
        os.rename(vm.vmced_agent_path + ".away", vm.vmced_agent_path)
    errs = [ln for ln in r.stderr.splitlines() if ln.strip()]
    tap.eq(errs, [f"vmcectl: error: on {lb}: cannot reach the guest agent of vm e2e-remote at "
                  f"{vm.vmced_agent_path}: No such file or directory"],
           "the agent's socket gone: one line naming the host and the path")
    r = ctl(b, args=["attach", "--pid", str(vm.pid), "--qmp", "vmced.qmp"], check=False)
    errs = [ln for ln in r.stderr.splitlines() if ln.strip()]
    tap.eq((r.returncode, errs), (1, [f"vmcectl: error: --qmp vmced.qmp: vmced on {lb} opens it: give the whole "
                                      "path there"]), "a relative socket path for a vmced over ssh: one line")
    r = ctl(b, b, args=["poison", "e2e-remote", "--gpa", "0x1000"], check=False)
    tap.ok(r.returncode == 1 and "takes one --connect" in r.stderr, "a command for one host given two: one line",
           diag=r.stderr)
finally:
    if follow is not None:
        follow.kill()
    for d in daemons:
        d.stop()
    for h in hosts:
        h.stop()
    vm.stop()
tap.done()
