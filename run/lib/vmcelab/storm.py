"""run/bench --only storm: N distinct errors into one guest, or spread over
several at once, with nothing lost.

Each guest is a TCG guest of 512 MiB with a 512 MiB DIMM that Debian's 6.1
leaves offline (e2e-faults): guest RAM to QEMU and vmced that the guest
never uses, so every simulated host error in it reaches the guest as a
machine check ("memory outside kernel control") without any of its own
pages going bad. The other half of the errors go to user pages the guest
can lose: a victim process's run of dirty pages, with late kill (the guest
isolates each page and leaves the process alone until it touches one).
Errors alternate between the two and, with several guests, between the
guests, STORM_WINDOW outstanding on one control connection (vmced would
otherwise read the whole storm at once and hold it).

Nothing lost: every request answered, the journal holding exactly one
memory-error record per error, each (vm, page) once, and every answer
'injected' or not injected with a reason. The guest's verdict: alive,
HardwareCorrupted grown by exactly its user pages, the victim alive.
"""
import json
import os
import time

from . import qemus
from .procfs import status, thread_states
from .daemon import ControlConnection, Vmced
from .stats import percentile
from .vm import Vm

DIMM = 512 << 20
PAGE = 4096
# requests outstanding on the control connection: enough that vmced's queues
# never run dry, few enough that they do not hold the whole storm
WINDOW = 200


class StormGuest:
    """One guest of the storm and the pages it gets errors in"""

    def __init__(self, work, i, qemu, n_errors, user_pages):
        self.name = f"bench-storm{i}"
        self.vm = Vm.start(self.name, mem="512M", qemu=qemu, state_dir=os.path.join(work, f"storm-vm{i}"),
                           extra=["-m", "512M,slots=1,maxmem=2G"])
        self.n_errors = n_errors
        self.n_user = user_pages
        self.victim = None
        self.pages = []

    def prepare(self):
        vm = self.vm
        vm.wait_ready()
        with vm.qmp() as q:
            q.execute("object-add", **{"qom-type": "memory-backend-ram", "id": "storm-mem", "size": DIMM})
            q.execute("device_add", driver="pc-dimm", id="storm-dimm", memdev="storm-mem")
            base = next(d["data"]["addr"] for d in q.execute("query-memory-devices")
                        if d["data"].get("id") == "storm-dimm")
        user = []
        if self.n_user:
            vm.agent.call("sysctl", name="vm.memory_failure_early_kill", value=0)
            self.victim = vm.agent.call("victim-start", mode="idle", pages=self.n_user)
            first = int(self.victim["more_va"], 16)
            for j in range(self.n_user):
                t = vm.agent.call("translate", pid=self.victim["pid"], va=hex(first + j * PAGE))
                user.append(int(t["gpa"], 16))
        dimm = [base + j * PAGE for j in range(self.n_errors - self.n_user)]
        # alternate: the guest's handler meets both kinds all through
        self.pages = [p for pair in zip(dimm, user) for p in pair] + dimm[len(user):] + user[len(dimm):]
        self.corrupted_kb_before = vm.agent.call("meminfo")["hardware_corrupted_kb"]
        self.dimm_base = base

    def verdict(self):
        vm = self.vm
        out = {"qemu_alive": vm.alive(),
               "qemu_threads_stopped": sum(1 for st in thread_states(vm.pid).values() if st == "t")}
        try:
            out["agent_answers"] = vm.agent.call("ping") is not None
            # the guest handles each error's page after its machine check,
            # from a work queue that a storm leaves behind: read its count
            # once it has stood still for 5 s (at most two minutes)
            corrupted, still_since, deadline = None, time.monotonic(), time.monotonic() + 120
            while time.monotonic() < deadline:
                now = vm.agent.call("meminfo")["hardware_corrupted_kb"]
                if now != corrupted:
                    corrupted, still_since = now, time.monotonic()
                elif time.monotonic() - still_since >= 5:
                    break
                time.sleep(0.2)
            out["settled_s"] = round(time.monotonic() - self.storm_end, 1)
            out["hardware_corrupted_kb_grew"] = corrupted - self.corrupted_kb_before
            out["user_pages_kb"] = self.n_user * 4
            if self.victim is not None:
                st = vm.agent.call("victim-status", pid=self.victim["pid"])
                out["victim_alive"] = bool(st.get("alive")) and not st.get("sigbus")
            # the guest's own account, from its kernel log (the console lags)
            kmsg, since = [], 0
            while True:
                lines, since = vm.agent.kmsg(since)
                if not lines:
                    break
                kmsg += lines
            out["kmsg"] = {"recovered": sum(1 for line in kmsg if ": Recovered" in line),
                           "outside_kernel_control": sum(1 for line in kmsg if "outside kernel control" in line),
                           "mce_pool_full": sum(1 for line in kmsg if "MCE records pool full" in line),
                           "memory_failure_other": sum(1 for line in kmsg if "Memory failure:" in line
                                                       and ": Recovered" not in line
                                                       and "outside kernel control" not in line)}
        except Exception as e:  # noqa: BLE001 - the verdict says it
            out["agent_answers"] = f"no: {e}"
        console = vm.console()
        out["panic"] = "Kernel panic" in console
        out["outside_kernel_control_lines"] = console.count("memory outside kernel control")
        out["recovered_lines"] = console.count(": Recovered")
        out["mce_pool_full_lines"] = console.count("MCE records pool full")
        return out


def journal_memory_errors(path):
    out = []
    with open(path) as f:
        for line in f:
            if '"memory-error"' not in line:
                continue
            rec = json.loads(line)
            if rec["type"] == "memory-error":
                out.append(rec)
    return out


class _Storm:
    """The errors of @order ([(guest, gpa)]) sent on one control connection,
    WINDOW outstanding, and what came back"""

    def __init__(self, daemon, order):
        self.daemon, self.order, self.n = daemon, order, len(order)
        self.ctl = None
        self.results, self.wrong, self.reasons = {}, 0, {}
        self.sent = self.done = 0
        self.t0 = self.secs = None
        self.rss = []

    def run(self, rss0):
        n, daemon = self.n, self.daemon
        checkpoints = sorted({c for c in (1000, 10000, 100000) if c < n} | {n})
        self.rss = [{"events": 0, "rss_kb": rss0, "anon_kb": status(daemon.proc.pid, "RssAnon"), "elapsed_s": 0}]
        self.ctl = ControlConnection(daemon.socket)
        self.t0 = time.monotonic()
        self.send_upto(WINDOW)
        try:
            for cp in checkpoints:
                while self.done < cp:
                    got = self.ctl.replies(min(100, cp - self.done, self.sent - self.done), 120)
                    if not got:
                        raise RuntimeError(f"storm: no answer for 120 s after {self.done} of {n}")
                    self.count(got)
                    self.done += len(got)
                    self.send_upto(self.done + WINDOW)
                el = time.monotonic() - self.t0
                self.rss.append({"events": self.done, "rss_kb": daemon.rss_kb(),
                                 "anon_kb": status(daemon.proc.pid, "RssAnon"), "elapsed_s": round(el, 1)})
                print(f"storm: {self.done:6} answered after {el:7.1f} s ({self.done / el:.1f}/s); vmced RSS "
                      f"{self.rss[-1]['rss_kb']} kB ({self.rss[-1]['anon_kb']} kB anonymous)", flush=True)
        finally:
            self.secs = time.monotonic() - self.t0
            self.ctl.close()

    def send_upto(self, k):
        while self.sent < min(k, self.n):
            g, gpa = self.order[self.sent]
            self.ctl.send("poison", self.sent + 1, vm=g.name, gpa=hex(gpa), kind="ao")
            self.sent += 1
        self.ctl.flush()

    def count(self, got):
        """Answers by result, those about another page, and why an error
        was not injected"""
        for rid, a in got.items():
            _, gpa = self.order[rid - 1]
            if "return" in a:
                r = a["return"].get("result")
                if int(a["return"]["gpa"], 16) != gpa:
                    self.wrong += 1
                if r != "injected":
                    d = (a["return"].get("detail") or "")[:100]
                    self.reasons[d] = self.reasons.get(d, 0) + 1
            else:
                r = "error: " + a["error"]["desc"][:100]
            self.results[r] = self.results.get(r, 0) + 1


def figures(work, n=10000, vms=1, qemu="vmce-10.0", gap_ms=None, user=True):
    q = qemus.resolve(qemu)
    per = [n // vms + (1 if i < n % vms else 0) for i in range(vms)]
    if max(per) > DIMM // PAGE:
        raise SystemExit(f"--errors {n} into {vms} guest(s): a guest's DIMM holds {DIMM // PAGE} pages")
    out = {"errors": n, "vms": vms, "qemu": q.label, "window": WINDOW, "user_pages": user}
    guests, daemon = [], None
    try:
        for i in range(vms):
            guests.append(StormGuest(work, i, q.binary, per[i], per[i] // 2 if user else 0))
        for g in guests:
            g.prepare()
        daemon = Vmced(os.path.join(work, "storm-vmced"),
                       args=["--inject-gap-ms", str(gap_ms)] if gap_ms is not None else [])
        for g in guests:
            daemon.ctl("attach", "--pid", str(g.vm.pid), "--qmp", g.vm.vmced_qmp_path, "--name", g.name)
        via = {g.name: daemon.wait_attached(g.name)["inject"] for g in guests}
        time.sleep(1)
        rss0 = daemon.rss_kb()
        print(f"storm: {n} AO errors into {vms} guest(s) ({q.label}, vmced injects through "
              f"{', '.join(sorted(set(via.values())))}{', gap ' + str(gap_ms) + ' ms' if gap_ms is not None else ''}): "
              + ("per guest half on its offline DIMM, half on a victim's user pages" if user
                 else "all on the guests' offline DIMMs"), flush=True)
        # round robin over the guests
        order = [(g, g.pages[j]) for j in range(max(per)) for g in guests if j < len(g.pages)]
        storm = _Storm(daemon, order)
        storm.run(rss0)
        out.update(seconds=round(storm.secs, 2), errors_per_s=round(storm.done / storm.secs, 1),
                   answers=storm.results, not_injected_reasons=storm.reasons, rss=storm.rss)
        out.update(_journal_figures(daemon, storm))
        for g in guests:
            g.storm_end = storm.t0 + storm.secs
        out["guests"] = {g.name: g.verdict() for g in guests}
        out["vmced_alive"] = daemon.alive()
        out["rss_after_kb"] = daemon.rss_kb()
        _print_figures(out, storm, rss0)
    finally:
        if daemon is not None:
            daemon.stop()
        for g in guests:
            g.vm.stop()
    return out


def _journal_figures(daemon, storm):
    """What vmced's journal holds of the storm (written through io_uring
    after each answer), and whether anything was lost"""
    deadline = time.monotonic() + 30
    while daemon.ctl_json("status").get("journal", {}).get("held") and time.monotonic() < deadline:
        time.sleep(0.2)
    recs = journal_memory_errors(daemon.journal)
    keys = [(r["vm"], int(r["gpa"], 16)) for r in recs]
    want = sorted((g.name, gpa) for g, gpa in storm.order[:storm.sent])
    seqs = [r["seq"] for r in recs]
    latency = sorted(r["latency_us"] for r in recs if r.get("latency_us") is not None)
    out = {"journal": {"memory_error_records": len(recs), "each_page_once": sorted(keys) == want,
                       "seqs_distinct": len(set(seqs)) == len(seqs),
                       "injected": sum(1 for r in recs if r["result"] == "injected"),
                       "busy_retries": sum(r.get("busy", 0) for r in recs),
                       "dropped_retries": sum(r.get("dropped", 0) for r in recs),
                       "resets": sum(1 for r in daemon.journal_records() if r["type"] == "reset")}}
    if latency:
        out["latency_ms"] = {"p50": round(percentile(latency, 50) / 1000, 2),
                             "p99": round(percentile(latency, 99) / 1000, 2)}
    out["answers_wrong_page"] = storm.wrong
    reasoned = all(r["result"] == "injected" or r.get("detail") for r in recs)
    n = storm.n
    out["nothing_lost"] = (sum(storm.results.values()) == storm.sent == n and len(recs) == n and not storm.wrong
                           and out["journal"]["each_page_once"] and out["journal"]["seqs_distinct"]
                           and reasoned)
    out["all_injected"] = storm.results == {"injected": n}
    return out


def _print_figures(out, storm, rss0):
    j, results, reasons = out["journal"], storm.results, storm.reasons
    print(f"storm: {storm.done} errors answered in {storm.secs:.1f} s: {out['errors_per_s']} errors/s; "
          f"answers {results}" + (f"; not injected because: {reasons}" if reasons else ""))
    print(f"storm: journal: {j['memory_error_records']} memory-error records, "
          f"{'each page once' if j['each_page_once'] else 'NOT each page once'}, {j['injected']} injected, "
          f"sent again {j['busy_retries']} time(s) on 'busy' and {j['dropped_retries']} on a drop, "
          f"{j['resets']} resets; signal-stop to acknowledged p50 "
          f"{out.get('latency_ms', {}).get('p50')} ms, p99 {out.get('latency_ms', {}).get('p99')} ms")
    print(f"storm: nothing lost (every error answered and journaled once, each not-injected one with "
          f"its reason): {'yes' if out['nothing_lost'] else 'NO'}; all injected: "
          f"{'yes' if out['all_injected'] else 'no'}; vmced RSS {rss0} kB attached, "
          f"{out['rss_after_kb']} kB after")
    for name, v in out["guests"].items():
        print(f"storm: {name}: QEMU alive {v['qemu_alive']}, agent {v.get('agent_answers')}, panic {v['panic']}, "
              f"HardwareCorrupted +{v.get('hardware_corrupted_kb_grew')} kB (user pages "
              f"{v.get('user_pages_kb')} kB, read {v.get('settled_s')} s after the storm), "
              f"victim alive {v.get('victim_alive')}, kernel log {v.get('kmsg')}, "
              f"{v['qemu_threads_stopped']} QEMU threads stopped")


def passed(out):
    """What the bench's exit status holds it to"""
    return out["nothing_lost"] and all(
        v["qemu_alive"] and not v["panic"] and v["qemu_threads_stopped"] == 0 for v in out["guests"].values())
