"""The Arm64 guest (issue 43): what differs from the x86 one.

An Arm64 host tells a guest of a memory error firmware-first: QEMU's virt
machine with ras=on builds ACPI's HEST with one GHESv2 error source
(notified by a synchronous external abort), and the guest reads a CPER
record from it. ACPI reaches the guest only through UEFI firmware (Debian's
AAVMF, from qemu-efi-aarch64): with -kernel alone QEMU hands the guest a
device tree and no HEST. So every Arm64 guest boots AAVMF, which loads the
kernel QEMU gives it (-kernel, -initrd through fw_cfg), installs QEMU's
ACPI tables and hides the device tree; the kernel then runs on ACPI.

  kernel     Debian 12's linux-image-arm64, unpacked by guest-kernel/fetch
             --arch arm64 into build/kernels/debian-6.1-arm64 (Image)
  initramfs  build/images/guest-arm64.cpio.gz: the x86 guest's init with the
             guest tools cross-compiled (images/guest-tools/aarch64.cross)
             and Debian's busybox-static for arm64 (make image-arm64)
  QEMU       qemu-system-aarch64 (Debian 12's qemu-system-arm, 7.2), or
             $VMCE_QEMU_ARM64, or run/vm start --qemu PATH; or vmce-10.2-arm64
             (qemus.ARM64: vmce's 10.2 series built for aarch64, the one
             with inject-ghes-v2-error and x-vmce-inject-sea)
  CPU        max with pauth-impdef=on (CPU below)

TCG on this x86_64 host: KVM runs only its own architecture. Under KVM
only on an Arm64 host: the Arm64 host lab's L1 (run/armlab), an emulated
Arm64 host whose own KVM runs the guest (cpu host: KVM takes no TCG-only
property such as pauth-impdef).
"""
import os
import re
import shutil
import subprocess

from . import axes, kernels, paths, qemus

ARCHES = ("amd64", "arm64")
# ras=on: the HEST table and its GHES error source (QEMU 7.2 has it: "Set
# on/off to enable/disable reporting host memory errors to a KVM guest using
# ACPI and guest external abort exceptions"); gic-version=3: a server's
# interrupt controller (GICv2, virt's default under TCG, takes 8 vCPUs at most)
MACHINE = "virt,ras=on,gic-version=3"
# max: every feature TCG emulates, FEAT_RAS among them (the guest says "CPU
# features: detected: RAS Extension Support", as on any Armv8.2+ server
# core); cortex-a57 (Armv8.0) has no RAS extension. pauth-impdef=on: QEMU's
# cheap pointer-authentication hash in place of QARMA, which TCG computes
# instruction by instruction: a boot to ready takes about 5.5 s with it,
# 15.5 s without (cortex-a57: 5.9 s)
CPU = "max,pauth-impdef=on"
KVM_CPU = "host"
CONSOLE = "ttyAMA0"
KERNEL_DIR = os.path.join("kernels", "debian-6.1-arm64")
INITRD = "guest-arm64.cpio.gz"
HOW = "make image-arm64"
AAVMF = ("/usr/share/AAVMF/AAVMF_CODE.fd", "/usr/share/AAVMF/AAVMF_VARS.fd")
QEMU = "qemu-system-aarch64"


# a campaign's arm64 guest: its kernel (the only one), the QEMU it runs
# under unless it names one, and Debian 12's own qemu-system-aarch64 by name
KERNEL = axes.ARM64_KERNEL
DEFAULT_QEMU = "vmce-10.2-arm64"
DEBIAN_QEMU = "debian-7.2-arm64"


class Arm64Error(Exception):
    """One line: what the Arm64 guest lacks here, and what makes it"""


def kernel_dir():
    return os.path.join(paths.build_dir(), KERNEL_DIR)


def boot_files():
    """(kernel Image, initramfs, release) of the Arm64 guest"""
    kdir = kernel_dir()
    image = os.path.join(kdir, "Image")
    initrd = os.path.join(paths.build_dir(), "images", INITRD)
    for what, path in (("kernel", image), ("initramfs", initrd)):
        if not os.path.exists(path):
            raise Arm64Error(f"the Arm64 guest {what} is missing at {path}: run `{HOW}`")
    try:
        with open(os.path.join(kdir, "release")) as f:
            release = f.read().strip()
    except OSError:
        release = "?"
    return image, initrd, release


def qemu_binary(qemu=None):
    """The qemu-system-aarch64 to run: @qemu (a path, or a name of
    qemus.ARM64), $VMCE_QEMU_ARM64, or the installed one"""
    path = qemu or os.environ.get("VMCE_QEMU_ARM64") or shutil.which(QEMU)
    if path in qemus.ARM64:
        locate, how = qemus.ARM64[path]
        if not os.path.exists(locate()):
            raise Arm64Error(f"QEMU {path} is not built here: `{how}` builds it (cached once per machine)")
        return locate()
    if not path:
        raise Arm64Error(f"{QEMU} is not installed: Debian's qemu-system-arm package has it "
                         "(`run/install-deps arm64` installs it)")
    if not os.access(path, os.X_OK):
        raise Arm64Error(f"{path} is not an executable QEMU")
    return path


def firmware():
    """AAVMF's code and its variable store template"""
    for path in AAVMF:
        if not os.path.exists(path):
            raise Arm64Error(f"the Arm64 UEFI firmware is missing at {path}: Debian's qemu-efi-aarch64 "
                             "package has it (`run/install-deps arm64` installs it)")
    return AAVMF


def machine_args(accel, cpu, code, vars_store):
    """QEMU's machine, accelerator, CPU and firmware for an Arm64 guest:
    AAVMF's code read-only and shared, the variable store the VM's own copy"""
    if accel == "kvm" and os.uname().machine == "aarch64":
        cpu = cpu or KVM_CPU
    elif accel != "tcg":
        raise Arm64Error(f"the Arm64 guest runs under TCG only, not {accel}: KVM runs a guest of "
                         "the host's own architecture")
    return ["-machine", MACHINE, "-accel", accel, "-cpu", cpu or CPU,
            "-drive", f"if=pflash,format=raw,unit=0,readonly=on,file={code.replace(',', ',,')}",
            "-drive", f"if=pflash,format=raw,unit=1,file={vars_store.replace(',', ',,')}"]


def kernel(name=KERNEL):
    """The Arm64 guest's kernel as a campaign resolves one (kernels.Kernel),
    judged by its own table (expect.py's debian-6.1-arm64)"""
    if name != KERNEL:
        what = ("an x86 guest kernel" if name in kernels.NAMES or kernels.is_spelled_as_path(name)
                else "not a kernel vmce knows")
        raise Arm64Error(f"kernel {name} on an arm64 guest: {what}; an arm64 guest runs Debian 12's arm64 "
                         f"kernel, {KERNEL} (make image-arm64)")
    image, initrd, release = boot_files()
    return kernels.Kernel(name, image, initrd, release, name, kdir=kernel_dir())


class ArmQemu(qemus.Qemu):
    """A qemu-system-aarch64 as a campaign resolves one: what it can tell an
    Arm64 guest (vmced's Arm path, decision.c), asked of the binary itself:
    ghes, QEMU 10.2's inject-ghes-v2-error (an AO); sea, vmce's
    x-vmce-inject-sea (an AR). Nothing is written down of what it does by
    itself with a host error (no BEHAVIOUR table: forwarder = qemu is refused)"""

    def __init__(self, name, binary, version_line, version, ghes, sea):
        super().__init__(name, binary, version_line, version, sea, None)
        self.ghes, self.sea = ghes, sea

    def tells(self, kind):
        return self.sea if kind == "ar" else self.ghes

    def to_dict(self):
        return dict(super().to_dict(), arch="arm64", ghes=self.ghes, sea=self.sea)


_resolved = {}


def resolve_qemu(spelling):
    """The ArmQemu @spelling (a name of qemus.ARM64, or a PATH) names: its
    version and its QMP commands, asked once per binary"""
    if spelling in qemus.KNOWN:
        raise Arm64Error(f"QEMU {spelling} is a qemu-system-x86_64: an arm64 guest runs under "
                         f"{', '.join(qemus.ARM64)} or a PATH to a qemu-system-aarch64")
    if spelling not in qemus.ARM64 and not qemus.is_spelled_as_path(spelling):
        raise Arm64Error(f"unknown Arm64 QEMU '{spelling}' (known: {', '.join(qemus.ARM64)}, or a PATH to "
                         "a qemu-system-aarch64)")
    path = qemu_binary(spelling if spelling in qemus.ARM64 else os.path.abspath(spelling))
    key = (path, os.stat(path).st_mtime_ns)
    if key not in _resolved:
        _resolved[key] = _probe(spelling, path)
    return _resolved[key]


def _probe(spelling, path):
    try:
        q = subprocess.run([path, "-machine", "none", "-nodefaults", "-display", "none", "-qmp", "stdio"],
                           input='{"execute":"qmp_capabilities"}\n{"execute":"query-commands"}\n'
                                 '{"execute":"query-target"}\n{"execute":"query-version"}\n'
                                 '{"execute":"quit"}\n', capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Arm64Error(f"{path} is not a QEMU that runs here ({e})") from None
    arch = re.search(r'"arch":\s*"([^"]+)"', q.stdout)
    if not arch or arch.group(1) != "aarch64":
        raise Arm64Error(f"{path} is not a qemu-system-aarch64"
                         + (f" (its target is {arch.group(1)})" if arch else ""))
    v = re.search(r'"qemu":\s*\{"micro":\s*(\d+),\s*"minor":\s*(\d+),\s*"major":\s*(\d+)', q.stdout)
    version = (int(v.group(3)), int(v.group(2)), int(v.group(1))) if v else (0, 0, 0)
    line = qemus.version_line(path) or f"QEMU emulator version {'.'.join(map(str, version))}"
    return ArmQemu(spelling, path, line, version, '"inject-ghes-v2-error"' in q.stdout,
                   '"x-vmce-inject-sea"' in q.stdout)


_models = {}


def cpu_models(path):
    """The -cpu models the qemu-system-aarch64 at @path has"""
    if path not in _models:
        out = subprocess.run([path, "-cpu", "help"], capture_output=True, text=True, timeout=30).stdout
        _models[path] = {line.split()[0] for line in out.splitlines()[1:] if line.strip()}
    return _models[path]
