"""The far side of a campaign across hosts: `run/campaign --worker`, run over
ssh by the campaign's host (hosts.py says what goes either way).

It runs the cases it is sent as a campaign of their own on this host: its
own vmced, guests and results under build/campaigns/NAME/hosts/HOST/, and
each record also goes back on stdout. Its stdin stays open for as long as
the campaign wants it: when it ends (the campaign's host is gone, or its
ssh), every guest and vmced of the worker goes with it, so that no QEMU is
left behind on a host nobody watches.
"""
import json
import os
import signal
import sys
import threading

from . import paths, qemus
from .campaign import Campaign, SpecError
from .runner import Runner
from .sshd import descendants


def _missing():
    """what this host lacks to run cases, in one line; None if nothing"""
    for path, what, how in ((paths.vmced(), "vmced", "make build"),
                            (paths.initrd(), "the guest image", "make image")):
        if not os.path.exists(path):
            return f"{what} is not built at {path} ({how} there)"
    return None


def _abandon(*_):
    """the campaign is gone: so is everything this worker started"""
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    os._exit(1)


def serve(hello_only=False):
    # stdout is the protocol's: everything else this process prints
    # (the runner's log and progress) goes to stderr
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    lock = threading.Lock()

    def send(rec):
        with lock:
            try:
                proto.write(json.dumps(rec) + "\n")
                proto.flush()
            except OSError:  # the campaign's side is gone
                _abandon()

    missing = _missing()
    send({"type": "hello", "version": paths.version(), "host": os.uname().nodename, "qemu": qemus.version_line(),
          "missing": missing})
    if hello_only or missing:
        return 0 if not missing else 1
    line = sys.stdin.readline()
    try:
        job = json.loads(line)
    except ValueError:
        send({"type": "error", "error": "no job came (a campaign's worker is run by run/campaign)"})
        return 2
    try:
        campaign = Campaign.parse(job["spec"], job.get("spec_path") or "<campaign>",
                                  kernels=job.get("kernels"), qemus=job.get("qemus"))
        campaign.check_host()
    except SpecError as e:
        send({"type": "error", "error": str(e)})
        return 2
    ids = list(job["cases"])
    known = {c.id for c in campaign.cases}
    unknown = [i for i in ids if i not in known]
    if unknown:
        send({"type": "error", "error": f"the campaign file names no case {unknown[0]} here"})
        return 2
    wanted = set(ids)
    campaign.cases = [c for c in campaign.cases if c.id in wanted]
    campaign.concurrency = job.get("concurrency") or 1

    signal.signal(signal.SIGTERM, _abandon)
    signal.signal(signal.SIGHUP, _abandon)

    def watch():
        sys.stdin.read()
        _abandon()
    threading.Thread(target=watch, daemon=True).start()

    outdir = os.path.join(paths.build_dir(), "campaigns", campaign.name, "hosts", job["host"])
    runner = Runner(campaign, outdir, reuse=job.get("reuse", True), restore=job.get("restore", True),
                    fresh=True, log=lambda s: print(f"campaign: {s}", file=sys.stderr, flush=True))
    record = runner.record

    def record_and_send(rec):
        record(rec)
        send(rec)
    runner.record = record_and_send
    runner.run()
    return 0
