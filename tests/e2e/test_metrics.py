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
import os
import socket
import time

from common import Tap, Vm, Vmced, prerequisites, start_victim, workdir
from vmcelab.prom import Monitoring, free_port, missing

NAME = "e2e-metrics"

tap = Tap()
prerequisites(tap)
if missing():
    tap.bail(f"{', '.join(missing())} not installed: run/install-deps installs Debian's packages")
work = workdir("metrics")


def only(mon, expr, value):
    """{job: value} once Prometheus has that value for @expr in every job"""
    got = mon.query(expr)
    return got if got and all(v == value for v in got.values()) else None


def case_forwarded(mon, daemon, held_port):
    lines = daemon.log_text().splitlines()
    in_use = [ln for ln in lines if f"cannot listen on 127.0.0.1:{held_port}" in ln]
    tap.ok(len(in_use) == 1 and "Address already in use" in in_use[0] and "vmced goes on without it" in in_use[0],
           "an address in use: one line says so, vmced goes on", diag=daemon.log_text())
    series = f'vmce_memory_errors_total{{vm="{NAME}",kind="ao",outcome="forwarded"}}'
    # its series at 0 before the error: an alert on their increase sees it
    tap.eq(mon.wait(lambda: only(mon, series, 0.0), 20), {"node": 0.0},
           "Prometheus reads the VM's series, at 0, through node_exporter's textfile collector")
    victim = start_victim(vm.agent, mode="idle")
    t0 = time.monotonic()
    ev = daemon.poison(NAME, "--guest-pid", str(victim["pid"]), "--guest-va", victim["va"], "--kind", "ao")
    tap.eq(ev["result"], "injected", "vmced forwarded the error into the guest (its endpoint's failure stopped nothing)")
    tap.eq(mon.wait(lambda: only(mon, series, 1.0), 10), {"node": 1.0}, "the series counts it: 1")
    alert = mon.wait(lambda: mon.firing("VmceGuestMemoryError", NAME), 15)
    tap.ok(alert, f"ALERTS{{alertname=\"VmceGuestMemoryError\",alertstate=\"firing\"}} for the VM, "
                  f"{time.monotonic() - t0:.1f} s after the error", diag=mon.api("alerts"))
    tap.eq(mon.query(f'vmce_poisoned_pages{{vm="{NAME}"}}'), {"node": 1.0}, "the VM's poisoned-pages gauge: 1")
    tap.eq(mon.firing("VmceMemoryErrorNotInjected", NAME), {}, "no not-injected alert: it was forwarded")
    mode = os.stat(mon.textfile).st_mode & 0o777
    tap.eq(oct(mode), "0o644", "the textfile is 0644 (node_exporter does not run as root)")


def case_restarted(mon, vmced_port):
    """The same journal, vmced's endpoint; the textfile's directory missing"""
    nowhere = os.path.join(work, "no-such-dir", "vmce.prom")
    daemon = Vmced(os.path.join(work, "vmced"),
                   args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", NAME,
                         "--agent", vm.vmced_agent_path, "--metrics-listen", f"127.0.0.1:{vmced_port}",
                         "--metrics-textfile", nowhere])
    try:
        daemon.wait_attached(NAME)
        gauge = mon.wait(lambda: mon.query(f'vmce_poisoned_pages{{vm="{NAME}",job="vmced"}}'), 15)
        tap.eq(gauge, {"vmced": 1.0}, "restarted, through its own endpoint: the poisoned page is in the "
                                      "gauge (rebuilt from the journal)")
        tap.eq(mon.query(f'vmce_memory_errors_total{{vm="{NAME}",job="vmced",outcome="forwarded",kind="ao"}}'),
               {"vmced": 0.0}, "its counters start again at 0")
        lines = [ln for ln in daemon.log_text().splitlines() if f"cannot write {nowhere}" in ln]
        tap.ok(len(lines) == 1 and "is prometheus-node-exporter installed?" in lines[0],
               "a textfile directory missing: one line says so", diag=daemon.log_text())
        tap.ok(daemon.alive() and daemon.ctl_json("status") is not None, "vmced is up")
    finally:
        tap.eq(daemon.stop(), 0, "the restarted vmced stops cleanly")


vm = Vm.start(NAME, mem="256M", state_dir=os.path.join(work, "vm"))
daemon = None
mon = None
held = socket.socket()
try:
    vmced_port = free_port()
    # (started while the guest boots)
    mon = Monitoring(work, vmced_port)
    # an address in use: the test holds it
    held.bind(("127.0.0.1", 0))
    held.listen()
    held_port = held.getsockname()[1]
    vm.wait_ready()
    tap.diag(f"guest ready {vm.ready_seconds:.1f} s after QEMU started")
    daemon = Vmced(os.path.join(work, "vmced"),
                   args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", NAME,
                         "--agent", vm.vmced_agent_path, "--metrics-textfile", mon.textfile,
                         "--metrics-listen", f"127.0.0.1:{held_port}"])
    daemon.wait_attached(NAME)
    tap.case("forwarded, scraped, alerted", case_forwarded, mon, daemon, held_port)
    tap.eq(daemon.stop(), 0, "vmced stops cleanly on SIGTERM")
    daemon = None
    tap.case("restarted", case_restarted, mon, vmced_port)
finally:
    if daemon is not None:
        daemon.stop()
    if mon is not None:
        mon.stop()
    held.close()
    vm.stop()
tap.done()
