#!/usr/bin/env python3
"""vmce's Debian package, installed into a clean Debian 12 host (or 13,
given `13`: meson test e2e-package-13) and run by its systemd, as an
operator installs it. The package is the one built on Debian 12: the same
.deb serves both releases (docs/operator.md says why).

The host is a container (systemd-nspawn --boot, vmcelab/nspawn.py) on an
overlay of images/mkroot's root: minbase, systemd, D-Bus, no libvirt and
nothing of vmce's (Debian 13's has its own QEMU). In order, in one
container and one guest:
- apt installs build/deb's vmce_*.deb, fetching its Depends from the
  mirror; its files (the Ansible playbook among the examples); the unit
  is enabled and running; systemd-analyze's exposure;
- no libvirt on the host: vmced says once that it runs in attach mode;
- journald: `journalctl -u vmced -p warning` shows the memory error and
  not vmced's notices; the error is found by its MESSAGE_ID and VMCE_VM,
  with its VMCE_GPA; a failed attach is at priority err;
- a forward through the installed vmced: a real TCG guest whose QEMU is
  born in the container's PID namespace (on Debian 12 this machine's QEMU
  binary, the QEMU under test; on Debian 13 the host's own QEMU, run in the
  container's mount namespace with its own libraries and firmware),
  attached with the installed vmcectl; the guest process gets its SIGBUS;
  the record names the host page (pagemap's pfn, which needs the
  CAP_SYS_ADMIN the unit keeps);
- an upgrade keeps the conffile the operator edited;
- dpkg --purge with the VM attached: vmced detaches first (no QEMU thread
  left stopped or traced), nothing of the package is left, the journal
  stays when the operator asked (/var/lib/vmce/keep-journal) and goes when
  not;
- and `make install`, the way without a package, installs the same files
  (on Debian 12 only: it is this machine's build either way).
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

from common import (Tap, Vm, Vmced, pagemap_pfn, paths, prerequisites, start_victim, thread_states, victim_status,
                    wait_for, wait_kmsg, wait_sigbus, workdir)
from vmcelab import qemus
from vmcelab.nspawn import Container, ContainerError, inner_pid
from vmcelab.procfs import traced_threads

BUS_MCEERR_AO = 5
# systemd-analyze security vmced, measured when the unit was written (2.5
# running, 2.7 offline), and since the unit keeps CAP_SYS_ADMIN for
# pagemap's pfns (the host page of each error) 3.0 offline
EXPOSURE_TARGET = 3.0
# the sockets of the guest, bound into the container at the same path: short
# (a socket's path has 108 bytes) and outside /tmp, which the unit makes
# private to vmced
DEBIAN = sys.argv[1] if len(sys.argv) > 1 else "12"
SUFFIX = "" if DEBIAN == "12" else f"-{DEBIAN}"
SHARED = f"/run/vmce-e2e-package{SUFFIX}"
CACHE = os.environ.get("VMCE_CACHE", "/var/cache/vmce")
# each release's package lists of its own
APT_CACHE = os.path.join(CACHE, f"apt-host-root{SUFFIX}")
NONINTERACTIVE = {"DEBIAN_FRONTEND": "noninteractive"}
# vmced's MESSAGE_IDs (host-daemon/src/log-writer.c): shipped, never changed
FORWARDED_ID = "392752ff4482457c816c965484d97868"
ATTACH_FAILED_ID = "b93a46fcf4d34ca5a40da1efdbf767bc"

tap = Tap()
if DEBIAN not in ("12", "13"):
    tap.bail(f"Debian {DEBIAN}: the package is tested on Debian 12 and 13")
prerequisites(tap)
for tool in ("systemd-nspawn", "nsenter", "dpkg-deb"):
    if shutil.which(tool) is None:
        tap.bail(f"{tool} is missing: `make check` installs it (run/install-deps)")
debs = sorted(glob.glob(os.path.join(paths.build_dir(), "deb", "vmce_*_*.deb")), key=os.path.getmtime)
root = os.path.join(paths.build_dir(), "images", f"debian-{DEBIAN}-host", "root")
if not debs:
    tap.bail(f"no package in {paths.build_dir()}/deb: `make check` builds it first (make deb)")
if not os.path.isdir(root):
    tap.bail(f"no clean host root at {root}: `make check` builds it first (make host-root)")
deb = debs[-1]
tap.diag(f"package {os.path.basename(deb)} ({os.path.getsize(deb) // 1024} KiB)")

work = workdir("package")
shutil.rmtree(SHARED, ignore_errors=True)
os.makedirs(SHARED)
for d in ("archives", "lists"):
    os.makedirs(os.path.join(APT_CACHE, d), exist_ok=True)
# the Depends come from the mirror once per machine: the test measures the
# install, not the mirror
binds = [(SHARED, SHARED),
         (os.path.join(APT_CACHE, "archives"), "/var/cache/apt/archives"),
         (os.path.join(APT_CACHE, "lists"), "/var/lib/apt/lists")]
if DEBIAN != "12":
    # the host's own QEMU boots vmce's guest kernel and disk: where the
    # machine has them (build/ links into the cache), read only
    binds += [(d, d, "ro") for d in {os.path.realpath(paths.build_dir()), os.path.realpath(CACHE)}]
host = Container(f"vmce-e2e-package{SUFFIX}", root, os.path.join(work, "host"), binds=binds)
vm = None
started = None
forwarded_gpa = None


def sh(*argv, **kw):
    return host.run(*argv, **kw)


def vmced_pid():
    r = sh("systemctl", "show", "-p", "MainPID", "--value", "vmced", check=False)
    return int(r.stdout.strip() or 0)


def package_files():
    """What dpkg says the package installed: files, not directories"""
    r = sh("dpkg-query", "-L", "vmce")
    return [p for p in r.stdout.split("\n") if p and not os.path.isdir(host.path(p))]


def qemu_untouched(what, attached=False):
    """No QEMU thread stopped; none traced unless vmced is @attached"""
    states = thread_states(vm.pid)
    traced = traced_threads(vm.pid)
    if attached:
        tap.ok(vm.alive() and "t" not in states.values() and len(traced) == len(states),
               f"{what}: QEMU runs on, every thread traced, none left stopped",
               diag=f"states {states}, traced {traced}")
        return
    tap.ok(vm.alive() and "t" not in states.values() and not traced,
           f"{what}: QEMU runs on, no thread left stopped or traced",
           diag=f"states {states}, traced {traced}")


def attach():
    r = sh("vmcectl", "attach", "--pid", str(inner_pid(vm.pid)), "--qmp", vm.vmced_qmp_path,
           "--name", "guest", "--agent", vm.vmced_agent_path, check=False)
    if r.returncode != 0:
        raise ContainerError(f"vmcectl attach: {r.stderr.strip()}")
    return wait_for(lambda: '"attached"' in sh("vmcectl", "--json", "vm", "guest", check=False).stdout, 30)


def memory_errors():
    """The memory-error records of the installed vmced's journal"""
    return [r for r in Vmced.records(host.path("/var/lib/vmce/journal.jsonl"))
            if r["type"] == "memory-error"]


def case_install():
    global started
    shutil.copy(deb, host.path("/root/"))
    sh("apt-get", "update", timeout=300)
    t0 = time.monotonic()
    r = sh("apt-get", "install", "-y", "--no-install-recommends", f"/root/{os.path.basename(deb)}",
           env=NONINTERACTIVE, timeout=600, check=False)
    seconds = time.monotonic() - t0
    started = time.monotonic()
    tap.ok(r.returncode == 0, f"apt installs the package and its Depends into a clean Debian {DEBIAN} "
                              f"({seconds:.1f} s)", diag=r.stdout[-2000:] + r.stderr[-1000:])
    status = sh("dpkg-query", "-W", "-f=${Status} ${Version}", "vmce", check=False).stdout
    tap.ok(status.startswith("install ok installed"), f"dpkg: {status}")
    missing = [p for p in ("/usr/sbin/vmced", "/usr/bin/vmcectl", "/usr/share/man/man8/vmced.8.gz",
                           "/usr/share/man/man1/vmcectl.1.gz", "/etc/vmce/vmced.conf",
                           "/lib/systemd/system/vmced.service", "/usr/share/vmce/prometheus/vmce-alerts.yml",
                           "/usr/share/vmce/proxmox/vmce-hook.sh",
                           "/usr/share/doc/vmce/examples/ansible/vmce.yml",
                           "/usr/share/doc/vmce/examples/ansible/roles/vmce/templates/vmced.conf.j2")
               if not os.path.exists(host.path(p))]
    tap.ok(not missing, "vmced in /usr/sbin, vmcectl in /usr/bin, man pages, vmced.conf, the unit, "
                        "the alert rules, the Proxmox VE hookscript, the Ansible playbook in the examples",
           diag=f"missing: {missing}")
    conffiles = sh("dpkg-query", "-W", "-f=${Conffiles}", "vmce", check=False).stdout
    tap.ok("/etc/vmce/vmced.conf" in conffiles, "vmced.conf is a conffile", diag=conffiles)
    tap.eq(sh("systemctl", "is-enabled", "vmced", check=False).stdout.strip(), "enabled",
           "the unit is enabled on install")
    active = wait_for(lambda: sh("systemctl", "is-active", "vmced", check=False).stdout.strip() == "active", 20)
    r = sh("systemctl", "status", "--no-pager", "vmced", check=False)
    tap.ok(active and r.returncode == 0 and "active (running)" in r.stdout,
           "systemctl status vmced: active (running)", diag=r.stdout)
    r = sh("vmcectl", "status", check=False)
    tap.ok(r.returncode == 0 and "vmced" in r.stdout, "the installed vmcectl reaches the installed vmced",
           diag=r.stdout + r.stderr)
    tap.diag(f"figure: install {seconds:.1f} s (apt-get install of the .deb and its Depends, "
             f"from the machine's cache of the mirror)")


def case_hardening():
    r = sh("systemd-analyze", "security", "--no-pager", "vmced", check=False)
    m = re.search(r"Overall exposure level for vmced\.service: ([0-9.]+)", r.stdout)
    exposure = float(m.group(1)) if m else None
    tap.ok(exposure is not None and exposure <= EXPOSURE_TARGET,
           f"systemd-analyze security vmced: exposure {exposure} (at most {EXPOSURE_TARGET})",
           diag=r.stdout[-1500:] + r.stderr)
    tap.diag(f"figure: exposure {exposure}, from the running unit")


def host_qemu():
    """The QEMU the guest runs on: on Debian 12 this machine's (VMCE_QEMU,
    the QEMU under test); on another release the host's own, started in its
    mount namespace, so with its own libraries, modules and firmware"""
    if DEBIAN == "12":
        return None
    wrapper = os.path.join(work, "qemu-system-x86_64")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\nexec nsenter --target {host.leader} --mount -- /usr/bin/qemu-system-x86_64 "$@"\n')
    os.chmod(wrapper, 0o755)
    return wrapper


def case_forward():
    global vm, forwarded_gpa
    qemu = host_qemu()
    version = subprocess.run([qemu or qemus.binary(), "--version"], capture_output=True,
                             text=True).stdout.partition("\n")[0]
    # born in the host's PID namespace, so that its vmced can see and
    # ptrace it
    with host.pid_ns():
        vm = Vm.start("e2e-package", mem="512M", qemu=qemu, state_dir=os.path.join(SHARED, "vm"))
    vm.wait_ready()
    if qemu:
        with open(os.path.join(os.path.dirname(root), "root.json")) as f:
            own = json.load(f)["packages"]["qemu-system-x86"]
        tap.ok(f"(Debian {own})" in version, f"the guest runs on the host's own QEMU, Debian {own}",
               diag=version)
    tap.ok(attach(), f"vmcectl attach: the installed vmced watches the guest's QEMU ({version})")
    agent = vm.agent
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)
    hc_before = agent.hardware_corrupted_kb()
    _, since = agent.kmsg()
    victim = start_victim(agent, mode="idle")
    r = sh("vmcectl", "--json", "poison", "guest", "--guest-pid", str(victim["pid"]),
           "--guest-va", victim["va"], "--kind", "ao", check=False)
    tap.ok(r.returncode == 0 and '"injected"' in r.stdout, "vmcectl poison: AO injected",
           diag=r.stdout[-1500:] + r.stderr)
    sig = wait_sigbus(agent, victim["pid"])
    tap.ok(sig is not None and sig["code"] == BUS_MCEERR_AO and int(sig["addr"], 16) == victim["va_int"],
           "the guest process got SIGBUS BUS_MCEERR_AO at its own address",
           diag=victim_status(agent, victim["pid"]))
    tap.eq(agent.hardware_corrupted_kb() - hc_before, 4, "HardwareCorrupted grew by 4 kB")
    pfn = victim["gpa_int"] >> 12
    line = wait_kmsg(agent, rf"Memory failure: {pfn:#x}: recovery action for dirty LRU page: Recovered",
                     since)
    tap.ok(line is not None, "the guest kernel recovered the page")
    rec = wait_for(lambda: [r for r in memory_errors()
                            if r["gpa"] and int(r["gpa"], 16) == victim["gpa_int"]
                            and r["result"] == "injected"], 10)
    tap.ok(rec, f"the installed vmced's journal (/var/lib/vmce) holds the error at GPA {victim['gpa']}")
    # the unit keeps CAP_SYS_ADMIN for this: without it pagemap shows 0
    r = rec[0] if rec else {}
    want = pagemap_pfn(vm.pid, int(r.get("hva") or "0", 16))
    tap.ok(want and (r.get("host_pfn"), r.get("host_pfn_from")) == (want, "present"),
           "under the packaged unit, the record names the host page (the pfn QEMU's pagemap maps the HVA to)",
           diag={k: r.get(k) for k in ("hva", "host_pfn", "host_pfn_from", "host_pfn_why")} | {"pagemap": want})
    qemu_untouched("after the forward", attached=True)
    forwarded_gpa = victim["gpa_int"]


def journal_json(*matches):
    """journalctl's entries for @matches (FIELD=VALUE), as dicts"""
    r = sh("journalctl", "--no-pager", "-o", "json", *matches, check=False)
    return [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]


def case_journald():
    """What an operator's journal shows: priorities and fields, from the unit"""
    warn = sh("journalctl", "-u", "vmced", "-p", "warning", "--no-pager", "-o", "cat").stdout
    tap.ok(any(f"GPA {forwarded_gpa:#x}: injected" in ln for ln in warn.splitlines())
           and "attach mode" in warn and "listening on" not in warn,
           "journalctl -u vmced -p warning: the memory error and the attach-mode warning, not the notices",
           diag=warn[-2000:])
    forwarded = journal_json("MESSAGE_ID=" + FORWARDED_ID, "VMCE_VM=guest")
    e = forwarded[-1] if forwarded else {}
    tap.ok(len(forwarded) == 1 and int(e.get("VMCE_GPA", "0x1"), 16) == forwarded_gpa
           and e.get("PRIORITY") == "4" and e.get("SYSLOG_IDENTIFIER") == "vmced"
           and e.get("_SYSTEMD_UNIT") == "vmced.service" and e.get("VMCE_SEQ"),
           f"journalctl MESSAGE_ID={FORWARDED_ID} VMCE_VM=guest: the error, with its GPA, "
           "at priority warning", diag=e or sh("journalctl", "-u", "vmced", "-o", "json", "--no-pager").stdout[-3000:])
    r = sh("vmcectl", "attach", "--pid", "999999", "--qmp", "/nonexistent.qmp", "--name", "ghost", check=False)
    failed = wait_for(lambda: journal_json("MESSAGE_ID=" + ATTACH_FAILED_ID, "VMCE_VM=ghost", "-p", "err"), 10)
    tap.ok(r.returncode != 0 and failed and failed[-1].get("PRIORITY") == "3",
           "a failed attach: at priority err, found by its MESSAGE_ID and VM",
           diag=(r.stderr, failed))


def case_no_libvirt():
    # one retry has passed: still one line
    wait = 12 - (time.monotonic() - started)
    if wait > 0:
        time.sleep(wait)
    log = sh("journalctl", "-u", "vmced", "--no-pager", "-o", "cat").stdout
    said = [ln for ln in log.splitlines() if "attach mode" in ln]
    tap.ok(len(said) == 1 and "cannot connect to qemu:///system" in said[0],
           "no libvirt on the host: vmced says once that it runs in attach mode", diag=log)
    tap.eq(sh("systemctl", "is-active", "vmced", check=False).stdout.strip(), "active",
           "and keeps running without it")


def case_metrics_textfile():
    """[metrics] textfile as the operator's guide says, under the packaged
    unit: its ProtectSystem=strict leaves vmced only the paths it names,
    and node_exporter's directory must be one of them"""
    conf = host.path("/etc/vmce/vmced.conf")
    with open(conf) as f:
        shipped = f.read()
    os.makedirs(host.path("/var/lib/prometheus/node-exporter"), exist_ok=True)
    prom = host.path("/var/lib/prometheus/node-exporter/vmce.prom")
    try:
        with open(conf, "a") as f:
            f.write("\n[metrics]\ntextfile = /var/lib/prometheus/node-exporter/vmce.prom\n")
        r = sh("systemctl", "restart", "vmced", check=False, timeout=60)
        written = wait_for(lambda: os.path.exists(prom), 20)
        text = open(prom).read() if written else ""
        mode = oct(os.stat(prom).st_mode & 0o777) if written else None
        tap.ok(r.returncode == 0 and written and "vmce_attached_vms" in text and mode == "0o644",
               "[metrics] textfile under the packaged unit: vmced writes node_exporter's file (0644)",
               diag=(r.stderr, mode, text[:300],
                     sh("journalctl", "-u", "vmced", "--no-pager", "-o", "cat", "-n", "20").stdout))
    finally:
        with open(conf, "w") as f:
            f.write(shipped)
        sh("systemctl", "restart", "vmced", check=False, timeout=60)


def case_upgrade_keeps_conffile():
    conf = host.path("/etc/vmce/vmced.conf")
    with open(conf) as f:
        text = f.read()
    edited = text.replace("hugepage = salvage", "hugepage = all") + "# edited by the operator\n"
    with open(conf, "w") as f:
        f.write(edited)
    # the same package a version later: dpkg upgrades; its vmced.conf is
    # the shipped one, so the operator's is kept without a question
    tree = os.path.join(work, "upgrade")
    subprocess.run(["dpkg-deb", "-R", deb, tree], check=True)
    control = os.path.join(tree, "DEBIAN", "control")
    with open(control) as f:
        fields = f.read()
    version = re.search(r"^Version: (.*)$", fields, re.M).group(1) + "+upgrade1"
    with open(control, "w") as f:
        f.write(re.sub(r"^Version: .*$", f"Version: {version}", fields, flags=re.M))
    newer = host.path("/root/vmce-upgrade.deb")
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", tree, newer], check=True,
                   capture_output=True)
    before = vmced_pid()
    r = sh("dpkg", "-i", "/root/vmce-upgrade.deb", env=NONINTERACTIVE, check=False, timeout=300)
    tap.ok(r.returncode == 0 and version in sh("dpkg-query", "-W", "vmce").stdout,
           f"upgrade to {version}", diag=r.stdout + r.stderr)
    with open(conf) as f:
        tap.eq(f.read(), edited, "the conffile the operator edited is kept on upgrade")
    after = wait_for(lambda: (lambda p: p if p and p != before else None)(vmced_pid()), 20)
    tap.ok(after, f"the upgrade restarted vmced (pid {before} -> {after})")
    # a QEMU attached by hand is let go by the old vmced; the new one does
    # not know it (libvirt's domains it would take again by itself)
    qemu_untouched("after the upgrade's restart")


def case_purge(keep):
    what = "kept" if keep else "not kept"
    if not attach():
        tap.ok(False, "the guest is attached again before purge")
        return
    marker = host.path("/var/lib/vmce/keep-journal")
    if keep:
        with open(marker, "w"):
            pass
    elif os.path.exists(marker):
        os.unlink(marker)
    files = package_files()
    r = sh("dpkg", "--purge", "vmce", check=False, timeout=300)
    tap.ok(r.returncode == 0, f"dpkg --purge with the VM attached (journal {what})",
           diag=r.stdout + r.stderr)
    qemu_untouched(f"after purge (journal {what})")
    left = [p for p in files + ["/etc/vmce", "/run/vmce",
                                "/etc/systemd/system/multi-user.target.wants/vmced.service"]
            if os.path.lexists(host.path(p))]
    tap.ok(not left, f"purge leaves nothing of the package (journal {what})", diag=left)
    state = sorted(os.listdir(host.path("/var/lib/vmce"))) if os.path.isdir(host.path("/var/lib/vmce")) else None
    if keep:
        tap.eq(state, ["journal.jsonl", "keep-journal"], "the journal the operator kept, and nothing else")
        tap.eq(len(memory_errors()), 1, "the kept journal still holds the error")
    else:
        tap.eq(state, None, "without keep-journal, /var/lib/vmce goes too")
    tap.ok(vm.agent.call("ping") is not None, "the guest runs on")


def case_make_install():
    """`make install` (the operator's guide's way without a package) puts the
    same files in place as the package: the same names, under its PREFIX"""
    dest = os.path.join(work, "destdir")
    r = subprocess.run(["make", "-C", paths.ROOT, "install", f"DESTDIR={dest}", f"BUILD={paths.build_dir()}"],
                       capture_output=True, text=True, timeout=300)
    installed = {os.path.basename(os.path.join(d, f)) for d, _, fs in os.walk(dest) for f in fs}
    listing = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True).stdout
    packaged = {os.path.basename(ln.split()[-1]).removesuffix(".gz") for ln in listing.splitlines()
                if not ln.startswith("d") and "/usr/share/doc/" not in ln}
    tap.ok(r.returncode == 0 and installed == packaged,
           "make install DESTDIR=...: the package's files, no more, no fewer",
           diag=f"{r.stderr[-500:]}\nmake install: {sorted(installed)}\npackage: {sorted(packaged)}")


def case_reinstall():
    t0 = time.monotonic()
    r = sh("dpkg", "-i", f"/root/{os.path.basename(deb)}", env=NONINTERACTIVE, check=False, timeout=300)
    seconds = time.monotonic() - t0
    tap.ok(r.returncode == 0 and wait_for(
        lambda: sh("systemctl", "is-active", "vmced", check=False).stdout.strip() == "active", 20),
        "installed again after purge: vmced active", diag=r.stdout + r.stderr)
    tap.diag(f"figure: dpkg -i of the package alone, its Depends in place, vmced started and "
             f"ready: {seconds:.2f} s")


try:
    t0 = time.monotonic()
    state = host.start()
    tap.ok(state in ("running", "degraded"), f"a clean Debian {DEBIAN} host boots under systemd-nspawn "
                                             f"({state}, {time.monotonic() - t0:.1f} s)",
           diag=sh("systemctl", "--failed", "--no-pager", check=False).stdout)
    tap.case("install", case_install)
    tap.case("hardening", case_hardening)
    tap.case("forward", case_forward)
    tap.case("journald", case_journald)
    tap.case("no libvirt", case_no_libvirt)
    tap.case("metrics", case_metrics_textfile)
    tap.case("upgrade", case_upgrade_keeps_conffile)
    tap.case("purge, journal kept", case_purge, True)
    tap.case("reinstall", case_reinstall)
    tap.case("purge", case_purge, False)
    if DEBIAN == "12":
        tap.case("make install", case_make_install)
except Exception as e:
    tap.ok(False, "the package test ran to its end", diag=f"{e}\n{host.log_tail()}")
finally:
    if vm is not None:
        vm.stop()
    t0 = time.monotonic()
    host.stop()
    tap.diag(f"the host halted in {time.monotonic() - t0:.1f} s")
    shutil.rmtree(SHARED, ignore_errors=True)
tap.done()
