"""What being QEMU's tracer costs a running guest (run/bench --overhead).

vmced is QEMU's ptrace tracer. A traced thread runs exactly as an untraced
one until it stops: for a signal (SIG_IPI kicking a vCPU out of KVM_RUN,
SIGCHLD, timers), for a clone (PTRACE_O_TRACECLONE), or for vmced's own
interrupt. Each stop waits for vmced. Besides those waits, vmced can take
from a guest only the CPU time it uses itself on a host whose cores the
guest needs. So two figures are measured, side by side:

- direct: the same guest workload (the agent's `workload`: cpu, io, ipi)
  with vmced attached and without it, in adjacent pairs on one guest; the
  ratio of each pair (attached over not), their median and a
  distribution-free confidence interval of that median. Pairs alternate
  their order (off, on, then on, off, ...) so that a drift of the host falls
  on both sides alike.
- bound: while attached, vmcectl vm's stops (count and the time the threads
  waited, by thread kind and what stopped them) and vmced's CPU time
  (schedstat). Even if every microsecond of both had been taken from the
  guest as a whole, its throughput ratio is at least
  1 - (waited + vmced's CPU) / run time.

On a 2-core host the direct ratio's noise is far wider than a 1% target;
the bound is what resolves it, and the direct interval is what would show a
cost the bound misses (a direct interval wholly under the target fails the
row whatever the bound says).
"""
import glob
import math
import os
import statistics
import time

from .daemon import Vmced

KINDS = ("cpu", "io", "ipi")
TARGET = 0.99
# the direct interval decides only at this confidence or more (9 pairs: 96%)
CONFIDENCE = 0.95
# before every measured run, attached or not: attaching stops each thread
# for a moment, and a guest's timers catch up after it
SETTLE_S = 0.5


def _stops(daemon, name):
    """{(thread, stop): (count, stopped_us)} since vmced attached"""
    vm = daemon.ctl_json("vm", name)
    return {(s["thread"], s["stop"]): (s["count"], s.get("stopped_us", 0)) for s in vm.get("stops", [])}


def _cpu_ns(pid):
    """CPU time of every thread of @pid so far (schedstat: ns, not ticks)"""
    total, paths = 0, glob.glob(f"/proc/{pid}/task/*/schedstat")
    if not paths:
        # a bound from a CPU time that was not read would be no bound
        raise RuntimeError(f"cannot read vmced's CPU time (/proc/{pid}/task/*/schedstat)")
    for path in paths:
        try:
            with open(path) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total


def _run(agent, kind, ms):
    r = agent.call("workload", kind=kind, ms=ms, timeout=ms / 1000 + 60)
    return r["ops"] / (r["ns"] / 1e9)


def median_interval(values, confidence=0.95):
    """(low, high, achieved confidence) of the median of @values, from order
    statistics (a sign test: no assumption about the noise's shape). With
    too few values for @confidence, the widest interval (min, max) and the
    confidence it has."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        return None
    # P(X < k) for X ~ Binomial(n, 1/2): the median lies in [x_k, x_{n-k+1}]
    # (1-based) with probability 1 - 2 P(X < k)
    tail, k = 0.0, 0
    while k < n // 2:
        nxt = tail + math.comb(n, k) / 2 ** n
        if 2 * nxt > 1 - confidence:
            break
        tail, k = nxt, k + 1
    k = max(k, 1)
    achieved = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n
    return xs[k - 1], xs[n - k], achieved


def verdict(r, target=TARGET):
    """(met: True/False/None, why) of one measured row: the direct interval
    decides where it is wholly on one side of the target, at CONFIDENCE or
    more; else the bound"""
    low, high, conf = r["ratio_interval"]
    if conf >= CONFIDENCE and low >= target:
        return True, f"the direct interval is above {target}"
    if conf >= CONFIDENCE and high < target:
        return False, f"the direct interval is below {target}"
    direct = f"spans {target}" if conf >= CONFIDENCE else f"has only {conf:.0%} confidence"
    if r["bound"] >= target:
        return True, f"by the bound ({r['bound']:.5f}); the direct interval {direct}"
    return None, f"the direct interval {direct} and the bound ({r['bound']:.4f}) is under it"


def measure(vm, name, work, rounds=9, ms=2000, kinds=KINDS, vmced_args=()):
    """For each workload kind: ops/s without and with vmced (per pair), the
    paired ratios, their median and its interval, the stops per second and
    the bound while attached. A kind the guest cannot run (no disk, one
    vCPU) is "not measured", with the guest's reason."""
    agent = vm.agent
    out = {}
    for kind in kinds:
        off, on, stops, secs, vmced_ns = [], [], {}, 0.0, 0
        try:
            _run(agent, kind, 200)  # warm-up, and the guest's own refusal if any
        except Exception as e:  # noqa: BLE001 - the agent's error is the reason
            out[kind] = {"measured": False, "why": str(e)}
            continue
        for r in range(rounds):
            for attached in ((False, True) if r % 2 == 0 else (True, False)):
                if not attached:
                    time.sleep(SETTLE_S)
                    off.append(_run(agent, kind, ms))
                    continue
                daemon = Vmced(os.path.join(work, f"overhead-{kind}-{r}"),
                               args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", name,
                                     "--agent", vm.vmced_agent_path, *vmced_args])
                try:
                    daemon.wait_attached(name)
                    time.sleep(SETTLE_S)
                    before, cpu = _stops(daemon, name), _cpu_ns(daemon.proc.pid)
                    t = time.monotonic()
                    on.append(_run(agent, kind, ms))
                    secs += time.monotonic() - t
                    vmced_ns += _cpu_ns(daemon.proc.pid) - cpu
                    for key, (n, us) in _stops(daemon, name).items():
                        n0, us0 = before.get(key, (0, 0))
                        c, w = stops.get(key, (0, 0))
                        stops[key] = (c + n - n0, w + us - us0)
                finally:
                    daemon.stop()
        ratios = [a / b for a, b in zip(on, off)]
        waited_us = sum(w for _, w in stops.values())
        low, high, conf = median_interval(ratios)
        out[kind] = {
            "measured": True,
            "ops_per_s_detached": off,
            "ops_per_s_attached": on,
            "ratios": ratios,
            "ratio": statistics.median(ratios),
            "ratio_interval": [low, high, round(conf, 3)],
            "stops_per_s": {f"{t} {s}": round(n / secs, 2) for (t, s), (n, _) in sorted(stops.items()) if n > 0},
            "stopped_us": waited_us,
            "vmced_cpu_us": vmced_ns // 1000,
            "attached_s": round(secs, 3),
            "bound": 1 - (waited_us + vmced_ns / 1000) / (secs * 1e6),
            "ms_per_run": ms,
            "rounds": rounds,
        }
    return out


def print_table(results, title):
    print(title)
    print(f"  {'workload':<8} {'ratio':>6} {'interval (conf.)':>21} {'bound':>9} {'stops/s':>8} "
          f"{'waited':>9} {'vmced cpu':>9}  verdict (>= {TARGET})")
    for kind, r in results.items():
        if not r["measured"]:
            print(f"  {kind:<8} not measured: {r['why']}")
            continue
        low, high, conf = r["ratio_interval"]
        met, why = verdict(r)
        word = {True: "met", False: "MISSED", None: "not judged"}[met]
        print(f"  {kind:<8} {r['ratio']:6.3f} {f'{low:.3f}-{high:.3f} ({conf:.0%})':>21} {r['bound']:9.5f} "
              f"{sum(r['stops_per_s'].values()):8.2f} {r['stopped_us']:7d}us "
              f"{r['vmced_cpu_us']:7d}us  {word}: {why}")
        for stop, per_s in r["stops_per_s"].items():
            print(f"  {'':<8} stops: {stop} {per_s}/s")
    print("  (ratio: median of the attached/detached pairs, with its order-statistics interval;\n"
          "   bound: 1 - (time QEMU's threads waited at vmced's stops + vmced's CPU time) / time\n"
          "   attached: the least the ratio can be if vmced costs a guest only through those)")
