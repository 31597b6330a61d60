"""Where the repository's build products are."""
import json
import os
import re
import shutil

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def build_dir():
    return os.environ.get("VMCE_BUILD_DIR") or os.path.join(ROOT, "build")


def _artifact(env, *parts):
    path = os.environ.get(env) or os.path.join(build_dir(), *parts)
    return path


def vmced():
    return _artifact("VMCE_VMCED", "meson", "host-daemon", "vmced")


def vmcectl():
    return _artifact("VMCE_VMCECTL", "meson", "host-daemon", "vmcectl")


def kernel():
    """The uncompressed vmlinux when guest-kernel/fetch extracted one: QEMU
    boots it through its PVH entry point, seconds faster under TCG than
    the bzImage, which decompresses itself instruction by instruction."""
    if os.environ.get("VMCE_KERNEL"):
        return os.environ["VMCE_KERNEL"]
    vmlinux = os.path.join(build_dir(), "guest-kernel", "vmlinux")
    if os.path.exists(vmlinux):
        return vmlinux
    return os.path.join(build_dir(), "guest-kernel", "vmlinuz")


def initrd():
    return _artifact("VMCE_INITRD", "images", "guest.cpio.gz")


def disk():
    """The guest's data disk (ext4 and swap), built by images/mkdisk"""
    return _artifact("VMCE_DISK", "images", "disk.img")


def poisoner():
    """images/host/vmce-poison: puts a real host memory error in a file's page"""
    if os.environ.get("VMCE_POISON"):
        return os.environ["VMCE_POISON"]
    built = os.path.join(build_dir(), "meson", "images", "host", "vmce-poison")
    return built if os.path.exists(built) else (shutil.which("vmce-poison") or built)


def state_root():
    """Per-VM state directories live here."""
    if os.environ.get("VMCE_STATE_DIR"):
        return os.environ["VMCE_STATE_DIR"]
    return "/run/vmce/vms" if os.geteuid() == 0 else os.path.join(build_dir(), "vms")


def require(path, what, how):
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} not found at {path}: {how}")
    return path


def version():
    """vmce's version, as meson.build gives it to vmced and vmcectl (or, as
    the vmce-lab package installs the tools, its VERSION file)"""
    try:
        with open(os.path.join(ROOT, "meson.build")) as f:
            m = re.search(r"version\s*:\s*'([^']+)'", f.read())
    except OSError:
        try:
            with open(os.path.join(ROOT, "VERSION")) as f:
                return f.read().strip() or None
        except OSError:
            return None
    return m.group(1) if m else None


def staged(env, value):
    """The entry for @value in the JSON file $@env names, which L0 writes
    for L1 (the kernels and images it staged there), or None where there is
    no such file or entry (not in L1)"""
    path = os.environ.get(env)
    if not path:
        return None
    with open(path) as f:
        return json.load(f).get(value)
