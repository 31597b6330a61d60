#!/usr/bin/env python3
"""The Arm64 guest's QEMU command line and what it needs
(run/lib/vmcelab/arm64.py): virt with ras=on (QEMU's HEST and GHES) under
AAVMF, TCG only, the VM's own variable store; each missing piece named with
what makes it. Vm.start builds that command line (a QEMU that records its
arguments stands in for QEMU)."""
import json
import os
import signal
import stat
import sys
import tempfile
import time
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "run", "lib"))

from vmcelab import arm64, vm  # noqa: E402


def option(args, flag):
    """Every value of @flag in @args, in order"""
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


class MachineArgs(unittest.TestCase):
    def test_virt_with_ras_under_aavmf(self):
        args = arm64.machine_args("tcg", None, "/fw/CODE.fd", "/vm/VARS.fd")
        self.assertEqual(option(args, "-machine"), ["virt,ras=on,gic-version=3"])
        self.assertEqual(option(args, "-accel"), ["tcg"])
        self.assertEqual(option(args, "-cpu"), ["max,pauth-impdef=on"], "the default CPU")
        drives = option(args, "-drive")
        self.assertEqual(drives[0], "if=pflash,format=raw,unit=0,readonly=on,file=/fw/CODE.fd",
                         "the firmware's code: read-only, shared by every VM")
        self.assertEqual(drives[1], "if=pflash,format=raw,unit=1,file=/vm/VARS.fd",
                         "the variable store: writable, the VM's own")

    def test_cpu_given_is_taken(self):
        self.assertEqual(option(arm64.machine_args("tcg", "cortex-a57", "c", "v"), "-cpu"), ["cortex-a57"])

    def test_comma_in_a_path_is_escaped(self):
        drives = option(arm64.machine_args("tcg", None, "/a,b/CODE.fd", "/c,d/VARS.fd"), "-drive")
        self.assertTrue(drives[0].endswith("file=/a,,b/CODE.fd"))
        self.assertTrue(drives[1].endswith("file=/c,,d/VARS.fd"))

    def test_kvm_is_refused_saying_why(self):
        for accel in ("kvm", "auto"):
            with self.assertRaisesRegex(arm64.Arm64Error, "TCG only.*host's own architecture"):
                arm64.machine_args(accel, None, "c", "v")


class WhatItNeeds(unittest.TestCase):
    def test_missing_kernel_names_the_make_goal(self):
        with tempfile.TemporaryDirectory() as tmp, mock.patch.dict(os.environ, {"VMCE_BUILD_DIR": tmp}):
            with self.assertRaisesRegex(arm64.Arm64Error, r"kernel is missing at .*Image: run `make image-arm64`"):
                arm64.boot_files()

    def test_missing_initramfs_names_the_make_goal(self):
        with tempfile.TemporaryDirectory() as tmp, mock.patch.dict(os.environ, {"VMCE_BUILD_DIR": tmp}):
            os.makedirs(arm64.kernel_dir())
            open(os.path.join(arm64.kernel_dir(), "Image"), "w").close()
            with open(os.path.join(arm64.kernel_dir(), "release"), "w") as f:
                f.write("6.1.0-57-arm64\n")
            with self.assertRaisesRegex(arm64.Arm64Error, r"initramfs is missing at .*guest-arm64\.cpio\.gz"):
                arm64.boot_files()
            os.makedirs(os.path.join(tmp, "images"))
            open(os.path.join(tmp, "images", arm64.INITRD), "w").close()
            self.assertEqual(arm64.boot_files()[2], "6.1.0-57-arm64")

    def test_qemu_not_executable_is_refused(self):
        with tempfile.NamedTemporaryFile() as f, mock.patch.dict(os.environ, {"VMCE_QEMU_ARM64": f.name}):
            with self.assertRaisesRegex(arm64.Arm64Error, "not an executable QEMU"):
                arm64.qemu_binary()

    def test_no_qemu_names_the_package(self):
        with mock.patch.dict(os.environ, {"PATH": "/nonexistent"}), \
                mock.patch.dict(os.environ, {}, clear=False) as env:
            env.pop("VMCE_QEMU_ARM64", None)
            with self.assertRaisesRegex(arm64.Arm64Error, "qemu-system-arm package"):
                arm64.qemu_binary()

    def test_vmce_build_by_name(self):
        """vmce-10.2-arm64 (qemus.ARM64): the cached build's binary, or the
        make goal that builds it"""
        with tempfile.TemporaryDirectory() as tmp, mock.patch.dict(os.environ, {"VMCE_BUILD_DIR": tmp}):
            with self.assertRaisesRegex(arm64.Arm64Error, r"QEMU vmce-10\.2-arm64 is not built here: "
                                                          r"`make qemu-10\.2-arm64` builds it"):
                arm64.qemu_binary("vmce-10.2-arm64")
            binary = os.path.join(tmp, "qemus", "vmce-10.2-arm64", "build", "qemu-system-aarch64")
            os.makedirs(os.path.dirname(binary))
            open(binary, "w").close()
            self.assertEqual(arm64.qemu_binary("vmce-10.2-arm64"), binary)

    def test_missing_firmware_names_the_package(self):
        with mock.patch.object(arm64, "AAVMF", ("/nonexistent/AAVMF_CODE.fd", "/nonexistent/AAVMF_VARS.fd")):
            with self.assertRaisesRegex(arm64.Arm64Error, "qemu-efi-aarch64"):
                arm64.firmware()


# a QEMU that writes its arguments down and waits to be killed
RECORDER = """#!/bin/sh
printf '%s\\n' "$@" > "$(dirname "$0")/args"
sleep 30
"""


class VmStart(unittest.TestCase):
    def test_arm64_command_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            qemu = os.path.join(tmp, "qemu-system-aarch64")
            with open(qemu, "w") as f:
                f.write(RECORDER)
            os.chmod(qemu, stat.S_IRWXU)
            fw = os.path.join(tmp, "CODE.fd"), os.path.join(tmp, "VARS.fd")
            for path in fw:
                with open(path, "wb") as f:
                    f.write(b"\0" * 64)
            kernel, initrd = os.path.join(tmp, "Image"), os.path.join(tmp, "initrd")
            for path in (kernel, initrd):
                open(path, "w").close()
            with mock.patch.object(arm64, "AAVMF", fw):
                v = vm.Vm.start("a64", arch="arm64", qemu=qemu, kernel=kernel, initrd=initrd, disk=False,
                                state_dir=os.path.join(tmp, "state"))
            try:
                args_file = os.path.join(tmp, "args")
                for _ in range(100):
                    if os.path.exists(args_file) and os.path.getsize(args_file):
                        break
                    time.sleep(0.05)
                with open(args_file) as f:
                    args = f.read().splitlines()
            finally:
                # QEMU's session (vm._launch starts it in its own)
                os.killpg(v.pid, signal.SIGKILL)
                v._proc.wait()
            self.assertEqual(option(args, "-machine"), ["virt,ras=on,gic-version=3"])
            self.assertEqual(option(args, "-append"), ["console=ttyAMA0 loglevel=4"],
                             "the console is virt's PL011, not a PC's ttyS0")
            store = os.path.join(tmp, "state", "AAVMF_VARS.fd")
            self.assertIn(f"if=pflash,format=raw,unit=1,file={store}", option(args, "-drive"))
            self.assertTrue(os.path.exists(store), "the VM's own copy of the variable store")
            with open(os.path.join(tmp, "state", "vm.json")) as f:
                self.assertEqual(json.load(f)["arch"], "arm64")

    def test_an_image_is_refused(self):
        with self.assertRaisesRegex(ValueError, "x86 guest"):
            vm.Vm.start("a64", arch="arm64", image=object())

    def test_unknown_arch_is_refused(self):
        with self.assertRaisesRegex(ValueError, "arch riscv64"):
            vm.Vm.start("x", arch="riscv64")


if __name__ == "__main__":
    unittest.main()
