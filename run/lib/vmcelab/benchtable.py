"""One table of vmce's figures (make bench, run/bench --table).

Each part of the bench writes its own build/bench/bench-NAME.json; this
reads those that are there and says "not measured" for the rest, with the
command that measures it: a row never shows a number that was not measured.
The table also goes to build/bench/bench-all.json with the machine it was
measured on (cores, CPU model, kernel, the QEMUs), so that two runs, or two
machines, can be compared.
"""
import json
import os
import platform
import subprocess
import time

from . import paths


def _load(out_dir, name):
    try:
        with open(os.path.join(out_dir, f"bench-{name}.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _qemu_version(binary):
    try:
        r = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
        return r.stdout.splitlines()[0] if r.returncode == 0 and r.stdout else None
    except OSError:
        return None


def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    except OSError:
        pass
    patched = os.path.join(paths.build_dir(), "qemu", "current", "build", "qemu-system-x86_64")
    return {"host": platform.node(), "cores": os.cpu_count(), "cpu_model": model,
            "kernel": platform.release(), "qemu": _qemu_version(paths.qemu()),
            "qemu_patched": _qemu_version(patched) if os.path.exists(patched) else None}


class Table:
    def __init__(self):
        self.rows = []

    def row(self, figure, value, target="", met=None, how=""):
        self.rows.append({"figure": figure, "value": value, "target": target, "met": met, "how": how})

    def missing(self, figure, how, why=None):
        self.row(figure, f"not measured: {why or '`' + how + '` has not run here'}", how=how)


def _us(s):
    return f"{s['median']} / {s['p99']} us"


def _tail(t, d):
    how = "run/bench --only tail"
    if d is None:
        t.missing("signal-stop to injection acknowledged (median / p99)", how)
        return
    cols = d["tail"]
    for kind in ("ao", "ar"):
        for label in ("hmp", "inject-mce"):
            c = cols.get(label, {})
            name = f"{kind.upper()} signal-stop to injection acknowledged, {label} (median / p99)"
            if not c.get("measured"):
                t.missing(name, how, c.get("why"))
                continue
            lat = c[kind]["latency_us"]
            target = "p99 < 1000 us" if label == "inject-mce" else ""
            t.row(name, _us(lat) + f" (vmced {c[kind]['to_monitor_us']['median']}, QEMU "
                  f"{c[kind]['qemu_us']['median']} us at the median)",
                  target, lat["p99"] < 1000 if target else None, how)
        h, q = cols.get("hmp", {}), cols.get("inject-mce", {})
        if h.get("measured") and q.get("measured"):
            t.row(f"{kind.upper()} inject-mce over HMP, median",
                  f"{q[kind]['latency_us']['median'] / h[kind]['latency_us']['median']:.2f}x", how=how)


def _overhead(t, d, key, where, how):
    name = f"throughput with vmced attached over not, {where}"
    if d is None:
        t.missing(name, how)
        return
    for kind, r in d[key].items():
        if not r.get("measured"):
            t.missing(f"{name}: {kind}", how, r.get("why"))
            continue
        stops = sum(r["signal_stops_per_s"].values())
        t.row(f"{name}: {kind}", f"{r['ratio']:.3f} ({stops:g} signal stops/s)", ">= 0.99",
              r["ratio"] >= 0.99, how)


def _main(t, d):
    how = "run/bench"
    if d is None:
        t.missing("guest boot to ready (TCG, 512 MiB)", how)
        return
    b = d["boot_s"]
    t.row("guest boot to ready (TCG, 512 MiB), median / max", f"{b['median']:.2f} / {b['max']:.2f} s",
          "< 5 s", b["max"] < 5, how)
    t.row("vmced RSS, one VM, after the events", f"{d['vmced_rss_kb'] / 1024:.1f} MiB", "< 16 MiB",
          d["vmced_rss_kb"] < 16 * 1024, how)


def _storm(t, d):
    how = "run/bench --only storm"
    if d is None:
        t.missing("storm: errors journaled and injected per second, nothing lost", how)
        return
    s = d["storm"]
    stopped = s.get("first_failure")
    t.row(f"storm: {s['events']} errors, journaled and injected per second",
          f"{s['errors_per_s']:.1f}/s, nothing lost: {'yes' if s['nothing_lost'] else 'NO'}"
          + (f" (stopped at error {stopped['event']}: {stopped['detail']})" if stopped else ""),
          "nothing lost", s["nothing_lost"], how)
    last = s.get("rss_at_stop") or (s.get("rss") or [None])[-1]
    if last:
        t.row(f"storm: vmced RSS after {last['events']} events", f"{last['rss_kb'] / 1024:.1f} MiB", how=how)


def _scale(t, d):
    how = "run/libvirt/bench --domains 64"
    if d is None:
        t.missing("64 libvirt guests: attach, RSS, 64 errors at once", how)
        return
    s = d["scale"]
    t.row(f"{s['domains']} libvirt guests: all attached", f"{s['attach_s']:.1f} s", how=how)
    t.row(f"{s['domains']} libvirt guests: vmced RSS", f"{s['rss_kb'] / 1024:.1f} MiB", "< 48 MiB",
          s["rss_kb"] < 48 * 1024, how)
    lat = s["latency_ms"]
    t.row(f"{s['domains']} errors at once (one per guest): latency p50 / p99",
          f"{lat['median']:.1f} / {lat['p99']:.1f} ms", "p99 < 50 ms", lat["p99"] < 50, how)


def _p1(t, d):
    how = "run/hostlab --bench 10 --qemu build/qemu/current/build/qemu-system-x86_64"
    if d is None:
        t.missing("host poison to the guest's machine check, vmced over QEMU's own", how)
        return
    for r in d["p1"]:
        name = f"{r['accel']} {r['kind']}: host poison to {r['to']}, vmced over QEMU's own (median of {r['n']})"
        if r.get("ratio") is None:
            t.missing(name, how, r.get("why"))
            continue
        t.row(name, f"{r['ratio']:.2f}x ({r['vmced_ms']:.0f} vs {r['qemu_ms']:.0f} ms)", "<= 1.5x",
              r["ratio"] <= 1.5, how)


def build(out_dir):
    t = Table()
    _main(t, _load(out_dir, "main"))
    _tail(t, _load(out_dir, "tail"))
    _overhead(t, _load(out_dir, "overhead"), "overhead_tcg", "TCG", "run/bench --overhead")
    _overhead(t, _load(out_dir, "overhead-kvm"), "overhead_kvm", "KVM (host lab L2)",
              "run/hostlab --overhead")
    _p1(t, _load(out_dir, "p1"))
    _scale(t, _load(out_dir, "scale"))
    _storm(t, _load(out_dir, "storm"))
    return t


def write(out_dir):
    """Prints the table; writes bench-all.json; returns its path"""
    t = build(out_dir)
    m = machine()
    print(f"vmce figures on {m['host']}: {m['cores']} cores, {m['cpu_model']}, kernel {m['kernel']}")
    print(f"  QEMU: {m['qemu']}; patched: {m['qemu_patched'] or 'not built'}")
    width = max(len(r["figure"]) for r in t.rows)
    for r in t.rows:
        mark = {True: "ok", False: "MISSED", None: ""}[r["met"]]
        target = f"  [{r['target']}: {mark}]" if r["target"] and r["met"] is not None else ""
        print(f"  {r['figure']:<{width}}  {r['value']}{target}")
    path = os.path.join(out_dir, "bench-all.json")
    with open(path, "w") as f:
        json.dump({"machine": m, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "rows": t.rows}, f, indent=2)
    print(f"(also in {path})")
    return path
