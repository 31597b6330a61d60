#!/usr/bin/env python3
"""The guest-kernel series' own checks (guest-kernel/check-series) and the
selftest taken from its patch (guest-kernel/new-file): a reference not in
checkpatch's form, or with a subject upstream did not give, is caught;
a file is taken only as a patch creates it."""
import importlib.machinery
import importlib.util
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
GK = os.path.join(HERE, "..", "..", "guest-kernel")


def load(name):
    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), os.path.join(GK, name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


series = load("check-series")
new_file = load("new-file")


class References(unittest.TestCase):
    def test_forms(self):
        body = ('Since commit 4248d0083ec5 ("mm: ksm: support hwpoison for ksm page"),\n'
                'it broke. A bare 4f775086a6ee is not a reference checkpatch takes, nor\n'
                'commit 44b8f8bf2438 (add memory failure stats to sysfs).\n\n'
                'Fixes: 524fca1e7356 ("HWPOISON: fix misjudgement of page_action() for errors on mlocked pages")\n')
        self.assertEqual(series.references(body), [
            ("4248d0083ec5", "mm: ksm: support hwpoison for ksm page"),
            ("4f775086a6ee", None), ("44b8f8bf2438", None),
            ("524fca1e7356", "HWPOISON: fix misjudgement of page_action() for errors on mlocked pages")])

    def test_a_reference_wrapped_over_lines_is_one(self):
        body = 'This is a backport of commit 44b8f8bf2438 ("mm: memory-failure: add\nmemory failure stats to sysfs").\n'
        self.assertEqual(series.references(body),
                         [("44b8f8bf2438", "mm: memory-failure: add memory failure stats to sysfs")])

    def test_every_shipped_reference_is_known(self):
        known = series.upstream()
        self.assertIn("4248d0083ec5817eebfb916c54950d100b3468ee", known)
        # the two stats commits, once swapped in 0004 and 0005's messages
        self.assertEqual(known["44b8f8bf2438bfee3aceae4d647a7460213ff340"],
                         "mm: memory-failure: add memory failure stats to sysfs")
        self.assertEqual(known["18f41fa616ee4d66c67033eb46b951bf6e1b4a12"],
                         "mm: memory-failure: bump memory failure stats to pglist_data")

    def test_message(self):
        text = ("From 1 Mon Sep 17 00:00:00 2001\nFrom: vmce developers <vmce@localhost>\n"
                "Subject: [PATCH 2/3] mm/ksm: never let ksmd read a\n hwpoisoned page\n\nBody.\n\n"
                "Signed-off-by: x\n---\n mm/ksm.c | 1 +\n")
        subject, body = series.message(text)
        self.assertEqual(subject, "mm/ksm: never let ksmd read a hwpoisoned page")
        self.assertIn("Body.", body)
        self.assertNotIn("mm/ksm.c |", body)


class NewFile(unittest.TestCase):
    PATCH = ("diff --git a/tools/x.c b/tools/x.c\nnew file mode 100644\nindex 0..1\n--- /dev/null\n"
             "+++ b/tools/x.c\n@@ -0,0 +1,2 @@\n+int a;\n+int b;\n"
             "diff --git a/mm/ksm.c b/mm/ksm.c\n--- a/mm/ksm.c\n+++ b/mm/ksm.c\n@@ -1,1 +1,1 @@\n-x\n+y\n")

    def test_taken_as_created(self):
        self.assertEqual(new_file.new_file(self.PATCH, "tools/x.c"), "int a;\nint b;\n")

    def test_refused(self):
        with self.assertRaisesRegex(ValueError, "only a file it creates"):
            new_file.new_file(self.PATCH, "mm/ksm.c")
        with self.assertRaisesRegex(ValueError, "creates no tools/y.c"):
            new_file.new_file(self.PATCH, "tools/y.c")
        with self.assertRaisesRegex(ValueError, "cut short"):
            new_file.new_file(self.PATCH.replace("+1,2 @@", "+1,3 @@"), "tools/x.c")

    def test_the_shipped_selftest(self):
        p = os.path.join(GK, "patches", "6.12", "0003-selftests-mm-add-a-test-of-ksmd-and-a-hwpoisoned-KSM.patch")
        with open(p) as f:
            text = new_file.new_file(f.read(), "tools/testing/selftests/mm/ksm_hwpoison.c")
        self.assertIn('#include "../kselftest.h"', text)
        self.assertIn("ksft_set_plan(2 * TESTS_PER_INJECT);", text)

    def test_one_selftest_for_6_12_and_7_3(self):
        # the guest's copy is taken from 6.12's 0003 (images/guest-tools):
        # 7.3's posts the same file
        name = "0003-selftests-mm-add-a-test-of-ksmd-and-a-hwpoisoned-KSM.patch"
        texts = []
        for base in ("6.12", "7.3"):
            with open(os.path.join(GK, "patches", base, name)) as f:
                texts.append(new_file.new_file(f.read(), "tools/testing/selftests/mm/ksm_hwpoison.c"))
        self.assertEqual(texts[0], texts[1])


if __name__ == "__main__":
    unittest.main(verbosity=2)
