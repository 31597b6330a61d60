"""Injection campaigns: the campaign file, the cases it names, and what each
case is expected to do.

A campaign file is a key file (GKeyFile/INI syntax: [section], key = value,
# comments), documented in run/campaigns/README.md:

  [campaign]        name, seed, order, concurrency, repetitions, max-poisoned, reuse,
                    restore
  [guest NAME]      mem, cpus, accel, hugepages, ksm, disk, kernel (a list: every
                    case on that guest runs on each kernel)
  [matrix NAME]     guest, pages, kinds, kill, inject, recovery, burst, repeat
                    (lists: every combination is a case)
  [case NAME]       guest, page, kind, kill, inject, recovery, burst, repeat, expect
  [hosts]           NAME = ssh://[user@]host[:port][?keyfile=&no_verify=1&tree=PATH]: run
                    the cases on those hosts (NAME.libvirt and NAME.vmced: the same
                    host as run/virsh/campaign --hosts FILE reaches it)

inject: host (vmced's simulated host error), host-real (the host kernel's
memory_failure(): the host lab, run/hostlab --campaign FILE), guest-madvise,
guest-corrupt-pfn, guest-mce-inject.

Errors name the file, the line and the problem, and come before anything
runs.
"""
import configparser
import itertools
import os
import random
import re

from . import kernels as kernels_mod
from . import paths
from .hosts import Host, TargetError

PAGES = ("anon-dirty", "anon-clean", "pagecache-clean", "pagecache-dirty", "file-hole", "shmem",
         "mlock-clean", "mlock-dirty", "thp", "hugetlb", "ksm", "swapcache", "shared", "free",
         "slab", "pagetable")
KINDS = ("ao", "ar")
KILLS = ("early", "late", "prctl-early", "prctl-late")
# host: vmced's simulated host error (sim-poison), on any host; host-real:
# the host kernel's own memory_failure() on the page behind the guest's, so
# only where the host kernel can poison (the host lab's L1)
INJECTS = ("host", "host-real", "guest-madvise", "guest-corrupt-pfn", "guest-mce-inject")
# pages with no process mapping: nothing in the guest can consume them on purpose
KERNEL_PAGES = ("free", "slab", "pagetable")
# what a page type needs from its guest
NEEDS = {"hugetlb": "hugepages", "ksm": "ksm", "swapcache": "disk", "anon-clean": "disk",
         "pagecache-clean": "disk", "pagecache-dirty": "disk", "file-hole": "disk",
         "mlock-clean": "disk"}

CAMPAIGN_KEYS = {"name", "seed", "concurrency", "repetitions", "max-poisoned", "reuse", "restore",
                 "order"}
GUEST_KEYS = {"mem", "cpus", "accel", "hugepages", "ksm", "disk", "kernel"}
CASE_KEYS = {"guest", "page", "kind", "kill", "inject", "recovery", "burst", "repeat", "expect"}
MATRIX_KEYS = {"guest", "pages", "kinds", "kill", "inject", "recovery", "burst", "repeat"}


def host_can_poison():
    """This kernel has memory_failure() (and so the sysctl)"""
    return os.path.exists("/proc/sys/vm/memory_failure_recovery")


class SpecError(Exception):
    """FILE:LINE: problem"""


def hosts_of(section, fail):
    """[hosts]: NAME = the ssh target run/campaign runs NAME's cases through;
    NAME.libvirt and NAME.vmced say how run/virsh/campaign reaches the same
    host (libvirt's URI, vmcectl's --connect target)"""
    hosts = {}
    for key, value in section.items():
        name, _, attr = key.partition(".")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name):
            fail(key, f"'{name}' is not a host name (letters, digits, - and _)")
        if attr not in ("", "libvirt", "vmced"):
            fail(key, f"unknown key '{key}' in [hosts] (NAME, NAME.libvirt, NAME.vmced)")
        hosts.setdefault(name, {})[attr or "target"] = value.strip()
    out = []
    for name, h in hosts.items():
        if "target" not in h:
            fail(f"{name}.{next(iter(h))}", f"host {name} has no '{name} = ssh://...' line")
        try:
            out.append(Host(name, h["target"], libvirt=h.get("libvirt"), vmced=h.get("vmced")))
        except TargetError as e:
            fail(name, str(e))
    return out


def _locate(text):
    """(section, key) -> line number, and section -> line number: the key
    file reader does not keep them"""
    where, section = {}, None
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s[0] in "#;":
            continue
        m = re.match(r"\[(.+)\]$", s)
        if m:
            section = m.group(1).strip()
            where[(section, None)] = n
            continue
        key = re.split(r"\s*[=:]", s, 1)[0].strip().lower()
        if section is not None:
            where.setdefault((section, key), n)
    return where


def _list(value):
    return [v.strip() for v in value.split(",") if v.strip()]


class Guest:
    def __init__(self, name, mem="512M", cpus=1, accel="tcg", hugepages=0, ksm=False, disk=True,
                 kernels=None):
        self.name, self.mem, self.cpus, self.accel = name, mem, cpus, accel
        self.hugepages, self.ksm, self.disk = hugepages, ksm, disk
        # kernel spellings (names or paths); kernel: the one Kernel a booted
        # guest of this type runs (set by on_kernel())
        self.kernels = kernels or [kernels_mod.DEFAULT]
        self.kernel = None

    def on_kernel(self, kernel):
        """This guest type running @kernel: what a worker boots"""
        g = Guest(self.name, self.mem, self.cpus, self.accel, self.hugepages, self.ksm, self.disk,
                  [kernel.name])
        g.kernel = kernel
        if len(self.kernels) > 1 or kernel.name != kernels_mod.DEFAULT:
            g.name = f"{self.name}-{kernel_slug(kernel.name)}"
        return g

    def to_dict(self):
        return dict(name=self.name, mem=self.mem, cpus=self.cpus, accel=self.accel,
                    hugepages=self.hugepages, ksm=self.ksm, disk=self.disk, kernels=self.kernels)


def kernel_slug(spelling):
    """A kernel's name as part of a VM or file name"""
    if not kernels_mod.is_spelled_as_path(spelling):
        return spelling
    return "custom-" + re.sub(r"[^A-Za-z0-9.]+", "-", os.path.basename(spelling.rstrip("/")))[:24]


class Case:
    FIELDS = ("guest", "page", "kind", "kill", "inject", "recovery", "burst", "repeat", "kernel")

    def __init__(self, scenario, guest, page, kind="ao", kill="early", inject="host",
                 recovery=1, burst=1, repeat=False, expect=None, rep=0, kernel=None):
        self.scenario, self.guest, self.page, self.kind, self.kill = scenario, guest, page, kind, kill
        self.inject, self.recovery, self.burst, self.repeat = inject, recovery, burst, repeat
        self.expect_override, self.rep = expect, rep
        # the Kernel it runs on (kernels.resolve)
        self.kernel_info = kernel
        self.kernel = kernel.name if kernel else kernels_mod.DEFAULT

    @property
    def key(self):
        """The same case on any kernel: a row of the kernel comparison"""
        extra = (f":burst{self.burst}" if self.burst > 1 else "") + (":repeat" if self.repeat else "")
        return (f"{self.scenario}/{self.page}/{self.kind}/{self.kill}/{self.inject}"
                f"/recovery{self.recovery}{extra}/{self.rep}")

    @property
    def id(self):
        """Stable across runs of the same file: what resuming goes by"""
        return f"{self.key}@{self.kernel}"

    @property
    def host_side(self):
        """The error comes from the host, simulated or real"""
        return self.inject in ("host", "host-real")

    def to_dict(self):
        d = {f: getattr(self, f) for f in self.FIELDS}
        d.update(id=self.id, key=self.key, scenario=self.scenario, rep=self.rep,
                 kernel_info=self.kernel_info.to_dict() if self.kernel_info else None)
        return d


class Campaign:
    def __init__(self):
        self.name = "campaign"
        self.seed = 1
        self.concurrency = 1
        self.repetitions = 1
        self.max_poisoned = 48
        self.reuse = True
        self.restore = True
        self.order = "file"
        self.host_real_line = None  # first line asking for inject = host-real
        self.guests = {}
        self.cases = []
        self.hosts = []  # [Host]: none, the cases run here
        self.path = None

    @classmethod
    def load(cls, path, kernels=None):
        try:
            with open(path) as f:
                text = f.read()
        except OSError as e:
            raise SpecError(f"{path}: cannot read it: {e.strerror}") from None
        return cls.parse(text, path, kernels)

    @staticmethod
    def hosts_file(path):
        """the [hosts] of another key file (run/fleet up writes one)"""
        parser = configparser.ConfigParser(interpolation=None, strict=True,
                                           inline_comment_prefixes=("#", ";"))
        try:
            with open(path) as f:
                text = f.read()
            parser.read_string(text, source=path)
        except OSError as e:
            raise SpecError(f"{path}: cannot read it: {e.strerror}") from None
        except configparser.Error as e:
            raise SpecError(f"{path}: {str(e).splitlines()[0]}") from None
        if "hosts" not in parser:
            raise SpecError(f"{path}: has no [hosts] section")
        where = _locate(text)

        def fail(key, problem):
            raise SpecError(f"{path}:{where.get(('hosts', key)) or where.get(('hosts', None))}: {problem}")
        hosts = hosts_of(parser["hosts"], fail)
        if not hosts:
            raise SpecError(f"{path}: its [hosts] section names no host")
        return hosts

    @classmethod
    def parse(cls, text, path="<campaign>", kernels=None):
        """kernels: a list that replaces every guest's `kernel` (the command
        line's --kernels)"""
        self = cls()
        self.path = path
        where = _locate(text)
        parser = configparser.ConfigParser(interpolation=None, strict=True,
                                           inline_comment_prefixes=("#", ";"))
        try:
            parser.read_string(text, source=path)
        except configparser.Error as e:
            line = getattr(e, "lineno", None)
            msg = str(e).splitlines()[0]
            raise SpecError(f"{path}:{line}: {msg}" if line else f"{path}: {msg}") from None

        def fail(section, key, problem):
            line = where.get((section, key)) or where.get((section, None)) or "?"
            raise SpecError(f"{path}:{line}: {problem}")

        def check_keys(section, allowed):
            for key in parser[section]:
                if key not in allowed:
                    fail(section, key, f"unknown key '{key}' in [{section}] "
                                       f"(known: {', '.join(sorted(allowed))})")

        def integer(section, key, default, low=0):
            value = parser[section].get(key)
            if value is None:
                return default
            try:
                n = int(value, 0)
            except ValueError:
                fail(section, key, f"'{key}' must be a number, not '{value}'")
            if n < low:
                fail(section, key, f"'{key}' must be at least {low}")
            return n

        def boolean(section, key, default):
            try:
                return parser[section].getboolean(key, default)
            except ValueError:
                fail(section, key, f"'{key}' must be true or false")

        def one_of(section, key, value, allowed):
            if value not in allowed:
                fail(section, key, f"'{value}' is not a {key} (known: {', '.join(allowed)})")
            return value

        self.kernels = {}  # spelling -> Kernel

        def kernel_list(section, value):
            """A guest's kernels, each resolved once (a PATH gets its initramfs
            here, before anything runs)"""
            spellings = kernels if kernels else (_list(value) if value else [kernels_mod.DEFAULT])
            key = "kernel" if section and value and not kernels else None
            if len(set(spellings)) != len(spellings):
                fail(section, key, f"a kernel is named twice in '{', '.join(spellings)}'")
            for k in spellings:
                if k in self.kernels:
                    continue
                try:
                    self.kernels[k] = kernels_mod.resolve(k, prepare=True)
                except kernels_mod.KernelError as e:
                    if key is None:  # the default, or the command line's: no line to name
                        raise SpecError(f"{path}: {'--kernels: ' if kernels else ''}{e}") from None
                    fail(section, key, str(e))
            return spellings

        sections = parser.sections()
        for section in sections:
            kind = section.split()[0]
            if kind not in ("campaign", "guest", "matrix", "case", "hosts"):
                fail(section, None, f"unknown section [{section}] (known: [campaign], [guest NAME], "
                                    "[matrix NAME], [case NAME], [hosts])")
        if "hosts" in sections:
            self.hosts = hosts_of(parser["hosts"], lambda key, problem: fail("hosts", key, problem))
        if "campaign" in sections:
            check_keys("campaign", CAMPAIGN_KEYS)
            c = parser["campaign"]
            self.name = c.get("name", os.path.splitext(os.path.basename(path))[0])
            self.seed = integer("campaign", "seed", 1)
            self.concurrency = integer("campaign", "concurrency", 1, 1)
            self.repetitions = integer("campaign", "repetitions", 1, 1)
            self.max_poisoned = integer("campaign", "max-poisoned", 48, 1)
            self.reuse = boolean("campaign", "reuse", True)
            self.restore = boolean("campaign", "restore", True)
            self.order = one_of("campaign", "order", c.get("order", "file"), ("file", "random"))
        for section in sections:
            kind, _, name = section.partition(" ")
            if kind != "guest":
                continue
            check_keys(section, GUEST_KEYS)
            g = parser[section]
            accel = one_of(section, "accel", g.get("accel", "tcg"), ("tcg", "kvm"))
            guest = Guest(name.strip() or "guest", mem=g.get("mem", "512M"),
                          cpus=integer(section, "cpus", 1, 1), accel=accel,
                          hugepages=integer(section, "hugepages", 0),
                          ksm=boolean(section, "ksm", False), disk=boolean(section, "disk", True),
                          kernels=kernel_list(section, g.get("kernel")))
            self.guests[guest.name] = guest
        if not self.guests:
            self.guests["guest"] = Guest("guest", kernels=kernel_list(None, None))

        def guest_of(section, value):
            name = value or next(iter(self.guests))
            if name not in self.guests:
                fail(section, "guest", f"no [guest {name}] in this file")
            return self.guests[name]

        def needs(section, key, guest, page):
            need = NEEDS.get(page)
            if need == "hugepages" and guest.hugepages < 1:
                fail(section, key, f"page {page} needs hugepages: set 'hugepages' in "
                                   f"[guest {guest.name}]")
            if need == "ksm" and not guest.ksm:
                fail(section, key, f"page {page} needs KSM: set 'ksm = true' in [guest {guest.name}]")
            if need == "disk" and not guest.disk:
                fail(section, key, f"page {page} needs the data disk of [guest {guest.name}]")

        def check_real(section, group):
            for c in group:
                if c["inject"] != "host-real":
                    continue
                if c["repeat"]:
                    fail(section, "repeat", "repeat needs inject = host: a real host's memory_failure() "
                                            "does not signal a page it has already poisoned")
                if c["kind"] == "ar" and c["page"] in KERNEL_PAGES:
                    fail(section, "kind" if "kind" in parser[section] else "kinds",
                         f"a consumed (ar) host-real error needs a process page to touch, and "
                         f"{c['page']} is kernel memory: use kind = ao")
                line = where.get((section, "inject")) or where.get((section, None))
                if self.host_real_line is None or line < self.host_real_line:
                    self.host_real_line = line

        scenarios = []
        for section in sections:
            kind, _, name = section.partition(" ")
            name = name.strip() or kind
            s = parser[section]
            if kind == "case":
                check_keys(section, CASE_KEYS)
                guest = guest_of(section, s.get("guest"))
                page = one_of(section, "page", s.get("page", "anon-dirty"), PAGES)
                needs(section, "page", guest, page)
                scenarios.append([dict(
                    scenario=name, guest=guest.name, page=page,
                    kind=one_of(section, "kind", s.get("kind", "ao"), KINDS),
                    kill=one_of(section, "kill", s.get("kill", "early"), KILLS),
                    inject=one_of(section, "inject", s.get("inject", "host"), INJECTS),
                    recovery=one_of(section, "recovery", integer(section, "recovery", 1), (0, 1)),
                    burst=integer(section, "burst", 1, 1), repeat=boolean(section, "repeat", False),
                    expect=s.get("expect"))])
                check_real(section, scenarios[-1])
            elif kind == "matrix":
                check_keys(section, MATRIX_KEYS)
                guest = guest_of(section, s.get("guest"))
                pages = [one_of(section, "pages", p, PAGES) for p in _list(s.get("pages", "anon-dirty"))]
                for p in pages:
                    needs(section, "pages", guest, p)
                kinds = [one_of(section, "kinds", k, KINDS) for k in _list(s.get("kinds", "ao"))]
                kills = [one_of(section, "kill", k, KILLS) for k in _list(s.get("kill", "early"))]
                injects = [one_of(section, "inject", i, INJECTS) for i in _list(s.get("inject", "host"))]
                recoveries = [one_of(section, "recovery", int(r), (0, 1))
                              for r in _list(s.get("recovery", "1"))]
                scenarios.append([dict(scenario=name, guest=guest.name, page=p, kind=k, kill=kl,
                                       inject=i, recovery=r, burst=integer(section, "burst", 1, 1),
                                       repeat=boolean(section, "repeat", False))
                                  for p, k, kl, i, r in itertools.product(pages, kinds, kills,
                                                                          injects, recoveries)])
                check_real(section, scenarios[-1])
        # kernel outermost: a worker is done with one kernel's guests before
        # it boots the next kernel's
        kernel_order = list(dict.fromkeys(k for g in self.guests.values() for k in g.kernels))
        for kernel in kernel_order:
            for rep in range(self.repetitions):
                for group in scenarios:
                    self.cases += [Case(rep=rep, kernel=self.kernels[kernel], **c) for c in group
                                   if kernel in self.guests[c["guest"]].kernels]
        if not self.cases:
            raise SpecError(f"{path}: names no cases: add a [matrix NAME] or a [case NAME]")
        seen = {}
        for case in self.cases:
            if case.id in seen:
                raise SpecError(f"{path}: two cases are the same ({case.id}): give them different "
                                "names or change them")
            seen[case.id] = case
        if any(NEEDS.get(c.page) == "disk" for c in self.cases) and not os.path.exists(paths.disk()):
            raise SpecError(f"{path}: the guest data disk is missing at {paths.disk()}: run `make image`")
        return self

    def check_host(self):
        """inject = host-real needs a host kernel that can poison a page
        (CONFIG_MEMORY_FAILURE): said before anything runs"""
        if self.host_real_line is None or host_can_poison():
            return
        raise SpecError(f"{self.path}:{self.host_real_line}: inject = host-real needs a host kernel "
                        "with MEMORY_FAILURE, which this one has not: run the campaign in the host "
                        f"lab (run/hostlab --campaign {self.path})")

    def ordered(self):
        """The cases in the order to run them: as the file has them, or (order =
        random) shuffled, the same way for the same seed"""
        cases = list(self.cases)
        if self.order == "random":
            # shuffled within each kernel's cases, which stay together
            rng = random.Random(self.seed)
            shuffled = []
            for kernel in dict.fromkeys(c.kernel for c in cases):
                mine = [c for c in cases if c.kernel == kernel]
                rng.shuffle(mine)
                shuffled += mine
            cases = shuffled
        return cases

    def guest_for(self, case):
        """The guest type @case runs on, on its kernel"""
        return self.guests[case.guest].on_kernel(case.kernel_info)

    @property
    def kernel_names(self):
        return list(dict.fromkeys(c.kernel for c in self.cases))
