#!/usr/bin/env python3
"""The host lab's reading of L1's page tables (run/lib/vmcelab/lab.py):
pagemap entries, kpageflags, smaps, L1's THP mode, and when a victim's host
page does not show what its backing is about (the scenario is not run).
Its L1 hosts by name (l1hosts.py, run/hostlab --l1), and the staging of a
QEMU that runs with a root of its own (images/host/qemu-files.py), with a
small root made here of this host's loader, libc and /bin/true."""
import glob
import json
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "run", "lib"))

from vmcelab import images, l1hosts, lab, labcampaign, paths, qemus  # noqa: E402

TOP = os.path.join(HERE, "..", "..")
QEMU_FILES = os.path.join(TOP, "images", "host", "qemu-files.py")

SMAPS = """\
7f0000000000-7f0020000000 rw-p 00000000 00:00 0
Size:             524288 kB
AnonHugePages:    458752 kB
THPeligible:    1
7f0020000000-7f0020001000 rw-p 00000000 00:00 0
Size:                  4 kB
AnonHugePages:         0 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
Size:                132 kB
"""


class Pagemap(unittest.TestCase):
    def test_present(self):
        # as L1 shows a page of QEMU's RAM to root: present, exclusive (bit 56), pfn
        e = lab.pagemap_entry((1 << 63) | (1 << 56) | 0x12345)
        self.assertEqual(e, {"present": True, "swapped": False, "pfn": 0x12345})

    def test_pfn_hidden_from_non_root(self):
        self.assertEqual(lab.pagemap_entry(1 << 63)["pfn"], 0)

    def test_hwpoison_entry_is_a_swap_entry(self):
        # a poisoned anonymous page's pte: not present, a swap entry; its
        # bits are no pfn
        e = lab.pagemap_entry((1 << 62) | (0x1f << 0) | (0xabc << 5))
        self.assertEqual(e, {"present": False, "swapped": True, "pfn": None})

    def test_never_faulted(self):
        self.assertEqual(lab.pagemap_entry(0), {"present": False, "swapped": False, "pfn": None})


class PageFlags(unittest.TestCase):
    def test_thp_tail(self):
        # anon (12), lru (5), compound tail (16), thp (22)
        self.assertEqual(lab.page_kinds(1 << 12 | 1 << 5 | 1 << 16 | 1 << 22),
                         {"thp": True, "hugetlb": False, "hwpoison": False})

    def test_hugetlb_poisoned(self):
        self.assertEqual(lab.page_kinds(1 << 15 | 1 << 17 | 1 << 19),
                         {"thp": False, "hugetlb": True, "hwpoison": True})


class Smaps(unittest.TestCase):
    def test_mapping_holding_the_address(self):
        self.assertEqual(lab.smaps_anon_huge_kb(SMAPS, 0x7f0000419000), 458752)
        self.assertEqual(lab.smaps_anon_huge_kb(SMAPS, 0x7f0020000000), 0)

    def test_no_field_or_no_mapping(self):
        self.assertIsNone(lab.smaps_anon_huge_kb(SMAPS, 0x7ffd00000010))
        self.assertIsNone(lab.smaps_anon_huge_kb(SMAPS, 0x1000))


class ThpMode(unittest.TestCase):
    def test_setting(self):
        self.assertEqual(lab.thp_setting("[always] madvise never\n"), "always")
        self.assertEqual(lab.thp_setting("always madvise [never]\n"), "never")
        self.assertIsNone(lab.thp_setting(""))


class Refusal(unittest.TestCase):
    THP = {"present": True, "swapped": False, "pfn": 0x10203, "thp": True, "hugetlb": False, "hwpoison": False}
    SMALL = dict(THP, thp=False)

    def test_as_wanted(self):
        self.assertIsNone(lab.thp_refusal("thp", self.THP, 458752))
        self.assertIsNone(lab.thp_refusal("anon", self.SMALL, 0))

    def test_thp_without_a_huge_page(self):
        why = lab.thp_refusal("thp", self.SMALL, 0)
        self.assertIn("not in a transparent huge page", why)
        self.assertIn("0x10203", why)
        self.assertIn("AnonHugePages of QEMU's RAM mapping: 0 kB", why)

    def test_anon_in_a_huge_page(self):
        self.assertIn("is in a transparent huge page", lab.thp_refusal("anon", self.THP, 2048))

    def test_no_page(self):
        self.assertIn("QEMU has no page", lab.thp_refusal("thp", {"present": False, "pfn": None}, None))
        self.assertIn("QEMU has no page", lab.thp_refusal("anon", None, None))


class RebootHang(unittest.TestCase):
    """lab.reboot_hang(): a guest that did not come back from its reboot,
    the lab's nested-SVM trouble (reset once more) or the scenario's result"""
    RESET = [1700000000.5]
    VMCED_RESET = [{"type": "reset", "pages": []}]

    def hang(self, **kw):
        facts = dict(held=[], resets=self.RESET, new_boot=[], vmced=True, reset_records=self.VMCED_RESET)
        return lab.reboot_hang(**dict(facts, **kw))

    def test_hung_on_its_way_down(self):
        self.assertIn("no RESET", self.hang(resets=[], reset_records=[]))

    def test_firmware_of_the_new_boot(self):
        self.assertIn("never printed a line", self.hang())
        self.assertIn("never printed a line", self.hang(vmced=False, reset_records=[]))

    def test_a_thread_held_under_ptrace_is_not_the_lab(self):
        self.assertIsNone(self.hang(held=[4242]))
        self.assertIsNone(self.hang(held=[4242], resets=[], reset_records=[]))

    def test_vmced_recorded_no_reset(self):
        self.assertIsNone(self.hang(reset_records=[]))

    def test_the_new_boot_ran(self):
        self.assertIsNone(self.hang(new_boot=["[    0.000000] Linux version 6.1.0"]))


class Backings(unittest.TestCase):
    def test_guest_memory_per_backing(self):
        self.assertEqual(lab.l2_mem_mb("file"), lab.L2_MEM_MB)
        self.assertEqual(lab.l2_mem_mb("hugetlb-2M"), lab.L2_MEM_MB)
        # QEMU refuses a hugetlbfs backend smaller than its page
        self.assertEqual(lab.l2_mem_mb("hugetlb-1G"), 1024)

    def test_every_backing_has_its_way(self):
        for b in lab.BACKINGS:
            self.assertTrue(b == "file" or b in lab.HUGETLB or b in ("anon", "thp"), b)




def load_hostlab():
    """run/hostlab, a script, as a module"""
    loader = importlib.machinery.SourceFileLoader("hostlab", os.path.join(TOP, "run", "hostlab"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("hostlab", loader))
    loader.exec_module(module)
    return module


class Wedges(unittest.TestCase):
    """run_scenarios(): an L1 that wedges is replaced by a fresh one, which
    starts at the scenario the old one was on; a second wedged on that same
    scenario before finishing any ends the run"""

    def run_with(self, l1s):
        """Runs five scenarios over L1s that each finish @l1s[i] of what
        they are given, then wedge (None: finish all); returns the results,
        or the exit status"""
        hostlab = load_hostlab()
        boots = iter(l1s)

        def run_l1(spec, *args, **kw):
            n = next(boots)
            done = spec["scenarios"] if n is None else spec["scenarios"][:n]
            if n is None:
                return {"kernel": "6.1"}, done, False
            raise hostlab.L1Wedged({"kernel": "6.1"}, done, "no progress for 300 s")
        hostlab.run_l1 = run_l1
        hostlab.say = lambda text: None
        work = tempfile.mkdtemp(prefix="test-hostlab-")
        try:
            _, results = hostlab.run_scenarios({"scenarios": list(range(5))}, [], 60, "4G", work)
            return results
        except SystemExit as e:
            return e.code
        finally:
            shutil.rmtree(work)

    def test_a_fresh_l1_carries_on(self):
        self.assertEqual(self.run_with([2, None]), [0, 1, 2, 3, 4])

    def test_progress_between_wedges(self):
        # the second L1 wedged at once, the third after two: each scenario
        # ran once, in order
        self.assertEqual(self.run_with([0, 2, None]), [0, 1, 2, 3, 4])

    def test_the_same_scenario_twice(self):
        self.assertEqual(self.run_with([2, 0, None]), 1)
        self.assertEqual(self.run_with([0, 0, None]), 1)


class BuildDir(unittest.TestCase):
    """A build directory of its own (VMCE_BUILD_DIR)"""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test-hostlab-")
        self.old = os.environ.get("VMCE_BUILD_DIR")
        os.environ["VMCE_BUILD_DIR"] = self.tmp

    def tearDown(self):
        if self.old is None:
            del os.environ["VMCE_BUILD_DIR"]
        else:
            os.environ["VMCE_BUILD_DIR"] = self.old
        shutil.rmtree(self.tmp)

    def kernel(self, *rel):
        d = os.path.join(self.tmp, *rel)
        os.makedirs(d)
        for f in ("release", "vmlinux"):
            with open(os.path.join(d, f), "w") as fh:
                fh.write("6.12.0-test\n")


class L1Hosts(BuildDir):
    def test_unknown_lists_the_known(self):
        with self.assertRaises(l1hosts.L1Error) as e:
            l1hosts.resolve("debian-14")
        self.assertEqual(str(e.exception), "unknown L1 'debian-14' (known: debian-12, debian-13)")

    def test_default_is_debian_12_with_the_guest_kernel(self):
        self.kernel("guest-kernel")
        h = l1hosts.resolve()
        self.assertEqual((h.name, h.own_qemu, h.root, h.os_release), ("debian-12", "debian-7.2", None, None))
        self.assertEqual(h.kernel, os.path.join(self.tmp, "guest-kernel", "vmlinux"))

    def test_kernel_missing_says_how(self):
        with self.assertRaisesRegex(l1hosts.L1Error, r"debian-13 L1's kernel is missing .*make kernel-6.12"):
            l1hosts.resolve("debian-13")

    def test_not_made_is_enough_to_name_it(self):
        # run/hostlab --list: nothing built yet, nothing booted
        h = l1hosts.resolve("debian-13", made=False)
        self.assertEqual((h.name, h.own_qemu), ("debian-13", "debian-10.0"))
        with self.assertRaises(l1hosts.L1Error):
            l1hosts.resolve("debian-14", made=False)

    def test_root_missing_says_how(self):
        self.kernel("kernels", "debian-6.12")
        with self.assertRaises(l1hosts.L1Error) as e:
            l1hosts.resolve("debian-13")
        self.assertIn("Debian 13 root is missing", str(e.exception))
        self.assertIn("run `make host-root`", str(e.exception))
        self.assertNotIn("\n", str(e.exception))

    def test_rasdaemon_missing_says_how(self):
        self.kernel("kernels", "debian-6.12")
        qemu = os.path.join(self.tmp, "images", "debian-13-host", "root", "usr", "bin", "qemu-system-x86_64")
        os.makedirs(os.path.dirname(qemu))
        with open(qemu, "w") as fh:
            fh.write("#!/bin/sh\n")
        os.chmod(qemu, 0o755)
        with self.assertRaises(l1hosts.L1Error) as e:
            l1hosts.resolve("debian-13")
        self.assertIn("debian-13 L1's Debian 13 rasdaemon is missing", str(e.exception))
        self.assertIn("run `make rasdaemon-13`", str(e.exception))
        self.assertNotIn("\n", str(e.exception))

    def test_each_l1_runs_its_debians_rasdaemon(self):
        d12, d13 = l1hosts.KNOWN["debian-12"], l1hosts.KNOWN["debian-13"]
        self.assertEqual((d12.rasdaemon, d12.rasdaemon_records), ("/usr/sbin/rasdaemon", False))
        self.assertEqual((d13.rasdaemon, d13.rasdaemon_records),
                         (os.path.join(self.tmp, "rasdaemon", "debian-13", "rasdaemon"), True))

    def test_debian_13_leaves_out_debian_12s_qemu(self):
        h = l1hosts.KNOWN["debian-13"]
        self.assertIn("whose /usr/bin/qemu-system-x86_64 is its own debian-10.0", h.why_not("debian-7.2"))
        self.assertIsNone(h.why_not("vmce-10.0"))
        with self.assertRaises(qemus.QemuError):
            l1hosts.resolve_qemu(h, "debian-7.2")
        self.assertIsNone(l1hosts.KNOWN["debian-12"].why_not("debian-7.2"))

    def test_own_qemu_script_next_to_a_link_to_the_root(self):
        self.kernel("kernels", "debian-6.12")
        root = os.path.join(self.tmp, "images", "debian-13-host", "root")
        h = l1hosts.KNOWN["debian-13"]
        script = l1hosts.own_qemu_binary(h)
        self.assertEqual(script, os.path.join(paths.build_dir(), "qemus", "l1-debian-13", "qemu-system-x86_64"))
        self.assertEqual(os.readlink(os.path.join(os.path.dirname(script), "root")), root)
        with open(script) as f:
            text = f.read()
        self.assertIn('exec "$root/usr/lib64/ld-linux-x86-64.so.2" --library-path "$lib"', text)
        self.assertIn("Debian 13's own qemu-system-x86", text)
        self.assertIsNone(l1hosts.own_qemu_binary(l1hosts.KNOWN["debian-12"]))


class StagedImages(BuildDir):
    """run/hostlab --images: an image handed to L1 (stage_images), then
    found there (labcampaign.stage_images, images.resolve) as L0 had it"""

    def setUp(self):
        super().setUp()
        self.old_env = {k: os.environ.get(k) for k in (images.STAGED_ENV, "VMCE_OVMF_DIR")}
        d = os.path.join(self.tmp, "images", "debian-12")
        os.makedirs(d)
        config = "CONFIG_MEMORY_FAILURE=y\nCONFIG_X86_MCE=y\n"
        for f, text in (("disk.qcow2", "qcow2"), ("vmlinuz", "kernel"), ("initrd.img", "initrd"), ("config", config)):
            with open(os.path.join(d, f), "w") as fh:
                fh.write(text)
        self.image = images.Image("debian-12", os.path.join(d, "disk.qcow2"), "qcow2", os.path.join(d, "vmlinuz"),
                                  os.path.join(d, "initrd.img"), "root=LABEL=debian-12 ro", "6.1.0-50-amd64",
                                  config, {"firmware": "bios"})
        tools = os.path.join(self.tmp, "meson", "images", "guest-tools")
        os.makedirs(tools)
        for t in ("vmce-agent", "vmce-pages", "vmce-victim"):
            with open(os.path.join(tools, t), "w") as fh:
                fh.write(t)
        self.ovmf = os.path.join(self.tmp, "ovmf")
        os.makedirs(self.ovmf)
        for f in (images.OVMF_CODE, images.OVMF_VARS):
            with open(os.path.join(self.ovmf, f), "w") as fh:
                fh.write(f)
        os.environ["VMCE_OVMF_DIR"] = self.ovmf
        self.stage = os.path.join(self.tmp, "stage")
        os.makedirs(self.stage)

    def tearDown(self):
        for k, v in self.old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        super().tearDown()

    def test_a_read_only_disk_of_its_own_and_its_small_files(self):
        names, drives = load_hostlab().stage_images({"debian-12": self.image}, self.stage)
        self.assertEqual(drives, ["-drive", f"file={self.image.disk},format=raw,if=none,id=img0,readonly=on",
                                  "-device", "virtio-blk-pci,drive=img0,serial=vmce-img0"])
        for n in ("lab/images/0/vmlinuz", "lab/images/0/initrd.img", "lab/images/0/config", "lab/images.json",
                  "lab/ovmf/OVMF_CODE_4M.fd", "lab/guest-tools/vmce-agent", "lab/guest-tools/vmce-victim"):
            self.assertIn(n, names)
            self.assertTrue(os.path.exists(os.path.join(self.stage, n)), n)
        # the disk itself is not copied
        self.assertFalse(any(n.endswith("disk.qcow2") for n in names))
        # cpio makes a directory before what is in it
        for n in names:
            parent = os.path.dirname(n)
            if parent != "lab":
                self.assertLess(names.index(parent), names.index(n), n)

    def test_no_image_stages_nothing(self):
        self.assertEqual(load_hostlab().stage_images({}, self.stage), ([], []))

    def test_l1_finds_it_by_serial_and_resolves_it_as_l0_did(self):
        load_hostlab().stage_images({"debian-12": self.image}, self.stage)
        staged = os.path.join(self.stage, "lab", "images.json")
        # the paths L1 sees are /lab/...: here, under the stage
        with open(staged) as f:
            entries = json.load(f)
        for key in ("kernel", "initrd", "config"):
            entries["debian-12"][key] = self.stage + entries["debian-12"][key]
        with open(staged, "w") as f:
            json.dump(entries, f)
        out = os.path.join(self.tmp, "run", "images.json")
        self.assertIsNone(labcampaign.stage_images(staged, out, {"vmce-img0": "/dev/vda"}))
        got = images.resolve("debian-12")
        self.assertEqual((got.disk, got.format, got.release, got.cmdline, got.firmware),
                         ("/dev/vda", "qcow2", "6.1.0-50-amd64", "root=LABEL=debian-12 ro", "bios"))
        self.assertEqual(got.image, os.path.join(self.stage, "lab", "images", "0", "vmlinuz"))
        self.assertEqual((got.table, got.missing), ("debian-6.1", []))
        # L2 writes to an overlay, never to L1's disk
        self.assertIn("file=/dev/vda,format=qcow2,snapshot=on", " ".join(got.boot()[1]))
        self.assertEqual(os.environ["VMCE_OVMF_DIR"], os.path.join(self.stage, "lab", "ovmf"))
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "meson", "images", "guest-tools", "vmce-agent")))

    def test_a_disk_l1_does_not_see_is_one_line(self):
        load_hostlab().stage_images({"debian-12": self.image}, self.stage)
        why = labcampaign.stage_images(os.path.join(self.stage, "lab", "images.json"),
                                       os.path.join(self.tmp, "run", "images.json"), {})
        self.assertEqual(why, "image debian-12: L1 has no disk with serial vmce-img0 (it has none)")


class L1QemuSaid(unittest.TestCase):
    def test_an_abort_past_the_warnings(self):
        d = tempfile.mkdtemp(prefix="test-hostlab-")
        self.addCleanup(shutil.rmtree, d)
        hostlab = load_hostlab()
        self.assertIsNone(hostlab.l1_qemu_said(d))
        with open(os.path.join(d, "l1-qemu.log"), "w") as f:
            f.write("qemu-system-x86_64: warning: TCG doesn't support requested feature: x\n**\n"
                    "ERROR:accel/tcg/tcg-accel-ops.c:95:tcg_handle_interrupt: assertion failed: (bql_locked())\n")
        self.assertIn("assertion failed: (bql_locked())", hostlab.l1_qemu_said(d))


class Options(unittest.TestCase):
    def test_l1_option(self):
        hostlab = load_hostlab()
        self.assertEqual(hostlab.parser().parse_args(["--l1", "debian-13", "--matrix"]).l1, "debian-13")
        self.assertIsNone(hostlab.parser().parse_args([]).l1)

    def test_bad_l1_is_one_line_and_status_2(self):
        r = subprocess.run([os.path.join(TOP, "run", "hostlab"), "--l1", "debian-14", "--list"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr, "hostlab: error: unknown L1 'debian-14' (known: debian-12, debian-13)\n")


class Migrate(unittest.TestCase):
    """run/hostlab --migrate: the scenario it asks L1 for, what L1 expects
    of vmced by its kernel and the accelerator, and the line per run"""

    def test_one_ao_row_per_qemu(self):
        hostlab = load_hostlab()
        args = hostlab.parser().parse_args(["--migrate", "--accel", "kvm"])
        Q = type("Q", (), {"name": "debian-10.0"})
        self.assertEqual(hostlab.scenarios_of(args, [Q]),
                         [dict(accel="kvm", kind="ao", forwarder="vmced", kill="early", migrate=True,
                               qemu="debian-10.0")])
        self.assertEqual(lab.scenario_name(hostlab.scenarios_of(args, [Q])[0]), "kvm-ao-vmced-migrate")

    def test_what_it_does_not_take_is_one_line_and_status_2(self):
        r = subprocess.run([os.path.join(TOP, "run", "hostlab"), "--migrate", "--forwarder", "qemu", "--list"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.count("\n"), 1)
        self.assertIn("--migrate", r.stderr)

    def expected(self, release, accel):
        real = os.uname
        lab.os.uname = lambda: type("U", (), {"release": release})()
        try:
            return lab.migration_expected(accel)
        finally:
            lab.os.uname = real

    def test_expected_by_kernel_and_accel(self):
        self.assertEqual(self.expected("6.12.118+deb13-amd64", "kvm"), ("carried", "UFFDIO_POISON"))
        self.assertEqual(self.expected("6.12.118+deb13-amd64", "tcg"), ("carried", "UFFDIO_POISON"))
        self.assertEqual(self.expected("6.6.0", "kvm"), ("carried", "UFFDIO_POISON"))
        self.assertEqual(self.expected("6.1.0-57-amd64", "kvm"), ("refused", None))
        self.assertEqual(self.expected("6.1.0-57-amd64", "tcg"), ("carried", "PROT_NONE"))

    def test_the_line(self):
        hostlab = load_hostlab()
        h = l1hosts.KNOWN["debian-13"]
        r = {"scenario": {"accel": "kvm", "qemu": "debian-10.0"}, "outcome": "recovered",
             "migration": {"expected": "carried", "expected_how": "UFFDIO_POISON", "outcome": "carried",
                           "how": "UFFDIO_POISON", "took_s": 10.5, "total_time_ms": 10407, "downtime_ms": 1346,
                           "paused_us": 26318, "lent": 1, "lent_held_us": 59088, "passed": True,
                           "checks": [{"check": "a", "ok": True}, {"check": "b", "ok": True}]}}
        self.assertEqual(hostlab.migration_line(r, h),
                         "kvm L2, L1 debian-13, QEMU debian-10.0: migration carried (expected carried, by "
                         "UFFDIO_POISON), marked by UFFDIO_POISON, 10.5 s (QEMU: 10407 ms, downtime 1346 ms), "
                         "the guest waited 26.3 ms for the marks, the source's vCPUs held 59.1 ms for 1 lend(s); "
                         "checks 2/2")
        r["migration"] = {"expected": "refused", "expected_how": None, "outcome": "refused", "took_s": 0.2,
                          "passed": False, "checks": [{"check": "a", "ok": False}]}
        self.assertEqual(hostlab.migration_line(r, h),
                         "kvm L2, L1 debian-13, QEMU debian-10.0: migration refused (expected refused), 0.2 s; "
                         "checks 0/1 - FAILED")


def host_loader():
    found = [p for p in ("/lib64/ld-linux-x86-64.so.2", "/usr/lib64/ld-linux-x86-64.so.2") if os.path.exists(p)]
    return found[0] if found else None


@unittest.skipUnless(host_loader() and shutil.which("objcopy"), "needs the x86_64 loader and objcopy")
class StageOwnRoot(unittest.TestCase):
    """qemu-files.py on a QEMU with a root of its own: a root of this
    host's loader and libc, /bin/true as its "QEMU", one firmware file"""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test-own-root-")
        self.root = os.path.join(self.tmp, "q", "root")
        lib = os.path.join(self.root, "usr", "lib", "x86_64-linux-gnu")
        for d in (lib, os.path.join(self.root, "usr", "lib64"), os.path.join(self.root, "usr", "bin"),
                  os.path.join(self.root, "usr", "share", "qemu")):
            os.makedirs(d)
        shutil.copy(host_loader(), os.path.join(self.root, "usr", "lib64", "ld-linux-x86-64.so.2"))
        shutil.copy("/bin/true", os.path.join(self.root, "usr", "bin", "qemu-system-x86_64"))
        self.libc = glob.glob("/lib/x86_64-linux-gnu/libc.so.6") or glob.glob("/usr/lib/x86_64-linux-gnu/libc.so.6")
        shutil.copy(self.libc[0], lib)
        with open(os.path.join(self.root, "usr", "share", "qemu", "pvh.bin"), "wb") as f:
            f.write(b"\0" * 512)
        self.script = os.path.join(self.tmp, "q", "qemu-system-x86_64")
        subprocess.run([os.path.join(TOP, "qemu-patches", "own-libs-wrapper"), self.script, "a test QEMU"],
                       check=True)
        self.stage = os.path.join(self.tmp, "stage")
        os.makedirs(self.stage)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def stage_it(self):
        return subprocess.run([sys.executable, QEMU_FILES, self.stage, "/opt/qemus/own", self.script],
                              capture_output=True, text=True)

    def test_staged_with_its_root_and_runs_from_there(self):
        r = self.stage_it()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("1 firmware file(s), 0 module(s), 1 of its own librar(ies)", r.stdout)
        where = os.path.join(self.stage, "opt", "qemus", "own", "bin")
        for rel in ("qemu-system-x86_64", "root/usr/lib64/ld-linux-x86-64.so.2", "root/usr/bin/qemu-system-x86_64",
                    "root/usr/lib/x86_64-linux-gnu/libc.so.6", "root/usr/share/qemu/pvh.bin"):
            self.assertTrue(os.path.isfile(os.path.join(where, rel)), rel)
        # the script as it was: it finds the staged root next to itself
        with open(self.script) as a, open(os.path.join(where, "qemu-system-x86_64")) as b:
            self.assertEqual(a.read(), b.read())
        self.assertEqual(subprocess.run([os.path.join(where, "qemu-system-x86_64"), "--version"]).returncode, 0)
        # nothing staged at this host's own paths
        self.assertFalse(os.path.exists(os.path.join(self.stage, "lib")))

    def test_a_library_from_outside_the_root_is_refused(self):
        os.unlink(os.path.join(self.root, "usr", "lib", "x86_64-linux-gnu", "libc.so.6"))
        r = self.stage_it()
        self.assertNotEqual(r.returncode, 0)
        self.assertRegex(r.stderr, r"qemu-files: .*(libc.so.6|not in its root)")

    def test_a_script_without_a_root_is_refused(self):
        shutil.rmtree(self.root)
        r = self.stage_it()
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not a QEMU run with its own libraries", r.stderr)

    def test_hostlab_stages_it(self):
        hostlab = load_hostlab()

        class Q:
            label, binary = "own", self.script
        self.assertIsNone(hostlab.lab_cannot_stage(Q))
        shutil.rmtree(self.root)
        self.assertIn("no root of its own", hostlab.lab_cannot_stage(Q))


if __name__ == "__main__":
    unittest.main()
