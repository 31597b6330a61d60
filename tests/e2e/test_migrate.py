#!/usr/bin/env python3
"""Live migration of a guest with poisoned memory (migration = carry, the
default): two QEMUs on one host, one vmced watching both (simulated host
errors, a 512 MiB TCG guest, real vmced, real ptrace, real migration).

In order: a page told to the guest (AO, its victim killed) and a page the
guest consumed (AR, its victim killed) are carried to a second QEMU, with
an error arriving while the migration runs; the destination must hold all
three poisoned before its vCPUs run, its guest's HardwareCorrupted as it
was and its victims' fates the same. Then the guest goes back the other
way, and that QEMU is killed half-way through loading: the source must run
on with its pages as they were. A migration with no destination vmced
watches is refused. Last, `vmcectl migrate` to a QEMU a second vmced
watches (another host's, in direct mode): refused for a VM that vmced does
not know, then done, the pages handed over first, and that vmced killed
while the RAM goes: the far guest waits paused until a vmced started again
puts the marks in from its journal and lets it run. An AO still waiting in
vmced's queue (HMP mce's gap) when a migration starts goes over untold, is
recorded "migrated" on the source and told once on the destination. Then, with hugepage =
one, a 2 MiB host page lost under a process's THP and carried: 512 pages
poisoned there, the page hit told and 511 not, and the process's read of
one of those a machine check at its GPA on the destination. Last, on a
QEMU with vmce's series only (told the pages, its migration skips them),
the source's vmced killed mid-migration: the source QEMU lives and the
destination's QEMU lists the pages itself. Each end journals what it did;
no QEMU thread is left stopped.
"""
import json
import os
import signal
import subprocess
import time

from common import (Tap, Vm, Vmced, gpa2hva, prerequisites, qemu_reads, start_victim, thread_states,
                    victim_status, wait_for, wait_sigbus, workdir)

BUS_MCEERR_AR = 4
BUS_MCEERR_AO = 5
NAME = "e2e-migrate"
MiB = 1 << 20
HUGE = 2 * MiB

tap = Tap()
prerequisites(tap)
work = workdir("migrate")
vms = {}
daemon = None
daemons = []


def journal():
    with open(daemon.journal) as f:
        return [json.loads(line) for line in f if line.strip()]


def records(since, vm=None, type_=None, action=None):
    return [r for r in journal()[since:]
            if (vm is None or r.get("vm") == vm) and (type_ is None or r["type"] == type_)
            and (action is None or r.get("action") == action)]


def attach(name, vm, d=None):
    (d or daemon).ctl("attach", "--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", name,
                      "--agent", vm.vmced_agent_path)


def start_destination(name, d=None):
    """A QEMU waiting with -incoming defer, attached to vmced @d (the
    first one by default)"""
    dst = Vm.start(NAME, mem="512M", state_dir=os.path.join(work, name), incoming_uri="defer")
    vms[name] = dst
    wait_for(lambda: os.path.exists(dst.vmced_qmp_path), 30)
    time.sleep(0.2)
    attach(name, dst, d)
    return dst


def migrate(src, dst, sock, mbps=None, during=None):
    """Starts the migration from @src to @dst over unix socket @sock, runs
    @during while it runs, and returns its final status"""
    with dst.qmp() as qd:
        qd.execute("migrate-incoming", uri=f"unix:{sock}")
    with src.qmp() as q:
        if mbps is not None:
            q.execute("migrate-set-parameters", **{"max-bandwidth": mbps * MiB})
        q.execute("migrate", uri=f"unix:{sock}")
        if during is not None:
            during()
        return wait_for(lambda: (lambda s: s if s in ("cancelled", "failed", "completed") else None)(
            q.execute("query-migrate").get("status")), 180)


def no_thread_stopped(vm):
    return vm.alive() and "t" not in thread_states(vm.pid).values()


def case_carry():
    """A told page and a consumed page, and one poisoned mid-migration, go
    to the destination poisoned"""
    src = vms["src"]
    agent = src.agent
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)
    told = start_victim(agent, mode="idle")
    ev = daemon.poison("src", "--guest-pid", str(told["pid"]), "--guest-va", told["va"], "--kind", "ao")
    tap.eq(ev.get("result"), "injected", "source: AO on the told page injected")
    tap.ok(wait_sigbus(agent, told["pid"]) is not None, "source: the told page's victim got its SIGBUS")
    consumed = start_victim(agent, mode="read")
    ev = daemon.poison("src", "--guest-pid", str(consumed["pid"]), "--guest-va", consumed["va"], "--kind", "ar")
    tap.eq(ev.get("result"), "injected", "source: AR on the consumed page injected")
    sig = wait_sigbus(agent, consumed["pid"])
    tap.ok(sig is not None and sig["code"] == BUS_MCEERR_AR, "source: the consumer got BUS_MCEERR_AR", diag=sig)
    late = start_victim(agent, mode="idle")
    hc_source = agent.hardware_corrupted_kb()
    dst = start_destination("dst")
    since = len(journal())
    mid = {}

    def poison_mid():
        # an error while the RAM goes (the bandwidth cap keeps it going for seconds)
        time.sleep(1.0)
        mid["ev"] = daemon.poison("src", "--guest-pid", str(late["pid"]), "--guest-va", late["va"],
                                  "--kind", "ao")
    t0 = time.monotonic()
    status = migrate(src, dst, os.path.join(work, "m1.sock"), mbps=16, during=poison_mid)
    took = time.monotonic() - t0
    tap.eq(status, "completed", f"the migration completed ({took:.1f} s)")
    tap.eq(mid.get("ev", {}).get("result"), "injected", "an AO during the migration was injected on the source")
    pages = [told["gpa_int"], consumed["gpa_int"], late["gpa_int"]]
    handed = wait_for(lambda: records(since, "src", "migration", "handed-over"), 20) or [{}]
    got = {int(p, 16) for r in records(since, "src", "migration", "handing-over") for p in r["pages"]}
    tap.ok(set(pages) <= got, "source: its journal hands all three pages over", diag=sorted(map(hex, got)))
    tap.eq(handed[0].get("destination"), "dst", "source: the hand-over record names the destination")
    lent = [r for r in records(since, "src", "page-replaced") if r.get("lent_to_migration")]
    if qemu_lists_poison(src):
        # vmce's series: QEMU was told the pages, its migration read none
        over = records(since, "src", "migration", "handing-over")
        with dst.qmp() as qd:
            listed = qd.execute("query-hwpoisoned-pages")
        # (a page the migration thread reaches before QEMU has the list is
        # lent all the same)
        tap.ok("QEMU told of them" in over[0].get("detail", "") and len(listed) == 3,
               f"source: QEMU was told the pages (x-hwpoison-page-add; its migration read {len(lent)} of them), "
               "and the destination QEMU lists all three itself", diag=(lent, over[:1], listed))
    else:
        tap.ok(lent and all(r["still_poisoned"] for r in lent),
               f"source: the migration read {len(lent)} poisoned page(s) as zeroed pages lent with the vCPUs held",
               diag=records(since, "src"))
    received = wait_for(lambda: records(since, "dst", "migration", "received"), 20) or [{}]
    r = received[0]
    tap.ok(r.get("marked") == 3 and {int(p["gpa"], 16) for p in r.get("pages", [])} == set(pages),
           f"destination: its journal says all three poisoned before its vCPUs ran ({r.get('how')}, "
           f"the guest waited {r.get('paused_us', 0) / 1000:.1f} ms)", diag=r)
    tap.ok(r.get("how") in ("UFFDIO_POISON", "PROT_NONE (no UFFDIO_POISON in this kernel)"),
           "destination: marked by the kernel's own poison marker where it has one", diag=r.get("how"))
    dst.wait_ready(60)
    for what, gpa in (("told", pages[0]), ("consumed", pages[1]), ("mid-migration", pages[2])):
        tap.ok(not qemu_reads(gpa2hva(dst, gpa), dst.pid),
               f"destination: the {what} page at GPA {gpa:#x} is poisoned in its QEMU")
    info = daemon.ctl_json("vm", "dst")
    known = {int(p["gpa"], 16): p for p in info["poisoned"]}
    tap.ok(all(g in known and known[g].get("migrated") for g in pages),
           "destination: vmcectl vm lists the three pages, migrated", diag=info["poisoned"])
    tap.eq(dst.agent.hardware_corrupted_kb(), hc_source + 4,
           "destination: HardwareCorrupted as on the source (plus the mid-migration page), nothing told again")
    st_told = victim_status(dst.agent, told["pid"])
    st_cons = victim_status(dst.agent, consumed["pid"])
    tap.ok(st_told and not st_told["alive"] and st_told["sigbus"]["code"] == BUS_MCEERR_AO,
           "destination: the told page's victim is as it was, killed by BUS_MCEERR_AO", diag=st_told)
    tap.ok(st_cons and not st_cons["alive"] and st_cons["sigbus"]["code"] == BUS_MCEERR_AR,
           "destination: the consumer is as it was, killed by BUS_MCEERR_AR", diag=st_cons)
    sig = wait_sigbus(dst.agent, late["pid"])
    tap.ok(sig is not None and int(sig["addr"], 16) == late["va_int"],
           "destination: the mid-migration page's victim got its SIGBUS at its own VA", diag=sig)
    tap.ok(no_thread_stopped(src) and no_thread_stopped(dst),
           "both QEMUs alive, no thread left stopped on either")
    return dst, pages


def case_failed(src, pages):
    """Back the other way, the destination killed half-way through its load:
    the source runs on with its pages poisoned"""
    dst = start_destination("back")
    since = len(journal())
    box = {}

    def kill_dst():
        time.sleep(1.0)
        os.kill(dst.pid, signal.SIGKILL)
        box["killed"] = True
    status = migrate(src, dst, os.path.join(work, "m2.sock"), mbps=32, during=kill_dst)
    tap.eq(status, "failed", "the destination QEMU killed mid-load: the migration failed")
    ended = wait_for(lambda: records(since, "dst", "migration", "ended"), 20) or [{}]
    tap.ok({int(p, 16) for p in ended[0].get("pages", [])} == set(pages),
           "source: the journal says it runs on, naming every page as it was", diag=ended[0])
    tap.ok(all(not qemu_reads(gpa2hva(src, g), src.pid) for g in pages),
           "source: all three pages still poisoned in its QEMU")
    info = daemon.ctl_json("vm", "dst")
    tap.eq(len([p for p in info["poisoned"] if int(p["gpa"], 16) in pages]), 3,
           "source: vmcectl vm still lists all three pages")
    tap.ok(src.agent.call("ping") is not None and no_thread_stopped(src),
           "source: the guest runs on, no QEMU thread left stopped")


def case_no_destination(src):
    """Nobody to carry the pages to: refused before anything moves"""
    since = len(journal())
    with src.qmp() as q:
        q.execute("migrate", uri="exec:cat > /dev/null")
        status = wait_for(lambda: (lambda s: s if s in ("cancelled", "failed", "completed") else None)(
            q.execute("query-migrate").get("status")), 60)
    tap.eq(status, "cancelled", "no destination vmced watches: vmced cancelled the migration")
    recs = wait_for(lambda: records(since, "dst", "migration", "refused"), 10) or [{}]
    tap.ok("no destination QEMU this vmced watches" in recs[0].get("detail", ""),
           "no destination: the journal says why", diag=recs)
    lines = [ln for ln in daemon.log_text().splitlines() if "migration refused" in ln]
    tap.eq(len(lines), 1, "no destination: one line in vmced's log")
    tap.ok(no_thread_stopped(src), "no destination: QEMU runs on, no thread left stopped")


def own_vmced(name, vm, first=False):
    """A vmced of its own (another host's, say) watching @vm as @name, on
    the journal of vmced-@name (the same one again when started again)"""
    d = Vmced(os.path.join(work, f"vmced-{name}"),
              args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", name, "--agent", vm.vmced_agent_path])
    daemons.insert(0, d) if first else daemons.append(d)
    d.wait_attached(name)
    return d


def start_with_own_vmced(name):
    """A QEMU waiting with -incoming defer, and its own vmced"""
    vm = Vm.start(NAME, mem="512M", state_dir=os.path.join(work, name), incoming_uri="defer")
    vms[name] = vm
    wait_for(lambda: os.path.exists(vm.vmced_qmp_path), 30)
    time.sleep(0.2)
    return vm, own_vmced(name, vm)


def case_other_vmced(src, pages):
    """Direct mode, another vmced at the destination (another host's, say):
    vmcectl migrate hands the pages to it before anything moves; that vmced
    killed mid-migration, the guest waits until one started again has put
    the marks in"""
    far, other = start_with_own_vmced("far")
    with far.qmp() as qd:
        qd.execute("migrate-incoming", uri=f"unix:{os.path.join(work, 'm3.sock')}")
    hc_before = src.agent.hardware_corrupted_kb()
    with src.qmp() as q:
        last = q.execute("query-migrate")
    # bad input first: no such VM there, nothing moves
    bad = daemon.ctl("migrate", "dst", f"unix:{os.path.join(work, 'm3.sock')}", "--to-vm", "nosuch",
                     "--to", other.socket, check=False)
    tap.ok(bad.returncode == 1 and bad.stderr.count("\n") == 1 and "nosuch" in bad.stderr,
           "vmcectl migrate to a VM the other vmced does not know: one error line", diag=bad.stderr)
    with src.qmp() as q:
        tap.eq(q.execute("query-migrate"), last, "... and nothing moved (QEMU's last migration is the one before)")
    since = len(other.journal_records())
    with src.qmp() as q:
        q.execute("migrate-set-parameters", **{"max-bandwidth": 16 * MiB})
    mig = subprocess.Popen(daemon.ctl_argv() + ["migrate", "dst", f"unix:{os.path.join(work, 'm3.sock')}",
                                                "--to-vm", "far", "--to", other.socket],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def far_migration(d, action):
        return [x for x in d.journal_records()[since:] if x.get("type") == "migration"
                and x.get("action") == action]
    # bad input: the far vmced killed once it has the pages, while the RAM
    # is on its way: the far guest must not run without them
    took = wait_for(lambda: far_migration(other, "receiving"), 60) or [{}]
    other.proc.kill()
    other.proc.wait()
    out, err = mig.communicate(timeout=300)
    tap.ok(mig.returncode == 0 and "3 poisoned page(s) carried" in out and took[0].get("autostart_off"),
           f"vmcectl migrate, the far vmced killed once it had the pages: {out.strip()}", diag=(err, took))
    with far.qmp() as qd:
        state = qd.execute("query-status").get("status")
    tap.ok(state == "paused" and no_thread_stopped(far),
           "... the far guest waits paused (vmced had turned its autostart off), no thread left stopped",
           diag=state)
    # a vmced started again on the same journal puts the marks in, then
    # lets the guest run, as the one before was to
    daemons.remove(other)
    other = own_vmced("far", far, first=True)
    got = wait_for(lambda: far_migration(other, "received"), 20) or [{}]
    tap.ok(got[0].get("marked") == 3 and "before the guest ran" in got[0].get("detail", ""),
           f"the far vmced started again poisoned the three pages from its journal ({got[0].get('detail')})",
           diag=got)
    far.wait_ready(60)
    tap.ok(all(not qemu_reads(gpa2hva(far, g), far.pid) for g in pages),
           "all three are poisoned in the far QEMU")
    tap.eq(far.agent.hardware_corrupted_kb(), hc_before, "the far guest's HardwareCorrupted is as it was")
    tap.ok(no_thread_stopped(far) and no_thread_stopped(src), "no QEMU thread left stopped on either end")


def case_lost_huge_page(src, d, name):
    """hugepage = one: the host loses a 2 MiB page under a process's THP,
    the guest is told of the page hit only; after the migration the other
    511 are still poisoned and still untold, and the process's read of one
    is a machine check at its GPA there, as it would have been here"""
    agent = src.agent
    agent.call("sysfs", path="/sys/kernel/mm/transparent_hugepage/enabled", value="madvise")
    d.ctl("policy", name, "--hugepage", "one")
    w = agent.call("pages-start", type="thp")
    base = int(w["gpa"], 16) & ~(HUGE - 1)
    ev = d.poison(name, "--gpa", hex(base), "--kind", "ao", "--huge-page", "2M")
    tap.ok(ev.get("result") == "injected" and ev.get("lsb") == 21,
           "lost huge page: the loss (AO, lsb 21) injected, the page hit told", diag=ev)
    wait_for(lambda: agent.call("pages-status", pid=w["pid"]).get("sigbus"), 30)
    hc = agent.hardware_corrupted_kb()
    dst = start_destination("hp", d)
    d.ctl("policy", "hp", "--hugepage", "one")
    since = len(d.journal_records())
    status = migrate(src, dst, os.path.join(work, "m4.sock"))
    tap.eq(status, "completed", "lost huge page: the migration completed")
    got = wait_for(lambda: [x for x in d.journal_records()[since:] if x.get("type") == "migration"
                            and x.get("vm") == "hp" and x.get("action") == "received"], 20) or [{}]
    told = {int(p["gpa"], 16): p["told"] for p in got[0].get("pages", [])
            if base <= int(p["gpa"], 16) < base + HUGE}
    tap.ok(got[0].get("marked", 0) >= 512 and len(told) == 512 and sum(told.values()) == 1 and told.get(base),
           "lost huge page: all 512 pages poisoned on the destination, the page hit told, 511 untold as before",
           diag={k: v for k, v in list(told.items())[:4]})
    dst.wait_ready(60)
    agent = dst.agent
    tap.eq(agent.hardware_corrupted_kb(), hc, "lost huge page: the destination's HardwareCorrupted as it was")
    agent.call("pages-touch", pid=w["pid"], only=1)
    page3 = base + 3 * 4096
    read = wait_for(lambda: [x for x in d.journal_records()[since:] if x.get("type") == "memory-error"
                             and x.get("vm") == "hp" and x.get("si_code") == "BUS_MCEERR_AR"
                             and int(x.get("gpa") or "0x0", 16) == page3], 30) or [{}]
    tap.ok(read[0].get("result") == "injected",
           "lost huge page: the process reads page 3 on the destination, never told of: an AR at its GPA, "
           "injected there", diag=read[0])
    # (the agent keeps a thread's last signal)
    st = wait_for(lambda: (lambda x: x if any(r.get("code") == BUS_MCEERR_AR for r in x.get("sigbus") or [])
                           else None)(agent.call("pages-status", pid=w["pid"])), 30) or {}
    tap.ok(st, "lost huge page: the process got BUS_MCEERR_AR for its read there", diag=st)
    tap.ok(no_thread_stopped(dst) and no_thread_stopped(src), "lost huge page: no QEMU thread left stopped")


def case_queued_ao():
    """An AO still waiting in vmced's queue when the migration starts (HMP
    mce's least gap between two machine checks, 3 s for this vmced): handed
    over untold with the other pages, and told on the destination once it
    runs, where its victim gets its SIGBUS, at its own VA; the guest is told
    once"""
    if os.environ.get("VMCE_EXPECT_INJECT") == "qmp":
        tap.skip("an AO queued when the migration starts",
                 "inject-mce needs no gap between machine checks: nothing waits in vmced's queue")
        return
    qsrc = Vm.start(NAME, mem="512M", state_dir=os.path.join(work, "qsrc"))
    vms["qsrc"] = qsrc
    qsrc.wait_ready()
    qd = Vmced(os.path.join(work, "vmced-queue"),
               args=["--inject-gap-ms", "3000", "--pid", str(qsrc.pid), "--qmp", qsrc.vmced_qmp_path,
                     "--name", "qsrc", "--agent", qsrc.vmced_agent_path])
    daemons.append(qd)
    qd.wait_attached("qsrc")
    agent = qsrc.agent
    agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)
    first, queued = start_victim(agent, mode="idle"), start_victim(agent, mode="idle")
    ev = qd.poison("qsrc", "--guest-pid", str(first["pid"]), "--guest-va", first["va"], "--kind", "ao")
    sig = wait_sigbus(agent, first["pid"])
    hc = agent.hardware_corrupted_kb()
    qdst = start_destination("qdst", qd)
    since = len(qd.journal_records())
    # the second AO waits out the gap in vmced's queue while the migration goes
    second = subprocess.Popen(qd.ctl_argv() + ["--json", "poison", "qsrc", "--guest-pid", str(queued["pid"]),
                                               "--guest-va", queued["va"], "--kind", "ao"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    status = migrate(qsrc, qdst, os.path.join(work, "m6.sock"))
    out, err = second.communicate(timeout=60)
    recs = qd.journal_records()[since:]
    over = [p for r in recs if r.get("type") == "migration" and r.get("vm") == "qsrc"
            and r.get("action") == "handing-over" for p in r.get("pages", [])]
    handed = {int(p["gpa"] if isinstance(p, dict) else p, 16) for p in over}
    # (the journal is written through io_uring a moment after the answer)
    here = wait_for(lambda: [r for r in qd.journal_records()[since:] if r.get("type") == "memory-error"
                             and r.get("vm") == "qsrc" and int(r.get("gpa") or "0x0", 16) == queued["gpa_int"]],
                    10) or []
    tap.ok(ev.get("result") == "injected" and sig is not None and status == "completed"
           and queued["gpa_int"] in handed and [r["result"] for r in here] == ["migrated"],
           "an AO queued when the migration starts: handed over with the told page, and not injected into the "
           "source that stopped for it ('migrated')", diag=(ev, status, over, here, out, err))
    qdst.wait_ready(60)
    told = wait_sigbus(qdst.agent, queued["pid"])
    tap.ok(told is not None and told["code"] == BUS_MCEERR_AO and told["addr"] == queued["va"],
           "... told on the destination: its victim got BUS_MCEERR_AO at its own VA there", diag=told)
    tap.eq(qdst.agent.hardware_corrupted_kb(), hc + 4, "... the destination's HardwareCorrupted grew by its page, once")
    tap.ok(not qemu_reads(gpa2hva(qdst, queued["gpa_int"]), qdst.pid) and no_thread_stopped(qdst),
           "... its page is poisoned in the destination QEMU, no thread left stopped")


def case_lost_huge_page_all(src, d, name):
    """hugepage = all: a 2 MiB host page lost under a process's THP, and the
    guest migrated at once, while vmced is still telling it of the other 511
    pages (HMP mce: 20 ms apart): the pages not told yet go over untold, the
    source's queued tells are recorded "migrated", and the destination
    (hugepage = all too) tells them; every page of the loss is told, on one
    side or the other (both for one given to QEMU as the source stopped: the
    vCPU may not have taken it), and all 512 are poisoned there"""
    if os.environ.get("VMCE_EXPECT_INJECT") == "qmp":
        tap.skip("a lost huge page under hugepage = all, migrated while being told",
                 "inject-mce sends the 511 machine checks with no gap, and this TCG guest drops some of such a "
                 "storm itself (docs/figures.md, the storm), so its HardwareCorrupted would not say what vmced "
                 "did; e2e-migrate (HMP, 20 ms apart) runs it")
        return None
    agent = src.agent
    agent.call("sysfs", path="/sys/kernel/mm/transparent_hugepage/enabled", value="madvise")
    d.ctl("policy", name, "--hugepage", "all")
    w = agent.call("pages-start", type="thp")
    base = int(w["gpa"], 16) & ~(HUGE - 1)
    hc = agent.hardware_corrupted_kb()
    since = len(d.journal_records())
    ev = d.poison(name, "--gpa", hex(base), "--kind", "ao", "--huge-page", "2M")
    dst = start_destination("hpall", d)
    d.ctl("policy", "hpall", "--hugepage", "all")
    status = migrate(src, dst, os.path.join(work, "m7.sock"))
    tap.ok(ev.get("result") == "injected" and status == "completed",
           "lost huge page, hugepage = all: the loss injected, the guest migrated while the other pages were "
           "being told", diag=(ev, status))
    dst.wait_ready(60)

    def loss_tells():
        told = {}
        for r in d.journal_records()[since:]:
            gpa = int(r.get("gpa") or "0x0", 16)
            if r.get("type") == "memory-error" and base <= gpa < base + HUGE and r.get("result") == "injected":
                told.setdefault(gpa, []).append(r["vm"])
        return told
    told = wait_for(lambda: (lambda t: t if len(t) == 512 else None)(loss_tells()), 90, 1.0) or loss_tells()
    where = {vm: sum(1 for v in told.values() if vm in v) for vm in (name, "hpall")}
    migrated = [r for r in d.journal_records()[since:] if r.get("type") == "memory-error"
                and r.get("vm") == name and r.get("result") == "migrated"]
    both = [hex(k) for k, v in told.items() if len(v) > 1]
    tap.ok(len(told) == 512 and all(len(set(v)) == len(v) for v in told.values()) and len(both) <= 3,
           f"... every page of the loss told, at most once on each side: {where[name]} on the source, "
           f"{where['hpall']} on the destination ({len(migrated)} of the source's tells recorded 'migrated'; "
           f"{len(both)} told again there, given to QEMU as the source stopped)",
           diag=({hex(k): v for k, v in list(told.items())[:3]}, where, both))
    # (the guest takes a found error in a work item of its own: a moment)
    got_hc = wait_for(lambda: (lambda kb: kb if kb == hc + 2048 else None)(dst.agent.hardware_corrupted_kb()),
                      30, 0.5) or dst.agent.hardware_corrupted_kb()
    tap.eq(got_hc, hc + 2048,
           "... the destination's HardwareCorrupted: all 512 pages (2048 kB) more than before the loss")
    tap.ok(all(not qemu_reads(gpa2hva(dst, base + i * 4096), dst.pid) for i in (0, 1, 255, 511))
           and no_thread_stopped(dst) and no_thread_stopped(src),
           "... the lost pages are poisoned in the destination QEMU; no QEMU thread left stopped")
    return dst


def qemu_lists_poison(vm):
    """QEMU has vmce's series' x-hwpoison-page-add (0009): vmced tells it
    the pages, and its own migration skips and carries them"""
    with vm.qmp() as q:
        return any(c.get("name") == "x-hwpoison-page-add" for c in q.execute("query-commands"))


def case_source_vmced_killed(src, d, name):
    """The source's vmced killed while the RAM goes: a QEMU with vmce's
    series was told the pages when the migration started, so its migration
    thread reads none of them and it lives; the destination's QEMU lists
    them itself, poisoned there before the guest runs (its own vmced marks
    them too)"""
    if not qemu_lists_poison(src):
        tap.skip("the source's vmced killed mid-migration",
                 "this QEMU has no x-hwpoison-page-add (vmce's series, 0009): its migration thread would read "
                 "a poisoned page itself and die, which no vmced can prevent once it is gone "
                 "(e2e-migrate-vmce-10.0 runs this case)")
        return
    n_before = len(d.ctl_json("vm", name)["poisoned"])
    last, third = start_with_own_vmced("last")
    sock = os.path.join(work, "m5.sock")
    with last.qmp() as qd:
        qd.execute("migrate-incoming", uri=f"unix:{sock}")
    with src.qmp() as q:
        q.execute("migrate-set-parameters", **{"max-bandwidth": 16 * MiB})
    since = len(d.journal_records())
    mig = subprocess.Popen(d.ctl_argv() + ["migrate", name, f"unix:{sock}", "--to-vm", "last", "--to",
                                           third.socket],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    over = wait_for(lambda: [x for x in d.journal_records()[since:] if x.get("type") == "migration"
                             and x.get("action") == "handing-over"], 60) or [{}]
    time.sleep(0.5)
    d.proc.kill()
    d.proc.wait()
    mig.communicate(timeout=60)
    with src.qmp() as q:
        status = wait_for(lambda: (lambda st: st if st in ("completed", "failed", "cancelled") else None)(
            q.execute("query-migrate").get("status")), 180)
    tap.ok(status == "completed" and src.alive() and "QEMU told of them" in over[0].get("detail", ""),
           f"the source's vmced killed mid-migration: the migration completed and the source QEMU lives (QEMU "
           f"had been told its {n_before} pages)", diag=(status, over))
    with last.qmp() as qd:
        listed = qd.execute("query-hwpoisoned-pages")
    got = wait_for(lambda: [x for x in third.journal_records() if x.get("type") == "migration"
                            and x.get("action") == "received"], 20) or [{}]
    tap.ok(len(listed) == n_before and got[0].get("marked") == n_before,
           f"... the destination QEMU lists the {n_before} pages itself (query-hwpoisoned-pages), and its vmced "
           f"marked them ({got[0].get('detail')})", diag=(listed[:3], got))
    last.wait_ready(60)
    tap.ok(no_thread_stopped(src) and no_thread_stopped(last), "... no QEMU thread left stopped on either end")


try:
    vms["src"] = Vm.start(NAME, mem="512M", state_dir=os.path.join(work, "src"))
    vms["src"].wait_ready()
    daemon = Vmced(os.path.join(work, "vmced"),
                   args=["--pid", str(vms["src"].pid), "--qmp", vms["src"].vmced_qmp_path, "--name", "src",
                         "--agent", vms["src"].vmced_agent_path])
    daemon.wait_attached("src")
    result = {}
    tap.case("carry", lambda: result.update(zip(("dst", "pages"), case_carry())))
    if result.get("dst") is not None:
        # the guest lives on the destination now, vmced knows it as "dst"
        tap.case("migration failed", lambda: case_failed(result["dst"], result["pages"]))
        tap.case("no destination", lambda: case_no_destination(result["dst"]))
        tap.case("another vmced", lambda: case_other_vmced(result["dst"], result["pages"]))
        tap.case("queued AO", case_queued_ao)
        # (the loss under all first: every page of it told, none is ever
        # handed out again; the one left untold by hugepage = one would be,
        # to a later THP, and the guest's kernel would read it)
        if "far" in vms and daemons:
            tap.case("lost huge page, all", lambda: case_lost_huge_page_all(vms["far"], daemons[0], "far"))
        one_from = "hpall" if "hpall" in vms else "far"
        if one_from in vms and daemons:
            tap.case("lost huge page", lambda: case_lost_huge_page(vms[one_from], daemons[0], one_from))
        if "hp" in vms and daemons:
            tap.case("source vmced killed", lambda: case_source_vmced_killed(vms["hp"], daemons[0], "hp"))
finally:
    for d in daemons:
        d.stop()
    if daemon is not None:
        tap.eq(daemon.stop(), 0, "vmced stops cleanly on SIGTERM")
    for vm in vms.values():
        vm.stop()
tap.done()
