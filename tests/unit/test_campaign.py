#!/usr/bin/env python3
"""Campaign files: what they expand to, and their errors (file:line: problem)."""
import json
import os
import sys
import tempfile
import unittest
import unittest.mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "run", "lib"))

from vmcelab import campaign as campaign_mod  # noqa: E402
from vmcelab import qemus  # noqa: E402
from vmcelab.campaign import Campaign, SpecError  # noqa: E402
from vmcelab.expect import expectation, judge  # noqa: E402
from vmcelab.runner import GuestVm, qemu_identity  # noqa: E402


class Files(unittest.TestCase):
    """Campaign files read here: the guest kernel, image and disk are empty
    files"""

    def setUp(self):
        # the guest kernel, image and disk need not exist for these tests
        self.tmp = tempfile.mkdtemp()
        for name in ("vmlinux", "guest.cpio.gz", "disk.img"):
            open(os.path.join(self.tmp, name), "w").close()
        os.environ["VMCE_KERNEL"] = os.path.join(self.tmp, "vmlinux")
        os.environ["VMCE_INITRD"] = os.path.join(self.tmp, "guest.cpio.gz")
        os.environ["VMCE_DISK"] = os.path.join(self.tmp, "disk.img")
        # QEMU: Debian's, the real one, unless a test asks for another
        os.environ.pop("VMCE_QEMU", None)

    def parse(self, text, **kw):
        return Campaign.parse(text, "test.ini", **kw)

    def error(self, text):
        with self.assertRaises(SpecError) as cm:
            self.parse(text)
        return str(cm.exception)


class Spec(Files):
    def test_matrix_expands(self):
        c = self.parse("""
[campaign]
name = t
repetitions = 2
[guest g]
hugepages = 2
[matrix m]
pages = anon-dirty, hugetlb
kinds = ao, ar
kill = early, late
""")
        self.assertEqual(len(c.cases), 2 * 2 * 2 * 2)
        self.assertEqual(len({case.id for case in c.cases}), len(c.cases))
        self.assertEqual(c.cases[0].id, "m/anon-dirty/ao/early/host/recovery1/0@debian-6.1")

    def test_quick_file_is_valid(self):
        c = Campaign.load(os.path.join(HERE, "..", "..", "run", "campaigns", "quick.ini"))
        self.assertGreater(len(c.cases), 10)
        # every quick case has an expectation written down
        self.assertEqual([case.id for case in c.cases if expectation(case) is None], [])

    def test_unknown_key_names_its_line(self):
        msg = self.error("[campaign]\nname = t\n\n[matrix m]\npages = anon-dirty\ncolour = blue\n")
        self.assertTrue(msg.startswith("test.ini:6: unknown key 'colour' in [matrix m]"), msg)

    def test_unknown_section(self):
        msg = self.error("[campaign]\n[scenario x]\npage = anon-dirty\n")
        self.assertTrue(msg.startswith("test.ini:2: unknown section [scenario x]"), msg)

    def test_bad_values(self):
        self.assertIn("test.ini:3: 'anon-dirt' is not a pages",
                      self.error("[matrix m]\n# typo\npages = anon-dirt\n"))
        self.assertIn("test.ini:2: 'repetitions' must be at least 1",
                      self.error("[campaign]\nrepetitions = 0\n[case c]\n"))
        self.assertIn("test.ini:2: 'seed' must be a number",
                      self.error("[campaign]\nseed = lots\n[case c]\n"))
        self.assertIn("no [guest big]", self.error("[case c]\nguest = big\n"))

    # every error campaign.SECTIONS' keys can give: (file, what it says)
    BAD_VALUES = (
        ("[guest g]\nksm = sometimes\n[case c]\n", "test.ini:2: 'ksm' must be true or false"),
        ("[guest g]\nhugepages = -1\n[case c]\n", "test.ini:2: 'hugepages' must be at least 0"),
        ("[case c]\nburst = many\n", "test.ini:2: 'burst' must be a number, not 'many'"),
        ("[case c]\nkill = never\n",
         "test.ini:2: 'never' is not a kill (known: early, late, prctl-early, prctl-late)"),
        ("[guest g]\naccel = hvf\n[case c]\n", "test.ini:2: 'hvf' is not a accel (known: tcg, kvm)"),
        ("[campaign]\norder = sorted\n[case c]\n", "test.ini:2: 'sorted' is not a order (known: file, random)"),
        # a number out of a set of numbers (this was a TypeError), alone and in a list
        ("[case c]\nrecovery = 2\n", "test.ini:2: '2' is not a recovery (known: 0, 1)"),
        ("[matrix m]\nrecovery = 1, 2\n", "test.ini:2: '2' is not a recovery (known: 0, 1)"),
        # a list item that is not a number (this was a ValueError)
        ("[matrix m]\nrecovery = 1, on\n", "test.ini:2: 'recovery' must be a number, not 'on'"),
        ("[matrix m]\nkinds = ao,\n  ae\n", "test.ini:2: 'ae' is not a kinds (known: ao, ar)"),
        ("[guest g]\n[case c]\nexpect = x\nmem = 1G\n",
         "test.ini:4: unknown key 'mem' in [case c] (known: burst, expect, forwarder, guest, inject, kill, "
         "kind, page, panic_on_unrecoverable, recovery, repeat)"),
        ("[case c]\npanic_on_unrecoverable = 2\n",
         "test.ini:2: '2' is not a panic_on_unrecoverable (known: 0, 1)"),
    )

    def test_each_kind_of_bad_value(self):
        for text, said in self.BAD_VALUES:
            with self.subTest(text=text):
                self.assertEqual(self.error(text), said)

    def test_defaults(self):
        c = self.parse("[campaign]\n[guest g]\nmem =\ncpu =\n[matrix m]\n")
        self.assertEqual((c.name, c.seed, c.concurrency, c.repetitions, c.max_poisoned, c.reuse, c.restore,
                          c.order), ("test", 1, 1, 1, 48, True, True, "file"))
        g = c.guests["g"]
        self.assertEqual((g.mem, g.cpus, g.accel, g.cpu, g.hugepages, g.ksm, g.disk),
                         ("512M", 1, "tcg", campaign_mod.DEFAULT_CPU, 0, False, True))
        self.assertEqual([case.id for case in c.cases], ["m/anon-dirty/ao/early/host/recovery1/0@debian-6.1"])
        # no [campaign]: the name is "campaign", whatever the file's
        self.assertEqual(self.parse("[case c]\n").name, "campaign")

    def test_command_line_lists_are_named_as_such(self):
        with self.assertRaises(SpecError) as cm:
            self.parse("[guest g]\n[case c]\n", kernels=["debian-6.1", "debian-6.1"])
        self.assertEqual(str(cm.exception), "test.ini: --kernels: a kernel is named twice in "
                                            "'debian-6.1, debian-6.1'")

    def test_guest_cannot_set_it_up(self):
        msg = self.error("[guest g]\nhugepages = 0\n[case c]\npage = hugetlb\n")
        self.assertTrue(msg.startswith("test.ini:4: page hugetlb needs hugepages"), msg)
        msg = self.error("[guest g]\n[case c]\npage = ksm\n")
        self.assertIn("needs KSM", msg)

    def test_host_real(self):
        hostlab = Campaign.load(os.path.join(HERE, "..", "..", "run", "campaigns", "hostlab.ini"))
        self.assertTrue(all(c.inject == "host-real" and c.host_side for c in hostlab.cases))
        self.assertEqual([c.id for c in hostlab.cases if expectation(c) is None], [])
        msg = self.error("[matrix m]\npages = anon-dirty\ninject = host-real\nrepeat = true\n")
        self.assertTrue(msg.startswith("test.ini:4: repeat needs inject = host"), msg)
        msg = self.error("[matrix m]\npages = anon-dirty, slab\nkinds = ar\ninject = host-real\n")
        self.assertTrue(msg.startswith("test.ini:3: a consumed (ar) host-real error needs a process page"),
                        msg)
        # where the host kernel cannot poison, said with the line, before anything runs
        c = self.parse("[case a]\n[case b]\n# real\ninject = host-real\n")
        self.assertEqual(c.host_real_line, 4)
        can = campaign_mod.host_can_poison
        try:
            campaign_mod.host_can_poison = lambda: False
            with self.assertRaises(SpecError) as cm:
                c.check_host()
            self.assertTrue(str(cm.exception).startswith("test.ini:4: inject = host-real needs a host "
                                                         "kernel with MEMORY_FAILURE"), cm.exception)
            self.parse("[case a]\n").check_host()  # simulated errors need nothing of the host
            campaign_mod.host_can_poison = lambda: True
            c.check_host()
        finally:
            campaign_mod.host_can_poison = can

    def test_errors_both_ways(self):
        """--errors: every host error made simulated or real; a real one a
        case cannot have is that case's "not run (why)", not the whole
        file's error; a guest-made error has no real one"""
        text = ("[matrix m]\npages = anon-dirty, slab\nkinds = ao, ar\n"
                "[case again]\nrepeat = true\n[case qemu-ar]\nkind = ar\nforwarder = qemu\n"
                "[case g]\ninject = guest-madvise\n")
        real = self.parse(text, errors="real")
        by = {c.id.split("/")[0] + "/" + c.page + "/" + c.kind: c for c in real.cases}
        self.assertEqual(by["m/anon-dirty/ar"].inject, "host-real")
        self.assertIsNone(by["m/anon-dirty/ar"].not_real)
        self.assertIn("kernel memory", by["m/slab/ar"].not_real)
        self.assertIsNone(by["m/slab/ao"].not_real)
        self.assertIn("already poisoned", by["again/anon-dirty/ao"].not_real)
        self.assertIn("ignore-ao", by["qemu-ar/anon-dirty/ar"].not_real)
        self.assertIn("the guest makes this error", by["g/anon-dirty/ao"].not_real)
        self.assertEqual(real.host_real_line, 1)  # the first section made real
        sim = self.parse(text, errors="simulated")
        self.assertTrue(all(c.inject == "host" and c.not_real is None for c in sim.cases if c.host_side))
        # the same rows either way
        self.assertEqual(sorted(c.error_key for c in sim.cases if c.host_side),
                         sorted(c.error_key for c in real.cases if c.host_side))
        with self.assertRaises(SpecError) as cm:
            self.parse("[case a]\n", errors="bogus")
        self.assertIn("--errors bogus", str(cm.exception))
        full = Campaign.load(os.path.join(HERE, "..", "..", "run", "campaigns", "full.ini"), errors="real")
        self.assertEqual([c.id for c in full.cases if c.host_side and c.not_real], [])
        self.assertEqual([c.id for c in full.cases if c.host_side and expectation(c) is None], [])

    def test_amd_guests_poll_their_banks(self):
        """The guests whose set-up asks for a bank poll every second: AMD
        models (a deferred error is found by polling), by model or vendor"""
        from vmcelab.runner import amd_cpu
        self.assertTrue(amd_cpu("EPYC,succor=on,overflow-recov=on"))
        self.assertTrue(amd_cpu("EPYC-Milan"))
        self.assertTrue(amd_cpu("qemu64,vendor=AuthenticAMD"))
        self.assertFalse(amd_cpu("Skylake-Client"))
        self.assertFalse(amd_cpu(campaign_mod.DEFAULT_CPU))

    def test_selftest_page_goes_with_its_own_injection(self):
        """page = ksm-scan is the series' selftest: it makes its own errors,
        inject = guest-selftest, and nothing else makes them"""
        c = self.parse("[guest g]\nksm = true\n[case k]\npage = ksm-scan\ninject = guest-selftest\n")
        self.assertEqual(c.cases[0].id, "k/ksm-scan/ao/early/guest-selftest/recovery1/0@debian-6.1")
        self.assertEqual(expectation(c.cases[0]).selftest[0], "ksm_hwpoison")
        msg = self.error("[guest g]\nksm = true\n[case k]\npage = ksm-scan\n")
        self.assertIn("page = ksm-scan and inject = host do not go together", msg)
        msg = self.error("[case k]\npage = anon-dirty\ninject = guest-selftest\n")
        self.assertIn("page = anon-dirty and inject = guest-selftest do not go together", msg)
        msg = self.error("[case k]\npage = ksm-scan\ninject = guest-selftest\n")
        self.assertIn("page ksm-scan needs KSM", msg)
        # --errors real: the guest makes it, so it is not run, with why
        real = self.parse("[guest g]\nksm = true\n[case k]\npage = ksm-scan\ninject = guest-selftest\n",
                          errors="real")
        self.assertIn("the guest makes this error", real.cases[0].not_real)

    def test_syntax_error(self):
        msg = self.error("[campaign\nname = x\n")
        self.assertTrue(msg.startswith("test.ini"), msg)

    def test_missing_guest_image(self):
        os.environ["VMCE_INITRD"] = "/nonexistent/guest.cpio.gz"
        msg = self.error("[case c]\n")
        self.assertIn("the debian-6.1 guest image is missing at /nonexistent/guest.cpio.gz: run `make image`", msg)

    def test_empty(self):
        self.assertIn("names no cases", self.error("[campaign]\nname = x\n"))

    def test_random_order_is_seeded(self):
        text = "[campaign]\norder = random\nseed = %d\n[matrix m]\npages = anon-dirty, shmem, thp, free\nkill = early, late\n"
        a = [c.id for c in self.parse(text % 3).ordered()]
        b = [c.id for c in self.parse(text % 3).ordered()]
        c = [c.id for c in self.parse(text % 4).ordered()]
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)


def built(name):
    """The real QEMU @name where it is built here, else None"""
    try:
        return qemus.resolve(name)
    except qemus.QemuError:
        return None


class Qemus(Files):
    """QEMU as an axis: `qemu` in a [guest], --qemus, forwarder = qemu, cpu.
    The QEMUs are real binaries: Debian's 7.2 (always installed here), and
    debian-10.0 or vmce-10.0 where `make qemus` built them (tests that need
    one say so and skip without it)"""

    def other(self):
        """A second real QEMU: a known one if built, else Debian's 7.2 by a
        path of its own (a QEMU vmce judges as the nearest known one)"""
        for name in ("debian-10.0", "vmce-10.0"):
            if built(name):
                return name
        link = os.path.join(self.tmp, "qemu-system-x86_64")
        if not os.path.exists(link):
            os.symlink("/usr/bin/qemu-system-x86_64", link)
        return link

    def test_one_qemu_keeps_the_ids(self):
        c = self.parse("[matrix m]\npages = anon-dirty\n")
        self.assertEqual(c.cases[0].id, "m/anon-dirty/ao/early/host/recovery1/0@debian-6.1")
        self.assertEqual(c.cases[0].qemu, "debian-7.2")
        d = c.cases[0].to_dict()
        self.assertEqual((d["qemu"], d["qemu_info"]["name"], d["qemu_info"]["table"], d["forwarder"]),
                         ("debian-7.2", "debian-7.2", "debian-7.2", "vmced"))
        self.assertRegex(d["qemu_info"]["release"], r"^7\.2")
        self.assertEqual(c.guest_for(c.cases[0]).name, "guest", "the default QEMU names no VM")

    def test_every_case_under_each_qemu(self):
        other = self.other()
        c = self.parse(f"[guest g]\nkernel = debian-6.1\nqemu = debian-7.2, {other}\n"
                       "[matrix m]\npages = anon-dirty, shmem\n")
        name = c.qemus[other].name
        self.assertEqual([(case.page, case.qemu) for case in c.cases],
                         [("anon-dirty", "debian-7.2"), ("shmem", "debian-7.2"),
                          ("anon-dirty", name), ("shmem", name)], "one QEMU's cases together")
        self.assertEqual([case.id for case in c.cases[::2]],
                         ["m/anon-dirty/ao/early/host/recovery1/0@debian-6.1@qemu=debian-7.2",
                          f"m/anon-dirty/ao/early/host/recovery1/0@debian-6.1@qemu={name}"])
        self.assertEqual(len({case.key for case in c.cases}), 2, "the same cases under two QEMUs")
        guests = {c.guest_for(case).name for case in c.cases}
        self.assertEqual(guests, {"g-debian-7.2", f"g-{qemus.slug(name)}"}, "a guest (and a template) each")
        self.assertEqual(c.qemu_names, ["debian-7.2", name])
        # --qemus replaces every guest's own, and order = random keeps each QEMU's together
        c = self.parse("[campaign]\norder = random\n[matrix m]\npages = anon-dirty, shmem, thp, free\n",
                       qemus=[other, "debian-7.2"])
        order = [case.qemu for case in c.ordered()]
        self.assertEqual(order, [name] * 4 + ["debian-7.2"] * 4)

    def test_kernels_times_qemus(self):
        other = self.other()
        c = self.parse(f"[guest g]\nqemu = debian-7.2, {other}\n[case c]\n")
        self.assertEqual(len(c.cases), 2)
        self.assertTrue(all("@debian-6.1@qemu=" in case.id for case in c.cases))

    def test_bad_qemus(self):
        msg = self.error("[guest g]\nmem = 512M\nqemu = debian-7.2, debian-8.2\n[case c]\n")
        self.assertTrue(msg.startswith("test.ini:3: unknown QEMU 'debian-8.2' (known: debian-7.2, debian-10.0, "
                                       "vmce-10.0, vmce-10.2, debian-11.1, or a PATH to a qemu-system-x86_64)"), msg)
        # a name vmce knew once: where it went, and what to use
        msg = self.error("[guest g]\nqemu = vmce-7.2\n[case c]\n")
        self.assertRegex(msg, r"^test\.ini:2: QEMU vmce-7\.2 was retired in part 20: its series is in git at "
                              r"0093f79 .*; use vmce-10\.0 or vmce-10\.2$")
        with self.assertRaises(SpecError) as cm:
            self.parse("[case c]\n", qemus=["debian-7.2", "qemu-8"])
        self.assertTrue(str(cm.exception).startswith("test.ini: --qemus: unknown QEMU 'qemu-8'"), cm.exception)
        os.environ["VMCE_QEMU"] = "debian-9"
        self.assertIn("test.ini: VMCE_QEMU=debian-9: unknown QEMU 'debian-9'", self.error("[case c]\n"))
        os.environ.pop("VMCE_QEMU")
        self.assertIn("test.ini:2: /bin/true is not a QEMU", self.error("[guest g]\nqemu = /bin/true\n[case c]\n"))
        self.assertIn("test.ini:2: a QEMU is named twice",
                      self.error("[guest g]\nqemu = debian-7.2, debian-7.2\n[case c]\n"))
        # not built: what makes it
        saved = os.environ.get("VMCE_BUILD_DIR")
        os.environ["VMCE_BUILD_DIR"] = os.path.join(self.tmp, "empty-build")
        try:
            msg = self.error("[guest g]\n# patched\nqemu = vmce-10.0\n[case c]\n")
        finally:
            if saved is None:
                os.environ.pop("VMCE_BUILD_DIR")
            else:
                os.environ["VMCE_BUILD_DIR"] = saved
        self.assertRegex(msg, r"^test\.ini:3: QEMU vmce-10\.0 is missing at \S+: run `make qemu`$")

    def test_cpu(self):
        c = self.parse("[guest g]\n[case c]\n")
        self.assertEqual((c.guests["g"].cpu, c.cases[0].cpu), ("Skylake-Client", "Skylake-Client"))
        c = self.parse("[guest g]\ncpu = Skylake-Client,-hle\n[case c]\n")
        self.assertEqual(c.guest_for(c.cases[0]).cpu, "Skylake-Client,-hle")
        self.assertEqual(qemus.cpu_features("EPYC,succor=on,overflow-recov=on"), {"succor"})
        self.assertEqual(qemus.cpu_features("EPYC,+succor"), {"succor"})
        self.assertEqual(qemus.cpu_features("EPYC,succor=off"), set())
        # a QEMU too old for what the CPU asks: named, with the line
        msg = self.error("[guest amd]\naccel = tcg\ncpu = EPYC,succor=on\n[case c]\n")
        self.assertRegex(msg, r"^test\.ini:3: QEMU debian-7\.2 \(7\.2[^)]*\) is too old for succor "
                              r"\(-cpu EPYC,succor=on\): .* needs QEMU 9\.1 or vmce's series")
        self.assertIn("test.ini:2: 'EPYC succor' is not a -cpu model",
                      self.error("[guest g]\ncpu = EPYC succor\n[case c]\n"))
        for name in ("debian-10.0", "vmce-10.0"):
            if built(name):
                c = self.parse(f"[guest amd]\nqemu = {name}\naccel = kvm\ncpu = EPYC,succor=on\n[case c]\n")
                self.assertEqual(c.cases[0].cpu, "EPYC,succor=on")
                # TCG leaves SUCCOR out: an AMD guest there cannot recover
                msg = self.error(f"[guest amd]\nqemu = {name}\ncpu = EPYC,succor=on\n[case c]\n")
                self.assertTrue(msg.startswith("test.ini:3: -cpu EPYC,succor=on under TCG: QEMU gives a guest "
                                               "SUCCOR under KVM only"), msg)

    def test_forwarder(self):
        c = self.parse("[matrix m]\npages = anon-dirty\nforwarder = vmced, qemu\n")
        self.assertEqual([case.id for case in c.cases],
                         ["m/anon-dirty/ao/early/host/recovery1/0@debian-6.1",
                          "m/anon-dirty/ao/early/host/recovery1:by-qemu/0@debian-6.1"])
        self.assertEqual(c.cases[1].to_dict()["forwarder"], "qemu")
        msg = self.error("[case c]\ninject = guest-madvise\nforwarder = qemu\n")
        self.assertTrue(msg.startswith("test.ini:3: forwarder = qemu needs a host error (inject = host or "
                                       "host-real)"), msg)
        msg = self.error("[matrix m]\nkinds = ao, ar\ninject = host-real\nforwarder = qemu\n")
        self.assertTrue(msg.startswith("test.ini:2: a consumed (ar) host-real error needs vmced to hold back"),
                        msg)
        self.assertIn("test.ini:2: 'libvirt' is not a forwarder (known: vmced, qemu)",
                      self.error("[case c]\nforwarder = libvirt\n"))
        self.parse("[case c]\ninject = host-real\nforwarder = qemu\n")  # a real AO: fine

    def test_qemu_dies_under_tcg(self):
        """Debian's QEMU aborts on a host error under TCG: that is what is
        expected of it, a pass when it does, and a fresh guest after"""
        c = self.parse("[case c]\nforwarder = qemu\n")
        case = c.cases[0]
        exp = expectation(case)
        self.assertEqual((exp.guest, exp.qemu_table, exp.qemu[0]), ("qemu-died", "debian-7.2", "dies"))
        self.assertIn("QEMU dies", exp.summary)
        self.assertEqual(exp.to_dict()["qemu"], "dies")
        died = dict(panic=None, guest_alive=False, qemu_alive=False, actions={}, signals=[], workloads=[],
                    qemu_exit={"how": "killed by signal 6 (SIGABRT)", "status": -6,
                               "said": "qemu_mutex_lock_impl: Assertion `mutex->initialized' failed."})
        verdict, why = judge(case, exp, died, None)
        self.assertEqual(verdict, "pass")
        self.assertIn("QEMU died (killed by signal 6 (SIGABRT): qemu_mutex_lock_impl", why[0])
        self.assertIn("as debian-7.2 does", why[0])
        lived = dict(died, qemu_alive=True, guest_alive=True, qemu_exit=None)
        verdict, why = judge(case, exp, lived, None)
        self.assertEqual(verdict, "fail")
        self.assertIn("QEMU lived on, though debian-7.2 dies of it", why[0])
        # the runner boots a spare for it, as for a guest-ending case
        from vmcelab.runner import _ends_guest
        self.assertTrue(_ends_guest(case))
        self.assertFalse(_ends_guest(self.parse("[case c]\n").cases[0]))

    def test_a_qemu_that_forwards_is_judged_by_the_kernel(self):
        q = built("vmce-10.0")
        if q is None:
            self.skipTest("vmce-10.0 is not built here (make qemu)")
        c = self.parse("[case c]\nforwarder = qemu\n", qemus=["vmce-10.0"])
        case = c.cases[0]
        exp = expectation(case)
        self.assertEqual((exp.guest, exp.qemu[0], exp.action), ("alive", "forwards", ("dirty LRU page", "Recovered")))
        self.assertIn("QEMU (vmce-10.0) forwards it itself", exp.summary)
        self.assertIn("0005", exp.note)

    def test_a_qemu_by_path_is_judged_as_the_nearest_and_every_verdict_says_so(self):
        link = os.path.join(self.tmp, "qemu-system-x86_64")
        os.symlink("/usr/bin/qemu-system-x86_64", link)
        c = self.parse("[case c]\nforwarder = qemu\n[case d]\n", qemus=[link])
        by_qemu, by_vmced = c.cases
        exp = expectation(by_qemu)
        self.assertEqual((exp.qemu_table, exp.qemu_nearest), ("debian-7.2", True))
        died = dict(panic=None, guest_alive=False, qemu_alive=False, actions={}, signals=[], workloads=[])
        verdict, why = judge(by_qemu, exp, died, None)
        self.assertEqual(verdict, "pass")
        self.assertRegex(why[0], r"^QEMU judged as debian-7\.2, the nearest known QEMU to 7\.2")
        self.assertEqual(by_qemu.to_dict()["qemu_info"]["nearest"], "debian-7.2")
        # vmced forwards the other: what QEMU does by itself is not judged
        self.assertFalse(expectation(by_vmced).qemu_nearest)

    def test_a_consumed_error_left_to_debian_qemu_kills_it(self):
        # vmced passes a consumed error on as the kernel forces it on a
        # thread that blocks SIGBUS (host-daemon decision.c,
        # vmce_decide_pass_how()): QEMU is killed, as without vmced
        c = self.parse("[case c]\nkind = ar\nforwarder = qemu\n")
        exp = expectation(c.cases[0])
        self.assertEqual((exp.guest, exp.qemu[0]), ("qemu-died", "dies"))

    def test_resuming_under_another_qemu_runs_the_cases_again(self):
        c = self.parse("[matrix m]\npages = anon-dirty, shmem\n")
        a, b = c.cases
        mine = {"case": a.to_dict()}
        other = {"case": dict(b.to_dict(), qemu="debian-10.0")}
        old = {"case": {k: v for k, v in b.to_dict().items() if k != "qemu"}}  # before QEMUs were recorded
        done, todo = c.split_done({a.id: mine, b.id: other})
        self.assertEqual((list(done), [t.id for t in todo]), ([a.id], [b.id]))
        done, todo = c.split_done({a.id: mine, b.id: old})
        self.assertEqual((sorted(done), todo), (sorted([a.id, b.id]), []))

    def test_a_template_is_restored_only_under_the_qemu_that_saved_it(self):
        other = self.other()
        c = self.parse(f"[guest g]\nqemu = debian-7.2, {other}\n[case c]\n")
        first, second = (c.guest_for(case) for case in c.cases)
        gvm = GuestVm(first, 0, self.tmp, None, [], restore=True)
        gvm.template = (os.path.join(self.tmp, "g.template"), qemu_identity(first.qemu))
        self.assertEqual(gvm._template(), os.path.join(self.tmp, "g.template"))
        gvm.spec = second
        self.assertIsNone(gvm._template(), "another QEMU's saved guest is booted afresh instead")


class Judging(unittest.TestCase):
    def case(self, **kw):
        return campaign_mod.Case("s", "g", **kw)

    def obs(self, **kw):
        o = dict(workloads=[{"pid": 10, "pids": [10], "va": "0x7f0000001000", "pfn": "0x42"}],
                 actions={"0x42": ("dirty LRU page", "Recovered")}, already=[], signals=[
                     {"pid": 10, "code": 5, "code_name": "BUS_MCEERR_AO", "addr": "0x7f0000001000",
                      "lsb": 12}], checks=[], panic=None, trouble=[], guest_alive=True,
                 qemu_alive=True, hardware_corrupted_kb=4, overflows=[])
        o.update(kw)
        return o

    def test_pass(self):
        c = self.case(page="anon-dirty")
        self.assertEqual(judge(c, expectation(c), self.obs(), None)[0], "pass")

    def test_wrong_signal_fails(self):
        c = self.case(page="anon-dirty")
        obs = self.obs(signals=[{"pid": 10, "code": 4, "addr": "0x7f0000001000", "lsb": 12}])
        verdict, why = judge(c, expectation(c), obs, None)
        self.assertEqual(verdict, "fail")
        self.assertIn("si_code 4", why[0])

    def test_warning_is_unexpected(self):
        c = self.case(page="anon-dirty")
        obs = self.obs(trouble=["WARNING: CPU: 0 PID: 1 at mm/memory-failure.c:1"])
        self.assertEqual(judge(c, expectation(c), obs, None)[0], "unexpected")

    def test_recovery_off_panic_passes(self):
        c = self.case(page="anon-dirty", recovery=0)
        obs = self.obs(panic="Memory failure on page 42", guest_alive=False, actions={})
        self.assertEqual(judge(c, expectation(c), obs, None)[0], "pass")
        self.assertEqual(judge(c, expectation(c), self.obs(), None)[0], "fail")

    def test_clean_anon_is_signalled_only_on_touch(self):
        early = self.case(page="anon-clean")
        obs = self.obs(actions={"0x42": ("clean LRU page", "Recovered")}, signals=[])
        self.assertEqual(judge(early, expectation(early), obs, None)[0], "pass")
        late = self.case(page="anon-clean", kill="late")
        self.assertEqual(judge(late, expectation(late), obs, None)[0], "fail")
        obs["signals"] = [{"pid": 10, "code": 4, "addr": "0x7f0000001000", "lsb": 12}]
        self.assertEqual(judge(late, expectation(late), obs, None)[0], "pass")

    def test_consumed_shared_page(self):
        c = self.case(page="shared", kind="ar")
        sig = lambda pid, code: {"pid": pid, "code": code, "addr": "0x7f0000001000", "lsb": 12}  # noqa: E731
        w = [{"pid": 10, "pids": [10, 11], "va": "0x7f0000001000", "pfn": "0x42"}]
        right = self.obs(workloads=w, signals=[sig(10, 4), sig(11, 5)])
        self.assertEqual(judge(c, expectation(c), right, None)[0], "pass")
        swapped = self.obs(workloads=w, signals=[sig(10, 5), sig(11, 4)])
        verdict, why = judge(c, expectation(c), swapped, None)
        self.assertEqual(verdict, "fail")
        self.assertEqual(len(why), 2)

    def test_kernel_page_aftermath(self):
        c = self.case(page="pagetable")
        ignored = {"0x42": ("unknown page", "Ignored")}
        obs = self.obs(actions=ignored, signals=[], aftermath={"how": "exit", "crash": "Fatal machine check"})
        self.assertEqual(judge(c, expectation(c), obs, None)[0], "pass")
        obs["aftermath"] = {"how": "exit", "crash": None}
        self.assertEqual(judge(c, expectation(c), obs, None)[0], "fail")
        guest_side = self.case(page="pagetable", inject="guest-corrupt-pfn")
        self.assertIsNone(expectation(guest_side).aftermath)

    def test_ksmd_may_read_it_first(self):
        c = self.case(page="ksm")
        obs = self.obs(actions={"0x42": ("unmapping failed page", "Ignored")}, signals=[],
                       panic="Fatal machine check", guest_alive=False)
        verdict, why = judge(c, expectation(c), obs, None)
        self.assertEqual(verdict, "pass")
        self.assertIn("on its own", why[-1])
        other = self.case(page="anon-dirty")
        self.assertEqual(judge(other, expectation(other), obs, None)[0], "fail")
        # a user access had the page unmapped from the direct map: ksmd oopses
        oops = self.obs(actions={"0x42": ("unmapping failed page", "Ignored")}, signals=[],
                        trouble=["BUG: unable to handle page fault for address: ffff888007759000"])
        verdict, why = judge(c, expectation(c), oops, None)
        self.assertEqual(verdict, "pass", why)
        self.assertIn("BUG: unable to handle page fault", why[-1])

    def test_killed_bystander_fails(self):
        c = self.case(page="pagecache-clean")
        obs = self.obs(actions={"0x42": ("clean LRU page", "Recovered")}, signals=[],
                       checks=[{"reread_ok": True}], victims_alive={"10": False})
        verdict, why = judge(c, expectation(c), obs, None)
        self.assertEqual(verdict, "fail")
        self.assertIn("nobody was to be signalled", why[0])
        obs["victims_alive"] = {"10": True}
        self.assertEqual(judge(c, expectation(c), obs, None)[0], "pass")

    def test_not_run(self):
        c = self.case(page="hugetlb")
        self.assertEqual(judge(c, expectation(c), None, "needs hugepages"), ("not run", ["needs hugepages"]))




class Images(Files):
    """[guest] image = ..., --images: an image stands where a kernel stands
    (images.py); a fake debian-12 whose config says whether it has the
    handler"""

    def setUp(self):
        super().setUp()
        os.environ["VMCE_BUILD_DIR"] = self.tmp
        for name, config in (("debian-12", "CONFIG_MEMORY_FAILURE=y\nCONFIG_X86_MCE=y\n"),
                             ("debian-12-cloud", "# CONFIG_MEMORY_FAILURE is not set\n")):
            d = os.path.join(self.tmp, "images", name)
            os.makedirs(d)
            with open(os.path.join(d, "config"), "w") as f:
                f.write(config)
            with open(os.path.join(d, "image.json"), "w") as f:
                json.dump({"release": "6.1.0-50-amd64" if name == "debian-12" else "6.1.0-50-cloud-amd64",
                           "cmdline": "root=/dev/vda ro console=ttyS0",
                           "kernel_package": "linux-image-amd64"}, f)
        self.addCleanup(os.environ.pop, "VMCE_BUILD_DIR", None)

    SPEC = "[guest g]\nimage = debian-12, debian-12-cloud\n[matrix m]\npages = anon-dirty, pagecache-clean\n"

    def test_each_case_on_each_image(self):
        c = self.parse(self.SPEC)
        self.assertEqual(len(c.cases), 4)
        self.assertEqual({x.id.split("@")[1] for x in c.cases}, {"debian-12", "debian-12-cloud"})
        self.assertEqual(c.guests["g"].mem, "1G", "systemd and its services want more than vmce's guest")
        info = c.cases[0].to_dict()["kernel_info"]
        self.assertEqual((info["kind"], info["release"], info["table"], info["nearest"]),
                         ("image", "6.1.0-50-amd64", "debian-6.1", None))

    def test_a_kernel_without_the_handler_is_judged_not_refused(self):
        c = self.parse(self.SPEC)
        cloud = next(x for x in c.cases if x.kernel == "debian-12-cloud")
        exp = expectation(cloud)
        self.assertEqual((exp.guest, exp.table), ("reset", "no-handler"))
        self.assertEqual(cloud.kernel_info.missing, ["CONFIG_MEMORY_FAILURE", "CONFIG_X86_MCE"])
        obs = dict(reset="a new boot on its console", qemu_alive=True, guest_alive=False, panic=None,
                   after_reset={"booted": True, "seconds": 30.0})
        verdict, reasons = judge(cloud, exp, obs, None)
        self.assertEqual(verdict, "pass")
        self.assertIn("its next boot answered after 30 s", reasons[0])
        self.assertEqual(judge(cloud, exp, dict(obs, reset=None, guest_alive=True), None),
                         ("fail", ["the guest did not reset and lives on"]))
        self.assertEqual(judge(cloud, exp, dict(obs, qemu_alive=False, qemu_exit={"how": "exited"}), None)[0],
                         "fail")

    def test_no_handler_under_vmce_series_is_dropped_not_reset(self):
        c = self.parse(self.SPEC)
        cloud = next(x for x in c.cases if x.kernel == "debian-12-cloud")
        cloud.qemu_info = qemus.Qemu("vmce-10.0", "/x", "QEMU emulator version 10.0.13", (10, 0), True,
                                     "vmce-10.0")
        exp = expectation(cloud)
        self.assertEqual(exp.guest, "dropped")
        obs = dict(reset=None, qemu_alive=True, guest_alive=True, panic=None,
                   injected=[{"result": "injected", "qemu_event": {"action": "ignore"}}])
        self.assertEqual(judge(cloud, exp, obs, None)[0], "pass")
        self.assertEqual(judge(cloud, exp, dict(obs, reset="a new boot"), None)[0], "fail")
        self.assertEqual(judge(cloud, exp, dict(obs, injected=[{"qemu_event": {"action": "reset"}}]), None)[0],
                         "fail")

    def test_no_handler_amd_ao_is_deferred_untold_ar_resets(self):
        # an AMD guest with SUCCOR (the host lab's KVM L2): vmced tells an AO
        # as a deferred error, which raises no machine check; an AR does
        # (the CPU set on the cases: a QEMU with succor need not be built here)
        c = self.parse("[guest g]\nimage = debian-12-cloud\n[matrix m]\nkinds = ao, ar\n")
        ao, ar = (next(x for x in c.cases if x.kind == k) for k in ("ao", "ar"))
        ao.cpu = ar.cpu = "EPYC,succor=on,overflow-recov=on"
        exp = expectation(ao)
        self.assertEqual((exp.guest, exp.table), ("untold", "no-handler"))
        self.assertIn("deferred error", exp.summary)
        self.assertEqual(expectation(ar).guest, "reset")
        # the page stays in use, untold: the next case gets a fresh guest
        from vmcelab.runner import _ends_guest
        self.assertEqual((_ends_guest(ao), _ends_guest(ar)), (True, False))
        obs = dict(reset=None, qemu_alive=True, guest_alive=True, panic=None)
        self.assertEqual(judge(ao, exp, obs, None)[0], "pass")
        self.assertEqual(judge(ao, exp, dict(obs, reset="a new boot"), None)[0], "fail")
        self.assertEqual(judge(ao, exp, dict(obs, guest_alive=False), None),
                         ("fail", ["the guest stopped answering"]))
        # an Intel guest (the default CPU) resets on either
        intel = self.parse("[guest g]\nimage = debian-12-cloud\n[case c]\n").cases[0]
        self.assertEqual(expectation(intel).guest, "reset")

    def test_command_line_images(self):
        c = self.parse("[matrix m]\npages = anon-dirty\n", images=["debian-12-cloud"])
        self.assertEqual([x.kernel for x in c.cases], ["debian-12-cloud"])
        self.assertTrue(c.guests["guest"].image)

    def test_bad_images(self):
        self.assertIn("a guest has a kernel or an image, not both",
                      self.error("[guest g]\nimage = debian-12\nkernel = debian-6.1\n[case c]\n"))
        self.assertIn("test.ini:2: unknown image 'debian-13'",
                      self.error("[guest g]\nimage = debian-13\n[case c]\n"))
        self.assertIn("'debian-6.1' is a kernel, not an image",
                      self.error("[guest g]\nimage = debian-6.1\n[case c]\n"))
        self.assertIn("/nonexistent.qcow2: no such image file",
                      self.error("[guest g]\nimage = /nonexistent.qcow2\n[case c]\n"))
        with self.assertRaises(SpecError) as cm:
            self.parse("[case c]\n", kernels=["debian-6.1"], images=["debian-12"])
        self.assertIn("an image boots its own kernel", str(cm.exception))

    def test_firmware_disk_bus_and_accel(self):
        c = self.parse("[guest g]\nimage = debian-12\nfirmware = uefi\ndisk-bus = virtio-scsi\n[case c]\n")
        g = c.guests["g"]
        self.assertEqual((g.firmware, g.disk_bus, g.accel), ("uefi", "virtio-scsi", "tcg"))
        # run/campaign --accel, --firmware, --disk-bus: every guest's, over the file's
        c = self.parse(self.SPEC, boot={"accel": "kvm", "firmware": "bios", "disk_bus": None})
        g = c.guests["g"]
        self.assertEqual((g.firmware, g.disk_bus, g.accel), ("bios", "virtio-blk", "kvm"))
        self.assertTrue(all(x.accel == "kvm" for x in c.cases))
        c = self.parse("[case c]\n", images=["debian-12"], boot={"accel": "kvm", "disk_bus": "virtio-scsi"})
        g = c.guests["guest"]
        self.assertEqual((g.firmware, g.disk_bus, g.accel), ("auto", "virtio-scsi", "kvm"))
        self.assertEqual(c.guests["guest"].on(c.kernels["debian-12"], c.qemus[g.qemus[0]]).disk_bus,
                         "virtio-scsi", "the booted guest's too")

    def test_bad_firmware_and_disk_bus(self):
        self.assertIn("test.ini:3: 'efi' is not a firmware (known: auto, uefi, bios)",
                      self.error("[guest g]\nimage = debian-12\nfirmware = efi\n[case c]\n"))
        self.assertIn("test.ini:3: 'disk-bus' is an image's: this guest boots a kernel",
                      self.error("[guest g]\nkernel = debian-6.1\ndisk-bus = virtio-scsi\n[case c]\n"))

    def test_what_a_guest_needs_here_is_said_before_anything_runs(self):
        c = self.parse("[guest g]\nimage = debian-12\nfirmware = uefi\n[case c]\n")
        # a known image boots its kernel directly: UEFI only when asked for
        with unittest.mock.patch.dict(os.environ, {"VMCE_OVMF_DIR": "/nonexistent"}):
            with self.assertRaises(SpecError) as cm:
                c.check_boot()
        self.assertEqual(str(cm.exception), "test.ini: image debian-12: the image boots by UEFI and OVMF is "
                                            "not installed (/nonexistent/OVMF_CODE_4M.fd is missing): "
                                            "apt-get install ovmf (run/install-deps does)")
        c = self.parse(self.SPEC, boot={"accel": "kvm"})
        with unittest.mock.patch("vmcelab.kvm.kvm_usable", lambda *a: (False, "no /dev/kvm")):
            with self.assertRaises(SpecError) as cm:
                c.check_boot()
        self.assertIn("accel = kvm: KVM is not usable on this host (no /dev/kvm): use accel = tcg here", str(cm.exception))
        with unittest.mock.patch("vmcelab.kvm.kvm_usable", lambda *a: (True, "booted")):
            c.check_boot()


class Selftests(unittest.TestCase):
    """A selftest's case is judged by its TAP results against the tests its
    kernel is expected to fail (expect.SELFTESTS)"""

    def case(self, table):
        import types
        info = types.SimpleNamespace(table=table, nearest=None, release="6.12.118", name=table,
                                     to_dict=lambda: {})
        return campaign_mod.Case("s", "g", page="ksm-scan", inject="guest-selftest", kernel=info)

    def obs(self, failed=(), planned=8, alive=True, **st):
        from vmcelab.expect import KSM_SCAN_CHAIN, KSM_SCAN_MERGE
        names = ["ksmd keeps scanning after the KSM page is hwpoisoned",
                 "pages with the same contents still merge", KSM_SCAN_MERGE, KSM_SCAN_CHAIN]
        results = [[n not in failed, f"{how}: {n}"] for how in ("MADV_HWPOISON", "corrupt-pfn")
                   for n in names]
        return {"selftest": dict({"program": "ksm_hwpoison", "planned": planned, "results": results,
                                  "timed_out": False}, **st),
                "guest_alive": alive, "qemu_alive": True, "panic": None if alive else "Fatal"}

    def verdict(self, table, obs):
        c = self.case(table)
        return judge(c, expectation(c), obs, None)

    def test_each_kernel_fails_what_it_should(self):
        from vmcelab.expect import KSM_SCAN_CHAIN, KSM_SCAN_MERGE
        self.assertEqual(self.verdict("vmce-6.12", self.obs())[0], "pass")
        self.assertEqual(self.verdict("vmce-6.1", self.obs())[0], "pass")
        v, why = self.verdict("debian-6.12", self.obs(failed={KSM_SCAN_CHAIN}))
        self.assertEqual(v, "pass", why)
        self.assertIn("failed as expected", why[0])
        self.assertEqual(self.verdict("debian-6.1", self.obs(failed={KSM_SCAN_MERGE}))[0], "pass")
        # either sign of the read, or both, on a kernel with the defect
        both = {KSM_SCAN_MERGE, KSM_SCAN_CHAIN}
        self.assertEqual(self.verdict("debian-6.12", self.obs(failed=both))[0], "pass")
        v, why = self.verdict("debian-6.12", self.obs(failed={"pages with the same contents still merge"}))
        self.assertEqual(v, "fail")
        self.assertIn("expected one or both of", why[0])
        # the fixed kernel failing, or the broken one passing, is a fail
        v, why = self.verdict("vmce-6.12", self.obs(failed={KSM_SCAN_CHAIN}))
        self.assertEqual(v, "fail")
        self.assertIn("expected nothing", why[0])
        self.assertEqual(self.verdict("debian-6.12", self.obs())[0], "fail")

    def test_cut_short_skipped_or_down_fails(self):
        v, why = self.verdict("vmce-6.12", self.obs(planned=10))
        self.assertEqual(v, "fail")
        self.assertIn("reported 8 of 10", why[0])
        v, why = self.verdict("vmce-6.12", self.obs(alive=False))
        self.assertEqual(v, "fail")
        self.assertIn("the guest went down: Fatal", why[0])
        obs = self.obs()
        obs["selftest"]["results"][4][1] += " # SKIP no hwpoison-inject"
        self.assertEqual(self.verdict("vmce-6.12", obs)[0], "fail")
        self.assertEqual(self.verdict("vmce-6.12", self.obs(timed_out=True))[0], "fail")

    def test_tap_parsed(self):
        from vmcelab.outcome import parse_tap
        tap = parse_tap("TAP version 13\n1..3\n# a note\nok 1 one\nnot ok 2 two: x\n"
                        "ok 3 # SKIP three\n# Totals: pass:1 fail:1\n")
        self.assertEqual(tap["planned"], 3)
        self.assertEqual(tap["results"], [(True, "one"), (False, "two: x"), (True, "# SKIP three")])
        self.assertEqual(tap["messages"], ["a note"])
        self.assertEqual(parse_tap("TAP version 13\n1..8\nBail out! no KSM\n")["bail"], "no KSM")

def arm_qemu(name, ghes=True, sea=True):
    """A qemu-system-aarch64 as arm64.resolve_qemu() answers for it, without
    running one: vmce-10.2-arm64 has both commands, Debian's 7.2 neither"""
    from vmcelab import arm64
    return arm64.ArmQemu(name, f"/qemus/{name}", "QEMU emulator version x", (10, 2, 2) if ghes else (7, 2, 22),
                         ghes, sea)


class Arm64(Files):
    """arch = arm64: the Arm64 guest, its own kernel and aarch64 QEMU, and
    what cannot be on it refused in one line before anything runs"""

    def setUp(self):
        super().setUp()
        from vmcelab import arm64
        image, initrd = (os.path.join(self.tmp, n) for n in ("Image", "guest-arm64.cpio.gz"))
        for path in (image, initrd):
            open(path, "w").close()
        qemus_ = {"vmce-10.2-arm64": arm_qemu("vmce-10.2-arm64"),
                  "debian-7.2-arm64": arm_qemu("debian-7.2-arm64", False, False)}

        def resolve(name):
            if name not in qemus_:
                raise arm64.Arm64Error(f"unknown Arm64 QEMU '{name}'")
            return qemus_[name]
        for target, new in (("boot_files", lambda: (image, initrd, "6.1.0-57-arm64")),
                            ("resolve_qemu", resolve),
                            ("cpu_models", lambda path: {"max", "cortex-a57", "neoverse-n1"})):
            patcher = unittest.mock.patch.object(arm64, target, new)
            patcher.start()
            self.addCleanup(patcher.stop)

    ARM = "[guest arm]\narch = arm64\n"

    def test_defaults(self):
        c = self.parse(self.ARM + "[matrix m]\nkinds = ao, ar\n")
        g = c.guests["arm"]
        self.assertEqual((g.arch, g.accel, g.cpu, g.kernels, g.qemus),
                         ("arm64", "tcg", "max,pauth-impdef=on", ["debian-6.1-arm64"], ["vmce-10.2-arm64"]))
        self.assertEqual([case.id for case in c.cases], ["m/anon-dirty/ao/early/host/recovery1/0@debian-6.1-arm64",
                                                         "m/anon-dirty/ar/early/host/recovery1/0@debian-6.1-arm64"])
        self.assertEqual({case.arch for case in c.cases}, {"arm64"})
        self.assertEqual(c.guest_for(c.cases[0]).name, "arm", "the arch's own kernel and QEMU are not named")
        self.assertEqual(c.cases[0].to_dict()["arch"], "arm64")

    def test_an_amd64_and_an_arm64_guest_over_the_same_pages(self):
        c = self.parse("[guest x86]\n" + self.ARM + "[matrix m]\nguest = x86, arm\nkinds = ao, ar\n")
        self.assertEqual(len(c.cases), 4)
        by_key = {}
        for case in c.cases:
            by_key.setdefault(case.key, []).append((case.arch, case.kernel))
        self.assertEqual(sorted(by_key["m/anon-dirty/ar/early/host/recovery1/0"]),
                         [("amd64", "debian-6.1"), ("arm64", "debian-6.1-arm64")], "one row, a column per arch")
        self.assertEqual(len({case.id for case in c.cases}), 4)
        self.assertFalse(any("@qemu=" in case.id for case in c.cases),
                         "each arch runs one QEMU: the amd64 cases keep their ids")

    def test_what_cannot_be_on_arm64_is_refused_at_its_line(self):
        for text, line, said in (
                ("accel = kvm\n", 3, "accel = kvm on an arm64 guest: it runs under TCG only"),
                ("image = debian-12\n", 3, "an operator's image is an x86 guest"),
                ("cpu = Skylake-Client\n", 3, "Skylake-Client is not a CPU model of qemu-system-aarch64"),
                ("kernel = debian-6.1\n", 3, "kernel debian-6.1 on an arm64 guest: an x86 guest kernel"),
                ("qemu = vmce-10.0\n", 3, "unknown Arm64 QEMU 'vmce-10.0'"),
                ("firmware = uefi\n", 3, "'firmware' is an image's"),
                ("[matrix m]\ninject = guest-mce-inject\n", 4, "inject = guest-mce-inject on arm64 guest arm: "
                                                                "mce-inject is x86's"),
                ("[matrix m]\ninject = host-real\n", 4, "the Arm64 lab's (run/armlab) has no vmced"),
                ("[case c]\nforwarder = qemu\n", 4, "forwarder = qemu on arm64 guest arm: what "
                                                    "qemu-system-aarch64 does by itself")):
            with self.subTest(text=text):
                msg = self.error(self.ARM + text + ("" if text.startswith("[") else "[case c]\n"))
                self.assertTrue(msg.startswith(f"test.ini:{line}: "), msg)
                self.assertIn(said, msg)
                self.assertNotIn("\n", msg)

    def test_unknown_arch(self):
        self.assertTrue(self.error("[guest g]\narch = sparc\n[case c]\n").startswith(
            "test.ini:2: 'sparc' is not a arch (known: amd64, arm64)"))

    def test_arm64_names_on_an_amd64_guest_say_which_arch(self):
        self.assertIn("is the Arm64 guest's kernel", self.error("[guest g]\nkernel = debian-6.1-arm64\n[case c]\n"))
        self.assertIn("say arch = arm64", self.error("[guest g]\nqemu = vmce-10.2-arm64\n[case c]\n"))

    def test_not_in_the_host_lab_nor_under_another_arch_s_names(self):
        with self.assertRaises(SpecError) as cm:
            self.parse(self.ARM + "[case c]\n", machine=("tcg", None))
        self.assertIn("there is no Arm64 host lab", str(cm.exception))
        with self.assertRaises(SpecError) as cm:
            self.parse(self.ARM + "[case c]\n", qemus=["debian-7.2"])
        self.assertIn("--qemus: unknown Arm64 QEMU 'debian-7.2'", str(cm.exception))

    def test_errors_real_makes_no_arm64_error_real(self):
        c = self.parse(self.ARM + "[matrix m]\n", errors="real")
        self.assertEqual(c.cases[0].inject, "host-real")
        self.assertIn("the Arm64 lab's (run/armlab) has no vmced", c.cases[0].not_real)

    def test_a_qemu_that_cannot_tell_it_refuses(self):
        c = self.parse(self.ARM + "qemu = debian-7.2-arm64\n[matrix m]\nkinds = ao, ar\n")
        ao, ar = (expectation(case) for case in c.cases)
        self.assertEqual((ao.guest, ar.guest), ("refused", "refused"))
        self.assertIn("inject-ghes-v2-error", ao.note)
        self.assertIn("x-vmce-inject-sea", ar.note)
        rec = {"result": "refused", "path": "refused", "detail": "refused: no inject-ghes-v2-error"}
        obs = dict(injected=[rec], signals=[], qemu_alive=True, guest_alive=True)
        self.assertEqual(judge(c.cases[0], ao, obs, None)[0], "pass")
        self.assertEqual(judge(c.cases[1], ar, dict(obs, guest_alive=False, qemu_status="paused"), None)[0], "pass")
        self.assertEqual(judge(c.cases[1], ar, dict(obs, guest_alive=False, qemu_status="running"), None)[0],
                         "fail", "a refused AR pauses the VM")
        told = dict(obs, injected=[dict(rec, result="injected", path="ghes-qmp")])
        self.assertEqual(judge(c.cases[0], ao, told, None)[0], "fail")


class Arm64Judging(unittest.TestCase):
    """The arm64 kernel's table (expect.py's debian-6.1-arm64), as measured
    with run/campaigns/arm64.ini: x86 6.1's rows, and where it differs"""

    obs = Judging.obs

    def case(self, **kw):
        from vmcelab import kernels
        k = kernels.Kernel("debian-6.1-arm64", "Image", "initrd", "6.1.0-57-arm64", "debian-6.1-arm64")
        return campaign_mod.Case("s", "arm", kernel=k, qemu=arm_qemu("vmce-10.2-arm64"), arch="arm64", **kw)

    def told(self, path, **kw):
        w = [{"pid": 10, "pids": [10], "va": "0x7f0000001000", "pfn": "0x42", "gpa": "0x42000"}]
        return self.obs(workloads=w, injected=[{"result": "injected", "path": path, "gpa": "0x42000"}], **kw)

    def test_told_through_its_path_at_its_gpa(self):
        ao = self.case(page="anon-dirty")
        self.assertEqual(judge(ao, expectation(ao), self.told("ghes-qmp"), None)[0], "pass")
        verdict, why = judge(ao, expectation(ao), self.told("sea"), None)
        self.assertEqual(verdict, "fail")
        self.assertIn("expected injected through ghes-qmp", why[0])
        elsewhere = self.told("ghes-qmp")
        elsewhere["injected"][0]["gpa"] = "0x43000"
        self.assertIn("not the workload's page", judge(ao, expectation(ao), elsewhere, None)[1][0])

    def test_an_early_kill_ar_reaches_its_consumer_as_ar_or_ao(self):
        ar = self.case(page="anon-dirty", kind="ar")
        sig = {"pid": 10, "addr": "0x7f0000001000", "lsb": 12}
        as_ar = self.told("sea", signals=[dict(sig, code=4)], victims_alive={"10": False})
        self.assertEqual(judge(ar, expectation(ar), as_ar, None)[0], "pass")
        verdict, why = judge(ar, expectation(ar), self.told("sea", signals=[dict(sig, code=5)]), None)
        self.assertEqual(verdict, "pass", why)
        self.assertIn("kworker", why[0])
        late = self.case(page="anon-dirty", kind="ar", kill="late")
        self.assertEqual(judge(late, expectation(late), self.told("sea", signals=[dict(sig, code=5)]), None)[0],
                         "fail", "late kill: the retried load's AR only")

    def test_an_ar_on_kernel_memory_oopses_mostly_in_the_idle_task(self):
        for page in ("free", "slab", "pagetable"):
            c = self.case(page=page, kind="ar")
            exp = expectation(c)
            self.assertEqual(exp.guest, "oops")
            self.assertIn("Attempted to kill the idle task!", exp.summary)
            panic = dict(injected=[], signals=[], qemu_alive=True, guest_alive=False, trouble=[],
                         panic="Attempted to kill the idle task!")
            self.assertEqual(judge(c, exp, panic, None)[0], "pass")
            oops = dict(panic, panic=None, guest_alive=True,
                        trouble=["Internal error: synchronous external abort: 0000000096000410 [#1] SMP"])
            self.assertEqual(judge(c, exp, oops, None)[0], "pass")
            self.assertEqual(judge(c, exp, dict(oops, trouble=[]), None)[0], "fail")
        self.assertIsNone(expectation(self.case(page="free")).aftermath, "its AO recovers, as on x86")

    def test_a_kernel_read_is_an_oops(self):
        c = self.case(page="pagetable")
        ignored = {"0x42": ("unknown page", "Ignored")}
        oops = "Internal error: synchronous external abort: 0000000096000410 [#1] SMP"
        obs = self.told("ghes-qmp", actions=ignored, signals=[], aftermath={"how": "exit", "crash": oops})
        self.assertEqual(judge(c, expectation(c), obs, None)[0], "pass")
        slab = self.case(page="slab", kill="late")
        first = self.told("ghes-qmp", actions={"0x42": None}, signals=[], trouble=[oops], hardware_corrupted_kb=0)
        verdict, why = judge(slab, expectation(slab), first, None)
        self.assertEqual(verdict, "pass", why)
        self.assertIn("GED interrupt thread", why[0])
        self.assertEqual(judge(slab, expectation(slab), dict(first, trouble=[]), None)[0], "fail")

    def test_a_touched_ksm_page_lets_the_next_workload_merge(self):
        self.assertEqual(expectation(self.case(page="ksm")).aftermath, "ksm-merge")
        for kw in ({"kill": "late"}, {"kind": "ar"}, {"kind": "ar", "kill": "late"}):
            self.assertEqual(expectation(self.case(page="ksm", **kw)).aftermath, "ksm-merge-given-back", kw)


if __name__ == "__main__":
    unittest.main(testRunner=unittest.TextTestRunner(stream=sys.stdout, verbosity=2))
