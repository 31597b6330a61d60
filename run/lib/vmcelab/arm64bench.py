"""run/bench --only arm64: the Arm64 guest's figures (arm64.py).

  boot       QEMU start to the agent's first answer, --boots first boots
             under TCG (AAVMF, then the kernel on ACPI)
  restore    the first boot saved (QEMU migration to a file, as the
             campaign runner saves its template) and --boots copies started
             from it: QEMU start to the agent answering
  forward    where vmce-10.2-arm64 is built (make qemu-10.2-arm64): a guest
             on it with vmced attached, --runs errors of each kind vmced
             catches on a fresh vmce-victim page and tells the guest, an AO
             (idle victim, early kill) through inject-ghes-v2-error and an
             AR (a victim reading its page) through x-vmce-inject-sea: the
             journal's latency_us, the vCPU's signal-stop to QEMU's answer
             (the record written; for an AR the abort queued on the vCPU)
  matrix     where vmce-10.2-arm64 is built: run/campaigns/arm64.ini, the
             judged matrix (every page type, AO and AR, early and late kill)
             by run/campaign --fresh: its time, its cases and verdicts, and
             the load beside
  cold       (--cold-build) what a machine without the Arm64 guest pays, in
             a scratch cache and build directory: Debian 12's arm64 kernel
             fetched (apt lists of arm64, the package, unpacked), the guest
             tools cross-compiled, busybox-static for arm64 fetched and the
             initramfs written, and the Debian packages `run/install-deps arm64`
             adds for it (QEMU, AAVMF, the cross compiler, and what they
             pull in) downloaded; installing them is apt's part
"""
import json
import os
import statistics
import subprocess
import sys
import time

from . import arm64, paths
from .daemon import Vmced
from .vm import Vm

# what `run/install-deps arm64` adds for the Arm64 guest (QEMU, its firmware, the
# cross compiler) to a Debian 12 machine that has make check's packages:
# these four and what apt pulled in with them here
INSTALLED = ("qemu-system-arm", "qemu-efi-aarch64", "gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross")
PACKAGES = INSTALLED + (
    "binutils-aarch64-linux-gnu", "gcc-12-aarch64-linux-gnu-base", "cpp-12-aarch64-linux-gnu",
    "cpp-aarch64-linux-gnu", "gcc-12-cross-base", "libc6-arm64-cross", "libgcc-s1-arm64-cross",
    "libgomp1-arm64-cross", "libitm1-arm64-cross", "libatomic1-arm64-cross", "libasan8-arm64-cross",
    "liblsan0-arm64-cross", "libtsan2-arm64-cross", "libstdc++6-arm64-cross", "libubsan1-arm64-cross",
    "libhwasan0-arm64-cross", "libgcc-12-dev-arm64-cross", "gcc-12-aarch64-linux-gnu",
    "linux-libc-dev-arm64-cross")


def _summary(values):
    return {"n": len(values), "median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2)}


def _boot(work, name, incoming=None):
    """Seconds from QEMU's start to the agent's first answer, and the Vm
    (running)"""
    t = time.monotonic()
    # no data disk: a restored copy would find a fresh one under a guest
    # that had mounted the saved one (the runner's templates leave it for later)
    vm = Vm.start(name, arch="arm64", state_dir=os.path.join(work, name), incoming=incoming, disk=False)
    try:
        if incoming:
            vm.resume()
        vm.wait_ready(timeout=120 if incoming is None else 60)
    except BaseException:
        vm.stop()
        raise
    return time.monotonic() - t, vm


def boot_and_restore(work, boots):
    """{"boot_s", "restore_s", "save_s", "template_mib", "ghes"}: @boots first
    boots, the last one saved, @boots copies restored from it"""
    first, restored = [], []
    template = os.path.join(work, "arm64.template")
    for i in range(boots):
        s, vm = _boot(work, f"arm64-boot{i}")
        first.append(s)
        try:
            if i == boots - 1:
                fw = vm.agent.call("firmware", timeout=10)
                t = time.monotonic()
                vm.agent.close()
                vm.agent = None
                vm.save_state(template)
                save_s = time.monotonic() - t
        finally:
            vm.stop()
    for i in range(boots):
        s, vm = _boot(work, f"arm64-restore{i}", incoming=template)
        restored.append(s)
        vm.stop()
    return {"boot_s": _summary(first), "restore_s": _summary(restored), "save_s": round(save_s, 2),
            "template_mib": round(os.path.getsize(template) / 2**20), "ghes": fw.get("ghes"),
            "hest": "HEST" in fw.get("acpi_tables", [])}


def _forward_one(vm, daemon, kind):
    """One error of @kind on a fresh victim's page: (path, latency_us), or
    an exception saying what came instead"""
    victim = vm.agent.call("victim-start", mode="idle" if kind == "ao" else "read")
    ev = daemon.poison("arm64-fwd", "--guest-pid", str(victim["pid"]), "--guest-va", victim["va"],
                       "--kind", kind)
    vm.agent.call("victim-stop", pid=victim["pid"])
    if ev.get("result") != "injected" or not isinstance(ev.get("latency_us"), int):
        raise RuntimeError(f"{kind}: {ev.get('result')}: {ev.get('detail')}")
    return ev["path"], ev["latency_us"]


def forwarding(work, runs):
    """{"ao": summary (ms), "ar": ..., "paths": {...}} on vmce-10.2-arm64,
    or None where it is not built"""
    try:
        qemu = arm64.qemu_binary("vmce-10.2-arm64")
    except arm64.Arm64Error:
        return None
    vm = Vm.start("arm64-fwd", arch="arm64", qemu=qemu, state_dir=os.path.join(work, "arm64-fwd"), disk=False)
    daemon = None
    try:
        vm.wait_ready(timeout=180)
        vm.agent.call("sysctl", name="vm.memory_failure_early_kill", value=1)
        daemon = Vmced(os.path.join(work, "arm64-vmced"),
                       args=["--pid", str(vm.pid), "--qmp", vm.vmced_qmp_path, "--name", "arm64-fwd",
                             "--agent", vm.vmced_agent_path])
        daemon.wait_attached("arm64-fwd")
        out, paths_seen = {}, {}
        for kind in ("ao", "ar"):
            got = [_forward_one(vm, daemon, kind) for _ in range(runs)]
            paths_seen[kind] = sorted({p for p, _ in got})
            out[kind] = _summary([us / 1000 for _, us in got])
        out["paths"] = paths_seen
        return out
    finally:
        if daemon is not None:
            daemon.stop()
        vm.stop()


def matrix(work):
    """run/campaigns/arm64.ini's time and verdicts, or None where
    vmce-10.2-arm64 is not built"""
    try:
        arm64.qemu_binary(arm64.DEFAULT_QEMU)
    except arm64.Arm64Error:
        return None
    out = os.path.join(work, "arm64-matrix")
    load = os.getloadavg()[0]
    t = time.monotonic()
    res = subprocess.run([sys.executable, os.path.join(paths.ROOT, "run", "campaign"), "--fresh", "--out", out,
                          os.path.join(paths.ROOT, "run", "campaigns", "arm64.ini")],
                         capture_output=True, text=True)
    seconds = time.monotonic() - t
    verdicts = {}
    try:
        with open(os.path.join(out, "results.jsonl")) as f:
            for rec in map(json.loads, f):
                if rec.get("type") == "case":
                    verdicts[rec["verdict"]] = verdicts.get(rec["verdict"], 0) + 1
    except (OSError, ValueError):
        pass
    said = {"seconds": round(seconds, 1), "cases": sum(verdicts.values()), "verdicts": verdicts,
            "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2)}
    if res.returncode not in (0, 1) or not verdicts:
        said["error"] = (res.stderr.strip().splitlines() or ["?"])[-1]
    return said


def _timed(cmd, env):
    t = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:2])}: {(res.stderr.strip().splitlines() or ['failed'])[-1]}")
    return round(time.monotonic() - t, 1)


def cold_build(work):
    """Seconds of each step of make image-arm64 from nothing (scratch cache and
    build directory), and the download of its Debian packages"""
    scratch = os.path.join(work, "cold")
    env = dict(os.environ, VMCE_CACHE=os.path.join(scratch, "cache"))
    kdir, tools = os.path.join(scratch, "kernel"), os.path.join(scratch, "meson-arm64")
    root = paths.ROOT
    steps = {
        "kernel_fetch_s": _timed([os.path.join(root, "guest-kernel", "fetch"), "--arch", "arm64",
                                  "--out", kdir], env),
        "tools_cross_compile_s": _timed(
            ["sh", "-c", f"meson setup {tools} {root} --cross-file {root}/images/guest-tools/aarch64.cross "
                         f"-Dguest_tools_only=true >/dev/null && meson compile -C {tools} >/dev/null"], env),
        "initramfs_s": _timed([os.path.join(root, "images", "mkinitramfs"), "--arch", "arm64", "--kernel-dir",
                               kdir, "--tools", os.path.join(tools, "images", "guest-tools"),
                               "--out", os.path.join(scratch, "guest-arm64.cpio.gz")], env),
    }
    debs = os.path.join(scratch, "debs")
    os.makedirs(debs)
    steps["packages_download_s"] = _timed(["sh", "-c", f"cd {debs} && apt-get -qq -o APT::Sandbox::User=root "
                                                       f"download {' '.join(PACKAGES)}"], env)
    steps["packages_mib"] = round(sum(os.path.getsize(os.path.join(debs, f)) for f in os.listdir(debs)) / 2**20)
    sizes = subprocess.run(["dpkg-query", "-W", "-f", "${Installed-Size}\n", *PACKAGES],
                           capture_output=True, text=True).stdout.split()
    steps["packages_installed_mib"] = round(sum(int(k) for k in sizes if k.isdigit()) / 1024)
    subprocess.run(["rm", "-rf", scratch])
    return steps


def figures(work, boots, cold, runs=20):
    out = boot_and_restore(work, boots)
    b, r = out["boot_s"], out["restore_s"]
    print(f"arm64 guest (TCG, {arm64.MACHINE}, -cpu {arm64.CPU}, AAVMF, 512 MiB): HEST "
          f"{'present' if out['hest'] else 'MISSING'}, GHES sources {', '.join(out['ghes']) or 'none'}")
    print(f"  first boot to ready      median {b['median']:.2f} s, min {b['min']:.2f}, max {b['max']:.2f} "
          f"({b['n']} boots)")
    print(f"  restored copy to ready   median {r['median']:.2f} s, min {r['min']:.2f}, max {r['max']:.2f} "
          f"({r['n']} copies of a {out['template_mib']} MiB template saved in {out['save_s']:.2f} s)")
    out["forward"] = f = forwarding(work, runs)
    if f is None:
        print("  forwarding: skipped, vmce-10.2-arm64 is not built (make qemu-10.2-arm64)")
    else:
        for kind, how in (("ao", "AO via GHES (inject-ghes-v2-error)"), ("ar", "AR via SEA (x-vmce-inject-sea)")):
            s = f[kind]
            print(f"  signal-stop to acknowledged, {how:38} median {s['median']:.2f} ms, min {s['min']:.2f}, "
                  f"max {s['max']:.2f} ({s['n']} errors, path {'/'.join(f['paths'][kind])})")
    out["matrix"] = m = matrix(work)
    if m is None:
        print("  matrix: skipped, vmce-10.2-arm64 is not built (make qemu-10.2-arm64)")
    else:
        print(f"  judged matrix (run/campaigns/arm64.ini)  {m['seconds']:.0f} s for {m['cases']} cases: "
              + ", ".join(f"{n} {v}" for v, n in sorted(m["verdicts"].items()))
              + f" (load {m['load_before']} before, {m['load_after']} after)"
              + (f"; {m['error']}" if m.get("error") else ""))
    if cold:
        out["cold"] = c = cold_build(work)
        print(f"  cold build: kernel fetched {c['kernel_fetch_s']} s, guest tools cross-compiled "
              f"{c['tools_cross_compile_s']} s, busybox fetched and initramfs written {c['initramfs_s']} s; "
              f"the {len(PACKAGES)} Debian packages ({', '.join(INSTALLED)} and what they pull in) downloaded "
              f"in {c['packages_download_s']} s ({c['packages_mib']} MiB, {c['packages_installed_mib']} MiB "
              "installed)")
    sys.stdout.flush()
    return out
