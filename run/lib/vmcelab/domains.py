"""A judged campaign on an operator's libvirt domains as they are: the
domain's own image and kernel, its qemu-guest-agent reached with `virsh
qemu-agent-command`, the host's vmced (libvirt mode, which attaches to
every domain itself) with vmcectl. run/virsh/campaign runs it for the
domains that have no vmce agent:

  python3 -m vmcelab.domains [--connect URI] [--vmced TARGET] [--spec FILE]
                             [--out DIR] [--fresh] DOMAIN...

The cases are the campaign file's (run/campaigns/images.ini by default),
each on every domain; the results are run/campaign's results.jsonl and
report.html, each domain named as the image it is, with its kernel.
"""
import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET

from . import images, paths, qga
from .campaign import Campaign, SpecError
from .daemon import VmcedCtl
from .expect import JUDGED_OK
from .outcome import GuestLog
from .report import load as load_results, render, summary_text
from .runner import GuestVm, Runner, slow

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
DEFAULT_SPEC = os.path.join(HERE, "campaigns", "images.ini")
QGA_PORT = "org.qemu.guest_agent.0"
# domain states in which its QEMU runs
RUNNING = ("running", "paused", "in shutdown", "pmsuspended", "blocked")


def virsh(uri, *args, timeout=60):
    cmd = ["virsh", "-q"] + (["-c", uri] if uri else []) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _said(res):
    err = [line.removeprefix("error: ") for line in res.stderr.strip().splitlines() if line.strip()]
    return err[-1] if err else f"virsh exited with status {res.returncode}"


class DomainVm:
    """A running domain where a campaign's Vm stands: alive() is its QEMU
    running, console() its serial log where it has one, restarted() from
    libvirt's reboot events (QEMU's RESET), its agent a qga.QgaAgent over
    virsh"""

    def __init__(self, name, uri, workdir):
        self.name, self.uri = name, uri
        self.agent = None
        self.mem_file = None
        os.makedirs(workdir, exist_ok=True)
        xml = virsh(uri, "dumpxml", name)
        if xml.returncode != 0:
            raise RuntimeError(f"domain {name}: {_said(xml)}")
        root = ET.fromstring(xml.stdout)
        self.has_qga = any(t.get("name") == QGA_PORT for t in root.iter("target"))
        # a serial console to a file (or a log of it): the guest's kernel
        # log, panics and new boots included, without asking the guest
        self.console_path = next((e.get("path") for dev in ("serial", "console")
                                  for c in root.iter(dev) if c.get("type") == "file"
                                  for e in c.iter("source") if e.get("path")), None) or \
            next((e.get("file") for c in root.iter("serial") for e in c.iter("log")), None)
        self.events_path = os.path.join(workdir, f"{name}.events")
        with open(self.events_path, "w") as out:
            self._events = subprocess.Popen(
                ["virsh"] + (["-c", uri] if uri else []) + ["event", "--domain", name, "--event", "reboot",
                                                            "--loop", "--timestamp"],
                stdout=out, stderr=subprocess.DEVNULL, start_new_session=True)

    def state(self):
        res = virsh(self.uri, "domstate", self.name, "--reason")
        if res.returncode == 0:
            return res.stdout.strip()
        # a transient domain destroyed is no domain at all
        return f"gone ({_said(res)})"

    def alive(self):
        return self.state().split(" (")[0] in RUNNING

    def exit_status(self):
        return None if self.alive() else {"how": f"the domain is {self.state()}", "status": None,
                                          "said": None}

    def console(self):
        if not self.console_path:
            return ""
        try:
            with open(self.console_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def reset_mark(self):
        try:
            with open(self.events_path) as f:
                return sum(1 for line in f if "reboot" in line)
        except OSError:
            return 0

    def restarted(self, mark):
        n = self.reset_mark()
        return f"libvirt's reboot event: QEMU reset the guest ({n - mark} time(s))" if n > mark else None

    def why_silent(self, mark=None):
        if not self.alive():
            return "dead", f"the domain is {self.state()}"
        log = GuestLog(self.console().splitlines()[-200:])
        if log.panics:
            return "dead", f"the guest kernel panicked: {log.panics[-1]}"
        if mark is not None and self.restarted(mark):
            return "reset", self.restarted(mark)
        return "hung", "the guest is hung: its QEMU runs" + \
            (" and its console shows no panic" if self.console_path else " (no console log to say more)")

    def wait_ready(self, timeout=180.0):
        if not self.has_qga:
            raise qga.QgaError(f"domain {self.name} has no qemu-guest-agent channel ({QGA_PORT} in "
                               "its XML): vmce reaches a guest without its own agent through that alone",
                               "no-agent")
        mark = self.reset_mark()
        agent = qga.QgaAgent(qga.QgaVirsh(self.name, self.uri), why_silent=lambda: self.why_silent(mark))
        agent.wait_ready(timeout, alive=self.alive)
        self.agent = agent
        return agent

    def close(self):
        if self.agent is not None:
            self.agent.close()
            self.agent = None
        if self._events.poll() is None:
            self._events.terminate()
            self._events.wait()


class DomainGuest(GuestVm):
    """One domain: its cases one after another. A guest that went down is
    brought back as an operator would: `virsh start`, or `virsh reset` for
    one that hangs or panicked; there is no spare to boot beside it"""

    def __init__(self, spec, slot, workdir, daemon, timeline, uri):
        super().__init__(spec, slot, workdir, daemon, timeline)
        self.uri = uri

    @property
    def name(self):
        return self.spec.kernel.name

    def _boot_new(self, n, spare):
        t = time.time()
        vm = DomainVm(self.name, self.uri, os.path.join(self.workdir, "domains"))
        try:
            if not vm.has_qga:  # said before anything is started or reset
                vm.wait_ready()
            state = vm.state()
            if state.startswith("shut off") or state.startswith("crashed"):
                if state.startswith("crashed"):
                    virsh(self.uri, "destroy", self.name)
                res = virsh(self.uri, "start", self.name)
                if res.returncode != 0:
                    raise RuntimeError(f"virsh start {self.name}: {_said(res)}")
            elif n > 1:
                # a guest that went down under the last case (it is still running: hung or panicked)
                res = virsh(self.uri, "reset", self.name)
                if res.returncode != 0:
                    raise RuntimeError(f"virsh reset {self.name}: {_said(res)}")
            vm.wait_ready(timeout=slow(180))
            self._set_up(vm)
            self._wait_watched(vm)
        except Exception:
            vm.close()
            raise
        self.timeline.append(dict(vm=self.name, event="boot", start=t, end=time.time(), boot=n,
                                  spare=False, restored=False))
        return vm

    def _wait_watched(self, vm, timeout=60.0):
        """vmced (libvirt mode) attaches to a domain by itself"""
        deadline = time.monotonic() + timeout
        while True:
            res = self.daemon.ctl("--json", "vm", vm.name, check=False)
            if res.returncode == 0 and json.loads(res.stdout).get("state") == "attached":
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"vmced does not watch domain {vm.name} (vmcectl vm {vm.name}: "
                                   f"{(res.stderr or res.stdout).strip() or 'not attached'}); run it "
                                   "in libvirt mode: vmced --connect URI --all-domains")
            time.sleep(0.2)

    def prepare_spare(self):
        pass  # one domain, one guest

    def stop(self):
        # the domain stays as it is, watched by the host's vmced
        if self.vm is not None:
            self.vm.close()
            self.vm = None

    @staticmethod
    def _stop_vm(vm):
        vm.close()


class DomainRunner(Runner):
    def __init__(self, campaign, outdir, uri, target, fresh=False):
        super().__init__(campaign, outdir, reuse=True, fresh=fresh, restore=False)
        self.uri, self.target = uri, target

    def guest(self, spec, slot, daemon, real):
        return DomainGuest(spec, slot, self.outdir, daemon, self.timeline, self.uri)

    def daemon(self):
        ctl = VmcedCtl(self.target)
        res = ctl.ctl("status", check=False)
        if res.returncode != 0:
            raise RuntimeError(f"no vmced to reach: {(res.stderr or res.stdout).strip().splitlines()[-1]}")
        return ctl


def domain_image(name):
    """A domain as the campaign's image: known by its kernel once it runs"""
    return images.Image(name, None, None)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--connect", help="libvirt's URI (default: virsh's)")
    p.add_argument("--vmced", help="vmcectl --connect TARGET for that host's vmced (default: the local one)")
    p.add_argument("--spec", default=DEFAULT_SPEC, help="the campaign file whose cases run on every domain")
    p.add_argument("--out", help="results.jsonl and report.html (default build/campaigns/virsh-NAME)")
    p.add_argument("--fresh", action="store_true", help="start over instead of resuming")
    p.add_argument("domains", nargs="+")
    args = p.parse_args(argv)
    try:
        campaign = Campaign.load(args.spec, images=args.domains, resolve_image=domain_image)
    except SpecError as e:
        print(f"campaign: error: {e}", file=sys.stderr)
        return 2
    outdir = args.out or os.path.join(paths.build_dir(), "campaigns", f"virsh-{campaign.name}")
    runner = DomainRunner(campaign, outdir, args.connect, args.vmced, fresh=args.fresh)
    print(f"campaign {campaign.name}: {len(campaign.cases)} case(s) on domain(s) "
          f"{', '.join(args.domains)} through qemu-guest-agent; results in {runner.results_path}", flush=True)
    t0 = time.time()
    try:
        results = runner.run()
    except RuntimeError as e:
        print(f"campaign: error: {e}", file=sys.stderr)
        return 1
    _, _, timeline, skipped = load_results(runner.results_path)
    report = os.path.join(outdir, "report.html")
    meta = {"name": campaign.name, "time": time.time(), "seed": campaign.seed, "reuse": True,
            "guest_kernel": ", ".join(k.label for k in campaign.kernels.values()),
            "qemus": [], "qemu": "libvirt's", "file": campaign.path,
            "libvirt": args.connect or "virsh's default"}
    with open(report, "w") as f:
        f.write(render(meta, results, timeline, skipped))
    print(f"\ncampaign {campaign.name}: {len(results)} case(s) in {time.time() - t0:.0f} s")
    for r in results:
        if r["verdict"] != "pass":
            why = "; ".join(r.get("reasons") or []) or r.get("not_run") or ""
            print(f"  {r['verdict']:10s} {r['case']['id']}: {why}")
    for line in summary_text(results):
        print(textwrap.fill(line, width=100))
    print(f"report: {report}")
    return 0 if all(r["verdict"] in JUDGED_OK for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
