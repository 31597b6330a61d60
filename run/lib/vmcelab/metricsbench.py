"""run/bench --only metrics: vmced's metrics with a host full of VMs, and
the alert's delay.

--vms N QEMUs (256) attached to one vmced, one of them a real guest, the
rest paused before their guest ran (-S, 16 MiB: to vmced VMs like any
other, scale.py's). vmced writes node_exporter's textfile and serves its
endpoint; a Prometheus of the bench's own (prom.py: node_exporter's
textfile collector alone, 1 s scrapes and rule evaluations, the shipped
rules) scrapes both. Measured: the metrics' size (bytes and series, each
format), GET /metrics as a client times it, Prometheus's own scrape
duration of each job, vmced's CPU for a second of scrapes; then --alerts
times one AO into the running guest (a victim process's page), each time
under a new name (detached and attached again: new series at 0, a new
alert), from vmcectl poison's call to ALERTS firing, through each job.
"""
import os
import statistics
import time
import urllib.request

from . import prom
from .daemon import Vmced
from .procfs import cpu_ns
from .scale import attach_all
from .stats import percentile
from .vm import Vm

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


def start_vms(work, n):
    """One guest that runs (the errors'), then n - 1 paused QEMUs"""
    vms = [Vm.start("metrics-r000", mem="256M", state_dir=os.path.join(work, "r000"))]
    for i in range(n - 1):
        vms.append(Vm.start(f"metrics-p{i:03}", mem="16M", disk=False, extra=["-S"],
                            state_dir=os.path.join(work, f"p{i:03}")))
    vms[0].wait_ready(timeout=300)
    deadline = time.monotonic() + 180
    for vm in vms[1:]:
        while not os.path.exists(vm.vmced_qmp_path):
            if time.monotonic() > deadline or not vm.alive():
                raise RuntimeError(f"{vm.name}: QEMU did not come up: {vm.qemu_log()[-500:]}")
            time.sleep(0.01)
    return vms


def get(port, accept=OPENMETRICS):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept": accept})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=10) as r:
        body = r.read()
    return time.monotonic() - t0, body


def read(path):
    with open(path, "rb") as f:
        return f.read()


def series(text):
    return sum(1 for line in text.decode().splitlines() if line and not line.startswith("#"))


def scrape_figures(daemon, mon, vmced_port, gets=50):
    """Sizes, GET /metrics times, Prometheus's scrape durations"""
    out = {}
    times = []
    c0 = cpu_ns(daemon.proc.pid)
    for _ in range(gets):
        s, om = get(vmced_port)
        times.append(s * 1000)
    cpu_ms = (cpu_ns(daemon.proc.pid) - c0) / 1e6
    _, text = get(vmced_port, accept="text/plain")
    # (written at most once a second: the last attaches' write may be due)
    textfile = mon.wait(lambda: (lambda b: b if series(b) == series(text) else None)(read(mon.textfile)), 10)
    out["openmetrics"] = {"bytes": len(om), "series": series(om)}
    out["prometheus_text"] = {"bytes": len(text), "series": series(text)}
    out["textfile_bytes"] = len(textfile)
    out["get_ms"] = {"median": round(statistics.median(times), 2), "p99": round(percentile(times, 99), 2),
                     "n": gets}
    out["vmced_cpu_ms_per_get"] = round(cpu_ms / gets, 2)
    # what Prometheus saw: its own scrape duration, over the last 20 s
    mon.wait(lambda: len(mon.query("up == 1")) == 2, 30)
    time.sleep(20)
    dur = mon.query("avg_over_time(scrape_duration_seconds[20s])")
    mx = mon.query("max_over_time(scrape_duration_seconds[20s])")
    samples = mon.query("scrape_samples_scraped")
    out["prometheus_scrape_ms"] = {job: {"avg": round(dur[job] * 1000, 2), "max": round(mx.get(job, 0) * 1000, 2),
                                         "samples": int(samples.get(job, 0))} for job in dur}
    return out


def one_alert(daemon, mon, vm, name):
    """Attached as @name (new series), one AO; seconds from the poison's
    call to the alert firing, per job"""
    daemon.ctl("detach", daemon.current_name)
    daemon.ctl("attach", "--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", name,
               "--agent", vm.vmced_agent_path)
    daemon.current_name = name
    zero = f'vmce_memory_errors_total{{vm="{name}",kind="ao",outcome="forwarded"}}'
    if not mon.wait(lambda: len(mon.query(f"{zero} == 0")) == 2, 30):
        raise RuntimeError(f"Prometheus did not see {name}'s series at 0 through both jobs")
    victim = vm.agent.call("victim-start", mode="idle")
    t0 = time.monotonic()
    ev = daemon.poison(name, "--guest-pid", str(victim["pid"]), "--guest-va", victim["va"], "--kind", "ao")
    if ev["result"] != "injected":
        raise RuntimeError(f"the error was {ev['result']}: {ev.get('detail')}")
    fired = {}
    while len(fired) < 2 and time.monotonic() - t0 < 30:
        for job in mon.firing("VmceGuestMemoryError", name):
            fired.setdefault(job, round(time.monotonic() - t0, 2))
        time.sleep(0.05)
    return fired


def alert_figures(daemon, mon, vm, runs):
    delays = {"node": [], "vmced": []}
    for i in range(runs):
        fired = one_alert(daemon, mon, vm, f"metrics-alert-{i}")
        for job in delays:
            if job in fired:
                delays[job].append(fired[job])
        print(f"metrics: alert {i + 1}/{runs}: fired {fired} s after the error", flush=True)
    return {job: {"median_s": round(statistics.median(d), 2) if d else None, "max_s": max(d) if d else None,
                  "n": len(d), "of": runs} for job, d in delays.items()}


def figures(work, n=256, runs=5):
    missing = prom.missing()
    if missing:
        return {"measured": False, "why": f"{', '.join(missing)} not installed (run/install-deps)"}
    out = {"vms": n, "alert_runs": runs, "intervals": "1 s scrape, 1 s evaluation"}
    vms, daemon, mon = [], None, None
    try:
        t0 = time.monotonic()
        vms = start_vms(work, n)
        print(f"metrics: {n} QEMUs up in {time.monotonic() - t0:.0f} s (1 guest running, {n - 1} paused)",
              flush=True)
        vmced_port = prom.free_port()
        mon = prom.Monitoring(work, vmced_port)
        daemon = Vmced(os.path.join(work, "vmced"),
                       args=["--metrics-textfile", mon.textfile, "--metrics-listen", f"127.0.0.1:{vmced_port}"])
        _, errors = attach_all(daemon, vms, time.monotonic())
        if errors:
            raise RuntimeError(f"attach errors: {list(errors.items())[:3]}")
        daemon.current_name = vms[0].name
        out["scrape"] = scrape_figures(daemon, mon, vmced_port)
        print_scrape(n, out["scrape"])
        out["alert"] = alert_figures(daemon, mon, vms[0], runs)
        print_alert(out["alert"], runs)
    finally:
        if daemon is not None:
            daemon.stop()
        if mon is not None:
            mon.stop()
        for vm in vms:
            try:
                vm.stop(timeout=5)
            except Exception:  # noqa: BLE001 - the others still go
                pass
    return out


def print_scrape(n, s):
    om, pt = s["openmetrics"], s["prometheus_text"]
    print(f"metrics: {n} VMs attached: OpenMetrics {om['bytes']} bytes, {om['series']} series; "
          f"Prometheus text (the textfile) {s['textfile_bytes']} bytes, {pt['series']} series", flush=True)
    print(f"metrics: GET /metrics median {s['get_ms']['median']} ms, p99 {s['get_ms']['p99']} ms "
          f"(n {s['get_ms']['n']}); vmced CPU {s['vmced_cpu_ms_per_get']} ms per GET", flush=True)
    for job, d in s["prometheus_scrape_ms"].items():
        print(f"metrics: Prometheus's scrape of job {job}: avg {d['avg']} ms, max {d['max']} ms, "
              f"{d['samples']} samples", flush=True)


def print_alert(a, runs):
    for job, d in a.items():
        print(f"metrics: error to VmceGuestMemoryError firing, through job {job}: median {d['median_s']} s, "
              f"max {d['max_s']} s ({d['n']} of {runs} fired)", flush=True)
