#!/usr/bin/env python3
"""Campaign files: what they expand to, and their errors (file:line: problem)."""
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "run", "lib"))

from vmcelab import campaign as campaign_mod  # noqa: E402
from vmcelab.campaign import Campaign, SpecError  # noqa: E402
from vmcelab.expect import expectation, judge  # noqa: E402


class Spec(unittest.TestCase):
    def setUp(self):
        # the guest kernel, image and disk need not exist for these tests
        self.tmp = tempfile.mkdtemp()
        for name in ("vmlinux", "guest.cpio.gz", "disk.img"):
            open(os.path.join(self.tmp, name), "w").close()
        os.environ["VMCE_KERNEL"] = os.path.join(self.tmp, "vmlinux")
        os.environ["VMCE_INITRD"] = os.path.join(self.tmp, "guest.cpio.gz")
        os.environ["VMCE_DISK"] = os.path.join(self.tmp, "disk.img")

    def parse(self, text):
        return Campaign.parse(text, "test.ini")

    def error(self, text):
        with self.assertRaises(SpecError) as cm:
            self.parse(text)
        return str(cm.exception)

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


if __name__ == "__main__":
    unittest.main(testRunner=unittest.TextTestRunner(stream=sys.stdout, verbosity=2))
