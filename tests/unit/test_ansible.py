#!/usr/bin/env python3
"""vmce's Ansible role (deploy/ansible): its template, rendered with the
role's defaults, gives the vmced.conf the package ships (the same sections,
keys and values); the variables each land where the operator's guide says
(per-domain sections, lists and booleans as GKeyFile reads them, no
[libvirt] without a URI, vmced's own default for an empty key); the
playbook passes ansible-playbook --syntax-check. The role run for real, on
three hosts and twice, is e2e-fleet."""
import configparser
import os
import shutil
import subprocess
import unittest

import jinja2
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
ROLE = os.path.join(ROOT, "deploy", "ansible", "roles", "vmce")
SHIPPED = os.path.join(ROOT, "host-daemon", "data", "vmced.conf")


def defaults():
    with open(os.path.join(ROLE, "defaults", "main.yml")) as f:
        return yaml.safe_load(f)


def render(**overrides):
    """the template as Ansible's template module renders it (trim_blocks,
    no lstrip_blocks); the hash line's value given"""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")),
                             trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    values = {**defaults(), "ansible_managed": "Ansible managed", "vmce_start_hash": "HASH", **overrides}
    return env.get_template("vmced.conf.j2").render(**values)


def parsed(text):
    cp = configparser.ConfigParser(interpolation=None, comment_prefixes=("#",), strict=True)
    cp.optionxform = str
    cp.read_string(text)
    return {s: dict(cp[s]) for s in cp.sections()}


class Template(unittest.TestCase):
    def test_defaults_give_the_shipped_file(self):
        with open(SHIPPED) as f:
            shipped = parsed(f.read())
        self.assertEqual(parsed(render()), shipped)

    def test_header_names_the_role_and_the_hash(self):
        head = render().splitlines()[:4]
        self.assertTrue(head[0].startswith("# Ansible managed: vmce's Ansible role"), head)
        self.assertIn("# HASH", head)

    def test_domains_lists_and_other_sections(self):
        got = parsed(render(vmce_libvirt_domains=["web1", "db1"], vmce_policy="stop", vmce_journal="/srv/j.jsonl",
                            vmce_domains={"db1": {"policy": "ignore-ao", "migration": "refuse"}},
                            vmce_extra_config={"attach": {"sockets": ["/run/a/*.qmp", "/run/b"], "watch": True}}))
        self.assertEqual(got["libvirt"], {"uri": "qemu:///system", "domains": "web1;db1"})
        self.assertEqual(got["vmced"]["policy"], "stop")
        self.assertEqual(got["vmced"]["journal"], "/srv/j.jsonl")
        self.assertEqual(got["domain db1"], {"migration": "refuse", "policy": "ignore-ao"})
        self.assertEqual(got["attach"], {"sockets": "/run/a/*.qmp;/run/b", "watch": "true"})

    def test_no_libvirt_and_empty_keys_left_out(self):
        got = parsed(render(vmce_libvirt_uri="", vmce_realtime_priority=""))
        self.assertNotIn("libvirt", got)
        self.assertNotIn("realtime-priority", got["vmced"])
        self.assertNotIn("socket", got["vmced"])

    def test_restart_settings_leave_out_the_reloaded_ones(self):
        """vars/main.yml: what vmced reads at start only; a policy change
        must not restart it"""
        with open(os.path.join(ROLE, "vars", "main.yml")) as f:
            start = yaml.safe_load(f)["vmce_start_settings"]
        used = " ".join(start.values())
        for reloaded in ("vmce_policy", "vmce_migration", "vmce_hugepage", "vmce_domains"):
            self.assertNotIn(reloaded, used)
        for var in ("vmce_socket", "vmce_journal", "vmce_libvirt_uri", "vmce_libvirt_domains", "vmce_extra_config"):
            self.assertIn(var, used)


class Playbook(unittest.TestCase):
    def test_syntax(self):
        if not shutil.which("ansible-playbook"):
            self.skipTest("ansible-playbook is missing (run/install-deps installs Debian's ansible)")
        d = os.path.join(ROOT, "deploy", "ansible")
        r = subprocess.run(["ansible-playbook", "--syntax-check", "-i", "inventory.example.ini", "vmce.yml"],
                           cwd=d, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
