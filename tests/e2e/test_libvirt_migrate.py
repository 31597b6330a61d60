#!/usr/bin/env python3
"""A libvirt host drained: two private libvirtds on this machine, each with
a host UUID of its own and its own vmced (libvirt mode, migration = carry),
and `run/virsh/drain` moving every domain from the first to the second with
`virsh migrate --live`: one domain holding a poisoned page (its victim
killed by the AO), one clean. Asserts: the source's vmced wrote the page
into the domain's metadata before anything moved (`virsh metadata` shows
it), the drain says both migrated and what each carried, the poisoned one
held paused on the destination until its vmced had poisoned the page there
(`received`: before the guest ran) and then resumed, the source's journal
hands the page over through the domain, the page is unreadable in the
destination's QEMU, the guest's HardwareCorrupted and its victim's fate
are as they were, no QEMU thread is left stopped on either host. Bad
input: drained back to a host whose vmced is not running, with
--to-vmced naming it: refused in one line, nothing moved; without: the
domain is left paused there, said in one line, and the drain fails.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

from common import (PRIVATE_LIBVIRTD, Tap, Virsh, Vmced, paths, prerequisites, private_libvirtd,  # noqa: E402
                    qemu_reads, thread_states, wait_for, wait_sigbus, workdir)

sys.path.insert(0, os.path.join(paths.ROOT, "run", "lib"))
from vmcelab import agent as agentmod  # noqa: E402
from vmcelab.libvirt import domain_xml  # noqa: E402

NS = "https://vmce.dev/xmlns/poisoned/1"
tap = Tap()
prerequisites(tap)
if not shutil.which("libvirtd") or not shutil.which("virsh"):
    tap.skip("libvirt migration", "libvirtd or virsh is missing (run/install-deps installs them)")
    tap.done()

work = workdir("libvirt-migrate")
hosts = {h: os.path.join(work, f"libvirt-{h}") for h in ("a", "b")}
uris = {h: private_libvirtd(tap, d) for h, d in hosts.items()}
virsh = {h: Virsh(u) for h, u in uris.items()}
daemons = {}
short = tempfile.mkdtemp(prefix="vmce-lvm-")
NAMES = ("vmce-mig0", "vmce-mig1")


def create(name):
    state = os.path.join(work, name)
    os.makedirs(state, exist_ok=True)
    xml = os.path.join(state, "domain.xml")
    with open(xml, "w") as f:
        # guest RAM as libvirt has it by default: anonymous memory
        # (vmced's agent port in each libvirtd's own channel directory: the
        # source QEMU takes a socket path in the test's directory away with it)
        f.write(domain_xml(name, state, disk="", mem_file=False, vmced_agent_by_libvirt=True))
    virsh["a"]("create", xml)
    return state


def agent_on(h, name):
    """The guest's agent on host @h: vmced's port, which libvirt places in
    its own channel directory (the private libvirtd's, seen from here)"""
    def find():
        paths_ = glob.glob(os.path.join(hosts[h], "lib", "qemu", "channel", "target", f"domain-*-{name}",
                                        "org.vmce.agent.1"))
        return sorted(paths_, key=os.path.getmtime)[-1] if paths_ else None
    path = wait_for(find, 60)
    if path is None:
        raise RuntimeError(f"no agent port of {name} on host {h}")
    # (a unix socket's path must fit in 108 bytes: a short link to it)
    link = os.path.join(short, f"{h}-{name}.sock")
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(path, link)
    a, _ = agentmod.wait_ready(link, 120)
    return a


def migration_records(h, name, action):
    return [r for r in daemons[h].journal_records() if r["type"] == "migration" and r.get("vm") == name and r.get("action") == action]


try:
    for h in ("a", "b"):
        daemons[h] = Vmced(os.path.join(work, f"vmced-{h}"), args=["--connect", uris[h], "--all-domains"])
    states = {n: create(n) for n in NAMES}
    for n in NAMES:
        daemons["a"].wait_attached(n, timeout=120)
    agent = agent_on("a", NAMES[0])
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)
    victim = agent.call("victim-start", mode="idle")
    # (vmced reaches the agent's port only inside that libvirtd's namespace)
    ev = daemons["a"].poison(NAMES[0], "--gpa", victim["gpa"], "--kind", "ao")
    sig = wait_sigbus(agent, victim["pid"])
    tap.ok(ev.get("result") == "injected" and sig is not None and sig["code"] == 5,
           f"{NAMES[0]}: the victim got BUS_MCEERR_AO on host a", diag=ev)
    hc_before = agent.hardware_corrupted_kb()
    agent.close()
    held = wait_for(lambda: daemons["a"].ctl_json("vm", NAMES[0])["migration"].get("domain_metadata_pages") == 1,
                    10)
    tap.ok(held, f"{NAMES[0]}: vmced on host a wrote the page into the domain's metadata")
    meta = virsh["a"]("metadata", NAMES[0], NS, check=False)
    tap.ok(victim["gpa"] in meta, "virsh metadata shows the page, as an operator reads it", diag=meta)

    out = os.path.join(work, "drain.json")
    r = subprocess.run([os.path.join(paths.ROOT, "run", "virsh", "drain"), "--from", uris["a"], "--to", uris["b"],
                        "--migrateuri", "tcp://127.0.0.1", "--unsafe", "--to-vmced", daemons["b"].socket,
                        "--json", out],
                       capture_output=True, text=True, timeout=900)
    tap.diag(r.stdout.strip())
    tap.eq(r.returncode, 0, "run/virsh/drain: every domain left host a", )
    rows = json.load(open(out))["domains"] if os.path.exists(out) else []
    tap.eq(sorted((d["domain"], d["migrated"], d["poisoned_pages"], d["held_before_run"]) for d in rows),
           [(NAMES[0], True, 1, True), (NAMES[1], True, 0, False)],
           "the drain's table: both migrated, the poisoned one carrying its page, held paused on host b until "
           "its vmced had it")
    tap.eq([virsh["b"]("domstate", n).strip() for n in NAMES], ["running", "running"],
           "both domains run on host b")
    tap.eq(virsh["a"]("list", "--name"), "", "host a runs no domain any more")
    over = wait_for(lambda: migration_records("a", NAMES[0], "handed-over"), 20) or [{}]
    tap.ok(over[0].get("destination") == "its libvirt domain (metadata)" and victim["gpa"] in over[0].get("pages", []),
           "host a's journal: the page handed over through the domain", diag=over)
    vm_b = daemons["b"].wait_attached(NAMES[0], timeout=120)
    got = wait_for(lambda: migration_records("b", NAMES[0], "received"), 30) or [{}]
    tap.ok(got[0].get("marked") == 1 and got[0].get("how") == "UFFDIO_POISON"
           and "before the guest ran" in got[0].get("detail", ""),
           f"host b's journal: the page received and poisoned before the guest ran ({got[0].get('detail')})",
           diag=got)
    info = daemons["b"].ctl_json("vm", NAMES[0])
    page = next((p for p in info["poisoned"] if p["gpa"] == victim["gpa"]), None)
    tap.ok(page is not None and page.get("migrated"), "host b's vmced lists the page, migrated", diag=info["poisoned"])
    tap.ok(page is not None and not qemu_reads(int(page["hva"], 16), vm_b["pid"]),
           "the page is poisoned in host b's QEMU")
    agent = agent_on("b", NAMES[0])
    st = agent.call("victim-status", pid=victim["pid"])
    tap.ok(not st["alive"] and st["sigbus"] and st["sigbus"]["code"] == 5,
           "on host b the victim is as it was: killed by its BUS_MCEERR_AO", diag=st)
    tap.eq(agent.hardware_corrupted_kb(), hc_before, "on host b HardwareCorrupted is as it was: nothing told again")
    agent.close()
    tap.ok("t" not in thread_states(vm_b["pid"]).values(), "no thread of host b's QEMU is left stopped")
    back = daemons["b"].ctl_json("vm", NAMES[0])["migration"].get("domain_metadata_pages")
    tap.eq(back, 1, "host b's vmced keeps the domain's metadata holding the page (it may move again)")

    # bad input: back to host a, whose vmced is not running: nobody says
    # the page is poisoned there, so the guest must not run there
    gone = daemons.pop("a")
    gone.stop()
    drain_back = [os.path.join(paths.ROOT, "run", "virsh", "drain"), "--from", uris["b"], "--to", uris["a"],
                  "--migrateuri", "tcp://127.0.0.1", "--unsafe"]
    r = subprocess.run(drain_back + ["--to-vmced", gone.socket, NAMES[0]], capture_output=True, text=True,
                       timeout=120)
    errs = r.stderr.strip().splitlines()
    tap.ok(r.returncode == 1 and len(errs) == 1 and errs[0].startswith(f"drain: the destination's vmced at "
                                                                       f"{gone.socket} does not answer")
           and errs[0].endswith(": nothing moved") and virsh["b"]("domstate", NAMES[0]).strip() == "running",
           "drained with --to-vmced naming a vmced that is not running: refused in one line, nothing moved",
           diag=(r.stdout, r.stderr))
    r = subprocess.run(drain_back + ["--hold-timeout", "3", NAMES[0]], capture_output=True, text=True, timeout=300)
    lines = r.stdout.strip().splitlines()
    tap.ok(r.returncode == 1 and len(lines) == 2 and "LEFT PAUSED" in lines[0] and "1 poisoned page(s)" in lines[0]
           and lines[1] == "1 migrated, 0 failed, 1 left paused"
           and virsh["a"]("domstate", NAMES[0]).strip() == "paused",
           "drained to a host without vmced: left paused there, in one line, and the drain fails",
           diag=(r.stdout, r.stderr))
finally:
    for h, d in daemons.items():
        d.stop()
    for h in ("a", "b"):
        for n in NAMES:
            subprocess.run(["virsh", "-q", "-c", uris[h], "destroy", n], capture_output=True, timeout=60)
        subprocess.run([PRIVATE_LIBVIRTD, "stop", hosts[h]], capture_output=True, timeout=120)
    shutil.rmtree(short, ignore_errors=True)
tap.done()
