#!/usr/bin/env python3
"""The Arm64 guest's QEMU command line and what it needs
(run/lib/vmcelab/arm64.py): virt with ras=on (QEMU's HEST and GHES) under
AAVMF, TCG on this host (KVM only on an Arm64 one: the Arm64 host lab's
L1), the VM's own variable store; each missing piece named with what makes
it. Vm.start builds that command line (a QEMU that records its arguments
stands in for QEMU). The Arm64 host lab's parts that run here: the script
that runs an arm64 QEMU with its own libraries (qemu-patches/
own-libs-wrapper arm64), and run/armlab's and images/host/mkarmlabimage's
one-line refusals of what they cannot take."""
import json
import os
import signal
import stat
import subprocess
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
            with mock.patch("os.uname", return_value=os.uname_result(("Linux", "h", "6.1", "#1", "x86_64"))):
                with self.assertRaisesRegex(arm64.Arm64Error, "TCG only.*host's own architecture"):
                    arm64.machine_args(accel, None, "c", "v")

    def test_kvm_on_an_arm64_host_takes_its_cpu(self):
        # the Arm64 host lab's L1: its own KVM, the host's CPU (KVM takes
        # no pauth-impdef, a TCG property)
        with mock.patch("os.uname", return_value=os.uname_result(("Linux", "l1", "6.1", "#1", "aarch64"))):
            args = arm64.machine_args("kvm", None, "c", "v")
            self.assertEqual(option(args, "-accel"), ["kvm"])
            self.assertEqual(option(args, "-cpu"), ["host"])
            self.assertEqual(option(args, "-machine"), [arm64.MACHINE], "ras=on: QEMU's HEST under KVM too")
            with self.assertRaisesRegex(arm64.Arm64Error, "not auto"):
                arm64.machine_args("auto", None, "c", "v")


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


TOP = os.path.join(HERE, "..", "..")


class OwnLibsWrapperArm64(unittest.TestCase):
    """qemu-patches/fetch --arch arm64's script: the arm64 root's loader,
    libraries and binary, found from the script's own place"""

    def test_arm64_paths(self):
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "qemu-system-aarch64")
            subprocess.run([os.path.join(TOP, "qemu-patches", "own-libs-wrapper"), script, "a test QEMU", "arm64"],
                           check=True)
            with open(script) as f:
                text = f.read()
            self.assertIn("/usr/lib/ld-linux-aarch64.so.1", text)
            self.assertIn("lib=$root/usr/lib/aarch64-linux-gnu", text)
            self.assertIn('"$root/usr/bin/qemu-system-aarch64" "$@"', text)
            self.assertNotIn("x86_64", text)

    def test_unknown_arch_is_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            res = subprocess.run([os.path.join(TOP, "qemu-patches", "own-libs-wrapper"), os.path.join(tmp, "q"),
                                  "x", "riscv64"], capture_output=True, text=True)
            self.assertEqual(res.returncode, 1)
            self.assertEqual(res.stderr.strip(), "own-libs-wrapper: ARCH is amd64 or arm64, not 'riscv64'")
            self.assertFalse(os.path.exists(os.path.join(tmp, "q")))


class ArmlabRefusals(unittest.TestCase):
    """What run/armlab and mkarmlabimage cannot take: one line, exit 2 (1
    for mkarmlabimage, as mkhostimage), before anything boots"""

    def armlab(self, *args, build=None):
        with tempfile.TemporaryDirectory() as empty:
            env = dict(os.environ, VMCE_BUILD_DIR=build or empty)
            res = subprocess.run([os.path.join(TOP, "run", "armlab"), *args], capture_output=True, text=True,
                                 env=env)
        return res.returncode, res.stderr.strip().splitlines()

    def test_unknown_qemu(self):
        rc, err = self.armlab("--qemus", "debian-7.2")
        self.assertEqual((rc, len(err)), (2, 1))
        self.assertIn("no Arm64 QEMU named 'debian-7.2'", err[0])

    def test_unknown_kind(self):
        rc, err = self.armlab("--kinds", "ao,sea")
        self.assertEqual((rc, err), (2, ["armlab: error: --kinds takes ao and ar, not 'sea'"]))

    def test_missing_guest_names_the_make_goal(self):
        with tempfile.TemporaryDirectory() as build:
            rc, err = self.armlab(build=build)
            self.assertEqual((rc, len(err)), (2, 1))
            self.assertRegex(err[0], r"debian-6.1-arm64/Image is missing: run `make image-arm64`")

    def test_missing_qemu_names_the_make_goal(self):
        with tempfile.TemporaryDirectory() as build:
            kdir = os.path.join(build, "kernels", "debian-6.1-arm64")
            os.makedirs(kdir)
            os.makedirs(os.path.join(build, "images"))
            os.makedirs(os.path.join(build, "meson-arm64", "images", "host"))
            for path in (os.path.join(kdir, "Image"), os.path.join(build, "images", arm64.INITRD),
                         os.path.join(build, "meson-arm64", "images", "host", "vmce-poison")):
                open(path, "w").close()
            rc, err = self.armlab("--qemus", "debian-10.0-arm64", build=build)
            if rc == 2 and ("is not installed" in err[0] or "AAVMF" in err[0]):
                self.skipTest(f"this host lacks the Arm64 lab's L0 parts: {err[0]}")
            self.assertEqual((rc, len(err)), (2, 1))
            self.assertIn("QEMU debian-10.0-arm64 is not fetched: `make armlab-qemus`", err[0])

    def test_mkarmlabimage_refuses_an_x86_poisoner(self):
        with tempfile.TemporaryDirectory() as tmp:
            kdir = os.path.join(tmp, "k")
            os.makedirs(kdir)
            for f in ("Image", "release", "guest.cpio.gz"):
                open(os.path.join(kdir, f), "w").close()
            res = subprocess.run([os.path.join(TOP, "images", "host", "mkarmlabimage"), "--kernel-dir", kdir,
                                  "--guest", os.path.join(kdir, "guest.cpio.gz"), "--poison", "/bin/true",
                                  "--out", os.path.join(tmp, "out.cpio"), "--qemu", "q=/nonexistent"],
                                 capture_output=True, text=True)
            self.assertEqual(res.returncode, 1)
            self.assertEqual(res.stderr.strip(), "mkarmlabimage: /bin/true is not an Arm64 binary")
            self.assertFalse(os.path.exists(os.path.join(tmp, "out.cpio")))


if __name__ == "__main__":
    unittest.main()
