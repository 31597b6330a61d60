"""What being QEMU's tracer costs a running guest (run/bench --overhead).

vmced is QEMU's ptrace tracer: every signal any QEMU thread takes (SIG_IPI
kicking a vCPU out of KVM_RUN, SIGCHLD, timers) stops that thread until vmced
has looked at it and let it go. The guest pays only there, so the same guest
workload (the agent's `workload`: cpu, io, ipi) runs with vmced attached and
without it, alternating in one run on one guest, and the attached runs also
count those stops by thread and signal (vmcectl vm's signal_stops).

Rounds alternate their order (off, on, then on, off, ...) so that a drift of
the host over the run falls on both sides alike; the figure is the ratio of
the medians, attached over not attached (1.0: no cost).
"""
import os
import statistics
import time

from .daemon import Vmced

KINDS = ("cpu", "io", "ipi")


def _stops(daemon, name):
    """{(thread, signal): count} since vmced attached"""
    vm = daemon.ctl_json("vm", name)
    return {(s["thread"], s["signal"]): s["count"] for s in vm.get("signal_stops", [])}


def _run(agent, kind, ms):
    r = agent.call("workload", kind=kind, ms=ms, timeout=ms / 1000 + 60)
    return r["ops"] / (r["ns"] / 1e9)


def measure(vm, name, work, rounds=3, ms=3000, kinds=KINDS, vmced_args=()):
    """For each workload kind: ops/s without and with vmced (per round), the
    ratio of the medians, and the signal stops per second while attached.
    A kind the guest cannot run (no disk, one vCPU) is "not measured", with
    the guest's reason."""
    agent = vm.agent
    out = {}
    for kind in kinds:
        off, on, stops, secs = [], [], {}, 0.0
        try:
            _run(agent, kind, 200)  # warm-up, and the guest's own refusal if any
        except Exception as e:  # noqa: BLE001 - the agent's error is the reason
            out[kind] = {"measured": False, "why": str(e)}
            continue
        for r in range(rounds):
            for attached in ((False, True) if r % 2 == 0 else (True, False)):
                if not attached:
                    off.append(_run(agent, kind, ms))
                    continue
                daemon = Vmced(os.path.join(work, f"overhead-{kind}-{r}"),
                               args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", name,
                                     "--agent", vm.vmced_agent_path, *vmced_args])
                try:
                    daemon.wait_attached(name)
                    before = _stops(daemon, name)
                    t = time.monotonic()
                    on.append(_run(agent, kind, ms))
                    secs += time.monotonic() - t
                    for key, n in _stops(daemon, name).items():
                        stops[key] = stops.get(key, 0) + n - before.get(key, 0)
                finally:
                    daemon.stop()
        out[kind] = {
            "measured": True,
            "ops_per_s_detached": off,
            "ops_per_s_attached": on,
            "ratio": statistics.median(on) / statistics.median(off),
            "signal_stops_per_s": {f"{t} {s}": round(n / secs, 1) for (t, s), n in sorted(stops.items())
                                   if n > 0},
            "ms_per_run": ms,
            "rounds": rounds,
        }
    return out


def _spread(values):
    """max/min - 1 of one side's runs: how far apart runs of the same thing fall"""
    return max(values) / min(values) - 1


def print_table(results, title):
    print(title)
    print(f"  {'workload':<8} {'detached ops/s':>15} {'attached ops/s':>15} {'ratio':>6} "
          f"{'run spread':>11}  signal stops/s (attached)")
    for kind, r in results.items():
        if not r["measured"]:
            print(f"  {kind:<8} not measured: {r['why']}")
            continue
        stops = ", ".join(f"{k} {v}" for k, v in r["signal_stops_per_s"].items()) or "none"
        spread = max(_spread(r["ops_per_s_detached"]), _spread(r["ops_per_s_attached"]))
        print(f"  {kind:<8} {statistics.median(r['ops_per_s_detached']):15.0f} "
              f"{statistics.median(r['ops_per_s_attached']):15.0f} {r['ratio']:6.3f} "
              f"{spread * 100:10.1f}%  {stops}")
    print("  (ratio: attached over detached, medians; run spread: max/min - 1 of one side's runs,\n"
          "   the noise a ratio has to be read against)")
