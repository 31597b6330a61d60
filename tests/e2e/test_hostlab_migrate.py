#!/usr/bin/env python3
"""A live migration after a real host memory error (run/hostlab --migrate):
in the host lab's L1, the page behind an L2 guest process's page is
poisoned with madvise(MADV_HWPOISON), vmced forwards the real AO (the
victim killed early), then the guest live-migrates to a second QEMU in L1
started with the same command line and -incoming defer, attached to the
same vmced. One L1 boot per row:

  L1         L2   expected
  debian-13  kvm  carried: the destination's journal says received, marked
             tcg  by UFFDIO_POISON (Linux 6.12), before its vCPUs ran
  debian-12  kvm  refused before anything moves (Linux 6.1 has no
                  UFFDIO_POISON, and nothing else holds a page under KVM):
                  one journal record, one log line, the source runs on
  debian-12  tcg  carried, marked PROT_NONE

Where carried, what tests/e2e/test_migrate.py asserts with simulated
errors: the migration completed, the source handed the page over and lent
it to the migration thread as a zeroed page, the destination's page is
unreadable in its QEMU (process_vm_readv, in L1), the guest's
HardwareCorrupted unchanged, the victim dead as it was, both QEMUs alive
and no thread left stopped. The KVM row on debian-12 runs QEMU 10.0
(debian-10.0: SUCCOR, so that the AMD guest recovers from the AO first).
An L1 that is not made (make kernel-6.12, make host-root) skips its rows,
saying why; --migrate with a scenario it does not take is one error line,
exit status 2, before L1 boots.
"""
import json
import os
import subprocess
import sys

from common import Tap, paths

HOSTLAB = os.path.join(paths.ROOT, "run", "hostlab")
ROWS = (("debian-13", "kvm", ()), ("debian-13", "tcg", ()),
        ("debian-12", "kvm", ("--qemu", "debian-10.0")), ("debian-12", "tcg", ()))

tap = Tap()
if os.geteuid() != 0:
    tap.skip("host lab migration", "it needs root")
    tap.done()


def hostlab(*args, timeout):
    return subprocess.run([sys.executable, HOSTLAB, *args], capture_output=True, text=True, timeout=timeout)


res = hostlab("--migrate", "--kind", "ar", "--list", timeout=60)
tap.ok(res.returncode == 2 and res.stderr.count("\n") == 1 and "--migrate" in res.stderr,
       "--migrate with --kind ar: one error line, exit status 2", diag=res.stderr)


def row(l1, accel, extra):
    name = f"{accel} L2 in the {l1} L1"
    res = hostlab("--migrate", "--json", "--accel", accel, "--l1", l1, *extra, timeout=1700)
    if res.returncode == 2 and "missing" in res.stderr:
        tap.skip(name, res.stderr.strip().splitlines()[-1])
        return
    try:
        lab = json.loads(res.stdout)
    except ValueError:
        tap.ok(False, f"{name}: run/hostlab --migrate gave its results", diag=res.stderr[-2000:])
        return
    r = lab["results"][0]
    m = r.get("migration") or {}
    tap.eq(r["outcome"], "recovered", f"{name}: the real AO forwarded by vmced, the victim killed early")
    checks = m.get("checks", [])
    for c in checks:
        tap.ok(c["ok"], f"{name}: {c['check']}", diag=c.get("diag"))
    tap.eq(m.get("outcome"), m.get("expected"),
           f"{name}: the migration {m.get('expected')}"
           + (f", marked by {m.get('how')}" if m.get("how") else "")
           + (f" ({m['took_s']} s, the guest waited {m['paused_us'] / 1000:.1f} ms for the marks)"
              if m.get("paused_us") is not None else ""))
    tap.ok(res.returncode == 0 and checks, f"{name}: run/hostlab --migrate exits 0",
           diag=res.stderr[-1500:])


for l1, accel, extra in ROWS:
    tap.case(f"{accel} in {l1}", row, l1, accel, extra)
tap.done()
