#!/usr/bin/env python3
"""The guest kernel as a campaign axis, end to end: the full matrix on
Debian's 6.1, vmce's patched 6.1, Debian's 6.12, trixie-backports' 7.3 and,
when it is built (make check-all builds it, make check does not), vmce's
patched 6.12, each judged by its own expectations, and a report with one
column per kernel. On vmce-6.1 a KSM page recovers (its mappers are signalled, and
ksmd merging the same data again does not bring the guest down), an
mlocked page is reported as mlocked, and the per-node memory_failure
statistics count every error. On vmce-6.12 the same for KSM and mlock,
where Debian's 6.12 oopses and says "LRU page"; and the series' selftest
(ksm-scan: ksm_hwpoison) fails on Debian's kernels and passes on vmce's.
Debian's 7.3 as 6.12, but for kernel pages ("reserved kernel page").
Then the bad input: check-config on a kernel without MEMORY_FAILURE (run
anyway, as "no handler": e2e-images), run/vm on one without VIRTIO_CONSOLE
(refused: vmce's agent cannot run), a file that is not a kernel, an unknown kernel name in a campaign file,
a QEMU's name given for a kernel and a kernel's for a QEMU, a patch that
does not apply, no network for the source.
"""
import json
import os
import shutil
import subprocess
import sys

from common import Tap, paths, prerequisites, workdir

tap = Tap()
prerequisites(tap)
CAMPAIGN = os.path.join(paths.ROOT, "run", "campaign")
RUN_VM = os.path.join(paths.ROOT, "run", "vm")
CHECK_CONFIG = os.path.join(paths.ROOT, "guest-kernel", "check-config")
BUILD = os.path.join(paths.ROOT, "guest-kernel", "build")
KERNELS = ("debian-6.1", "vmce-6.1", "debian-6.12", "debian-7.3")
VMCE = os.path.join(paths.build_dir(), "kernels", "vmce-6.1")
# the series on 6.12 is make check-all's (make kernels-all): its column and
# its own checks below run where it is built, and say so where it is not
VMCE_612 = os.path.exists(os.path.join(paths.build_dir(), "kernels", "vmce-6.12", "release"))
if VMCE_612:
    KERNELS += ("vmce-6.12",)


def run(*argv, timeout=600, **kw):
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, **kw)


def one_error_line(res, want, desc):
    lines = res.stderr.strip().splitlines()
    tap.ok(res.returncode != 0 and len(lines) == 1 and want in lines[0], desc,
           diag=f"rc {res.returncode}: {res.stderr.strip()[-600:]}")


for k in KERNELS[1:]:
    if not os.path.exists(os.path.join(paths.build_dir(), "kernels", k, "release")):
        tap.bail(f"the {k} kernel is missing: run `make kernels` (make check does)")
if not VMCE_612:
    tap.skip("vmce-6.12's column: its mlocked pages named, ksmd living through a KSM page's error, "
             "its selftest passing", "vmce-6.12 is not built (make kernel-src-6.12; make check-all builds it)")

# --- the five kernels, the full matrix ----------------------------------
out = workdir("kernels")
res = run(sys.executable, CAMPAIGN, "--kernels", ",".join(KERNELS), "--fresh", "--out", out,
          os.path.join(paths.ROOT, "run", "campaigns", "full.ini"), timeout=1800)
tap.diag(res.stdout.strip().splitlines()[-1] if res.stdout.strip() else res.stderr[-2000:])
tap.eq(res.returncode, 0, f"the full matrix on {len(KERNELS)} kernels: every case passed")
with open(os.path.join(out, "results.jsonl")) as f:
    cases = [r for r in map(json.loads, f) if r.get("type") == "case"]
by = {}
for r in cases:
    by.setdefault(r["case"]["key"], {})[r["case"]["kernel"]] = r
tap.ok(len(by) >= 40 and all(set(v) == set(KERNELS) for v in by.values()),
       f"every one of the {len(by)} cases ran on all {len(KERNELS)} kernels")
for k in KERNELS:
    bad = [r for r in cases if r["case"]["kernel"] == k and r["verdict"] != "pass"]
    # why each failed, as the report says it: a CI log is all there is of a run elsewhere
    tap.ok(not bad, f"{k}: every case passed against {k}'s own expectations",
           diag=[(r["case"]["id"], r["verdict"], r.get("reasons"),
                  (r.get("observed") or {}).get("actions")) for r in bad[:6]])
    tables = {(r.get("expected") or {}).get("table") for r in cases if r["case"]["kernel"] == k}
    tap.eq(tables, {k}, f"{k}: judged by its own table")

with open(os.path.join(out, "report.html")) as f:
    report = f.read()
tap.ok(all(f"<th>{k}</th>" in report for k in KERNELS), "the report has a column per kernel")
section = report[report.find("What differs"):report.find("</ul>", report.find("What differs"))]
tap.ok(section.count("<li>") >= 3 and "ksm" in section, "the report lists what differs (ksm among it)",
       diag=section[:600])


def obs_of(key_prefix, kernel):
    hits = [v[kernel] for key, v in sorted(by.items()) if key.startswith(key_prefix)]
    return hits[0]["observed"] if hits else None


# KSM: refused by Debian's 6.1, recovered by vmce-6.1 with every mapper told
# and ksmd's next merge of the same data survived
obs = obs_of("found/ksm/ao/early", "debian-6.1")
if obs:
    tap.eq(list(obs["actions"].values()), [["unmapping failed page", "Ignored"]],
           "debian-6.1: a KSM page is refused")
obs = obs_of("found/ksm/ao/early", "vmce-6.1")
if obs:
    w = obs["workloads"][0]
    action = list(obs["actions"].values())[0]
    tap.eq(action[1], "Recovered", f"vmce-6.1: a KSM page recovers ({action[0]})")
    told = sorted({s["pid"] for s in obs["signals"] if s["code"] == 5
                   and int(s["addr"], 16) >> 12 == int(w["va"], 16) >> 12})
    tap.eq(told, sorted(w["pids"]), "vmce-6.1: every process mapping the KSM page got BUS_MCEERR_AO at its VA")
    after = obs.get("aftermath") or {}
    tap.ok(obs["guest_alive"] and not obs["panic"] and after.get("how") and not after.get("crash"),
           "vmce-6.1: ksmd merging the same data again does not bring the guest down", diag=after)
obs = obs_of("found/ksm/ao/late", "vmce-6.1")
if obs:
    w = obs["workloads"][0]
    tap.eq(sorted({s["pid"] for s in obs["signals"] if s["code"] == 4}), sorted(w["pids"]),
           "vmce-6.1, late kill: each mapper's touch of the KSM page gets BUS_MCEERR_AR")

# mlock: Debian's kernels say "LRU page", vmce's say mlocked
for page, state in (("mlock-dirty", "dirty"), ("mlock-clean", "clean")):
    for kernel, kind in (("vmce-6.1", "mlocked LRU page"), ("debian-6.1", "LRU page"),
                         ("vmce-6.12", "mlocked LRU page"), ("debian-6.12", "LRU page"),
                         ("debian-7.3", "LRU page")):
        if kernel not in KERNELS:
            continue
        obs = obs_of(f"found/{page}/ao/early", kernel)
        tap.eq(list(obs["actions"].values())[0] if obs else None, [f"{state} {kind}", "Recovered"],
               f"{kernel}: {page} is reported as a{'n' if kind[0] == 'm' else ''} {kind}")

# KSM on 6.12: both recover the page, but only vmce-6.12's ksmd lives
# through merging the same data again (Debian's reads the poisoned page, and
# 7.3's still does)
for kernel in ("debian-6.12", "vmce-6.12", "debian-7.3"):
    if kernel not in KERNELS:
        continue
    obs = obs_of("found/ksm/ao/early", kernel)
    after = (obs or {}).get("aftermath") or {}
    if kernel == "vmce-6.12":
        tap.ok(obs and obs["guest_alive"] and not after.get("crash") and after.get("merged"),
               "vmce-6.12: ksmd merging the same data again after a KSM page's error: the guest lives",
               diag=after)
    else:
        tap.ok(obs and after.get("crash"), f"{kernel}: ... there ksmd reads the poisoned page: "
               f"{after.get('crash')}", diag=after)

# the series' selftest, run in each guest as a kernel developer runs it
# (Debian's kernels read the poisoned page: ksmd merges new pages into it,
# or chains a new KSM page with it; seen, always the first named here)
SHOWS = {"no page is merged into the hwpoisoned KSM page",
         "no stable node chain is formed with the hwpoisoned KSM page"}
for kernel, fails in (("debian-6.1", "no page is merged into the hwpoisoned KSM page"),
                      ("vmce-6.1", None),
                      ("debian-6.12", "no stable node chain is formed with the hwpoisoned KSM page"),
                      ("vmce-6.12", None),
                      ("debian-7.3", "no stable node chain is formed with the hwpoisoned KSM page")):
    if kernel not in KERNELS:
        continue
    st = (obs_of("ksm-scan/ksm-scan", kernel) or {}).get("selftest") or {}
    failed = {d.split(": ", 1)[-1] for ok, d in st.get("results") or [] if not ok}
    tap.ok(len(st.get("results") or []) == 8 and (failed and failed <= SHOWS if fails else not failed),
           f"{kernel}: ksm_hwpoison ran its 8 tests: " + ("ksmd read the hwpoisoned page (failed: "
                                                          + "; ".join(sorted(failed)) + ")" if fails
                                                          else "all pass"),
           diag=st.get("results"))

# kernel pages: 7.3 knows them before taking them (is_kernel_owned_page())
for page in ("slab", "pagetable"):
    obs = obs_of(f"found/{page}/ao/early", "debian-7.3")
    tap.eq(list(obs["actions"].values())[0] if obs else None, ["reserved kernel page", "Ignored"],
           f"debian-7.3: a {page} page is a \"reserved kernel page\" (6.12: \"get hwpoison page\")")

# the second oracle: vmce-6.1 counts each error per node, 6.1 has no counters
deltas = [r["observed"].get("node_mf_delta") for r in cases
          if r["case"]["kernel"] == "vmce-6.1" and r["observed"] and r["observed"].get("guest_alive")]
counted = [d for d in deltas if d]
tap.ok(counted and len(counted) == len(deltas) and all(d.get("total", 0) >= 1 for d in counted
                                                           if d is not None),
       f"vmce-6.1: /sys/devices/system/node/node0/memory_failure counted the errors of "
       f"{len(counted)} cases", diag=deltas[:4])
tap.ok(not any(r["observed"] and r["observed"].get("node_mf_delta") for r in cases
               if r["case"]["kernel"] == "debian-6.1"), "debian-6.1: no per-node statistics")

# --- an operator's own kernel, by path ------------------------------------
# (Debian 13's bzImage as it lies in its package: config beside it, modules
# in ../usr/lib/modules/RELEASE, compressed ones unpacked for the initramfs)
d612 = os.path.join(paths.build_dir(), "kernels", "debian-6.12")
with open(os.path.join(d612, "release")) as f:
    release = f.read().strip()
image = os.path.join(d612, "root", "boot", f"vmlinuz-{release}")
spec = os.path.join(out, "own-kernel.ini")
with open(spec, "w") as f:
    f.write(f"[campaign]\nname = own\n[guest g]\nkernel = {image}\n"
            "[matrix m]\nguest = g\npages = anon-dirty, pagecache-clean\n")
res = run(sys.executable, CAMPAIGN, spec, "--fresh", "--out", os.path.join(out, "own"), timeout=600)
with open(os.path.join(out, "own", "results.jsonl")) as f:
    own = [r for r in map(json.loads, f) if r.get("type") == "case"]
tap.ok(res.returncode == 0 and len(own) == 2 and all(r["verdict"] == "pass" for r in own),
       "a kernel given by path boots with its own modules and its cases pass",
       diag=res.stdout[-800:] + res.stderr[-800:])
tap.ok(all((r.get("reasons") or [""])[0].startswith(f"judged as debian-6.12, the nearest known kernel "
                                                     f"to {release}") for r in own),
       "... each judged as the nearest known kernel, and saying so",
       diag=[(r.get("reasons") or [""])[0] for r in own])

# --- bad input -----------------------------------------------------------
bad = workdir("kernels-bad")
# a kernel without MEMORY_FAILURE: check-config names what is missing
config = os.path.join(bad, "config-nomf")
with open(os.path.join(VMCE, "config")) as src, open(config, "w") as dst:
    for line in src:
        if line.startswith(("CONFIG_MEMORY_FAILURE=", "CONFIG_HWPOISON_INJECT=")):
            line = f"# {line.split('=')[0]} is not set\n"
        dst.write(line)
res = run(CHECK_CONFIG, config)
tap.ok(res.returncode == 1 and "CONFIG_MEMORY_FAILURE is not set" in res.stderr
       and "CONFIG_HWPOISON_INJECT is not set" in res.stderr,
       "check-config on a kernel without MEMORY_FAILURE names the missing options", diag=res.stderr)
res = run(CHECK_CONFIG, os.path.join(VMCE, "config"))
tap.ok(res.returncode == 0, "check-config: vmce-6.1's own config is complete", diag=res.stderr)

# ... which vmce runs anyway, judged as "no handler" (e2e-images runs
# Debian's cloud kernel so); only a kernel that cannot run vmce's agent is
# refused: run/vm, in one line, with no QEMU left
nocons = os.path.join(bad, "config-nocons")
with open(os.path.join(VMCE, "config")) as src, open(nocons, "w") as dst:
    for line in src:
        if line.startswith("CONFIG_VIRTIO_CONSOLE="):
            line = "# CONFIG_VIRTIO_CONSOLE is not set\n"
        dst.write(line)
mine = os.path.join(bad, "kernel-nocons")
os.makedirs(os.path.join(mine, "modules"))
for leaf in ("vmlinux", "release"):
    shutil.copy(os.path.join(VMCE, leaf), mine)
shutil.copy(nocons, os.path.join(mine, "config"))
before = run("pgrep", "-c", "qemu-system").stdout.strip()
env = dict(os.environ, VMCE_STATE_DIR=os.path.join(bad, "vms"))
res = run(sys.executable, RUN_VM, "start", "--name", "nocons", "--kernel", mine, env=env, timeout=60)
one_error_line(res, "lacks CONFIG_VIRTIO_CONSOLE, which vmce's guest agent needs",
               "run/vm --kernel DIR without VIRTIO_CONSOLE: one error line naming it")
tap.eq(run("pgrep", "-c", "qemu-system").stdout.strip(), before, "... and no QEMU was started")
res = run(sys.executable, RUN_VM, "start", "--name", "notk", "--kernel", config, env=env, timeout=60)
one_error_line(res, "is not a kernel (neither a bzImage nor an ELF vmlinux)",
               "run/vm --kernel FILE that is not a kernel: one error line")

# an unknown kernel name in a campaign file: file and line
spec = os.path.join(bad, "unknown-kernel.ini")
with open(spec, "w") as f:
    f.write("[campaign]\nname = uk\n[guest g]\nmem = 256M\nkernel = debian-6.1, debian-7\n"
            "[case c]\nguest = g\n")
res = run(sys.executable, CAMPAIGN, spec, "--out", os.path.join(bad, "uk"), timeout=60)
tap.ok(res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
       and "unknown-kernel.ini:5: unknown kernel 'debian-7'" in res.stderr and not res.stdout,
       "an unknown kernel in a campaign file: exit 2, file:line, nothing run", diag=res.stderr + res.stdout)

# a name of the other axis: a QEMU's for a kernel (Debian 12's QEMU is
# debian-7.2), a kernel's for a QEMU; one line naming what it is, nothing run
spec = os.path.join(bad, "qemu-as-kernel.ini")
with open(spec, "w") as f:
    f.write("[campaign]\nname = qk\n[guest g]\nmem = 256M\nkernel = debian-7.2\n[case c]\nguest = g\n")
res = run(sys.executable, CAMPAIGN, spec, "--out", os.path.join(bad, "qk"), timeout=60)
tap.ok(res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
       and "qemu-as-kernel.ini:5: debian-7.2 is a QEMU, not a guest kernel" in res.stderr and not res.stdout,
       "a QEMU's name as a campaign's kernel: exit 2, file:line, named as a QEMU", diag=res.stderr + res.stdout)
res = run(sys.executable, RUN_VM, "start", "--name", "qk", "--kernel", "debian-10.0", env=env, timeout=60)
one_error_line(res, "debian-10.0 is a QEMU, not a guest kernel (known kernels: ",
               "run/vm --kernel debian-10.0: one error line naming it a QEMU")
res = run(sys.executable, RUN_VM, "start", "--name", "kq", "--qemu", "debian-7.3", env=env, timeout=60)
one_error_line(res, "debian-7.3 is a guest kernel, not a QEMU (known QEMUs: ",
               "run/vm --qemu debian-7.3: one error line naming it a guest kernel")

# a patch that does not apply: named, with its file; nothing left in the cache
patches = os.path.join(bad, "patches")
os.makedirs(patches)
with open(os.path.join(patches, "0001-mm-something-that-does-not-apply.patch"), "w") as f:
    f.write("From: vmce <vmce@localhost>\nSubject: [PATCH] mm: does not apply\n\n---\n"
            "--- a/mm/ksm.c\n+++ b/mm/ksm.c\n@@ -1,3 +1,3 @@\n-no such line\n+nor this\n context\n"
            " more context\n")
with open(os.path.join(patches, "series"), "w") as f:
    f.write("0001-mm-something-that-does-not-apply.patch\n")
cache = os.path.join(bad, "cache")
res = run(BUILD, "--patches", patches, "--cache", cache, "--out", os.path.join(bad, "kout"), timeout=900)
one_error_line(res, "0001-mm-something-that-does-not-apply.patch does not apply",
               "a patch that does not apply: one error line naming the patch")
tap.ok("mm/ksm.c" in res.stderr, "... and the file it fails on", diag=res.stderr)
left = [e for e in os.listdir(cache) if e != "src"] if os.path.isdir(cache) else []
tap.eq(left, [], "... and nothing half-built is left in the cache")

# the 6.12 series the same way (its source is Debian 13's), and a base
# vmce has no series for
res = run(BUILD, "--base", "6.12", "--patches", patches, "--cache", cache, "--out",
          os.path.join(bad, "kout612"), timeout=900)
one_error_line(res, "0001-mm-something-that-does-not-apply.patch does not apply to linux-source-6.12",
               "--base 6.12: a patch that does not apply: one error line naming the patch and the source")
left = [e for e in os.listdir(cache) if e != "src"] if os.path.isdir(cache) else []
tap.eq(left, [], "... and nothing half-built is left in the cache")
res = run(BUILD, "--base", "6.13", "--cache", cache, timeout=60)
one_error_line(res, "unknown --base '6.13': 6.1, 6.12 or 7.3", "an unknown base: one error line naming the known ones")

# no network for the source: one error line, nothing left
if shutil.which("unshare"):
    nonet = os.path.join(bad, "cache-nonet")
    res = run("unshare", "--net", BUILD, "--cache", nonet, "--out", os.path.join(bad, "kout2"),
              timeout=300)
    one_error_line(res, "no network?", "no network for the source: one error line that says so")
    tap.eq(sorted(e for e in os.listdir(nonet) if e != "src") if os.path.isdir(nonet) else [], [],
           "... and nothing is left in the cache")
    res = run("unshare", "--net", BUILD, "--base", "6.12", "--cache", nonet, "--out",
              os.path.join(bad, "kout3"), timeout=300)
    one_error_line(res, "no network?", "--base 6.12, no network for Debian 13's source: one error line")
    tap.eq(sorted(e for e in os.listdir(nonet) if e != "src") if os.path.isdir(nonet) else [], [],
           "... and nothing is left in the cache")
else:
    tap.skip("no network for the source", "unshare (util-linux) is not installed")
    tap.skip("--base 6.12, no network for the source", "unshare (util-linux) is not installed")

tap.done()
