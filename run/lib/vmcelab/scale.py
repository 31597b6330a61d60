"""run/bench --only scale: one vmced and a host full of QEMUs.

Most of the QEMUs are paused before their guest ever ran (-S, 16 MiB):
to vmced they are VMs like any other (threads to trace, a monitor, a RAM
layout), and this 2-core machine can hold hundreds of them. A few run a
real guest, for the burst: one error into each of them at once, each a
real guest process losing a real page (its SIGBUS checked).

What is measured is vmced's: its attach of them all (vmced started to the
last attach answered, all requests pipelined on one control connection),
its RSS and file descriptors with them attached, its CPU and wake-ups while
they idle, and the burst's signal-stop to injection acknowledged.
"""
import os
import time

from . import kernels, qemus
from .procfs import cpu_ns, n_fds, status as proc_status, thread_states
from .daemon import ControlConnection, Vmced
from .stats import percentile
from .vm import Vm


def start_all(work, qemu, kernel, n, running, mem_running):
    """@running guests that boot (batches of 8: 2 cores boot 8 TCG guests
    at a time without any taking over a minute), then the paused rest"""
    vms = []
    for i in range(running):
        vms.append(Vm.start(f"scale-r{i:03}", mem=mem_running, qemu=qemu, kernel=kernel.image,
                            initrd=kernel.initrd, disk=False,
                            state_dir=os.path.join(work, f"r{i:03}")))
        if len(vms) % 8 == 0 or i == running - 1:
            for vm in vms[-8:]:
                vm.wait_ready(timeout=300)
    for i in range(n - running):
        vms.append(Vm.start(f"scale-p{i:03}", mem="16M", qemu=qemu, kernel=kernel.image,
                            initrd=kernel.initrd, disk=False, extra=["-S"],
                            state_dir=os.path.join(work, f"p{i:03}")))
    # a paused QEMU is up once its monitor listens
    deadline = time.monotonic() + 120
    for vm in vms[running:]:
        while not os.path.exists(vm.vmced_qmp_path):
            if time.monotonic() > deadline or not vm.alive():
                raise RuntimeError(f"{vm.name}: QEMU did not come up: {vm.qemu_log()[-500:]}")
            time.sleep(0.01)
    return vms


def attach_all(daemon, vms, t_start):
    """Every attach request at once on one connection; (seconds from vmced's
    start to the last answer, {name: error})"""
    ctl = ControlConnection(daemon.socket)
    try:
        for i, vm in enumerate(vms, 1):
            args = {"pid": vm.pid, "qmp": vm.vmced_qmp_path, "name": vm.name}
            if vm.name.startswith("scale-r"):
                args["agent"] = vm.vmced_agent_path
            ctl.send("attach", i, **args)
        ctl.flush()
        got = {}
        while len(got) < len(vms):
            more = ctl.replies(len(vms) - len(got), 120)
            if not more:
                break
            got.update(more)
        t_all = time.monotonic() - t_start
    finally:
        ctl.close()
    errors = {}
    for i, vm in enumerate(vms, 1):
        a = got.get(i)
        if a is None:
            errors[vm.name] = "no answer within 120 s"
        elif "error" in a:
            errors[vm.name] = a["error"]["desc"]
    return t_all, errors


def burst(daemon, vms):
    """One AO into a victim process's page in each running guest, all sent
    at once: signal-stop to acknowledged per error, and every victim's
    SIGBUS"""
    victims = {}
    for vm in vms:
        vm.agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)
        victims[vm.name] = vm.agent.call("victim-start", mode="idle")
    ctl = ControlConnection(daemon.socket)
    try:
        for i, vm in enumerate(vms, 1):
            v = victims[vm.name]
            ctl.send("poison", i, vm=vm.name, gpa=v["gpa"], kind="ao")
        ctl.flush()
        got = ctl.replies(len(vms), 120)
    finally:
        ctl.close()
    lat, via, results = [], {}, {}
    for i, vm in enumerate(vms, 1):
        a = got.get(i, {})
        r = a.get("return", {})
        res = r.get("result") or ("error: " + a["error"]["desc"] if "error" in a else "no answer")
        results[res] = results.get(res, 0) + 1
        if r.get("latency_us") is not None:
            lat.append(r["latency_us"])
        via[r.get("via")] = via.get(r.get("via"), 0) + 1
    sigbus = 0
    deadline = time.monotonic() + 60
    for vm in vms:
        v = victims[vm.name]
        while time.monotonic() < deadline:
            st = vm.agent.call("victim-status", pid=v["pid"])
            if st.get("sigbus"):
                sigbus += 1
                break
            time.sleep(0.05)
    return {"errors": len(vms), "results": results, "via": via, "victims_sigbus": sigbus,
            "latency_ms": {"p50": round(percentile(lat, 50) / 1000, 2) if lat else None,
                           "p99": round(percentile(lat, 99) / 1000, 2) if lat else None,
                           "max": round(max(lat) / 1000, 2) if lat else None}}


def figures(work, n=256, running=16, qemu="vmce-10.0", kernel="vmce-6.12", mem_running="128M",
            idle_s=30, gone=0):
    """run/bench --only scale. @gone: QEMUs killed just before the attach
    (the bad input: vmced must say so for each, once, and attach the rest)"""
    q = qemus.resolve(qemu)
    k = kernels.resolve(kernel)
    out = {"vms": n, "running": running, "paused": n - running, "qemu": q.label, "kernel": k.name,
           "gone_before_attach": gone}
    vms = []
    daemon = None
    try:
        t0 = time.monotonic()
        vms = start_all(work, q.binary, k, n, running, mem_running)
        out["start_all_s"] = round(time.monotonic() - t0, 1)
        print(f"scale: {n} QEMUs ({q.label}) up in {out['start_all_s']} s: {running} running "
              f"{k.name} guests of {mem_running}, {n - running} paused (-S, 16 MiB)", flush=True)
        doomed = vms[running:running + gone]
        for vm in doomed:
            os.kill(vm.pid, 9)
        t_start = time.monotonic()
        daemon = Vmced(os.path.join(work, "vmced"), args=["--realtime-priority", "1"])
        t_all, errors = attach_all(daemon, vms, t_start)
        attached = n - len(errors)
        out["attach"] = {"seconds": round(t_all, 2), "attached": attached, "errors": len(errors),
                         "error_lines": sorted(set(e.split(": ", 1)[-1] for e in errors.values()))[:5],
                         "per_vm_ms": round(t_all * 1000 / max(1, attached), 1)}
        unexpected = sorted(set(errors) - {vm.name for vm in doomed})
        out["attach"]["unexpected_errors"] = {name: errors[name] for name in unexpected[:5]}
        print(f"scale: vmced started to all {attached} attached: {t_all:.2f} s "
              f"({out['attach']['per_vm_ms']} ms per VM); {len(errors)} refused"
              + (f" ({len(doomed)} QEMUs killed before: {out['attach']['error_lines']})" if errors else ""),
              flush=True)
        if unexpected:
            print(f"scale: UNEXPECTED attach errors: {out['attach']['unexpected_errors']}")
        time.sleep(2)
        pid = daemon.proc.pid
        out["rss_kb"] = proc_status(pid, "VmRSS")
        out["rss_anon_kb"] = proc_status(pid, "RssAnon")
        out["fds"] = n_fds(pid)
        print(f"scale: vmced RSS {out['rss_kb']} kB ({out['rss_anon_kb']} kB anonymous), "
              f"{out['fds']} file descriptors, with {attached} VMs attached", flush=True)
        c0, w0 = cpu_ns(pid), proc_status(pid, "voluntary_ctxt_switches")
        t = time.monotonic()
        time.sleep(idle_s)
        el = time.monotonic() - t
        c1, w1 = cpu_ns(pid), proc_status(pid, "voluntary_ctxt_switches")
        out["idle"] = {"seconds": round(el, 1), "cpu_pct": round((c1 - c0) / 1e9 / el * 100, 4),
                       "cpu_ms": round((c1 - c0) / 1e6, 2), "wakeups_per_s": round((w1 - w0) / el, 2)}
        print(f"scale: {attached} VMs idle for {el:.0f} s: vmced CPU {out['idle']['cpu_pct']}% of a core "
              f"({out['idle']['cpu_ms']} ms), {out['idle']['wakeups_per_s']} wake-ups/s", flush=True)
        if running:
            out["burst"] = burst(daemon, vms[:running])
            b = out["burst"]
            print(f"scale: one AO into each of {running} running guests at once: signal-stop to "
                  f"acknowledged p50 {b['latency_ms']['p50']} ms, p99 {b['latency_ms']['p99']} ms "
                  f"(max {b['latency_ms']['max']}); {b['results']}, via {b['via']}; "
                  f"{b['victims_sigbus']} of {running} victims got SIGBUS", flush=True)
        out["vmced_alive"] = daemon.alive()
        out["qemus_alive"] = sum(1 for vm in vms if vm.alive())
        out["qemu_threads_stopped"] = sum(
            1 for vm in vms if vm.alive() for st in thread_states(vm.pid).values() if st == "t")
    finally:
        if daemon is not None:
            daemon.stop()
        for vm in vms:
            try:
                vm.stop(timeout=5)
            except Exception:  # noqa: BLE001 - the others still go
                pass
    print(f"scale: at the end: vmced alive {out.get('vmced_alive')}, {out.get('qemus_alive')} QEMUs alive, "
          f"{out.get('qemu_threads_stopped')} QEMU threads left stopped")
    return out

