#!/usr/bin/env python3
"""guest-kernel/fetch against a scripted archive: apt-cache and apt-get on
PATH answer from a directory of package stanzas and .deb files made here
with dpkg-deb. Debian's 6.x layout (all of it in linux-image-RELEASE) and
7.x's (linux-image-RELEASE empty, depending on linux-binary-, -modules- and
-base-RELEASE) laid out as the same kernel dir; a suite the archive does not
serve, and a package that cannot be downloaded, leave nothing behind. The
Arm64 guest's kernel (--arch arm64) from an apt state of that architecture."""
import os
import shutil
import stat
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
FETCH = os.path.join(ROOT, "guest-kernel", "fetch")
VMCE_CONFIG = os.path.join(ROOT, "guest-kernel", "vmce.config")
ARM64_CONFIG = os.path.join(ROOT, "guest-kernel", "vmce-arm64.config")

# the scripted apt: FAKE_APT/show/PKG is `apt-cache show PKG`, FAKE_APT/depends
# is `apt-cache depends METAPACKAGE` (its first line), FAKE_APT/arch the
# architecture apt-cache was asked for (-o APT::Architecture), FAKE_APT/debs/PKG.deb what
# `apt-get download PKG=V` gets; each download is logged to FAKE_APT/downloaded
APT_CACHE = r"""#!/bin/bash
args=()
while (($#)); do
	case $1 in
	-o) [[ $2 == APT::Architecture=* ]] && echo "${2#*=}" >"$FAKE_APT/arch"; shift 2 ;;
	-q*) shift ;;
	*) args+=("$1"); shift ;;
	esac
done
case ${args[0]} in
depends) [[ ${args[-1]} == "$(head -1 "$FAKE_APT/depends")" ]] || exit 100; cat "$FAKE_APT/depends" ;;
show) [[ -f $FAKE_APT/show/${args[-1]} ]] || exit 100; cat "$FAKE_APT/show/${args[-1]}" ;;
*) exit 100 ;;
esac
"""
APT_GET = r"""#!/bin/bash
args=() lists=
while (($#)); do
	case $1 in
	-o) [[ $2 == Dir::State::Lists=* ]] && lists=${2#*=}; shift 2 ;;
	-q*) shift ;;
	*) args+=("$1"); shift ;;
	esac
done
case ${args[0]} in
update)
	if [[ -f $FAKE_APT/no-such-suite ]]; then
		echo "E: The repository 'http://deb.debian.org/debian nosuch Release' does not have a Release file."
		exit 100
	fi
	touch "$lists/deb.debian.org_debian_dists_x_main_binary-amd64_Packages"
	;;
download)
	for p in "${args[@]:1}"; do
		name=${p%%=*}
		[[ -f $FAKE_APT/debs/$name.deb ]] || { echo "E: Can't find a source to download version '${p#*=}' of '$name'"; exit 100; }
		echo "$p" >>"$FAKE_APT/downloaded"
		cp "$FAKE_APT/debs/$name.deb" "./${name}_${p#*=}_amd64.deb"
	done
	;;
*) exit 100 ;;
esac
"""

REL7 = "7.3.4+deb13-amd64"
V7 = "7.3.4-1~bpo13+1"
REL6 = "6.1.0-57-amd64"
V6 = "6.1.192-3"
REL6_ARM = "6.1.0-57-arm64"
# an arm64 Image's first bytes: the EFI stub's "MZ", and "ARMd" at 0x38
ARM64_IMAGE = b"MZ" + b"\0" * 0x36 + b"ARMd" + b"\0" * 4032


class Fetch(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.apt = os.path.join(self.tmp, "apt")
        bindir = os.path.join(self.tmp, "bin")
        for d in (os.path.join(self.apt, "show"), os.path.join(self.apt, "debs"), bindir):
            os.makedirs(d)
        for name, text in (("apt-cache", APT_CACHE), ("apt-get", APT_GET)):
            path = os.path.join(bindir, name)
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        self.env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", FAKE_APT=self.apt,
                        VMCE_CACHE=os.path.join(self.tmp, "cache"))
        self.env.pop("GUEST_KERNEL_PKG", None)
        self.out = os.path.join(self.tmp, "kdir")

    def package(self, name, version, files, depends=None):
        """A .deb of @files (path in the package -> bytes) and its stanza"""
        root = os.path.join(self.tmp, "pkg", name)
        os.makedirs(os.path.join(root, "DEBIAN"))
        with open(os.path.join(root, "DEBIAN", "control"), "w") as f:
            f.write(f"Package: {name}\nVersion: {version}\nArchitecture: amd64\n"
                    f"Maintainer: vmce <vmce@localhost>\nDescription: test\n")
        for path, data in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "wb") as f:
                f.write(data)
        subprocess.run(["dpkg-deb", "-Zgzip", "--root-owner-group", "--build", root,
                        os.path.join(self.apt, "debs", f"{name}.deb")], check=True, capture_output=True)
        with open(os.path.join(self.apt, "show", name), "w") as f:
            f.write(f"Package: {name}\nVersion: {version}\n" + (f"Depends: {depends}\n" if depends else ""))

    def kernel_files(self, moddir, boot=None):
        """A kernel's files: vmlinuz and config in boot/ (6.x) or in the
        modules dir (7.x); a module, xz-compressed as Debian ships it"""
        with open(VMCE_CONFIG, "rb") as f:
            config = b"".join(line for line in f if line.startswith(b"CONFIG_"))
        ko = subprocess.run(["xz", "-c"], input=b"\x7fELF not really a module", capture_output=True,
                            check=True).stdout
        image, conf = (f"{boot}/vmlinuz", f"{boot}/config") if boot else (f"{moddir}/vmlinuz", f"{moddir}/config")
        return ({image: b"\0" * 4096}, {conf: config, f"{moddir}/modules.builtin": b""},
                {f"{moddir}/kernel/fs/ext4/ext4.ko.xz": ko})

    def split_archive(self):
        """Debian's 7.x: the image package is empty and depends on the rest"""
        moddir = f"usr/lib/modules/{REL7}"
        binary, base, modules = self.kernel_files(moddir)
        self.package(f"linux-image-{REL7}", V7, {f"usr/share/doc/linux-image-{REL7}/x": b""},
                     depends=f"dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, "
                             f"linux-base-{REL7} (= {V7}), linux-binary-{REL7} (= {V7}), "
                             f"linux-modules-{REL7} (= {V7})")
        self.package(f"linux-binary-{REL7}", V7, binary, depends=f"linux-base-{REL7} (= {V7})")
        self.package(f"linux-base-{REL7}", V7, base)
        self.package(f"linux-modules-{REL7}", V7, modules, depends=f"kmod, linux-base-{REL7} (= {V7})")
        with open(os.path.join(self.apt, "depends"), "w") as f:
            f.write(f"linux-image-amd64\n  Depends: linux-base-amd64\n  Depends: linux-image-{REL7}\n"
                    "  Depends: linux-modules-amd64\n")

    def fetch(self, *args):
        return subprocess.run([FETCH, "--out", self.out, *args], env=self.env, capture_output=True, text=True)

    def downloaded(self):
        with open(os.path.join(self.apt, "downloaded")) as f:
            return sorted(f.read().split())

    def test_split_packaging_is_followed_and_unpacked(self):
        self.split_archive()
        r = self.fetch("--suite", "trixie-backports")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.downloaded(), sorted(f"linux-{p}-{REL7}={V7}" for p in
                                                   ("image", "binary", "base", "modules")))
        moddir = f"root/usr/lib/modules/{REL7}"
        self.assertEqual(os.readlink(os.path.join(self.out, "vmlinuz")), f"{moddir}/vmlinuz")
        self.assertEqual(os.readlink(os.path.join(self.out, "config")), f"{moddir}/config")
        self.assertEqual(os.readlink(os.path.join(self.out, "modules")), moddir)
        with open(os.path.join(self.out, "release")) as f:
            self.assertEqual(f.read(), REL7 + "\n")
        with open(os.path.join(self.out, "package")) as f:
            self.assertEqual(f.read(), f"linux-image-{REL7} {V7}\n")
        self.assertTrue(os.path.isfile(os.path.join(self.out, "modules", "kernel", "fs", "ext4", "ext4.ko")),
                        "the module unpacked for busybox insmod")
        with open(os.path.join(self.out, "modules", "modules.dep")) as f:
            self.assertIn("kernel/fs/ext4/ext4.ko:", f.read())
        self.assertEqual([n for n in os.listdir(self.out) if n.endswith(".deb") or n == "root.new"], [])
        self.assertIn("check-config", r.stdout)
        # the same package again: nothing downloaded
        os.unlink(os.path.join(self.apt, "downloaded"))
        r = self.fetch("--suite", "trixie-backports")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("already holds", r.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.apt, "downloaded")))

    def test_the_6x_layout_still_works(self):
        boot = "boot"
        image, base, modules = self.kernel_files(f"lib/modules/{REL6}", boot=boot)
        files = {f"boot/vmlinuz-{REL6}": image["boot/vmlinuz"],
                 f"boot/config-{REL6}": base["boot/config"],
                 f"lib/modules/{REL6}/modules.builtin": b"", **modules}
        # its Depends carry no release: none of them is unpacked
        self.package(f"linux-image-{REL6}", V6, files,
                     depends="kmod, linux-base (>= 4.3~), initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool")
        with open(os.path.join(self.apt, "depends"), "w") as f:
            f.write(f"linux-image-amd64\n  Depends: linux-image-{REL6}\n")
        r = self.fetch()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.downloaded(), [f"linux-image-{REL6}={V6}"])
        self.assertEqual(os.readlink(os.path.join(self.out, "vmlinuz")), f"root/boot/vmlinuz-{REL6}")
        self.assertEqual(os.readlink(os.path.join(self.out, "config")), f"root/boot/config-{REL6}")
        self.assertEqual(os.readlink(os.path.join(self.out, "modules")), f"root/lib/modules/{REL6}")

    def arm64_archive(self, image, fragment=ARM64_CONFIG):
        with open(fragment, "rb") as f:
            config = b"".join(line for line in f if line.startswith(b"CONFIG_"))
        self.package(f"linux-image-{REL6_ARM}", V6,
                     {f"boot/vmlinuz-{REL6_ARM}": image, f"boot/config-{REL6_ARM}": config,
                      f"lib/modules/{REL6_ARM}/modules.builtin": b""})
        with open(os.path.join(self.apt, "depends"), "w") as f:
            f.write(f"linux-image-arm64\n  Depends: linux-image-{REL6_ARM}\n")

    def test_arm64_from_a_state_of_its_own(self):
        self.arm64_archive(ARM64_IMAGE)
        r = self.fetch("--arch", "arm64")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.downloaded(), [f"linux-image-{REL6_ARM}={V6}"],
                         "linux-image-arm64's kernel, not amd64's")
        with open(os.path.join(self.apt, "arch")) as f:
            self.assertEqual(f.read().strip(), "arm64", "apt asked for arm64's packages")
        with open(os.path.join(self.tmp, "cache", "apt-bookworm-arm64", "sources.list")) as f:
            sources = f.read()
        self.assertIn("[arch=arm64 ", sources)
        self.assertIn(" bookworm main", sources)
        self.assertIn(" bookworm-security main", sources)
        self.assertEqual(os.readlink(os.path.join(self.out, "Image")), f"root/boot/vmlinuz-{REL6_ARM}",
                         "Debian 12's arm64 vmlinuz is the plain Image")
        self.assertFalse(os.path.exists(os.path.join(self.out, "vmlinux")), "no x86 vmlinux")
        self.assertIn("check-config", r.stdout)

    def test_arm64_gzipped_image_is_unpacked(self):
        gz = subprocess.run(["gzip", "-c"], input=ARM64_IMAGE, capture_output=True, check=True).stdout
        self.arm64_archive(gz)
        r = self.fetch("--arch", "arm64")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.out, "Image"), "rb") as f:
            self.assertEqual(f.read(), ARM64_IMAGE)

    def test_arm64_config_without_ghes_is_named(self):
        # the x86 config: no APEI, no GHES
        self.arm64_archive(ARM64_IMAGE, fragment=VMCE_CONFIG)
        r = self.fetch("--arch", "arm64")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("CONFIG_ACPI_APEI_GHES is not set", r.stderr)

    def test_an_arch_vmce_has_no_guest_for(self):
        r = self.fetch("--arch", "riscv64")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--arch takes amd64 or arm64, not 'riscv64'", r.stderr)

    def test_a_suite_the_archive_does_not_serve(self):
        open(os.path.join(self.apt, "no-such-suite"), "w").close()
        r = self.fetch("--suite", "nosuch")
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("Debian's archive does not serve the suite nosuch (no Release file there)", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "cache", "apt-nosuch")),
                         "no apt state left for a suite that is not there")
        self.assertFalse(os.path.exists(self.out))

    def test_a_dependency_that_cannot_be_downloaded_leaves_nothing(self):
        self.split_archive()
        os.unlink(os.path.join(self.apt, "debs", f"linux-modules-{REL7}.deb"))
        r = self.fetch("--suite", "trixie-backports")
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn(f"Can't find a source to download version '{V7}' of 'linux-modules-{REL7}'", r.stderr)
        self.assertEqual(sorted(os.listdir(self.out)), [], "no .deb, no half-unpacked tree, no package file")

    def test_not_a_suite_name(self):
        r = self.fetch("--suite", "trixie backports")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("is not a Debian suite name", r.stderr)


if __name__ == "__main__":
    unittest.main()
