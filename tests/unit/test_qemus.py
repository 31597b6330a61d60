#!/usr/bin/env python3
"""QEMUs by name or path (run/lib/vmcelab/qemus.py): the ones vmce knows,
a QEMU of one's own judged by the nearest known one, the errors for what is
not an x86_64 QEMU or not built, and what each QEMU does by itself with a
host error vmced passes on (expect.qemu_handles()).

The QEMUs are the real binaries where they are built (Debian's 7.2 always
is: run/install-deps); a tiny shell script stands in for a QEMU only where
what is tested is how its answers to --version and -machine help are read
(another target's machine list, a version line)."""
import os
import re
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "run", "lib"))

from vmcelab import paths, qemus  # noqa: E402
from vmcelab.expect import AMD, INTEL, QEMU_DIES, QEMU_FORWARDS, QEMU_GUEST_PANICS, qemu_handles  # noqa: E402

BUILD = paths.build_dir()


def built(name):
    """The real QEMU @name where `make qemu`/`make qemus` built it, else None"""
    try:
        return qemus.resolve(name)
    except qemus.QemuError:
        return None


def script(path, version_line, machines):
    """A stand-in that answers --version and -machine help as a QEMU of
    another target would, and nothing else"""
    with open(path, "w") as f:
        f.write(f"""#!/bin/sh
case "$1" in
--version) echo '{version_line}'; echo 'Copyright (c) 2003-2023 Fabrice Bellard and the QEMU Project developers' ;;
-machine) echo 'Supported machines are:'; printf '%s\\n' {' '.join(repr(m) for m in machines)} ;;
*) echo "$0: not a QEMU for that" >&2; exit 1 ;;
esac
""")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


class Resolve(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.saved = {k: os.environ.get(k) for k in ("VMCE_QEMU", "VMCE_BUILD_DIR")}
        os.environ.pop("VMCE_QEMU", None)

    def tearDown(self):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def test_debian_7_2(self):
        q = qemus.resolve("debian-7.2")
        self.assertEqual((q.name, q.table, q.nearest, q.series), ("debian-7.2", "debian-7.2", None, False))
        self.assertEqual(q.version[:2], (7, 2))
        self.assertRegex(q.release, r"^7\.2")
        self.assertEqual(q.label, "debian-7.2")
        self.assertEqual(q.behaviour["tcg_sigbus"], "abort")
        d = q.to_dict()
        self.assertEqual({k: d[k] for k in ("name", "table", "nearest")},
                         {"name": "debian-7.2", "table": "debian-7.2", "nearest": None})
        self.assertEqual(d["release"], q.release)
        # the default, and what $VMCE_QEMU names
        self.assertEqual(qemus.resolve().name, "debian-7.2")
        os.environ["VMCE_QEMU"] = "debian-7.2"
        self.assertEqual(qemus.resolve().binary, q.binary)

    def test_the_other_known_ones_when_built(self):
        for name, version, series in (("debian-10.0", (10, 0), False), ("vmce-10.0", (10, 0), True),
                                      ("vmce-10.2", (10, 2), True), ("debian-11.1", (11, 1), False)):
            q = built(name)
            if q is None:
                continue  # not built here (yet): test_missing_from_the_build says what then
            self.assertEqual((q.name, q.version[:2], q.series, q.table), (name, version, series, name))

    def test_unknown_name(self):
        with self.assertRaises(qemus.QemuError) as cm:
            qemus.resolve("debian-8.2")
        self.assertEqual(str(cm.exception), "unknown QEMU 'debian-8.2' (known: debian-7.2, debian-10.0, "
                                            "vmce-10.0, vmce-10.2, debian-11.1, or a PATH to a "
                                            "qemu-system-x86_64)")

    def test_a_retired_name(self):
        """vmce-7.2 (part 20): one line saying where its series went and
        what to use, by name and through $VMCE_QEMU; `all` leaves it out"""
        want = ("QEMU vmce-7.2 was retired in part 20: its series is in git at 0093f79 (git show "
                "0093f79:qemu-patches/7.2/series; qemu-patches/README.md says why); use vmce-10.0 or vmce-10.2")
        for ask in (lambda: qemus.resolve("vmce-7.2"), lambda: qemus.binary("vmce-7.2")):
            with self.assertRaises(qemus.QemuError) as cm:
                ask()
            self.assertEqual(str(cm.exception), want)
        os.environ["VMCE_QEMU"] = "vmce-7.2"
        with self.assertRaises(qemus.QemuError) as cm:
            qemus.resolve()
        self.assertEqual(str(cm.exception), want)
        self.assertNotIn("vmce-7.2", qemus.NAMES)
        self.assertNotIn("vmce-7.2", qemus.BEHAVIOUR)

    def test_missing_from_the_build(self):
        os.environ["VMCE_BUILD_DIR"] = os.path.join(self.tmp, "build")
        for name, how in (("debian-10.0", "make qemus"),
                          ("vmce-10.0", "make qemu"), ("vmce-10.2", "make qemus"),
                          ("debian-11.1", "make qemus")):
            with self.assertRaises(qemus.QemuError) as cm:
                qemus.resolve(name)
            self.assertRegex(str(cm.exception), rf"^QEMU {name} is missing at {self.tmp}/build/qemus/{name}/"
                                                rf"\S+: run `{how}`$")

    def test_a_path_to_a_real_qemu_is_judged_as_the_nearest(self):
        link = os.path.join(self.tmp, "qemu-system-x86_64")
        os.symlink("/usr/bin/qemu-system-x86_64", link)
        for spelling in (link, self.tmp):  # the binary, or a directory that has it
            q = qemus.resolve(spelling)
            self.assertEqual((q.name, q.table, q.nearest, q.series), (link, "debian-7.2", "debian-7.2", False))
            self.assertEqual(q.label, f"{link} (as debian-7.2)")
        self.assertTrue(qemus.slug(link).startswith("qemu-"))
        self.assertNotIn("/", qemus.slug(link))
        self.assertEqual(qemus.slug("vmce-10.0"), "vmce-10.0")

    def test_not_a_qemu(self):
        for path, said in (("/bin/true", "/bin/true is not a QEMU: --version said"),
                           (os.path.join(self.tmp, "nothing"), "no such QEMU binary"),
                           (self.tmp, "is a directory with no qemu-system-x86_64")):
            with self.assertRaises(qemus.QemuError) as cm:
                qemus.resolve(path)
            self.assertIn(said, str(cm.exception))
        text = os.path.join(self.tmp, "notes.txt")
        open(text, "w").close()
        with self.assertRaises(qemus.QemuError) as cm:
            qemus.resolve(text)
        self.assertIn("is not an executable file", str(cm.exception))

    def test_not_x86_64(self):
        # how an aarch64 QEMU answers: a version line like any QEMU's, and
        # machines without pc or q35
        path = script(os.path.join(self.tmp, "qemu-system-aarch64"), "QEMU emulator version 8.2.2",
                      ["virt                 QEMU 8.2 ARM Virtual Machine (alias of virt-8.2)",
                       "raspi3b              Raspberry Pi 3B (revision 1.2)"])
        with self.assertRaises(qemus.QemuError) as cm:
            qemus.resolve(path)
        self.assertEqual(str(cm.exception), f"{path} is a QEMU but not qemu-system-x86_64 (it has no pc or "
                                            "q35 machine)")

    @unittest.skipUnless(os.path.exists("/usr/bin/qemu-system-i386"), "no qemu-system-i386 on this host")
    def test_i386_has_pc_but_is_refused(self):
        # Debian's qemu-system-i386 lists the pc machines too: its target
        # (QMP query-target) tells it apart
        with self.assertRaises(qemus.QemuError) as cm:
            qemus.resolve("/usr/bin/qemu-system-i386")
        self.assertEqual(str(cm.exception), "/usr/bin/qemu-system-i386 is a QEMU for i386, not qemu-system-x86_64")

    def test_version_read_and_nearest_of_an_x86_build(self):
        # an x86 machine list and a version vmce has no table for (the QMP
        # probe finds no inject-mce: a script answers no QMP)
        path = script(os.path.join(self.tmp, "qemu-system-x86_64"), "QEMU emulator version 9.1.3 (v9.1.3-dirty)",
                      ["pc                   Standard PC (i440FX + PIIX, 1996) (alias of pc-i440fx-9.1)",
                       "q35                  Standard PC (Q35 + ICH9, 2009) (alias of pc-q35-9.1)"])
        q = qemus.resolve(path)
        self.assertEqual((q.version, q.series, q.table, q.release), ((9, 1, 3), False, "debian-10.0",
                                                                     "9.1.3 (v9.1.3-dirty)"))
        self.assertTrue(q.has("succor"), "9.1 has SUCCOR upstream")
        self.assertFalse(q.has("tcg-forwarding"))

    def test_nearest_table(self):
        for version, series, want in (((7, 1), False, "debian-7.2"), ((8, 2), False, "debian-7.2"),
                                      ((9, 1), False, "debian-10.0"), ((10, 2), False, "debian-10.0"),
                                      ((11, 0), False, "debian-11.1"), ((12, 1), False, "debian-11.1"),
                                      # a build of the retired 7.2 series, by PATH: vmce-10.0's
                                      # table (which refuses a migration its 7.2 did not)
                                      ((7, 2), True, "vmce-10.0"), ((9, 2), True, "vmce-10.0"),
                                      ((10, 1), True, "vmce-10.0"), ((10, 2), True, "vmce-10.2"),
                                      ((11, 1), True, "vmce-10.2")):
            self.assertEqual(qemus.nearest_table(version, series), want, (version, series))

    def test_too_old_for_a_feature(self):
        q = qemus.resolve("debian-7.2")
        self.assertFalse(q.has("succor"))
        with self.assertRaises(qemus.QemuError) as cm:
            q.require("succor", "-cpu EPYC,succor=on")
        msg = str(cm.exception)
        self.assertRegex(msg, r"^QEMU debian-7\.2 \(7\.2[^)]*\) is too old for succor \(-cpu EPYC,succor=on\)")
        self.assertIn("needs QEMU 9.1 or vmce's series (vmce-10.0, vmce-10.2)", msg)
        for name in ("debian-10.0", "vmce-10.0", "vmce-10.2", "debian-11.1"):
            other = built(name)
            if other is not None:
                other.require("succor")  # no error


def own_libs_root():
    """debian-11.1's private root (qemu-patches/fetch --own-libs), or None
    with why, printed, when `make qemus` has not fetched it here"""
    q = built("debian-11.1")
    if q is None:
        print("debian-11.1 is not fetched here (make qemus): its tests are skipped", file=sys.stderr)
        return None
    return os.path.join(os.path.dirname(q.binary), "root")


class OnDebian13(unittest.TestCase):
    """Where debian-10.0 is the host's own QEMU: a Debian 13 host"""

    def release(self, text):
        with tempfile.NamedTemporaryFile("w", suffix="os-release") as f:
            f.write(text)
            f.flush()
            return qemus.debian_release(f.name)

    def test_release_read_from_os_release(self):
        self.assertEqual(self.release('PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nVERSION_ID="13"\n'), "13")
        self.assertEqual(self.release('VERSION_ID="12"\n'), "12")
        self.assertIsNone(self.release('ID=debian\n'), "sid says no VERSION_ID")
        self.assertIsNone(qemus.debian_release("/nonexistent/os-release"))

    def test_debian_10_0_is_the_hosts_own_on_13(self):
        real = qemus.debian_release
        try:
            qemus.debian_release = lambda: "13"
            self.assertEqual(qemus.KNOWN["debian-10.0"].locate(),
                             qemus.SYSTEM if os.path.exists(qemus.SYSTEM) else
                             os.path.join(paths.build_dir(), "qemus", "debian-10.0", "root", "usr", "bin",
                                          "qemu-system-x86_64"))
            self.assertIn("whose own QEMU is debian-10.0", qemus._other_release(qemus.SYSTEM))
            qemus.debian_release = lambda: "12"
            self.assertEqual(qemus.KNOWN["debian-10.0"].locate(),
                             os.path.join(paths.build_dir(), "qemus", "debian-10.0", "root", "usr", "bin",
                                          "qemu-system-x86_64"))
            self.assertEqual(qemus._other_release(qemus.SYSTEM), ": this host's qemu-system-x86 is not Debian 12's")
        finally:
            qemus.debian_release = real


class OwnLibraries(unittest.TestCase):
    """debian-11.1: trixie-backports' QEMU, built for a newer libc than this
    host's, run through its own loader by qemu-patches/fetch's script; and
    the same binary run without it, which cannot start here"""

    def setUp(self):
        self.root = own_libs_root()
        if self.root is None:
            self.skipTest("debian-11.1 is not fetched here (make qemus)")

    def test_the_script_is_the_qemu(self):
        # what run/vm and vmced rely on: the pid Popen gives is QEMU's (the
        # script execs), its command line holds the options given, and QEMU
        # answers QMP; its data files are the root's, searched before this
        # host's
        q = qemus.resolve("debian-11.1")
        self.assertEqual((q.version[:2], q.table, q.nearest, q.series), ((11, 1), "debian-11.1", None, False))
        with open(q.binary, "rb") as f:
            self.assertEqual(f.read(2), b"#!")
        p = subprocess.Popen([q.binary, "-machine", "none", "-nodefaults", "-display", "none",
                              "-name", "guest=own-libs-test", "-qmp", "stdio"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            p.stdout.readline()  # the greeting: QEMU is up, the script long gone
            with open(f"/proc/{p.pid}/cmdline", "rb") as f:
                cmdline = f.read().split(b"\0")
            exe = os.readlink(f"/proc/{p.pid}/exe")
            out, _ = p.communicate('{"execute":"qmp_capabilities"}\n{"execute":"query-version"}\n'
                                   '{"execute":"quit"}\n', timeout=20)
        finally:
            p.kill()
            p.wait()
        self.assertIn(b"guest=own-libs-test", cmdline)
        self.assertEqual(os.path.realpath(exe), os.path.realpath(os.path.join(
            self.root, "usr", "lib", "x86_64-linux-gnu", "ld-linux-x86-64.so.2")))
        self.assertIn('"minor": 1, "major": 11', out)
        dirs = subprocess.run([q.binary, "-L", "help"], capture_output=True, text=True).stdout.split()
        self.assertEqual(dirs[0], os.path.join(os.path.realpath(self.root), "usr", "share", "qemu"))

    def test_without_its_loader_it_cannot_run_here(self):
        # the root's own binary, run as any PATH is: the loader names only
        # the first library it misses, the error names them all (ldd)
        path = os.path.join(self.root, "usr", "bin", "qemu-system-x86_64")
        with self.assertRaises(qemus.QemuError) as cm:
            qemus.resolve(path)
        msg = str(cm.exception)
        self.assertRegex(msg, rf"^{re.escape(path)} cannot run here: it lacks \S+\.so\.\S+")
        self.assertIn("libcapstone.so.5", msg)  # Debian 12 has libcapstone4
        self.assertIn("needs GLIBC_2.38, newer than this host's", msg)
        self.assertTrue(msg.endswith("run it with its own libraries (qemu-patches/fetch --own-libs, "
                                     "as debian-11.1 is)"), msg)
        self.assertNotIn("\n", msg)


class WhatQemuDoes(unittest.TestCase):
    """expect.qemu_handles(): what a QEMU does by itself with a host error
    vmced passes on, from its BEHAVIOUR; one row per combination"""

    def test_table(self):
        B = qemus.BEHAVIOUR
        rows = [
            # forwarder, accel, -cpu features, QEMU, host vendor -> what
            ("vmced", "tcg", set(), "debian-7.2", None, None),
            ("vmced", "kvm", set(), "debian-7.2", AMD, None),
            ("qemu", "tcg", set(), "debian-7.2", None, QEMU_DIES),
            ("qemu", "tcg", set(), "debian-10.0", None, QEMU_DIES),
            ("qemu", "tcg", set(), "vmce-10.0", None, QEMU_FORWARDS),
            ("qemu", "tcg", set(), "vmce-10.2", None, QEMU_FORWARDS),
            ("qemu", "tcg", set(), "debian-11.1", None, QEMU_DIES),
            ("qemu", "kvm", {"succor"}, "debian-11.1", AMD, QEMU_FORWARDS),
            ("qemu", "kvm", set(), "debian-11.1", AMD, QEMU_GUEST_PANICS),
            ("qemu", "kvm", set(), "debian-7.2", INTEL, QEMU_FORWARDS),
            ("qemu", "kvm", set(), "debian-7.2", AMD, QEMU_GUEST_PANICS),
            ("qemu", "kvm", {"succor"}, "debian-7.2", AMD, QEMU_GUEST_PANICS),
            ("qemu", "kvm", set(), "debian-10.0", AMD, QEMU_GUEST_PANICS),
            ("qemu", "kvm", {"succor"}, "debian-10.0", AMD, QEMU_FORWARDS),
            ("qemu", "kvm", {"succor"}, "vmce-10.0", AMD, QEMU_FORWARDS),
            ("qemu", "kvm", set(), "vmce-10.0", None, None),  # a host vmce knows nothing of
        ]
        for forwarder, accel, flags, name, vendor, want in rows:
            got = qemu_handles(forwarder, accel, flags, B[name], vendor)
            self.assertEqual(got and got[0], want, (forwarder, accel, flags, name, vendor))
            if got:
                self.assertTrue(got[1], "every answer says why")


if __name__ == "__main__":
    unittest.main(testRunner=unittest.TextTestRunner(stream=sys.stdout, verbosity=2))
