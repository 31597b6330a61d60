"""Guest images: a whole guest system, as an operator's customers boot it,
driven through qemu-guest-agent alone (qga.py). Where a campaign names an
image, the image is the guest: its own kernel, its own userland.

  debian-12        Debian 12 with systemd, linux-image-amd64 and
                   qemu-guest-agent (images/mkimage; `make guest-image`): a
                   BIOS disk with GRUB, booted here through the kernel and
                   initramfs copied out beside it, which is faster
  debian-12-cloud  the same with linux-image-cloud-amd64, the kernel
                   Debian's cloud images boot, on a UEFI-only disk (GPT,
                   an EFI system partition)
  PATH             an operator's qcow2 or raw image; it boots by itself
                   (firmware, its own boot loader), and its kernel is known
                   once it runs (qga's guest-get-osinfo)

The firmware an image boots by is read from its partition table
(firmware_of): a GPT disk with an EFI system partition and no BIOS boot
partition is UEFI's, booted with OVMF (Debian's ovmf package), anything
else SeaBIOS's; a campaign's `firmware` (--firmware) says it otherwise.
Its disk is virtio-blk or virtio-scsi (`disk-bus`, --disk-bus).

An image's kernel is judged by the expectations of the nearest kernel vmce
knows (kernels.nearest_table), and said so; a kernel without the HWPOISON
handler (no CONFIG_MEMORY_FAILURE, or no CONFIG_X86_MCE) by "no-handler"
(expect.py): it is run anyway, and what it does is what an operator learns.
"""
import json
import os
import re
import subprocess
import tempfile
import uuid

from . import kernels as kernels_mod
from . import paths

KNOWN = ("debian-12", "debian-12-cloud")
FIRMWARES = ("auto", "uefi", "bios")
BUSES = ("virtio-blk", "virtio-scsi")
ESP = uuid.UUID("c12a7328-f81f-11d2-ba4b-00a0c93ec93b")
BIOS_BOOT = uuid.UUID("21686148-6943-6e6f-744e-656564454649")
# Debian 12's ovmf: the 4 MiB flash build without Secure Boot, and the
# empty variable store each VM gets a copy of
OVMF_CODE, OVMF_VARS = "OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd"
# the images L0 handed the host lab's L1 (run/hostlab --campaign --images):
# a JSON file of staged_entry()s by spelling, which resolve() reads first
STAGED_ENV = "VMCE_IMAGES_STAGED"


class ImageError(Exception):
    """One line: what is wrong with the image asked for"""


def image_dir(name):
    return os.path.join(paths.build_dir(), "images", name)


def ovmf():
    """(code, vars) of the UEFI firmware, or ImageError saying it is missing"""
    d = os.environ.get("VMCE_OVMF_DIR") or "/usr/share/OVMF"
    files = [os.path.join(d, f) for f in (OVMF_CODE, OVMF_VARS)]
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise ImageError(f"the image boots by UEFI and OVMF is not installed ({missing[0]} is missing): "
                         "apt-get install ovmf (run/install-deps does)")
    return tuple(files)


def _gpt_types(head):
    """The partition type GUIDs of a GPT in @head (the disk's first 34
    sectors), or None where there is no GPT"""
    if head[512:520] != b"EFI PART":
        return None
    lba, count, size = (int.from_bytes(head[512 + o:512 + o + n], "little") for o, n in ((72, 8), (80, 4), (84, 4)))
    types = []
    for i in range(min(count, 128)):
        at = lba * 512 + i * size
        if size < 16 or at + 16 > len(head):
            break
        raw = head[at:at + 16]
        if any(raw):
            types.append(uuid.UUID(bytes_le=raw))
    return types


def boot_record(head):
    """What a disk's first sectors say of how it boots: "uefi" (GPT, an EFI
    system partition, no BIOS boot partition), "bios" (MBR, or a GPT with
    a BIOS boot partition or without an ESP), or None (no partition table
    nor boot signature: a blank disk, nothing boots it)"""
    types = _gpt_types(head)
    if types is not None:
        return "uefi" if ESP in types and BIOS_BOOT not in types else "bios"
    return "bios" if head[510:512] == b"\x55\xaa" else None


def read_head(path, fmt, size=34 * 512):
    """The first @size bytes a guest sees of the image (qemu-img dd: a
    qcow2's too)"""
    with tempfile.TemporaryDirectory(prefix="vmce-head-") as d:
        out = os.path.join(d, "head")
        res = subprocess.run(["qemu-img", "dd", "-f", fmt, "-O", "raw", f"bs={size}", "count=1",
                              f"if={path}", f"of={out}"], capture_output=True, text=True)
        if res.returncode != 0:
            raise ImageError(f"{path}: qemu-img cannot read its first sectors: "
                             f"{(res.stderr.strip().splitlines() or ['?'])[-1]}")
        with open(out, "rb") as f:
            return f.read()


def is_image_spelling(value):
    return value in KNOWN or (kernels_mod.is_spelled_as_path(value)
                              and re.search(r"\.(qcow2|raw|img)$", value) is not None)


class Image:
    """A resolved guest image. It stands where a Kernel stands in a campaign
    (name, release, table, nearest, label, to_dict): the cases on it are
    that image's, side by side with other images and kernels"""

    kind = "image"

    def __init__(self, name, disk, fmt, kernel=None, initrd=None, cmdline=None, release=None,
                 config=None, meta=None):
        self.name, self.disk, self.format = name, disk, fmt
        # direct kernel boot: the image's own kernel and initramfs, copied
        # out when it was built; None: it boots by itself
        self.image, self.initrd, self.cmdline = kernel, initrd, cmdline
        self.kdir = None
        self.meta = meta or {}
        self.release, self.missing = None, None
        self.table, self.nearest = kernels_mod.DEFAULT, None
        # how its disk boots (boot_record): None, unknown (nothing boots it)
        self.firmware = self.meta.get("firmware")
        self.learn(release, config)

    def learn(self, release, config=None):
        """The kernel's release (and its config, where known): which
        expectations judge it. A PATH image learns it at its first boot"""
        if release is None:
            return
        self.release = release
        if config is not None:
            self.missing = kernels_mod.handler_missing(config)
        # Debian's own kernel in a Debian image is the table's kernel itself
        self.table, self.nearest = kernels_mod.table_for(release, self.missing, debian_exact=True)

    def boot(self, firmware="auto", bus="virtio-blk"):
        """QEMU's arguments for the image's firmware and disk: @firmware
        auto (its own, read from the disk), uefi or bios; @bus virtio-blk or
        virtio-scsi. UEFI's variable store is a copy per VM, made by Vm"""
        # an image booted by its kernel copied out (a known one) needs no UEFI
        fw = firmware if firmware != "auto" else (None if self.image else self.firmware)
        if bus not in BUSES:
            raise ImageError(f"disk bus '{bus}': say {' or '.join(BUSES)}")
        drive = f"file={self.disk.replace(',', ',,')},format={self.format},snapshot=on"
        if bus == "virtio-scsi":
            args = ["-device", "virtio-scsi-pci,id=scsi0", "-drive", f"{drive},if=none,id=root",
                    "-device", "scsi-hd,drive=root,bus=scsi0.0,bootindex=0"]
        else:
            args = ["-drive", f"{drive},if=virtio"]
        return ("uefi" if fw == "uefi" else "bios"), args

    @property
    def label(self):
        rel = f" ({self.release})" if self.release else ""
        return f"image {self.name}{rel}"

    def to_dict(self):
        return dict(name=self.name, kind="image", release=self.release, table=self.table,
                    nearest=self.nearest, image=self.disk, handler_missing=self.missing,
                    os=self.meta.get("os"), packages=self.meta.get("packages"), firmware=self.firmware)


def staged_entry(image, disk, kernel=None, initrd=None, config=None):
    """What L1 needs of L0's resolved Image @image to boot it from @disk (the
    read-only disk L0 gave L1), its own @kernel and @initrd where it has
    them, and judge it as L0 would (@config: its kernel's config file)"""
    return dict(disk=disk, format=image.format, kernel=kernel, initrd=initrd, cmdline=image.cmdline,
                release=image.release, config=config, meta=image.meta)


def _staged(value):
    entry = paths.staged(STAGED_ENV, value)
    if entry is None:
        return None
    config = None
    if entry.get("config"):
        with open(entry["config"]) as f:
            config = f.read()
    return Image(value, entry["disk"], entry["format"], entry.get("kernel"), entry.get("initrd"),
                 entry.get("cmdline"), entry.get("release"), config, entry.get("meta"))


def resolve(value):
    value = value.strip()
    staged = _staged(value)
    if staged is not None:
        return staged
    if value in KNOWN:
        d = image_dir(value)
        meta_path = os.path.join(d, "image.json")
        if not os.path.exists(meta_path):
            raise ImageError(f"the {value} guest image is missing at {d}: run `make guest-image`")
        with open(meta_path) as f:
            meta = json.load(f)
        with open(os.path.join(d, "config")) as f:
            config = f.read()
        meta["os"] = "Debian GNU/Linux 12 (bookworm)"
        return Image(value, os.path.join(d, "disk.qcow2"), "qcow2", os.path.join(d, "vmlinuz"),
                     os.path.join(d, "initrd.img"), meta["cmdline"], meta["release"], config, meta)
    if not kernels_mod.is_spelled_as_path(value):
        raise ImageError(f"unknown image '{value}' (known: {', '.join(KNOWN)}, or a PATH to a "
                         "qcow2 or raw image)")
    path = os.path.abspath(value)
    if not os.path.isfile(path):
        raise ImageError(f"{value}: no such image file")
    info = subprocess.run(["qemu-img", "info", "--output=json", path], capture_output=True, text=True)
    if info.returncode != 0:
        raise ImageError(f"{value}: qemu-img cannot read it: {info.stderr.strip().splitlines()[-1]}")
    fmt = json.loads(info.stdout).get("format")
    if fmt not in ("qcow2", "raw"):
        raise ImageError(f"{value}: a {fmt} image (vmce takes qcow2 or raw)")
    return Image(value, path, fmt, meta={"firmware": boot_record(read_head(path, fmt))})
