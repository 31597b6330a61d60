"""What an image must allow for a campaign, checked in seconds before any
campaign waits 180 s for it (run/campaign --check-image, --check-domain).

The requirements (docs/campaigns.md lists them for operators), one line
each, in the order a campaign needs them:

  firmware          its disk boots: BIOS, or UEFI with OVMF installed here
                    (read from the partition table, before any boot)
  accel             KVM, where asked for, runs a guest on this host
  qga channel       qemu-guest-agent answers on org.qemu.guest_agent.0
  guest-exec        guest-exec and guest-exec-status are allowed
  file calls        guest-file-open, -read, -write and -close are allowed
  executable tmpfs  /dev/shm or /run takes vmce's tools and runs them
  /var/lib/vmce     writable, with 2 MiB free (the page-cache cases' files)

A check that cannot run because an earlier one failed says so ("not
checked") rather than fail twice. Each line is (requirement, ok, text); ok
None: not checked.
"""
import os
import re
import time

from . import images as images_mod
from . import paths, qga
from .agent import AgentError
from .kvm import kvm_usable
from .vm import Vm

NEED_FREE_KIB = 2048
EXEC = ("guest-exec", "guest-exec-status")
FILES = ("guest-file-open", "guest-file-read", "guest-file-write", "guest-file-close")
# what a console says once the guest's userland is up (systemd's targets,
# a getty's prompt): qga should answer within seconds after that
BOOTED = ("Multi-User System", "Graphical Interface", "Startup finished", " login: ")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# what a console says when nothing will boot: a boot loader at its rescue
# prompt, firmware with nothing to boot (SeaBIOS, OVMF's shell)
STUCK = ("grub rescue>", "No bootable device", "Boot failed: not a bootable disk", "Shell> ",
         "BdsDxe: No bootable option")
# how long qga may stay silent once the console says the guest is up
AFTER_BOOT_S = 15.0


def firmware_line(image, firmware="auto"):
    """(requirement, ok, text) for how the image boots, and the firmware
    it boots with (None where nothing boots it)"""
    fw = firmware if firmware != "auto" else (image.firmware or None)
    if image.image:  # a known image: its kernel copied out, booted directly
        fw = firmware if firmware != "auto" else "bios"
        if fw == "bios":
            return ("firmware", True, "its kernel booted directly (SeaBIOS)"), "bios"
    if fw is None:
        return ("firmware", False, "no partition table nor boot signature: nothing boots this disk "
                                   "(a blank or data-only image?)"), None
    if fw == "bios":
        how = "an MBR or a BIOS boot partition" if firmware == "auto" else "firmware = bios"
        return ("firmware", True, f"BIOS ({how}): SeaBIOS"), fw
    try:
        code, _ = images_mod.ovmf()
    except images_mod.ImageError as e:
        return ("firmware", False, str(e)), None
    how = "GPT, an EFI system partition, no BIOS boot partition" if firmware == "auto" else "firmware = uefi"
    return ("firmware", True, f"UEFI ({how}): OVMF {code}"), fw


def accel_line(accel, qemu=None):
    if accel != "kvm":
        return ("accel", True, f"{accel}")
    try:
        usable, why = kvm_usable(qemu)
    except (OSError, RuntimeError) as e:  # its probe guest's kernel not built, say
        usable, why = False, f"KVM could not be tried: {str(e).splitlines()[0]}"
    return ("accel", usable, f"kvm: {why}" + ("" if usable else ": use accel = tcg here, or the host "
                                                                  "lab's L1 (run/hostlab)"))


def _enabled(agent):
    info = agent._qga("guest-info")
    return info.get("version"), {c["name"]: c.get("enabled", True) for c in info.get("supported_commands", [])}


def _commands_line(what, names, enabled):
    missing = [c for c in names if c not in enabled]
    off = [c for c in names if c in enabled and not enabled[c]]
    if not (missing or off):
        return (what, True, ", ".join(names) + " allowed")
    if off:
        return (what, False, f"qemu-guest-agent has {', '.join(off)} disabled: remove them from "
                             "block-rpcs (qemu-ga --block-rpcs, or block-rpcs in /etc/qemu/qemu-ga.conf) "
                             "or add them to its allow-list")
    return (what, False, f"this qemu-guest-agent has no {', '.join(missing)}: install a newer one")


def _data_dir_line(agent):
    script = (f"mkdir -p {qga.DATA_DIR} && f={qga.DATA_DIR}/.vmce-check && : > $f && rm -f $f && "
              f"df -Pk {qga.DATA_DIR} | awk 'NR==2 {{print $4}}'")
    out = agent._exec("/bin/sh", ["-c", script], timeout=30)
    if out["exitcode"] != 0:
        said = (out["err"].strip().splitlines() or [f"exit status {out['exitcode']}"])[-1]
        return (qga.DATA_DIR, False, f"not writable ({said}): vmce keeps the page-cache cases' files "
                                     "there; make /var/lib writable (not a read-only root)")
    try:
        free = int(out["out"].strip().splitlines()[-1])
    except (ValueError, IndexError):
        return (qga.DATA_DIR, False, f"writable, but df said no free space: {out['out'].strip()[:80]}")
    if free < NEED_FREE_KIB:
        return (qga.DATA_DIR, False, f"writable, {free} KiB free: it needs {NEED_FREE_KIB} KiB; free "
                                     "some space on its file system")
    return (qga.DATA_DIR, True, f"writable, {free // 1024} MiB free")


def guest_lines(agent):
    """The guest-side checks on a qga that answers (QgaAgent)"""
    version, enabled = _enabled(agent)
    lines = [_commands_line("guest-exec", EXEC, enabled), _commands_line("file calls", FILES, enabled)]
    if not (lines[0][1] and lines[1][1]):
        why = "not checked: vmce reaches them through guest-exec and the file calls"
        return version, lines + [("executable tmpfs", None, why), (qga.DATA_DIR, None, why)]
    try:
        agent.push_tools()
        lines.append(("executable tmpfs", True, f"{agent.dir} takes vmce's tools and runs them"))
    except qga.QgaError as e:
        if e.kind != "no-tmpfs":
            raise
        lines.append(("executable tmpfs", False, f"{e}: mount one without noexec (/dev/shm or /run)"))
    lines.append(_data_dir_line(agent))
    return version, lines


def wait_qga(vm, agent, timeout, after_boot=AFTER_BOOT_S):
    """('qga channel', ok, text): qga's first answer, or why it did not
    come: QEMU or the kernel died, or the guest is up and qga is silent
    (then within @after_boot s of the guest saying so, not after @timeout)"""
    start = time.monotonic()
    up_at = None  # when the console first said the guest's userland is up
    while True:
        try:
            agent.qga.execute("guest-ping", timeout=2.0)
            return ("qga channel", True, f"qemu-guest-agent answered {time.monotonic() - start:.1f} s "
                                         "after QEMU started")
        except (OSError, ValueError, qga.QgaError):
            pass
        if not vm.alive() or "Kernel panic" in vm.console():
            _, why = vm.why_silent(0)
            return ("qga channel", False, f"the guest went down before qemu-guest-agent answered: {why}")
        console = ANSI.sub("", vm.console())
        stuck = next((b for b in STUCK if b in console), None)
        if stuck:
            said = [x.strip() for x in console.splitlines() if x.strip().startswith("error:")]
            return ("qga channel", False, f"the image does not boot: its console ends at '{stuck.strip()}'"
                                          + (f" ({said[0]})" if said else "") + ": see its console.log; "
                                          "a UEFI-only disk booted by BIOS, or the other way round? "
                                          "(firmware = uefi|bios)")
        if up_at is None and any(b in console for b in BOOTED):
            up_at = time.monotonic()
        up = time.monotonic() - up_at if up_at is not None else 0.0
        if up > after_boot:
            return ("qga channel", False, f"the guest is up (its console says so) and qemu-guest-agent "
                                          f"has not answered in {up:.0f} s: install qemu-guest-agent in "
                                          "the image and let it start (Debian: apt install "
                                          "qemu-guest-agent; it starts when its port appears)")
        if time.monotonic() - start > timeout:
            return ("qga channel", False, f"no answer within {timeout:.0f} s and the console says nothing of "
                                          "a userland: the image did not boot, or boots slower than that "
                                          "(see its console.log)")
        time.sleep(0.5)


def check_booted(vm, timeout):
    """The guest-side lines of a Vm just started with an image; qga's
    grace after the guest is up stretched as @timeout is (VMCE_TIME_SCALE)"""
    agent = qga.QgaAgent(qga.QgaSocket(vm.qga_path), why_silent=lambda: vm.why_silent(0))
    try:
        line = wait_qga(vm, agent, timeout, AFTER_BOOT_S * max(1.0, timeout / 180.0))
        if not line[1]:
            return None, [line]
        version, lines = guest_lines(agent)
        return version, [line] + lines
    finally:
        agent.close()


def check_domain(domain, uri=None):
    """The guest-side lines of a running libvirt domain, through virsh"""
    agent = qga.QgaAgent(qga.QgaVirsh(domain, uri))
    try:
        agent.qga.execute("guest-ping", timeout=5)
    except qga.QgaError as e:
        if e.kind == "no-agent" and "not configured" in str(e).lower():
            return None, [("qga channel", False, f"domain {domain} has no qemu-guest-agent channel: add "
                                                 "<channel type='unix'><target type='virtio' "
                                                 "name='org.qemu.guest_agent.0'/></channel> to its XML")]
        if e.kind == "no-agent":
            return None, [("qga channel", False, f"domain {domain}: its qemu-guest-agent is not connected "
                                                 f"({e}): install it in the guest and let it start")]
        return None, [("qga channel", False, str(e))]
    except OSError as e:
        return None, [("qga channel", False, f"qemu-guest-agent in domain {domain} does not answer ({e}): "
                                             "is it installed and running in the guest?")]
    try:
        version, lines = guest_lines(agent)
    except AgentError as e:  # it stopped answering, or the domain went, midway
        return None, [("qga channel", False, f"domain {domain}: {str(e).splitlines()[0]}")]
    return version, [("qga channel", True, f"domain {domain}: qemu-guest-agent answers")] + lines


def render(lines):
    """The report's lines, and whether all is well (not checked counts as not)"""
    width = max(len(what) for what, _, _ in lines)
    out = []
    for what, ok, text in lines:
        mark = "ok" if ok else ("-" if ok is None else "MISSING")
        out.append(f"  {mark:8s} {what:{width}s}  {text}")
    return out, all(ok for _, ok, _ in lines)


def check_image(image, firmware="auto", disk_bus="virtio-blk", accel="tcg", qemu=None, timeout=180.0,
                state_dir=None):
    """Every requirement's line for @image (images.Image): firmware and
    accel read here, the rest from a boot of it; no boot where the first
    two say it cannot"""
    fw_line, fw = firmware_line(image, firmware)
    lines = [fw_line, accel_line(accel, qemu)]
    if not (lines[0][1] and lines[1][1]):
        return lines + [("qga channel", None, "not checked: the image was not booted")]
    vm = Vm.start("check-image", mem="1G", accel=accel, qemu=qemu, image=image, firmware=fw,
                  disk_bus=disk_bus, state_dir=state_dir or os.path.join(paths.build_dir(), "check-image"))
    try:
        _, more = check_booted(vm, timeout)
    except AgentError as e:
        more = [("qga channel", False, str(e).splitlines()[0])]
    finally:
        vm.stop()
    return lines + more
