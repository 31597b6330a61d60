#!/usr/bin/env python3
"""Where a test VM's sockets go (run/lib/vmcelab/vm.py): in its state
directory while their paths fit a socket address (107 bytes), else in a
short directory of its own, the same one every time for that state
directory, which goes when the VM stops."""
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "run", "lib"))

from vmcelab import vm  # noqa: E402


class SocketDir(unittest.TestCase):
    def test_short_state_dir_holds_its_sockets(self):
        self.assertEqual(vm.socket_dir("/tmp/vmce/e2e-forward/vm"), "/tmp/vmce/e2e-forward/vm")
        # "build/meson/.." is no reason to move them
        self.assertEqual(vm.socket_dir("/tmp/a/build/meson/../e2e/vm"), "/tmp/a/build/e2e/vm")

    def test_long_state_dir_gets_a_short_one(self):
        deep = "/check/work/main/build/e2e/kernels-pf67q5c4/own-kernel-campaign/" \
               "m-custom-vmlinuz-6.12.118-deb13-am-0.0"
        d = vm.socket_dir(deep)
        self.assertNotEqual(d, deep)
        self.assertEqual(d, vm.socket_dir(deep + "/"), "the same for the same directory")
        self.assertNotEqual(d, vm.socket_dir(deep + "x"), "another for another")
        for leaf in vm.SOCKETS:
            self.assertLessEqual(len(os.path.join(d, leaf)), vm.SUN_PATH_MAX)

    def test_every_socket_path_fits(self):
        for n in range(40, 140, 7):
            state = "/tmp/" + "d" * n
            v = vm.Vm("x", state)
            for path in (v.qmp_path, v.vmced_qmp_path, v.agent_path, v.vmced_agent_path):
                self.assertLessEqual(len(path), vm.SUN_PATH_MAX, path)

    def test_own_socket_dir_goes_with_the_vm(self):
        with tempfile.TemporaryDirectory() as tmp:
            state = os.path.join(tmp, "s" * 100)
            os.makedirs(state)
            v = vm.Vm("x", state)
            os.makedirs(v.sock_dir)
            open(v.qmp_path, "w").close()
            v._reap()
            self.assertFalse(os.path.exists(v.sock_dir))


if __name__ == "__main__":
    unittest.main()
