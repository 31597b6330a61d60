"""Guest images: a whole guest system, as an operator's customers boot it,
driven through qemu-guest-agent alone (qga.py). Where a campaign names an
image, the image is the guest: its own kernel, its own userland.

  debian-12        Debian 12 with systemd, linux-image-amd64 and
                   qemu-guest-agent (images/mkimage; `make guest-image`): a
                   BIOS disk with GRUB, booted here through the kernel and
                   initramfs copied out beside it, which is faster
  debian-12-cloud  the same with linux-image-cloud-amd64, the kernel
                   Debian's cloud images boot
  PATH             an operator's qcow2 or raw image; it boots by itself
                   (firmware, its own boot loader), and its kernel is known
                   once it runs (qga's guest-get-osinfo)

An image's kernel is judged by the expectations of the nearest kernel vmce
knows (kernels.nearest_table), and said so; a kernel without the HWPOISON
handler (no CONFIG_MEMORY_FAILURE, or no CONFIG_X86_MCE) by "no-handler"
(expect.py): it is run anyway, and what it does is what an operator learns.
"""
import json
import os
import re
import subprocess

from . import kernels as kernels_mod
from . import paths

KNOWN = ("debian-12", "debian-12-cloud")


class ImageError(Exception):
    """One line: what is wrong with the image asked for"""


def image_dir(name):
    return os.path.join(paths.build_dir(), "images", name)


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

    @property
    def label(self):
        rel = f" ({self.release})" if self.release else ""
        return f"image {self.name}{rel}"

    def to_dict(self):
        return dict(name=self.name, kind="image", release=self.release, table=self.table,
                    nearest=self.nearest, image=self.disk, handler_missing=self.missing,
                    os=self.meta.get("os"), packages=self.meta.get("packages"))


def resolve(value):
    value = value.strip()
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
    return Image(value, path, fmt)
