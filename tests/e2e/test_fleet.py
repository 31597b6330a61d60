#!/usr/bin/env python3
"""Three hosts on this machine (run/fleet up 3: each a network namespace with
its own sshd, private libvirtd, vmced and one 128 MiB TCG guest, on a private
network of the fleet's own), reached only as an operator reaches other
hosts: libvirt over qemu+ssh, vmced over vmcectl --connect ssh://. Asserts:
every host's vmced took its guest; run/virsh/campaign over the three runs
their cases side by side into one results file with the host first; one
host's libvirtd and sshd killed mid-campaign leaves its unfinished cases
"not run (host lost: ...)" while the others pass; a resume runs only what is
missing; vmcectl over the three says the lost host in one line and answers
for the others; run/fleet down leaves no namespace and no QEMU.
"""
import json
import os
import shutil
import subprocess
import time

from common import Tap, paths, prerequisites, wait_for, workdir
from vmcelab import sshd as sshdmod

tap = Tap()
prerequisites(tap)
for why in (sshdmod.available(),
            None if shutil.which("libvirtd") and shutil.which("virsh") else "libvirtd or virsh is missing",
            None if shutil.which("nc") else "nc is missing (netcat-openbsd: libvirt's qemu+ssh runs it)",
            None if shutil.which("ip") else "ip is missing (iproute2)"):
    if why:
        tap.skip("a fleet of three hosts", why)
        tap.done()

FLEET = os.path.join(paths.ROOT, "run", "fleet")
CAMPAIGN = os.path.join(paths.ROOT, "run", "virsh", "campaign")
ROUNDS = 6
work = workdir("fleet")


def fleet(*args, timeout=900):
    return subprocess.run([FLEET, *args], capture_output=True, text=True, timeout=timeout)


def in_hub(*argv):
    return ["ip", "netns", "exec", "vmce-fleet", *argv]


def campaign_argv(hosts, results):
    argv = [CAMPAIGN]
    for h in hosts:
        argv += ["--connect", h["libvirt_ssh"], "--vmced", h["vmced"]]
    return in_hub(*argv, "--rounds", str(ROUNDS), "--results", results)


def rows(path):
    try:
        with open(path) as f:
            return [json.loads(ln) for ln in f if ln.strip()]
    except OSError:
        return []


fleet("down")  # a fleet left by an interrupted run
r = fleet("up", "3", "--domains", "1", "--mem", "128M")
try:
    if r.returncode != 0:
        tap.bail(f"run/fleet up 3 failed: {r.stderr.strip()[-500:]}")
    with open(os.path.join(paths.build_dir(), "fleet", "fleet.json")) as f:
        desc = json.load(f)
    hosts = desc["hosts"]
    env = dict(os.environ, VMCECTL=paths.vmcectl())

    def attached():
        st = fleet("vmcectl", "status", timeout=120)
        return st.returncode == 0 and st.stdout.count(" attached ") == 3 and st
    tap.ok(wait_for(attached, 180, 1.0), "run/fleet up 3: each host's vmced took its guest (vmcectl over ssh)",
           diag=fleet("vmcectl", "status").stdout)

    results = os.path.join(work, "results.jsonl")
    t0 = time.monotonic()
    camp = subprocess.Popen(campaign_argv(hosts, results), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    lost = hosts[2]
    lost_label = lost["address"]
    # the third host goes once its first case is in
    wait_for(lambda: any(x["host"] == lost_label for x in rows(results)), 300, 0.2)
    k = fleet("kill", lost["name"], "libvirtd", "sshd")
    out, err = camp.communicate(timeout=600)
    took = time.monotonic() - t0
    got = rows(results)
    by_host = {h["address"]: [x for x in got if x["host"] == h["address"]] for h in hosts}
    ok_hosts = [h["address"] for h in hosts[:2]]
    tap.ok(all(len(by_host[a]) == ROUNDS and all(x["result"] == "injected" and x["signal"] == "BUS_MCEERR_AO"
                                                  and x["own_va"] == "yes" for x in by_host[a])
               for a in ok_hosts),
           f"the two hosts left: all {2 * ROUNDS} cases passed, in one results file, host first ({took:.0f} s)",
           diag=[x for x in got if x["host"] in ok_hosts][:4])
    lost_rows = by_host[lost_label]
    notrun = [x for x in lost_rows if x["result"].startswith("not run (host lost: ")]
    tap.ok(k.returncode == 0 and len(lost_rows) == ROUNDS and notrun
           and all(x in notrun or x["signal"] == "BUS_MCEERR_AO" for x in lost_rows),
           f"{lost['name']}'s libvirtd and sshd killed mid-campaign: its unfinished cases are 'not run (host "
           f"lost: ...)' ({len(notrun)} of {ROUNDS})", diag=lost_rows)
    summary = out.strip().splitlines()
    tap.ok(camp.returncode == 1 and summary and summary[-1] == f"{2 * ROUNDS + ROUNDS - len(notrun)} passed, "
           f"0 failed, {len(notrun)} not run" and summary[0].split()[0] == "HOST",
           "the summary: a host column, and what passed, failed and was not run", diag=(out[-1500:], err[-500:]))

    # a resume runs only what is missing: the lost host's cases (lost again)
    before = len(got)
    r2 = subprocess.run(campaign_argv(hosts, results), capture_output=True, text=True, timeout=600, env=env)
    new = rows(results)[before:]
    tap.ok(r2.returncode == 1 and new and all(x["host"] == lost_label for x in new)
           and len(new) == len(notrun) and all(x["result"].startswith("not run (host lost: ") for x in new)
           and r2.stdout.strip().endswith(f"{2 * ROUNDS + ROUNDS - len(notrun)} passed, 0 failed, "
                                          f"{len(notrun)} not run"),
           "run again with the same results: only the missing cases, on the host that is still lost",
           diag=(new, r2.stdout[-800:]))

    st = fleet("vmcectl", "status", timeout=120)
    errs = [ln for ln in st.stderr.splitlines() if ln.strip()]
    tap.ok(st.returncode == 1 and len(errs) == 1 and errs[0].startswith(f"vmcectl: error: {lost_label}:22: ")
           and all(f"{a}:22" in st.stdout for a in ok_hosts),
           "vmcectl over the fleet: the lost host in one line, the others answered", diag=(st.stderr, st.stdout))
finally:
    d = fleet("down", timeout=300)
left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
# the fleet's guests are named hN-gM (libvirt hands QEMU its files as
# descriptors: the fleet's directory is not on its command line)
qemus = subprocess.run(["pgrep", "-f", r"qemu-system.*guest=h[0-9]+-g[0-9]+"], capture_output=True,
                       text=True).stdout.split()
tap.ok(d.returncode == 0 and "vmce-fleet" not in left and not qemus,
       "run/fleet down: no namespace and no QEMU of the fleet left", diag=(d.stderr, left, qemus))
tap.done()
