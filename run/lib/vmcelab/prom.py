"""Prometheus and node_exporter of a test's or bench's own (Debian's
packages): started on free loopback ports with a private configuration
and storage, scraping and evaluating every second, and stopped with
everything they started. Read through Prometheus's HTTP API."""
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

from . import paths

RULES = os.path.join(paths.ROOT, "host-daemon", "data", "prometheus", "vmce-alerts.yml")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing():
    """The programs not installed (run/install-deps installs them)"""
    return [p for p in ("prometheus", "prometheus-node-exporter") if shutil.which(p) is None]


class Monitoring:
    """node_exporter with its textfile collector alone, reading @work/textfile,
    and a Prometheus scraping it (job node) and vmced's endpoint at
    @vmced_port (job vmced), with the shipped alert rules"""

    def __init__(self, work, vmced_port):
        self.work = work
        self.procs = []
        self.textfile_dir = os.path.join(work, "textfile")
        os.makedirs(self.textfile_dir, exist_ok=True)
        self.node_port, self.port = free_port(), free_port()
        self._spawn(["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{self.node_port}",
                     "--collector.disable-defaults", "--collector.textfile",
                     f"--collector.textfile.directory={self.textfile_dir}"], "node-exporter.log")
        config = os.path.join(work, "prometheus.yml")
        with open(config, "w") as f:
            json.dump({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                       "rule_files": [RULES],
                       "scrape_configs": [
                           {"job_name": "node", "static_configs": [{"targets": [f"127.0.0.1:{self.node_port}"]}]},
                           {"job_name": "vmced", "static_configs": [{"targets": [f"127.0.0.1:{vmced_port}"]}]}]},
                      f)
        self._spawn(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={work}/tsdb",
                     f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"], "prometheus.log")

    def _spawn(self, argv, log):
        with open(os.path.join(self.work, log), "w") as out:
            self.procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                               stderr=subprocess.STDOUT, start_new_session=True))

    @property
    def textfile(self):
        return os.path.join(self.textfile_dir, "vmce.prom")

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.load(r)["data"]

    def query(self, expr):
        """{job: value} of an instant query; {} while Prometheus is not up"""
        try:
            return {r["metric"].get("job"): float(r["value"][1]) for r in self.api("query", query=expr)["result"]}
        except OSError:
            return {}

    def firing(self, alert, vm):
        """{job: 1.0} for each job whose series have @alert firing for @vm"""
        return self.query(f'ALERTS{{alertname="{alert}",alertstate="firing",vm="{vm}"}}')

    def wait(self, cond, timeout, interval=0.05):
        deadline = time.monotonic() + timeout
        while True:
            value = cond()
            if value or time.monotonic() > deadline:
                return value
            time.sleep(interval)

    def stop(self):
        for proc in self.procs:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = []
