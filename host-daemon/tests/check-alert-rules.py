#!/usr/bin/env python3
"""The alert rules the package ships (data/prometheus/vmce-alerts.yml) load
in Prometheus and fire as vmce-alerts-test.yml says: `promtool check rules`
and `promtool test rules`, Debian's prometheus package's. TAP; a skip, saying
why, where promtool is not installed (run/install-deps installs it)."""
import os
import shutil
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
RULES = os.path.join(HERE, "..", "data", "prometheus", "vmce-alerts.yml")
TESTS = os.path.join(HERE, "vmce-alerts-test.yml")


def main():
    promtool = shutil.which("promtool")
    if promtool is None:
        print("1..0 # SKIP promtool is not installed (Debian's prometheus package: run/install-deps)")
        return 0
    failed = 0
    for n, (what, args) in enumerate((("the rules load", ["check", "rules", RULES]),
                                      ("the alerts fire as the rule tests say", ["test", "rules", TESTS])), 1):
        r = subprocess.run([promtool, *args], capture_output=True, text=True, cwd=HERE, timeout=120)
        print(f"{'ok' if r.returncode == 0 else 'not ok'} {n} - promtool {args[0]} rules: {what}")
        if r.returncode != 0:
            failed += 1
            for line in (r.stdout + r.stderr).splitlines():
                print(f"# {line}")
    print("1..2")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
