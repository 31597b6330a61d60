"""Guest kernels by name: the six vmce knows, or an operator's own.

  debian-6.1   Debian 12's kernel image, downloaded (guest-kernel/fetch)
  vmce-6.1     the same source with guest-kernel/patches/6.1/, built here
               (guest-kernel/build)
  debian-6.12  Debian 13's kernel image, downloaded
               (guest-kernel/fetch --suite trixie)
  vmce-6.12    Debian 13's source with guest-kernel/patches/6.12/, built here
               (guest-kernel/build --base 6.12)
  debian-7.3   trixie-backports' kernel image (Linux 7.3, split into the
               linux-image, -binary, -modules and -base packages), downloaded
               (guest-kernel/fetch --suite trixie-backports)
  vmce-7.3     the same 7.3 source (linux-source-7.3) with
               guest-kernel/patches/7.3/, built here (guest-kernel/build
               --base 7.3; make kernel-src-7.3, not part of make kernels)
  PATH         a kernel dir (guest-kernel/README.md), or a bzImage/vmlinux
               file with its config beside it (config-RELEASE) and its modules
               in ../lib/modules/RELEASE (or ../usr/lib/..., or this host's
               /lib/modules/RELEASE): an initramfs is made for it on first use

Each kernel boots with its own initramfs (its own modules); the expectations
a kernel is judged by are named by `table` (expect.py). A kernel vmce does
not know is judged by the table of the nearest known version, and says so.

Kernel and QEMU names share a spelling (debian-7.2 is Debian 12's QEMU, not
a kernel 7.2): a QEMU's name given for a kernel is refused as such, and
qemus.resolve refuses a kernel's name given for a QEMU (axes.py).
"""
import hashlib
import shutil
import os
import re
import struct
import subprocess

from . import axes, paths, qemus
from .expect import NO_HANDLER

DEFAULT = "debian-6.1"


class KernelError(Exception):
    """One line: what is wrong with the kernel asked for"""


class Known:
    def __init__(self, name, subdir, initrd, how, version):
        self.name, self.subdir, self.initrd, self.how, self.version = name, subdir, initrd, how, version


KNOWN = {k.name: k for k in (
    Known("debian-6.1", "guest-kernel", "guest.cpio.gz", "make image", (6, 1)),
    Known("vmce-6.1", os.path.join("kernels", "vmce-6.1"), "guest-vmce-6.1.cpio.gz",
          "make kernel-src", (6, 1)),
    Known("debian-6.12", os.path.join("kernels", "debian-6.12"), "guest-debian-6.12.cpio.gz",
          "make kernel-6.12", (6, 12)),
    Known("vmce-6.12", os.path.join("kernels", "vmce-6.12"), "guest-vmce-6.12.cpio.gz",
          "make kernel-src-6.12", (6, 12)),
    Known("debian-7.3", os.path.join("kernels", "debian-7.3"), "guest-debian-7.3.cpio.gz",
          "make kernel-7.3", (7, 3)),
    Known("vmce-7.3", os.path.join("kernels", "vmce-7.3"), "guest-vmce-7.3.cpio.gz",
          "make kernel-src-7.3", (7, 3)),
)}
NAMES = tuple(KNOWN)
# qemus.py cannot import this module (it is a layer below): it checks a
# name against axes.KERNELS, which must be these
assert NAMES == axes.KERNELS, "axes.KERNELS must list kernels.KNOWN"


class Kernel:
    """A resolved guest kernel: what to boot, with which initramfs, judged
    by which expectations"""

    def __init__(self, name, image, initrd, release, table, nearest=None, kdir=None):
        self.name, self.image, self.initrd, self.release = name, image, initrd, release
        # table: the expectations (expect.py TABLES); nearest: set when the
        # kernel is not one vmce knows, and table is only the closest
        self.table, self.nearest, self.kdir = table, nearest, kdir
        self.missing = None  # the handler's options it lacks (table NO_HANDLER)

    @property
    def label(self):
        return self.name if not self.nearest else f"{self.name} (as {self.table})"

    def to_dict(self):
        return dict(name=self.name, release=self.release, table=self.table,
                    nearest=self.nearest, image=self.image, handler_missing=self.missing)


def _boot_image(kdir):
    """The uncompressed vmlinux boots through PVH, seconds faster under TCG"""
    vmlinux = os.path.join(kdir, "vmlinux")
    return vmlinux if os.path.exists(vmlinux) else os.path.join(kdir, "vmlinuz")


def _read(path):
    with open(path) as f:
        return f.read().strip()


def is_spelled_as_path(value):
    return "/" in value or value.startswith(".")


# the host lab's L1 has no build tree: L0 stages the kernels a campaign
# asks for, resolved there, and lists them here (run/hostlab stage_kernels())
STAGED_ENV = "VMCE_KERNELS_STAGED"


def staged_entry(k, image, initrd):
    """What L1 needs of L0's resolved Kernel @k to boot it from @image and
    @initrd, and judge it as L0 would"""
    return dict(image=image, initrd=initrd, release=k.release, table=k.table, nearest=k.nearest,
                handler_missing=k.missing)


def _staged(value):
    entry = paths.staged(STAGED_ENV, value)
    if entry is None:
        return None
    k = Kernel(value, entry["image"], entry["initrd"], entry["release"], entry["table"],
               nearest=entry.get("nearest"))
    k.missing = entry.get("handler_missing")
    return k


def resolve(value, prepare=False):
    """The Kernel that @value names. prepare: make what a PATH kernel still
    needs (its kernel dir and initramfs); otherwise only check it exists"""
    value = (value or DEFAULT).strip()
    staged = _staged(value)
    if staged is not None:
        return staged
    if value in KNOWN:
        return _known(KNOWN[value])
    check_name(value)
    return _custom(os.path.abspath(value), prepare)


def check_name(value):
    """KernelError unless @value is a known kernel's name or spelled as a
    PATH; one that names a QEMU is said to be one"""
    if value in KNOWN or is_spelled_as_path(value):
        return
    known = f"{', '.join(NAMES)}, or a PATH to a kernel dir or a bzImage/vmlinux"
    if value in qemus.KNOWN:
        raise KernelError(f"{value} is a QEMU, not a guest kernel (known kernels: {known})")
    if value == axes.ARM64_KERNEL:
        raise KernelError(f"{value} is the Arm64 guest's kernel: an amd64 guest runs {known}; "
                          "say arch = arm64 in its [guest]")
    raise KernelError(f"unknown kernel '{value}' (known: {known})")


def _known(k):
    kdir = os.path.join(paths.build_dir(), k.subdir)
    image = _boot_image(kdir)
    # VMCE_KERNEL/VMCE_INITRD override the default kernel only (tests do)
    if k.name == DEFAULT:
        image = paths.kernel()
    initrd = paths.initrd() if k.name == DEFAULT else os.path.join(paths.build_dir(), "images",
                                                                   k.initrd)
    for what, path in (("kernel", image), ("image", initrd)):
        if not os.path.exists(path):
            raise KernelError(f"the {k.name} guest {what} is missing at {path}: run `{k.how}`")
    release = "?"
    try:
        release = _read(os.path.join(kdir, "release"))
    except OSError:
        pass
    return Kernel(k.name, image, initrd, release, k.name, kdir=kdir)


def image_release(path):
    """uname -r of a kernel image file: a bzImage's header points at its
    version string; a vmlinux has it in its banner. None: not a kernel"""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
            if len(head) > 0x210 and head[0x202:0x206] == b"HdrS":
                offset = struct.unpack_from("<H", head, 0x20E)[0] + 0x200
                f.seek(offset)
                text = f.read(256).split(b"\0")[0].decode("ascii", "replace")
                return text.split()[0] if text else None
            if head[:4] == b"\x7fELF":
                f.seek(0)
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    m = re.search(rb"Linux version (\S+) \(", chunk)
                    if m:
                        return m.group(1).decode("ascii", "replace")
    except OSError as e:
        raise KernelError(f"{path}: cannot read it: {e.strerror}") from None
    return None


def _version_of(release):
    m = re.match(r"(\d+)\.(\d+)", release or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def nearest_table(release):
    """The known kernel whose version is closest to @release's (Debian's
    own build of it, not vmce's patched one)"""
    version = _version_of(release)
    debian = [k for k in KNOWN.values() if k.name.startswith("debian-")]
    if version is None:
        return DEFAULT
    return min(debian, key=lambda k: (abs((k.version[0] - version[0]) * 100 +
                                          k.version[1] - version[1]), k.version)).name


def _custom(path, prepare):
    if os.path.isdir(path):
        kdir = path
        if not os.path.exists(os.path.join(kdir, "release")):
            raise KernelError(f"{path} is not a kernel dir (no release file; see guest-kernel/README.md)")
        release = _read(os.path.join(kdir, "release"))
        image = _boot_image(kdir)
        if image_release(image) is None:
            raise KernelError(f"{image} is not a kernel (neither a bzImage nor an ELF vmlinux)")
    elif os.path.isfile(path):
        release = image_release(path)
        if release is None:
            raise KernelError(f"{path} is not a kernel (neither a bzImage nor an ELF vmlinux)")
        kdir = None
    else:
        raise KernelError(f"{path}: no such kernel file or kernel dir")
    digest = hashlib.sha256(f"{path}\0{os.stat(path).st_mtime_ns}".encode()).hexdigest()[:10]
    made = os.path.join(paths.build_dir(), "kernels", f"custom-{digest}")
    initrd = os.path.join(made, "guest.cpio.gz")
    if prepare and not os.path.exists(initrd):
        _prepare_custom(path, kdir, release, made)
    if kdir is None:
        kdir = os.path.join(made, "kdir")
    # its config: in its kernel dir, or (not prepared yet) beside the file
    config = next((c for c in [os.path.join(kdir, "config")] + _configs_beside(path, release)
                   if os.path.isfile(c)), None)
    missing = handler_missing(_read(config)) if config else []
    table, nearest = table_for(release, missing)
    k = Kernel(path, _boot_image(kdir) if os.path.isdir(kdir) else path, initrd, release, table,
               nearest=nearest, kdir=kdir)
    k.missing = missing or None
    return k


def handler_missing(config):
    """The HANDLER options a kernel config's text does not build in"""
    return [c for c in HANDLER if not re.search(rf"^{c}=y$", config, re.M)]


# Debian's own builds of the kernels vmce has tables for, by their release names
DEBIAN_BUILDS = {"debian-6.1": r"6\.1\.0-\d+-amd64", "debian-6.12": r"6\.12\.\d+\+deb13(u\d+)?-amd64",
                 # trixie-backports' build is named +deb13 too (7.3.4+deb13-amd64)
                 "debian-7.3": r"7\.3\.\d+\+deb13(u\d+)?-amd64"}


def table_for(release, missing, debian_exact=False):
    """(table, nearest): the expectations a kernel of @release is judged by.
    Without the handler (@missing: handler_missing()) "no-handler"; else the
    nearest known kernel's, nearest set to say so, unless @debian_exact and
    the release is Debian's own build of that kernel (an image's: Debian's
    package, unchanged)"""
    if missing:
        return NO_HANDLER, None
    table = nearest_table(release)
    exact = debian_exact and re.fullmatch(DEBIAN_BUILDS.get(table, "$^"), release or "") is not None
    return table, None if exact else table


def _configs_beside(path, release):
    """Where Debian and `make install` put a kernel file's config"""
    here = os.path.dirname(path)
    return [os.path.join(here, f"config-{release}"), os.path.join(here, "config"),
            os.path.join(here, ".config")]


def _prepare_custom(path, kdir, release, made):
    """A kernel dir for an image file (its config and modules looked up where
    Debian and `make install` put them), checked, and its initramfs"""
    os.makedirs(made, exist_ok=True)
    if kdir is None:
        kdir = os.path.join(made, "kdir")
        os.makedirs(kdir, exist_ok=True)
        here = os.path.dirname(path)
        moddirs = [os.path.join(here, "..", "lib", "modules", release),
                   os.path.join(here, "..", "usr", "lib", "modules", release),
                   os.path.join(here, "modules", release), f"/lib/modules/{release}"]
        moddir = next((m for m in moddirs if os.path.isdir(m)), None)
        configs = _configs_beside(path, release)
        if moddir:
            configs.append(os.path.join(moddir, "build", ".config"))
        config = next((c for c in configs if os.path.isfile(c)), None)
        if config is None:
            raise KernelError(f"{path}: no config found for {release} (looked for "
                              f"{', '.join(configs)}): vmce checks it has MEMORY_FAILURE")
        _link(kdir, "vmlinuz", path)
        _link(kdir, "config", config)
        if moddir:
            if not os.path.exists(os.path.join(moddir, "modules.dep")):
                # a package unpacked with dpkg -x has none (depmod runs in its
                # postinst): made here as guest-kernel/fetch makes Debian's,
                # with busybox's depmod, in a copy of vmce's own
                moddir = _depmod_copy(path, moddir, release, made)
            _link(kdir, "modules", os.path.realpath(moddir))
        else:
            os.makedirs(os.path.join(kdir, "modules"), exist_ok=True)
            open(os.path.join(kdir, "modules", "modules.dep"), "a").close()
        with open(os.path.join(kdir, "release"), "w") as f:
            f.write(release + "\n")
    missing = config_missing(os.path.join(kdir, "config"))
    # only a kernel that cannot run vmce's agent is refused; one without the
    # handler is run, and judged by what a guest without one does
    cannot = [m for m in missing if m in AGENT_NEEDS]
    if cannot:
        raise KernelError(f"{path} cannot be a vmce guest kernel: it lacks {', '.join(cannot)}, "
                          "which vmce's guest agent needs (its virtio-serial port)")
    out = os.path.join(made, "guest.cpio.gz")
    tools = os.path.join(paths.build_dir(), "meson", "images", "guest-tools")
    made_rd = subprocess.run([os.path.join(paths.ROOT, "images", "mkinitramfs"), "--kernel-dir", kdir,
                              "--tools", tools, "--out", out + ".tmp"], capture_output=True, text=True)
    if made_rd.returncode != 0:
        raise KernelError(f"{path}: no initramfs: {made_rd.stderr.strip().splitlines()[-1]}")
    os.rename(out + ".tmp", out)


# what vmce's guest agent cannot do without (guest-kernel/vmce.config)
AGENT_NEEDS = ("CONFIG_VIRTIO_CONSOLE", "CONFIG_VIRTIO_PCI")
# without these the guest has no HWPOISON handler at all: it never sets
# CR4.MCE, and a machine check is a triple fault (expect.NO_HANDLER)
HANDLER = ("CONFIG_MEMORY_FAILURE", "CONFIG_X86_MCE")


def config_missing(config):
    """The options of guest-kernel/vmce.config that @config lacks, as
    guest-kernel/check-config names them"""
    check = subprocess.run([os.path.join(paths.ROOT, "guest-kernel", "check-config"), config],
                           capture_output=True, text=True)
    if check.returncode == 0:
        return []
    missing = [line.split(": ", 2)[1].split()[0].split("=")[0] for line in check.stderr.splitlines()
               if line.startswith("check-config: CONFIG_")]
    if not missing:
        raise KernelError(f"{config}: {check.stderr.strip()}")
    return missing


def _depmod_copy(path, moddir, release, made):
    """A copy of the kernel's modules with the modules.dep busybox's depmod
    writes, in vmce's cache: the operator's tree stays as it is"""
    root = os.path.join(made, "root")
    copy = os.path.join(root, "lib", "modules", release)
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(moddir, copy, symlinks=True,
                    ignore=lambda d, names: [n for n in names if n in ("build", "source")])
    if shutil.which("busybox") is None:
        raise KernelError(f"{path}: its modules have no modules.dep, and busybox (busybox-static, whose "
                          "depmod writes it) is not installed")
    res = subprocess.run(["busybox", "depmod", "-b", root, release], capture_output=True, text=True)
    if res.returncode != 0 or not os.path.exists(os.path.join(copy, "modules.dep")):
        raise KernelError(f"{path}: busybox depmod -b {root} {release} failed: "
                          f"{(res.stderr.strip() or 'no modules.dep').splitlines()[-1]}")
    return copy


def _link(kdir, leaf, target):
    link = os.path.join(kdir, leaf)
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(os.path.abspath(target), link)
