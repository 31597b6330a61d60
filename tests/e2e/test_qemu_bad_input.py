#!/usr/bin/env python3
"""Bad input to the QEMU builds (qemu-patches/build, qemu-patches/fetch),
as a user meets it: one error line, a non-zero exit, and nothing left in the
cache that looks built, so that the next run starts clean.

  a series that does not apply   the patch named, with the file it fails on;
                                 the half-patched tree removed
  a series naming a missing patch, an unknown base, a base with no series,
  the retired base 7.2
  no network for the source or the package (unshare --net): what to get
  a source the archive answers 404 for (QEMU 11.1's in sid, part 20): named
                                 as such, not taken for a network failure

The real cache is used where the source is needed (`make qemus` fetched it
already): a series of its own gets a tree of its own there, which must be
gone again afterwards.
"""
import glob
import os
import shutil
import subprocess
import tempfile

from common import Tap, paths

tap = Tap()
if os.geteuid() != 0:
    tap.skip("QEMU build bad input", "it needs root (apt state in /var/cache/vmce, unshare)")
    tap.done()

HERE = os.path.join(paths.ROOT, "qemu-patches")
CACHE = os.path.join(os.environ.get("VMCE_CACHE", "/var/cache/vmce"), "qemu")
work = tempfile.mkdtemp(prefix="qemu-bad-", dir=os.path.join(paths.build_dir()))


def run(*args, timeout=600):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)


def one_error_line(res, says, what):
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("build: building ")]
    tap.ok(res.returncode != 0 and len(lines) == 1 and all(s in lines[0] for s in says),
           f"{what}: one error line, exit non-zero", diag={"rc": res.returncode, "stderr": res.stderr[-1500:]})
    return lines[0] if lines else ""


def trees(base):
    return set(glob.glob(os.path.join(CACHE, f"vmce-{base}-*")))


def built_source(base):
    """The cached source tree of @base, or None: `make qemus` made it"""
    return any(os.path.exists(os.path.join(t, ".built")) for t in trees(base)
               if not t.endswith(".log"))


# -- a series that does not apply: the real series, then one patch whose
# context is not in QEMU 10.0's system/physmem.c
if not built_source("10.0"):
    tap.skip("a series that does not apply", f"no vmce-10.0 tree in {CACHE} (make qemus builds it)")
else:
    series = os.path.join(work, "series-bad")
    shutil.copytree(os.path.join(HERE, "10.0"), series)
    bad = "0008-physmem-a-change-to-lines-that-are-not-there.patch"
    with open(os.path.join(series, bad), "w") as f:
        f.write("From: vmce <vmce@localhost>\nSubject: [PATCH] physmem: a change to lines that are not there\n\n"
                "---\n"
                "--- a/system/physmem.c\n+++ b/system/physmem.c\n"
                "@@ -1,3 +1,3 @@\n-no such line in QEMU 10.0\n+a replacement\n no such context either\n"
                " nor this\n")
    with open(os.path.join(series, "series"), "a") as f:
        f.write(bad + "\n")
    before = trees("10.0")
    out = os.path.join(work, "out")
    res = run(os.path.join(HERE, "build"), "--base", "10.0", "--series", series, "--out", out, "--jobs", "1")
    line = one_error_line(res, (bad, "does not apply", "system/physmem.c"),
                          "a series that does not apply")
    tap.ok(bad in line and "it fails on system/physmem.c" in line,
           "a series that does not apply: the patch and the file it fails on are named", diag=line)
    left = {t for t in trees("10.0") - before if not t.endswith(".log")}
    tap.ok(not left and not os.path.lexists(out),
           "a series that does not apply: no half-patched tree left in the cache, no link made",
           diag=sorted(left))
    for log in trees("10.0") - before:
        if log.endswith(".log"):
            os.unlink(log)

# -- a series naming a patch that is not there, an unknown base: before
# anything is fetched
series = os.path.join(work, "series-missing")
os.makedirs(series)
with open(os.path.join(series, "series"), "w") as f:
    f.write("0001-not-here.patch\n")
res = run(os.path.join(HERE, "build"), "--base", "10.0", "--series", series, "--out", os.path.join(work, "o2"))
one_error_line(res, ("0001-not-here.patch", "not there"), "a series naming a patch that is not there")
res = run(os.path.join(HERE, "build"), "--base", "9.9", "--out", os.path.join(work, "o3"))
one_error_line(res, ("unknown base '9.9'",), "an unknown base")
res = run(os.path.join(HERE, "build"), "--base", "10.2", "--target", "riscv64", "--out", os.path.join(work, "o8"))
one_error_line(res, ("unknown target 'riscv64'", "x86_64 or aarch64"), "an unknown target")
res = run(os.path.join(HERE, "build"), "--base", "11.1", "--out", os.path.join(work, "o6"))
one_error_line(res, ("no series for 11.1", "--series DIR"), "a base vmce has no series for (11.1), without --series")
# the retired base: where the series went, nothing built or linked
before = trees("7.2")
res = run(os.path.join(HERE, "build"), "--base", "7.2", "--out", os.path.join(work, "o7"))
one_error_line(res, ("7.2 series was retired", "git show 0093f79:qemu-patches/7.2/series", "--base 10.0"),
               "the retired base 7.2")
tap.ok(trees("7.2") == before and not os.path.lexists(os.path.join(work, "o7")),
       "the retired base 7.2: nothing new in the cache, no link made")

# -- no network: the source (build) and the package (fetch), into an empty
# cache; the machine's apt lists are there (make qemus), the mirror is not
if shutil.which("unshare") is None:
    tap.skip("no network", "unshare (util-linux) is not installed")
else:
    empty = os.path.join(work, "cache")
    res = run("unshare", "--net", os.path.join(HERE, "build"), "--base", "10.0", "--cache", empty,
              "--out", os.path.join(work, "o4"), timeout=300)
    one_error_line(res, ("a Debian package mirror is needed",), "no network for QEMU's source (build)")
    res = run("unshare", "--net", os.path.join(HERE, "fetch"), "--cache", empty,
              "--out", os.path.join(work, "o5"), timeout=300)
    one_error_line(res, ("a Debian package mirror is needed",), "no network for Debian's QEMU 10.0 package (fetch)")
    looks_built = [p for p in glob.glob(os.path.join(empty, "*"))
                   if os.path.isdir(p) and (os.listdir(p) or os.path.exists(os.path.join(p, ".built")))]
    tap.ok(not looks_built and not os.path.lexists(os.path.join(work, "o4"))
           and not os.path.lexists(os.path.join(work, "o5")),
           "no network: nothing in the cache that looks fetched or built (only logs), no link made",
           diag=sorted(os.listdir(empty)) if os.path.isdir(empty) else None)

# -- a source sid's lists name but the archive answers 404 for: QEMU 11.1's
# when part 20 looked (the binary packages download, the source does not)
res = run(os.path.join(HERE, "build"), "--base", "11.1", "--source-only", timeout=300)
if res.returncode == 0:
    tap.skip("a source the archive answers 404 for",
             f"Debian serves QEMU 11.1's source now ({res.stdout.strip()}): the series can move to it "
             "(qemu-patches/README.md), and no source of the archive's answers 404 to test with")
else:
    line = one_error_line(res, ("answers 404 for QEMU 1:11.1", "nothing of it is kept"),
                          "a source the archive answers 404 for")
    tap.ok("a Debian package mirror is needed" not in line and ".dsc" in line,
           "a source the archive answers 404 for: not taken for a network failure, its file named", diag=line)
    kept = [p for p in glob.glob(os.path.join(CACHE, "src-1_11.1*")) if os.path.isdir(p)]
    tap.ok(not kept, "a source the archive answers 404 for: nothing of it in the cache", diag=kept)

shutil.rmtree(work, ignore_errors=True)
tap.done()
