"""The host lab's scenario runner, run inside the L1 host (images/host/init).

L1's kernel has MEMORY_FAILURE: poisoning a page of the L2 guest's RAM file
makes it unmap the page from QEMU and send QEMU the real SIGBUS. Each
scenario boots (or reuses) an L2 guest, starts a victim process in it,
poisons the host page behind the victim's page, and records what happened:
did the victim get its SIGBUS, did the guest panic, did QEMU die, what did
vmced do, what did each kernel log, how long did it take.

Input: a JSON file {"qemus": [{"slug", "name", "binary", "release",
"behaviour", "succor", ...}, ...], "scenarios": [{"name", "accel", "kind",
"forwarder", "kill", "qemu": SLUG}, ...], "kvm_boots": N}: every QEMU that
run/hostlab staged in L1 (images/host/qemu-files.py: each in
/opt/qemus/SLUG with its own files), and what to run under which. Output, on
stdout, one JSON object per line: {"type": "progress", "text": ...},
{"type": "result", ...} (each with its QEMU), and {"type": "retire",
"next": I} when this L1 has booted its share of KVM guests (nested SVM
under TCG wedges after a dozen): run/hostlab boots a fresh L1 for the
scenarios from I on.
"""
import errno
import functools
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

from . import arm64, labcampaign, overhead, rasdaemon
from .procfs import pagemap_entry, process_reads, thread_states
from . import qemus as qemus_mod
from .daemon import Vmced
from .vm import Vm

SHM = "/dev/shm"
# how the host backs an L2 guest's RAM (scenario "backing"): a shared file
# on tmpfs; on hugetlbfs, where one error loses all of a huge page (vmced's
# hugepage policy); or QEMU's own private anonymous memory, in 4 KiB pages
# (anon: L1's THP off) or in transparent huge pages (thp), which no file
# maps: the poisoner finds its pfn in QEMU's page table
BACKINGS = ("file", "hugetlb-2M", "hugetlb-1G", "anon", "thp")
# hugetlbfs mount and page size (MiB) per backing
HUGETLB = {"hugetlb-2M": ("/dev/hugepages", 2), "hugetlb-1G": ("/dev/hugepages-1G", 1024)}
THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"
HUGE_2M = 2 << 20
L2_MEM_MB = 512
BUS_CODES = {4: "BUS_MCEERR_AR", 5: "BUS_MCEERR_AO"}
PANIC = re.compile(r"Kernel panic|Fatal machine check|MCE: Killing .* because of")
# an Arm64 guest (run/armlab's L2) reads the error from GHES: "{1}[Hardware
# Error]: Hardware error from APEI Generic Hardware Error Source: 0", or
# takes an SEA it cannot place ("Synchronous External Abort")
GUEST_MCE = re.compile(r"mce: \[Hardware Error\]|Memory failure:|mce: Uncorrected|"
                       r"Machine check events logged|Kernel panic|\[Hardware Error\]|"
                       r"Synchronous External Abort|Internal error:")
FIRST_MCE = re.compile(r"Machine Check Exception|Machine check events logged|Memory failure:|"
                       r"Uncorrected hardware memory error|Fatal machine check|"
                       r"Hardware error from APEI|Synchronous External Abort")
# the L1 this runs in: an x86 one (run/hostlab) or an Arm64 one (run/armlab)
ARCH = "arm64" if os.uname().machine == "aarch64" else "amd64"


class LabError(Exception):
    """A scenario that cannot be run as asked"""


class LabInputError(LabError):
    """A scenario refused before anything was done to its guest (a pfn that
    is not the guest's): the guest is as good as before"""


class LabNotRun(LabInputError):
    """A scenario this L1 cannot give (a backing it has not): its result is
    "not run", with why, and the guest is as good as before"""


_emit_lock = threading.Lock()


def emit(kind, **fields):
    line = json.dumps({"type": kind, **fields}) + "\n"
    with _emit_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def heartbeat(stop):
    """L0 takes an L1 that says nothing for 5 minutes for wedged: a TCG L2
    rebooting inside it may say nothing for longer. L1 itself is alive as
    long as this thread runs"""
    while not stop.wait(30):
        emit("alive")


def progress(text):
    emit("progress", text=text)


class L1Log:
    """L1's own kernel log, for its memory_failure() lines."""

    def __init__(self):
        self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(self.fd, 0, os.SEEK_END)

    def new_lines(self):
        lines = []
        while True:
            try:
                rec = os.read(self.fd, 8192).decode(errors="replace")
            except BlockingIOError:
                return lines
            except OSError:  # EPIPE: overwritten records
                continue
            text = rec.split(";", 1)[-1].split("\n", 1)[0]
            lines.append(text)


@functools.lru_cache(maxsize=None)
def qemu_knows_succor(qemu):
    """QEMU lists the CPUID flags it knows in `-cpu help`: what qemus'
    has('succor') says of it, checked on the binary"""
    res = subprocess.run([qemu, "-cpu", "help"], capture_output=True, text=True)
    return "succor" in res.stdout.split()


def qemu_record(q):
    """What a result says of its QEMU"""
    return {k: q.get(k) for k in ("name", "slug", "label", "release", "version", "series", "table",
                                  "nearest", "behaviour", "succor", "inject_mce", "binary")}


def file_page(path, offset):
    """Whether the page at @offset of the RAM file @path can be read: a
    hwpoisoned shmem page answers EIO without being touched, a page punched
    out reads back (zeroes)"""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        return f"cannot open: {e.strerror}"
    try:
        os.pread(fd, 4096, offset)
        return "readable"
    except OSError as e:
        return "poisoned" if e.errno == errno.EIO else f"{errno.errorcode.get(e.errno, e.errno)}"
    finally:
        os.close(fd)


def l2_mem_mb(backing):
    """A 1 GiB page backs whole GiBs of guest RAM only (QEMU refuses a
    backend smaller than its page)"""
    return max(L2_MEM_MB, HUGETLB[backing][1]) if backing in HUGETLB else L2_MEM_MB


def hugetlb_ram(name, backing="hugetlb-2M", mem_mb=L2_MEM_MB):
    """A path on L1's hugetlbfs for @name's RAM, with enough free huge
    pages of @backing's size reserved for it; LabNotRun (one line) where L1
    cannot give them. A 1 GiB page is asked for at run time: it needs 1 GiB
    of L1's memory free and contiguous, which a fresh L1 may still have"""
    mount, page_mb = HUGETLB[backing]
    need = -(-mem_mb // page_mb)
    pool = f"/sys/kernel/mm/hugepages/hugepages-{page_mb * 1024}kB"
    if not os.path.isdir(pool):
        raise LabNotRun(f"backing {backing}: L1's kernel has no {page_mb} MiB huge pages ({pool})")
    os.makedirs(mount, exist_ok=True)
    if not os.path.ismount(mount):
        res = subprocess.run(["mount", "-t", "hugetlbfs", "-o", f"pagesize={page_mb}M", "hugetlbfs", mount],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise LabNotRun(f"backing {backing}: cannot mount hugetlbfs on {mount}: {res.stderr.strip()}")

    def pages(what):
        with open(os.path.join(pool, what)) as f:
            return int(f.read())
    free = pages("free_hugepages")
    if free < need:
        try:
            with open(os.path.join(pool, "nr_hugepages"), "w") as f:
                f.write(str(pages("nr_hugepages") + need - free))
        except OSError:
            pass  # fewer than asked is said below
        free = pages("free_hugepages")
    if free < need:
        raise LabNotRun(f"backing {backing}: L1 has {free} free {page_mb} MiB pages, the guest's {mem_mb} MiB "
                        f"need {need} ({pool}/nr_hugepages: L1's memory is fragmented or too small"
                        + ("; 1 GiB pages are reserved at boot: hugepagesz=1G hugepages=1" if page_mb >= 1024
                           else "") + ")")
    return os.path.join(mount, f"{name}.ram")


def thp_setting(text):
    """The mode chosen in a transparent_hugepage/enabled file: "always
    [madvise] never" -> "madvise" """
    m = re.search(r"\[(\w+)\]", text)
    return m.group(1) if m else None


def l1_thp(backing):
    """Sets L1's THP for an anonymous backing before its QEMU faults in its
    RAM, and returns the mode: anon wants 4 KiB pages (Debian's 6.1 is
    `always`, and QEMU madvises guest RAM MADV_HUGEPAGE anyway), thp wants
    `always` or `madvise`. LabNotRun where L1 has no THP"""
    try:
        with open(THP_ENABLED) as f:
            mode = thp_setting(f.read())
    except OSError as e:
        if backing == "thp":
            raise LabNotRun(f"backing thp: L1's kernel has no transparent huge pages ({THP_ENABLED}: "
                            f"{e.strerror})") from e
        return None
    want = "never" if backing == "anon" else (mode if mode in ("always", "madvise") else "madvise")
    if mode != want:
        try:
            with open(THP_ENABLED, "w") as f:
                f.write(want)
        except OSError as e:
            raise LabNotRun(f"backing {backing}: cannot set {THP_ENABLED} to {want}: {e.strerror}") from e
    return want


KPF_HUGE, KPF_HWPOISON, KPF_THP = 17, 19, 22


def page_kinds(flags):
    """What /proc/kpageflags says of a page that matters here"""
    return {"thp": bool(flags >> KPF_THP & 1), "hugetlb": bool(flags >> KPF_HUGE & 1),
            "hwpoison": bool(flags >> KPF_HWPOISON & 1)}


def smaps_anon_huge_kb(text, addr):
    """AnonHugePages (kB) of the mapping that holds @addr in a
    /proc/PID/smaps text, or None if none holds it"""
    inside = False
    for ln in text.splitlines():
        head = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", ln)
        if head:
            inside = int(head.group(1), 16) <= addr < int(head.group(2), 16)
        elif inside and ln.startswith("AnonHugePages:"):
            return int(ln.split()[1])
    return None


def thp_refusal(backing, page, anon_huge_kb):
    """Why a victim's host @page (host_page()) does not show what @backing
    is about, or None: thp wants it inside a transparent huge page, anon
    outside one"""
    if page is None or not page.get("present"):
        return f"backing {backing}: QEMU has no page at the victim's HVA"
    if backing == "thp" and not page.get("thp"):
        return (f"backing thp: the victim's host page (pfn {page['pfn']:#x}) is not in a transparent huge "
                f"page (AnonHugePages of QEMU's RAM mapping: {anon_huge_kb} kB)")
    if backing == "anon" and page.get("thp"):
        return f"backing anon: the victim's host page (pfn {page['pfn']:#x}) is in a transparent huge page"
    return None


def host_page(pid, hva):
    """The page behind @hva in process @pid: its pagemap entry, and its
    kpageflags when present (L1 is root: pfns are shown)"""
    with open(f"/proc/{pid}/pagemap", "rb") as f:
        f.seek(hva // 4096 * 8)
        page = pagemap_entry(int.from_bytes(f.read(8), "little"))
    if page["pfn"]:
        with open("/proc/kpageflags", "rb") as f:
            f.seek(page["pfn"] * 8)
            page.update(page_kinds(int.from_bytes(f.read(8), "little")))
    return page


def anon_huge_kb(pid, hva):
    try:
        with open(f"/proc/{pid}/smaps") as f:
            return smaps_anon_huge_kb(f.read(), hva)
    except OSError:
        return None


def gpa_hva(vm, gpa):
    """QEMU's HVA of guest page @gpa (HMP gpa2hva), for RAM no file maps"""
    with vm.qmp() as q:
        text = q.hmp(f"gpa2hva {gpa:#x}")
    m = re.search(r"is (0x[0-9a-f]+)", text)
    if not m:
        raise LabError(f"gpa2hva {gpa:#x}: {text.strip()}")
    return int(m.group(1), 16)


class L2:
    """One L2 guest, maybe with a vmced, reused while scenarios allow it."""

    def __init__(self, name, accel, forwarder, q, backing="file"):
        self.name = name
        self.accel = accel
        self.forwarder = forwarder
        self.qemu = q
        self.backing = backing
        # what this guest went through before the scenario at hand
        self.history = []
        self.mem_mb = l2_mem_mb(backing)
        # L1's THP mode while this guest's RAM was faulted in
        self.l1_thp = None
        if backing in HUGETLB:
            self.ram = hugetlb_ram(name, backing, self.mem_mb)
        elif backing in ("anon", "thp"):
            self.l1_thp = l1_thp(backing)
            self.ram = None
        else:
            self.ram = os.path.join(SHM, f"{name}.ram")
        work = os.path.join("/run/vmce/lab", name)
        cpu = "EPYC" if accel == "kvm" else "Skylake-Client"
        boot = {}
        if ARCH == "arm64":
            # virt,ras=on under AAVMF, L2's kernel and image where the
            # Arm64 L1 has them (l1_environment)
            cpu = arm64.KVM_CPU if accel == "kvm" else arm64.CPU
            boot = dict(arch="arm64", kernel=os.environ["VMCE_KERNEL"], initrd=os.environ["VMCE_INITRD"])
        if accel == "kvm" and q.get("succor"):
            # a QEMU that can give an AMD guest MCA recovery (9.1, or
            # qemu-patches/ 0004: qemus has('succor')) does so only when asked
            cpu += ",succor=on,overflow-recov=on"
        self.cpu_model = cpu
        t = time.monotonic()
        self.vm = Vm.start(name, mem=f"{self.mem_mb}M", accel=accel, cpu_model=cpu, qemu=q["binary"],
                           state_dir=os.path.join(work, "vm"), mem_file=self.ram, **boot)
        try:
            # a KVM L2 boots in about 10 s: one that has not in 60 is stuck;
            # an Arm64 one boots AAVMF first, under nested KVM in TCG
            self.vm.wait_ready(timeout=600 if accel == "tcg" or ARCH == "arm64" else 60)
        except Exception as e:
            said = [] if self.vm.alive() else self.vm.qemu_log().strip().splitlines()
            self.vm.stop()
            self.unlink_ram()  # L1 keeps it in RAM
            if said:  # QEMU's last word says more than a closed socket
                raise LabError(f"QEMU exited: {said[-1]}") from e
            raise
        self.boot_s = time.monotonic() - t
        # the boot the lab knows of: a reboot it asks for is of this boot only
        self.boot = self.vm.boot_id()
        self.boot_profile = boot_profile(self.vm)
        # an AMD guest finds a deferred error (an AO) only when it polls its
        # banks, every 5 minutes by default: poll every second
        if ARCH == "amd64":
            self.vm.agent.call("sysfs", path="/sys/devices/system/machinecheck/machinecheck0/check_interval",
                               value=1)
        self.daemon = None
        if forwarder == "vmced":
            self.daemon = Vmced(os.path.join(work, "vmced"),
                                args=["--pid", str(self.vm.pid), "--qmp", self.vm.vmced_qmp_path,
                                      "--name", name, "--agent", self.vm.vmced_agent_path])
            self.daemon.wait_attached(name, 120)
        self.healthy = True

    def usable_for(self, sc):
        if not (self.healthy and self.vm.alive() and self.accel == sc["accel"]
                and self.qemu["slug"] == sc["qemu"] and self.backing == sc.get("backing", "file")):
            return False
        if self.forwarder == sc["forwarder"]:
            return True
        # `reuse: detach-vmced`: a QEMU row on the guest vmced watched, vmced
        # gone first (make check: one TCG L2 boot for both)
        return self.forwarder == "vmced" and sc["forwarder"] == "qemu" and sc.get("reuse") == "detach-vmced"

    def detach_vmced(self, why):
        """vmced stops (it detaches from QEMU on SIGTERM): QEMU handles the
        next signal by itself, as if vmced had never been there"""
        self.daemon.stop()
        self.daemon = None
        self.forwarder = "qemu"
        self.history.append(f"vmced detached before {why}")

    def exit_status(self):
        """How QEMU ended, in words, or None while it runs"""
        rc = self.vm._proc.poll()
        if rc is None and not self.vm.alive():
            # gone from /proc a moment before its parent can reap it
            try:
                rc = self.vm._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if rc is None:
            return None
        if rc < 0:
            return f"killed by signal {-rc} ({signal.Signals(-rc).name})"
        return f"exited with status {rc}"

    def ram_pfns(self):
        """Host pfn -> file offset of every present page of the guest's RAM,
        from QEMU's own page table"""
        pfns = {}
        with open(f"/proc/{self.vm.pid}/maps") as f:
            maps = [ln.split() for ln in f]
        with open(f"/proc/{self.vm.pid}/pagemap", "rb") as pm:
            for fields in maps:
                if len(fields) < 6 or fields[5] != self.ram:
                    continue
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                base = int(fields[2], 16)
                pm.seek(lo // 4096 * 8)
                data = pm.read((hi - lo) // 4096 * 8)
                for i in range(len(data) // 8):
                    entry = int.from_bytes(data[i * 8:i * 8 + 8], "little")
                    if entry >> 63:
                        pfns[entry & ((1 << 55) - 1)] = base + i * 4096
        return pfns

    def unlink_ram(self):
        if self.ram is None:
            return
        try:
            os.unlink(self.ram)
        except FileNotFoundError:
            pass

    def stop(self):
        if self.daemon is not None:
            self.daemon.stop()
        self.vm.stop()
        self.unlink_ram()


def boot_profile(vm):
    """Where a boot's time went, from the guest kernel's own log: when it
    reached user space, and the longest gaps between two lines (under TCG
    in TCG, a boot takes minutes)"""
    try:
        lines = vm.agent.call("kmsg", timeout=10)["lines"]
    except Exception as e:  # noqa: BLE001 - evidence only
        return {"error": str(e)[:200]}
    prof = {"lines": len(lines), "last_s": round(lines[-1]["usec"] / 1e6, 2) if lines else None}
    for key, text in (("userspace_s", "Run /init"), ("freed_init_s", "Freeing unused kernel")):
        hit = next((ln for ln in lines if text in ln["text"]), None)
        prof[key] = round(hit["usec"] / 1e6, 2) if hit else None
    gaps = sorted(((b["usec"] - a["usec"]) / 1e6, a["text"][:70], b["text"][:70])
                  for a, b in zip(lines, lines[1:]))[-5:]
    prof["gaps"] = [{"s": round(g, 2), "after": a, "before": b} for g, a, b in reversed(gaps)]
    return prof


def console_lines(vm, since_len):
    text = vm.console()
    return text[since_len:].splitlines()


def first_mce(l2, console_len, t_poison, first_mce_ms):
    if first_mce_ms is None and any(FIRST_MCE.search(ln) for ln in console_lines(l2.vm, console_len)):
        first_mce_ms = (time.monotonic() - t_poison) * 1000
    return first_mce_ms


# HMP `info roms`: a blob loaded at a fixed guest address (hw/core/loader.c)
ROM_BLOB = re.compile(r'^addr=([0-9a-f]+) size=0x([0-9a-f]+) mem=\w+ name="(.*)"\r?$', re.M)


def rom_blob(vm, gpa):
    """The ROM blob that QEMU writes back over @gpa at every reset
    (rom_reset()), or None: a poisoned page there is written by QEMU's main
    thread itself at the guest's reboot, unless replaced first"""
    try:
        with vm.qmp() as q:
            text = q.hmp("info roms")
    except Exception:  # noqa: BLE001 - evidence only
        return None
    for m in ROM_BLOB.finditer(text):
        start, size = int(m.group(1), 16), int(m.group(2), 16)
        if start <= gpa < start + size:
            return m.group(3)
    return None


def observe(l2, sc, victim, t_poison, console_len, timeout):
    """Polls until the scenario has an outcome; returns it with evidence."""
    outcome, sig, first_mce_ms = observe_outcome(l2, sc, victim, t_poison, console_len, timeout)
    # the guest prints its machine-check report from a work item, maybe
    # after the victim got its signal: wait a moment for it
    deadline = time.monotonic() + 3
    while first_mce_ms is None and outcome in ("sigbus", "guest-panic") and \
            time.monotonic() < deadline:
        first_mce_ms = first_mce(l2, console_len, t_poison, first_mce_ms)
        time.sleep(0.02)
    return outcome, sig, first_mce_ms


def observe_outcome(l2, sc, victim, t_poison, console_len, timeout):
    agent = l2.vm.agent
    kind, kill = sc["kind"], sc.get("kill", "early")
    first_mce_ms = None
    touched = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = console_lines(l2.vm, console_len)
        first_mce_ms = first_mce(l2, console_len, t_poison, first_mce_ms)
        if any(PANIC.search(ln) for ln in lines):
            return "guest-panic", None, first_mce_ms
        if not l2.vm.alive():
            return "qemu-died", None, first_mce_ms
        if l2.daemon is not None:
            recs = [r for r in l2.daemon.journal_records()
                    if r["type"] == "memory-error" and r["result"] in ("refused", "stopped")]
            # the error's own answer: the first; what follows is the vCPU
            # faulting on it again until vmced pauses the VM ("stopped"),
            # which a slower look here would take for the answer
            if recs:
                return recs[0]["result"], None, first_mce_ms
        try:
            st = agent.call("victim-status", timeout=5, pid=victim["pid"])
        except Exception:
            # a paused or dead guest does not answer
            time.sleep(0.2)
            continue
        if st.get("sigbus"):
            return "sigbus", st["sigbus"], first_mce_ms
        if kill == "late" and kind == "ao" and not touched and any(
                "recovery action" in ln for ln in lines):
            # the guest isolated the page without signalling: now touch it
            agent.call("victim-touch", pid=victim["pid"])
            touched = True
        time.sleep(0.02)
    return "nothing", None, first_mce_ms


STAMP = re.compile(r"\[\s*(\d+\.\d+)\]")


def new_boot_lines(vm, console_len):
    """The console's lines from the new boot on: after @console_len, from
    the first line whose kernel timestamp goes back (the old boot's panic
    may still be printing its last lines)"""
    text = vm.console()
    stamps = STAMP.findall(text[:console_len])
    prev = float(stamps[-1]) if stamps else None
    out, started = [], prev is None
    for ln in text[console_len:].splitlines():
        m = STAMP.search(ln)
        if m:
            ts = float(m.group(1))
            if not started and ts < prev:
                started = True
            prev = ts
        if started:
            out.append(ln)
    return out


def wait_rebooted(l2, console_len, old_boot, timeout):
    """(back, why not): the guest's new boot answers, or it will not: QEMU
    exited, or the new boot's kernel panicked (a page still poisoned, met
    early in the boot), which is not waited out to the timeout"""
    deadline = time.monotonic() + timeout
    while True:
        try:
            l2.vm.wait_rebooted(old_boot, timeout=max(1.0, min(10.0, deadline - time.monotonic())))
            return True, None
        except Exception as e:  # noqa: BLE001 - recorded
            why = str(e).splitlines()[0][:300]
            panic = next((ln for ln in new_boot_lines(l2.vm, console_len) if PANIC.search(ln)), None)
            if panic:
                return False, f"the new boot's kernel: {panic.strip()[:200]}"
            if not l2.vm.alive() or time.monotonic() >= deadline:
                return False, why


def reset_times(events):
    """QEMU's RESET events on monitor @events since it connected, each as
    (time.time() of it, its data)"""
    return [(e["timestamp"]["seconds"] + e["timestamp"]["microseconds"] / 1e6, e.get("data", {}))
            for e in events.poll_events(0) if e["event"] == "RESET"]


def reboot_steps(l2, sc, events, steps):
    """reboot_after()'s doing, each step's time.time() in @steps"""
    found = None
    if sc.get("forget") and l2.daemon is not None:
        # a vmced that never saw the error (killed, its journal lost): it
        # must find the page in QEMU's own page table
        steps["vmced killed"] = time.time()
        l2.daemon.proc.kill()
        l2.daemon.proc.wait()
        # out of vmced's sight, kept for the record of a restart unasked
        os.replace(l2.daemon.journal, l2.daemon.journal + ".killed")
        l2.daemon = Vmced(l2.daemon.workdir, args=l2.daemon.args)
        info = l2.daemon.wait_attached(l2.name, 120)
        steps["vmced attached"] = time.time()
        found = {"poisoned": info["poisoned"], "poisoned_from": info["poisoned_from"]}
        progress(f"{sc['name']}: vmced started again without its journal: {info['poisoned_from']}")
    console_len = len(l2.vm.console())
    journal_len = len(l2.daemon.journal_records()) if l2.daemon else 0
    t = time.monotonic()
    how, back, detail = "guest", True, None
    try:
        # boot=: QEMU would hand a request the old boot could not take to the
        # next boot's agent, which would reboot once more, unasked
        steps["reboot asked"] = time.time()
        l2.vm.reboot(boot=l2.boot)
    except Exception as e:
        # the guest that restarted before it was asked answers when its new
        # boot's agent runs (BootChanged), or not within the timeout: not
        # a guest to reset once more
        before = reset_times(events)
        if "(BootChanged)" in str(e) or before:
            how = "unasked"
        else:
            how = "qmp"
    if how == "qmp":
        detail = qmp_reset(events)
        back = detail is None
    progress(f"{sc['name']}: the guest reboots ("
             + {"guest": "itself", "qmp": "QMP system_reset", "unasked": "it had already, unasked"}[how] + ")")
    hang = None
    if back:
        limit = 600 if sc["accel"] == "tcg" else 60
        back, detail = wait_rebooted(l2, console_len, l2.boot, limit)
        hang = None if back else lab_hang(l2, events, steps["reboot asked"], console_len, journal_len)
        if hang:
            # as boot_l2()'s second try: the lab's trouble gets one more
            # reset, the operator's (QMP system_reset), and vmced's part in
            # that one is judged as it would have been in the first
            progress(f"{sc['name']}: {hang}; the lab resets it (QMP system_reset)")
            steps["lab reset"] = time.time()
            detail = qmp_reset(events)
            if detail is None:
                back, detail = wait_rebooted(l2, console_len, l2.boot, limit)
    return found, how, back, detail, console_len, journal_len, t, hang


def qmp_reset(events):
    """QMP system_reset (and cont, if QEMU paused the guest), as an operator
    resets a guest that does not answer; None, or why it could not"""
    try:
        # on @events: QEMU serves one client per monitor socket
        events.execute("system_reset")
        if events.execute("query-status")["status"] == "paused":
            events.execute("cont")
    except Exception as e:  # noqa: BLE001 - recorded
        # QEMU itself may die of the reset: rom_reset() writes the -kernel
        # image back, onto the page if it is still poisoned
        return f"QMP system_reset: {type(e).__name__}: {e}"
    return None


def lab_hang(l2, events, asked, console_len, journal_len):
    """reboot_hang() of what a guest that did not come back left behind"""
    if not l2.vm.alive():
        return None
    held = held_threads(l2.vm.pid)
    records = l2.daemon.journal_records()[journal_len:] if l2.daemon else []
    return reboot_hang(held=held, resets=[ts for ts, _ in reset_times(events) if ts >= asked],
                       new_boot=new_boot_lines(l2.vm, console_len), vmced=l2.daemon is not None,
                       reset_records=[r for r in records if r["type"] == "reset"])


def reboot_hang(held, resets, new_boot, vmced, reset_records):
    """Why a guest that did not come back from the reboot it was asked for
    hung by the lab's own trouble, or None: the scenario's result. Nested
    SVM under TCG now and then leaves an L2 vCPU that never runs again
    (boot_l2()); it can strike as the guest goes down, or in the firmware
    of its new boot, and nothing of the error is in either:
      held        QEMU threads stopped under ptrace: whoever traces QEMU
                  froze the guest (vmced must never leave one so): None
      resets      QEMU's RESETs since the request: none, the guest hung on
                  its way down, before anything of vmced's reset ran
      new_boot    the new boot's console lines: it ran, and says why it stopped
      reset_records  vmced's reset records since: QEMU reset the guest and
                  vmced recorded nothing, that is vmced's failure"""
    if held or new_boot:
        return None
    if not resets:
        return "the guest never reset after its reboot() (no RESET): it hung on its way down"
    if vmced and not reset_records:
        return None
    return "QEMU reset the guest, but its new boot never printed a line (its firmware hangs)"


def reboot_after(l2, sc, result):
    """The scenario's `then: reboot`: the guest reboots (itself, if it still
    answers; else as an operator would, QMP system_reset and cont), and the
    lab records whether it comes back, and what its new boot's kernel log
    says of machine checks: the host page is still poisoned unless someone
    replaced it. QEMU's RESET events are recorded with the lab's steps, and
    a guest that restarted before it was asked is told apart by its boot id
    (the page may have been replaced then, by whoever watched)"""
    # QEMU sends every monitor its events: this one's are the resets, each
    # with QEMU's time, set against the lab's steps (time.time(): same clock).
    # The lab's monitor: nothing else of the lab may use it meanwhile
    events = l2.vm.qmp()
    steps = {}
    try:
        found, how, back, detail, console_len, journal_len, t, hang = reboot_steps(l2, sc, events, steps)
        resets = reset_times(events)
    finally:
        events.close()
    asked = steps["reboot asked"]
    lines = console_lines(l2.vm, console_len)
    journal = l2.daemon.journal_records()[journal_len:] if l2.daemon else []
    offset = int(result.get("ram_offset") or "0", 16)
    result["after_reboot"] = {
        # the host page after the reset: still poisoned in the RAM file
        # (QEMU 7.2 maps the same file page again), or punched out
        "file_page": file_page(l2.ram, offset) if result.get("ram_offset") else None,
        "how": how, "back": back, "detail": detail,
        # the lab's own trouble, met and reset once more (reboot_hang())
        "lab_hang": hang,
        "boot_s": round(time.monotonic() - t, 1),
        # "mce: Machine check injector initialized" is mce-inject.ko loading
        "guest_mce_log": [ln for ln in lines
                          if GUEST_MCE.search(ln) or FIRST_MCE.search(ln)
                          or ("Machine check" in ln and "injector" not in ln)][:20],
        "journal": journal,
        "vmced_without_journal": found,
        "qemu_exit": l2.exit_status(),
        "qemu_log": l2.vm.qemu_log().splitlines()[-6:],
        # s from the reboot request: a reset before it (< 0) nobody asked for
        "steps": {k: round(v - asked, 3) for k, v in steps.items()},
        "resets": [dict(s=round(ts - asked, 3), **data) for ts, data in resets],
    }
    early = [round(ts - asked, 3) for ts, _ in resets if ts < asked]
    if how == "unasked" or early:
        # what vmced saw of it: its resets (the killed one's too) and log
        if l2.daemon:
            killed = l2.daemon.journal + ".killed"
            old = Vmced.records(killed) if sc.get("forget") and os.path.exists(killed) else []
            result["after_reboot"]["vmced_resets"] = [rec for rec in old + l2.daemon.journal_records()
                                                      if rec["type"] == "reset"]
            result["after_reboot"]["vmced_log"] = l2.daemon.log_text().splitlines()[-40:]
        result["after_reboot"]["unasked"] = (
            "the guest restarted before the lab asked it to"
            + (f" (RESET {', '.join(f'{x:+.3f}' for x in early)} s from the request; lab steps "
               + ", ".join(f"{k} {v:+.3f} s" for k, v in result["after_reboot"]["steps"].items()) + ")"
               if early else ""))
    if back:
        try:
            resync(l2.vm.agent)
            l2.boot = l2.vm.boot_id()
            result["after_reboot"]["boot_profile"] = boot_profile(l2.vm)
            l2.vm.agent.call("sysfs", path="/sys/devices/system/machinecheck/machinecheck0/check_interval",
                             value=1)
        except Exception as e:  # noqa: BLE001 - recorded: it went down again
            # a new boot that meets the still-poisoned page (QEMU 7.2's own
            # forwarding does not replace it) may panic and reset at once
            result["after_reboot"]["again"] = f"{type(e).__name__}: {e}"
            l2.healthy = False
        else:
            # a clean new boot, the page replaced: as good as a fresh guest
            # for the next scenario (whatever the error's outcome was)
            a = result["after_reboot"]
            l2.healthy = (a["qemu_exit"] is None and not a["guest_mce_log"]
                          and a["file_page"] in ("readable", None))
            if l2.healthy:
                l2.history.append(f"rebooted clean after {sc['name']}")
    else:
        l2.healthy = False
        result["after_reboot"].update(not_back(l2))


def not_back(l2):
    """What says why a guest did not come back from its reboot: the
    console's end, QEMU's threads and vmced's log"""
    facts = {"console_tail": l2.vm.console().splitlines()[-15:]}
    # a guest frozen by whoever traces QEMU, not hung by itself
    facts["held_threads"] = held_threads(l2.vm.pid)
    facts["qemu_threads"] = thread_waits(l2.vm.pid)
    if l2.daemon:
        # whether vmced saw the reset, and what it held meanwhile
        facts["vmced_log"] = l2.daemon.log_text().splitlines()[-40:]
    return facts


def held_threads(pid):
    """QEMU @pid's threads stopped under ptrace (state t) in both of two
    looks a second apart: held, not passing through a stop"""
    held = {t for t, st in thread_states(pid).items() if st == "t"}
    time.sleep(1)
    return sorted(held & {t for t, st in thread_states(pid).items() if st == "t"})


def thread_waits(pid):
    """Each thread of QEMU @pid: its name, state and where in the kernel
    it waits (wchan): a vCPU spinning in KVM_RUN (R) tells a guest that
    hangs under nested SVM from one whose vCPU nobody lets run"""
    def read(tid, leaf):
        try:
            with open(f"/proc/{pid}/task/{tid}/{leaf}") as f:
                return f.read().strip()
        except OSError:
            return "?"
    return {str(tid): f"{read(tid, 'comm')} {st} {read(tid, 'wchan') or '-'}"
            for tid, st in sorted(thread_states(pid).items())}


def resync(agent):
    """The agent answers in order and without ids, on whichever connection
    QEMU has for its port: an answer the lab gave up on (a ping that took
    longer than its timeout while a TCG guest rebooted) comes in late, and
    every later call would read the answer of the one before. Ask something
    only this call can be answered with, and drop what comes before it"""
    mark = 4000000 + random.randrange(100000)
    agent.send("victim-status", pid=mark)
    for _ in range(64):
        reply = agent.read(30)
        if str(mark) in json.dumps(reply.get("error", {})):
            return
    raise LabError("the guest agent's answers are out of step and do not catch up")


def start_victim(l2, kind):
    """A victim whose page L1 can poison through the RAM file. A page that
    vmced gave QEMU back after a TCG vCPU consumed it is anonymous memory
    from then on, no longer the file's; after the guest reboots, a new
    victim is likely to get that very page again (the guest allocates in
    the same order each boot). Such victims are kept until one lands in the
    file, then stopped. Returns (victim, file offset, HVA, [GPAs passed over])"""
    passed = []
    refusal = None
    try:
        for _ in range(8):
            victim = l2.vm.agent.call("victim-start", mode="read" if kind == "ar" else "idle")
            if l2.ram is None:
                # no file: the page is wherever QEMU's page table has it; a
                # thp backing wants a victim inside a THP (one that L1 could
                # not give a huge page, or a page vmced replaced, is not)
                hva = gpa_hva(l2.vm, int(victim["gpa"], 16))
                refusal = thp_refusal(l2.backing, host_page(l2.vm.pid, hva), anon_huge_kb(l2.vm.pid, hva))
                if refusal is None:
                    return victim, None, hva, [p["gpa"] for p in passed]
                passed.append(victim)
                continue
            try:
                offset, hva = l2.vm.ram_file_offset(int(victim["gpa"], 16))
                return victim, offset, hva, [p["gpa"] for p in passed]
            except RuntimeError as e:
                if "is not in" not in str(e):
                    raise
                passed.append(victim)
        if refusal:
            raise LabNotRun(f"{refusal}; so were 7 more victims' pages")
        raise LabError(f"8 victims in a row got pages that are not {l2.ram}'s: "
                       + ", ".join(p["gpa"] for p in passed))
    finally:
        for p in passed:
            try:
                l2.vm.agent.call("victim-stop", pid=p["pid"])
            except Exception:  # noqa: BLE001 - it holds a page, nothing more
                pass


def run_scenario(sc, l2, l1log):
    victim, offset, hva, passed_over = prepare_victim(sc, l2)
    in_rom = rom_blob(l2.vm, int(victim["gpa"], 16))
    journal_len = len(l2.daemon.journal_records()) if l2.daemon else 0
    console_len = len(l2.vm.console())
    l1log.new_lines()
    host_before = None
    if l2.ram is None:
        host_before = dict(host_page(l2.vm.pid, hva), anon_huge_kb=anon_huge_kb(l2.vm.pid, hva))
        progress(f"{sc['name']}: victim {victim['pid']} page GPA {victim['gpa']} = QEMU HVA {hva:#x} = "
                 f"pfn {host_before['pfn']:#x} ({'in a THP' if host_before.get('thp') else '4 KiB'}); "
                 "poisoning it")
    else:
        progress(f"{sc['name']}: victim {victim['pid']} page GPA {victim['gpa']} = QEMU HVA {hva:#x} = "
                 f"{l2.ram} offset {offset:#x}; poisoning it")
    poisoned, (outcome, sig, mce_ms), elapsed_ms, injected_ms = poison(
        l2, sc, victim, poison_argv(sc, l2, hva, offset), console_len)
    if l2.daemon and not l2.vm.alive():
        journal_whole(l2, journal_len)
    loss = huge_page_loss(l2, journal_len, sc) if l2.daemon else None
    guest_log = [ln for ln in console_lines(l2.vm, console_len) if GUEST_MCE.search(ln)]
    journal = l2.daemon.journal_records()[journal_len:] if l2.daemon else []
    l1_lines = l1log.new_lines()
    # the error's neighbours, after the error's own records are taken
    blast = blast_radius(l2, sc, victim, hva, outcome, l1log, offset)
    # the pages told of a lost huge page are counted (huge_page_loss), not each kept
    journal = [r for r in journal if r.get("source") != "huge-page"]
    result = {
        "scenario": sc, "qemu": qemu_record(l2.qemu), "l2_history": list(l2.history),
        # GPAs of victims whose page was no longer the RAM file's (vmced
        # replaced it with anonymous memory, earlier in this guest's life)
        "victims_passed_over": passed_over,
        "outcome": outcome, "host_pfn": poisoned["pfn"], "gpa": victim["gpa"],
        "ram_offset": hex(offset) if offset is not None else None,
        # anon/thp: the victim's host page before the error (pagemap,
        # kpageflags, AnonHugePages of its mapping), and what vmce-poison
        # saw of it as it poisoned it
        "host_page": host_before, "poisoned": poisoned, "l1_thp": l2.l1_thp,
        # False: L1's memory_failure() poisoned the page but could not isolate it
        "l1_isolated": poisoned.get("isolated", True),
        "hva": hex(hva), "victim_va": victim["va"], "victim_pid": victim["pid"], "gpa_in_rom": in_rom,
        "l1_memory_failure": [ln for ln in l1_lines if "Memory failure" in ln],
        "guest_log": guest_log[:40], "journal": journal,
        "ms_to_first_mce_log": round(mce_ms, 1) if mce_ms is not None else None,
        "ms_to_injection": round(injected_ms, 2) if injected_ms is not None else None,
        "l2_boot_s": round(l2.boot_s, 1), "l2_cpu_model": l2.cpu_model, "l2_boot_profile": l2.boot_profile,
        "cpu_help_succor": qemu_knows_succor(l2.qemu["binary"]),
        "qemu_log": l2.vm.qemu_log().splitlines()[-10:],
        "qemu_exit": l2.exit_status(),
        "backing": l2.backing,
        "huge_page_loss": loss,
        "blast_radius": blast,
    }
    if l2.daemon:
        # the host's rasdaemon recorded the page too: vmced's host-page
        # record (what it read of rasdaemon's) beside rasdaemon's own row
        result["host_records"] = rasdaemon.join(
            lambda: l2.daemon.journal_records()[journal_len:],
            [r for r in journal if r["type"] == "memory-error" and r.get("source") == "kernel"],
            lambda pfn: [json.loads(ln) for ln in l2.daemon.ctl("--json", "events", "--pfn", hex(pfn),
                                                                   check=False).stdout.splitlines() if ln.strip()])
    after_the_error(l2, sc, victim, sig, elapsed_ms, result)
    if sc.get("migrate"):
        migrate_after(l2, sc, victim, result)
    return result


def prepare_victim(sc, l2):
    """The scenario's victim, with the guest's kill policy and vmced's
    policy set for it: (victim, RAM file offset, HVA, GPAs passed over)"""
    agent = l2.vm.agent
    resync(agent)
    agent.call("sysctl", name="vm.memory_failure_early_kill",
               value=0 if sc.get("kill") == "late" else 1)
    victim, offset, hva, passed_over = start_victim(l2, sc["kind"])
    if l2.daemon is not None:
        # AR for real: the host's early AO must not reach the guest, so
        # that the guest learns of the page only when it consumes it
        policy = sc.get("policy") or ("ignore-ao" if sc["kind"] == "ar" else "forward")
        l2.daemon.ctl("policy", l2.name, policy, "--hugepage", sc.get("hugepage") or "salvage")
    return victim, offset, hva, passed_over


def poison_argv(sc, l2, hva, offset):
    """How vmce-poison puts the real error in the victim's host page"""
    if l2.ram is None:
        # QEMU's anonymous RAM: its pfn from QEMU's page table, to debugfs
        # hwpoison (memory_failure(pfn, 0): a found error, QEMU gets an AO)
        return ["vmce-poison", "pid-addr", str(l2.vm.pid), hex(hva)]
    if sc.get("inject", "madvise") == "corrupt-pfn" or sc.get("pfn") is not None:
        # debugfs hwpoison: poisons a pfn, whoever owns it, so make sure it
        # is the guest's: anything else could take L1 down with it
        pfns = l2.ram_pfns()
        target = sc.get("pfn")
        if target is None:
            target = next((p for p, off in pfns.items() if off == offset), None)
        if target is None:
            raise LabError(f"QEMU has no page at {l2.ram} offset {offset:#x}")
        if target not in pfns:
            raise LabInputError(f"pfn {target:#x} is not guest RAM of {l2.name} (no page of "
                                f"{l2.ram} in QEMU has it): not poisoning it")
        return ["vmce-poison", "corrupt-pfn", hex(target)]
    return ["vmce-poison", "file", l2.ram, hex(offset)]


def poison(l2, sc, victim, argv, console_len):
    """Runs vmce-poison (@argv) and watches the guest: (what vmce-poison
    says it poisoned, observe()'s (outcome, signal, ms to the first MCE
    line), ms to the outcome, ms to QEMU's injection)"""
    # QEMU announces every injection with a timestamped MEMORY_FAILURE event
    # on every monitor: the time from poison to injection, whoever injects
    events = l2.vm.qmp()
    t0 = time.monotonic()
    res = subprocess.run(argv, capture_output=True, text=True)
    if res.returncode != 0:
        events.close()
        raise LabError(res.stderr.strip())
    poisoned = json.loads(res.stdout)
    observed = observe(l2, sc, victim, t0, console_len, 180 if sc["accel"] == "tcg" else 60)
    elapsed_ms = (time.monotonic() - t0) * 1000
    injected_ms = None
    try:
        for ev in events.poll_events(0.5):
            data = ev.get("data", {})
            if ev["event"] == "MEMORY_FAILURE" and data.get("action") == "inject":
                ts = ev["timestamp"]
                injected_ms = (ts["seconds"] * 1e9 + ts["microseconds"] * 1e3
                               - poisoned["time_ns"]) / 1e6
                break
    finally:
        events.close()
    return poisoned, observed, elapsed_ms, injected_ms


def journal_whole(l2, journal_len):
    """vmced journals what QEMU's death cut short (an injection QEMU never
    answered, a loss's pages) before the QEMU's vm-exit record: the
    journal is whole once that is in (seen: a 1 GiB loss's AO record came
    after the copy was taken)"""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(
            r.get("type") == "vm-exit" for r in l2.daemon.journal_records()[journal_len:]):
        time.sleep(0.1)


def after_the_error(l2, sc, victim, sig, elapsed_ms, result):
    """@result completed: the victim's signal, what vmced and QEMU say of
    the guest now; a guest that did not recover is not used again, and
    the scenario's reboot comes last"""
    if sig is not None:
        # its own page: an AR's address is the load's, which may lie
        # anywhere in the page (an Arm64 guest's late kill, armlab)
        own = int(sig["addr"], 16) & ~0xfff == int(victim["va"], 16) & ~0xfff
        result["signal"] = {"code": sig["code"], "code_name": BUS_CODES.get(sig["code"], "other"),
                            "addr": sig["addr"], "lsb": sig.get("lsb"), "own_va": own}
        result["ms_to_sigbus"] = round(elapsed_ms, 1)
        if sig["code"] in BUS_CODES and own:
            result["outcome"] = "recovered"
    # (vmced lets go of a QEMU that died: nothing to ask then)
    vm_info = l2.daemon.ctl_json("vm", l2.name, check=False) if l2.daemon is not None and l2.daemon.alive() else None
    if vm_info:
        result["guest_cpu"] = vm_info["cpu"]
        result["host_vendor"] = vm_info["host_vendor"]
    if l2.vm.alive():
        try:
            with l2.vm.qmp() as q:
                result["vm_status"] = q.execute("query-status")["status"]
        except Exception as e:
            result["vm_status"] = f"no answer: {e}"
    if result["outcome"] != "recovered":
        l2.healthy = False
        result["guest_console_tail"] = l2.vm.console().splitlines()[-15:]
    if sc.get("then") == "reboot" and l2.vm.alive():
        reboot_after(l2, sc, result)


def host_block(pid, hva, size=HUGE_2M):
    """The host's side of an error's blast radius: of the other pages of
    the 2 MiB around @hva in QEMU, how many still read. Read through
    /proc/PID/mem, where a poisoned page fails with EIO and signals no one;
    and whether the block is still a THP (memory_failure() splits one)"""
    base = hva & ~(size - 1)
    page = hva & ~0xfff
    readable, lost = 0, []
    fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    try:
        for addr in range(base, base + size, 4096):
            try:
                if len(os.pread(fd, 4096, addr)) == 4096:
                    readable += 1
                    continue
            except OSError:
                pass
            lost.append(addr)
    finally:
        os.close(fd)
    other = base if page != base else base + 4096
    return {"block": hex(base), "pages": size // 4096,
            "victim_page_readable": page not in lost,
            "others_readable": readable - (page not in lost),
            "others_lost": len([a for a in lost if a != page]),
            "first_lost": [hex(a) for a in lost if a != page][:4],
            "neighbour_after": host_page(pid, other)}


def guest_neighbour(l2, sc, victim, l1log):
    """The guest's side: a new process whose page is another one of the
    victim's 2 MiB (by GPA; QEMU keeps guest RAM 2 MiB aligned, so it is the
    same host 2 MiB) reads it once. The guest's page allocator hands a new
    process a page near the last ones it gave, mostly: a few tries, and a
    page outside the 2 MiB is said, not read"""
    gpa = int(victim["gpa"], 16)
    base = gpa & ~(HUGE_2M - 1)
    agent = l2.vm.agent
    resync(agent)
    found, tried = None, []
    try:
        for _ in range(6):
            n = agent.call("victim-start", timeout=120, mode="idle", min_gpa=hex(base))
            if base <= int(n["gpa"], 16) < base + HUGE_2M and int(n["gpa"], 16) != gpa:
                found = n
                break
            tried.append(n)
    finally:
        for n in tried:
            try:
                agent.call("victim-stop", pid=n["pid"])
            except Exception:  # noqa: BLE001 - it holds a page, nothing more
                pass
    if found is None:
        return {"read": "not made", "why": f"no guest page in the 2 MiB at GPA {base:#x} came to a new "
                                           f"process in {len(tried)} tries (got "
                                           + ", ".join(n["gpa"] for n in tried) + ")"}
    journal_len = len(l2.daemon.journal_records()) if l2.daemon else 0
    console_len = len(l2.vm.console())
    l1log.new_lines()
    out = {"gpa": found["gpa"], "pid": found["pid"]}
    hva = gpa_hva(l2.vm, int(found["gpa"], 16))
    out["hva"] = hex(hva)
    out["host_page"] = host_page(l2.vm.pid, hva)
    agent.call("victim-touch", pid=found["pid"])
    deadline = time.monotonic() + (120 if sc["accel"] == "tcg" else 30)
    read = "no answer"
    while time.monotonic() < deadline:
        if any(PANIC.search(ln) for ln in console_lines(l2.vm, console_len)):
            read = "guest panicked"
            break
        if not l2.vm.alive():
            read = f"QEMU {l2.exit_status()}"
            break
        recs = [r for r in (l2.daemon.journal_records()[journal_len:] if l2.daemon else [])
                if r["type"] == "memory-error" and r["result"] in ("refused", "stopped")]
        if recs:
            read = f"vmced {recs[0]['result']}, VM paused"
            break
        try:
            st = agent.call("victim-status", timeout=5, pid=found["pid"])
        except Exception:  # noqa: BLE001 - a paused or dead guest does not answer
            time.sleep(0.2)
            continue
        if st.get("sigbus"):
            sig = st["sigbus"]
            read = f"SIGBUS {BUS_CODES.get(sig['code'], sig['code'])} lsb {sig.get('lsb')}"
            break
        if st.get("touched"):
            read = "read, no error"
            break
        time.sleep(0.1)
    # a read that took no error leaves its process holding the page
    if read == "read, no error":
        try:
            agent.call("victim-stop", pid=found["pid"])
        except Exception:  # noqa: BLE001
            pass
    out["read"] = read
    out["journal"] = [{k: r.get(k) for k in ("type", "si_code", "lsb", "hva", "gpa", "result", "thread", "detail")}
                      for r in (l2.daemon.journal_records()[journal_len:] if l2.daemon else [])
                      if r.get("source") != "huge-page"]
    out["guest_log"] = [ln for ln in console_lines(l2.vm, console_len) if GUEST_MCE.search(ln)][:10]
    out["l1_memory_failure"] = [ln for ln in l1log.new_lines() if "Memory failure" in ln]
    return out


def file_block(path, offset, size=HUGE_2M):
    """The victim's 2 MiB of the RAM file @path read with read() (pread, 4
    KiB at a time), which signals no one: a poisoned page fails with EIO.
    On hugetlbfs that is the question of the kernel's version: Linux 6.4
    ("hugetlbfs: improve read HWPOISON hugepage", adjust_range_hwpoison())
    reads the healthy subpages of a poisoned huge page, 6.1 fails all of
    it"""
    base, page = offset & ~(size - 1), offset & ~0xfff
    readable, lost = set(), []
    fd = os.open(path, os.O_RDONLY)
    try:
        for off in range(base, base + size, 4096):
            try:
                if len(os.pread(fd, 4096, off)) == 4096:
                    readable.add(off)
                    continue
            except OSError:
                pass
            lost.append(off)
    finally:
        os.close(fd)
    return {"block": hex(base), "victim_page_readable": page in readable,
            "others_readable": len(readable - {page}), "others_lost": len([o for o in lost if o != page])}


def same_as_file(pid, hva, path, offset, size=HUGE_2M):
    """Of the other pages of the 2 MiB around @hva, how many QEMU holds
    byte for byte as the RAM file @path has them: what a salvage kept of
    the guest's data (None where either cannot be read)"""
    base, page = hva & ~(size - 1), hva & ~0xfff
    fbase = offset & ~(size - 1)
    same = 0
    mem = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    ram = os.open(path, os.O_RDONLY)
    try:
        for i in range(size // 4096):
            if base + i * 4096 == page:
                continue
            try:
                same += os.pread(mem, 4096, base + i * 4096) == os.pread(ram, 4096, fbase + i * 4096)
            except OSError:
                pass
    finally:
        os.close(mem)
        os.close(ram)
    return same


def blast_radius(l2, sc, victim, hva, outcome, l1log, offset=None):
    """What else the error took: the host's view of the victim's 2 MiB
    (through QEMU's mapping, and through the RAM file with read()), and a
    guest read of another page of it (after the error's own outcome)"""
    read = None
    if l2.ram and offset is not None and os.path.exists(l2.ram):
        try:
            read = file_block(l2.ram, offset)
        except OSError as e:
            read = {"error": e.strerror}
    if not l2.vm.alive():
        return {"host": None, "file": read, "guest": {"read": "not made", "why": "QEMU is gone"}}
    try:
        host = host_block(l2.vm.pid, hva)
        if l2.ram and offset is not None and os.path.exists(l2.ram):
            host["others_same_as_file"] = same_as_file(l2.vm.pid, hva, l2.ram, offset)
    except OSError as e:
        host = {"error": f"{e.strerror}"}
    if outcome not in ("recovered", "sigbus", "nothing"):
        return {"host": host, "file": read,
                "guest": {"read": "not made", "why": f"the guest after the error: {outcome}"}}
    try:
        guest = guest_neighbour(l2, sc, victim, l1log)
    except Exception as e:  # noqa: BLE001 - recorded: the error's own result stands
        guest = {"read": "not made", "why": f"{type(e).__name__}: {str(e)[:300]}"}
    return {"host": host, "file": read, "guest": guest}


def huge_page_loss(l2, journal_len, sc):
    """vmced's record of a huge page lost under this guest, if the error
    was one, with what became of the pages it told the guest of: waited
    for, as their injection gap paces them (TCG L2: about 30 s for 511)"""
    def records():
        return l2.daemon.journal_records()[journal_len:]
    loss = next((r for r in records() if r["type"] == "huge-page-loss"), None)
    if loss is None:
        return None
    t = time.monotonic()
    limit = 900 if sc["accel"] == "tcg" else 180

    def told():
        return [r for r in records() if r.get("source") == "huge-page" and r.get("about_seq") == loss["about_seq"]
                and r.get("result") != "pending"]
    def salvaged():
        return loss.get("policy") != "salvage" or any(
            r["type"] == "huge-page-salvage" and r.get("about_seq") == loss["about_seq"] for r in records())
    while not salvaged() and time.monotonic() - t < 60 and l2.vm.alive():
        time.sleep(0.2)
    # a fallback to `all` tells the rest: its record says how many
    fallback = next((r for r in records() if r["type"] == "huge-page-salvage" and r.get("fallback")), {})
    while len(told()) < max(loss["told"], fallback.get("told") or 0) and time.monotonic() - t < limit \
            and l2.vm.alive():
        time.sleep(0.5)
    pages = told()
    hit = next((r for r in records() if r.get("seq") == loss["about_seq"]), {})
    # hugepage = salvage: what was kept and lost, or why it fell back
    salvage = next((r for r in records() if r["type"] == "huge-page-salvage"
                    and r.get("about_seq") == loss["about_seq"]), None)
    return {**loss, "salvage": salvage, "hit": {k: hit.get(k) for k in ("si_code", "hva", "lsb", "gpa", "result", "thread")},
            "told_results": {res: sum(1 for r in pages if r["result"] == res) for res in {r["result"] for r in pages}},
            "told_s": round(max((r.get("latency_us") or 0) for r in pages) / 1e6, 1) if pages else None}


def boot_l2(name, sc, q, count):
    """An L2 guest; a KVM one gets a second try. Nested SVM under TCG
    sometimes leaves an L2 that never prints a line (its firmware hangs)
    while the next one boots in seconds: that is the lab's trouble, not
    the scenario's result. @count(): called per boot"""
    count()
    try:
        return L2(name, sc["accel"], sc["forwarder"], q, sc.get("backing", "file"))
    except LabError:
        raise  # QEMU said why it could not start: another try says the same
    except Exception as e:
        if sc["accel"] != "kvm":
            raise
        progress(f"{sc['name']}: the L2 guest did not come up ({str(e).splitlines()[0][:100]}); "
                 "booting another")
        count()
        return L2(name + "-again", sc["accel"], sc["forwarder"], q, sc.get("backing", "file"))


MIGRATION_END = ("completed", "failed", "cancelled")


def l1_has_uffdio_poison():
    """UFFDIO_POISON came in Linux 6.6: what vmced marks a received page
    with where it can (poison-mark.c)"""
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (6, 6)


def migration_expected(accel):
    """(outcome, how the destination marks the page) vmced should give in
    this L1: carried with UFFDIO_POISON where L1's kernel has it; without
    it, carried with PROT_NONE under TCG, refused before anything moves
    under KVM (a KVM vCPU reads guest RAM through no protection)"""
    if l1_has_uffdio_poison():
        return "carried", "UFFDIO_POISON"
    return ("refused", None) if accel == "kvm" else ("carried", "PROT_NONE")


def start_destination(l2):
    """A second QEMU with the source's command line and -incoming defer
    (its own RAM file), attached to the source's vmced"""
    work = os.path.join("/run/vmce/lab", l2.name)
    ram = os.path.join(SHM, f"{l2.name}-dst.ram")
    dst = Vm.start(l2.name, mem=f"{l2.mem_mb}M", accel=l2.accel, cpu_model=l2.cpu_model,
                   qemu=l2.qemu["binary"], state_dir=os.path.join(work, "dst"), mem_file=ram,
                   incoming_uri="defer")
    deadline = time.monotonic() + 60
    while not os.path.exists(dst.vmced_qmp_path):
        # (its exit, not alive(): a QEMU started through a script names
        # its guest in /proc a moment after it starts)
        if dst._proc.poll() is not None or time.monotonic() > deadline:
            raise LabError(f"the destination QEMU did not come up (exit {dst._proc.poll()}): "
                           f"{dst.qemu_log().strip()[-300:]}")
        time.sleep(0.1)
    time.sleep(0.2)
    name = f"{l2.name}-dst"
    l2.daemon.ctl("attach", "--pid", str(dst.pid), "--qmp", dst.vmced_qmp_path, "--name", name,
                  "--agent", dst.vmced_agent_path)
    l2.daemon.wait_attached(name, 120)
    return dst, name, ram


def run_migration(src, dst, sock, timeout):
    """migrate-incoming on @dst, migrate on @src: (final status, s it took,
    QEMU's own query-migrate at the end)"""
    with dst.qmp() as q:
        q.execute("migrate-incoming", uri=f"unix:{sock}")
    t0 = time.monotonic()
    with src.qmp() as q:
        q.execute("migrate", uri=f"unix:{sock}")
        while True:
            info = q.execute("query-migrate")
            if info.get("status") in MIGRATION_END or time.monotonic() - t0 > timeout:
                return info.get("status"), time.monotonic() - t0, info
            time.sleep(0.1)


def no_thread_stopped(vm):
    return vm.alive() and "t" not in thread_states(vm.pid).values()


def journal_of(l2, since, vm, action):
    return [r for r in l2.daemon.journal_records()[since:]
            if r.get("type") == "migration" and r.get("vm") == vm and r.get("action") == action]


def wait_journal(l2, since, vm, action, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        recs = journal_of(l2, since, vm, action)
        if recs or time.monotonic() > deadline:
            return recs
        time.sleep(0.2)


def migrate_after(l2, sc, victim, result):
    """The scenario's `migrate`: after the real AO (the victim killed
    early), the guest live-migrates to a second QEMU in L1 that the same
    vmced watches; what test_migrate asserts is checked on the
    destination, or, where vmced must refuse, that it did before anything
    moved. result["migration"]: the outcome, the expected one, the figures
    and each check"""
    want, want_how = migration_expected(sc["accel"])
    mig = result["migration"] = {"expected": want, "expected_how": want_how, "checks": []}
    if result["outcome"] != "recovered":
        mig["outcome"] = "not tried"
        mig["detail"] = f"the error's outcome was {result['outcome']}, not recovered"
        return
    agent, gpa = l2.vm.agent, int(victim["gpa"], 16)
    before = {"hc": agent.hardware_corrupted_kb(),
              "victim": agent.call("victim-status", pid=victim["pid"])}
    since = len(l2.daemon.journal_records())
    log_len = len(l2.daemon.log_text())
    progress(f"{sc['name']}: a second QEMU with -incoming defer, attached to the same vmced")
    dst, name, ram = start_destination(l2)
    try:
        progress(f"{sc['name']}: migrating {l2.name} to {name} (expected: {want}"
                 + (f", marked by {want_how})" if want_how else ")"))
        status, took, info = run_migration(l2.vm, dst, os.path.join("/run/vmce/lab", l2.name, "m.sock"),
                                           900 if sc["accel"] == "tcg" else 300)
        mig.update(status=status, took_s=round(took, 1), total_time_ms=info.get("total-time"),
                   downtime_ms=info.get("downtime"), destination=name)
        progress(f"{sc['name']}: the migration {status} in {took:.1f} s")
        if status == "completed":
            carried_checks(l2, sc, victim, gpa, before, since, dst, name, mig, want_how)
        else:
            refused_checks(l2, gpa, before, since, log_len, dst, name, mig, status)
        mig["passed"] = mig["outcome"] == want and all(c["ok"] for c in mig["checks"])
    finally:
        mig["journal"] = [r for r in l2.daemon.journal_records()[since:]
                          if r.get("type") in ("migration", "page-replaced")]
        dst.stop()
        try:
            os.unlink(ram)
        except FileNotFoundError:
            pass
        # the source is left paused, or ran a refused migration: not reused
        l2.healthy = False


def carried_checks(l2, sc, victim, gpa, before, since, dst, name, mig, want_how):
    """test_migrate's case_carry, on a real host error"""
    def check(what, ok, diag=None):
        mig["checks"].append(dict(check=what, ok=bool(ok), **({} if ok or diag is None else {"diag": diag})))
    src_name = l2.name
    check("the migration completed", True)
    handing = journal_of(l2, since, src_name, "handing-over")
    got = {int(p, 16) for r in handing for p in r.get("pages", [])}
    check("source: its journal hands the page over", gpa in got, sorted(map(hex, got)))
    handed = wait_journal(l2, since, src_name, "handed-over") or [{}]
    check("source: handed-over names the destination", handed[0].get("destination") == name, handed[0])
    lent = [r for r in l2.daemon.journal_records()[since:]
            if r.get("type") == "page-replaced" and r.get("vm") == src_name and r.get("lent_to_migration")]
    mig.update(lent=len(lent), lent_held_us=handed[0].get("lent_held_us"))
    check("source: the migration read the page as a zeroed page lent with the vCPUs held, poisoned again",
          lent and all(r.get("still_poisoned") for r in lent), lent)
    received = wait_journal(l2, since, name, "received", 60) or [{}]
    r = received[0]
    mig.update(marked=r.get("marked"), how=r.get("how"), paused_us=r.get("paused_us"))
    mig["outcome"] = "carried" if r.get("marked") else "not marked"
    check("destination: the journal says the page was received and poisoned before its vCPUs ran",
          r.get("marked") == 1 and {int(p["gpa"], 16) for p in r.get("pages", [])} == {gpa}, r)
    check(f"destination: marked with {want_how}", (r.get("how") or "").startswith(want_how or "?"), r.get("how"))
    dst.wait_ready(600 if sc["accel"] == "tcg" else 60)
    hva = gpa_hva(dst, gpa)
    mig["dst_hva"] = hex(hva)
    check("destination: the page is unreadable in its QEMU (process_vm_readv)", not process_reads(dst.pid, hva))
    info = l2.daemon.ctl_json("vm", name)
    known = {int(p["gpa"], 16): p for p in info["poisoned"]}
    check("destination: vmcectl vm lists the page, migrated", gpa in known and known[gpa].get("migrated"),
          info["poisoned"])
    hc = dst.agent.hardware_corrupted_kb()
    mig["hardware_corrupted_kb"] = {"source": before["hc"], "destination": hc}
    check("destination: the guest's HardwareCorrupted unchanged", hc == before["hc"], mig["hardware_corrupted_kb"])
    st = dst.agent.call("victim-status", pid=victim["pid"])
    was = before["victim"]
    check("destination: the victim as it was, dead of BUS_MCEERR_AO",
          not st.get("alive") and not was.get("alive") and (st.get("sigbus") or {}).get("code") == 5, st)
    check("both QEMUs alive, no thread left stopped", no_thread_stopped(l2.vm) and no_thread_stopped(dst),
          {"src": thread_states(l2.vm.pid), "dst": thread_states(dst.pid)})


def refused_checks(l2, gpa, before, since, log_len, dst, name, mig, status):
    """Refused before anything moved: the journal's one record, one line in
    vmced's log, the source running on with its page as it was"""
    def check(what, ok, diag=None):
        mig["checks"].append(dict(check=what, ok=bool(ok), **({} if ok or diag is None else {"diag": diag})))
    refused = wait_journal(l2, since, l2.name, "refused", 20)
    mig["outcome"] = "refused" if status == "cancelled" and refused else status
    mig["detail"] = refused[0].get("detail") if refused else None
    check("vmced cancelled the migration", status == "cancelled", status)
    check("source: the journal says refused, once, naming UFFDIO_POISON",
          len(refused) == 1 and "UFFDIO_POISON" in (refused[0].get("detail") or ""), refused)
    lines = [ln for ln in l2.daemon.log_text()[log_len:].splitlines() if "migration refused" in ln]
    check("one line in vmced's log", len(lines) == 1, lines)
    check("nothing handed over, nothing received",
          not journal_of(l2, since, l2.name, "handing-over") and not journal_of(l2, since, name, "received"))
    with l2.vm.qmp() as q:
        vm_status = q.execute("query-status")["status"]
    check("source: its guest runs on", vm_status == "running", vm_status)
    check("source: the page still unreadable in its QEMU", not process_reads(l2.vm.pid, gpa_hva(l2.vm, gpa)))
    hc = l2.vm.agent.hardware_corrupted_kb()
    check("source: HardwareCorrupted unchanged", hc == before["hc"], hc)
    # the destination's load fails when the source cancels, and QEMU
    # ends a failed incoming migration itself: it may be exiting
    deadline = time.monotonic() + 10
    while dst._proc.poll() is None and time.monotonic() < deadline and \
            "Z" in thread_states(dst.pid).values():
        time.sleep(0.2)
    mig["destination_end"] = {"exit": dst._proc.poll(), "qemu_log": dst.qemu_log().strip().splitlines()[-3:]}
    check("source: QEMU alive, no thread left stopped; destination: none left stopped (alive, or ended by "
          "QEMU itself when its load failed)", no_thread_stopped(l2.vm) and "t" not in thread_states(dst.pid).values(),
          {"src": thread_states(l2.vm.pid), "dst": thread_states(dst.pid), "dst_end": mig["destination_end"]})


def run_overhead(o, qemu):
    """What vmced attached costs a 2-vCPU L2 guest (vmcelab.overhead), with
    L1's real KVM: SIG_IPI kicks of KVM vCPUs are signals vmced's tracing
    sees, which TCG has none of"""
    name = "l2-overhead"
    work = os.path.join("/run/vmce/lab", name)
    progress(f"overhead: booting a 2-vCPU {o['accel']} L2 guest")
    vm = Vm.start(name, mem="512M", cpus=2, accel=o["accel"], qemu=qemu,
                  cpu_model="EPYC" if o["accel"] == "kvm" else "Skylake-Client",
                  state_dir=os.path.join(work, "vm"), disk=labcampaign.l2_disk() or False)
    try:
        vm.wait_ready(timeout=600 if o["accel"] == "tcg" else 120)
        try:
            vm.agent.call("disk-up")
        except Exception as e:  # noqa: BLE001 - the io row says why
            progress(f"overhead: no data disk in L2: {e}")
        progress(f"overhead: {o['rounds']} x {o['ms']} ms runs per workload and side")
        emit("overhead", accel=o["accel"], results=overhead.measure(vm, name, work, rounds=o["rounds"],
                                                                    ms=o["ms"]))
    finally:
        vm.stop()


def link_known(qemus_):
    """The QEMUs staged under /opt/qemus are also where qemus.py looks for
    them by name (a campaign in L1 may name one): /usr/bin for debian-7.2,
    $VMCE_BUILD_DIR/qemus/NAME/... for the others"""
    for q in qemus_:
        known = qemus_mod.KNOWN.get(q.get("name"))
        if known is None:
            continue
        where = known.locate()
        if os.path.realpath(where) == os.path.realpath(q["binary"]):
            continue
        os.makedirs(os.path.dirname(where), exist_ok=True)
        if os.path.lexists(where):
            os.unlink(where)
        os.symlink(q["binary"], where)


def scenario_name(sc):
    return (f"{sc['accel']}-{sc['kind']}-{sc['forwarder']}"
            + (f"-{sc['policy']}" if sc.get("policy") else "")
            + (f"-{sc['backing']}" if sc.get("backing", "file") != "file" else "")
            + (f"-hugepage-{sc['hugepage']}" if sc.get("hugepage") else "")
            + (f"-then-{sc['then']}" if sc.get("then") else "")
            + ("-migrate" if sc.get("migrate") else ""))


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    l1_environment()
    qemus_ = l1_qemus(spec)
    qemu = qemus_[0]["binary"]
    if spec.get("campaign"):
        # by name when qemus.py knows it (link_known put it where the name
        # says): the campaign's records and report name it so
        first = qemus_[0]
        labcampaign.run(spec["campaign"], first["name"] if first.get("name") and not first.get("nearest")
                        else qemu)
    elif spec.get("overhead"):
        run_overhead(spec["overhead"], qemu)
    else:
        stop = threading.Event()
        threading.Thread(target=heartbeat, args=(stop,), daemon=True).start()
        run_scenarios(spec["scenarios"], qemus_, spec.get("kvm_boots"))
    emit("done")


def l1_environment():
    """Where L1's image has vmce's build, tools and the L2 guest"""
    os.environ.setdefault("VMCE_BUILD_DIR", "/run/vmce/build")
    os.environ.setdefault("VMCE_STATE_DIR", "/run/vmce/vms")
    os.environ.setdefault("VMCE_VMCED", "/usr/sbin/vmced")
    os.environ.setdefault("VMCE_VMCECTL", "/usr/bin/vmcectl")
    os.environ.setdefault("VMCE_INITRD", next(p for p in ("/lab/l2/guest.cpio", "/lab/l2/guest.cpio.gz")
                                              if os.path.exists(p)))
    if "VMCE_KERNEL" not in os.environ:
        os.environ["VMCE_KERNEL"] = next(p for p in ("/lab/l2/vmlinux", "/lab/l2/vmlinuz", "/lab/l2/Image")
                                         if os.path.exists(p))


def l1_qemus(spec):
    """The QEMUs staged in L1, each asked its version here (one that does
    not run in L1, a library missing, says so), and the host record that
    names them"""
    qemus_ = spec.get("qemus") or [{"slug": "default", "name": None, "binary": spec.get("qemu") or qemus_mod.binary()}]
    link_known(qemus_)
    for q in qemus_:
        q["l1_version"] = qemus_mod.version_line(q["binary"])
    with open("/proc/cpuinfo") as f:
        vendor = next((ln.split(":")[1].strip() for ln in f if ln.startswith("vendor_id")), "?")
    emit("host", kernel=os.uname().release, cpu_vendor=vendor, kvm=os.path.exists("/dev/kvm"),
         rasdaemon=rasdaemon.state(), memory_failure_trace=rasdaemon.trace_on(),
         qemu=qemus_[0]["l1_version"] or "?",
         qemus=[{"slug": q["slug"], "name": q.get("name"), "binary": q["binary"], "version": q["l1_version"]}
                for q in qemus_])
    return qemus_


def run_scenarios(scenarios, qemus_, kvm_max):
    """Each scenario on an L2 guest, booted anew where the one before
    cannot serve; at @kvm_max KVM guests booted (a reboot counts) the rest
    is left to a fresh L1"""
    by_slug = {q["slug"]: q for q in qemus_}
    l1log = L1Log()
    l2 = None
    kvm_boots = [0]

    def count():
        kvm_boots[0] += 1
    for i, sc in enumerate(scenarios):
        sc.setdefault("name", scenario_name(sc))
        sc.setdefault("qemu", qemus_[0]["slug"])
        q = by_slug[sc["qemu"]]
        if l2 is not None and not l2.usable_for(sc):
            l2.stop()
            l2 = None
        if sc["accel"] == "kvm" and kvm_max and kvm_boots[0]:
            need = (l2 is None) + (sc.get("then") == "reboot")
            if kvm_boots[0] + need > kvm_max:
                progress(f"this L1 has booted {kvm_boots[0]} KVM guest(s): a fresh L1 for the "
                         f"{len(scenarios) - i} scenario(s) left")
                emit("retire", next=i, kvm_boots=kvm_boots[0])
                break
        try:
            if q.get("l1_version") is None:
                raise LabError(f"QEMU {q.get('name') or q['binary']} does not run in L1 "
                               f"({q['binary']} --version failed)")
            if l2 is None:
                progress(f"{sc['name']}: booting an L2 guest ({sc['accel']}, QEMU {q.get('name') or q['slug']}, "
                         f"forwarder {sc['forwarder']})")
                l2 = boot_l2(f"l2-{i}", sc, q, count if sc["accel"] == "kvm" else (lambda: None))
                progress(f"{sc['name']}: L2 ready in {l2.boot_s:.1f} s")
            elif l2.forwarder != sc["forwarder"]:
                l2.detach_vmced(sc["name"])
                progress(f"{sc['name']}: vmced detached from {l2.name}: QEMU on its own from here")
            if sc["accel"] == "kvm" and sc.get("then") == "reboot":
                count()
            emit("result", **run_scenario(sc, l2, l1log))
        except LabNotRun as e:
            progress(f"{sc['name']}: not run: {e}")
            emit("result", scenario=sc, qemu=qemu_record(q), outcome="not run", detail=str(e)[:2000])
        except Exception as e:
            detail = str(e) if isinstance(e, LabError) else f"{type(e).__name__}: {e}"
            emit("result", scenario=sc, qemu=qemu_record(q), outcome="error", detail=detail[:2000])
            if l2 is not None and not isinstance(e, LabInputError):
                l2.healthy = False
    if l2 is not None:
        l2.stop()


if __name__ == "__main__":
    main()
