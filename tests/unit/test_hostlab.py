#!/usr/bin/env python3
"""The host lab's reading of L1's page tables (run/lib/vmcelab/lab.py):
pagemap entries, kpageflags, smaps, L1's THP mode, and when a victim's host
page does not show what its backing is about (the scenario is not run)."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "run", "lib"))

from vmcelab import lab  # noqa: E402

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


class Backings(unittest.TestCase):
    def test_guest_memory_per_backing(self):
        self.assertEqual(lab.l2_mem_mb("file"), lab.L2_MEM_MB)
        self.assertEqual(lab.l2_mem_mb("hugetlb-2M"), lab.L2_MEM_MB)
        # QEMU refuses a hugetlbfs backend smaller than its page
        self.assertEqual(lab.l2_mem_mb("hugetlb-1G"), 1024)

    def test_every_backing_has_its_way(self):
        for b in lab.BACKINGS:
            self.assertTrue(b == "file" or b in lab.HUGETLB or b in ("anon", "thp"), b)


if __name__ == "__main__":
    unittest.main()
