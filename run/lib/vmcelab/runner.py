"""Running a campaign: guests booted once and reused, one case after another
(or several guests side by side), each case's evidence collected, judged
and appended to results.jsonl as it finishes.
"""
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time

from . import paths
from . import qga
from .agent import AgentError
from .daemon import Vmced
from .expect import ENDING, MERGE_LIVES, NO_HANDLER, NOT_APPLICABLE, PANIC_ON_UNRECOVERABLE, expectation, judge
from .outcome import GuestLog, kernel_crash, parse_tap
from .qemus import amd_cpu
from .vm import Vm

ACTION_TIMEOUT_S = 30
# images/init's word when vmce-agent dies
AGENT_DIED = re.compile(r"vmce-agent on \S+ exited with status")
SIGNAL_TIMEOUT_S = 10
SHM = "/dev/shm"


def slow(seconds):
    """A timeout, stretched where everything is slower: in a guest of a
    guest (the host lab's L1 under TCG sets VMCE_TIME_SCALE)"""
    return seconds * float(os.environ.get("VMCE_TIME_SCALE", "1"))


def _ends_guest(case):
    """The case leaves its guest unusable: QEMU dies, the guest panics, or
    a poisoned page the guest's kernel still uses (an error it was never
    told of, untold or refused: its next touch of the page resets it, or,
    an Arm64 guest's, pauses it)"""
    exp = expectation(case)
    return bool(exp and (exp.guest in ("panic", "oops", "qemu-died", "untold", "refused")
                         or exp.aftermath in ENDING))


def _not_applicable(case, exp, booted=False):
    """@exp says @case asks what its kernel does not have, and the kernel is
    known: an image that learns its kernel at its first boot is known once
    @booted"""
    if exp is None or exp.guest != NOT_APPLICABLE:
        return False
    info = case.kernel_info
    return booted or not (getattr(info, "kind", None) == "image" and info.release is None)


def _count(items):
    counts = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts


def _node_delta(before, after):
    """How much each /sys/devices/system/node/nodeN/memory_failure counter
    grew, summed over the nodes; None on a kernel without them"""
    if not before or not after:
        return None
    delta = {}
    for node, counters in after.items():
        for name, value in counters.items():
            delta[name] = delta.get(name, 0) + value - (before.get(node) or {}).get(name, 0)
    return delta


def case_record(case, expected, obs, not_run, start, end, vm=None, boot=None):
    """A case's line in results.jsonl, judged"""
    verdict, reasons = judge(case, expected, obs, not_run)
    return {"type": "case", "case": case.to_dict(), "vm": vm, "boot": boot,
            "expected": expected.to_dict() if expected else None, "observed": obs,
            "verdict": verdict, "reasons": reasons, "not_run": not_run, "start": start, "end": end}


class NotRun(Exception):
    """The case cannot be set up here; the reason goes in the report"""


def qemu_identity(qemu):
    """Which QEMU binary, exactly: its path, what it says it is, and when
    it was built"""
    if qemu is None:
        return None
    try:
        built = os.stat(qemu.binary).st_mtime_ns
    except OSError:
        built = None
    return (qemu.binary, qemu.version_line, built)


class GuestVm:
    """One booted guest, attached to the campaign's vmced, reused while it
    is fit for the next case. Before a case that will leave it unusable (a
    panic is the expected result) a spare guest boots in the background, so
    that the next case need not wait for a boot."""

    def __init__(self, spec, slot, workdir, daemon, timeline, restore=False, ram_file=False):
        self.spec, self.slot, self.workdir = spec, slot, workdir
        # ram_file: guest RAM is a shared file in /dev/shm, so that a real
        # host error can be put in it (inject = host-real)
        self.ram_file = ram_file
        self.daemon, self.timeline = daemon, timeline
        # restore: the first boot is saved as a template (QEMU migration to
        # a file) and every later guest is a copy of it, loaded in a fraction
        # of a boot
        self.restore = restore
        self.template = None  # (path, the QEMU that saved it: qemu_identity())
        self.boots = 0  # guests started, the spares too
        self.current = 0  # which of them runs the cases now
        self.vm = None
        self.poisoned = 0
        self.dead = None  # why it cannot be used any more
        self.unbootable = None  # why it did not boot
        self.spare = None  # (thread, {"vm": Vm, "boot": N} or {"error": e, "boot": N})

    @property
    def name(self):
        return f"{self.spec.name}-{self.slot}"

    def _template(self):
        """The saved first boot to restore a guest from, or None: never one
        another QEMU saved (a migration stream is QEMU's own, version to
        version, and a copy must run under the QEMU the case asks for)"""
        if not self.restore or self.template is None:
            return None
        path, saved_by = self.template
        return path if saved_by == qemu_identity(self.spec.qemu) else None

    def _boot_new(self, n, spare):
        """A guest ready for cases: booted (or restored), set up, attached to vmced"""
        t = time.time()
        kernel, qemu = self.spec.kernel, self.spec.qemu
        image = kernel if self.spec.image else None
        # an image's guest writes to its root disk as it boots: a copy of
        # its saved RAM would not match the fresh disk a copy gets
        restore = self.restore and image is None
        template = self._template() if restore else None
        # a template's disk stays untouched (each copy gets the pristine
        # image): the guest mounts it once it runs as itself
        later = restore and self.spec.disk
        vm = Vm.start(f"{self.name}.{n}", mem=self.spec.mem, cpus=self.spec.cpus,
                      accel=self.spec.accel, kernel=kernel.image if kernel else None,
                      initrd=kernel.initrd if kernel else None, state_dir=os.path.join(self.workdir, f"{self.name}.{n}"),
                      disk=self.spec.disk, append="vmce.disk=later" if later else "",
                      incoming=template, qemu=qemu.binary if qemu else None,
                      cpu_model=self.spec.cpu, image=image,
                      firmware=self.spec.firmware, disk_bus=self.spec.disk_bus, arch=self.spec.arch,
                      mem_file=os.path.join(SHM, f"vmce-{self.name}.{n}.ram") if self.ram_file else None)
        try:
            if template:
                vm.resume()
                vm.wait_ready(timeout=slow(60))
            else:
                vm.wait_ready(timeout=slow(180))
                self._set_up(vm)
                if restore:
                    path = os.path.join(self.workdir, f"{self.name}.template")
                    vm.save_state(path)
                    self.template = (path, qemu_identity(qemu))
            if later:
                vm.agent.call("disk-up")
            # an image has no port for vmced's own agent connection
            agent = ["--agent", vm.vmced_agent_path] if image is None else []
            self.daemon.ctl("attach", "--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path,
                            "--name", vm.name, *agent)
        except Exception as e:
            said = [] if vm.alive() else vm.qemu_log().strip().splitlines()
            self._stop_vm(vm)  # a guest that did not come up is not left behind
            if said:  # QEMU's own last word says more than a closed socket
                raise RuntimeError(f"QEMU exited: {said[-1]}") from e
            raise
        # an image's boot: QEMU's start to qga's first answer, and to vmce's
        # tools in and listening (run/hostlab --images prints them)
        qga_s = getattr(vm.agent, "answered_s", None) if image is not None else None
        self.timeline.append(dict(vm=self.name, event="boot", start=t, end=time.time(), boot=n,
                                  spare=spare, restored=bool(template),
                                  **({"qga_s": qga_s, "ready_s": vm.ready_seconds} if qga_s is not None else {})))
        return vm

    def _set_up(self, vm):
        agent = vm.agent
        if self.spec.image:
            self._learn(vm)
            if self.spec.disk:
                # the page-cache cases' files, on the image's own file system
                agent.call("disk-up", dir=qga.DATA_DIR)
        if amd_cpu(self.spec.cpu):
            # an AMD guest learns of a deferred error (an AO) only when it
            # polls its banks, every 5 minutes by default (QEMU raises no
            # deferred-error interrupt): every second, as the host lab's own
            # KVM guests do, or the case's window ends first
            try:
                agent.call("sysfs", path="/sys/devices/system/machinecheck/machinecheck0/check_interval",
                           value=1)
            except AgentError:
                # a kernel without CONFIG_X86_MCE (Debian's cloud kernel)
                # has no machine check device: nothing polls, nothing to set
                if getattr(self.spec.kernel, "table", None) != NO_HANDLER:
                    raise
        if self.spec.hugepages:
            agent.call("sysctl", name="vm.nr_hugepages", value=self.spec.hugepages)
        if self.spec.ksm:
            # scanning fast, but only during KSM cases (CaseRun): under TCG
            # a busy ksmd slows every other case down
            agent.call("sysfs", path="/sys/kernel/mm/ksm/sleep_millisecs", value=10)
            agent.call("sysfs", path="/sys/kernel/mm/ksm/pages_to_scan", value=1000)
        # a dirty page-cache page stays dirty until its case is over: no
        # periodic writeback (it made pagecache-dirty "clean" in the host
        # lab, where a case takes long enough for the flusher to come by).
        # An hour, not 0: 0 also makes the flusher run at once whenever a
        # disk's first inode is dirtied (wb_wakeup_delayed() waits
        # interval * 10 ms), and on a disk just mounted, with next to no
        # writeback of its own yet, wb_over_bg_thresh() can find its share
        # of the background threshold under one page: the flusher
        # wrote the workload's page back before it was looked at
        # (pagecache-dirty "not run" in 2 of 60 first writes on a fresh disk, and
        # once in make check; 0 of 100 with an hour)
        agent.call("sysctl", name="vm.dirty_writeback_centisecs", value=360000)
        try:
            agent.call("trace-mf", on="1")
        except AgentError:
            # an operator's kernel may have no tracefs, and one without the
            # handler has no memory_failure_event: the log says it all
            if not (self.spec.image or self.spec.kernel.table == NO_HANDLER):
                raise

    def _learn(self, vm):
        """What the image's kernel is, once it runs: which expectations judge
        it (a PATH image's is unknown until now)"""
        image = self.spec.kernel
        if getattr(vm.agent, "info", None) and vm.agent.info.get("os"):
            image.meta.setdefault("os", vm.agent.info["os"])
        if image.release is not None:
            return
        release = vm.agent.call("ping")["release"]
        image.learn(release, vm.agent.read_file(f"/boot/config-{release}"))

    def _adopt(self, vm, n):
        self.vm, self.poisoned, self.dead, self.current = vm, 0, None, n

    def prepare_spare(self):
        if self.spare is not None:
            return
        self.boots += 1
        box = {"boot": self.boots}

        def boot():
            try:
                box["vm"] = self._boot_new(box["boot"], True)
            except Exception as e:  # handed to whoever takes the spare
                box["error"] = e
        thread = threading.Thread(target=boot, daemon=True)
        thread.start()
        self.spare = (thread, box)

    def replace(self, use_spare=True):
        """The next guest: the spare if one is booting, else a new boot.
        Returns the seconds the caller waited for it."""
        t = time.monotonic()
        self.stop()
        if self.spare is not None and use_spare:
            thread, box = self.spare
            self.spare = None
            thread.join()
            if "vm" in box:
                self._adopt(box["vm"], box["boot"])
                return time.monotonic() - t
        self.boots += 1
        try:
            self._adopt(self._boot_new(self.boots, False), self.boots)
        except Exception as e:
            # nor booted again for every case that needs it; a guest qga
            # cannot drive booted, and says why itself
            drive = isinstance(e, qga.QgaError) and e.kind in ("no-agent", "refused", "no-tmpfs")
            self.unbootable = ("" if drive else "the guest did not boot: ") + str(e).splitlines()[0]
            raise
        return time.monotonic() - t

    def fit(self, max_poisoned):
        return (self.vm is not None and self.dead is None and self.vm.alive()
                and self.poisoned < max_poisoned)

    def stop(self):
        if self.vm is None:
            return
        if self.vm.alive():
            self.daemon.ctl("detach", self.vm.name, check=False)
        self._stop_vm(self.vm)
        self.vm = None

    @staticmethod
    def _stop_vm(vm):
        vm.stop()
        if vm.mem_file:
            try:
                os.unlink(vm.mem_file)
            except FileNotFoundError:
                pass

    def close(self):
        self.stop()
        if self.spare is not None:
            thread, box = self.spare
            self.spare = None
            thread.join()
            if "vm" in box:
                self.vm = box["vm"]
                self.stop()


def _wait(cond, timeout, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


class CaseRun:
    """One case on one guest: set up, inject, watch, collect"""

    def __init__(self, case, gvm, daemon, exp):
        self.case, self.gvm, self.daemon, self.exp = case, gvm, daemon, exp
        self.vm = gvm.vm
        self.agent = gvm.vm.agent
        self.no_handler = bool(exp and exp.table == NO_HANDLER)

    def set_up(self):
        case, agent = self.case, self.agent
        early = case.kill in ("early", "prctl-early")
        # prctl-* set the opposite system-wide: the process's own choice must win
        sysctl_early = early if not case.kill.startswith("prctl") else not early
        # a kernel without the handler has neither sysctl: nothing to choose
        if not self.no_handler:
            agent.call("sysctl", name="vm.memory_failure_early_kill", value=int(sysctl_early))
            agent.call("sysctl", name="vm.memory_failure_recovery", value=case.recovery)
        # set for every case on a kernel that has it (a reused guest keeps
        # it), and asked of another only by a case that wants it: there the
        # agent's "cannot open" is why the case is not run
        if self.exp and (self.exp.table in PANIC_ON_UNRECOVERABLE and not self.exp.nearest
                         or case.panic_on_unrecoverable):
            try:
                agent.call("sysctl", name="vm.panic_on_unrecoverable_memory_failure",
                           value=case.panic_on_unrecoverable)
            except AgentError as e:
                if not case.panic_on_unrecoverable:
                    raise
                raise NotRun(str(e).splitlines()[0]) from None
        if case.page == "ksm" and self.gvm.spec.ksm:
            agent.call("sysfs", path="/sys/kernel/mm/ksm/run", value=1)
        args = {"type": case.page}
        if case.kill.startswith("prctl"):
            args["prctl"] = "early" if early else "late"
        workloads = []
        for _ in range(case.burst):
            try:
                info = agent.call("pages-start", **args)
            except AgentError as e:
                for w in workloads:  # the guest stays fit for the next case
                    agent.call("pages-stop", pid=w["pid"])
                if "NotSupported" in str(e):
                    raise NotRun(str(e).split(": ", 1)[-1]) from None
                raise
            info["pfn_int"] = int(info["pfn"], 16)
            info["gpa_int"] = int(info["gpa"], 16)
            workloads.append(info)
        return workloads

    def inject(self, w):
        """One error on workload @w's page; returns vmced's record if host-side"""
        case, agent = self.case, self.agent
        if case.inject == "host-real":
            return self._poison_host(w)
        if case.inject == "host":
            if case.kind == "ar" and w.get("va") not in (None, "0x0"):
                # consumed: the host page goes away, and the process's touch
                # is the vCPU access that brings the AR
                armed_before = self._armed()
                proc = subprocess.Popen([*self.daemon.ctl_argv(), "--json",
                                         "poison", self.vm.name, "--gpa", w["gpa"], "--kind", "ar",
                                         "--trigger", "access", "--timeout", "20"],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                # touched before vmced has taken the page away, it would read fine
                _wait(lambda: self._armed() > armed_before or proc.poll() is not None, 5, 0.01)
                self.t_consumed = time.monotonic()
                if self.exp and self.exp.guest == "refused":
                    # vmced refuses it and pauses the VM (the vCPU would
                    # fault on the page again and again): no answer comes
                    self.agent.send("pages-touch", pid=w["pid"], only=1)
                else:
                    self._touch(w)
                out, err = proc.communicate(timeout=60)
                return json.loads(out) if out.startswith("{") else {"error": err.strip()}
            trigger = ["--trigger", "now"] if case.kind == "ar" else []
            return self.daemon.poison(self.vm.name, "--gpa", w["gpa"], "--kind", case.kind, *trigger)
        method = case.inject.split("-", 1)[1]
        if method == "madvise":
            return {"agent": agent.call("inject", method="madvise", pid=w["pid"])}
        if method == "corrupt-pfn":
            return {"agent": agent.call("inject", method="corrupt-pfn", pfn=w["pfn"])}
        return {"agent": agent.call("inject", method="mce-inject", pfn=w["pfn"], kind=case.kind)}

    def _poison_host(self, w):
        """A real host memory error: the host kernel's memory_failure() on
        the page of the guest's RAM file behind the workload's GPA. It
        unmaps the page from QEMU and sends QEMU the real SIGBUS, which
        vmced catches and forwards. For a consumed error, vmced lets the
        early AO go by (policy ignore-ao) and the process's touch is the
        vCPU access that brings the AR."""
        case, vm = self.case, self.vm
        offset, hva = vm.ram_file_offset(int(w["gpa"], 16))
        journal_len = len(self.daemon.journal_records())
        ar = case.kind == "ar"
        # (with forwarder = qemu, vmced passes it on: _run() set policy
        # pass; the file refuses a consumed one, which needs ignore-ao)
        if ar:
            self.daemon.ctl("policy", vm.name, "ignore-ao")
        try:
            res = subprocess.run([paths.poisoner(), "file", vm.mem_file, hex(offset)],
                                 capture_output=True, text=True, timeout=60)
            if res.returncode != 0:
                raise RuntimeError(f"vmce-poison: {res.stderr.strip()}")
            poisoned = json.loads(res.stdout)
            if ar:
                self.t_consumed = time.monotonic()
                self._touch(w)
            # vmced's word on the signal it caught, whichever it was
            want = "BUS_MCEERR_AR" if ar else "BUS_MCEERR_AO"
            rec = _wait(lambda: next((r for r in self.daemon.journal_records()[journal_len:]
                                      if r.get("type") == "memory-error" and r.get("si_code") == want),
                                     None), slow(SIGNAL_TIMEOUT_S))
        finally:
            if ar:
                self.daemon.ctl("policy", vm.name, "forward", check=False)
        return {"host": {"hva": hex(hva), "file_offset": hex(offset), **poisoned}, "vmced": rec}

    def _touch(self, w):
        """The process reads its page: the access that consumes the error.
        QEMU may die of it (forwarder = qemu), or the guest reset (no
        handler), and that is the case's outcome"""
        try:
            self.agent.call("pages-touch", pid=w["pid"], only=1)
        except AgentError as e:
            # an image's qga already knows (its console shows the new
            # boot); a reset under KVM in the host lab's L1 shows there
            # later than the 5 s a guest here takes
            if getattr(e, "kind", None) != "reset" and not self._went_down(slow(5)):
                raise

    def _went_down(self, grace=5):
        """The agent's connection closed: whether QEMU died, the guest
        reset, or its kernel panicked (run() set agent.alive: a consumed
        error with recovery off panics the guest under the touch). A QEMU
        killed by its own SIGBUS closes its sockets before it is a zombie,
        and stays one until vmced, its tracer, has reaped it: the answer may
        take a moment (seen: one run in five)"""
        gone = self.agent.alive
        return bool(_wait(lambda: not self.vm.alive() or self.reset() or (gone is not None and not gone()),
                          grace, 0.05))

    def reset(self):
        """The guest restarted during the case (where a kernel without a
        handler is sent a machine check): how that is known, or None"""
        return self.vm.restarted(self.reset_mark)

    def _after_reset(self):
        """What the next boot meets: whether it comes up (vmced has replaced
        the poisoned page by then), and how long it took; a guest that did
        is set up again, and fit for the next case"""
        t = time.monotonic()
        try:
            self.vm.wait_ready(timeout=slow(180))
            self.gvm._set_up(self.vm)
        except (AgentError, OSError) as e:
            return {"booted": False, "why": str(e).splitlines()[0]}
        self.agent = self.vm.agent
        self.gvm.poisoned = 0
        return {"booted": True, "seconds": round(time.monotonic() - t, 1)}

    def run(self):
        console_len = len(self.vm.console())
        self.reset_mark = self.vm.reset_mark()

        def guest_alive():
            # a panic, not any BUG: an oops leaves a guest that still answers,
            # unless it killed vmce's agent (an Arm64 guest's SEA in kernel
            # mode in the agent's own kmalloc(): init restarts it, and this
            # connection is gone)
            console = self.vm.console()[console_len:]
            log = GuestLog(console.splitlines())
            return self.vm.alive() and not log.panics and not self.reset() and not AGENT_DIED.search(console)
        # the bad page may be read by the guest's kernel at any moment of the
        # case: then no call waits for an answer that will not come
        self.agent.alive = guest_alive
        try:
            if self.exp and self.exp.selftest:
                return self._run_selftest(console_len)
            return self._run(console_len)
        finally:
            self.agent.alive = None

    def _run_selftest(self, console_len):
        """A kernel selftest of vmce's series, run as it is: it makes its
        own errors; its TAP results and the kernel's log are the evidence"""
        program = self.exp.selftest[0]
        agent, vm = self.agent, self.vm
        try:
            # corrupt-pfn (a module in Debian's kernels, built into vmce's)
            agent.call("modprobe", name="hwpoison_inject")
        except AgentError:
            pass
        before = agent.call("counters")
        _, seq = agent.kmsg()
        t0 = time.monotonic()
        reply, error = {}, None
        try:
            reply = agent.call("selftest", name=program, timeout=slow(300))
        except AgentError as e:
            error = str(e).splitlines()[0]
        tap = parse_tap(reply.get("output") or "")
        console = vm.console()[console_len:].splitlines()
        lines = []
        if vm.alive() and not GuestLog(console).panics and self._answers():
            lines = agent.kmsg(seq)[0]
        log = GuestLog(lines + console)
        alive = vm.alive() and not log.panics and not self.reset() and self._answers()
        # the errors it made, as the kernel counts them
        counted = {}
        if alive:
            after = agent.call("counters")
            counted = {"hardware_corrupted_kb": after["hardware_corrupted_kb"] - before["hardware_corrupted_kb"],
                       "node_mf_delta": _node_delta(before.get("node_memory_failure"),
                                                    after.get("node_memory_failure"))}
        obs = self._observed([], [{"agent": {"selftest": program}}], log, [], [], alive, t0, None, None)
        # no workload of vmce's: the pages are the ones the selftest poisoned
        obs["actions"] = {hex(p): a[-1] for p, a in log.actions.items()}
        obs["selftest"] = {"program": program, "exit": reply.get("exit"), "timed_out": reply.get("timed_out"),
                           "error": error, "seconds": round(time.monotonic() - t0, 1), **tap}
        return dict(obs, **counted)

    def _run(self, console_len):
        case, agent, vm = self.case, self.agent, self.vm
        workloads = self.set_up()
        # (no HardwareCorrupted line without the handler)
        hc_before = None if self.no_handler else agent.call("counters")
        _, seq = agent.kmsg()
        t0 = time.monotonic()
        self.t_consumed = None
        injected = self._inject_all(workloads)
        # a consumed error happens when the process touches the page
        t0 = self.t_consumed or t0
        # the handler's word on each page, or the guest gone
        log = GuestLog()
        seen = []  # the kernel's own log, as last read

        def settled():
            console = vm.console()[console_len:].splitlines()
            lines = []
            # a panicked guest answers nothing: the console says so at once
            if vm.alive() and not GuestLog(console).panics:
                try:
                    lines = agent.kmsg(seq)[0] if self._answers() else []
                except (AgentError, OSError):
                    pass  # the guest went down between the two calls
            if lines:
                seen[:] = lines
            log.__init__((lines or seen) + console)
            # refused (an Arm64 guest's QEMU that cannot tell it), or an
            # Arm64 guest's oops (its kernel read the page first): nothing
            # more for the guest's handler to say
            if log.panics or not vm.alive() or self.reset() or self._refused() or self._oopsed(log):
                return True
            # a kernel without the handler says nothing: QEMU's word is what
            # there is (a reset shows on the console a moment later)
            if self.no_handler and injected and all(
                    (i.get("qemu_event") or {}).get("action") == "ignore" for i in injected if isinstance(i, dict)):
                return True
            # a repeated error is answered twice: the action, then "already poisoned"
            return all((log.action_for(w["pfn_int"]) or w["pfn_int"] in log.already)
                       and (not case.repeat or w["pfn_int"] in log.already)
                       for w in workloads)
        _wait(settled, slow(ACTION_TIMEOUT_S))
        ms_to_action = (time.monotonic() - t0) * 1000 if any(
            log.action_for(w["pfn_int"]) for w in workloads) else None
        reset = self.reset()
        alive = vm.alive() and not log.panics and not reset and self._answers()
        if not alive and not log.panics:
            # a guest that went down between the handler's word and the
            # question whether it answers: its panic is on the console by
            # now (the slab case's kernel read its page in that moment, and
            # the case failed as "stopped answering", once, in make check)
            _wait(lambda: GuestLog(vm.console()[console_len:].splitlines()).panics, 2)
            log.__init__(seen + vm.console()[console_len:].splitlines())
        statuses, checks = [], []
        touched = False
        try:
            if alive:
                statuses, checks, touched = self._watch(workloads)
        except AgentError:
            if agent.alive():
                raise
            alive = False  # the guest went down while watched: the log says how
            log.__init__(vm.console()[console_len:].splitlines())
        ms_to_signal = None
        if any(s.get("sigbus") for s in statuses):
            ms_to_signal = (time.monotonic() - t0) * 1000
        obs = self._observed(workloads, injected, log, statuses, checks, alive, t0, ms_to_action,
                             ms_to_signal)
        obs["reset"] = reset = reset or self.reset()
        if self._refused() and vm.alive():
            # a refused AR leaves the VM paused (vmced's word on it)
            with vm.qmp() as q:
                obs["qemu_status"] = q.execute("query-status")["status"]
        if reset and self.exp and self.exp.guest == "reset":
            obs["after_reset"] = self._after_reset()
            return obs
        if alive:
            self._after_alive(workloads, hc_before, obs, console_len, log)
        return obs

    def _after_alive(self, workloads, hc_before, obs, console_len, log):
        """_after(), for a guest that may go down under it: then the log says how"""
        try:
            self._after(workloads, hc_before, obs, console_len)
        except AgentError:
            if self.agent.alive():
                raise
            obs["guest_alive"] = False
            log.__init__(self.vm.console()[console_len:].splitlines())
            obs["panic"] = log.panics[0] if log.panics else None
            obs["trouble"] = log.trouble[:10]

    def _refused(self):
        return bool(self.exp and self.exp.guest == "refused")

    def _oopsed(self, log):
        """An Arm64 guest's kernel oopsed on the page (an SEA in kernel mode,
        expect.OOPS_FIRST): the record it was handling is never handled"""
        return getattr(self.case, "arch", "amd64") == "arm64" and kernel_crash(log) is not None

    def _inject_all(self, workloads):
        """The case's error on every workload's page (twice with repeat):
        what each injection answered"""
        case, vm = self.case, self.vm
        injected = []
        # forwarder = qemu: vmced passes the host error on to QEMU, which
        # does with it what it does without vmced (expect.qemu_handles())
        if case.forwarder == "qemu":
            self.daemon.ctl("policy", vm.name, "pass")
        try:
            for w in workloads:
                injected.append(self.inject(w))
                if case.repeat and vm.alive():
                    injected.append(self.inject(w))
        finally:
            if case.forwarder == "qemu" and vm.alive():
                self.daemon.ctl("policy", vm.name, "forward", check=False)
        return injected

    def _watch(self, workloads):
        """Checks, touches and signals, as the case asks for them"""
        case, agent = self.case, self.agent
        statuses, checks = [], []
        touched = False
        # the file check first: a touch that is fatal would leave no
        # writer to fsync
        if self.exp and (self.exp.fsync_eio or self.exp.reread_ok):
            for w in workloads:
                if any(agent.call("pages-status", pid=w["pid"])["alive"].values()):
                    agent.call("pages-check", pid=w["pid"])
                    checks.append(_wait(lambda: agent.call("pages-status", pid=w["pid"]).get("check"), slow(10)))
        # inject() touched the page already for a consumed host error (its
        # consumer is gone): a late kill has nothing left to touch
        late = case.kill in ("late", "prctl-late") and self.t_consumed is None
        if late or (not case.host_side and case.kind == "ar"):
            touched = True
            for w in workloads:
                agent.call("pages-touch", pid=w["pid"])
        statuses = [self._status(w, touched) for w in workloads]
        return statuses, checks, touched

    def _observed(self, workloads, injected, log, statuses, checks, alive, t0, ms_to_action,
                  ms_to_signal):
        vm = self.vm
        obs = {
            "workloads": [{k: w.get(k) for k in ("type", "pid", "pids", "va", "gpa", "pfn",
                                                 "kpageflags", "flags", "lsb", "file")}
                          for w in workloads],
            "injected": injected,
            "actions": {hex(w["pfn_int"]): log.action_for(w["pfn_int"]) for w in workloads},
            # every action line's result, a repeat's too: what the per-node
            # statistics must have counted
            "action_results": _count(r for w in workloads for r in log.results.get(w["pfn_int"], [])),
            "already": [hex(p) for p in log.already],
            "kills": {hex(p): k for p, k in log.kills.items()},
            "overflows": [hex(p) for p in log.overflows],
            "signals": [rec for s in statuses for rec in s.get("sigbus") or []],
            # a process that handles AO lives on; one that was not to be told
            # must not have been killed either
            "victims_alive": {pid: alive for s in statuses
                              for pid, alive in (s.get("alive") or {}).items()},
            "checks": [c for c in checks if c],
            "panic": log.panics[0] if log.panics else None,
            "mce_reports": log.mce_reports[:6],
            "trouble": log.trouble[:10],
            "guest_alive": alive,
            "qemu_alive": vm.alive(),
            "qemu_exit": vm.exit_status(),
            "ms_to_action": round(ms_to_action, 1) if ms_to_action else None,
            "ms_to_signal": round(ms_to_signal, 1) if ms_to_signal else None,
        }
        return obs

    def _after(self, workloads, hc_before, obs, console_len):
        """Counters, the tracepoint, the workloads stopped, the aftermath"""
        case, agent = self.case, self.agent
        if hc_before is not None:
            after = agent.call("counters")
            obs["hardware_corrupted_kb"] = after["hardware_corrupted_kb"] - hc_before["hardware_corrupted_kb"]
            obs["node_memory_failure"] = after.get("node_memory_failure")
            obs["node_mf_delta"] = _node_delta(hc_before.get("node_memory_failure"),
                                               after.get("node_memory_failure"))
        try:
            obs["trace"] = agent.call("trace-mf", read="1").get("events", [])[-4:]
        except AgentError:
            obs["trace"] = None
        if not self.exp or self.exp.aftermath != "exit":
            for w in workloads:
                agent.call("pages-stop", pid=w["pid"])
        if self.exp and self.exp.aftermath:
            obs["aftermath"] = self._aftermath(workloads, console_len)
        if case.page == "ksm" and not (self.exp and self.exp.aftermath in ENDING):
            agent.call("sysfs", path="/sys/kernel/mm/ksm/run", value=0)
        return obs

    def _aftermath(self, workloads, console_len):
        """Lets the kernel use the poisoned page again, as it will sooner or
        later, and records whether the guest survives it"""
        how = self.exp.aftermath
        if how == "in-use":
            return {"how": how, "crash": None}
        if how in MERGE_LIVES:
            return dict(self._ksm_merge_again(console_len), how=how)
        try:
            # no waiting for the answer: the guest goes down under the request
            if how == "exit":
                for w in workloads:
                    self.agent.send("pages-stop", pid=w["pid"])
            elif how == "ksm-merge":
                self.agent.send("pages-start", type="ksm")
        except (AgentError, OSError):
            pass
        crash = None

        def crashed():
            nonlocal crash
            crash = kernel_crash(GuestLog(self.vm.console()[console_len:].splitlines()))
            return crash or not self.vm.alive()
        _wait(crashed, 20, 0.2)
        return {"how": how, "crash": crash}

    def _ksm_merge_again(self, console_len):
        """A second KSM workload with the poisoned page's data, waited for:
        it is up once ksmd has merged its pages, which it does only after
        looking in its stable tree where the poisoned page was"""
        merged, error = False, None
        try:
            again = self.agent.call("pages-start", type="ksm")
            merged = True
            self.agent.call("pages-stop", pid=again["pid"])
        except (AgentError, OSError) as e:
            error = str(e).splitlines()[0] if str(e) else type(e).__name__
        crash = kernel_crash(GuestLog(self.vm.console()[console_len:].splitlines()))
        if not crash and not self.vm.alive():
            crash = "QEMU exited"
        return {"how": "ksm-merge-lives", "merged": merged, "crash": crash, "error": error}

    def _armed(self):
        """How many host pages vmced holds away from the guest (simulated poison)"""
        res = self.daemon.ctl("--json", "vm", self.vm.name, check=False)
        return json.loads(res.stdout).get("simulated_poisoned_host_pages", 0) if res.returncode == 0 else 0

    def _answers(self):
        try:
            self.agent.call("ping", timeout=5)
            return True
        except (AgentError, OSError):
            return False

    def _status(self, w, touched):
        """The workload's state once the signals it should get are in, or
        (none expected) once its touches are done"""
        expected = self.exp.signals if self.exp and self.exp.signals != "none" else None
        if expected is None and not touched:
            return self.agent.call("pages-status", pid=w["pid"])
        want = self.exp.wanted_signals(w) if expected else {}

        def ready():
            st = self.agent.call("pages-status", pid=w["pid"])
            got = {rec.get("pid") for rec in st.get("sigbus") or []}
            if expected is not None and all(p in got for p in want):
                return st
            if expected is None:
                pending = [p for p, alive in st["alive"].items()
                           if alive and int(p) not in st.get("touched", [])]
                return None if touched and pending else st
            return None
        return _wait(ready, slow(SIGNAL_TIMEOUT_S), 0.1) or self.agent.call("pages-status", pid=w["pid"])


class Progress:
    def __init__(self, total, done):
        self.total, self.start = total, time.monotonic()
        self.counts = {"pass": 0, "fail": 0, "unexpected": 0, "not run": 0}
        self.done_before = done
        self.done = 0
        self.tty = sys.stdout.isatty()
        self.lock = threading.Lock()

    def update(self, result):
        with self.lock:
            self.done += 1
            self.counts[result["verdict"]] = self.counts.get(result["verdict"], 0) + 1
            left = self.total - self.done_before - self.done
            rate = (time.monotonic() - self.start) / self.done
            eta = f"{int(left * rate) // 60}m{int(left * rate) % 60:02d}s" if left else "0s"
            summary = (f"[{self.done_before + self.done}/{self.total}] "
                       f"{self.counts['pass']} pass, {self.counts['fail']} fail, "
                       f"{self.counts['unexpected']} unexpected, {self.counts['not run']} not run, "
                       + (f"{self.counts['not applicable']} not applicable, " if self.counts.get("not applicable")
                          else "") + f"ETA {eta}")
            line = f"{result['verdict']:10s} {result['case']['id']}"
            if result.get("host"):
                line += f" on {result['host']}"
            # a case that did not pass says why where it is seen first: a log
            # (CI's) may keep only the progress lines, not results.jsonl
            if result["verdict"] not in ("pass", "not applicable") and result.get("reasons"):
                line += f"\n           why: {result['reasons'][0]}"
            if self.tty:
                print(f"\r\033[K{line}\n{summary}", end="", flush=True)
            else:
                print(f"{line}   {summary}", flush=True)

    def finish(self):
        if self.tty:
            print()


class ResultsFile:
    """results.jsonl: one record per line, each on disk (fsync) before the
    next case starts, so that an interrupted campaign resumes where it
    stopped"""

    def __init__(self, path, fresh=False):
        self.path = path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if fresh and os.path.exists(path):
            os.unlink(path)
        self.lock = threading.Lock()

    def records(self):
        out = []
        if os.path.exists(self.path):
            with open(self.path) as f:
                for line in f:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        continue  # a line cut short by an interruption
        return out

    def cases(self, done=lambda rec: True):
        """case id -> its last record, of those @done says are done"""
        out = {}
        for rec in self.records():
            if rec.get("type") != "case":
                continue
            if done(rec):
                out[rec["case"]["id"]] = rec
            else:
                out.pop(rec["case"]["id"], None)
        return out

    def append(self, rec):
        with self.lock:
            with open(self.path, "a") as f:
                f.write(json.dumps(rec) + "\n")
                f.flush()
                os.fsync(f.fileno())


def start_qemus(campaign):
    """Every QEMU of the campaign, with its release, for the start record
    and the report's meta"""
    return [q.to_dict() for q in campaign.qemus.values() if q.name in campaign.qemu_names]


class Runner:
    def __init__(self, campaign, outdir, reuse=None, fresh=False, log=print, restore=None):
        self.campaign, self.outdir, self.log = campaign, outdir, log
        self.reuse = campaign.reuse if reuse is None else reuse
        self.restore = campaign.restore if restore is None else restore
        self.results = ResultsFile(os.path.join(outdir, "results.jsonl"), fresh)
        self.results_path = self.results.path
        self.timeline = []
        self.stopping = False  # ^C: no more cases

    def finished(self):
        return self.results.cases()

    def record(self, rec):
        self.results.append(rec)

    def run(self):
        done, todo = self.campaign.split_done(self.finished())
        if done:
            self.log(f"campaign {self.campaign.name}: {len(done)} case(s) already done, "
                     f"{len(todo)} to go")
        daemon = self.daemon()
        progress = Progress(len(self.campaign.cases), len(done))
        work = queue.Queue()
        for case in todo:
            work.put(case)
        started = time.time()
        self.record({"type": "start", "time": started, "campaign": self.campaign.name,
                     "reuse": self.reuse, "restore": self.restore, "seed": self.campaign.seed,
                     "qemus": start_qemus(self.campaign)})
        threads = [threading.Thread(target=self.worker, args=(slot, work, daemon, progress))
                   for slot in range(min(self.campaign.concurrency, max(1, len(todo))))]
        try:
            for t in threads:
                t.start()
            self._wait(threads)
        except KeyboardInterrupt:
            # ^C: the cases in flight end and each worker stops its guests,
            # so that no QEMU outlives the campaign; the rest is for a resume
            self.stopping = True
            self._wait(threads)
            raise
        finally:
            progress.finish()
            daemon.stop()
        self.record({"type": "end", "time": time.time(), "started": started,
                     "timeline": self.timeline})
        return list(self.finished().values())

    @staticmethod
    def _wait(threads):
        """Thread.join(), in steps: a join that ^C interrupts can leave its
        thread looking finished while it runs on"""
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.2)

    def worker(self, slot, work, daemon, progress):
        gvms = {}
        try:
            while not self.stopping:
                try:
                    case = work.get_nowait()
                except queue.Empty:
                    return
                spec = self.campaign.guest_for(case)
                # a (kernel, QEMU)'s cases come together: its guests go when
                # they are done, before the next one's boot
                variant = (case.kernel, case.qemu)
                for name in [n for n, g in gvms.items() if g.variant != variant]:
                    gvms.pop(name).close()
                gvm = gvms.get(spec.name)
                if gvm is None:
                    real = any(c.inject == "host-real" and c.guest == case.guest
                               for c in self.campaign.cases)
                    gvm = gvms[spec.name] = self.guest(spec, slot, daemon, real)
                    gvm.variant = variant
                # a guest for a later case that will need one: it boots while
                # the cases before it run (none after the variant's last case:
                # its guests go before the next variant's boot)
                later = [c for c in list(work.queue) if c.guest == case.guest and (c.kernel, c.qemu) == variant]
                spare = bool(later) and any(_ends_guest(c) for c in later + [case])
                rec = self.run_case(case, gvm, daemon, spare)
                self.record(rec)
                progress.update(rec)
        finally:
            for gvm in gvms.values():
                gvm.close()

    def guest(self, spec, slot, daemon, real):
        """The GuestVm that runs @spec's cases in worker @slot"""
        return GuestVm(spec, slot, self.outdir, daemon, self.timeline, restore=self.restore,
                       ram_file=real)

    def daemon(self):
        """The vmced the cases go through: one of the campaign's own"""
        return Vmced(os.path.join(self.outdir, "vmced"))

    def run_case(self, case, gvm, daemon, spare=False):
        expected = expectation(case)
        t_start = t_case = time.time()
        obs, why_not = None, None
        try:
            if _not_applicable(case, expected):
                # the case asks what this kernel does not have: no guest for it
                return case_record(case, expected, None, None, t_start, time.time())
            if case.not_real:  # before any boot: nothing of it can run
                raise NotRun(case.not_real)
            if gvm.spec.image and case.inject == "guest-selftest":
                raise NotRun("vmce's kernel selftests come with vmce's own guest, not in an operator's "
                             "image: run this case on a kernel (kernel = vmce-6.1)")
            if gvm.unbootable:
                raise NotRun(gvm.unbootable)
            if not self.reuse or not gvm.fit(self.campaign.max_poisoned):
                t = time.time()
                first = gvm.vm is None and gvm.spare is None and gvm.boots == 0
                # without a template yet, the two first boots side by side
                if first and self.reuse and spare and not self.restore:
                    gvm.prepare_spare()  # the two first boots side by side
                waited = gvm.replace(use_spare=not first)
                self.timeline.append(dict(vm=gvm.name, event="wait-boot", start=t, end=t + waited,
                                          boot=gvm.current))
            if self.reuse and spare:
                gvm.prepare_spare()
            # an image's kernel is known once it runs: judged by its own table
            expected = expectation(case)
            if _not_applicable(case, expected, booted=True):
                return case_record(case, expected, None, None, t_start, time.time(), vm=gvm.name,
                                   boot=gvm.current)
            t_case = time.time()
            obs = CaseRun(case, gvm, daemon, expected).run()
            gvm.poisoned += case.burst * (2 if case.repeat else 1)
            after = obs.get("aftermath")
            if not obs["qemu_alive"]:
                gvm.dead = f"QEMU {(obs.get('qemu_exit') or {}).get('how') or 'exited'}"
            elif obs.get("reset"):
                # its next boot, set up again, runs the next case
                if not (obs.get("after_reset") or {}).get("booted"):
                    gvm.dead = f"the guest reset: {obs['reset']}"
            elif not obs["guest_alive"]:
                gvm.dead = obs.get("panic") or "the guest stopped answering"
            elif after:
                gvm.dead = after.get("crash") or "a poisoned kernel page is still in use"
            elif expected and expected.guest in ("untold", "refused"):
                # seen: the next case's set-up touched it, a real AR reset
                # the guest (an Arm64 guest's refused AR paused it)
                gvm.dead = "a poisoned page its kernel was never told of is still in use"
            elif expected and expected.guest == "oops":
                gvm.dead = "its kernel oopsed"
        except NotRun as e:
            why_not = str(e)
        except Exception as e:  # a case that could not be carried out is not a pass
            # the first line says it; the rest (console, QEMU's log) is in the guest's directory
            first = str(e).splitlines()[0] if str(e) else ""
            why_not = gvm.unbootable if gvm.unbootable and gvm.vm is None else \
                f"{type(e).__name__}: {first}"
            gvm.dead = why_not
        rec = case_record(case, expected, obs, why_not, t_start, time.time(), vm=gvm.name, boot=gvm.current)
        self.timeline.append(dict(vm=gvm.name, event="case", start=t_case, end=rec["end"],
                                  case=case.id, verdict=rec["verdict"], boot=gvm.current))
        return rec
