#!/usr/bin/env python3
"""vmced.conf's [attach] on a host without libvirt, laid out like Proxmox
VE's (not Proxmox itself): one QEMU started the way qemu-server starts it
(-name, its management monitor on /var/run/qemu-server/VMID.qmp, -pidfile
/var/run/qemu-server/VMID.pid, -daemonize; the tree under a temporary
directory) with the extra `-qmp unix:/run/vmce/qmp/VMID.sock,...` a VM's
`args:` adds. The test holds the management socket, as qemu-server would,
while vmced attaches through its own. One guest and one vmced config serve
every case, in order: the QEMU attached as its socket appears, a simulated
error forwarded into a guest process, the management client still
answered; bad input (a socket that is not QMP, a file, a pattern that
matches nothing); vmced restarted, attached again by itself, and told to
watch the held management socket too: 'held by another client' (and by
`vmcectl attach --qmp` with no pid), and not taken once its holder leaves.
"""
import os
import socket
import subprocess
import threading
import time

from common import (Tap, Vm, Vmced, paths, prerequisites, start_victim, thread_states, victim_status,
                    wait_for, wait_sigbus, workdir)
from vmcelab import qemus
from vmcelab.qmp import Qmp
from vmcelab.vm import _boot_args

BUS_MCEERR_AO = 5
VMID = "100"
NAME = "e2e-attach"

tap = Tap()
prerequisites(tap)
work = workdir("attach")
root = os.path.join(work, "root")  # stands for / on the Proxmox host
qemu_server = os.path.join(root, "var", "run", "qemu-server")
vmce_qmp = os.path.join(root, "run", "vmce", "qmp")
bad_dir = os.path.join(root, "bad")
for d in (qemu_server, bad_dir):
    os.makedirs(d, exist_ok=True)
mgmt_path = os.path.join(qemu_server, f"{VMID}.qmp")
vmce_path = os.path.join(vmce_qmp, f"{VMID}.sock")
pidfile = os.path.join(qemu_server, f"{VMID}.pid")


class PveVm(Vm):
    """A guest whose QEMU is qemu-server's kind: daemonized, its pid in
    qemu-server's pidfile"""

    @property
    def pid(self):
        try:
            with open(pidfile) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def alive(self):
        pid = self.pid
        return pid is not None and os.path.exists(f"/proc/{pid}")

    @property
    def qmp_path(self):
        # stop()'s quit goes where qemu-server's would
        return mgmt_path


def start_qemu():
    """QEMU as qemu-server starts it (less its -id, a Proxmox patch to
    QEMU), the VM's args: line last; returns once -daemonize has forked"""
    vm = PveVm(NAME, os.path.join(work, "vm"))
    os.makedirs(vm.dir, exist_ok=True)
    args = [qemus.binary(), "-name", f"{NAME},debug-threads=on",
            "-chardev", f"socket,id=qmp,path={mgmt_path},server=on,wait=off",
            "-mon", "chardev=qmp,mode=control",
            "-pidfile", pidfile, "-daemonize",
            "-nodefaults", "-machine", "pc", "-accel", "tcg", "-cpu", "Skylake-Client",
            "-smp", "1", "-m", "512", "-display", "none",
            *_boot_args(paths.kernel(), paths.initrd(), "", False, None),
            "-serial", f"file:{vm.console_path}",
            "-device", "virtio-serial-pci,id=vser0", *vm._agent_args(None),
            # the VM's args: line
            "-qmp", f"unix:{vmce_path},server=on,wait=off"]
    with open(vm.path("qemu.log"), "w") as log:
        subprocess.run(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, check=True, timeout=60)
    return vm


def not_qmp_server(path):
    """A socket that answers, but not as QEMU's monitor"""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
            conn.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv


holder = None
daemon = None
vm = None
bad_srv = not_qmp_server(os.path.join(bad_dir, "sshd.sock"))
with open(os.path.join(bad_dir, "notes.sock"), "w") as f:
    f.write("a file, not a socket\n")


def config(*patterns):
    path = os.path.join(work, f"vmced-{len(patterns)}.conf")
    with open(path, "w") as f:
        f.write(f"[attach]\nsockets = {'; '.join(patterns)}\ngreeting-ms = 500\n")
    return path


# what a Proxmox host's vmced.conf says, and bad input besides
conf = config(f"{vmce_qmp}/*.sock", f"{bad_dir}/*.sock", f"{root}/none/*.sock")
# the same, and qemu-server's own sockets, which a host must not give it
conf_mgmt = config(f"{vmce_qmp}/*.sock", f"{bad_dir}/*.sock", f"{root}/none/*.sock", f"{qemu_server}/*.qmp")


def attach_failed():
    return {r.get("reason", "").split(":")[0]: r for r in daemon.journal_records()
            if r["type"] == "attach-failed"}


HOOK = os.path.join(paths.ROOT, "host-daemon", "data", "proxmox", "vmce-hook.sh")


def hook(phase):
    """The hookscript the package ships, as Proxmox VE calls it"""
    return subprocess.run([HOOK, VMID, phase], env={**os.environ, "VMCE_QMP_DIR": vmce_qmp},
                          capture_output=True, text=True, timeout=10)


def case_attached_as_it_appears():
    global holder, daemon, vm
    res = hook("pre-start")
    tap.ok(res.returncode == 0 and os.path.isdir(vmce_qmp) and (os.stat(vmce_qmp).st_mode & 0o777) == 0o700,
           "the hookscript's pre-start made the socket directory, 0700", diag=res.stderr)
    daemon = Vmced(work, ["--config", conf])
    vm = start_qemu()
    # qemu-server's own client, on the management socket
    holder = Qmp(mgmt_path, timeout=10)
    info = daemon.wait_attached(NAME, timeout=20)
    tap.eq(info["qmp"], vmce_path, "a new QEMU attached through its own socket as it appeared")
    tap.eq(info["pid"], vm.pid, "the QEMU found from the socket (SO_PEERCRED) is the pidfile's")
    tap.ok(holder.execute("query-status")["status"] in ("running", "paused"),
           "the management client is answered while vmced is attached")


def case_forwarded():
    vm.wait_ready(60)
    agent = vm.agent
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)
    victim = start_victim(agent, mode="idle")
    ev = daemon.poison(NAME, "--gpa", victim["gpa"], "--kind", "ao")
    tap.eq(ev["result"], "injected", "a simulated error forwarded through the [attach] socket")
    sig = wait_sigbus(agent, victim["pid"])
    tap.ok(sig is not None and sig["code"] == BUS_MCEERR_AO,
           "the guest process got its SIGBUS (BUS_MCEERR_AO)", diag=victim_status(agent, victim["pid"]))
    tap.eq(holder.execute("query-name").get("name"), NAME,
           "the management client's query answered after the error")


def case_bad_input():
    log = daemon.log_text()
    failed = attach_failed()
    tap.ok("not QEMU's monitor" in failed.get(os.path.join(bad_dir, "sshd.sock"), {}).get("reason", ""),
           "a socket that answers something else: 'not QEMU's monitor'", diag=log)
    tap.ok("not a socket" in failed.get(os.path.join(bad_dir, "notes.sock"), {}).get("reason", ""),
           "a file: 'not a socket'", diag=log)
    tap.ok(f"nothing matches {root}/none/*.sock" in log, "a pattern that matches nothing: said", diag=log)
    tap.ok(daemon.alive() and daemon.ctl("status").returncode == 0, "vmced serves on")


def case_restart():
    global daemon
    tap.eq(daemon.stop(), 0, "vmced stops cleanly (it lets the QEMU go)")
    # its next start also watches qemu-server's socket, which the test holds
    daemon = Vmced(work, ["--config", conf_mgmt])
    info = daemon.wait_attached(NAME, timeout=20)
    tap.eq(info["qmp"], vmce_path, "vmced restarted: attached again, no command given")
    tap.ok("rebuilt" in str(info.get("poisoned_from")), "its poisoned page restored from the journal",
           diag=info.get("poisoned_from"))
    held = wait_for(lambda: attach_failed().get(mgmt_path), 5)
    tap.ok(held is not None and "held by another client" in held["reason"],
           "the held management socket: 'held by another client'", diag=daemon.log_text())
    tap.eq(sum(1 for line in daemon.log_text().splitlines() if "held by another client" in line), 1,
           "said once, in one line")
    # asked by hand, with no pid: probed the same way, refused in one line
    res = daemon.ctl("attach", "--qmp", mgmt_path, check=False)
    tap.ok(res.returncode != 0 and "held by another client" in res.stderr and len(res.stderr.splitlines()) == 1,
           "`vmcectl attach --qmp` on the held socket: one line, 'held by another client'", diag=res.stderr)
    tap.eq(holder.execute("query-status")["status"], "running", "the management client is still answered")


def case_not_taken_after_holder_leaves():
    global holder
    holder.close()
    time.sleep(1.0)
    # a client of qemu-server's gets the monitor: vmced's probe left no
    # connection in QEMU's queue to take it
    try:
        holder = Qmp(mgmt_path, timeout=3, connect_timeout=3)
        answered = holder.execute("query-status")["status"]
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        answered = f"{type(e).__name__}: {e}"
    tap.ok(answered in ("running", "paused"), "the holder gone, the management socket is free for its next client",
           diag=answered)
    st = daemon.ctl_json("status")
    tap.eq([v["qmp"] for v in st["vms"]], [vmce_path], "vmced watches the QEMU once, through its own socket")
    tap.ok("t" not in thread_states(vm.pid).values() and vm.alive() and daemon.alive(),
           "after the bad input: no QEMU thread left stopped, QEMU and vmced up", diag=thread_states(vm.pid))


t0 = time.monotonic()
try:
    for what, case in (("attached as it appears", case_attached_as_it_appears), ("error forwarded", case_forwarded),
                       ("bad input", case_bad_input), ("restart", case_restart),
                       ("held socket not taken", case_not_taken_after_holder_leaves)):
        started = time.monotonic()
        tap.case(what, case)
        tap.diag(f"{what}: {time.monotonic() - started:.1f} s")
finally:
    for closing in (holder, bad_srv):
        if closing is not None:
            closing.close()
    if daemon is not None:
        daemon.stop()
    if vm is not None:
        vm.stop()
tap.diag(f"{time.monotonic() - t0:.1f} s")
tap.done()
