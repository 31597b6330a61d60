#!/usr/bin/env python3
"""A lost huge page salvaged with the host kernel's own error
(run/hostlab --backing hugetlb-2M|hugetlb-1G --hugepage salvage): in the
host lab's L1 the L2 guest's RAM is a file on L1's hugetlbfs, and
madvise(MADV_HWPOISON) on a guest process's page makes L1's
memory_failure() lose the whole huge page under it. One L1 boot per row:

  L1         L2   backing     expected
  debian-13  tcg  hugetlb-2M  salvaged: 511 pages kept, the victim's page
             kvm  hugetlb-2M  alone lost (UFFDIO_POISON), the victim
             kvm  hugetlb-1G  recovered, QEMU alive, the range readable in
             tcg  hugetlb-1G  QEMU and holding the file's data, a guest read
                              of another page of it answered
  debian-12  tcg  hugetlb-2M  not salvaged: Linux 6.1 reads none of a
                              poisoned huge page back; handled as `all`,
                              saying why

Under KVM the guest's memory slot keeps its host address: the guest's read
of a neighbouring page after the salvage is KVM faulting the new 4 KiB
pages in. An L1 that is not made (make kernel-6.12, make host-root) skips
its rows, saying why.
"""
import json
import os
import subprocess
import sys

from common import Tap, paths

HOSTLAB = os.path.join(paths.ROOT, "run", "hostlab")
ROWS = (("debian-13", "tcg", "hugetlb-2M"), ("debian-13", "kvm", "hugetlb-2M"),
        ("debian-13", "kvm", "hugetlb-1G"), ("debian-13", "tcg", "hugetlb-1G"),
        ("debian-12", "tcg", "hugetlb-2M"))

tap = Tap()
if os.geteuid() != 0:
    tap.skip("host lab salvage", "it needs root")
    tap.done()


def row(l1, accel, backing):
    name = f"{backing} under {accel} L2 in the {l1} L1"
    res = subprocess.run([sys.executable, HOSTLAB, "--json", "--l1", l1, "--accel", accel, "--backing", backing,
                          "--hugepage", "salvage"], capture_output=True, text=True, timeout=1700)
    if res.returncode == 2 and "missing" in res.stderr:
        tap.skip(name, res.stderr.strip().splitlines()[-1])
        return
    try:
        r = json.loads(res.stdout)["results"][0]
    except (ValueError, IndexError, KeyError):
        tap.ok(False, f"{name}: run/hostlab gave its results", diag=res.stderr[-2000:])
        return
    loss = r.get("huge_page_loss") or {}
    sv = loss.get("salvage") or {}
    pages = (2 << 20 if backing == "hugetlb-2M" else 1 << 30) // 4096
    host = (r.get("blast_radius") or {}).get("host") or {}
    guest = (r.get("blast_radius") or {}).get("guest") or {}
    if l1 == "debian-12":
        tap.ok(sv.get("fallback") == "all" and "cannot read a poisoned huge page back" in (sv.get("detail") or "")
               or "cannot read a poisoned huge page back" in (loss.get("detail") or ""),
               f"{name}: not salvaged, handled as all, saying why (Linux 6.1 reads none of it back)",
               diag={"loss": {k: loss.get(k) for k in ("policy", "told", "detail")}, "salvage": sv})
        tap.diag(f"{name}: as `all`: {r['outcome']} (QEMU {r.get('qemu_exit') or 'alive'})")
        return
    tap.eq(r["outcome"], "recovered", f"{name}: the victim recovered (its page told), QEMU alive")
    lost = [x.get("gpa") for x in sv.get("lost") or []]
    tap.ok(sv.get("salvaged") == pages - 1 and lost == [hex(int(r["gpa"], 16) & ~0xfff)]
           and sv.get("mark") == "UFFDIO_POISON",
           f"{name}: {pages - 1} pages kept, the victim's page alone lost, marked by UFFDIO_POISON "
           f"({(sv.get('us') or 0) / 1000:.1f} ms from the signal to the threads let go)",
           diag={"salvage": sv, "victim_gpa": r.get("gpa")})
    # the guest wrote some pages since: the salvaged ones hold what the file
    # had, but for those
    tap.ok(host.get("others_readable") == 511 and (host.get("others_same_as_file") or 0) >= 480
           and not (host.get("neighbour_after") or {}).get("hugetlb"),
           f"{name}: QEMU reads the other 511 pages of the victim's 2 MiB, in 4 KiB pages, "
           f"{host.get('others_same_as_file')} of them as the file has them",
           diag=host)
    tap.eq(guest.get("read"), "read, no error",
           f"{name}: the guest reads another page of the lost range"
           + (" (KVM faults the new pages in at the slot's host address)" if accel == "kvm" else ""))
    tap.ok(r.get("qemu_exit") is None and not [j for j in r.get("journal") or []
                                               if j.get("type") == "memory-error" and j.get("result") == "passed"],
           f"{name}: QEMU alive, no error of the loss passed on to it",
           diag=[(j.get("si_code"), j.get("thread"), j.get("result"), j.get("detail")) for j in r.get("journal") or []])


for l1, accel, backing in ROWS:
    tap.case(f"{backing} {accel} in {l1}", row, l1, accel, backing)
tap.done()
