"""run/bench --only migration: what carrying poisoned pages costs a live
migration (migration = carry).

One TCG guest of 512 MiB with a 512 MiB DIMM that Debian's 6.1 leaves
offline (as the storm bench has it: guest RAM the guest never uses, so
every simulated error in it reaches the guest without any of its own pages
going bad), migrated back and forth between two QEMUs on this host that one
vmced watches, over a unix socket with the bandwidth uncapped. Between the
rounds, more of the DIMM's pages go bad (AO errors through vmcectl's
control socket): 0, 1, 512, then 10^4 poisoned pages, --runs migrations
each. For each, from QEMU's own query-migrate: the total time and the
downtime, as ratios to the same guest with none; from vmced's journal: the
pages the migration thread was lent, how long the destination's guest
waited for its marks (the hand-over's own time at that end), and how long
the source's vCPUs were held while pages were lent.
"""
import json
import os
import subprocess
import time

from . import paths, qemus
from .daemon import Vmced
from .libvirt import domain_xml
from .stats import percentile
from .storm import DIMM, PAGE, _Storm
from .vm import Vm

COUNTS = (0, 1, 512, 10000)
DIMM_ARGS = ["-object", f"memory-backend-ram,id=mig-mem,size={DIMM}",
             "-device", "pc-dimm,id=mig-dimm,memdev=mig-mem"]


class _Guest:
    def __init__(self, name, vm, base=None):
        self.name, self.vm, self.dimm_base = name, vm, base


def _journal(daemon, since=0):
    with open(daemon.journal) as f:
        return [json.loads(line) for line in f if line.strip()][since:]


def _start_destination(work, qemu, daemon, i):
    name = f"bench-mig{i}"
    vm = Vm.start("bench-mig", mem="512M", qemu=qemu, state_dir=os.path.join(work, name),
                  extra=["-m", "512M,slots=1,maxmem=2G", *DIMM_ARGS], incoming_uri="defer")
    deadline = time.monotonic() + 30
    while not os.path.exists(vm.vmced_qmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    daemon.ctl("attach", "--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", name,
               "--agent", vm.vmced_agent_path)
    return _Guest(name, vm)


def _migrate(work, src, dst, i):
    """One migration, timed by QEMU itself: its query-migrate answer"""
    sock = os.path.join(work, f"mig{i}.sock")
    with dst.vm.qmp() as qd:
        qd.execute("migrate-incoming", uri=f"unix:{sock}")
    with src.vm.qmp() as q:
        q.execute("migrate-set-parameters", **{"max-bandwidth": 1 << 40})
        q.execute("migrate", uri=f"unix:{sock}")
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            info = q.execute("query-migrate")
            if info.get("status") in ("completed", "failed", "cancelled"):
                return info
            time.sleep(0.05)
    raise RuntimeError("migration: not done in 600 s")


def _poison(daemon, guest, first, n):
    """DIMM pages [first, first + n) of @guest poisoned (AO), all answered"""
    if n == 0:
        return
    order = [(guest, guest.dimm_base + (first + j) * PAGE) for j in range(n)]
    storm = _Storm(daemon, order)
    storm.run(daemon.rss_kb())
    bad = {r: c for r, c in storm.results.items() if r != "injected"}
    if bad:
        print(f"migration: of {n} errors, not injected: {bad}", flush=True)


def _round(work, q, daemon, src, i, poisoned):
    dst = _start_destination(work, q.binary, daemon, i)
    since = len(_journal(daemon))
    info = _migrate(work, src, dst, i)
    if info.get("status") != "completed":
        raise RuntimeError(f"migration {i} with {poisoned} poisoned page(s): {info.get('status')}")
    deadline, recs = time.monotonic() + 30, []
    while time.monotonic() < deadline:
        recs = _journal(daemon, since)
        if poisoned == 0 or any(r.get("action") == "received" and r.get("vm") == dst.name for r in recs):
            break
        time.sleep(0.1)
    rec = next((r for r in recs if r.get("action") == "received" and r.get("vm") == dst.name), {})
    over = next((r for r in recs if r.get("action") == "handed-over" and r.get("vm") == src.name), {})
    row = {"poisoned": poisoned, "total_ms": info.get("total-time"), "downtime_ms": info.get("downtime"),
           "setup_ms": info.get("setup-time"), "marked": rec.get("marked", 0),
           "dst_waited_us": rec.get("paused_us"), "lent": over.get("lent", 0),
           "src_vcpus_held_us": over.get("lent_held_us", 0)}
    src.vm.stop()
    dst.vm.wait_ready(60)
    dst.dimm_base = src.dimm_base
    return dst, row


def figures(work, runs=3, qemu="debian-7.2"):
    q = qemus.resolve(qemu)
    out = {"qemu": q.label, "runs": runs, "rows": []}
    daemon, cur = None, None
    try:
        vm = Vm.start("bench-mig", mem="512M", qemu=q.binary, state_dir=os.path.join(work, "bench-mig0"),
                      extra=["-m", "512M,slots=1,maxmem=2G", *DIMM_ARGS])
        vm.wait_ready()
        with vm.qmp() as qm:
            base = next(d["data"]["addr"] for d in qm.execute("query-memory-devices")
                        if d["data"].get("id") == "mig-dimm")
        cur = _Guest("bench-mig0", vm, base)
        daemon = Vmced(os.path.join(work, "vmced"),
                       args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", cur.name,
                             "--agent", vm.vmced_agent_path])
        daemon.wait_attached(cur.name)
        print(f"migration: {q.label}, a 512 MiB TCG guest with a 512 MiB offline DIMM, "
              f"{runs} migration(s) per count, bandwidth uncapped", flush=True)
        i, done = 0, 0
        for n in COUNTS:
            _poison(daemon, cur, done, n - done)
            done = n
            for _ in range(runs):
                i += 1
                cur, row = _round(work, q, daemon, cur, i, n)
                out["rows"].append(row)
                print(f"migration: {n:5} poisoned: total {row['total_ms']} ms, downtime {row['downtime_ms']} ms, "
                      f"{row['lent']} lent (source vCPUs held {row['src_vcpus_held_us'] / 1000:.1f} ms), "
                      f"{row['marked']} marked (destination waited "
                      f"{(row['dst_waited_us'] or 0) / 1000:.1f} ms)", flush=True)
        out["summary"] = _summary(out["rows"])
        _print(out)
    finally:
        if daemon is not None:
            daemon.stop()
        if cur is not None:
            cur.vm.stop()
    return out


def _summary(rows):
    def med(vals):
        vals = [v for v in vals if v is not None]
        return percentile(vals, 50) if vals else None
    base = {}
    out = []
    for n in COUNTS:
        rs = [r for r in rows if r["poisoned"] == n]
        s = {"poisoned": n, "n": len(rs), "total_ms": med([r["total_ms"] for r in rs]),
             "downtime_ms": med([r["downtime_ms"] for r in rs]),
             "dst_waited_us": med([r["dst_waited_us"] for r in rs]),
             "src_vcpus_held_us": med([r["src_vcpus_held_us"] for r in rs])}
        if n == 0:
            base = s
        for k in ("total_ms", "downtime_ms"):
            s[k.replace("_ms", "_ratio")] = (round(s[k] / base[k], 2) if base.get(k) and s[k] is not None
                                             else None)
        out.append(s)
    return out


def _print(out):
    print(f"\nmigration ({out['qemu']}, medians of {out['runs']}):")
    print(f"{'poisoned':>9} {'total ms':>9} {'ratio':>6} {'downtime ms':>12} {'ratio':>6} "
          f"{'dst waited ms':>14} {'src vCPUs held ms':>18}")
    for s in out["summary"]:
        waited = f"{s['dst_waited_us'] / 1000:.1f}" if s["dst_waited_us"] is not None else "-"
        held = f"{s['src_vcpus_held_us'] / 1000:.1f}" if s["src_vcpus_held_us"] is not None else "-"
        print(f"{s['poisoned']:>9} {s['total_ms']:>9} {s['total_ratio'] or '-':>6} {s['downtime_ms']:>12} "
              f"{s['downtime_ratio'] or '-':>6} {waited:>14} {held:>18}")


def _create_domain(work, uri, name, mem):
    state = os.path.join(work, name)
    os.makedirs(state, exist_ok=True)
    xml = os.path.join(state, "domain.xml")
    with open(xml, "w") as f:
        f.write(domain_xml(name, state, mem=mem, disk="", mem_file=False, vmced_agent_by_libvirt=True))
    subprocess.run(["virsh", "-q", "-c", uri, "create", xml], check=True, capture_output=True, timeout=120)


def _marked(daemon, name):
    """The destination's received record of @name, waited for"""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rec = next((x for x in daemon.journal_records() if x.get("vm") == name and x.get("type") == "migration"
                    and x.get("action") == "received"), None)
        if rec is not None:
            return {"domain": name, "marked": rec.get("marked"), "how": rec.get("how")}
        time.sleep(0.2)
    return {"domain": name, "marked": None, "how": None}


def drain_figures(work, n_domains=8, n_poisoned=2, mem="512M"):
    """A libvirt host of @n_domains TCG guests, @n_poisoned of them with a
    poisoned page (AO on a page of guest RAM: its kernel recovers it),
    drained into another (run/virsh/drain): each domain's seconds and the
    whole drain's, with what each carried. Two private libvirtds on this
    machine, each with its own vmced (libvirt mode)."""
    private = os.path.join(paths.ROOT, "run", "libvirt", "private-libvirtd")
    hosts = {h: os.path.join(work, f"libvirt-{h}") for h in ("a", "b")}
    uris, daemons, names = {}, {}, [f"vmce-drain{i}" for i in range(n_domains)]
    out = {"domains": n_domains, "poisoned_domains": n_poisoned, "mem": mem}
    try:
        for h, d in hosts.items():
            r = subprocess.run([private, "start", d], capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                raise RuntimeError(f"private libvirtd: {r.stderr.strip()}")
            uris[h] = r.stdout.strip()
            daemons[h] = Vmced(os.path.join(work, f"vmced-{h}"), args=["--connect", uris[h], "--all-domains"])
        for n in names:
            _create_domain(work, uris["a"], n, mem)
        for n in names:
            daemons["a"].wait_attached(n, timeout=300)
        time.sleep(5)  # the guests' boot
        for n in names[:n_poisoned]:
            ev = daemons["a"].poison(n, "--gpa", hex(0x10000000), "--kind", "ao")
            if ev.get("result") != "injected":
                raise RuntimeError(f"{n}: the poison was not injected: {ev}")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
                daemons["a"].ctl_json("vm", n)["migration"].get("domain_metadata_pages") == 1
                for n in names[:n_poisoned]):
            time.sleep(0.1)
        res = os.path.join(work, "drain.json")
        t0 = time.monotonic()
        r = subprocess.run([os.path.join(paths.ROOT, "run", "virsh", "drain"), "--from", uris["a"], "--to", uris["b"],
                            "--migrateuri", "tcp://127.0.0.1", "--unsafe", "--json", res],
                           capture_output=True, text=True, timeout=3600)
        out["seconds"] = round(time.monotonic() - t0, 1)
        print(r.stdout, end="", flush=True)
        out["rows"] = json.load(open(res))["domains"] if os.path.exists(res) else []
        marks = [_marked(daemons["b"], n) for n in names[:n_poisoned]]
        out["marked_on_destination"] = marks
        ok = sum(d["migrated"] for d in out["rows"])
        secs = [d["seconds"] for d in out["rows"]]
        print(f"drain: {ok} of {n_domains} domains migrated in {out['seconds']} s "
              f"({', '.join(f'{x:.1f}' for x in secs)} s each); poisoned ones marked on the destination: "
              + ", ".join(f"{m['domain']} {m['marked']} ({m['how']})" for m in marks), flush=True)
    finally:
        for d in daemons.values():
            d.stop()
        for h, d in hosts.items():
            for n in names:
                if h in uris:
                    subprocess.run(["virsh", "-q", "-c", uris[h], "destroy", n], capture_output=True, timeout=60)
            subprocess.run([private, "stop", d], capture_output=True, timeout=120)
    return out
