#!/usr/bin/env python3
"""The outcome parser on real kernel log lines, both wordings."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "run", "lib"))

from vmcelab.outcome import GuestLog, kernel_crash  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data")


def lines(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read().splitlines()


class Linux61(unittest.TestCase):
    def test_recovered_ao_and_ar(self):
        log = GuestLog(lines("linux-6.1-ao-ar-recovered.log"))
        self.assertEqual(log.action_for(0x29a3), ("dirty LRU page", "Recovered"))
        self.assertEqual(log.action_for(0x29ae), ("dirty LRU page", "Recovered"))
        self.assertEqual(log.killed_pids(0x29a3), [102])
        self.assertEqual(log.kills[0x29ae], [("vmce-victim", 103)])
        self.assertIn("CPU 0: Machine Check Exception: 7 Bank 9: bd80000000000134", log.mce_reports)
        self.assertEqual(log.panics, [])
        self.assertEqual(log.trouble, [])

    def test_panic(self):
        log = GuestLog(lines("linux-6.1-amd-kvm-panic.log"))
        self.assertEqual(log.panics, ["Fatal local machine check"])
        self.assertIn("Machine check: Uncorrected error without MCA Recovery", log.mce_reports)
        self.assertEqual(log.actions, {})

    def test_host_kernel(self):
        log = GuestLog(lines("linux-6.1-l1-host.log"))
        self.assertEqual(log.kills[0x10e6d1], [("qemu-system-x86", 107)])
        self.assertEqual(log.action_for(0x10e6d8), ("dirty LRU page", "Recovered"))

    def test_other_6x_lines(self):
        log = GuestLog([
            "[   13.242984] Memory failure: 0x10000: unhandlable page.",
            "[   13.243628] Memory failure: 0x10000: recovery action for unknown page: Ignored",
            "[    5.1] Memory failure: 0x1234: already hardware poisoned",
            "[    6.0] mce: Memory failure: buffer overflow when queuing memory failure at 0x5678",
            "[    7.0] WARNING: CPU: 0 PID: 12 at mm/memory-failure.c:1234 memory_failure+0x1/0x2",
            "[    8.0] memory_failure_event: pfn 0x42: recovery action for huge page: Delayed",
            "[    9.0] Kernel panic - not syncing: Memory failure on page 1234",
        ])
        self.assertEqual(log.action_for(0x10000), ("unknown page", "Ignored"))
        self.assertEqual(log.already, {0x1234})
        self.assertEqual(log.overflows, [0x5678])
        self.assertEqual(len(log.trouble), 1)
        self.assertTrue(log.trouble[0].startswith("WARNING: CPU: 0"))
        self.assertEqual(log.traced[0x42], [("huge page", "Delayed")])
        self.assertEqual(log.action_for(0x42), ("huge page", "Delayed"))
        self.assertEqual(log.panics, ["Memory failure on page 1234"])


class Linux612(unittest.TestCase):
    def test_a_second_error_is_an_action_line(self):
        # 6.12 (MF_MSG_ALREADY_POISONED) says "already hardware poisoned" as
        # a recovery action: the page's own answer stays the first one
        log = GuestLog([
            "[   10.1] Memory failure: 0x2ba4: recovery action for dirty LRU page: Recovered",
            "[   11.2] Memory failure: 0x2ba4: recovery action for already poisoned page: Failed",
        ])
        self.assertEqual(log.action_for(0x2ba4), ("dirty LRU page", "Recovered"))
        self.assertEqual(log.already, {0x2ba4})

    def test_one_line_read_twice_counts_once(self):
        # /dev/kmsg's copy, and the console's, where a program's output ran
        # into it: the per-node counters saw one error
        log = GuestLog([
            "Memory failure: 0x3a09: recovery action for dirty LRU page: Recovered",
            'vmce-pages: {"pid":166,"code":5}[    6.809305] Memory failure: 0x3a09: recovery '
            "action for dirty LRU page: Recovered",
            "[    7.000001] Memory failure: 0x3a09: recovery action for already poisoned page: Failed",
            "Memory failure: 0x3a09: recovery action for already poisoned page: Failed",
        ])
        self.assertEqual(log.results[0x3a09], ["Recovered", "Failed"])

    def test_get_hwpoison_page(self):
        log = GuestLog(["[ 3.0] Memory failure: 0x4040: recovery action for get hwpoison page: Ignored"])
        self.assertEqual(log.action_for(0x4040), ("get hwpoison page", "Ignored"))


class Linux26(unittest.TestCase):
    """The seeds' wording: "MCE %#lx: %s%s page recovery: %s" """

    def test_2009_wording(self):
        log = GuestLog(lines("linux-2.6-mailing-lists.log"))
        self.assertEqual(log.action_for(0x7dfb8), ("clean mlocked LRU page", "Recovered"))
        self.assertEqual(log.action_for(0xb4365), ("dirty LRU page", "Recovered"))
        self.assertEqual(log.action_for(0x44e336), ("dirty mlocked LRU page", "Failed"))
        self.assertEqual(log.action_for(0x224706), ("dirty LRU page", "Failed"))
        self.assertEqual(log.kills[0xb4365], [("copy_to_user_te", 3768)])
        self.assertEqual(log.fault_kills, [("copy_to_user_te", 3768, 0x7fffcab7d000)])

    def test_nothing_to_say(self):
        log = GuestLog(["[    0.000000] Linux version 6.1.0-57-amd64", "BUG_ON is a macro"])
        self.assertEqual((log.actions, log.kills, log.panics, log.trouble), ({}, {}, [], []))
        self.assertIsNone(log.action_for(1))


class Arm64(unittest.TestCase):
    """Debian 12's arm64 6.1 (the Arm64 guest): its oops on an SEA taken in
    kernel mode is a crash, as x86's BUG is (lines from run/campaigns/arm64.ini)"""

    def test_sea_in_kernel_mode_is_an_oops(self):
        log = GuestLog([
            "[   46.976647] Memory failure: 0x79d6f: unhandlable page.",
            "[   46.977829] Memory failure: 0x79d6f: recovery action for unknown page: Ignored",
            "[   47.081881] Internal error: synchronous external abort: 0000000096000410 [#1] SMP",
            "[   47.083736] CPU: 0 PID: 115 Comm: vmce-pages Tainted: G   M               6.1.0-57-arm64 #1",
            "[   47.093299] Fixing recursive fault but reboot is needed!"])
        self.assertEqual(log.action_for(0x79d6f), ("unknown page", "Ignored"))
        self.assertEqual(log.panics, [])
        self.assertEqual(kernel_crash(log), "Internal error: synchronous external abort: 0000000096000410 [#1] SMP")

    def test_in_the_idle_task_it_panics(self):
        log = GuestLog(["[    9.1] Internal error: synchronous external abort: 0000000096000410 [#1] SMP",
                        "[    9.2] Kernel panic - not syncing: Attempted to kill the idle task!"])
        self.assertEqual(kernel_crash(log), "Attempted to kill the idle task!")


if __name__ == "__main__":
    unittest.main(testRunner=unittest.TextTestRunner(stream=sys.stdout, verbosity=2))
