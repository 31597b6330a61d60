#!/usr/bin/env python3
"""Stages one QEMU into the host lab's L1 image, with its own data files,
modules and libraries, so that several QEMUs live side by side in L1
without one finding another's files.

Usage: qemu-files.py STAGE DIR BINARY
  STAGE   the image's staging root
  DIR     where the QEMU goes in L1 (e.g. /opt/qemus/debian-10.0): the
          binary becomes DIR/bin/qemu-system-x86_64
  BINARY  the qemu-system-x86_64 to stage

Where a QEMU looks for its files is compiled in: its data directory and
firmware path (/usr/share/qemu, /usr/share/seabios, ...) and its module
directory. A relocatable QEMU (Debian's 7.2) looks for them relative to its
binary (../share/qemu), a non-relocatable one (Debian's 10.0) at the
compiled path itself, and every QEMU since 7.1 looks first in a
`qemu-bundle` directory next to its binary when there is one (how a build
tree runs). So each QEMU gets DIR/bin/qemu-bundle/<compiled path>, and
nothing is staged at the shared /usr/share/qemu.

The compiled paths are asked of QEMU itself: `-L help` lists its data
directories; run from a copy of the binary next to an empty qemu-bundle it
lists them as qemu-bundle/<compiled path>. The files put there are the
QEMU's own: a build tree's qemu-bundle, or the files next to the binary
(PREFIX/bin/../share/qemu: Debian's 7.2, an unpacked Debian package such
as debian-10.0) where they are, or else what it uses on this host (the
firmware path entry `-L help` names here, e.g. Debian 12's SeaBIOS for
debian-10.0). Only firmware is copied (*.bin, *.rom: the L2 guests boot
with -nodefaults -kernel), and of the modules only the accelerators
(Debian's 7.2 builds TCG as accel-tcg-x86_64.so). Debug information is
stripped from the binary (a build tree's is large; L1 unpacks the image
under TCG). Libraries go to their own paths, as ldd names them: they are
this host's, and the same file for every QEMU that needs one.

A QEMU with a root of its own (a QEMU built for a newer Debian than this
host: run through that root's loader by qemu-patches/own-libs-wrapper's
script, as debian-11.1 is, or a Debian 13 root's own QEMU for the Debian
13 L1) is staged as it runs: BINARY is the script, with ROOT (the `root`
next to it) holding usr/bin/qemu-system-x86_64 and usr/lib64's loader. The
script goes to DIR/bin/qemu-system-x86_64 as it is, and of ROOT, to
DIR/bin/root, the loader, the binary, the libraries it and its accelerator
modules load (asked of ROOT's loader: `--list`; every one must be ROOT's)
and the firmware of usr/share/qemu and usr/share/seabios. Those libraries
live beside this host's (L1's Python and vmced use Debian 12's) and only
that QEMU loads them.

Prints one line: what went where.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

FIRMWARE = re.compile(r".*\.bin$")
MODULES = re.compile(r"accel-.*\.so$")
MAX_FILE = 8 << 20


def die(text):
    sys.exit(f"qemu-files: {text}")


def data_dirs(binary):
    """QEMU's data directories as it finds them (-L help), in order"""
    r = subprocess.run([binary, "-L", "help"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        die(f"{binary} -L help failed: {(r.stderr.strip() or r.stdout.strip())[:200]}")
    return [ln.strip() for ln in r.stdout.splitlines() if ln.strip().startswith("/")]


def compiled_dirs(binary):
    """The same, as compiled in: asked of a copy of the binary next to an
    empty qemu-bundle"""
    with tempfile.TemporaryDirectory(prefix="qemu-files-") as tmp:
        copy = os.path.join(tmp, "qemu-system-x86_64")
        try:
            os.link(binary, copy)
        except OSError:
            shutil.copy2(binary, copy)
        bundle = os.path.join(tmp, "qemu-bundle")
        os.mkdir(bundle)
        found = data_dirs(copy)
        real_bundle = os.path.realpath(bundle)
        out = []
        for d in found:
            for b in (bundle, real_bundle):
                if d.startswith(b + "/"):
                    out.append(d[len(b):])
                    break
            else:
                die(f"{binary}: with a qemu-bundle next to it, -L help still says {d}")
        return out


def strings(path, minimum=6):
    with open(path, "rb") as f:
        data = f.read()
    return {m.group().decode() for m in re.finditer(rb"[\x20-\x7e]{%d,}" % minimum, data)}


def stage_file(stage, src, dst, mode=None):
    """Copies @src (symlinks resolved) to @dst under @stage, once"""
    out = stage + dst
    if os.path.exists(out):
        return False
    os.makedirs(os.path.dirname(out), exist_ok=True)
    shutil.copyfile(os.path.realpath(src), out)
    os.chmod(out, mode if mode is not None else os.stat(src).st_mode & 0o777)
    return True


def stage_libraries(stage, path):
    r = subprocess.run(["ldd", path], capture_output=True, text=True)
    missing = [ln.split()[0] for ln in r.stdout.splitlines() if "not found" in ln]
    if missing:
        die(f"{path} needs libraries this host lacks: {', '.join(missing)}")
    n = 0
    for ln in r.stdout.splitlines():
        m = re.search(r"=> (/\S+)", ln) or re.match(r"\s*(/\S+)", ln)
        if m:
            n += stage_file(stage, m.group(1), m.group(1))
    return n


LOADER = "usr/lib64/ld-linux-x86-64.so.2"
LIBDIR = "usr/lib/x86_64-linux-gnu"
ROOT_FIRMWARE = ("usr/share/qemu", "usr/share/seabios")


def own_root(binary):
    """The root a QEMU runs from with its own libraries, or None: @binary is
    a script (not ELF) with `root` next to it holding the loader and
    usr/bin/qemu-system-x86_64 (qemu-patches/own-libs-wrapper)"""
    with open(binary, "rb") as f:
        if f.read(4) == b"\x7fELF":
            return None
    root = os.path.join(os.path.dirname(binary), "root")
    for need in (LOADER, "usr/bin/qemu-system-x86_64"):
        if not os.path.exists(os.path.join(root, need)):
            die(f"{binary} is not an ELF binary and has no {os.path.join(root, need)}: "
                "not a QEMU run with its own libraries (qemu-patches/own-libs-wrapper)")
    return os.path.realpath(root)


def root_libraries(root, path, listed=None):
    """The libraries @path loads, as @root's own loader finds them in
    @root; @listed: its `--list` output (asked when None). Each as a
    path relative to @root: one found outside @root (this host's) is an
    error, as the copy in L1 would not have it"""
    if listed is None:
        r = subprocess.run([os.path.join(root, LOADER), "--library-path", os.path.join(root, LIBDIR),
                            "--list", path], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            die(f"{root}'s loader cannot list what {path} needs: {(r.stderr or r.stdout).strip()[:200]}")
        listed = r.stdout
    rels = []
    for ln in listed.splitlines():
        if "not found" in ln:
            die(f"{path} needs {ln.split()[0]}, which {root} lacks")
        m = re.search(r"=> (/\S+)", ln) or re.match(r"\s*(/\S+)", ln)
        if not m:
            continue
        lib = os.path.realpath(m.group(1))
        if os.path.basename(lib).startswith("ld-linux"):
            continue
        if not lib.startswith(root + "/"):
            die(f"{path} loads {lib}, which is not in its root {root}")
        # under the name the loader looks for, in LIBDIR
        name = os.path.basename(m.group(1))
        rels.append((lib, f"{LIBDIR}/{name}"))
    return rels


def stage_own_root(stage, where, script, root):
    """A QEMU that runs with its own root: the script as it is, and what
    of its root it needs (module docstring)"""
    dst = f"{where}/bin"
    os.makedirs(stage + dst, exist_ok=True)
    stage_file(stage, script, f"{dst}/qemu-system-x86_64", 0o755)
    in_l1 = f"{dst}/root"
    stage_file(stage, os.path.join(root, LOADER), f"{in_l1}/{LOADER}", 0o755)
    binary = os.path.join(root, "usr/bin/qemu-system-x86_64")
    out = stage + f"{in_l1}/usr/bin/qemu-system-x86_64"
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if subprocess.run(["objcopy", "--strip-debug", binary, out], capture_output=True).returncode != 0:
        shutil.copyfile(binary, out)
    os.chmod(out, 0o755)
    libs = sum(stage_file(stage, src, f"{in_l1}/{rel}", 0o644) for src, rel in root_libraries(root, binary))
    mods = 0
    moddir = os.path.join(root, LIBDIR, "qemu")
    for name in sorted(os.listdir(moddir)) if os.path.isdir(moddir) else []:
        if MODULES.match(name):
            path = os.path.join(moddir, name)
            mods += stage_file(stage, path, f"{in_l1}/{LIBDIR}/qemu/{name}", 0o644)
            libs += sum(stage_file(stage, src, f"{in_l1}/{rel}", 0o644) for src, rel in root_libraries(root, path))
    files = 0
    for sub in ROOT_FIRMWARE:
        src = os.path.join(root, sub)
        for name in sorted(os.listdir(src)) if os.path.isdir(src) else []:
            path = os.path.join(src, name)
            if FIRMWARE.match(name) and os.path.isfile(path) and os.path.getsize(path) <= MAX_FILE:
                files += stage_file(stage, path, f"{in_l1}/{sub}/{name}", 0o644)
    # the wrapper names it with -L; an empty one is searched and passed by
    os.makedirs(stage + f"{in_l1}/usr/lib/ipxe/qemu", exist_ok=True)
    print(f"{dst}/qemu-system-x86_64: its own root {root} in {in_l1}: {files} firmware file(s), "
          f"{mods} module(s), {libs} of its own librar(ies)")


def main():
    if len(sys.argv) != 4:
        die("usage: qemu-files.py STAGE DIR BINARY")
    stage, where, binary = sys.argv[1], sys.argv[2].rstrip("/"), os.path.realpath(sys.argv[3])
    if not os.path.isfile(binary) or not os.access(binary, os.X_OK):
        die(f"{binary} is not an executable file")
    root = own_root(binary)
    if root:
        stage_own_root(stage, where, binary, root)
        return
    exec_dir = os.path.dirname(binary)
    bundle_here = os.path.join(exec_dir, "qemu-bundle")
    here = data_dirs(binary)
    compiled = compiled_dirs(binary)
    if len(here) != len(compiled):
        die(f"{binary}: -L help lists {len(here)} directories here and {len(compiled)} in a bundle")
    datadir = next((d for d in compiled if d.endswith("/share/qemu")), None)
    prefix = datadir[:-len("/share/qemu")] if datadir else None
    # a binary in PREFIX/bin, not in a build tree: its own files are next to it
    own_prefix = os.path.dirname(exec_dir) if os.path.basename(exec_dir) == "bin" else None

    def source(compiled_path, found_here=None):
        if os.path.isdir(bundle_here):
            return bundle_here + compiled_path
        if own_prefix and prefix and compiled_path.startswith(prefix + "/"):
            own = own_prefix + compiled_path[len(prefix):]
            if os.path.isdir(own):
                return own
        return found_here

    dst_bin = f"{where}/bin/qemu-system-x86_64"
    os.makedirs(os.path.dirname(stage + dst_bin), exist_ok=True)
    r = subprocess.run(["objcopy", "--strip-debug", binary, stage + dst_bin], capture_output=True, text=True)
    if r.returncode != 0:
        shutil.copyfile(binary, stage + dst_bin)
    os.chmod(stage + dst_bin, 0o755)
    libs = stage_libraries(stage, binary)
    bundle = f"{where}/bin/qemu-bundle"
    files, used = 0, []
    for found_here, comp in zip(here, compiled):
        src = source(comp, found_here)
        if not src or not os.path.isdir(src):
            continue
        used.append(f"{comp} <- {os.path.normpath(src)}")
        for name in sorted(os.listdir(src)):
            path = os.path.join(src, name)
            if FIRMWARE.match(name) and os.path.isfile(path) and os.path.getsize(path) <= MAX_FILE:
                files += stage_file(stage, path, f"{bundle}{comp}/{name}", 0o644)
    # the module directory is not in -L help: the compiled string that
    # looks like one (.../lib[/ARCH]/qemu) under the same prefix
    mods = 0
    if prefix:
        for comp in sorted(s for s in strings(binary) if re.fullmatch(rf"{re.escape(prefix)}/lib(/[\w.+-]+)?/qemu", s)
                           and s not in compiled):
            if os.path.isdir(bundle_here):
                src = bundle_here + comp
            elif comp.startswith(prefix + "/") and own_prefix:
                src = own_prefix + comp[len(prefix):]
            else:
                src = comp
            if not os.path.isdir(src):
                continue
            for name in sorted(os.listdir(src)):
                if MODULES.match(name):
                    path = os.path.join(src, name)
                    dst = f"{bundle}{comp}/{name}"
                    if stage_file(stage, path, dst, 0o644):
                        mods += 1
                        libs += stage_libraries(stage, path)
            used.append(f"{comp} <- {os.path.normpath(src)} (modules)")
    print(f"{dst_bin}: {files} firmware file(s), {mods} module(s), {libs} new librar(ies); "
          + "; ".join(used))


if __name__ == "__main__":
    main()
