"""Boot and drive a vmce test guest under QEMU.

Each VM gets a state directory (printed by run/vm) holding its QMP
sockets, its guest agent socket, its console log and QEMU's own log:

  qmp.sock          QMP for people and tests
  vmced.qmp         a second QMP monitor, left free for vmced
  agent.sock        the vmce guest agent (virtio-serial port org.vmce.agent.0)
  vmced-agent.sock  a second agent port (org.vmce.agent.1), for vmced/vmcectl
QEMU serves one client per socket, hence two of each.
  qga.sock          an image's qemu-guest-agent (org.qemu.guest_agent.0),
                    in place of vmce's agent ports (images.py, qga.py)
  OVMF_VARS.fd  an image's UEFI variable store (its own copy of OVMF's)
  AAVMF_VARS.fd an Arm64 guest's (its own copy of AAVMF's; arm64.py)
  console.log   the guest's serial console
  qemu.log      QEMU's stderr (its own MCE messages land here)
  qemu.pid, vm.json
"""
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time

from . import agent as agentmod
from . import arm64
from . import images as images_mod
from . import paths, procfs, qemus
from . import qga
from .outcome import GuestLog
from .qmp import Qmp

AGENT_PORTS = ("org.vmce.agent.0", "org.vmce.agent.1")
# The data disk's halves (images/mkdisk): (what, offset MiB, size MiB); each
# becomes a virtio-blk drive, the first /dev/vda, the next /dev/vdb.
DISK_LAYOUT = (("ext4", 0, 64), ("swap", 64, 64))


SOCKETS = ("qmp.sock", "vmced.qmp", "agent.sock", "vmced-agent.sock", "qga.sock")
# sockaddr_un.sun_path holds 108 bytes with its NUL
SUN_PATH_MAX = 107


def socket_dir(state_dir):
    """Where a VM's sockets go: its state directory, or, where that is too
    deep for a socket's path (a campaign's work directory under a long
    checkout path, a kernel named by its path), a short directory of its
    own, named for the state directory and linked from it as sockets/"""
    d = os.path.normpath(os.path.abspath(state_dir))
    if len(os.path.join(d, max(SOCKETS, key=len))) <= SUN_PATH_MAX:
        return d
    digest = hashlib.sha1(d.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"vmce-sockets-{digest}")


def parse_size(text):
    """'512M' / '5G' / '1024' (MiB) -> MiB"""
    text = str(text).strip().upper()
    if text.endswith("G"):
        return int(float(text[:-1]) * 1024)
    if text.endswith("M"):
        return int(float(text[:-1]))
    return int(text)


def _boot_files(kernel, initrd, disk, image):
    """(kernel, initrd, data disk) a guest boots with: an image's own, or
    the ones given, or the build's (required to exist); disk None: the
    build's data disk where there is one"""
    if image is not None:
        kernel, initrd, disk = image.image, image.initrd, False
    else:
        kernel = paths.require(kernel or paths.kernel(), "guest kernel", "run `make kernel`")
        initrd = paths.require(initrd or paths.initrd(), "guest image", "run `make image`")
    if disk is None:
        disk = paths.disk() if os.path.exists(paths.disk()) else None
    elif disk is True:
        disk = paths.require(paths.disk(), "guest data disk", "run `make image`")
    elif disk is not False:
        disk = paths.require(disk, "guest data disk", "build it with images/mkdisk")
    return kernel, initrd, disk


def _boot_args(kernel, initrd, append, shell, image, console="ttyS0"):
    """-kernel, -initrd and -append, or nothing for an image that boots by
    itself (its boot loader)"""
    cmdline = f"console={console} loglevel=4 " + ("vmce.shell=1 " if shell else "") + append
    if image is not None:
        cmdline = image.cmdline or ""
    if not kernel:
        return []
    return ["-kernel", kernel] + (["-initrd", initrd] if initrd else []) + \
        (["-append", cmdline.strip()] if cmdline.strip() else [])


def _memory_args(mem, mem_mib, cpus, numa, mem_file):
    """Guest RAM: in one shared file (mem_file), in a RAM block per NUMA
    node (numa, vCPUs on node 0), or QEMU's own"""
    if mem_file:
        return ["-m", f"{mem_mib}M",
                "-object", f"memory-backend-file,id=ram0,size={mem_mib}M,mem-path={mem_file},share=on",
                "-machine", "memory-backend=ram0"]
    args = ["-m", f"{mem_mib}M"]
    if numa:
        sizes = [parse_size(s) for s in numa]
        if sum(sizes) != mem_mib:
            raise ValueError(f"NUMA node sizes {numa} do not add up to {mem}")
        for i, size in enumerate(sizes):
            args += ["-object", f"memory-backend-ram,id=ram-node{i},size={size}M"]
            cpus_opt = f",cpus=0-{cpus - 1}" if i == 0 else ""
            args += ["-numa", f"node,nodeid={i},memdev=ram-node{i}{cpus_opt}"]
    return args


class Vm:
    def __init__(self, name, state_dir):
        self.name = name
        self.dir = state_dir
        self.sock_dir = socket_dir(state_dir)
        self.agent = None
        self.ready_seconds = None
        self.mem_file = None  # the RAM file when started with mem_file=
        self.image = None  # images.Image: driven through qemu-guest-agent

    # -- paths
    def path(self, leaf):
        return os.path.join(self.dir, leaf)

    def sock_path(self, leaf):
        return os.path.join(self.sock_dir, leaf)

    @property
    def qmp_path(self):
        return self.sock_path("qmp.sock")

    @property
    def vmced_qmp_path(self):
        return self.sock_path("vmced.qmp")

    @property
    def agent_path(self):
        return self.sock_path("agent.sock")

    @property
    def vmced_agent_path(self):
        return self.sock_path("vmced-agent.sock")

    @property
    def qga_path(self):
        return self.sock_path("qga.sock")

    @property
    def console_path(self):
        return self.path("console.log")

    @property
    def pid(self):
        try:
            with open(self.path("qemu.pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def alive(self):
        pid = self.pid
        if pid is None:
            return False
        if not procfs.alive(pid):
            return False
        try:
            # and it is this guest's QEMU: a qemu.pid left by a host that went
            # away (a fleet host's container, a machine rebooted) may name a
            # pid another process has now
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return f"guest={self.name},".encode() in f.read()
        except OSError:
            return False

    def console(self):
        try:
            with open(self.console_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def qemu_log(self):
        try:
            with open(self.path("qemu.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def exit_status(self):
        """How QEMU ended, None while it runs: {"how": in words ("killed by
        signal 6 (SIGABRT)", "exited with status 1"), "status": the wait
        status as subprocess gives it, "said": its last word in qemu.log
        (warnings left out), or None}"""
        if self.alive():
            return None
        rc = None
        proc = getattr(self, "_proc", None)
        if proc is not None:
            try:
                # gone from /proc a moment before its parent can reap it
                rc = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if rc is None:
            how = "exited"
        elif rc < 0:
            try:
                how = f"killed by signal {-rc} ({signal.Signals(-rc).name})"
            except ValueError:
                how = f"killed by signal {-rc}"
        else:
            how = f"exited with status {rc}"
        said = [line.strip() for line in self.qemu_log().splitlines()
                if line.strip() and "warning:" not in line]
        return {"how": how, "status": rc, "said": said[-1] if said else None}

    def qmp(self):
        return Qmp(self.qmp_path)

    # -- life cycle
    @classmethod
    def start(cls, name, mem="512M", cpus=1, accel="tcg", numa=None, qemu=None,
              kernel=None, initrd=None, append="", extra=(), state_dir=None,
              cpu_model=None, shell=False, mem_file=None, disk=None, incoming=None,
              incoming_uri=None, image=None, firmware="auto", disk_bus="virtio-blk", arch="amd64"):
        """Boots a guest and returns without waiting for it (see wait_ready).

        numa: memory sizes of NUMA nodes, each its own RAM block
        ("memory-backend-ram"), e.g. ["1G", "4G"]; vCPUs go to node 0.
        mem_file: back all guest RAM with this file, shared (as the host lab
        does, so that a poisoner can reach the pages).
        disk: the data disk (images/mkdisk): None attaches build/images/disk.img
        if it exists, True requires it, False attaches none, a path that image.
        Its ext4 and swap halves are attached with snapshot=on: the guest writes
        to a temporary overlay of its own, never to the shared image.
        incoming: a state saved by save_state() from a guest started with the
        same arguments: QEMU loads it instead of booting (see resume()).
        incoming_uri: QEMU's own -incoming (e.g. "defer", then QMP
        migrate-incoming): a migration's destination, started with the same
        arguments as its source.
        image: an images.Image, the whole guest: its disk (snapshot=on, the
        image itself never written), its own kernel or its own boot loader,
        and qemu-guest-agent's port instead of vmce's agent's; kernel,
        initrd, disk and append are not used. firmware (auto: the image's
        own, images.boot_record; uefi; bios) and disk_bus (virtio-blk,
        virtio-scsi): how the image boots and sees its disk
        arch: amd64, or arm64 (arm64.py: virt,ras=on under AAVMF, the Arm64
        guest's kernel and initramfs unless given, qemu-system-aarch64
        unless qemu names one; no image); cpu_model defaults to the arch's
        (Skylake-Client; arm64.CPU)
        """
        if arch not in arm64.ARCHES:
            raise ValueError(f"arch {arch}: not one of {', '.join(arm64.ARCHES)}")
        if arch == "arm64":
            if image is not None:
                raise ValueError("an operator's image is an x86 guest; the Arm64 guest boots vmce's own")
            if not kernel or not initrd:
                own_kernel, own_initrd, _ = arm64.boot_files()
                kernel, initrd = kernel or own_kernel, initrd or own_initrd
            qemu = arm64.qemu_binary(qemu)
        kernel, initrd, disk = _boot_files(kernel, initrd, disk, image)
        vm = cls._fresh(name, state_dir or os.path.join(paths.state_root(), name))
        mem_mib = parse_size(mem)
        args = [
            qemu or qemus.binary(),
            "-name", f"guest={name},debug-threads=on",
            *vm._machine_args(arch, accel, cpu_model),
            "-smp", str(cpus),
            "-nodefaults", "-no-user-config", "-display", "none",
            *_boot_args(kernel, initrd, append, shell, image, arm64.CONSOLE if arch == "arm64" else "ttyS0"),
            "-serial", f"file:{vm.console_path}",
            # -qmp, not -chardev and -mon: the same monitor, and QEMU 11.1
            # says -mon is deprecated on every start
            "-qmp", f"unix:{vm.qmp_path},server=on,wait=off",
            "-qmp", f"unix:{vm.vmced_qmp_path},server=on,wait=off",
            "-device", "virtio-serial-pci,id=vser0",
        ]
        args += vm._agent_args(image, firmware, disk_bus)
        args += _memory_args(mem, mem_mib, cpus, numa, mem_file)
        for _, offset, size in DISK_LAYOUT if disk else ():
            args += ["-drive", f"file={disk.replace(',', ',,')},if=virtio,format=raw,offset={offset << 20},"
                               f"size={size << 20},snapshot=on"]
        if incoming:
            args += ["-incoming", f"exec:cat {shlex.quote(incoming)}"]
        elif incoming_uri:
            args += ["-incoming", incoming_uri]
        args += list(extra)
        vm._launch(args, {"arch": arch, "accel": accel, "mem": mem, "cpus": cpus, "numa": numa,
                          "disk": disk or None, "image": image.to_dict() if image is not None else None,
                          "firmware": firmware if image is not None else None,
                          "disk_bus": disk_bus if image is not None else None})
        vm.mem_file = mem_file
        vm.image = image
        return vm

    @classmethod
    def _fresh(cls, name, state_dir):
        """The Vm of @state_dir, made ready for a new QEMU: no QEMU of it
        running, its socket directory linked, no socket, log or pid file
        of the last one left"""
        os.makedirs(state_dir, exist_ok=True)
        vm = cls(name, state_dir)
        if vm.alive():
            raise RuntimeError(f"vm {name} is already running (pid {vm.pid}, {state_dir})")
        if vm.sock_dir != os.path.normpath(os.path.abspath(state_dir)):
            os.makedirs(vm.sock_dir, mode=0o700, exist_ok=True)
            link = vm.path("sockets")
            if not os.path.islink(link):
                os.symlink(vm.sock_dir, link)
        for path in [vm.sock_path(leaf) for leaf in SOCKETS] + \
                [vm.path(leaf) for leaf in ("console.log", "qemu.log", "qemu.pid")]:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        return vm

    def _agent_args(self, image, firmware="auto", disk_bus="virtio-blk"):
        """The guest's agent ports: qemu-guest-agent's, with the image's
        disk and firmware, or vmce's agent's two (one for people and tests,
        one for vmced)"""
        if image is not None:
            fw, disk = image.boot(firmware, disk_bus)
            return ["-chardev", f"socket,id=qga0,path={self.qga_path},server=on,wait=off",
                    "-device", "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0",
                    *disk, *(self._uefi_args() if fw == "uefi" else [])]
        args = []
        for i, (port, sock) in enumerate(zip(AGENT_PORTS, (self.agent_path, self.vmced_agent_path))):
            args += ["-chardev", f"socket,id=agent{i},path={sock},server=on,wait=off",
                     "-device", f"virtserialport,chardev=agent{i},name={port}"]
        return args

    def _machine_args(self, arch, accel, cpu_model):
        """QEMU's machine, accelerator and CPU: a PC, or the Arm64 virt
        machine with its firmware and a variable store of this VM's own"""
        if arch != "arm64":
            return ["-machine", "pc", "-accel", accel, "-cpu", cpu_model or "Skylake-Client"]
        code, vars_ = arm64.firmware()
        store = self.path("AAVMF_VARS.fd")
        shutil.copyfile(vars_, store)
        return arm64.machine_args(accel, cpu_model, code, store)

    def _uefi_args(self):
        """OVMF's code, read-only and shared, and a variable store of this
        VM's own (the guest may write boot entries to it)"""
        code, vars_ = images_mod.ovmf()
        store = self.path("OVMF_VARS.fd")
        shutil.copyfile(vars_, store)
        return ["-drive", f"if=pflash,format=raw,unit=0,readonly=on,file={code.replace(',', ',,')}",
                "-drive", f"if=pflash,format=raw,unit=1,file={store.replace(',', ',,')}"]

    def _launch(self, args, record):
        """QEMU started with @args, its log qemu.log, its pid in qemu.pid,
        and its name, pid, @record and command line in vm.json"""
        with open(self.path("qemu.log"), "w") as log:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True)
        with open(self.path("qemu.pid"), "w") as f:
            f.write(f"{proc.pid}\n")
        with open(self.path("vm.json"), "w") as f:
            json.dump({"name": self.name, "pid": proc.pid, **record, "command": args}, f, indent=2)
        self._proc = proc

    def ram_file_offset(self, gpa):
        """Where in its RAM file (start(mem_file=...)) QEMU keeps @gpa:
        QEMU's own gpa2hva, and the file offset of that mapping in
        /proc/PID/maps. Returns (page offset, HVA)."""
        if not self.mem_file:
            raise RuntimeError(f"vm {self.name} has no RAM file (start it with mem_file=)")
        with self.qmp() as q:
            text = q.hmp(f"gpa2hva {gpa:#x}")
        m = re.search(r"is (0x[0-9a-f]+)", text)
        if not m:
            raise RuntimeError(f"gpa2hva {gpa:#x}: {text.strip()}")
        hva = int(m.group(1), 16)
        with open(f"/proc/{self.pid}/maps") as f:
            for line in f:
                fields = line.split()
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                if lo <= hva < hi and len(fields) >= 6 and fields[5] == self.mem_file:
                    return (int(fields[2], 16) + (hva - lo)) & ~0xfff, hva
        raise RuntimeError(f"HVA {hva:#x} is not in {self.mem_file}'s mapping")

    def save_state(self, path, timeout=60.0):
        """Saves the running guest's whole state (RAM, devices) to @path by
        migrating it to a file; the guest is paused for it and runs on
        after. Start a copy with start(..., incoming=path)."""
        tmp = f"{path}.tmp"
        with self.qmp() as q:
            q.execute("migrate", uri=f"exec:cat > {shlex.quote(tmp)}")
            deadline = time.monotonic() + timeout
            while True:
                status = q.execute("query-migrate").get("status")
                if status == "completed":
                    break
                if status in ("failed", "cancelled") or time.monotonic() > deadline:
                    raise RuntimeError(f"vm {self.name}: saving its state to {path}: migration "
                                       f"{status or 'did not finish'}")
                time.sleep(0.02)
            q.execute("cont")
        os.replace(tmp, path)

    def resume(self, timeout=60.0):
        """Lets a guest started with incoming= run once its state is loaded"""
        deadline = time.monotonic() + timeout
        while True:
            try:
                q = self.qmp()
                break
            except OSError:
                if not self.alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"vm {self.name}: QEMU did not come up to load its state: "
                                       f"{self.qemu_log().strip()[-500:]}") from None
                time.sleep(0.01)
        with q:
            while True:
                status = q.execute("query-status")["status"]
                if status != "inmigrate":
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"vm {self.name}: loading its state took over {timeout:.0f} s")
                time.sleep(0.01)
            if status != "running":
                q.execute("cont")

    @classmethod
    def load(cls, name, state_dir=None):
        state_dir = state_dir or os.path.join(paths.state_root(), name)
        if not os.path.isdir(state_dir):
            raise FileNotFoundError(f"no vm named {name} ({state_dir} does not exist)")
        return cls(name, state_dir)

    def command(self):
        with open(self.path("vm.json")) as f:
            return " ".join(shlex.quote(a) for a in json.load(f)["command"])

    def reset_mark(self):
        """Where the guest is now, for restarted()"""
        return len(self.console())

    def restarted(self, mark):
        """How it is known that the guest restarted since @mark, or None: a
        new boot's banner on its console"""
        boots = GuestLog(self.console()[mark:].splitlines()).boots
        return f"a new boot on its console, {boots[-1]}" if boots else None

    def why_silent(self, since=0):
        """(kind, why) for an agent that stopped answering: "dead" (QEMU
        exited, or the kernel panicked), "reset" (a new boot on the console
        after byte @since) or "hung" (QEMU runs, its guest said nothing)"""
        if not self.alive():
            ended = self.exit_status() or {}
            return "dead", f"QEMU {ended.get('how') or 'exited'}" + \
                (f": {ended['said']}" if ended.get("said") else "")
        log = GuestLog(self.console()[since:].splitlines())
        if log.panics:
            return "dead", f"the guest kernel panicked: {log.panics[0]}"
        if log.boots:
            return "reset", f"the guest restarted (a new boot, {log.boots[-1]}, on its console)"
        return "hung", "the guest is hung: QEMU runs and its console shows no panic"

    def wait_ready(self, timeout=90.0):
        """Waits for the guest agent; returns seconds from now."""
        stuck = None
        if self.image is not None:
            return self._wait_qga(timeout)
        if self.agent is not None:
            # QEMU serves one client per socket: the old one goes first
            self.agent.close()
            self.agent = None

        def booting():
            # a vCPU KVM cannot run stops QEMU's guest for good, QEMU lives on
            nonlocal stuck
            stuck = next((line for line in self.qemu_log().splitlines()
                          if line.startswith("KVM internal error")), None)
            return self.alive() and not stuck
        try:
            self.agent, self.ready_seconds = agentmod.wait_ready(self.agent_path, timeout,
                                                                 alive=booting)
        except agentmod.AgentError as e:
            tail = "\n".join(self.console().splitlines()[-15:])
            log = self.qemu_log().strip()
            why = f"QEMU stopped the guest: {stuck}" if stuck else str(e)
            raise agentmod.AgentError(f"vm {self.name}: {why}\n--- console (tail) ---\n{tail}"
                                      + (f"\n--- qemu.log ---\n{log}" if log else "")) from None
        return self.ready_seconds

    def _wait_qga(self, timeout):
        """An image's qemu-guest-agent, with vmce's tools pushed in and its
        agent listening (qga.QgaAgent)"""
        console_from = len(self.console())
        if self.agent is not None:  # (as wait_ready)
            self.agent.close()
            self.agent = None
        agent = qga.QgaAgent(qga.QgaSocket(self.qga_path), why_silent=lambda: self.why_silent(console_from))
        try:
            self.ready_seconds = agent.wait_ready(timeout, alive=self.alive)
        except agentmod.AgentError as e:
            agent.close()
            tail = "\n".join(self.console().splitlines()[-15:])
            raise qga.QgaError(f"vm {self.name}: {e}\n--- console (tail) ---\n{tail}",
                               getattr(e, "kind", "failed")) from None
        self.agent = agent
        return self.ready_seconds

    def boot_id(self):
        """This boot's id, as the guest's agent says it"""
        return self.agent.call("ping", timeout=5)["boot_id"]

    def reboot(self, boot=None, timeout=5):
        """The guest reboots itself (the agent's `reboot`), if it is still in
        boot @boot (by default the one that answers now); returns that boot
        id, for wait_rebooted. Raises agent.AgentError with class
        BootChanged if the guest restarted meanwhile: QEMU hands a request
        the old boot never read to the next boot's agent, and only that
        boot's reboot is asked for"""
        boot = boot or self.boot_id()
        self.agent.call("reboot", boot=boot, timeout=timeout)
        return boot

    def wait_rebooted(self, old_boot, timeout=90.0):
        """Waits for the guest's agent after a reboot of boot @old_boot
        (Vm.reboot()'s): the old boot's agent may answer for a moment still,
        so the new boot is the one with another boot id"""
        deadline = time.monotonic() + timeout
        while True:
            if self.agent is not None:
                self.agent.close()
                self.agent = None
            # a ping sent while the old guest goes down may be taken by it
            # and never answered: ask again, on a new connection, until the
            # new one answers (what QEMU holds for a closed port goes with
            # the connection)
            try:
                self.wait_ready(max(1.0, min(10.0, deadline - time.monotonic())))
                pong = self.agent.call("ping", timeout=5)
            # OSError: the old guest's agent port reset as it went down
            except (agentmod.AgentError, OSError):
                if not self.alive():
                    raise agentmod.AgentError(f"vm {self.name}: QEMU exited during the reboot") from None
                if time.monotonic() > deadline:
                    raise
                continue
            if pong["boot_id"] != old_boot:
                return self.ready_seconds
            if time.monotonic() > deadline:
                raise agentmod.AgentError(f"vm {self.name}: the guest did not reboot "
                                          f"(up {pong['uptime_ms'] / 1000:.0f} s, the same boot)")
            time.sleep(0.2)

    def stop(self, timeout=10.0):
        if self.agent is not None:
            self.agent.close()
            self.agent = None
        pid = self.pid
        if pid is None or not self.alive():
            self._reap()
            return
        try:
            with Qmp(self.qmp_path, timeout=5.0, connect_timeout=2.0) as q:
                q.execute("quit")
        except Exception:
            pass
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.alive():
            os.kill(pid, signal.SIGKILL)
            while self.alive():
                time.sleep(0.05)
        self._reap()

    def _reap(self):
        # a socket directory of its own goes with the VM
        if self.sock_dir != os.path.normpath(os.path.abspath(self.dir)):
            for leaf in SOCKETS:
                try:
                    os.unlink(self.sock_path(leaf))
                except OSError:
                    pass
            try:
                os.rmdir(self.sock_dir)
            except OSError:
                pass
        proc = getattr(self, "_proc", None)
        if proc is not None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
