"""A campaign run inside the host lab's L1 host (run/hostlab --campaign FILE).

L1's kernel has MEMORY_FAILURE, so cases with inject = host-real get the
real thing: the page behind the guest's page is poisoned in the guest's RAM
file, L1's memory_failure() unmaps it from QEMU and sends QEMU the real
SIGBUS, and vmced forwards it. The runner is the one run/campaign uses; each
record it writes is also sent to L0 as a JSON line, where run/hostlab keeps
results.jsonl and writes the report.
"""
import contextlib
import glob
import gzip
import json
import os
import shutil
import sys
import threading

from . import images, kernels, paths
from .campaign import Campaign, SpecError
from .runner import Runner

DISK_GZ = "/lab/l2/disk.img.gz"
DISK = "/run/vmce/disk.img"
OUTDIR = "/run/vmce/campaign"
# the L2 kernels L0 staged for the campaign (run/hostlab stage_kernels())
KERNELS = "/lab/kernels.json"
# the guest images L0 handed over (run/hostlab stage_images()): each disk a
# read-only virtio disk of L1's, named by its serial; their small files,
# OVMF and vmce's guest tools (pushed into an image through its qga) in /lab
IMAGES = "/lab/images.json"
IMAGES_L1 = "/run/vmce/images.json"


class Lines:
    """JSON lines to L0 on the lab's serial port; the runner's own progress
    goes to the console, where it cannot split a line"""

    def __init__(self, stream):
        self.stream = stream
        self.lock = threading.Lock()

    def emit(self, kind, **fields):
        with self.lock:
            self.stream.write(json.dumps({"type": kind, **fields}) + "\n")
            self.stream.flush()


def watch_consoles(out, stop):
    """While a guest boots for minutes nothing else is said: the last line
    of the newest guest console, every 30 s while it changes and every 120 s
    when it does not, tells L0 (and whoever watches) that L1 itself is not
    wedged"""
    last, quiet = None, 0
    while not stop.wait(30):
        logs = glob.glob(os.path.join(OUTDIR, "*", "console.log"))
        if not logs:
            continue
        newest = max(logs, key=os.path.getmtime)
        try:
            with open(newest, errors="replace") as f:
                lines = [ln.strip() for ln in f.read().splitlines() if ln.strip()]
        except OSError:
            continue
        seen = (newest, len(lines))
        quiet += 30
        if seen != last or quiet >= 120:
            last, quiet = seen, 0
            text = lines[-1][:120] if lines else "(nothing on its console yet)"
            out.emit("progress", text=f"{os.path.basename(os.path.dirname(newest))}: {text}")


def l2_disk():
    """The L2 guests' data disk L0 sent along (gzipped in the overlay),
    unpacked into L1's RAM; None if it sent none"""
    if not os.path.exists(DISK_GZ):
        return None
    if not os.path.exists(DISK):
        os.makedirs(os.path.dirname(DISK), exist_ok=True)
        with gzip.open(DISK_GZ, "rb") as src, open(DISK, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    return DISK


def l1_disks():
    """L1's virtio disks by serial: {serial: /dev/vdX}"""
    found = {}
    for dev in glob.glob("/sys/block/vd*"):
        try:
            with open(os.path.join(dev, "serial")) as f:
                found[f.read().strip()] = "/dev/" + os.path.basename(dev)
        except OSError:
            continue
    return found


def stage_images(staged=IMAGES, out=IMAGES_L1, disks=None):
    """The images L0 handed over (@staged), where images.resolve() finds
    them (@out): each disk at the L1 device its serial names (@disks:
    l1_disks()), OVMF and vmce's guest tools beside them. None when all is
    well or there are none; a disk L1 does not see is an error said in one
    line"""
    if not os.path.exists(staged):
        return None
    with open(staged) as f:
        entries = json.load(f)
    disks = l1_disks() if disks is None else disks
    for spelling, entry in entries.items():
        serial = entry["disk"].removeprefix("serial:")
        if serial not in disks:
            return f"image {spelling}: L1 has no disk with serial {serial} (it has {sorted(disks) or 'none'})"
        entry["disk"] = disks[serial]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(entries, f)
    os.environ[images.STAGED_ENV] = out
    lab = os.path.dirname(staged)
    if os.path.isdir(os.path.join(lab, "ovmf")):
        os.environ["VMCE_OVMF_DIR"] = os.path.join(lab, "ovmf")
    tools = os.path.join(paths.build_dir(), "meson", "images", "guest-tools")
    if not os.path.exists(tools):
        os.makedirs(os.path.dirname(tools), exist_ok=True)
        os.symlink(os.path.join(lab, "guest-tools"), tools)
    return None


def run(spec, qemu):
    out = Lines(sys.stdout)
    trouble = stage_images()
    if trouble:
        out.emit("campaign-error", text=trouble)
        return
    if l2_disk():
        os.environ["VMCE_DISK"] = DISK
    os.environ["VMCE_QEMU"] = qemu
    if os.path.exists(KERNELS):
        os.environ[kernels.STAGED_ENV] = KERNELS
    # an L2 under TCG in an L1 under TCG: boots, signals and log lines all
    # take several times longer than on a host
    os.environ.setdefault("VMCE_TIME_SCALE", str(spec.get("time_scale", 5)))
    try:
        # the one QEMU L0 staged for L1, whatever QEMU names the file uses
        # (they are L0's; L0 checked them before L1 booted)
        campaign = Campaign.parse(spec["text"], spec["path"], qemus=[qemu], kernels=spec.get("kernels"),
                                  images=spec.get("images"), errors=spec.get("errors"),
                                  machine=spec.get("machine"), boot=spec.get("boot"))
        campaign.check_host()
        # L1 has two vCPUs and a TCG L2 wants one whole: the file's guests
        # side by side, each with a spare booting, starve one another
        # (seen: four 1 GiB guests booting at once, RCU stalls in all of
        # them, none ready after 9 minutes). One at a time, and its spare
        campaign.concurrency = 1
    except SpecError as e:
        out.emit("campaign-error", text=str(e))
        return

    class LabRunner(Runner):
        def record(self, rec):
            super().record(rec)
            out.emit("campaign-record", record=rec)

    runner = LabRunner(campaign, OUTDIR, reuse=spec.get("reuse", True), fresh=True,
                       restore=spec.get("restore", False),
                       log=lambda text: out.emit("progress", text=text))
    out.emit("progress", text=f"campaign {campaign.name}: {len(campaign.cases)} case(s), real host "
                              "errors by L1's memory_failure()")
    stop = threading.Event()
    watcher = threading.Thread(target=watch_consoles, args=(out, stop), daemon=True)
    watcher.start()
    try:
        with contextlib.redirect_stdout(sys.stderr):
            runner.run()
    finally:
        stop.set()
