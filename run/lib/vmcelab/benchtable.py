"""One table of vmce's figures (make bench, run/bench --table).

Each part of the bench writes its own build/bench/bench-NAME.json; this
reads those that are there and says "not measured" for the rest, with the
command that measures it: a row never shows a number that was not measured.
The table also goes to build/bench/bench-all.json with the machine it was
measured on (cores, CPU model, kernel, the QEMUs), so that two runs, or two
machines, can be compared.
"""
import functools
import json
import os
import platform
import time

from . import overhead, qemus


def _load(out_dir, name):
    try:
        with open(os.path.join(out_dir, f"bench-{name}.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    except OSError:
        pass
    versions = {}
    for name in qemus.NAMES:
        binary = qemus.binary(name)
        versions[name] = qemus.version_line(binary) if os.path.exists(binary) else None
    return {"host": platform.node(), "cores": os.cpu_count(), "cpu_model": model,
            "kernel": platform.release(), "qemu": qemus.version_line(qemus.binary()),
            "qemu_patched": versions["vmce-10.0"], "qemus": versions}


class Table:
    def __init__(self):
        self.rows = []

    def row(self, figure, value, target="", met=None, how=""):
        self.rows.append({"figure": figure, "value": value, "target": target, "met": met, "how": how})

    def missing(self, figure, how, why=None):
        self.row(figure, f"not measured: {why or '`' + how + '` has not run here, or did not finish (its output says why)'}",
                 how=how)


def _us(s):
    return f"{s['median']} / {s['p99']} us"


def _tail(t, d, how):
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
            parts = [("vmced", "to_monitor_us"), ("of it queued", "queued_us"), ("QEMU", "qemu_us")]
            t.row(name, _us(lat) + " (" + ", ".join(f"{who} {c[kind][key]['median']} / {c[kind][key]['p99']}"
                                                    for who, key in parts if key in c[kind]) + ")",
                  target, lat["p99"] < 1000 if target else None, how)
        h, q = cols.get("hmp", {}), cols.get("inject-mce", {})
        if h.get("measured") and q.get("measured"):
            t.row(f"{kind.upper()} inject-mce over HMP, median",
                  f"{q[kind]['latency_us']['median'] / h[kind]['latency_us']['median']:.2f}x", how=how)


def _overhead(t, d, how, key, where):
    name = f"throughput with vmced attached over not, {where}"
    for kind, r in d[key].items():
        if not r.get("measured"):
            t.missing(f"{name}: {kind}", how, r.get("why"))
            continue
        if "ratio_interval" not in r:
            t.missing(f"{name}: {kind}", how, "figures from an older run/bench without the interval and "
                                              "the bound: run it again")
            continue
        low, high, conf = r["ratio_interval"]
        stops = sum(r["stops_per_s"].values())
        met, why = overhead.verdict(r)
        t.row(f"{name}: {kind}", f"{r['ratio']:.3f} ({low:.3f}-{high:.3f} at {conf:.0%}); bound "
              f"{r['bound']:.5f} ({stops:g} stops/s, waited {r['stopped_us'] / 1000:.1f} ms, vmced CPU "
              f"{r['vmced_cpu_us'] / 1000:.1f} ms in {r['attached_s']:.0f} s); {why}",
              f">= {overhead.TARGET}", met, how)


def _main(t, d, how):
    b = d["boot_s"]
    t.row("guest boot to ready (TCG, 512 MiB), median / max", f"{b['median']:.2f} / {b['max']:.2f} s",
          "< 5 s", b["max"] < 5, how)
    t.row("vmced RSS, one VM, after the events", f"{d['vmced_rss_kb'] / 1024:.1f} MiB", "< 16 MiB",
          d["vmced_rss_kb"] < 16 * 1024, how)


def _storm(t, d, how):
    s = d["storm"]
    many = s.get("vms", 1) > 1
    where = f"into {s['vms']} guests at once" if many else "into one guest"
    if "errors" not in s:  # an earlier storm's figures (one guest, HMP, a fixed gap)
        t.row(f"storm: {s['events']} errors, journaled and injected per second",
              f"{s['errors_per_s']:.1f}/s, nothing lost: {'yes' if s['nothing_lost'] else 'NO'}",
              "nothing lost", s["nothing_lost"], how)
        return
    target = None if many else ">= 500/s, nothing lost"
    met = None if many else (s["errors_per_s"] >= 500 and s["nothing_lost"])
    t.row(f"storm: {s['errors']} AO errors {where} ({s['qemu']}), per second",
          f"{s['errors_per_s']:.1f}/s, nothing lost: {'yes' if s['nothing_lost'] else 'NO'}; "
          f"{s['journal']['injected']} injected; QEMU busy {s['journal']['busy_retries']} time(s)",
          target, met, how)
    lat = s.get("latency_ms") or {}
    t.row(f"storm {where}: signal-stop to acknowledged p50 / p99",
          f"{lat.get('p50')} / {lat.get('p99')} ms", how=how)
    t.row(f"storm {where}: vmced RSS after", f"{s['rss_after_kb'] / 1024:.1f} MiB", how=how)


def _scale_qmp(t, d, how):
    s = d["scale"]
    a = s["attach"]
    n = a["attached"]
    t.row(f"{s['vms']} QEMUs (direct QMP): vmced started to all attached", f"{a['seconds']:.2f} s ({n} attached)",
          "< 10 s", a["seconds"] < 10, how)
    t.row(f"{n} QEMUs attached: vmced RSS", f"{s['rss_kb'] / 1024:.1f} MiB", "< 64 MiB",
          s["rss_kb"] < 64 * 1024, how)
    t.row(f"{n} QEMUs idle: vmced CPU", f"{s['idle']['cpu_pct']}% of a core, "
          f"{s['idle']['wakeups_per_s']} wake-ups/s", "< 0.1%", s["idle"]["cpu_pct"] < 0.1, how)
    b = s.get("burst")
    if b:
        t.row(f"one error into each of {b['errors']} running guests at once (direct QMP), p99",
              f"{b['latency_ms']['p99']} ms (p50 {b['latency_ms']['p50']}); {b['victims_sigbus']} victims got SIGBUS",
              "< 50 ms", b["latency_ms"]["p99"] is not None and b["latency_ms"]["p99"] < 50, how)


def _scale(t, d, how):
    s = d["scale"]
    running = s.get("running", s["domains"])
    what = f"{s['domains']} libvirt guests" + (f" ({s['paused']} paused)" if s.get("paused") else "")
    t.row(f"{what}: all attached", f"{s['attach_s']:.1f} s", "< 10 s" if s.get("paused") else None,
          s["attach_s"] < 10 if s.get("paused") else None, how)
    t.row(f"{what}: vmced RSS", f"{s['rss_kb'] / 1024:.1f} MiB", "< 64 MiB", s["rss_kb"] < 64 * 1024, how)
    if "idle_cpu_pct" in s:
        t.row(f"{what}: vmced CPU idle", f"{s['idle_cpu_pct']}% of a core", "< 0.1%", s["idle_cpu_pct"] < 0.1, how)
    lat = s["latency_ms"]
    own = s.get("vmced_ms")
    t.row(f"{running} errors at once through libvirt (one per running guest): latency p50 / p99",
          f"{lat['median']:.1f} / {lat['p99']:.1f} ms"
          + (f" (vmced {own['median']:.2f} / {own['p99']:.2f} ms)" if own else ""),
          "p99 < 50 ms", lat["p99"] < 50, how)


def _restarts(t, d, how):
    r = d["libvirt_restarts"]
    for side in ("without_vmced", "with_vmced"):
        name = f"libvirtd restarts survived under load ({r['load']}, {r['domains']} domains), " \
               + side.replace("_", " ")
        if side not in r:
            t.missing(name, how, "that side was not run (--only)")
            continue
        ok = sum(x["survived"] for x in r[side])
        t.row(name, f"{ok} of {len(r[side])}", "all", ok == len(r[side]), how)


def _remote(t, d, how):
    r = d["remote"]
    name = "vmcectl status over ssh vs here (median)"
    if not r.get("measured"):
        t.missing(name, how, r.get("why"))
        return
    t.row(name, f"{r['ssh']['median']:.1f} vs {r['local']['median']:.1f} ms ({r['ratio']:.0f}x)", how=how)


def _fleet(t, d, how):
    f = d["fleet"]
    for label, r in f.items():
        if not isinstance(r, dict):
            continue
        what = label if label.startswith("run/campaign") else f"virsh campaign, {label}"
        t.row(f"{what} across the fleet: cases per hour",
              f"{r['cases_per_hour']} ({r['cases']} cases in {r['s']:.0f} s"
              + ("" if r["all_passed"] else ", NOT all passed") + ")", how=how)


def _qemus(t, d, how):
    for name, c in d["qemus"].items():
        for kind in ("ao", "ar"):
            figure = f"{kind.upper()} signal-stop to injection acknowledged, {name} (median / p99)"
            if not c.get("measured"):
                t.missing(figure, how, c.get("why"))
                continue
            t.row(figure, f"{_us(c[kind])} ({c['via']}; QEMU {c['release']})", how=how)


def _p1(t, d, how):
    # per QEMU where the run had several (run/hostlab --bench --qemus); an
    # AO under KVM times the AMD guest's bank poll as much as the forwarder
    # (README, Figures)
    by_qemu = d.get("by_qemu") or {"": d["p1"]}
    for slug, rows in by_qemu.items():
        for r in rows:
            # a side the bench leaves out by design (that QEMU cannot
            # recover there: it aborts under TCG, or the guest panics) is
            # no comparison to show
            if len(by_qemu) > 1 and r.get("ratio") is None and "not run" in (r.get("why") or ""):
                continue
            _p1_row(t, r, how, f"{slug} " if len(by_qemu) > 1 else "")


def _p1_row(t, r, how, prefix):
    name = (f"{prefix}{r['accel']} {r['kind']}: host poison to {r['to']}, vmced over QEMU's own "
            f"(median of {r['n']})")
    if r.get("ratio") is None:
        t.missing(name, how, r.get("why"))
        return
    t.row(name, f"{r['ratio']:.2f}x ({r['vmced_ms']:.0f} vs {r['qemu_ms']:.0f} ms)", "<= 1.5x",
          r["ratio"] <= 1.5, how)


def _images(t, d, how):
    i = d["images"]
    cold = i.get("cold_build_s") or (i.get("build") or {}).get("debian-12", {}).get("cold_build_s")
    t.row("guest image debian-12: cold build, then cached", f"{cold} s, then {i['cached_s']} s", how=how)
    t.row("guest image debian-12: boot to qemu-guest-agent answering, to vmce's tools listening (median)",
          f"{i['boot_to_qga_s']['median']:.1f} s, {i['boot_to_tools_s']['median']:.1f} s (TCG)", how=how)
    for label, r in i["cases_per_hour"].items():
        t.row(f"cases per hour, images.ini on {label}: with its boot, after it",
              f"{r['per_hour']}, {r['per_hour_after_boot']} (a case {r['case_s']['median']:.2f} s)", how=how)


def _hugepage(t, d, how):
    h = d["hugepage"]
    on = h.get("backing", "QEMU's own memory")
    for policy in ("one", "all", "salvage"):
        if policy not in h:  # (a file from before salvage)
            continue
        c, n = h[policy]["outcomes"], h[policy].get("neighbours") or {}
        kept = (f"; the process's 511 other pages: {n['intact']['median']:.0f} intact (median)" if n.get("intact")
                else "")
        t.row(f"a 2 MiB host page lost under a guest THP (guest RAM: {on}), hugepage = {policy}: after a "
              "follow-up workload",
              f"{c['survived']} survived, {c['process killed']} process killed, {c['guest panicked']} guest "
              f"panicked, {c.get('paused by vmced', 0)} paused by vmced of {h['runs']}"
              + (f" ({c['not run']} not run)" if c.get("not run") else "") + kept, how=how)
    tell = h["all"].get("tell_all_s")
    if tell:
        t.row("hugepage = all: the other 511 pages told (median / max)",
              f"{tell['median']:.1f} / {tell['max']:.1f} s (inject-gap-ms 20)", how=how)
    sv = h.get("salvage", {}).get("salvage") or {}
    if "us" in sv:
        t.row("hugepage = salvage: the signal to the threads let go (median / max), bytes salvaged, guest pages lost",
              f"{sv['us']['median'] / 1000:.1f} / {sv['us']['max'] / 1000:.1f} ms, {sv['bytes']['median'] / 1024:.0f} "
              f"KiB, {sv['lost']['max']:.0f} of 512", how=how, target="1 of 512", met=sv["lost"]["max"] == 1)
    if h.get("1G"):
        t.missing("a 1 GiB host page lost under a guest", how, why=h["1G"])


def _migration(t, d, how):
    m = d["migration"]
    by = {r["poisoned"]: r for r in m["summary"]}
    base = by.get(0, {})
    for n in (1, 512, 10000):
        r = by.get(n)
        if r is None:
            continue
        t.row(f"live migration with {n if n < 10000 else '10^4'} poisoned page(s), {m['qemu']}: total, downtime "
              f"over none ({base.get('total_ms')} ms, {base.get('downtime_ms')} ms)",
              f"{r['total_ratio']:.2f}x, {r['downtime_ratio']:.2f}x (source vCPUs held "
              f"{r['src_vcpus_held_us'] / 1000:.0f} ms)", how=how,
              target="<= 1.05x", met=r["total_ratio"] <= 1.05 and r["downtime_ratio"] <= 1.05)


def _drain(t, d, how):
    dr = d["drain"]
    ok = sum(r["migrated"] for r in dr["rows"])
    poisoned = [r for r in dr["rows"] if r["poisoned_pages"]]
    t.row(f"drain of a libvirt host: {dr['domains']} guests ({dr['mem']}), {dr['poisoned_domains']} with a "
          "poisoned page", f"{ok} of {dr['domains']} in {dr['seconds']} s (the poisoned ones "
          + ", ".join(f"{r['seconds']:.1f}" for r in poisoned) + " s)", how=how)


def _metrics(t, d, how):
    m = d["metrics"]
    if not m.get("scrape"):
        t.missing("metrics at 256 VMs: size, scrape time; error to alert firing", how, m.get("why"))
        return
    s, om = m["scrape"], m["scrape"]["openmetrics"]
    scrape = s["prometheus_scrape_ms"]
    t.row(f"metrics at {m['vms']} VMs: size, Prometheus's scrape (avg) of vmced's endpoint / node_exporter",
          f"{om['bytes'] / 1024:.0f} KiB, {om['series']} series; {scrape['vmced']['avg']} ms / "
          f"{scrape['node']['avg']} ms", how=how)
    a = m["alert"]
    t.row("error to VmceGuestMemoryError firing at 1 s intervals, endpoint / textfile (median)",
          f"{a['vmced']['median_s']} s / {a['node']['median_s']} s", how=how)


def _arm64(t, d, how):
    a = d["arm64"]
    t.row("Arm64 guest (TCG, AAVMF) boot to ready, restored copy to ready (median)",
          f"{a['boot_s']['median']:.1f} s, {a['restore_s']['median']:.1f} s", how=how)
    if a.get("matrix"):
        m = a["matrix"]
        t.row("Arm64 judged matrix (run/campaigns/arm64.ini, vmce-10.2-arm64): time, cases as expected",
              f"{m['seconds']:.0f} s, {m['verdicts'].get('pass', 0)} of {m['cases']} (load {m['load_before']})",
              how=how)
    if a.get("cold"):
        c = a["cold"]
        t.row("Arm64 guest cold build: kernel fetch, tools cross-compiled, initramfs",
              f"{c['kernel_fetch_s']} s, {c['tools_cross_compile_s']} s, {c['initramfs_s']} s", how=how)


# each part of the bench: its figure file, the command that writes it, what
# the table says when it is not there, and how it fills its rows
PARTS = [
    ("main", "run/bench", "guest boot to ready (TCG, 512 MiB)", _main),
    ("tail", "run/bench --only tail", "signal-stop to injection acknowledged (median / p99)", _tail),
    ("qemus", "run/bench --only qemus", "signal-stop to injection acknowledged per QEMU (median / p99)",
     _qemus),
    ("overhead", "run/bench --overhead", "throughput with vmced attached over not, TCG",
     functools.partial(_overhead, key="overhead_tcg", where="TCG")),
    ("overhead-kvm", "run/hostlab --overhead", "throughput with vmced attached over not, KVM (host lab L2)",
     functools.partial(_overhead, key="overhead_kvm", where="KVM (host lab L2)")),
    ("p1", "run/hostlab --bench 10 --qemus all",
     "host poison to the guest's machine check, vmced over QEMU's own", _p1),
    ("scale", "run/libvirt/bench --domains 64 --mem 128M --paused 192",
     "256 libvirt guests (64 running): attach, RSS, idle CPU, 64 errors at once", _scale),
    ("libvirt-restarts", "run/libvirt/restarts", "libvirtd restarts survived under load, with and without vmced",
     _restarts),
    ("fleet", "run/fleet bench", "virsh and judged campaigns across the fleet: cases per hour, 1 host and 3", _fleet),
    ("remote", "run/bench --only remote", "vmcectl status over ssh vs here (median)", _remote),
    ("images", "run/bench --only images", "the operator's own guests: image build, boot to qga, cases per hour",
     _images),
    ("hugepage", "run/bench --only hugepage", "a lost huge page: guests surviving under hugepage = one, all, salvage",
     _hugepage),
    ("storm", "run/bench --only storm", "storm: errors journaled and injected per second, nothing lost",
     _storm),
    ("storm-16vm", "run/bench --only storm --storm-vms 16", "storm into 16 guests at once", _storm),
    ("scale-qmp", "run/bench --only scale", "256 QEMUs: attach, RSS, idle CPU, a burst into 64", _scale_qmp),
    ("migration-debian-7.2", "run/bench --only migration",
     "live migration with poisoned pages over none, Debian's QEMU 7.2", _migration),
    ("migration-vmce-10.0", "run/bench --only migration --migration-qemu vmce-10.0",
     "live migration with poisoned pages over none, vmce-10.0", _migration),
    ("drain", "run/bench --only drain", "drain of a libvirt host of 8 guests, 2 poisoned", _drain),
    ("metrics", "run/bench --only metrics", "metrics at 256 VMs: size, scrape time; error to alert firing",
     _metrics),
    ("arm64", "run/bench --only arm64", "Arm64 guest (TCG, AAVMF) boot to ready, restored copy to ready (median)",
     _arm64),
]


def build(out_dir):
    t = Table()
    for name, how, figure, fill in PARTS:
        d = _load(out_dir, name)
        if d is None:
            t.missing(figure, how)
        else:
            fill(t, d, how)
    return t


def write(out_dir):
    """Prints the table; writes bench-all.json; returns its path"""
    t = build(out_dir)
    m = machine()
    print(f"vmce figures on {m['host']}: {m['cores']} cores, {m['cpu_model']}, kernel {m['kernel']}")
    print("  QEMUs: " + "; ".join(f"{n} {v.split('version', 1)[-1].strip() if v else 'not built'}"
                                   for n, v in m["qemus"].items()))
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
