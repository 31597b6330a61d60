#!/usr/bin/env python3
"""Guest kernels by name or path (run/lib/vmcelab/kernels.py), and the
expectations each is judged by: the five vmce knows, an operator's own
kernel judged by the nearest known one (and marked so), and the errors for
what is not a kernel or not a vmce guest kernel, or is a QEMU's name."""
import os
import struct
import sys
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "run", "lib"))

from vmcelab import axes, expect, kernels, qemus  # noqa: E402
from vmcelab.campaign import Campaign, SpecError  # noqa: E402
from vmcelab.expect import TABLES, expectation, judge  # noqa: E402

VMCE_CONFIG = os.path.join(HERE, "..", "..", "guest-kernel", "vmce.config")


def bzimage(path, version):
    """The part of a bzImage the boot protocol defines that names its version"""
    data = bytearray(0x1000)
    data[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", data, 0x20E, 0x800 - 0x200)
    text = f"{version} (vmce@test) #1 SMP".encode()
    data[0x800:0x800 + len(text)] = text
    with open(path, "wb") as f:
        f.write(data)


def vmlinux(path, version):
    with open(path, "wb") as f:
        f.write(b"\x7fELF" + b"\0" * 60 + f"Linux version {version} (gcc) #1\0".encode())


def config(path, drop=()):
    with open(VMCE_CONFIG) as src, open(path, "w") as f:
        for line in src:
            if line.startswith("CONFIG_") and line.split("=")[0] in drop:
                f.write(f"# {line.split('=')[0]} is not set\n")
            elif line.startswith("CONFIG_"):
                f.write(line)


class Resolve(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        os.environ["VMCE_BUILD_DIR"] = os.path.join(self.tmp, "build")

    def test_release_of_a_bzimage_and_a_vmlinux(self):
        bz, elf = os.path.join(self.tmp, "bz"), os.path.join(self.tmp, "elf")
        bzimage(bz, "6.10.3-custom")
        vmlinux(elf, "6.8.0-1-amd64")
        self.assertEqual(kernels.image_release(bz), "6.10.3-custom")
        self.assertEqual(kernels.image_release(elf), "6.8.0-1-amd64")
        self.assertIsNone(kernels.image_release("/etc/hostname" if os.path.exists("/etc/hostname")
                                                else VMCE_CONFIG))

    def test_nearest_known_kernel(self):
        for release, want in (("6.1.50", "debian-6.1"), ("5.15.0", "debian-6.1"),
                              ("6.6.1", "debian-6.1"), ("6.10.3", "debian-6.12"),
                              ("6.17.0", "debian-6.12"), ("weird", "debian-6.1"),
                              ("7.2.13+deb14-amd64", "debian-7.3"), ("7.0.1", "debian-7.3"),
                              ("8.1.0", "debian-7.3")):
            self.assertEqual(kernels.nearest_table(release), want, release)

    def test_table_for(self):
        cases = [  # release, handler missing, Debian exact?, want
            ("6.1.0-50-amd64", [], True, ("debian-6.1", None)),
            ("6.1.0-50-amd64", [], False, ("debian-6.1", "debian-6.1")),
            ("6.1.0-50-cloud-amd64", [], True, ("debian-6.1", "debian-6.1")),
            ("6.12.118+deb13-amd64", [], True, ("debian-6.12", None)),
            ("6.12.9-custom", [], True, ("debian-6.12", "debian-6.12")),
            # trixie-backports' 7.3 is named +deb13 too
            ("7.3.4+deb13-amd64", [], True, ("debian-7.3", None)),
            ("7.2.13+deb14-amd64", [], True, ("debian-7.3", "debian-7.3")),
            ("5.14.0-427.el9.x86_64", [], True, ("debian-6.1", "debian-6.1")),
            ("6.1.0-50-cloud-amd64", ["CONFIG_MEMORY_FAILURE"], True, ("no-handler", None)),
        ]
        for release, missing, exact, want in cases:
            self.assertEqual(kernels.table_for(release, missing, exact), want, release)
        self.assertEqual(kernels.handler_missing("CONFIG_MEMORY_FAILURE=y\n# CONFIG_X86_MCE is not set\n"),
                         ["CONFIG_X86_MCE"])

    def test_unknown_name(self):
        with self.assertRaises(kernels.KernelError) as cm:
            kernels.resolve("debian-5.10")
        self.assertIn("unknown kernel 'debian-5.10' (known: debian-6.1, vmce-6.1, debian-6.12", str(cm.exception))

    def test_a_qemu_is_not_a_kernel(self):
        # Debian 12's QEMU is debian-7.2: never a kernel 7.2
        for name in qemus.NAMES:
            with self.assertRaises(kernels.KernelError) as cm:
                kernels.resolve(name)
            self.assertEqual(str(cm.exception), f"{name} is a QEMU, not a guest kernel (known kernels: "
                             "debian-6.1, vmce-6.1, debian-6.12, vmce-6.12, debian-7.3, vmce-7.3, or a PATH to a "
                             "kernel dir or a bzImage/vmlinux)")

    def test_a_kernel_is_not_a_qemu(self):
        for name in kernels.NAMES:
            for resolve in (qemus.resolve, qemus.binary):
                with self.assertRaises(qemus.QemuError) as cm:
                    resolve(name)
                self.assertTrue(str(cm.exception).startswith(f"{name} is a guest kernel, not a QEMU (known "
                                                             f"QEMUs: {', '.join(qemus.NAMES)}"), cm.exception)

    def test_no_name_on_both_axes(self):
        self.assertEqual(axes.KERNELS, kernels.NAMES, "qemus.py checks kernel names against axes.KERNELS")
        self.assertEqual(set(kernels.NAMES) & set(qemus.NAMES), set())

    def test_not_a_kernel(self):
        with self.assertRaises(kernels.KernelError) as cm:
            kernels.resolve(VMCE_CONFIG)
        self.assertIn("is not a kernel (neither a bzImage nor an ELF vmlinux)", str(cm.exception))
        with self.assertRaises(kernels.KernelError) as cm:
            kernels.resolve(os.path.join(self.tmp, "nothing-here"))
        self.assertIn("no such kernel file or kernel dir", str(cm.exception))

    def test_known_kernel_not_built(self):
        with self.assertRaises(kernels.KernelError) as cm:
            kernels.resolve("vmce-6.1")
        self.assertIn("the vmce-6.1 guest kernel is missing at", str(cm.exception))
        self.assertIn("run `make kernel-src`", str(cm.exception))

    def test_kernel_without_memory_failure_is_run_not_refused(self):
        boot = os.path.join(self.tmp, "boot")
        os.makedirs(boot)
        bzimage(os.path.join(boot, "vmlinuz-6.9.0"), "6.9.0")
        config(os.path.join(boot, "config-6.9.0"), drop=("CONFIG_MEMORY_FAILURE", "CONFIG_HWPOISON_INJECT"))
        k = kernels.resolve(os.path.join(boot, "vmlinuz-6.9.0"))
        self.assertEqual((k.table, k.nearest, k.missing), ("no-handler", None, ["CONFIG_MEMORY_FAILURE"]))
        self.assertEqual(k.to_dict()["handler_missing"], ["CONFIG_MEMORY_FAILURE"])

    def test_kernel_that_cannot_run_the_agent(self):
        boot = os.path.join(self.tmp, "boot")
        os.makedirs(boot)
        bzimage(os.path.join(boot, "vmlinuz-6.9.0"), "6.9.0")
        config(os.path.join(boot, "config-6.9.0"), drop=("CONFIG_VIRTIO_CONSOLE", "CONFIG_MEMORY_FAILURE"))
        with self.assertRaises(kernels.KernelError) as cm:
            kernels.resolve(os.path.join(boot, "vmlinuz-6.9.0"), prepare=True)
        self.assertIn("cannot be a vmce guest kernel: it lacks CONFIG_VIRTIO_CONSOLE, which vmce's guest "
                      "agent needs", str(cm.exception))

    def test_kernel_without_a_config(self):
        path = os.path.join(self.tmp, "vmlinuz-6.9.0")
        bzimage(path, "6.9.0")
        with self.assertRaises(kernels.KernelError) as cm:
            kernels.resolve(path, prepare=True)
        self.assertIn("no config found for 6.9.0", str(cm.exception))


class Expectations(unittest.TestCase):
    """Each kernel's rows, and a kernel vmce does not know"""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        os.environ["VMCE_BUILD_DIR"] = os.path.join(self.tmp, "build")
        for name in ("vmlinux", "guest.cpio.gz", "disk.img"):
            open(os.path.join(self.tmp, name), "w").close()
        os.environ["VMCE_KERNEL"] = os.path.join(self.tmp, "vmlinux")
        os.environ["VMCE_INITRD"] = os.path.join(self.tmp, "guest.cpio.gz")
        os.environ["VMCE_DISK"] = os.path.join(self.tmp, "disk.img")
        # the other known kernels, laid out as make kernel-src, make
        # kernel-6.12 and make kernel-7.3 leave them
        for name, release in (("vmce-6.1", "6.1.192-vmce"), ("debian-6.12", "6.12.118+deb13-amd64"),
                              ("debian-7.3", "7.3.4+deb13-amd64")):
            kdir = os.path.join(self.tmp, "build", "kernels", name)
            os.makedirs(kdir)
            vmlinux(os.path.join(kdir, "vmlinux"), release)
            with open(os.path.join(kdir, "release"), "w") as f:
                f.write(release + "\n")
            os.makedirs(os.path.join(self.tmp, "build", "images"), exist_ok=True)
            open(os.path.join(self.tmp, "build", "images", f"guest-{name}.cpio.gz"), "w").close()

    def campaign(self, kernels_line, page="ksm"):
        text = (f"[campaign]\nname = k\n[guest g]\nksm = true\nhugepages = 2\n{kernels_line}\n"
                f"[case c]\nguest = g\npage = {page}\n")
        path = os.path.join(self.tmp, "k.ini")
        with open(path, "w") as f:
            f.write(text)
        return Campaign.load(path)

    def test_each_kernel_its_own_table(self):
        c = self.campaign("kernel = debian-6.1, vmce-6.1, debian-6.12")
        self.assertEqual([case.kernel for case in c.cases], ["debian-6.1", "vmce-6.1", "debian-6.12"])
        self.assertEqual(len({case.key for case in c.cases}), 1, "the same case on three kernels")
        got = {case.kernel: expectation(case) for case in c.cases}
        self.assertEqual(got["debian-6.1"].action, ("unmapping failed page", "Ignored"))
        self.assertEqual(got["debian-6.12"].action, TABLES["debian-6.12"]["ksm"][:2])
        self.assertEqual(got["vmce-6.1"].action, TABLES["vmce-6.1"]["ksm"][:2])
        self.assertEqual([e.table for e in got.values()], ["debian-6.1", "vmce-6.1", "debian-6.12"])
        self.assertFalse(any(e.nearest for e in got.values()))
        names = {c.guest_for(case).name for case in c.cases}
        self.assertEqual(names, {"g-debian-6.1", "g-vmce-6.1", "g-debian-6.12"}, "a guest per kernel")

    def test_every_known_kernel_has_its_own_table(self):
        for name in kernels.NAMES:
            self.assertIn(name, TABLES)
            self.assertIn(name, expect.TABLE_NOTES)
            self.assertIn(name, expect.SELFTESTS["ksm-scan"])
            self.assertEqual(set(TABLES[name]), set(TABLES["debian-6.1"]), f"{name}: a row per page type")

    def test_debian_7_3_differs_from_6_12_where_its_source_does(self):
        differs = {page for page in TABLES["debian-7.3"] if TABLES["debian-7.3"][page] != TABLES["debian-6.12"][page]}
        self.assertEqual(differs, {"slab", "pagetable"})
        for page in ("slab", "pagetable"):
            case = self.campaign("kernel = debian-7.3", page=page).cases[0]
            exp = expectation(case)
            self.assertEqual((exp.action, exp.table, exp.nearest), (("reserved kernel page", "Ignored"),
                                                                   "debian-7.3", False))
        self.assertIn("debian-7.3", expect.MADVISE_IS_AR)
        k = kernels.resolve("debian-7.3")
        self.assertEqual((k.table, k.nearest, k.release), ("debian-7.3", None, "7.3.4+deb13-amd64"))

    def test_vmce_7_3_differs_from_debian_7_3_as_vmce_6_12_from_debian_6_12(self):
        # the same two fixes (guest-kernel/patches/7.3/): mlocked pages named
        # as such, the KSM page's aftermath survived
        def differs(a, b):
            return {page: TABLES[a][page] for page in TABLES[a] if TABLES[a][page] != TABLES[b][page]}
        self.assertEqual(differs("vmce-7.3", "debian-7.3"), differs("vmce-6.12", "debian-6.12"))
        self.assertEqual(set(differs("vmce-7.3", "debian-7.3")), {"ksm", "mlock-clean", "mlock-dirty"})
        self.assertEqual(expect.SELFTESTS["ksm-scan"]["vmce-7.3"][0], set())
        self.assertIn("vmce-7.3", expect.MADVISE_IS_AR)
        self.assertIn("vmce-7.3", expect.PANIC_ON_UNRECOVERABLE)

    def test_panic_on_unrecoverable_where_the_kernel_has_it(self):
        c = self.campaign("kernel = debian-6.12, debian-7.3\n[case p]\nguest = g\npage = slab\n"
                          "panic_on_unrecoverable = 1\n[case q]\nguest = g\npage = anon-dirty\n"
                          "panic_on_unrecoverable = 1", page="anon-dirty")
        by = {(case.scenario, case.kernel): case for case in c.cases}
        case = by[("p", "debian-7.3")]
        self.assertTrue(case.key.endswith(":panic-on-unrecoverable/0"), case.key)
        exp = expectation(case)
        self.assertEqual((exp.guest, exp.action), ("panic", ("reserved kernel page", "Ignored")))
        self.assertIn("then the guest panics (vm.panic_on_unrecoverable_memory_failure=1)", exp.summary)
        obs = {"panic": "Kernel panic - not syncing: Memory failure: 0x4840: unrecoverable page"}
        self.assertEqual(judge(case, exp, obs, None)[0], "pass")
        self.assertEqual(judge(case, exp, {"panic": None}, None), ("fail", ["the guest did not panic"]))
        # a kernel without the sysctl: said, not run, not failed
        case = by[("p", "debian-6.12")]
        exp = expectation(case)
        self.assertEqual(exp.guest, expect.NOT_APPLICABLE)
        verdict, reasons = judge(case, exp, None, None)
        self.assertEqual(verdict, "not applicable")
        self.assertIn("debian-6.12 has no vm.panic_on_unrecoverable_memory_failure", reasons[0])
        self.assertIn(verdict, expect.JUDGED_OK)
        # the sysctl asks nothing of a page the handler recovers
        self.assertEqual(expectation(by[("q", "debian-7.3")]).guest, "alive")
        # skipped before any boot, but for an image that learns its kernel there
        from vmcelab.runner import _not_applicable
        na = expectation(by[("p", "debian-6.12")])
        self.assertTrue(_not_applicable(by[("p", "debian-6.12")], na))
        image = types.SimpleNamespace(kernel_info=types.SimpleNamespace(kind="image", release=None))
        self.assertEqual((_not_applicable(image, na), _not_applicable(image, na, booted=True)), (False, True))
        self.assertFalse(_not_applicable(by[("p", "debian-7.3")], expectation(by[("p", "debian-7.3")])))
        self.assertEqual(by[("c", "debian-7.3")].key,
                         "c/anon-dirty/ao/early/host/recovery1/0", "a case that does not set it keeps its id")

    def test_another_known_outcome_is_checked_as_strictly(self):
        # 6.1's KSM page with late kill: nobody told, or (racy) one mapper
        # killed with AR as it touches; anything else still fails
        c = self.campaign("kernel = debian-6.1")
        text = c.path
        c = Campaign.parse(open(text).read().replace("page = ksm", "page = ksm\nkill = late"), text)
        case = c.cases[0]
        exp = expectation(case)
        self.assertEqual(len(exp.alternatives), 1)  # simulated: the racy AR only
        w = {"pid": 117, "pids": [117, 118], "va": "0x7f0000001000", "pfn": "0x298e"}
        base = {"panic": None, "qemu_alive": True, "guest_alive": True, "workloads": [w],
                "actions": {"0x298e": ["unmapping failed page", "Ignored"]}, "already": [],
                "checks": [], "victims_alive": {"117": True, "118": True},
                "aftermath": {"how": "ksm-merge", "crash": "Fatal machine check"}}
        self.assertEqual(judge(case, exp, dict(base, signals=[]), None)[0], "pass")
        ar = [{"pid": 118, "code": 4, "addr": "0x7f0000001000", "lsb": 12}]
        racy = dict(base, signals=ar, victims_alive={"117": True, "118": False},
                    aftermath={"how": "ksm-merge", "crash": None})
        verdict, reasons = judge(case, exp, racy, None)
        self.assertEqual(verdict, "pass")
        self.assertIn("the other outcome debian-6.1 gives", reasons[0])
        both = dict(racy, signals=ar + [{"pid": 117, "code": 4, "addr": "0x7f0000001000", "lsb": 12}])
        self.assertEqual(judge(case, exp, both, None)[0], "fail")
        elsewhere = dict(racy, signals=[{"pid": 118, "code": 4, "addr": "0x7f0000009000", "lsb": 12}])
        self.assertEqual(judge(case, exp, elsewhere, None)[0], "fail")
        # a real host error: the host page stays poisoned under KVM, and
        # every mapper's touch is its own AR (the host lab: both killed)
        real = Campaign.parse(open(text).read().replace("page = ksm", "page = ksm\nkill = late\n"
                                                        "inject = host-real"), text).cases[0]
        exp = expectation(real)
        self.assertEqual(len(exp.alternatives), 2)
        both_dead = dict(both, victims_alive={"117": False, "118": False})
        verdict, reasons = judge(real, exp, both_dead, None)
        self.assertEqual(verdict, "pass", reasons)
        self.assertIn("stays poisoned", reasons[0])
        self.assertEqual(judge(real, exp, racy, None)[0], "pass")
        self.assertEqual(judge(real, exp, elsewhere, None)[0], "fail")

    def test_a_qemu_named_as_a_kernel_in_a_file_or_on_the_command_line(self):
        with self.assertRaises(SpecError) as cm:
            self.campaign("kernel = debian-6.1, vmce-10.0")
        self.assertRegex(str(cm.exception), r"k\.ini:6: vmce-10\.0 is a QEMU, not a guest kernel \(known kernels: ")
        path = self.campaign("kernel = debian-6.1").path
        with self.assertRaises(SpecError) as cm:
            Campaign.load(path, kernels=["debian-10.0"])
        self.assertIn("--kernels: debian-10.0 is a QEMU, not a guest kernel", str(cm.exception))
        with self.assertRaises(SpecError) as cm:
            Campaign.load(path, qemus=["debian-7.3"])
        self.assertIn("--qemus: debian-7.3 is a guest kernel, not a QEMU", str(cm.exception))

    def test_unknown_kernel_in_a_file(self):
        with self.assertRaises(SpecError) as cm:
            self.campaign("kernel = debian-6.1, debian-9")
        self.assertRegex(str(cm.exception), r"k\.ini:6: unknown kernel 'debian-9'")

    def test_a_kernel_vmce_does_not_know_is_judged_as_the_nearest_and_says_so(self):
        kdir = os.path.join(self.tmp, "mine")
        os.makedirs(os.path.join(kdir, "modules"))
        vmlinux(os.path.join(kdir, "vmlinux"), "6.11.2-mine")
        with open(os.path.join(kdir, "release"), "w") as f:
            f.write("6.11.2-mine\n")
        config(os.path.join(kdir, "config"))
        # what mkinitramfs puts in its initramfs
        tools = os.path.join(self.tmp, "build", "meson", "images", "guest-tools")
        os.makedirs(tools)
        for tool in ("vmce-agent", "vmce-victim", "vmce-pages", "ksm_hwpoison"):
            with open(os.path.join(tools, tool), "w") as f:
                f.write("#!/bin/sh\n")
            os.chmod(os.path.join(tools, tool), 0o755)
        k = kernels.resolve(kdir)
        self.assertEqual((k.table, k.nearest, k.release), ("debian-6.12", "debian-6.12", "6.11.2-mine"))
        c = self.campaign(f"kernel = {kdir}", page="anon-dirty")
        case = c.cases[0]
        exp = expectation(case)
        self.assertTrue(exp.nearest)
        obs = {"panic": None, "qemu_alive": True, "guest_alive": True, "actions": {},
               "workloads": [], "signals": [], "already": [], "checks": []}
        verdict, reasons = judge(case, exp, obs, None)
        self.assertIn("judged as debian-6.12, the nearest known kernel to 6.11.2-mine", reasons[0])


if __name__ == "__main__":
    unittest.main()
