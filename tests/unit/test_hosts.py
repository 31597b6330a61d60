#!/usr/bin/env python3
"""Campaigns across hosts (vmcelab.hosts) against scripted workers: ssh is
$VMCE_SSH, here a script that plays the far side as the host's name says
(a worker that runs its cases, one that dies half way, one of another
version, an unreachable host, wrong keys, no vmce there). The real thing,
over real sshds in network namespaces, is e2e-fleet."""
import contextlib
import io
import json
import os
import signal
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(HERE, "..", "..", "run", "lib")
sys.path.insert(0, LIB)

from vmcelab import paths  # noqa: E402
from vmcelab.campaign import Campaign, SpecError  # noqa: E402
from vmcelab.hosts import HostsRunner, spread  # noqa: E402
from vmcelab.sshtarget import Host, TargetError  # noqa: E402

# the far side: argv is ssh's, the host is the word after "--"
FAKE = r'''
import json, os, sys
sys.path.insert(0, os.environ["FAKE_LIB"])
argv = sys.argv[1:]
host = argv[argv.index("--") + 1]
remote = argv[-1]
fail = {"unreach": (255, "ssh: connect to host unreach port 22: No route to host"),
        "nokey": (255, "root@nokey: Permission denied (publickey)."),
        "notree": (127, "bash: line 1: /nowhere/run/campaign: No such file or directory")}
if host in fail:
    print(fail[host][1], file=sys.stderr)
    sys.exit(fail[host][0])
version = "0.0.1" if host == "oldver" else os.environ["FAKE_VERSION"]
print(json.dumps({"type": "hello", "version": version, "qemu": "QEMU emulator version 7.2.0",
                  "missing": "vmced is not built at /x (make build there)" if host == "novmced" else None}),
      flush=True)
if "--hello" in remote:
    sys.exit(0)
job = json.loads(sys.stdin.readline())
from vmcelab.campaign import Campaign
c = Campaign.parse(job["spec"], job["spec_path"])
cases = [x for x in c.cases if x.id in job["cases"]]
with open(os.path.join(os.environ["FAKE_LOG"], host), "a") as f:
    f.write(json.dumps(job["cases"]) + "\n")
for i, case in enumerate(cases):
    if host == "slow":
        import time
        time.sleep(0.3)
    if host == "dies" and i == 1:
        print("Connection to dies closed by remote host.", file=sys.stderr)
        sys.exit(255)
    print("campaign: a log line", file=sys.stderr, flush=True)
    print(json.dumps({"type": "case", "case": case.to_dict(), "vm": "g-0", "verdict": "pass",
                      "reasons": [], "not_run": None, "observed": {}, "start": 1, "end": 2}), flush=True)
print(json.dumps({"type": "end", "timeline": [{"vm": "g-0", "event": "case", "start": 1, "end": 2}]}),
      flush=True)
'''

SPEC = """
[guest g]
disk = false
[matrix m]
pages = anon-dirty, shmem, thp, mlock-dirty
kinds = ao, ar
"""


def setUpModule():
    # the campaign files here name the default guest kernel and image,
    # which need only exist (empty files), not be built (make image), for
    # this test and for its scripted workers (they inherit the environment)
    tmp = tempfile.mkdtemp()
    for env, name in (("VMCE_KERNEL", "vmlinux"), ("VMCE_INITRD", "guest.cpio.gz")):
        open(os.path.join(tmp, name), "w").close()
        os.environ[env] = os.path.join(tmp, name)


class Targets(unittest.TestCase):
    def test_target_parts(self):
        os.environ.pop("VMCE_SSH", None)
        h = Host("h1", "ssh://admin@hv1:2222?keyfile=/k&no_verify=1&tree=/opt/vmce")
        self.assertEqual((h.address, h.port, h.user, h.keyfile, h.no_verify, h.tree),
                         ("hv1", 2222, "admin", "/k", True, "/opt/vmce"))
        argv = h.worker_argv("--hello")
        self.assertEqual(argv[:1], ["ssh"])
        self.assertIn("BatchMode=yes", argv)
        self.assertEqual(argv[argv.index("-p") + 1], "2222")
        self.assertEqual(argv[argv.index("-i") + 1], "/k")
        self.assertEqual(argv[-2:], ["hv1", "/opt/vmce/run/campaign --worker --hello"])
        self.assertEqual(Host(None, "ssh://hv2").name, "hv2")
        self.assertEqual(Host("x", "ssh://hv2").tree, paths.ROOT)
        # a host with vmce's package: its worker runs the installed vmced
        h = Host("h2", "ssh://hv2?tree=/usr/lib/vmce-lab&vmced=/usr/sbin/vmced&build=/srv/vmce")
        self.assertEqual(h.worker_argv()[-1], "env VMCE_VMCED=/usr/sbin/vmced VMCE_BUILD_DIR=/srv/vmce "
                                              "/usr/lib/vmce-lab/run/campaign --worker")

    def test_bad_targets(self):
        for target, said in (("http://hv1", "not an ssh target"), ("ssh://", "names no host"),
                             ("ssh://hv1/x", "a path means nothing"),
                             ("ssh://hv1?socket=/x", "unknown parameter socket"),
                             ("ssh://hv1:port", "")):
            with self.assertRaises(TargetError) as cm:
                Host("h", target)
            self.assertIn(said, str(cm.exception))

    def test_spread_round_robin(self):
        hosts = [Host("a", "ssh://a"), Host("b", "ssh://b")]
        self.assertEqual(spread(list(range(5)), hosts), {"a": [0, 2, 4], "b": [1, 3]})

    def test_hosts_section(self):
        c = Campaign.parse(SPEC + "[hosts]\nhv1 = ssh://hv1\nhv1.libvirt = qemu+ssh://hv1/system\n"
                                  "hv2 = ssh://root@hv2?tree=/v\n", "t.ini")
        self.assertEqual([(h.name, h.address, h.libvirt) for h in c.hosts],
                         [("hv1", "hv1", "qemu+ssh://hv1/system"), ("hv2", "hv2", None)])
        line = SPEC.count("\n") + 2  # the one after [hosts]
        for text, said in (("[hosts]\nhv1 = http://x\n", f"t.ini:{line}: http://x: not an ssh target"),
                           ("[hosts]\nhv1.port = 3\n", f"t.ini:{line}: unknown key 'hv1.port'"),
                           ("[hosts]\nhv1.libvirt = qemu:///system\n", "host hv1 has no 'hv1 = ssh://...'"),
                           ("[hosts]\nh/1 = ssh://x\n", "'h/1' is not a host name")):
            with self.assertRaises(SpecError) as cm:
                Campaign.parse(SPEC + text, "t.ini")
            self.assertIn(said, str(cm.exception))


class Across(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        fake = os.path.join(self.tmp, "fake-ssh.py")
        with open(fake, "w") as f:
            f.write(FAKE)
        self.log = os.path.join(self.tmp, "log")
        os.makedirs(self.log)
        os.environ.update(VMCE_SSH=f"{sys.executable} {fake}", FAKE_LIB=LIB, FAKE_LOG=self.log,
                          FAKE_VERSION=paths.version())
        self.spec = os.path.join(self.tmp, "c.ini")
        with open(self.spec, "w") as f:
            f.write(SPEC)
        self.campaign = Campaign.load(self.spec)
        self.lines = []

    def tearDown(self):
        for key in ("VMCE_SSH", "FAKE_LIB", "FAKE_LOG", "FAKE_VERSION"):
            os.environ.pop(key, None)

    def run_on(self, *names, fresh=False):
        hosts = [Host(n, f"ssh://{n}") for n in names]
        r = HostsRunner(self.campaign, hosts, os.path.join(self.tmp, "out"), SPEC, fresh=fresh,
                        log=self.lines.append)
        return r, hosts, r.run()

    def test_cases_spread_and_recorded_with_their_host(self):
        r, _, results = self.run_on("a", "b")
        self.assertEqual(len(results), 8)
        self.assertEqual(sorted(x["case"]["id"] for x in results), sorted(c.id for c in self.campaign.cases))
        self.assertEqual(sorted(x["host"] for x in results), ["a"] * 4 + ["b"] * 4)
        self.assertTrue(all(x["verdict"] == "pass" for x in results))
        recs = r.records()
        self.assertEqual(recs[-1]["type"], "end")
        self.assertEqual({e["host"] for e in recs[-1]["timeline"]}, {"a", "b"})
        self.assertIn("a: a log line", self.lines)

    def test_bad_hosts_get_no_cases_and_one_line_each(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            _, hosts, results = self.run_on("a", "unreach", "nokey", "notree", "oldver", "novmced")
        said = err.getvalue().splitlines()
        self.assertEqual(len(said), 5, said)
        for line, what in zip(said, ("unreach (unreach): ssh: connect to host unreach port 22: No route",
                                     "nokey (nokey): root@nokey: Permission denied (publickey).",
                                     "notree (notree): no vmce at",
                                     "oldver (oldver): vmce there is version 0.0.1, here",
                                     "novmced (novmced): vmced is not built at /x")):
            self.assertTrue(line.startswith("campaign: error: " + what), line)
        self.assertEqual({x["host"] for x in results}, {"a"})
        self.assertEqual(len(results), 8)
        self.assertEqual([h.name for h in hosts if h.refused], ["unreach", "nokey", "notree", "oldver",
                                                                 "novmced"])

    def test_lost_host_then_resume_runs_only_what_is_missing(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            _, hosts, results = self.run_on("a", "dies")
        lost = [x for x in results if x["verdict"] == "not run"]
        self.assertEqual(len(lost), 3)  # its first case came back, then the connection went
        self.assertTrue(all(x["host"] == "dies" and
                            x["not_run"] == "host lost: Connection to dies closed by remote host."
                            for x in lost), lost)
        self.assertIn("dies (dies): host lost: Connection to dies closed by remote host.; 3 case(s) not run",
                      err.getvalue())
        self.assertEqual(hosts[1].lost, "Connection to dies closed by remote host.")
        # again, without the host that died: the three, and nothing else
        os.unlink(os.path.join(self.log, "a"))
        _, _, results = self.run_on("a")
        with open(os.path.join(self.log, "a")) as f:
            sent = json.loads(f.read())
        self.assertEqual(sorted(sent), sorted(x["case"]["id"] for x in lost))
        self.assertEqual(len(results), 8)
        self.assertTrue(all(x["verdict"] == "pass" for x in results))

    def test_interrupted_records_no_host_lost(self):
        # ^C here once a case is in: the workers' ssh are ended, and what
        # did not finish is left for a resume rather than recorded as lost
        hosts = [Host("slow", "ssh://slow")]
        r = HostsRunner(self.campaign, hosts, os.path.join(self.tmp, "out"), SPEC, log=self.lines.append)

        def interrupt():
            while not r.finished():
                time.sleep(0.02)
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=interrupt, daemon=True).start()
        with contextlib.redirect_stderr(io.StringIO()) as err:
            with self.assertRaises(KeyboardInterrupt):
                r.run()
        done = r.finished()
        self.assertTrue(0 < len(done) < 8, len(done))
        self.assertTrue(all(x["verdict"] == "pass" for x in done.values()))
        self.assertNotIn("host lost", err.getvalue())
        self.assertTrue(r.procs and all(p.poll() is not None for p in r.procs),
                        [(p.pid, p.poll()) for p in r.procs])

    def test_no_host_left(self):
        with contextlib.redirect_stderr(io.StringIO()):
            with self.assertRaises(RuntimeError) as cm:
                self.run_on("unreach", "nokey")
        self.assertIn("none of the 2 host(s) can run cases", str(cm.exception))


if __name__ == "__main__":
    unittest.main(testRunner=unittest.TextTestRunner(stream=sys.stdout, verbosity=2))
