#!/usr/bin/env python3
"""Three hosts on this machine (run/fleet up 3: each a Debian 12 host of its
own, a container booted with systemd-nspawn in a network namespace, with
its own sshd and libvirtd, vmce's packages deployed with vmce's Ansible
playbook (deploy/ansible/vmce.yml over the hosts' sshd) and its vmced run by
systemd, and one 128 MiB TCG guest, on a private network of the fleet's
own), reached only as an operator reaches other hosts: libvirt over qemu+ssh, vmced over vmcectl --connect ssh://. Asserts:
every host's vmced took its guest; dpkg knows the packages and each host's
vmced.conf is the playbook's; the playbook run again (run/fleet deploy)
changes nothing on any host; run/virsh/campaign over the three runs
their cases side by side into one results file with the host first; one
host's libvirtd and sshd killed mid-campaign leaves its unfinished cases
"not run (host lost: ...)" while the others pass; a resume runs only what is
missing; vmcectl over the three says the lost host in one line and answers
for the others; vmcectl --connect asks a guest's agent through the
vmced of its host, at a socket in that host's own libvirt directory that
this machine (and the other hosts) do not have: guest and poison
--guest-pid succeed from this machine and from another host, and the
socket gone on its host is one line naming the host and the path. Then
run/campaign across the fleet (run/fleet campaign: each
host's share run by its own run/campaign --worker over ssh): the lost host
is refused in one line, the two others take its cases; the second host's
sshd killed mid-campaign takes its worker and guests with it, and leaves
its unfinished cases "not run (host lost: ...)"; one results.jsonl and one
report with the hosts; a resume (hosts from the file's own [hosts]) runs
only those cases. Before the campaigns, run/fleet drain moves the first
host's guest, holding the page just poisoned, to the second host and back:
each time the page goes in the domain's metadata and the vmced where it
lands poisons it again. run/fleet down leaves no namespace and no QEMU.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time

from common import Tap, paths, prerequisites, wait_for, workdir
from vmcelab import sshd as sshdmod

tap = Tap()
prerequisites(tap)
for why in (sshdmod.available(),
            None if shutil.which("libvirtd") and shutil.which("virsh") else "libvirtd or virsh is missing",
            None if shutil.which("nc") else "nc is missing (netcat-openbsd: libvirt's qemu+ssh runs it)",
            None if shutil.which("ip") else "ip is missing (iproute2)"):
    if why:
        tap.skip("a fleet of three hosts", why)
        tap.done()

FLEET = os.path.join(paths.ROOT, "run", "fleet")
CAMPAIGN = os.path.join(paths.ROOT, "run", "virsh", "campaign")
ROUNDS = 6
work = workdir("fleet")


def fleet(*args, timeout=900):
    return subprocess.run([FLEET, *args], capture_output=True, text=True, timeout=timeout)


def in_hub(*argv):
    return ["ip", "netns", "exec", "vmce-fleet", *argv]


def kill_mid_campaign(camp, host, *parts):
    """takes @parts of @host away while @camp is held still: a host that
    finishes its cases in a few seconds (0.15 s each once its guests are up)
    would otherwise be done before run/fleet kill reaches it, and the test
    would see no case lost. The campaign (its own session) is stopped, not
    its hosts: what it has in flight meets the loss when it runs on"""
    os.killpg(camp.pid, signal.SIGSTOP)
    try:
        return fleet("kill", host, *parts)
    finally:
        os.killpg(camp.pid, signal.SIGCONT)


def campaign_argv(hosts, results):
    argv = [CAMPAIGN]
    for h in hosts:
        argv += ["--connect", h["libvirt_ssh"], "--vmced", h["vmced"]]
    return in_hub(*argv, "--rounds", str(ROUNDS), "--results", results)


def ctl(h, *args, timeout=120):
    """this machine's vmcectl (in the fleet's network) for host @h's vmced"""
    return subprocess.run(in_hub(paths.vmcectl(), "--connect", h["vmced"], *args), capture_output=True,
                          text=True, timeout=timeout)


def fields(text):
    """vmcectl guest's KEY=VALUE lines"""
    return dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln)


def remote_agent(hosts):
    """vmcectl guest and poison --guest-pid across hosts that share no file
    system: the guest agent's socket is a path in its host's own root"""
    a, b = hosts[0], hosts[1]
    dom_a, dom_b = a["domains"][0]["name"], b["domains"][0]["name"]
    paths_ = {}
    for h, dom in ((a, dom_a), (b, dom_b)):
        r = ctl(h, "--json", "vm", dom)
        paths_[h["name"]] = json.loads(r.stdout).get("agent") if r.returncode == 0 else None
    pa, pb = paths_[a["name"]], paths_[b["name"]]
    there = {h["name"]: fleet("exec", h["name"], "test", "-S", p).returncode == 0
             for h, p in ((a, pa), (b, pb)) if p}
    tap.ok(pa and pb and pa.startswith("/var/lib/libvirt/qemu/channel/") and all(there.values())
           and not os.path.exists(pa) and not os.path.exists(pb)
           and fleet("exec", a["name"], "test", "-e", pb).returncode != 0,
           "each guest's agent socket is in its host's own libvirt directory: not on this machine, not on "
           "the other host", diag=(pa, pb, there))
    if not (pa and pb):
        # a host whose vmced did not take its guest (said above) has no
        # agent to reach: the rest would only repeat that
        for desc in ("vmcectl --connect guest and poison --guest-pid", "vmcectl --connect from host to host",
                     "the agent's socket gone"):
            tap.skip(desc, f"no agent socket known for {a['name'] if not pa else b['name']}'s guest")
        return

    wait_for(lambda: ctl(a, "guest", dom_a, "ping").returncode == 0, 120, 1.0)
    r = ctl(a, "guest", dom_a, "sysctl", "name=vm.memory_failure_early_kill", "value=1")
    victim = fields(ctl(a, "guest", dom_a, "victim-start", "mode=idle").stdout)
    p = ctl(a, "--json", "poison", dom_a, "--guest-pid", victim.get("pid", "0"), "--guest-va",
            victim.get("va", "0"), "--kind", "ao")
    ev = json.loads(p.stdout) if p.stdout.startswith("{") else {}

    def sigbus():
        st = fields(ctl(a, "guest", dom_a, "victim-status", f"pid={victim.get('pid')}").stdout)
        return st.get("sigbus", "null") != "null" and json.loads(st["sigbus"])
    sig = wait_for(sigbus, 20, 0.2) or {}
    tap.ok(r.returncode == 0 and p.returncode == 0 and ev.get("result") == "injected"
           and int(ev.get("gpa", "0"), 16) == int(victim.get("gpa", "-1"), 16)
           and sig.get("code_name") == "BUS_MCEERR_AO" and sig.get("addr") == victim.get("va"),
           f"from this machine, vmcectl --connect {a['name']} guest and poison --guest-pid: the victim got "
           "BUS_MCEERR_AO at its own VA", diag=(victim, ev, p.stderr, sig))

    # from one host to another, with the installed vmcectl
    r = fleet("exec", a["name"], "vmcectl", "--connect", b["vmced"], "guest", dom_b, "ping", timeout=120)
    tap.ok(r.returncode == 0 and "boot_id=" in r.stdout,
           f"from {a['name']}, vmcectl --connect {b['name']} guest {dom_b} ping", diag=(r.stdout, r.stderr))

    # bad input: the socket gone on its host (moved away, and back: QEMU
    # still listens on it)
    fleet("exec", b["name"], "mv", pb, pb + ".away")
    r = ctl(b, "guest", dom_b, "ping")
    fleet("exec", b["name"], "mv", pb + ".away", pb)
    errs = [ln for ln in r.stderr.splitlines() if ln.strip()]
    want = (f"vmcectl: error: on {b['address']}:22: cannot reach the guest agent of vm {dom_b} at {pb}: "
            "No such file or directory")
    tap.ok(r.returncode == 1 and errs == [want] and ctl(b, "guest", dom_b, "ping").returncode == 0,
           f"the agent's socket gone on {b['name']}: one line naming the host and the path", diag=(errs, want))


def recap(out):
    """host -> {ok: N, changed: N, ...}: ansible-playbook's PLAY RECAP"""
    got = {}
    for m in re.finditer(r"^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$", out, re.M):
        got[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return got


def deployed_again(hosts):
    """run/fleet up deployed with deploy/ansible/vmce.yml: each host's
    vmced.conf is the role's; a second run of the playbook (an operator's
    next run over hosts that have it all) changes nothing"""
    heads = {h["name"]: fleet("exec", h["name"], "head", "-n", "1", "/etc/vmce/vmced.conf").stdout.strip()
             for h in hosts}
    tap.ok(all(v.startswith("# Ansible managed: vmce's Ansible role") for v in heads.values()),
           "each host's /etc/vmce/vmced.conf was written by the playbook's template", diag=heads)
    t = time.monotonic()
    r = fleet("deploy", timeout=600)
    took = time.monotonic() - t
    got = recap(r.stdout)
    tap.ok(r.returncode == 0 and set(got) == {h["name"] for h in hosts}
           and all(x.get("ok", 0) > 0 and x.get("changed") == 0 and x.get("failed") == 0
                   and x.get("unreachable") == 0 for x in got.values())
           and r.stdout.count("ok: [") >= len(hosts) and "Vmced answers" in r.stdout,
           f"run/fleet deploy: the playbook again over the three hosts, changed=0 on each (idempotent; "
           f"{took:.1f} s)", diag=(r.stdout[-2500:], r.stderr[-500:]))


def journal_of(h, dom):
    """host @h's vmced's records of @dom (vmcectl --json events)"""
    r = ctl(h, "--json", "events", "--vm", dom, "-n", "0")
    out = []
    for ln in r.stdout.splitlines():
        try:
            rec = json.loads(ln)
        except ValueError:
            continue
        out.extend(rec if isinstance(rec, list) else [rec])
    return out


def drain_and_back(hosts):
    """run/fleet drain: the first host's guest, with the page remote_agent()
    poisoned, to the second host and back, its page carried each way in the
    domain's metadata and poisoned again where it lands"""
    a, b = hosts[0], hosts[1]
    dom = a["domains"][0]["name"]
    held = wait_for(lambda: (json.loads(ctl(a, "--json", "vm", dom).stdout or "{}").get("migration") or {})
                    .get("domain_metadata_pages", 0) >= 1, 20, 0.5)
    tap.ok(held, f"{a['name']}'s vmced keeps {dom}'s poisoned page in the domain's metadata")
    for src, dst in ((a, b), (b, a)):
        r = fleet("drain", src["name"], "--to", dst["name"], dom, timeout=600)
        tap.ok(r.returncode == 0 and f"{dom}: migrated" in r.stdout
               and "1 poisoned page(s) carried, poisoned there before it ran" in r.stdout
               and r.stdout.strip().endswith("1 migrated, 0 failed"),
               f"run/fleet drain {src['name']} --to {dst['name']}: {dom} migrated with its poisoned page, poisoned "
               "there before it ran",
               diag=(r.stdout, r.stderr[-800:]))
        got = wait_for(lambda: [x for x in journal_of(dst, dom) if x.get("type") == "migration"
                                and x.get("action") == "received"], 120, 1.0) or [{}]
        tap.ok(got[-1].get("marked") == 1,
               f"{dst['name']}'s vmced poisoned the page where {dom} landed ({got[-1].get('how')})", diag=got)


def rows(path):
    try:
        with open(path) as f:
            return [json.loads(ln) for ln in f if ln.strip()]
    except OSError:
        return []


fleet("down")  # a fleet left by an interrupted run
r = fleet("up", "3", "--domains", "1", "--mem", "128M")
try:
    if r.returncode != 0:
        tap.bail(f"run/fleet up 3 failed: {r.stderr.strip()[-500:]}")
    with open(os.path.join(paths.build_dir(), "fleet", "fleet.json")) as f:
        desc = json.load(f)
    hosts = desc["hosts"]
    env = dict(os.environ, VMCECTL=paths.vmcectl())

    def attached():
        st = fleet("vmcectl", "status", timeout=120)
        return st.returncode == 0 and st.stdout.count(" attached ") == 3 and st
    took = wait_for(attached, 180, 1.0)
    # (what each host's vmced said, should one not have taken its guest)
    st = None if took else fleet("vmcectl", "status")
    tap.ok(took, "run/fleet up 3: each host's vmced took its guest (vmcectl over ssh)",
           diag=None if took else "\n".join(
               [st.stdout, st.stderr] + [f"--- {h['name']}'s vmced and libvirtd:\n" + fleet(
                   "exec", h["name"], "journalctl", "-u", "vmced", "-u", "libvirtd", "--no-pager", "-n", "40",
                   "-o", "short-monotonic").stdout for h in hosts]))
    # the packages, not the tree: dpkg knows them, systemd runs vmced from
    # /usr/sbin, and the host has no checkout (the build directory only)
    probe = ('printf "%s %s %s %s %s" "$(dpkg-query -W -f=\'${Version}\' vmce)" '
             '"$(dpkg-query -W -f=\'${Version}\' vmce-lab)" '
             '"$(readlink /proc/$(systemctl show -p MainPID --value vmced)/exe)" "$(systemctl is-active vmced)" '
             f'"$(test -e {paths.ROOT}/meson.build && echo checkout || echo no-checkout)"')
    installed = {h["name"]: fleet("exec", h["name"], "sh", "-c", probe).stdout for h in hosts}
    tap.ok(all(re.fullmatch(r"(\S+) \1 /usr/sbin/vmced active no-checkout", v) for v in installed.values()),
           f"each host runs the vmced of the package {desc.get('package')} under its systemd, has vmce-lab "
           "for its campaign worker, and no checkout", diag=installed)

    deployed_again(hosts)
    remote_agent(hosts)
    drain_and_back(hosts)

    results = os.path.join(work, "results.jsonl")
    t0 = time.monotonic()
    camp = subprocess.Popen(campaign_argv(hosts, results), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    lost = hosts[2]
    lost_label = lost["address"]
    # the third host goes once its first case is in
    wait_for(lambda: any(x["host"] == lost_label for x in rows(results)), 300, 0.2)
    k = kill_mid_campaign(camp, lost["name"], "libvirtd", "sshd")
    out, err = camp.communicate(timeout=600)
    took = time.monotonic() - t0
    got = rows(results)
    by_host = {h["address"]: [x for x in got if x["host"] == h["address"]] for h in hosts}
    ok_hosts = [h["address"] for h in hosts[:2]]
    tap.ok(all(len(by_host[a]) == ROUNDS and all(x["result"] == "injected" and x["signal"] == "BUS_MCEERR_AO"
                                                  and x["own_va"] == "yes" for x in by_host[a])
               for a in ok_hosts),
           f"the two hosts left: all {2 * ROUNDS} cases passed, in one results file, host first ({took:.0f} s)",
           diag=[x for x in got if x["host"] in ok_hosts][:4])
    lost_rows = by_host[lost_label]
    notrun = [x for x in lost_rows if x["result"].startswith("not run (host lost: ")]
    tap.ok(k.returncode == 0 and len(lost_rows) == ROUNDS and notrun
           and all(x in notrun or x["signal"] == "BUS_MCEERR_AO" for x in lost_rows),
           f"{lost['name']}'s libvirtd and sshd killed mid-campaign: its unfinished cases are 'not run (host "
           f"lost: ...)' ({len(notrun)} of {ROUNDS})", diag=lost_rows)
    summary = out.strip().splitlines()
    tap.ok(camp.returncode == 1 and summary and summary[-1] == f"{2 * ROUNDS + ROUNDS - len(notrun)} passed, "
           f"0 failed, {len(notrun)} not run" and summary[0].split()[0] == "HOST",
           "the summary: a host column, and what passed, failed and was not run", diag=(out[-1500:], err[-500:]))

    # a resume runs only what is missing: the lost host's cases (lost again);
    # the hosts this time from the fleet's [hosts] file
    before = len(got)
    hosts_ini = os.path.join(paths.build_dir(), "fleet", "hosts.ini")
    r2 = subprocess.run(in_hub(CAMPAIGN, "--hosts", hosts_ini, "--rounds", str(ROUNDS), "--results", results),
                        capture_output=True, text=True, timeout=600, env=env)
    new = rows(results)[before:]
    tap.ok(r2.returncode == 1 and new and all(x["host"] == lost_label for x in new)
           and len(new) == len(notrun) and all(x["result"].startswith("not run (host lost: ") for x in new)
           and r2.stdout.strip().endswith(f"{2 * ROUNDS + ROUNDS - len(notrun)} passed, 0 failed, "
                                          f"{len(notrun)} not run"),
           "run again with the same results (the hosts from --hosts build/fleet/hosts.ini): only the missing "
           "cases, on the host that is still lost",
           diag=(new, r2.stdout[-800:]))

    st = fleet("vmcectl", "status", timeout=120)
    errs = [ln for ln in st.stderr.splitlines() if ln.strip()]
    tap.ok(st.returncode == 1 and len(errs) == 1 and errs[0].startswith(f"vmcectl: error: {lost_label}:22: ")
           and all(f"{a}:22" in st.stdout for a in ok_hosts),
           "vmcectl over the fleet: the lost host in one line, the others answered", diag=(st.stderr, st.stdout))

    # run/campaign across the fleet (run/campaigns/fleet.ini: 48 cases), h3 lost already
    spec = os.path.join(work, "across.ini")
    with open(os.path.join(paths.ROOT, "run", "campaigns", "fleet.ini")) as f:
        across = f.read()
    with open(spec, "w") as f:
        f.write(across.replace("name = fleet\n", "name = fleet-across\n"))
    N_ACROSS = 48
    out_dir = os.path.join(work, "across")
    res2 = os.path.join(out_dir, "results.jsonl")
    t0 = time.monotonic()
    camp = subprocess.Popen([FLEET, "campaign", "--fresh", "--out", out_dir, spec], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    victim = hosts[1]["name"]
    wait_for(lambda: any(x.get("host") == victim for x in rows(res2) if x.get("type") == "case"), 300, 0.1)
    k = kill_mid_campaign(camp, victim, "sshd", "libvirtd")
    out, err = camp.communicate(timeout=600)
    took = time.monotonic() - t0
    cases = [x for x in rows(res2) if x.get("type") == "case"]
    errs = [ln for ln in err.splitlines() if ln.startswith("campaign: error: ")]
    tap.ok(camp.returncode == 1 and len(errs) == 2
           and errs[0].startswith(f"campaign: error: {lost['name']} ({lost_label}:22): ")
           and errs[1].startswith(f"campaign: error: {victim} ({hosts[1]['address']}:22): host lost: "),
           f"run/campaign across the fleet: {lost['name']} (lost before) refused in one line, {victim}'s loss "
           f"in one line ({took:.0f} s)", diag=(errs, err[-1500:]))
    mine = {h["name"]: [x for x in cases if x.get("host") == h["name"]] for h in hosts}
    v_lost = [x for x in mine[victim] if (x.get("not_run") or "").startswith("host lost: ")]
    tap.ok(len(cases) == N_ACROSS and not mine[lost["name"]] and mine[hosts[0]["name"]]
           and all(x["verdict"] == "pass" for x in mine[hosts[0]["name"]])
           and v_lost and all(x["verdict"] == "pass" or x in v_lost for x in mine[victim])
           and len(mine[hosts[0]["name"]]) + len(mine[victim]) == N_ACROSS,
           f"one results.jsonl, each case with its host: {hosts[0]['name']} all passed, {victim}'s unfinished "
           f"{len(v_lost)} 'not run (host lost: ...)', none on {lost['name']}",
           diag=[(x.get("host"), x["case"]["id"], x["verdict"], x.get("not_run")) for x in cases])
    left_q = subprocess.run(["pgrep", "-f", f"qemu-system.*campaigns/fleet-across/hosts/{victim}/"],
                            capture_output=True, text=True).stdout.split()
    tap.ok(k.returncode == 0 and not left_q,
           f"{victim}'s worker went with its sshd, and no guest of it is left behind", diag=left_q)
    try:
        with open(os.path.join(out_dir, "report.html")) as f:
            page = f.read()
    except OSError:
        page = ""
    tap.ok(all(re.search(rf">\s*{h['name']}\s*<", page) for h in hosts[:2]) and "host lost" in page,
           "one report for the hosts: each named, the lost cases said", diag=page[:300])

    # again, the hosts from the campaign file's own [hosts]: only what is missing
    with open(hosts_ini) as f:
        section = f.read().split("[hosts]", 1)[1]
    with open(spec, "a") as f:
        f.write("[hosts]" + section)
    before = len(rows(res2))
    r3 = subprocess.run(in_hub(os.path.join(paths.ROOT, "run", "campaign"), "--out", out_dir, spec),
                        capture_output=True, text=True, timeout=600)
    new = [x for x in rows(res2)[before:] if x.get("type") == "case"]
    tap.ok(r3.returncode == 1 and sorted(x["case"]["id"] for x in new) == sorted(x["case"]["id"] for x in v_lost)
           and all(x["host"] == hosts[0]["name"] and x["verdict"] == "pass" for x in new)
           and f"{N_ACROSS} case(s) in" in r3.stdout and f": {N_ACROSS} pass" in r3.stdout,
           f"a resume ([hosts] in the file) runs only {victim}'s {len(v_lost)} lost case(s), on the host left",
           diag=(new, r3.stdout[-1200:], r3.stderr[-600:]))
finally:
    d = fleet("down", timeout=300)
left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
# the fleet's guests are named hN-gM (libvirt hands QEMU its files as
# descriptors: the fleet's directory is not on its command line)
qemus = subprocess.run(["pgrep", "-f", r"qemu-system.*guest=h[0-9]+-g[0-9]+"], capture_output=True,
                       text=True).stdout.split()
tap.ok(d.returncode == 0 and "vmce-fleet" not in left and not qemus,
       "run/fleet down: no namespace and no QEMU of the fleet left", diag=(d.stderr, left, qemus))
tap.done()
