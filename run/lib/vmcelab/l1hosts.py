"""The host lab's L1 hosts by name (run/hostlab --l1): which Debian the L1
host is, as its kernel and its own QEMU make it.

  debian-12  Debian 12's 6.1 kernel (the guest kernel package,
             build/guest-kernel: `make image`) and the QEMUs staged from
             this host, with this host's libraries; its own QEMU is
             debian-7.2 (the default, and what `make check` runs)
  debian-13  Debian 13's 6.12 kernel (the debian-6.12 guest kernel,
             build/kernels/debian-6.12: `make kernel-6.12`) and Debian 13's
             own QEMU 10.0, taken from the clean Debian 13 root `make
             host-root` builds (build/images/debian-13-host/root), staged
             with that root's loader and libraries beside this host's (L1's
             vmced, vmcectl and python3.11 are Debian 12's)

Each runs its Debian's rasdaemon as a host does: debian-12 this host's
(0.6.8, built without memory-failure support: it records no
memory_failure_event), debian-13 Debian 13's (0.8.3, which records them),
fetched with its own libraries by images/host/fetch-rasdaemon (`make
rasdaemon-13`: build/rasdaemon/debian-13).

In the Debian 13 L1 the name debian-10.0 is that root's QEMU, as on a
Debian 13 host (qemus.py: debian-10.0 is the host's own
/usr/bin/qemu-system-x86_64 there): L1 gets the root's /etc/os-release, so
qemus.py in L1 reads it as Debian 13 and finds debian-10.0 at /usr/bin,
where the lab links it. debian-7.2, Debian 12's QEMU at that same path, is
not a Debian 13 host's and is left out. The other QEMUs (vmce-10.0,
vmce-10.2, debian-11.1, a PATH) go into either L1 as they are.
"""
import os
import subprocess

from . import paths, qemus

DEFAULT = "debian-12"
# Debian 12's rasdaemon (run/install-deps), which the debian-12 L1 runs
HOST_RASDAEMON = "/usr/sbin/rasdaemon"
WRAPPER = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "..", "qemu-patches",
                       "own-libs-wrapper")


class L1Error(Exception):
    """One line: what is wrong with the L1 asked for"""


class L1:
    def __init__(self, name, debian, kernel_rel, how_kernel, own_qemu, root_rel=None, not_here=(),
                 rasdaemon_rel=None):
        self.name, self.debian, self.own_qemu = name, debian, own_qemu
        self.kernel_rel, self.how_kernel, self.root_rel = kernel_rel, how_kernel, root_rel
        # its Debian's rasdaemon fetched (images/host/fetch-rasdaemon), or
        # None: this host's
        self.rasdaemon_rel = rasdaemon_rel
        # the known QEMUs this L1 does not carry
        self.not_here = not_here

    @property
    def kernel_dir(self):
        return os.path.join(paths.build_dir(), *self.kernel_rel)

    @property
    def kernel(self):
        """The image L0's QEMU boots as L1 (vmlinux when fetch extracted one)"""
        vmlinux = os.path.join(self.kernel_dir, "vmlinux")
        return vmlinux if os.path.exists(vmlinux) else os.path.join(self.kernel_dir, "vmlinuz")

    @property
    def root(self):
        return os.path.join(paths.build_dir(), *self.root_rel) if self.root_rel else None

    @property
    def rasdaemon(self):
        """The rasdaemon L1 runs (mkhostimage --rasdaemon): this host's
        binary, or the script that runs a fetched one with its own libraries"""
        if not self.rasdaemon_rel:
            return HOST_RASDAEMON
        return os.path.join(paths.build_dir(), *self.rasdaemon_rel, "rasdaemon")

    @property
    def rasdaemon_records(self):
        """Whether its rasdaemon records memory failures: a fetched one is
        checked to (images/host/fetch-rasdaemon); this host's, Debian 12's,
        is built without them"""
        return bool(self.rasdaemon_rel)

    @property
    def os_release(self):
        """What L1's /etc/os-release is: its root's, or none (debian-12)"""
        return os.path.join(self.root, "etc", "os-release") if self.root else None

    def why_not(self, qemu_name):
        """Why QEMU @qemu_name (a known name) cannot go into this L1, or None"""
        if qemu_name in self.not_here:
            return (f"QEMU {qemu_name} is Debian 12's (/usr/bin/qemu-system-x86_64 there); the {self.name} "
                    f"L1 is a Debian {self.debian} host, whose /usr/bin/qemu-system-x86_64 is its own "
                    f"{self.own_qemu}")
        return None


KNOWN = {h.name: h for h in (
    L1("debian-12", "12", ("guest-kernel",), "make image", "debian-7.2"),
    L1("debian-13", "13", ("kernels", "debian-6.12"), "make kernel-6.12", "debian-10.0",
       root_rel=("images", "debian-13-host", "root"), not_here=("debian-7.2",),
       rasdaemon_rel=("rasdaemon", "debian-13")),
)}
NAMES = tuple(KNOWN)


def resolve(name=None, made=True):
    """The L1 named @name (None: the default), its kernel and root checked:
    L1Error, one line, when it is unknown or not made. made=False: only
    its name (what it carries is known without building it: run/hostlab
    --list answers in a clone that has not run `make image`)"""
    name = name or DEFAULT
    if name not in KNOWN:
        raise L1Error(f"unknown L1 '{name}' (known: {', '.join(NAMES)})")
    h = KNOWN[name]
    if not made:
        return h
    if not os.path.exists(os.path.join(h.kernel_dir, "release")) or not os.path.exists(h.kernel):
        raise L1Error(f"the {name} L1's kernel is missing at {h.kernel_dir}: run `{h.how_kernel}`")
    if h.root and not os.access(os.path.join(h.root, "usr", "bin", "qemu-system-x86_64"), os.X_OK):
        raise L1Error(f"the {name} L1's Debian {h.debian} root is missing at {h.root} (its QEMU "
                      f"usr/bin/qemu-system-x86_64): run `make host-root` (or `images/mkroot --cached "
                      f"{os.path.relpath(os.path.dirname(os.path.dirname(h.root)))} --suite trixie --flavour host`)")
    if h.rasdaemon_rel and not os.access(h.rasdaemon, os.X_OK):
        raise L1Error(f"the {name} L1's Debian {h.debian} rasdaemon is missing at {h.rasdaemon}: run "
                      f"`make rasdaemon-{h.debian}` (images/host/fetch-rasdaemon --out "
                      f"{os.path.relpath(os.path.dirname(h.rasdaemon))})")
    return h


def own_qemu_binary(h):
    """The binary vmce runs as the QEMU of L1 @h's root, here and in L1: a
    script (qemu-patches/own-libs-wrapper) in build/qemus/l1-NAME, next to
    a link to the root, that runs the root's QEMU through the root's own
    loader and libraries, as debian-11.1 runs (images/host/qemu-files.py
    stages it so); None for an L1 whose QEMUs are this host's"""
    if not h.root:
        return None
    where = os.path.join(paths.build_dir(), "qemus", f"l1-{h.name}")
    script, link = os.path.join(where, "qemu-system-x86_64"), os.path.join(where, "root")
    os.makedirs(where, exist_ok=True)
    if os.path.islink(link) and os.readlink(link) != h.root:
        os.unlink(link)
    if not os.path.lexists(link):
        os.symlink(h.root, link)
    if not os.path.exists(script):
        subprocess.run([WRAPPER, script + ".new", f"Debian {h.debian}'s own qemu-system-x86 ({h.root})"],
                       check=True)
        os.rename(script + ".new", script)
    return script


def resolve_qemu(h, name):
    """QEMU @name (a name or a PATH) as L1 @h carries it: its own QEMU from
    its root, a known QEMU it does not carry refused (qemus.QemuError), the
    rest as qemus.resolve() has them"""
    why = h.why_not(name)
    if why:
        raise qemus.QemuError(why)
    if name == h.own_qemu and h.root:
        return qemus.resolve_known_at(name, own_qemu_binary(h))
    return qemus.resolve(name)
