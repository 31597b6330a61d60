#!/usr/bin/env python3
"""A real Prometheus scrapes a real vmced, which forwards an error into a
real guest, and the shipped alert fires.

One 256 MiB TCG guest. Prometheus (Debian's, a private config: 1 s scrapes
and rule evaluations, the package's alert rules) scrapes vmced two ways:
node_exporter's textfile collector (Debian's, textfile only) reading the
file vmced writes, and vmced's own endpoint. vmced forwards one simulated
AO error into the guest; through Prometheus's HTTP API: the series counts
it, the alert VmceGuestMemoryError fires. Then vmced is restarted on the
same journal, serving its endpoint: the poisoned page is in its gauge,
the counters start again. Bad input on the way: the endpoint's address in
use, the textfile's directory missing (one line each, vmced up and
forwarding).
"""
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

from common import Tap, Vm, Vmced, paths, prerequisites, start_victim, wait_for, workdir

NAME = "e2e-metrics"
RULES = os.path.join(paths.ROOT, "host-daemon", "data", "prometheus", "vmce-alerts.yml")

tap = Tap()
prerequisites(tap)
for tool in ("prometheus", "prometheus-node-exporter"):
    if shutil.which(tool) is None:
        tap.bail(f"{tool} is not installed: run/install-deps installs Debian's package")
work = workdir("metrics")
started = []  # what the test started: stopped in the end, whatever happens


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(argv, log):
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    started.append(proc)
    return proc


def start_prometheus(node_port, vmced_port):
    """Prometheus with 1 s scrapes and evaluations, the shipped rules; its
    port"""
    port = free_port()
    config = os.path.join(work, "prometheus.yml")
    with open(config, "w") as f:
        json.dump({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                   "rule_files": [RULES],
                   "scrape_configs": [
                       {"job_name": "node", "static_configs": [{"targets": [f"127.0.0.1:{node_port}"]}]},
                       {"job_name": "vmced", "static_configs": [{"targets": [f"127.0.0.1:{vmced_port}"]}]}]}, f)
    spawn(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={work}/tsdb",
           f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"], os.path.join(work, "prometheus.log"))
    return port


def api(port, path, **params):
    url = f"http://127.0.0.1:{port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)["data"]


def query(port, expr):
    """{job: value} of an instant query"""
    try:
        return {r["metric"].get("job"): float(r["value"][1]) for r in api(port, "query", query=expr)["result"]}
    except OSError:
        return {}


def firing(port, alert):
    return query(port, f'ALERTS{{alertname="{alert}",alertstate="firing",vm="{NAME}"}}')


def case_forwarded(prom, daemon, held_port):
    lines = daemon.log_text().splitlines()
    in_use = [ln for ln in lines if f"cannot listen on 127.0.0.1:{held_port}" in ln]
    tap.ok(len(in_use) == 1 and "Address already in use" in in_use[0] and "vmced goes on without it" in in_use[0],
           "an address in use: one line says so, vmced goes on", diag=daemon.log_text())
    series = f'vmce_memory_errors_total{{vm="{NAME}",kind="ao",outcome="forwarded"}}'
    # its series at 0 before the error: an alert on their increase sees it
    tap.eq(wait_for(lambda: query(prom, series), 15), {"node": 0.0},
           "Prometheus reads the VM's series, at 0, through node_exporter's textfile collector")
    victim = start_victim(vm.agent, mode="idle")
    t0 = time.monotonic()
    ev = daemon.poison(NAME, "--guest-pid", str(victim["pid"]), "--guest-va", victim["va"], "--kind", "ao")
    tap.eq(ev["result"], "injected", "vmced forwarded the error into the guest (its endpoint's failure stopped nothing)")
    tap.eq(wait_for(lambda: (lambda v: v if v.get("node") == 1.0 else None)(query(prom, series)), 10),
           {"node": 1.0}, "the series counts it: 1")
    alert = wait_for(lambda: firing(prom, "VmceGuestMemoryError"), 15)
    tap.ok(alert, f"ALERTS{{alertname=\"VmceGuestMemoryError\",alertstate=\"firing\"}} for the VM, "
                  f"{time.monotonic() - t0:.1f} s after the error", diag=api(prom, "alerts"))
    tap.eq(query(prom, f'vmce_poisoned_pages{{vm="{NAME}"}}'), {"node": 1.0}, "the VM's poisoned-pages gauge: 1")
    tap.eq(firing(prom, "VmceMemoryErrorNotInjected"), {}, "no not-injected alert: it was forwarded")
    mode = os.stat(os.path.join(work, "textfile", "vmce.prom")).st_mode & 0o777
    tap.eq(oct(mode), "0o644", "the textfile is 0644 (node_exporter does not run as root)")


def case_restarted(prom, vmced_port):
    """The same journal, vmced's endpoint; the textfile's directory missing"""
    missing = os.path.join(work, "no-such-dir", "vmce.prom")
    daemon = Vmced(os.path.join(work, "vmced"),
                   args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", NAME,
                         "--agent", vm.vmced_agent_path, "--metrics-listen", f"127.0.0.1:{vmced_port}",
                         "--metrics-textfile", missing])
    try:
        daemon.wait_attached(NAME)
        gauge = wait_for(lambda: query(prom, f'vmce_poisoned_pages{{vm="{NAME}",job="vmced"}}'), 15)
        tap.eq(gauge, {"vmced": 1.0}, "restarted, through its own endpoint: the poisoned page is in the "
                                      "gauge (rebuilt from the journal)")
        tap.eq(query(prom, f'vmce_memory_errors_total{{vm="{NAME}",job="vmced",outcome="forwarded",kind="ao"}}'),
               {"vmced": 0.0}, "its counters start again at 0")
        lines = [ln for ln in daemon.log_text().splitlines() if f"cannot write {missing}" in ln]
        tap.ok(len(lines) == 1 and "is prometheus-node-exporter installed?" in lines[0],
               "a textfile directory missing: one line says so", diag=daemon.log_text())
        tap.ok(daemon.alive() and daemon.ctl_json("status") is not None, "vmced is up")
    finally:
        tap.eq(daemon.stop(), 0, "the restarted vmced stops cleanly")


vm = Vm.start(NAME, mem="256M", state_dir=os.path.join(work, "vm"))
daemon = None
held = socket.socket()
try:
    os.makedirs(os.path.join(work, "textfile"))
    node_port, vmced_port = free_port(), free_port()
    spawn(["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{node_port}",
           "--collector.disable-defaults", "--collector.textfile",
           f"--collector.textfile.directory={work}/textfile"], os.path.join(work, "node-exporter.log"))
    prom = start_prometheus(node_port, vmced_port)
    # an address in use: the test holds it
    held.bind(("127.0.0.1", 0))
    held.listen()
    held_port = held.getsockname()[1]
    vm.wait_ready()
    tap.diag(f"guest ready {vm.ready_seconds:.1f} s after QEMU started")
    daemon = Vmced(os.path.join(work, "vmced"),
                   args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", NAME,
                         "--agent", vm.vmced_agent_path, "--metrics-textfile", f"{work}/textfile/vmce.prom",
                         "--metrics-listen", f"127.0.0.1:{held_port}"])
    daemon.wait_attached(NAME)
    tap.case("forwarded, scraped, alerted", case_forwarded, prom, daemon, held_port)
    tap.eq(daemon.stop(), 0, "vmced stops cleanly on SIGTERM")
    daemon = None
    tap.case("restarted", case_restarted, prom, vmced_port)
finally:
    if daemon is not None:
        daemon.stop()
    for proc in started:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    held.close()
    vm.stop()
tap.done()
