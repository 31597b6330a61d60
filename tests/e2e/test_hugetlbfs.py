#!/usr/bin/env python3
"""A guest whose RAM is on hugetlbfs, and a lost huge page vmced cannot
give back piece by piece: the vCPU that reads it is paused by vmced.

The guest's RAM is a file on a hugetlbfs mount of the test's own (2 MiB
pages), as clouds back big guests. The host loses a whole 2 MiB page under
a guest process (vmcectl poison --huge-page 2M), vmced's policy is
`hugepage = one` (the page hit is told, as QEMU does), and the process
then reads a page of the loss the guest was never told of. Under TCG the
vCPU is stopped inside that load, and vmced would give the page back so
the load completes; inside a hugetlbfs mapping it cannot (mprotect() and
mmap() split such a mapping only at 2 MiB), as in the host lab with a real
loss. Before part 19 the vCPU then faulted on the page for ever (68 690
times in 100 s in the host lab), QEMU's monitor froze behind an HMP mce
that waited for the vCPU, and vmced's journal grew a record a fault.

Asserted: within VMCE_REFAULT_LIMIT (3) loads the VM is paused by vmced,
journaled as stopped with why; nothing more is journaled and the vCPU
takes no more stops; the other vCPU is held too; vmced's control socket
and QEMU's own monitor answer all the while; and at detach every thread is
let go, the simulated loss given back whole, QEMU alive and the guest's
process done with its read.

Then vmced's default, hugepage = salvage, on the same guest (a vmced of its
own): a 2 MiB loss under a process's THP, at its page 3. Asserted: the AO
at the raw page, told; one huge-page-salvage record, 511 pages kept, the
raw page alone lost; the raw page's owner got BUS_MCEERR_AO at its own
address and lives, its 511 other pages hold what it wrote (read and
compared in the guest), a process elsewhere got nothing, HardwareCorrupted
+4 kB, QEMU alive with the range in 4 KiB pages (smaps) and vmcectl vm
saying so; only the raw page kept as poisoned; a second error in the range
a 4 KiB page's; a vmced restarted on the journal rebuilds the raw pages
alone; a reset replaces them; without memory for the copy
(--salvage-reserve-mb) `all`, said once; a live migration to a second QEMU
carries the salvaged range byte for byte; detach leaves no thread stopped.
1 GiB is not simulated here: this machine's kernel has no 1 GiB huge pages
(the host lab's --backing hugetlb-1G has).
"""
import json
import os
import subprocess
import threading
import time

from common import Tap, Vm, Vmced, gpa2hva, prerequisites, thread_states, wait_for, workdir
from vmcelab.procfs import traced_threads
from vmcelab.qmp import Qmp

HUGE = 2 << 20
MEM_MIB = 768           # THP in the guest needs 512 MiB or more
LIMIT = 3               # VMCE_REFAULT_LIMIT (host-daemon/src/decision.h)
NAME = "e2e-hugetlbfs"
NR_HUGEPAGES = "/proc/sys/vm/nr_hugepages"

tap = Tap()
prerequisites(tap)
work = workdir("hugetlbfs")
mount_point = os.path.join(work, "hugetlbfs")


def read_int(path):
    with open(path) as f:
        return int(f.read())


def meminfo(field):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def hugetlbfs_up():
    """Mounts the test's hugetlbfs with room for the guest: the pool as it
    was (to give back), or None and why not"""
    before = read_int(NR_HUGEPAGES)
    need = MEM_MIB // 2
    with open(NR_HUGEPAGES, "w") as f:
        f.write(f"{before + need}\n")
    if meminfo("HugePages_Free") < need:
        with open(NR_HUGEPAGES, "w") as f:
            f.write(f"{before}\n")
        return None, f"the host could not give {need} free 2 MiB pages (HugePages_Free " \
                     f"{meminfo('HugePages_Free')})"
    os.makedirs(mount_point, exist_ok=True)
    subprocess.run(["umount", mount_point], capture_output=True)
    r = subprocess.run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "none", mount_point],
                       capture_output=True, text=True)
    if r.returncode != 0:
        with open(NR_HUGEPAGES, "w") as f:
            f.write(f"{before}\n")
        return None, f"cannot mount hugetlbfs: {r.stderr.strip()}"
    return before, None


def hugetlbfs_down(before):
    subprocess.run(["umount", mount_point], capture_output=True)
    with open(NR_HUGEPAGES, "w") as f:
        f.write(f"{before}\n")


def mapping_page_kb(pid, path):
    """KernelPageSize of @pid's mapping of @path, in kB, or None"""
    in_it = False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if not line[0].isupper():
                in_it = line.rstrip().endswith(" " + path)
            elif in_it and line.startswith("KernelPageSize:"):
                return int(line.split()[1])
    return None


def records_at(gpa):
    return [r for r in daemon.journal_records()
            if r["type"] == "memory-error" and r.get("gpa") and int(r["gpa"], 16) & ~0xfff == gpa]


def vm_json():
    """vmcectl --json vm, and how long it took to answer"""
    t0 = time.monotonic()
    r = subprocess.run(daemon.ctl_argv() + ["--json", "vm", NAME], capture_output=True, text=True, timeout=30)
    return (json.loads(r.stdout) if r.returncode == 0 else {"error": r.stderr.strip()}), time.monotonic() - t0


def fault_stops(info):
    """The vCPUs' stops for a fault (a simulated loss faults with SIGSEGV,
    which vmced rewrites into the SIGBUS the kernel would send)"""
    return sum(s.get("count", 0) for s in info.get("stops") or []
               if s.get("thread") == "vcpu" and s.get("stop") in ("SIGBUS", "SIGSEGV"))


def quietly(fn, *args, **kw):
    try:
        fn(*args, **kw)
    except Exception:  # noqa: BLE001 - a paused guest does not answer: that is the point
        pass


tap.skip("a 1 GiB loss under salvage",
         ("this host's kernel has no 1 GiB huge pages (/sys/kernel/mm/hugepages/hugepages-1048576kB: the CPU "
          "has no pdpe1gb)" if not os.path.isdir("/sys/kernel/mm/hugepages/hugepages-1048576kB")
          else "a 1 GiB guest copy is the host lab's, not make check's")
         + "; run/hostlab --backing hugetlb-1G --hugepage salvage runs it")
pool_before, why_not = hugetlbfs_up()
if why_not:
    tap.skip("a guest on hugetlbfs", why_not)
    tap.done()

vm = daemon = None
try:
    mem_file = os.path.realpath(os.path.join(mount_point, NAME))
    vm = Vm.start(NAME, mem=f"{MEM_MIB}M", cpus=2, state_dir=os.path.join(work, "vm"), mem_file=mem_file)
    vm.wait_ready(timeout=180)
    daemon = Vmced(os.path.join(work, "vmced"),
                   args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", NAME,
                         "--agent", vm.vmced_agent_path, "--hugepage", "one"])
    info = daemon.wait_attached(NAME)
    tap.ok(mapping_page_kb(vm.pid, mem_file) == 2048,
           f"QEMU maps the guest's {MEM_MIB} MiB from hugetlbfs, in 2 MiB pages",
           diag=f"{mem_file}: KernelPageSize {mapping_page_kb(vm.pid, mem_file)} kB")
    vcpus = [v["thread_id"] for v in info.get("vcpus") or []]
    agent = vm.agent
    agent.call("sysfs", path="/sys/kernel/mm/transparent_hugepage/enabled", value="madvise")
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)

    w = agent.call("pages-start", type="thp")
    base = int(w["gpa"], 16) & ~(HUGE - 1)
    # the error in the huge page's first 4 KiB: the process's page 3 is untold
    ev = daemon.poison(NAME, "--gpa", hex(base), "--kind", "ao", "--huge-page", "2M")
    tap.ok(ev.get("result") == "injected" and ev.get("lsb") == 21 and int(ev.get("gpa", "0x1"), 16) == base,
           "the 2 MiB loss comes as BUS_MCEERR_AO, lsb 21, at its raw page, and the page hit is told", diag=ev)

    # the process reads its page 3, which the guest was never told of: its
    # vCPU stops inside that load (the agent cannot answer for it: it runs
    # in the background here)
    target = base + 3 * 4096
    touch = threading.Thread(target=quietly, args=(agent.call, "pages-touch"),
                             kwargs={"pid": w["pid"], "only": 1, "timeout": 30}, daemon=True)
    touch.start()
    recs = wait_for(lambda: (lambda r: r if any(x.get("result") == "stopped" for x in r) else None)(
        records_at(target)), 30) or records_at(target)
    tap.ok(len(recs) == LIMIT and [r.get("result") for r in recs] == ["failed"] * (LIMIT - 1) + ["stopped"],
           f"the vCPU's reads of the untold page: {LIMIT - 1} not injected, then the VM paused "
           f"({len(recs)} records)", diag=[(r.get("result"), r.get("si_code"), r.get("detail")) for r in recs])
    last = recs[-1] if recs else {}
    tap.ok(last.get("si_code") == "BUS_MCEERR_AR" and last.get("lsb") == 21
           and "paused by vmced" in (last.get("detail") or "")
           and "cannot give the page back" in (last.get("detail") or "")
           and "Invalid argument" in (last.get("detail") or ""),
           "the stopped record says why: the page cannot be given back inside hugetlbfs (EINVAL)",
           diag=last.get("detail"))

    stuck_tid = last.get("tid")
    first, took = vm_json()
    paused = first.get("paused_by_vmced") or {}
    tap.ok(took < 5 and paused.get("stuck") == [{"thread_id": stuck_tid, "gpa": hex(target),
                                                 "hva": paused.get("stuck", [{}])[0].get("hva")}]
           and paused.get("other_vcpus_held") == len(vcpus) - 1,
           f"vmcectl vm answers ({took:.2f} s) and says the VM is paused by vmced: the stuck vCPU, "
           f"the other held", diag=paused or first)
    text = subprocess.run(daemon.ctl_argv() + ["vm", NAME], capture_output=True, text=True, timeout=30).stdout
    status = subprocess.run(daemon.ctl_argv() + ["status"], capture_output=True, text=True, timeout=30).stdout
    tap.ok("paused by vmced since" in text and "cannot give the page back" in text
           and "paused by vmced" in status,
           "vmcectl vm and vmcectl status say so", diag=text[:1500] + status)
    # all the while: nothing more journaled, no more stops, every vCPU held,
    # both sockets answering
    answers, stops0 = [], fault_stops(first)
    for _ in range(4):
        time.sleep(0.5)
        info, took = vm_json()
        answers.append(took)
        with Qmp(vm.qmp_path, timeout=5) as q:
            t0 = time.monotonic()
            q.execute("query-status")
            answers.append(time.monotonic() - t0)
    states = thread_states(vm.pid)
    tap.ok(len(records_at(target)) == LIMIT and fault_stops(info) == stops0
           and all(states.get(t) == "t" for t in vcpus),
           "paused for good: no more records, no more stops, every vCPU stopped under vmced",
           diag={"records": len(records_at(target)), "stops": (stops0, fault_stops(info)),
                 "vcpus": {t: states.get(t) for t in vcpus}})
    tap.ok(max(answers) < 5, f"vmced's control socket and QEMU's monitor answered all the while "
           f"(slowest {max(answers):.2f} s)", diag=answers)

    # let go: the simulated loss is given back whole, QEMU goes on
    daemon.ctl("detach", NAME)
    wait_for(lambda: not traced_threads(vm.pid), 10)
    left = [t for t, s in thread_states(vm.pid).items() if s == "t"]
    tap.ok(vm.alive() and not traced_threads(vm.pid) and not left,
           "detach: every QEMU thread let go, none stopped or traced, QEMU alive",
           diag={"traced": traced_threads(vm.pid), "stopped": left})
    touch.join(35)
    st = wait_for(lambda: (lambda st: st if st.get("touched") else None)(
        agent.call("pages-status", pid=w["pid"])), 20) or agent.call("pages-status", pid=w["pid"])
    tap.ok(w["pid"] in (st.get("touched") or []) and all(t.get("data_ok") for t in st.get("touches") or [])
           and not [s for s in st.get("sigbus") or [] if s.get("code_name") == "BUS_MCEERR_AR"],
           "the guest runs on: its process finished the read the pause had held, its data intact, "
           "no SIGBUS for it", diag=st)

    # --- hugepage = salvage (vmced's default) ---------------------------
    daemon.stop()
    daemon = Vmced(os.path.join(work, "vmced-salvage"),
                   args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", NAME,
                         "--agent", vm.vmced_agent_path])
    info = daemon.wait_attached(NAME)
    tap.eq((info.get("hugepage") or {}).get("policy"), "salvage", "vmced's default for a lost huge page: salvage")
    w = agent.call("pages-start", type="thp")
    bystander = agent.call("pages-start", type="anon-dirty")
    base = int(w["gpa"], 16) & ~(HUGE - 1)
    raw = int(w["gpa"], 16) & ~0xfff
    hc0 = agent.hardware_corrupted_kb()
    ev = daemon.poison(NAME, "--gpa", w["gpa"], "--kind", "ao", "--huge-page", "2M")
    tap.ok(ev.get("result") == "injected" and ev.get("lsb") == 21 and int(ev.get("gpa", "0x1"), 16) == raw,
           "salvage: the 2 MiB loss comes as BUS_MCEERR_AO, lsb 21, at the raw page (as Linux 6.6 and later "
           "name it), and the guest is told of that page", diag=ev)
    salvage = wait_for(lambda: [r for r in daemon.journal_records() if r["type"] == "huge-page-salvage"], 30)
    salvage = (salvage or [{}])[0]
    loss = ([r for r in daemon.journal_records() if r["type"] == "huge-page-loss"] or [{}])[0]
    tap.ok(loss.get("policy") == "salvage" and loss.get("told") == 0 and loss.get("pages") == 512,
           "salvage: the loss is recorded (512 pages), nothing more to tell", diag=loss)
    tap.ok(salvage.get("salvaged") == 511 and salvage.get("bytes") == 511 * 4096
           and [int(x["gpa"], 16) for x in salvage.get("lost") or []] == [raw] and salvage.get("told") == 0
           and "mremap" in (salvage.get("how") or "") and salvage.get("about_seq") == ev.get("seq"),
           f"salvage: 511 pages (2044 KiB) read back from the hugetlbfs file and mapped again, the raw page "
           f"alone lost ({(salvage.get('us') or 0) / 1000:.1f} ms from the signal)", diag=salvage)
    st = wait_for(lambda: (lambda s: s if s.get("sigbus") else None)(agent.call("pages-status", pid=w["pid"])),
                  30) or {}
    sig = (st.get("sigbus") or [{}])[0]
    tap.ok(sig.get("code") == 5 and int(sig.get("addr", "0x0"), 16) >> 12 == int(w["va"], 16) >> 12
           and all(st.get("alive", {}).values()),
           "salvage: the raw page's owner got BUS_MCEERR_AO at its own address, and lives", diag=st)
    agent.call("pages-check", pid=w["pid"])
    check = wait_for(lambda: agent.call("pages-status", pid=w["pid"]).get("check"), 20) or {}
    tap.ok(check.get("neighbours") == 511 and check.get("intact") == 511,
           "salvage: its data in the other 511 pages of the huge page is intact (read and compared)",
           diag=check)
    by = agent.call("pages-status", pid=bystander["pid"])
    tap.ok(not by.get("sigbus") and all(by.get("alive", {}).values()),
           "salvage: a process elsewhere got no signal", diag=by)
    tap.eq(agent.hardware_corrupted_kb() - hc0, 4, "salvage: HardwareCorrupted grew by 4 kB, not 2048")
    hva = int(salvage.get("hva", "0x0"), 16)
    kb = None
    with open(f"/proc/{vm.pid}/smaps") as f:
        for line in f:
            if not line[0].isupper():
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                inside = lo <= hva < hi
            elif inside and line.startswith("KernelPageSize:"):
                kb = int(line.split()[1])
    vmj = daemon.ctl_json("vm", NAME)
    text = daemon.ctl("vm", NAME).stdout
    tap.ok(vm.alive() and kb == 4 and len(vmj.get("salvaged") or []) == 1 and "no longer huge-page backed" in text,
           "salvage: QEMU alive, the range in 4 KiB pages now, and vmcectl vm says so (TLB reach)",
           diag={"KernelPageSize": kb, "salvaged": vmj.get("salvaged"), "text": text[-600:]})
    poisoned = {int(p["gpa"], 16) for p in vmj.get("poisoned") or []}
    tap.ok(raw in poisoned and not any(base <= g < base + HUGE and g != raw for g in poisoned),
           "salvage: of the range, vmced holds the raw page alone as poisoned (a reset or a migration "
           "replaces or carries that one)", diag=sorted(hex(g) for g in poisoned)[:10])
    # a second error in the salvaged range: a 4 KiB page's, as any
    second = base + 7 * 4096
    ev2 = daemon.poison(NAME, "--gpa", hex(second), "--kind", "ao")
    # (the guest tools keep each thread's last signal)
    st = wait_for(lambda: (lambda s: s if any(int(x.get("addr", "0x0"), 16) >> 12 == (int(w["va"], 16) >> 12) + 4
                                              for x in s.get("sigbus") or []) else None)(
        agent.call("pages-status", pid=w["pid"])), 30) or {}
    tap.ok(ev2.get("result") == "injected" and ev2.get("lsb") == 12 and st
           and agent.hardware_corrupted_kb() - hc0 == 8,
           "salvage: a second error in the range is a 4 KiB page's: its owner told at its address, +4 kB more",
           diag={"ev": ev2, "status": st})

    # vmced restarted on the same journal: the pages it rebuilds are the
    # raw ones, not the 512 of the loss
    daemon.stop()
    daemon = Vmced(os.path.join(work, "vmced-salvage"),
                   args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", NAME,
                         "--agent", vm.vmced_agent_path])
    vmj = daemon.wait_attached(NAME)
    poisoned = {int(p["gpa"], 16) for p in vmj.get("poisoned") or []}
    tap.ok({raw, second} <= poisoned and not any(base <= g < base + HUGE and g not in (raw, second)
                                                  for g in poisoned),
           "salvage: a restarted vmced rebuilds the raw pages alone from the journal",
           diag=sorted(hex(g) for g in poisoned if base <= g < base + HUGE))
    # a reset: the raw pages (the loss's and the second error's) replaced
    # in the 4 KiB memory, the salvaged ones left alone
    since = len(daemon.journal_records())
    boot = vm.boot_id()
    with vm.qmp() as q:
        q.execute("system_reset")
    vm.wait_rebooted(boot, 120)
    resets = wait_for(lambda: [r for r in daemon.journal_records()[since:] if r["type"] == "reset"], 20) or [{}]
    replaced = {int(p["gpa"], 16) for p in resets[0].get("pages") or [] if p.get("result") in ("replaced", "usable")}
    tap.ok({raw, second} <= replaced and not any(base <= g < base + HUGE and g not in (raw, second) for g in replaced)
           and resets[0].get("failed") == 0 and vm.alive(),
           "salvage, then a reset: the two raw pages replaced in the 4 KiB memory before the guest ran again, "
           "the guest back", diag=resets[0])
    agent = vm.agent
    agent.call("sysfs", path="/sys/kernel/mm/transparent_hugepage/enabled", value="madvise")
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)

    # not enough memory for the copy (salvage-reserve-mb above what the
    # host has): `all`, saying why, once
    daemon.stop()
    daemon = Vmced(os.path.join(work, "vmced-salvage"),
                   args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", NAME,
                         "--agent", vm.vmced_agent_path, "--salvage-reserve-mb", "100000000"])
    daemon.wait_attached(NAME)
    w3 = agent.call("pages-start", type="thp")
    n0 = len(daemon.journal_records())
    ev = daemon.poison(NAME, "--gpa", w3["gpa"], "--kind", "ao", "--huge-page", "2M")
    loss = wait_for(lambda: [r for r in daemon.journal_records()[n0:] if r["type"] == "huge-page-loss"], 10)
    loss = (loss or [{}])[0]
    log = daemon.log_text()
    tap.ok(ev.get("result") == "injected" and loss.get("told") == 511
           and "cannot salvage: not enough free memory for the copy" in (loss.get("detail") or "")
           and "handled as all" in (loss.get("detail") or "") and log.count("not enough free memory") == 1
           and vm.alive(),
           "salvage without memory for the copy: handled as all (511 told), one line saying why, QEMU alive",
           diag={"loss": loss, "log": log[-800:]})

    # a live migration (part 21) of the salvaged guest: its range goes as
    # it is (the raw pages were replaced at the reset), the pages still
    # poisoned (the loss just handled as all) go poisoned
    # (its RAM block must be the source's, ram0: a file too, here on tmpfs)
    dst_file = os.path.join("/dev/shm", f"vmce-{NAME}-{os.getpid()}-dst")
    dst = Vm.start(NAME, mem=f"{MEM_MIB}M", cpus=2, state_dir=os.path.join(work, "dst"), incoming_uri="defer",
                   mem_file=dst_file)
    wait_for(lambda: os.path.exists(dst.vmced_qmp_path), 30)
    daemon.ctl("attach", "--pid", str(dst.pid), "--qmp", dst.vmced_qmp_path, "--name", "dst",
               "--agent", dst.vmced_agent_path)
    sock = os.path.join(work, "migrate.sock")
    with dst.qmp() as qd:
        qd.execute("migrate-incoming", uri=f"unix:{sock}")
    # (the guest paused first: it stays paused on the destination, and
    # writes nothing there while the pages are compared)
    with vm.qmp() as q:
        q.execute("stop")
        q.execute("migrate", uri=f"unix:{sock}")
        status = wait_for(lambda: (lambda st: st if st in ("cancelled", "failed", "completed") else None)(
            q.execute("query-migrate").get("status")), 180)
    received = wait_for(lambda: [r for r in daemon.journal_records() if r.get("type") == "migration"
                                 and r.get("vm") == "dst" and r.get("action") == "received"], 30) or [{}]
    kept_same, kept_read = 0, 0
    src_base, dst_base = gpa2hva(vm, base), gpa2hva(dst, base)
    with open(f"/proc/{vm.pid}/mem", "rb", buffering=0) as fs, open(f"/proc/{dst.pid}/mem", "rb", buffering=0) as fd:
        for i in range(HUGE // 4096):
            fs.seek(src_base + i * 4096)
            fd.seek(dst_base + i * 4096)
            a, b = fs.read(4096), fd.read(4096)
            kept_read += 1
            kept_same += a == b
    tap.ok(status == "completed" and received[0].get("action") == "received"
           and kept_same == kept_read == 512 and dst.alive(),
           f"salvage, then a live migration: the salvaged range on the destination as it was ({kept_same} of "
           f"{kept_read} pages byte for byte, in its QEMU's own memory), the pages still poisoned received "
           f"there before it ran", diag={"status": status, "received": received[0].get("detail"),
                                         "same": kept_same})
    daemon.ctl("detach", "dst")
    dst.stop()
    os.unlink(dst_file)
    daemon.ctl("detach", NAME)
    wait_for(lambda: not traced_threads(vm.pid), 10)
    left = [t for t, s in thread_states(vm.pid).items() if s == "t"]
    tap.ok(vm.alive() and not traced_threads(vm.pid) and not left,
           "salvage: detach leaves no QEMU thread stopped or traced", diag=left)
finally:
    if daemon is not None:
        daemon.stop()
    if vm is not None:
        vm.stop()
    hugetlbfs_down(pool_before)
tap.done()
