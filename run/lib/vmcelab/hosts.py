"""Campaigns across hosts, over ssh's own transport.

Each host runs its share of the cases with its own `run/campaign --worker`
(its own vmced and guests, exactly as a campaign on that host alone would),
reached as `ssh [user@]host -- TREE/run/campaign --worker`. The worker
answers with one JSON line per record, which lands here in one
results.jsonl with the host's name. No agent and no protocol of vmce's own
go between the hosts: the worker speaks the results file's own format.

  hello    the worker's first line: its vmce version, what it lacks
  job      our one line to it: the campaign file's text, the case ids, the
           options; its stdin stays open, and its end means we are gone
  case     a case's record, as results.jsonl has it
  end      its timeline; nothing comes after
  error    why it cannot run the job (a campaign file it reads otherwise)

A host that fails before its hello (unreachable, wrong keys, no vmce there,
another version) is named in one line and gets no cases. A host lost on the
way leaves its unfinished cases "not run (host lost: why)"; the run goes on
with the others, and a resume runs what is missing.
"""
import json
import os
import subprocess
import sys
import threading
import time

from . import paths
from .expect import expectation
from .runner import ResultsFile, case_record, start_qemus

HELLO_TIMEOUT_S = 60
LOST = "host lost: "


def why_failed(rc, stderr, tree):
    """one line for an ssh that ended before the worker said hello"""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    if rc == 127 or any("No such file or directory" in ln and "run/campaign" in ln for ln in lines):
        return f"no vmce at {tree} there (run/campaign is missing; ?tree=PATH says where it is)"
    if rc == 255:
        return lines[-1] if lines else "ssh failed"
    return lines[-1] if lines else f"the worker exited with status {rc} before it said hello"


def hello_problem(hello, version):
    if hello.get("type") != "hello":
        return f"it answered {json.dumps(hello)[:80]}, not a hello: is that vmce's run/campaign?"
    if hello.get("version") != version:
        return (f"vmce there is version {hello.get('version') or '(none given)'}, here {version}: "
                "install the same vmce on both")
    return hello.get("missing")


def probe(host, version):
    """None when @host can take cases, else why not (its hello is kept)"""
    try:
        r = subprocess.run(host.worker_argv("--hello"), stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=HELLO_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"no answer within {HELLO_TIMEOUT_S} s"
    except OSError as e:
        return f"cannot run ssh: {e.strerror}"
    first = r.stdout.splitlines()[0] if r.stdout.strip() else ""
    try:
        hello = json.loads(first)
    except ValueError:
        return why_failed(r.returncode, r.stderr, host.tree)
    host.info = hello
    return hello_problem(hello, version)


def spread(cases, hosts):
    """each host its share, in the campaign's order: round robin, so that
    every host gets each kind of case and the guest-ending ones spread"""
    shares = {h.name: [] for h in hosts}
    for i, case in enumerate(cases):
        shares[hosts[i % len(hosts)].name].append(case)
    return shares


def lost_record(case, host, why):
    now = time.time()
    return dict(case_record(case, expectation(case), None, LOST + why, now, now), host=host.name)


class HostsRunner:
    """The cases of one campaign spread over several hosts' workers; the same
    results.jsonl and resume as a campaign on one host (Runner)"""

    def __init__(self, campaign, hosts, outdir, spec_text, kernels=None, reuse=True, restore=True,
                 fresh=False, log=print, progress=None, qemus=None):
        self.campaign, self.hosts, self.outdir = campaign, hosts, outdir
        self.spec_text, self.kernels, self.qemus = spec_text, kernels, qemus
        self.reuse, self.restore, self.log = reuse, restore, log
        self.progress = progress
        self.results = ResultsFile(os.path.join(outdir, "results.jsonl"), fresh)
        self.results_path = self.results.path
        self.timeline = []
        self.lock = threading.Lock()
        self.version = paths.version()
        self.procs = []  # the workers' ssh
        self.stopping = False  # interrupted here: a worker's end is no host lost

    def records(self):
        return self.results.records()

    def finished(self, lost_too=True):
        """case id -> its last record; without @lost_too, a case its host
        lost is not finished: a resume runs it again"""
        return self.results.cases(lambda rec: lost_too or not (rec.get("not_run") or "").startswith(LOST))

    def record(self, rec):
        self.results.append(rec)

    def run(self):
        done, todo = self.campaign.split_done(self.finished(lost_too=False))
        if done:
            self.log(f"campaign {self.campaign.name}: {len(done)} case(s) already done, {len(todo)} to go")
        started = time.time()
        self.record({"type": "start", "time": started, "campaign": self.campaign.name, "reuse": self.reuse,
                     "restore": self.restore, "seed": self.campaign.seed,
                     "qemus": start_qemus(self.campaign), "hosts": [h.to_dict() for h in self.hosts]})
        why = {}
        probes = [threading.Thread(target=lambda h=h: why.__setitem__(h.name, probe(h, self.version)))
                  for h in self.hosts]
        for t in probes:
            t.start()
        for t in probes:
            t.join()
        able = []
        for h in self.hosts:
            if why[h.name]:
                h.refused = why[h.name]
                print(f"campaign: error: {h.name} ({h.label}): {why[h.name]}", file=sys.stderr, flush=True)
            else:
                able.append(h)
        if not able:
            raise RuntimeError(f"none of the {len(self.hosts)} host(s) can run cases")
        shares = spread(todo, able)
        self.log(f"campaign {self.campaign.name}: " + ", ".join(
            f"{h.name} {len(shares[h.name])} case(s)" for h in able))
        threads = [threading.Thread(target=self.drive, args=(h, shares[h.name])) for h in able if shares[h.name]]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        except KeyboardInterrupt:
            # the workers' ssh sessions are ours to end (their own sessions:
            # the terminal's ^C does not reach them); a worker whose ssh
            # ends takes its guests down. What did not finish is not
            # recorded: a resume runs it
            self.stopping = True
            for proc in list(self.procs):
                proc.kill()
            # (a join that ^C interrupted can leave its thread looking done)
            for proc in list(self.procs):
                proc.wait()
            for t in threads:
                t.join(timeout=10)
            raise
        self.record({"type": "end", "time": time.time(), "started": started, "timeline": self.timeline,
                     "hosts": [h.to_dict() for h in self.hosts]})
        return list(self.finished().values())

    def drive(self, host, cases):
        """runs @cases on @host's worker until it says end or is lost"""
        job = {"type": "job", "name": self.campaign.name, "host": host.name, "spec": self.spec_text,
               "spec_path": self.campaign.path, "kernels": self.kernels, "qemus": self.qemus,
               "cases": [c.id for c in cases],
               "reuse": self.reuse, "restore": self.restore, "concurrency": self.campaign.concurrency,
               "version": self.version}
        pending = {c.id: c for c in cases}
        why, ended, tail = None, False, []
        try:
            proc = subprocess.Popen(host.worker_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
            self.procs.append(proc)
        except OSError as e:
            self._lose(host, pending, f"cannot run ssh: {e.strerror}")
            return

        def said():
            # what the worker logs is the campaign's log, with the host's name
            for line in proc.stderr:
                tail[:] = (tail + [line.rstrip()])[-5:]
                if line.startswith("campaign: "):
                    self.log(f"{host.name}: {line[len('campaign: '):].rstrip()}")
        err = threading.Thread(target=said, daemon=True)
        err.start()
        try:
            proc.stdin.write(json.dumps(job) + "\n")
            proc.stdin.flush()
            for line in proc.stdout:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # cut short as the connection went
                kind = rec.get("type")
                if kind == "hello":
                    why = hello_problem(rec, self.version)
                    if why:
                        break
                elif kind == "case" and rec["case"]["id"] in pending:
                    rec["host"] = host.name
                    self.record(rec)
                    pending.pop(rec["case"]["id"])
                    if self.progress:
                        self.progress.update(rec)
                elif kind == "end":
                    with self.lock:
                        self.timeline += [dict(e, host=host.name) for e in rec.get("timeline", [])]
                    ended = True
                    break
                elif kind == "error":
                    why = rec.get("error") or "the worker gave up"
                    break
        except (BrokenPipeError, OSError) as e:
            why = why or f"the connection broke ({e.strerror or e})"
        finally:
            try:
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            err.join(timeout=5)
        if (ended and not pending) or self.stopping:
            return
        if why is None:
            last = [ln for ln in tail if ln.strip() and not ln.startswith("campaign: ")]
            why = (last[-1] if last and proc.returncode == 255 else
                   f"its connection ended (ssh status {proc.returncode})")
        self._lose(host, pending, why)

    def _lose(self, host, pending, why):
        host.lost = why
        print(f"campaign: error: {host.name} ({host.label}): {LOST}{why}; {len(pending)} case(s) not run",
              file=sys.stderr, flush=True)
        for case in pending.values():
            rec = lost_record(case, host, why)
            self.record(rec)
            if self.progress:
                self.progress.update(rec)
