#!/usr/bin/env python3
"""An operator's guest image under real KVM, with real host memory errors:
run/hostlab --campaign run/campaigns/hostlab-image.ini. The host lab's L1
(TCG, an AMD CPU) gets debian-12's disk as a read-only disk of its own,
boots the image as its L2 guest under L1's KVM (EPYC with SUCCOR, under
debian-10.0) on a snapshot overlay, and drives it through the image's
qemu-guest-agent alone; L1's kernel poisons the page behind the victim's
page, sends QEMU the real SIGBUS, and vmced forwards it. One L1 boot, one
image boot, two cases: an error found (AO) and one consumed (AR).

Asserts, per case, what an operator checks: the victim process in the
image got SIGBUS at its own address with the kind's si_code; the image's
HardwareCorrupted grew; vmced's journal holds the kernel's signal with the
victim's GPA; QEMU is alive; the case is judged pass. Then that the command
printed the image's boot time and the campaign's wall time, and the bad
input: an image the lab cannot find, refused in one line before L1 boots.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

from common import Tap, paths

sys.path.insert(0, os.path.join(paths.ROOT, "run", "lib"))
from vmcelab import images, qemus  # noqa: E402

tap = Tap()
if os.geteuid() != 0:
    tap.skip("host lab image campaign", "it needs root")
    tap.done()
for what, check in (("the debian-12 guest image (make guest-image)", lambda: images.resolve("debian-12")),
                    ("QEMU debian-10.0 (make qemu-debian-10.0)", lambda: qemus.resolve("debian-10.0"))):
    try:
        check()
    except (images.ImageError, qemus.QemuError) as e:
        tap.bail(f"{what}: {e}")

SPEC = os.path.join(paths.ROOT, "run", "campaigns", "hostlab-image.ini")
HOSTLAB = os.path.join(paths.ROOT, "run", "hostlab")
os.makedirs(os.path.join(paths.build_dir(), "e2e"), exist_ok=True)
out = tempfile.mkdtemp(prefix="hostlab-image-", dir=os.path.join(paths.build_dir(), "e2e"))
try:
    res = subprocess.run([sys.executable, HOSTLAB, "--campaign", SPEC, "--out", out],
                         capture_output=True, text=True, timeout=1700)
except subprocess.TimeoutExpired as e:
    # run/hostlab was killed alone; its L1 dies with it (SIGKILL of its
    # parent leaves it orphaned: ours to end, by its own console's name)
    tap.bail(f"run/hostlab --campaign did not finish in {e.timeout:.0f} s")
results_path = os.path.join(out, "results.jsonl")
if not os.path.exists(results_path):
    tap.bail(f"run/hostlab --campaign wrote no results ({res.returncode}): {res.stderr.strip()[-2000:]}")
records = [json.loads(ln) for ln in open(results_path) if ln.strip()]
cases = {r["case"]["scenario"]: r for r in records if r.get("type") == "case"}
tap.diag(res.stdout.strip()[-1500:])
tap.eq(sorted(cases), ["consumed", "found"], "both cases of hostlab-image.ini ran and were recorded")

for cid, code, name in (("found", 5, "BUS_MCEERR_AO"), ("consumed", 4, "BUS_MCEERR_AR")):
    r = cases.get(cid)
    if r is None:
        continue
    obs = r.get("observed") or {}
    info = r["case"].get("kernel_info") or {}
    tap.ok(info.get("kind") == "image" and info.get("name") == "debian-12" and r["case"].get("accel") == "kvm",
           f"{cid}: ran on the debian-12 image ({info.get('release')}) under KVM", diag=info)
    w = (obs.get("workloads") or [{}])[0]
    sigs = [s for s in obs.get("signals") or [] if s.get("pid") == w.get("pid")]
    va = int(w["va"], 16) >> 12 if w.get("va") else None
    tap.ok(sigs and all(s.get("code") == code and int(s["addr"], 16) >> 12 == va for s in sigs),
           f"{cid}: the victim in the image got SIGBUS {name} (si_code {code}) at its own address {w.get('va')}",
           diag={"signals": obs.get("signals"), "workload": w})
    tap.ok((obs.get("hardware_corrupted_kb") or 0) >= 4,
           f"{cid}: the image's HardwareCorrupted grew by {obs.get('hardware_corrupted_kb')} kB",
           diag={k: obs.get(k) for k in ("hardware_corrupted_kb", "trace")})
    inj = (obs.get("injected") or [{}])[0]
    rec, host = inj.get("vmced") or {}, inj.get("host") or {}
    tap.ok(rec.get("source") == "kernel" and rec.get("si_code") == name and rec.get("gpa") == w.get("gpa")
           and rec.get("result") == "injected" and host.get("pfn") and rec.get("host_pfn") == int(host["pfn"], 16),
           f"{cid}: L1 poisoned host pfn {host.get('pfn')}; vmced's journal holds the kernel's {name} with the "
           f"victim's GPA {w.get('gpa')} and that pfn, injected",
           diag={"vmced": rec, "host": host})
    tap.ok(obs.get("qemu_alive") is True and obs.get("guest_alive") is not False,
           f"{cid}: QEMU alive, the guest too", diag={k: obs.get(k) for k in ("qemu_alive", "guest_alive", "panic")})
    tap.ok(r["verdict"] == "pass", f"{cid}: judged pass ({(r.get('expected') or {}).get('summary')})",
           diag={"reasons": r.get("reasons"), "not_run": r.get("not_run")})

m = re.search(r"image boot, kvm L2 in the TCG L1: to qga answering median ([\d.]+) s", res.stdout)
wall = re.search(r"campaign hostlab-image in the host lab: 2 case\(s\) in (\d+) s", res.stdout)
tap.ok(res.returncode == 0 and m and wall and "2 pass" in res.stdout,
       "run/hostlab exits 0 and prints the image's boot to qga under KVM and the campaign's wall time"
       + (f" ({m.group(1)} s, {wall.group(1)} s)" if m and wall else ""),
       diag=res.stdout[-1500:] + res.stderr[-1500:])

# bad input: an image that is not there, said before L1 boots
res = subprocess.run([sys.executable, HOSTLAB, "--campaign", SPEC, "--images", "/nonexistent/web.qcow2"],
                     capture_output=True, text=True, timeout=120)
errors = [ln for ln in res.stderr.splitlines() if "error:" in ln]
tap.ok(res.returncode == 2 and len(errors) == 1 and "no such image file" in errors[0]
       and "booting" not in res.stderr,
       "bad input: an image that is not there is refused in one line before L1 boots", diag=res.stderr[-800:])
tap.done()
