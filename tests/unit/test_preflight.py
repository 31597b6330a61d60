#!/usr/bin/env python3
"""What an image must allow (preflight.py) and how it boots (images.py):
the firmware read from a partition table, OVMF found or said missing,
QEMU's arguments for UEFI and virtio-scsi, and each requirement's line
from a scripted qga."""
import os
import sys
import tempfile
import unittest
import unittest.mock
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "run", "lib"))

from vmcelab import images, preflight, qga  # noqa: E402
from vmcelab.vm import Vm  # noqa: E402


def mbr(head=None):
    head = bytearray(head or bytes(34 * 512))
    head[510:512] = b"\x55\xaa"
    return head


def gpt(*types):
    """A protective MBR and a GPT whose entries (from LBA 2) have @types"""
    head = mbr()
    head[446 + 4] = 0xEE
    hdr = 512
    head[hdr:hdr + 8] = b"EFI PART"
    head[hdr + 72:hdr + 80] = (2).to_bytes(8, "little")
    head[hdr + 80:hdr + 84] = (128).to_bytes(4, "little")
    head[hdr + 84:hdr + 88] = (128).to_bytes(4, "little")
    for i, t in enumerate(types):
        at = 1024 + i * 128
        head[at:at + 16] = t.bytes_le
    return bytes(head)


LINUX = uuid.UUID("0fc63daf-8483-4772-8e79-3d69d8477de4")


class Firmware(unittest.TestCase):
    def test_partition_tables(self):
        self.assertEqual(images.boot_record(gpt(images.ESP, LINUX)), "uefi")
        # Debian's cloud images: both ways, and BIOS is the cheaper here
        self.assertEqual(images.boot_record(gpt(images.BIOS_BOOT, images.ESP, LINUX)), "bios")
        self.assertEqual(images.boot_record(gpt(LINUX)), "bios")
        self.assertEqual(images.boot_record(bytes(mbr())), "bios")
        self.assertIsNone(images.boot_record(bytes(34 * 512)), "a blank disk: nothing boots it")

    def test_ovmf_missing_is_one_line(self):
        with unittest.mock.patch.dict(os.environ, {"VMCE_OVMF_DIR": "/nonexistent"}):
            with self.assertRaises(images.ImageError) as cm:
                images.ovmf()
        self.assertEqual(str(cm.exception), "the image boots by UEFI and OVMF is not installed "
                                            "(/nonexistent/OVMF_CODE_4M.fd is missing): apt-get install "
                                            "ovmf (run/install-deps does)")

    def test_qemu_arguments(self):
        d = tempfile.mkdtemp()
        for f in (images.OVMF_CODE, images.OVMF_VARS):
            with open(os.path.join(d, f), "wb") as out:
                out.write(b"\0" * 16)
        img = images.Image("/x/disk.qcow2", "/x/disk.qcow2", "qcow2", meta={"firmware": "uefi"})
        self.assertEqual(img.boot("auto", "virtio-scsi"),
                         ("uefi", ["-device", "virtio-scsi-pci,id=scsi0", "-drive",
                                   "file=/x/disk.qcow2,format=qcow2,snapshot=on,if=none,id=root",
                                   "-device", "scsi-hd,drive=root,bus=scsi0.0,bootindex=0"]))
        self.assertEqual(img.boot("bios")[0], "bios", "the operator's word over the disk's")
        vm = Vm("t", d)
        with unittest.mock.patch.dict(os.environ, {"VMCE_OVMF_DIR": d}):
            args = vm._agent_args(img, "auto", "virtio-blk")
        self.assertIn(f"if=pflash,format=raw,unit=0,readonly=on,file={d}/{images.OVMF_CODE}", args)
        self.assertIn(f"if=pflash,format=raw,unit=1,file={d}/OVMF_VARS.fd", args)
        self.assertTrue(os.path.exists(os.path.join(d, "OVMF_VARS.fd")), "a variable store of the VM's own")
        # a known image boots its kernel copied out: no UEFI, whatever its disk
        known = images.Image("debian-12-cloud", "/x/d.qcow2", "qcow2", kernel="/x/vmlinuz",
                             meta={"firmware": "uefi"})
        self.assertEqual(known.boot()[0], "bios")
        with self.assertRaises(images.ImageError):
            img.boot("auto", "ide")

    def test_firmware_lines(self):
        img = images.Image("/x/blank.qcow2", "/x/blank.qcow2", "qcow2", meta={"firmware": None})
        line, fw = preflight.firmware_line(img)
        self.assertEqual((line[1], fw), (False, None))
        self.assertIn("nothing boots this disk", line[2])
        uefi = images.Image("/x/u.qcow2", "/x/u.qcow2", "qcow2", meta={"firmware": "uefi"})
        with unittest.mock.patch.dict(os.environ, {"VMCE_OVMF_DIR": "/nonexistent"}):
            line, fw = preflight.firmware_line(uefi)
        self.assertFalse(line[1])
        self.assertIn("OVMF is not installed", line[2])
        self.assertEqual(preflight.firmware_line(uefi, "bios")[1], "bios")


class FakeAgent:
    """qga's answers scripted: guest-info's commands, and what /bin/sh says"""

    def __init__(self, disabled=(), sh=None, tmpfs_error=None):
        self.disabled, self.sh, self.tmpfs_error = disabled, sh, tmpfs_error
        self.dir = None

    def _qga(self, command, arguments=None, timeout=10.0):
        assert command == "guest-info"
        return {"version": "7.2.0", "supported_commands": [
            {"name": c, "enabled": c not in self.disabled} for c in preflight.EXEC + preflight.FILES]}

    def push_tools(self):
        if self.tmpfs_error:
            raise qga.QgaError(self.tmpfs_error, "no-tmpfs")
        self.dir = "/dev/shm"

    def _exec(self, path, args, timeout=30.0):
        return self.sh


class Lines(unittest.TestCase):
    def lines(self, agent):
        return {what: (ok, text) for what, ok, text in preflight.guest_lines(agent)[1]}

    def test_all_well(self):
        got = self.lines(FakeAgent(sh={"exitcode": 0, "out": "1228000\n", "err": ""}))
        self.assertTrue(all(ok for ok, _ in got.values()), got)
        self.assertEqual(got["/var/lib/vmce"], (True, "writable, 1199 MiB free"))

    def test_guest_exec_blocked(self):
        got = self.lines(FakeAgent(disabled=("guest-exec",)))
        self.assertFalse(got["guest-exec"][0])
        self.assertIn("guest-exec disabled: remove them from block-rpcs", got["guest-exec"][1])
        self.assertIsNone(got["executable tmpfs"][0], "not checked, not failed twice")
        text, ok = preflight.render(preflight.guest_lines(FakeAgent(disabled=("guest-exec",)))[1])
        self.assertFalse(ok)
        self.assertTrue(any(line.split()[0] == "MISSING" for line in text))

    def test_no_tmpfs_and_full_disk(self):
        got = self.lines(FakeAgent(tmpfs_error="no writable, executable tmpfs for vmce's tools (...)",
                                   sh={"exitcode": 0, "out": "100\n", "err": ""}))
        self.assertFalse(got["executable tmpfs"][0])
        self.assertEqual(got["/var/lib/vmce"][0], False)
        self.assertIn("100 KiB free: it needs 2048 KiB", got["/var/lib/vmce"][1])
        got = self.lines(FakeAgent(sh={"exitcode": 1, "out": "", "err": "mkdir: Read-only file system\n"}))
        self.assertIn("not writable (mkdir: Read-only file system)", got["/var/lib/vmce"][1])


class SilentQga(unittest.TestCase):
    """A guest that is up (its console says so) and whose qga never
    answers is said within seconds, not after the boot timeout"""

    def test_up_and_silent(self):
        class Guest:
            def alive(self):
                return True

            def console(self):
                return "[\x1b[0;32m  OK  \x1b[0m] Reached target \x1b[0;1;39mmulti-user.target\x1b[0m - Multi-User System.\n"

        class Silent:
            def execute(self, *a, **k):
                raise OSError("no answer")
        agent = qga.QgaAgent(Silent())
        with unittest.mock.patch.object(preflight.time, "sleep", lambda s: None):
            what, ok, text = preflight.wait_qga(Guest(), agent, timeout=60, after_boot=0.2)
        self.assertEqual((what, ok), ("qga channel", False))
        self.assertIn("the guest is up (its console says so) and qemu-guest-agent has not answered", text)


if __name__ == "__main__":
    unittest.main()
