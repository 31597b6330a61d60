#!/usr/bin/env python3
"""The operator's own guests: whole guest images (`make guest-image`:
Debian 12 with systemd and qemu-guest-agent, nothing of vmce's) driven
through qemu-guest-agent alone, with the real QEMU, real vmced and real
ptrace, and a private libvirtd for the virsh path.

Asserts: on debian-12, given by its path as an operator gives an image
(booting by itself: firmware, GRUB), the page-type campaign (run/campaigns/images.ini:
anon, page cache clean and dirty, shmem, THP, and AR) passes with systemd up
and qga answering, every process signalled at its own address with the
right si_code and vmced's journal naming each page's GPA; on
debian-12-cloud by its path (a UEFI-only disk: OVMF, GRUB's EFI image, its
disk on virtio-scsi; no handler) the error resets the VM, QEMU's own words
on record, and its next boot comes up, and the same kernel by path
(Debian's package unpacked with dpkg -x) on vmce's own guest; the same
campaign through run/virsh/campaign on a libvirt domain of the image
booting by itself (firmware, GRUB), results in the same results.jsonl and
report; the preflight (run/campaign --check-image, --check-domain) says
in one line each what an image lacks: nothing boots a blank disk, UEFI
without OVMF, a domain without a qga channel, a qga with guest-exec
blocked, and all is well on a good domain; bad input: a domain without
qga, an image that does not boot, a qga that stops answering (hung) or
whose domain dies (dead), no executable tmpfs, a qga that refuses
guest-exec: each a case "not run (why)" or one clear error, never a hang.
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from common import PRIVATE_LIBVIRTD, Tap, Virsh, Vmced, paths, prerequisites, private_libvirtd, workdir

sys.path.insert(0, os.path.join(paths.ROOT, "run", "lib"))
from vmcelab import images, qga  # noqa: E402
from vmcelab.libvirt import image_domain_xml  # noqa: E402

tap = Tap()
prerequisites(tap)
for name in images.KNOWN:
    if not os.path.exists(os.path.join(images.image_dir(name), "image.json")):
        tap.bail(f"guest image {name} missing at {images.image_dir(name)}: `make check` builds it "
                 "(make guest-image)")

CAMPAIGN = os.path.join(paths.ROOT, "run", "campaign")
VIRSH_CAMPAIGN = os.path.join(paths.ROOT, "run", "virsh", "campaign")
SPEC = os.path.join(paths.ROOT, "run", "campaigns", "images.ini")
work = workdir("images")
debian12 = images.resolve("debian-12")
tap.diag(f"debian-12: {debian12.release}, built in {debian12.meta.get('build_seconds')} s; "
         f"debian-12-cloud: {images.resolve('debian-12-cloud').release}")


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def cases(path):
    return {r["case"]["id"]: r for r in records(path) if r.get("type") == "case"}


def campaign(*args, timeout=900, env=None):
    t = time.monotonic()
    res = subprocess.run([sys.executable, CAMPAIGN, "--fresh", *args], capture_output=True, text=True,
                         timeout=timeout, env=env)
    return res, time.monotonic() - t


def bounded(argv, timeout, env=None):
    """run/campaign where it should refuse in seconds: if it does not, and
    boots a guest after all, the timeout interrupts it as ^C would, so that
    it stops the QEMU and vmced it started (each in a session of its own,
    out of reach of a kill of its group); a plain subprocess.run killed
    run/campaign alone and left them running"""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGINT)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def own_signal(rec):
    """Every workload process that got a SIGBUS got it at its own page, with
    the si_code the expectation names"""
    # (a case not run has no observation: that is a failure of this check,
    # said by its subtest, not a TypeError that ends the test)
    obs, exp = rec.get("observed") or {}, rec.get("expected") or {}
    want = {"ao": 5, "ar": 4, "touch": 4}.get(exp.get("signals"))
    sigs = obs.get("signals") or []
    vas = {w["pid"]: int(w["va"], 16) >> 12 for w in obs.get("workloads") or [] if w.get("va")}
    return bool(sigs) and all(s.get("code") == want and int(s["addr"], 16) >> 12 == vas.get(s["pid"])
                              for s in sigs if s["pid"] in vas)


# -- 1. debian-12 as an operator gives an image: by its path, booting by
# itself (firmware, its own GRUB), its kernel learned once it runs; the
# campaign through qga, by QEMU directly (debian-12-cloud, below, by name:
# its own kernel booted directly)
out = os.path.join(work, "debian-12")
disk = os.path.join(images.image_dir("debian-12"), "disk.qcow2")
res, took = campaign("--images", disk, "--out", out, SPEC)
tap.ok(res.returncode == 0, f"run/campaign --images {disk} images.ini: exit 0 ({took:.0f} s)",
       diag=res.stdout[-3000:] + res.stderr[-2000:])
got = cases(os.path.join(out, "results.jsonl")) if os.path.exists(os.path.join(out, "results.jsonl")) else {}
tap.eq(sorted((r["case"]["page"], r["case"]["kind"], r["verdict"]) for r in got.values()),
       sorted([(p, "ao", "pass") for p in ("anon-dirty", "pagecache-clean", "pagecache-dirty", "shmem", "thp")]
              + [("anon-dirty", "ar", "pass")]),
       "every case judged and passing: anon, page cache clean and dirty, shmem, THP (AO), anon AR")
info = [r["case"]["kernel_info"] for r in got.values()]
tap.ok(info and all(i.get("kind") == "image" and i.get("release") == debian12.release
                    and i.get("table") == "debian-6.1" and not i.get("nearest") for i in info),
       f"each case names the image and the kernel it booted ({debian12.release}, learned through qga), "
       "judged as Debian's 6.1", diag=info[:1])
signalled = [r for r in got.values() if r["expected"]["signals"] in ("ao", "ar")]
tap.ok(signalled and all(own_signal(r) for r in signalled),
       f"{len(signalled)} case(s): each process got SIGBUS at its own page with the right si_code",
       diag=[(r["case"]["id"], r["observed"]["signals"]) for r in signalled if not own_signal(r)])
journal = records(os.path.join(out, "vmced", "journal.jsonl"))
errors = [j for j in journal if j.get("type") == "memory-error"]
tap.ok(all(any(e["result"] == "injected" and int(e["gpa"], 16) == int(w["gpa"], 16) for e in errors)
           for r in got.values() for w in r["observed"]["workloads"]),
       f"vmced's journal has every page's GPA, injected ({len(errors)} memory-error records)")
console = re.sub(r"\x1b\[[0-9;]*m", "", "".join(
    open(os.path.join(out, d, "console.log"), errors="replace").read()
    for d in os.listdir(out) if os.path.exists(os.path.join(out, d, "console.log"))))
# (qemu-guest-agent is not looked for on the console: systemd prints a
# unit's start there only until its boot has finished, and under load the
# agent's port comes up after that; the cases above ran through it)
tap.ok("Welcome to" in console and "Reached target" in console and "-kernel" not in open(
           os.path.join(out, next(d for d in os.listdir(out) if d.startswith("image-")), "vm.json")).read(),
       "the guest booted as its image does: firmware, GRUB, systemd and its targets",
       diag=console[-1500:])
tap.ok(f"Image {disk} ({debian12.release}) survives 6 of 6" in res.stdout.replace("\n", " "),
       "the summary names the image with its kernel: survives 6 of 6", diag=res.stdout[-600:])

# -- 2. debian-12-cloud: a kernel without the handler, measured, not
# refused; by its path, so it boots by itself: a UEFI-only disk (OVMF, the
# firmware read from its GPT) on virtio-scsi
cloud_disk = os.path.join(images.image_dir("debian-12-cloud"), "disk.qcow2")
cloud_spec = os.path.join(work, "cloud.ini")
with open(cloud_spec, "w") as f:
    f.write(f"[campaign]\nname = cloud\n[guest image]\nmem = 1G\nimage = {cloud_disk}\n"
            "disk-bus = virtio-scsi\n[case found]\npage = anon-dirty\nkind = ao\n")
out = os.path.join(work, "cloud")
res, took = campaign("--out", out, cloud_spec)
got = cases(os.path.join(out, "results.jsonl")) if os.path.exists(os.path.join(out, "results.jsonl")) else {}
rec = next(iter(got.values()), {})
obs = rec.get("observed") or {}
tap.ok(rec.get("verdict") == "pass" and rec["expected"]["guest"] == "reset",
       f"debian-12-cloud judged as 'no handler': the VM resets ({took:.0f} s)",
       diag=res.stdout[-2000:] + res.stderr[-1000:])
inj = (obs.get("injected") or [{}])[0]
tap.ok(obs.get("reset") and obs.get("qemu_alive") and "triple fault" in (inj.get("detail") or "")
       and (inj.get("qemu_event") or {}).get("action") == "reset",
       "its fate on record: a new boot on the console, QEMU alive, vmced's record has QEMU's "
       "'MCE capability is not enabled, raising triple fault' and MEMORY_FAILURE action reset",
       diag={k: obs.get(k) for k in ("reset", "qemu_alive")} | {"injected": inj})
tap.ok((obs.get("after_reset") or {}).get("booted"),
       f"its next boot came up ({(obs.get('after_reset') or {}).get('seconds')} s)", diag=obs.get("after_reset"))
# (by its path, the image's name is long: the summary's lines wrap)
summary_text = res.stdout.replace("\n", " ")
tap.ok("survives 0 of 1 error kind: every error resets the VM" in summary_text
       and "no CONFIG_MEMORY_FAILURE" in summary_text,
       "the summary says it plainly: survives 0 of 1, every error resets the VM, and why")
vm_dir = next((os.path.join(out, d) for d in os.listdir(out) if d.startswith("image-")), out)
with open(os.path.join(vm_dir, "vm.json")) as f:
    command = " ".join(json.load(f)["command"])
with open(os.path.join(vm_dir, "console.log"), errors="replace") as f:
    said = f.read()
tap.ok("if=pflash" in command and "OVMF_CODE_4M.fd" in command and "scsi-hd" in command
       and "-kernel" not in command and "EFI v2" in said and "by EDK II" in said and "[sda]" in said,
       "... it booted by UEFI (OVMF read from its GPT, the kernel says 'EFI ... by EDK II'), its disk "
       "on virtio-scsi (sda)", diag=command[-400:])

# -- 2c. the preflight, where it needs no boot: one line, in seconds
blank = os.path.join(work, "blank.qcow2")
subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", blank, "64M"], check=True)
for what, image, env, line in (
        ("a blank disk", blank, {}, "nothing boots this disk"),
        ("a UEFI image without OVMF installed", cloud_disk, {"VMCE_OVMF_DIR": os.path.join(work, "no-ovmf")},
         "the image boots by UEFI and OVMF is not installed")):
    t = time.monotonic()
    res = bounded([sys.executable, CAMPAIGN, "--check-image", image], 60, env=dict(os.environ, **env))
    took = time.monotonic() - t
    missing = [x for x in res.stdout.splitlines() if x.split()[:1] == ["MISSING"]]
    tap.ok(res.returncode == 1 and "not ready" in res.stdout and len(missing) == 1
           and "firmware" in missing[0] and line in missing[0] and took < 10,
           f"run/campaign --check-image on {what}: one line, '{line}', exit 1 ({took:.1f} s)",
           diag=res.stdout + res.stderr)
res = bounded([sys.executable, CAMPAIGN, "--fresh", cloud_spec], 60,
              env=dict(os.environ, VMCE_OVMF_DIR=os.path.join(work, "no-ovmf")))
tap.ok(res.returncode == 2 and res.stderr.count("\n") == 1 and "OVMF is not installed" in res.stderr,
       "a campaign on a UEFI image without OVMF: one line before anything runs, exit 2", diag=res.stderr)
blank_spec = os.path.join(work, "blank-auto.ini")
with open(blank_spec, "w") as f:
    f.write(f"[campaign]\nname = blank\n[guest image]\nimage = {blank}\n[case found]\npage = anon-dirty\n")
res = bounded([sys.executable, CAMPAIGN, "--fresh", blank_spec], 60)
tap.ok(res.returncode == 2 and res.stderr.count("\n") == 1 and "nothing boots this disk" in res.stderr,
       "a campaign on a blank disk: one line before anything runs, exit 2", diag=res.stderr)

# -- 2b. the same kernel as a new user tries it: Debian's package unpacked
# with dpkg -x (no modules.dep: depmod runs in its postinst) and given by
# path, on vmce's own guest. Not refused: its modules.dep made in vmce's
# cache, the tree left as it is, and judged as "no handler"
cache = os.environ.get("VMCE_CACHE", "/var/cache/vmce")
debs = [d for d in glob.glob(os.path.join(cache, "debootstrap", "linux-image-*-cloud-amd64_*.deb"))
        if re.match(r"linux-image-\d", os.path.basename(d))]
if not debs:
    tap.skip("the cloud kernel by path", f"no linux-image-*-cloud-amd64 package in {cache}/debootstrap "
                                        "(make guest-image leaves it there)")
else:
    tree = os.path.join(work, "cloud-kernel")
    subprocess.run(["dpkg", "-x", debs[0], tree], check=True)
    vmlinuz = glob.glob(os.path.join(tree, "boot", "vmlinuz-*"))[0]
    release = os.path.basename(vmlinuz).removeprefix("vmlinuz-")
    spec = os.path.join(work, "cloud-kernel.ini")
    with open(spec, "w") as f:
        f.write(f"[campaign]\nname = cloud-kernel\n[guest g]\nkernel = {vmlinuz}\n"
                "[case found]\npage = anon-dirty\n[case consumed]\npage = anon-dirty\nkind = ar\n")
    res, took = campaign("--out", os.path.join(work, "cloud-kernel-run"), spec)
    tap.ok(res.returncode == 0 and "2 pass" in res.stdout
           and "survives 0 of 2 error kinds: every error resets the VM" in res.stdout,
           f"Debian's cloud kernel unpacked with dpkg -x, by path: run, judged 'no handler', 2 pass ({took:.0f} s)",
           diag=res.stdout[-1500:] + res.stderr[-800:])
    tap.ok(not os.path.exists(os.path.join(tree, "lib", "modules", release, "modules.dep")),
           "... its modules.dep made in vmce's cache (busybox depmod), the unpacked tree untouched")

# -- 3. an image that does not boot: not run, said why, never a hang
# (firmware = bios: booted all the same, as the operator says)
blank_spec = os.path.join(work, "blank.ini")
with open(blank_spec, "w") as f:
    f.write(f"[campaign]\nname = blank\n[guest image]\nimage = {blank}\nfirmware = bios\n"
            "[case found]\npage = anon-dirty\n")
# its boot timeout shortened (VMCE_TIME_SCALE stretches or shrinks them all)
res, took = campaign("--out", os.path.join(work, "blank"), blank_spec, timeout=300,
                     env=dict(os.environ, VMCE_TIME_SCALE="0.1"))
rec = next(iter(cases(os.path.join(work, "blank", "results.jsonl")).values()), {})
tap.ok(res.returncode == 1 and rec.get("verdict") == "not run"
       and "did not answer within" in (rec.get("not_run") or ""),
       f"an image that does not boot: the case is not run, and says why ({took:.0f} s)",
       diag=(rec.get("not_run"), res.stderr[-1000:]))

# -- 4. the same through run/virsh/campaign, on libvirt domains as they are
if not shutil.which("libvirtd") or not shutil.which("virsh"):
    tap.skip("run/virsh/campaign on an image's domain", "libvirtd or virsh is missing")
    tap.done()
lv = os.path.join(work, "libvirt")
uri = private_libvirtd(tap, lv)
virsh = Virsh(uri)
daemon = None


def create(name, xml_text):
    state = os.path.join(work, name)
    os.makedirs(state, exist_ok=True)
    with open(os.path.join(state, "domain.xml"), "w") as f:
        f.write(xml_text)
    virsh("create", os.path.join(state, "domain.xml"))
    return state


try:
    daemon = Vmced(os.path.join(work, "vmced"), args=["--connect", uri, "--all-domains"])
    op = "operator-1"
    create(op, image_domain_xml(op, os.path.join(work, op), debian12))
    # a domain with neither vmce's agent nor qemu-guest-agent
    bare = "no-qga"
    os.makedirs(os.path.join(work, bare), exist_ok=True)
    create(bare, f"""<domain type='qemu'><name>{bare}</name><memory unit='MiB'>256</memory>
  <os><type arch='x86_64' machine='pc'>hvm</type><kernel>{paths.kernel()}</kernel>
  <initrd>{paths.initrd()}</initrd><cmdline>console=ttyS0</cmdline></os>
  <devices><serial type='file'><source path='{os.path.join(work, bare, "console.log")}'/></serial>
  <memballoon model='none'/></devices></domain>""")
    env = dict(os.environ, VMCE_SOCKET=daemon.socket, VMCECTL=paths.vmcectl())
    vout = os.path.join(work, "virsh")
    t = time.monotonic()
    res = subprocess.run([VIRSH_CAMPAIGN, "--connect", uri, "--out", vout, op, bare],
                         capture_output=True, text=True, timeout=1200, env=env)
    took = time.monotonic() - t
    tap.diag(res.stdout[-1500:])
    got = cases(os.path.join(vout, "results.jsonl")) if os.path.exists(os.path.join(vout, "results.jsonl")) else {}
    mine = {i: r for i, r in got.items() if i.endswith("@" + op)}
    tap.eq(sorted((r["case"]["page"], r["case"]["kind"], r["verdict"]) for r in mine.values()),
           sorted([(p, "ao", "pass") for p in ("anon-dirty", "pagecache-clean", "pagecache-dirty", "shmem",
                                                "thp")] + [("anon-dirty", "ar", "pass")]),
           f"run/virsh/campaign on domain {op} (qga only): every case judged and passing ({took:.0f} s)")
    with open(os.path.join(work, op, "domain.xml")) as f:
        booted_by_itself = "<kernel>" not in f.read()
    with open(os.path.join(work, op, "console.log"), errors="replace") as f:
        said = f.read()
    tap.ok(booted_by_itself and "Linux version " + debian12.release in said,
           f"domain {op} booted by itself: firmware, the image's own GRUB, its kernel")
    tap.ok(mine and all(r["case"]["kernel_info"].get("release") == debian12.release
                        and r["case"]["kernel_info"].get("os", "").startswith("Debian GNU/Linux 12")
                        for r in mine.values()),
           "each case names the domain's image (its OS, from qga) and its kernel")
    tap.ok(all(own_signal(r) for r in mine.values() if r["expected"]["signals"] in ("ao", "ar")),
           "each process got SIGBUS at its own page with the right si_code (through virsh)")
    errors = [j for j in daemon.journal_records() if j.get("type") == "memory-error" and j.get("vm") == op]
    tap.ok(mine and all(any(e["result"] == "injected" and int(e["gpa"], 16) == int(w["gpa"], 16) for e in errors)
                        for r in mine.values() for w in r["observed"]["workloads"]),
           f"the host's vmced journal names domain {op} and every page's GPA")
    theirs = [r for i, r in got.items() if i.endswith("@" + bare)]
    tap.ok(theirs and all(r["verdict"] == "not run" and "no qemu-guest-agent channel" in r["not_run"]
                          for r in theirs),
           "a domain without qga: each of its cases 'not run (why)'", diag=[r.get("not_run") for r in theirs][:1])
    tap.ok(res.returncode == 1 and os.path.exists(os.path.join(vout, "report.html")),
           "the campaign went to its end (exit 1: cases not run) and wrote its report")

    # -- 4b. the preflight on running domains (no boot): a good one, one without qga
    def check_domain(name):
        t = time.monotonic()
        res = subprocess.run([sys.executable, CAMPAIGN, "--check-domain", name, "--libvirt", uri],
                             capture_output=True, text=True, timeout=120)
        lines = {}
        for x in res.stdout.splitlines()[1:]:
            mark, rest = x.split(None, 1)
            what = next((w for w in ("qga channel", "guest-exec", "file calls", "executable tmpfs",
                                     "/var/lib/vmce") if rest.startswith(w)), rest)
            lines[what] = (mark, rest[len(what):].strip())
        return res, lines, time.monotonic() - t
    res, lines, took = check_domain(op)
    tap.ok(res.returncode == 0 and "ready for a campaign" in res.stdout and len(lines) == 5
           and all(m == "ok" for m, _ in lines.values()),
           f"run/campaign --check-domain {op}: every requirement ok, exit 0 ({took:.1f} s)",
           diag=res.stdout + res.stderr)
    res, lines, took = check_domain(bare)
    tap.ok(res.returncode == 1 and list(lines) == ["qga channel"] and lines["qga channel"][0] == "MISSING"
           and "no qemu-guest-agent channel" in lines["qga channel"][1],
           f"--check-domain {bare}: one line, no qemu-guest-agent channel, exit 1 ({took:.1f} s)",
           diag=res.stdout + res.stderr)

    # -- 5. bad input to the agent, on the running domain: never a hang
    agent = qga.QgaAgent(qga.QgaVirsh(op, uri))
    agent.wait_ready(60)
    # qga stops answering for a while (frozen): hung, said so
    agent._spawn("/bin/sh", ["-c", "kill -STOP $(pidof qemu-ga); sleep 18; kill -CONT $(pidof qemu-ga)"],
                 capture=False)
    time.sleep(1)
    from vmcelab.domains import DomainVm  # noqa: E402
    dvm = DomainVm(op, uri, os.path.join(work, "bad"))
    frozen = qga.QgaAgent(qga.QgaVirsh(op, uri), why_silent=lambda: dvm.why_silent(dvm.reset_mark()))
    frozen.dir = agent.dir
    t = time.monotonic()
    try:
        frozen.call("ping")
        err = None
    except qga.QgaError as e:
        err = e
    tap.ok(err is not None and err.kind == "hung" and "the guest is hung" in str(err),
           f"a qga that stops answering: one error, 'hung' ({time.monotonic() - t:.0f} s)", diag=str(err))
    time.sleep(max(0, 20 - (time.monotonic() - t)))
    # no executable tmpfs for the tools
    agent.wait_ready(60)
    agent._exec("/bin/sh", ["-c", "mount -o remount,noexec /dev/shm; mount -o remount,noexec /run"])
    try:
        qga.QgaAgent(qga.QgaVirsh(op, uri)).wait_ready(60)
        err = None
    except qga.QgaError as e:
        err = e
    agent._exec("/bin/sh", ["-c", "mount -o remount,exec /dev/shm; mount -o remount,exec /run"])
    tap.ok(err is not None and err.kind == "no-tmpfs" and "/dev/shm" in str(err) and "/run" in str(err),
           "no executable tmpfs: one error naming each place tried", diag=str(err))
    # a qga that refuses guest-exec (block-rpcs, as RHEL's qemu-ga ships)
    agent.call("ping")
    handle = agent._qga("guest-file-open", {"path": "/etc/qemu/qemu-ga.conf", "mode": "w"})
    agent._qga("guest-file-write", {"handle": handle, "buf-b64": "W2dlbmVyYWxdCmJsb2NrLXJwY3M9Z3Vlc3QtZXhlYwo="})
    agent._qga("guest-file-close", {"handle": handle})
    agent._spawn("/bin/sh", ["-c", "sleep 1; systemctl restart qemu-guest-agent"], capture=False)
    time.sleep(6)
    res, lines, took = check_domain(op)
    tap.ok(res.returncode == 1 and lines.get("guest-exec", ("",))[0] == "MISSING"
           and "guest-exec disabled: remove them from block-rpcs" in lines["guest-exec"][1]
           and [m for m, _ in lines.values()].count("MISSING") == 1,
           f"--check-domain on a qga with guest-exec blocked: one line says so, exit 1 ({took:.1f} s)",
           diag=res.stdout + res.stderr)
    rout = os.path.join(work, "refused")
    res = subprocess.run([VIRSH_CAMPAIGN, "--connect", uri, "--out", rout, op],
                         capture_output=True, text=True, timeout=600, env=env)
    got = cases(os.path.join(rout, "results.jsonl")) if os.path.exists(os.path.join(rout, "results.jsonl")) else {}
    tap.ok(got and all(r["verdict"] == "not run" and "refuses guest-exec" in r["not_run"] for r in got.values()),
           f"a qga that refuses guest-exec: {len(got)} case(s) 'not run (why)', the campaign ends",
           diag=[r.get("not_run") for r in got.values()][:1] or res.stdout[-1000:])
    # the domain dies under a call: dead, said so
    virsh("destroy", op)
    try:
        agent.call("ping")
        err = None
    except qga.AgentError as e:
        err = e
    tap.ok(isinstance(err, qga.QgaError) and err.kind == "dead" and f"domain {op} is gone" in str(err),
           "a domain that dies: one error, saying the domain is gone", diag=str(err))
finally:
    if daemon is not None:
        daemon.stop()
    subprocess.run([PRIVATE_LIBVIRTD, "stop", lv], capture_output=True, timeout=120)
tap.done()
