"""Shared pieces of the end-to-end tests: a real QEMU, the real guest
kernel, a real vmced with real ptrace. Nothing here is a fake."""
import ctypes
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "run", "lib"))

from vmcelab import paths, qemus  # noqa: E402
from vmcelab.daemon import Vmced  # noqa: E402
from vmcelab.procfs import pagemap_pfn, thread_states  # noqa: E402,F401 - the tests take them from here
from vmcelab.vm import Vm  # noqa: E402
from tap import Tap  # noqa: E402

__all__ = ["Tap", "Vm", "Vmced", "paths", "prerequisites", "prerequisites_arm64", "wait_for", "workdir",
           "PRIVATE_LIBVIRTD", "private_libvirtd", "Virsh",
           "start_victim", "victim_status", "wait_sigbus", "wait_kmsg", "thread_states",
           "gpa2hva", "qemu_reads"]


def prerequisites(tap):
    """Bails out (a failure, not a skip) when the build is incomplete; skips
    everything, saying why, when this host cannot run the tests at all."""
    if os.geteuid() != 0:
        tap.skip("end-to-end tests", "they need root (ptrace of QEMU, /run/vmce)")
        tap.done()
    for what, path in (("vmced", paths.vmced()), ("vmcectl", paths.vmcectl()),
                       ("guest kernel", paths.kernel()), ("guest image", paths.initrd())):
        if not os.path.exists(path):
            tap.bail(f"{what} missing at {path}: run `make check` from the top, "
                     "which builds it")
    # $VMCE_QEMU names the QEMU under test (qemus.py): by name or path
    try:
        q = qemus.resolve()
    except qemus.QemuError as e:
        tap.bail(f"{e} (make check builds every QEMU it tests)")
    tap.diag(f"QEMU {q.label}: {q.release}")


def prerequisites_arm64(tap):
    """As prerequisites(), for the Arm64 guest (run/lib/vmcelab/arm64.py):
    its kernel, initramfs, QEMU and firmware, which make check-all builds
    and installs (make image-arm64, run/install-deps)"""
    from vmcelab import arm64
    if os.geteuid() != 0:
        tap.skip("end-to-end tests", "they need root (/run/vmce, ptrace of QEMU)")
        tap.done()
    try:
        _, _, release = arm64.boot_files()
        qemu = arm64.qemu_binary()
        arm64.firmware()
    except arm64.Arm64Error as e:
        tap.bail(f"{e} (make check-all builds the Arm64 guest)")
    tap.diag(f"Arm64 guest: kernel {release}, {qemus.version_line(qemu)}")


PRIVATE_LIBVIRTD = os.path.join(paths.ROOT, "run", "libvirt", "private-libvirtd")


def private_libvirtd(tap, state_dir):
    """A libvirtd of the test's own (run/libvirt/private-libvirtd) in
    @state_dir: its URI; bails out when it does not start"""
    res = subprocess.run([PRIVATE_LIBVIRTD, "start", state_dir], capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        tap.bail(f"private libvirtd did not start: {res.stderr.strip()}")
    return res.stdout.strip()


class Virsh:
    """virsh against one URI: virsh("list") is its output, stripped"""

    def __init__(self, uri):
        self.uri = uri

    def __call__(self, *args, check=True):
        r = subprocess.run(["virsh", "-q", "-c", self.uri, *args], capture_output=True, text=True,
                           timeout=120)
        if check and r.returncode != 0:
            raise RuntimeError(f"virsh {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout.strip()


def workdir(name):
    base = os.path.join(paths.build_dir(), "e2e")
    os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix=f"{name}-", dir=base)


def wait_for(cond, timeout=30.0, interval=0.1):
    """Polls cond() until it returns something true; returns it (or None)."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)


def start_victim(agent, **opts):
    ret = agent.call("victim-start", **opts)
    ret["va_int"] = int(ret["va"], 16)
    ret["gpa_int"] = int(ret["gpa"], 16)
    return ret


def victim_status(agent, pid):
    return agent.call("victim-status", pid=pid)


def wait_sigbus(agent, pid, timeout=30.0):
    st = wait_for(lambda: (lambda s: s if s.get("sigbus") else None)(victim_status(agent, pid)),
                  timeout)
    return st["sigbus"] if st else None


def wait_kmsg(agent, pattern, since=0, timeout=30.0):
    """First guest kernel log line matching @pattern (a regex), or None."""
    rx = re.compile(pattern)

    def look():
        lines, _ = agent.kmsg(since)
        return next((line for line in lines if rx.search(line)), None)
    return wait_for(look, timeout, 0.2)


def gpa2hva(vm, gpa):
    """QEMU's own answer, through our own monitor: an independent check of
    vmced's translation."""
    with vm.qmp() as q:
        text = q.hmp(f"gpa2hva {gpa:#x}")
    m = re.search(r"is (0x[0-9a-f]+)", text)
    return int(m.group(1), 16) if m else None


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)


def qemu_reads(hva, pid):
    """Whether QEMU @pid can read its page at @hva: process_vm_readv, which
    honours the page's protection and fails on a poisoned page (unlike
    /proc/PID/mem, which a debugger uses to read through PROT_NONE)"""
    if hva is None:
        return False
    buf = ctypes.create_string_buffer(8)
    local = _Iovec(ctypes.cast(buf, ctypes.c_void_p), 8)
    remote = _Iovec(hva & ~0xfff, 8)
    return _libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) == 8
