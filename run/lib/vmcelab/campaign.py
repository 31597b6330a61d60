"""Injection campaigns: the campaign file, the cases it names, and what each
case is expected to do.

A campaign file is a key file (GKeyFile/INI syntax: [section], key = value,
# comments), documented in run/campaigns/README.md:

  [campaign]        name, seed, order, concurrency, repetitions, max-poisoned, reuse,
                    restore
  [guest NAME]      mem, cpus, accel, cpu, hugepages, ksm, disk, kernel, qemu (kernel
                    and qemu are lists: every case on that guest runs on each
                    kernel under each QEMU), image (a list too, instead of
                    kernel: debian-12, debian-12-cloud or a PATH; the image is
                    the whole guest, driven through qemu-guest-agent)
  [matrix NAME]     guest, pages, kinds, kill, inject, recovery, burst, repeat,
                    forwarder (lists: every combination is a case)
  [case NAME]       guest, page, kind, kill, inject, recovery, burst, repeat, forwarder,
                    expect
  [hosts]           NAME = ssh://[user@]host[:port][?keyfile=&no_verify=1&tree=PATH&vmced=PATH&build=PATH]: run
                    the cases on those hosts (NAME.libvirt and NAME.vmced: the same
                    host as run/virsh/campaign --hosts FILE reaches it)

inject: host (vmced's simulated host error), host-real (the host kernel's
memory_failure(): the host lab, run/hostlab --campaign FILE), guest-madvise,
guest-corrupt-pfn, guest-mce-inject. forwarder: vmced (it forwards the host
error), or qemu (vmced passes it on and QEMU handles it by itself).

Errors name the file, the line and the problem, and come before anything
runs.
"""
import configparser
import itertools
import os
import random
import re

from . import images as images_mod
from . import kernels as kernels_mod
from . import paths
from . import qemus as qemus_mod
from .expect import SELFTEST_PROGRAMS
from .sshtarget import Host, TargetError

PAGES = ("anon-dirty", "anon-clean", "pagecache-clean", "pagecache-dirty", "file-hole", "shmem",
         "mlock-clean", "mlock-dirty", "thp", "hugetlb", "ksm", "swapcache", "shared", "free",
         "slab", "pagetable", "ksm-scan")
KINDS = ("ao", "ar")
KILLS = ("early", "late", "prctl-early", "prctl-late")
# host: vmced's simulated host error (sim-poison), on any host; host-real:
# the host kernel's own memory_failure() on the page behind the guest's, so
# only where the host kernel can poison (the host lab's L1)
# guest-selftest: a kernel selftest of vmce's series makes its own errors
# (the pages of expect.SELFTEST_PROGRAMS: ksm-scan is ksm_hwpoison, with
# MADV_HWPOISON and hwpoison-inject)
INJECTS = ("host", "host-real", "guest-madvise", "guest-corrupt-pfn", "guest-mce-inject", "guest-selftest")
# run/campaign --errors: every host-side case as vmced's simulated error, or
# as the host kernel's real one (in the host lab), whatever the file says
ERRORS = ("simulated", "real")
# who handles a host error: vmced forwards it, or (qemu) vmced passes it on
# (policy pass) and QEMU does what it does by itself (qemus.BEHAVIOUR)
FORWARDERS = ("vmced", "qemu")
# the guest CPU when a [guest] names none: what run/vm and Vm.start boot
DEFAULT_CPU = "Skylake-Client"
# pages with no process mapping: nothing in the guest can consume them on purpose
KERNEL_PAGES = ("free", "slab", "pagetable")
# what a page type needs from its guest
NEEDS = {"hugetlb": "hugepages", "ksm": "ksm", "ksm-scan": "ksm", "swapcache": "disk", "anon-clean": "disk",
         "pagecache-clean": "disk", "pagecache-dirty": "disk", "file-hole": "disk",
         "mlock-clean": "disk"}

CAMPAIGN_KEYS = {"name", "seed", "concurrency", "repetitions", "max-poisoned", "reuse", "restore",
                 "order"}
GUEST_KEYS = {"mem", "cpus", "accel", "cpu", "hugepages", "ksm", "disk", "kernel", "qemu", "image"}
CASE_KEYS = {"guest", "page", "kind", "kill", "inject", "recovery", "burst", "repeat", "forwarder",
             "expect"}
MATRIX_KEYS = {"guest", "pages", "kinds", "kill", "inject", "recovery", "burst", "repeat", "forwarder"}


def error_key(key):
    """A case's key (Case.key) the same whether its host error is simulated
    or real: a row of run/campaign --errors simulated,real"""
    return key.replace("/host-real/", "/host/", 1)


def real_refusal(c):
    """Why case @c (a dict of its fields) cannot be a real host error, or
    None: what the host kernel cannot be made to do, where vmced's
    simulation can"""
    if c["repeat"]:
        return ("repeat needs inject = host: a real host's memory_failure() does not signal a page "
                "it has already poisoned")
    if c["kind"] == "ar" and c["page"] in KERNEL_PAGES:
        return (f"a consumed (ar) host-real error needs a process page to touch, and {c['page']} "
                "is kernel memory: use kind = ao")
    if c["kind"] == "ar" and c["forwarder"] == "qemu":
        return ("a consumed (ar) host-real error needs vmced to hold back the host's early AO "
                "(policy ignore-ao), and with forwarder = qemu vmced passes every signal to QEMU: "
                "use kind = ao, or inject = host")
    return None


def as_errors(c, errors):
    """Case @c with its host error made @errors (ERRORS): a real one that
    cannot be real keeps why (not_real), and runs as "not run (why)"
    rather than stop the campaign, whose other cases can be"""
    if errors is None:
        return c
    if c["inject"] not in ("host", "host-real"):
        # the guest makes it: there is no host error to make real, and the
        # lab's time goes to those that are
        return c if errors == "simulated" else dict(
            c, not_real=f"inject = {c['inject']}: the guest makes this error, not the host")
    if errors == "simulated":
        return dict(c, inject="host")
    c = dict(c, inject="host-real")
    why = real_refusal(c)
    return dict(c, not_real=f"not a real error here: {why}") if why else c


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
                 kernels=None, qemus=None, cpu=DEFAULT_CPU):
        self.name, self.mem, self.cpus, self.accel = name, mem, cpus, accel
        self.hugepages, self.ksm, self.disk, self.cpu = hugepages, ksm, disk, cpu
        # kernel and QEMU spellings (names or paths); kernel, qemu: the one
        # Kernel and Qemu a booted guest of this type runs (set by on())
        self.kernels = kernels or [kernels_mod.DEFAULT]
        self.qemus = qemus or [qemus_mod.DEFAULT]
        self.kernel = self.qemu = None
        self.image = False  # kernels are images (images.Image)

    def on(self, kernel, qemu):
        """This guest type running @kernel under @qemu: what a worker boots.
        Its name says which, where the guest type has more than one or not
        the default, so that its VMs, state directories and template (the
        saved first boot) are its own"""
        g = Guest(self.name, self.mem, self.cpus, self.accel, self.hugepages, self.ksm, self.disk,
                  [kernel.name], [qemu.name], self.cpu)
        g.kernel, g.qemu, g.image = kernel, qemu, self.image
        if len(self.kernels) > 1 or kernel.name != kernels_mod.DEFAULT:
            g.name += f"-{kernel_slug(kernel.name)}"
        if len(self.qemus) > 1 or qemu.name != qemus_mod.DEFAULT:
            g.name += f"-{qemus_mod.slug(qemu.name)}"
        return g

    def to_dict(self):
        return dict(name=self.name, mem=self.mem, cpus=self.cpus, accel=self.accel, cpu=self.cpu,
                    hugepages=self.hugepages, ksm=self.ksm, disk=self.disk, kernels=self.kernels,
                    qemus=self.qemus, image=self.image)


def kernel_slug(spelling):
    """A kernel's name as part of a VM or file name"""
    if not kernels_mod.is_spelled_as_path(spelling):
        return spelling
    return "custom-" + re.sub(r"[^A-Za-z0-9.]+", "-", os.path.basename(spelling.rstrip("/")))[:24]


class Case:
    FIELDS = ("guest", "page", "kind", "kill", "inject", "recovery", "burst", "repeat", "forwarder",
              "kernel", "qemu", "accel", "cpu")

    def __init__(self, scenario, guest, page, kind="ao", kill="early", inject="host",
                 recovery=1, burst=1, repeat=False, expect=None, rep=0, kernel=None,
                 forwarder="vmced", qemu=None, accel="tcg", cpu=DEFAULT_CPU, qemu_in_id=False,
                 not_real=None):
        self.scenario, self.guest, self.page, self.kind, self.kill = scenario, guest, page, kind, kill
        # set when --errors real asked for a real error this case cannot
        # have: why, for its "not run"
        self.not_real = not_real
        self.inject, self.recovery, self.burst, self.repeat = inject, recovery, burst, repeat
        self.forwarder = forwarder
        self.expect_override, self.rep = expect, rep
        # the Kernel it runs on (kernels.resolve), and the Qemu (qemus.resolve)
        self.kernel_info = kernel
        self.kernel = kernel.name if kernel else kernels_mod.DEFAULT
        self.qemu_info = qemu
        self.qemu = qemu.name if qemu else qemus_mod.DEFAULT
        # its guest's accelerator and CPU: what QEMU does by itself depends on them
        self.accel, self.cpu = accel, cpu
        # the id names the QEMU when the campaign runs more than one
        self.qemu_in_id = qemu_in_id

    @property
    def key(self):
        """The same case on any kernel and QEMU: a row of the comparison"""
        extra = (f":burst{self.burst}" if self.burst > 1 else "") + (":repeat" if self.repeat else "") \
            + (":by-qemu" if self.forwarder == "qemu" else "")
        return (f"{self.scenario}/{self.page}/{self.kind}/{self.kill}/{self.inject}"
                f"/recovery{self.recovery}{extra}/{self.rep}")

    @property
    def id(self):
        """Stable across runs of the same file: what resuming goes by. The
        QEMU is named (@qemu=NAME, after the kernel) only when the campaign
        runs more than one, so that a campaign on one QEMU keeps the ids it
        always had"""
        return f"{self.key}@{self.kernel}" + (f"@qemu={self.qemu}" if self.qemu_in_id else "")

    @property
    def error_key(self):
        return error_key(self.key)

    @property
    def host_side(self):
        """The error comes from the host, simulated or real"""
        return self.inject in ("host", "host-real")

    def ran_as(self, rec):
        """Whether @rec (a results.jsonl record with this case's id) is this
        case's: the same QEMU (a record from before QEMUs were recorded is
        taken as it is)"""
        recorded = ((rec or {}).get("case") or {}).get("qemu")
        return rec is not None and (recorded is None or recorded == self.qemu)

    def to_dict(self):
        d = {f: getattr(self, f) for f in self.FIELDS}
        d.update(id=self.id, key=self.key, scenario=self.scenario, rep=self.rep,
                 kernel_info=self.kernel_info.to_dict() if self.kernel_info else None,
                 qemu_info=self.qemu_info.to_dict() if self.qemu_info else None)
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
    def load(cls, path, kernels=None, qemus=None, images=None, resolve_image=None, errors=None,
             machine=None):
        try:
            with open(path) as f:
                text = f.read()
        except OSError as e:
            raise SpecError(f"{path}: cannot read it: {e.strerror}") from None
        return cls.parse(text, path, kernels, qemus, images, resolve_image, errors, machine)

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
    def parse(cls, text, path="<campaign>", kernels=None, qemus=None, images=None, resolve_image=None,
              errors=None, machine=None):
        """kernels, qemus, images: lists that replace every guest's `kernel`,
        `qemu` and `image` (the command line's --kernels, --qemus and
        --images; --images makes every guest an image's). resolve_image:
        what an image's name stands for (default images.resolve; libvirt
        domains, for run/virsh/campaign). errors: "simulated" or "real"
        (ERRORS) makes every host error that (run/campaign --errors).
        machine: (accel, cpu) for every guest (run/hostlab --campaign
        --accel)"""
        if kernels and images:
            raise SpecError(f"{path}: --kernels and --images: an image boots its own kernel")
        if errors is not None and errors not in ERRORS:
            raise SpecError(f"{path}: --errors {errors}: say {' or '.join(ERRORS)}")
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

        self.kernels = {}  # spelling -> Kernel, or images.Image

        def image_list(section, value):
            """A guest's images, each checked once: an image stands where a
            kernel stands (the cases on it are that image's)"""
            spellings = images if images else _list(value)
            key = "image" if section and value and not images else None
            if len(set(spellings)) != len(spellings):
                fail(section, key, f"an image is named twice in '{', '.join(spellings)}'")
            for i in spellings:
                if i in self.kernels:
                    continue
                if i in kernels_mod.NAMES and resolve_image is None:
                    fail(section, key, f"'{i}' is a kernel, not an image: say kernel = {i}")
                try:
                    self.kernels[i] = (resolve_image or images_mod.resolve)(i)
                except images_mod.ImageError as e:
                    if key is None:
                        raise SpecError(f"{path}: {'--images: ' if images else ''}{e}") from None
                    fail(section, key, str(e))
            return spellings

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

        self.qemus = {}  # spelling -> Qemu

        def qemu_list(section, value):
            """A guest's QEMUs, each resolved (its binary asked its version
            and target) once, before anything runs"""
            env = os.environ.get("VMCE_QEMU")
            spellings = qemus if qemus else (_list(value) if value else [qemus_mod.spelling()])
            key = "qemu" if section and value and not qemus else None
            # where a QEMU nobody wrote in the file comes from
            origin = "--qemus: " if qemus else ("" if key else (f"VMCE_QEMU={env}: " if env else ""))
            if len(set(spellings)) != len(spellings):
                if key is None:
                    raise SpecError(f"{path}: {origin}a QEMU is named twice in '{', '.join(spellings)}'")
                fail(section, key, f"a QEMU is named twice in '{', '.join(spellings)}'")
            for q in spellings:
                if q in self.qemus:
                    continue
                try:
                    self.qemus[q] = qemus_mod.resolve(q)
                except qemus_mod.QemuError as e:
                    if key is None:  # the default, or the command line's: no line to name
                        raise SpecError(f"{path}: {origin}{e}") from None
                    fail(section, key, str(e))
            return spellings

        def cpu_of(section, value, spellings, accel):
            """The guest's -cpu (a model with flags); every QEMU of the guest
            must have what its flags ask for"""
            cpu = (value or DEFAULT_CPU).strip()
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+=,-]*", cpu):
                fail(section, "cpu", f"'{cpu}' is not a -cpu model with flags (say EPYC,succor=on)")
            for feature in sorted(qemus_mod.cpu_features(cpu)):
                for q in spellings:
                    try:
                        self.qemus[q].require(feature, f"-cpu {cpu}")
                    except qemus_mod.QemuError as e:
                        fail(section, "cpu", str(e))
            # QEMU leaves it out under TCG ("TCG doesn't support requested
            # feature: CPUID.80000007H:EBX.succor"), 7.2's series and 10.0
            # alike: the AMD guest would have no SUCCOR, and vmced refuses
            # the errors of an AMD guest that cannot recover
            if "succor" in qemus_mod.cpu_features(cpu) and accel == "tcg":
                fail(section, "cpu", f"-cpu {cpu} under TCG: QEMU gives a guest SUCCOR under KVM only "
                                     "(TCG leaves the flag out, and an AMD guest without it cannot recover): "
                                     "use accel = kvm")
            return cpu

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
            accel = machine[0] if machine else one_of(section, "accel", g.get("accel", "tcg"), ("tcg", "kvm"))
            guest_qemus = qemu_list(section, g.get("qemu"))
            if g.get("image") and g.get("kernel"):
                fail(section, "image", "a guest has a kernel or an image, not both: an image boots "
                                       "its own kernel")
            is_image = bool(images or g.get("image"))
            # an image's guest has its own memory needs: systemd and its services
            guest = Guest(name.strip() or "guest", mem=g.get("mem", "1G" if is_image else "512M"),
                          cpus=integer(section, "cpus", 1, 1), accel=accel,
                          hugepages=integer(section, "hugepages", 0),
                          ksm=boolean(section, "ksm", False), disk=boolean(section, "disk", True),
                          kernels=(image_list(section, g.get("image")) if is_image
                                   else kernel_list(section, g.get("kernel"))), qemus=guest_qemus,
                          cpu=cpu_of(section, machine[1] if machine else g.get("cpu"), guest_qemus, accel))
            guest.image = is_image
            self.guests[guest.name] = guest
        if not self.guests:
            self.guests["guest"] = Guest("guest", mem="1G" if images else "512M",
                                         kernels=image_list(None, None) if images else kernel_list(None, None),
                                         qemus=qemu_list(None, None))
            self.guests["guest"].image = bool(images)
            if machine:
                self.guests["guest"].accel = machine[0]
                self.guests["guest"].cpu = machine[1] or DEFAULT_CPU

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
                why = None if c.get("not_real") else real_refusal(c)
                if why:
                    key = "repeat" if c["repeat"] else "kind" if "kind" in parser[section] else "kinds"
                    fail(section, key, why)
                line = where.get((section, "inject")) or where.get((section, None))
                if self.host_real_line is None or line < self.host_real_line:
                    self.host_real_line = line

        def check_selftest(section, group):
            """A selftest's page and its injection go together"""
            for c in group:
                if (c["page"] in SELFTEST_PROGRAMS) != (c["inject"] == "guest-selftest"):
                    fail(section, "inject", f"page = {c['page']} and inject = {c['inject']} do not go "
                                            "together: a selftest's page (" + ", ".join(SELFTEST_PROGRAMS)
                                            + ") makes its own errors, inject = guest-selftest, and "
                                            "only it")

        def check_forwarder(section, group):
            """QEMU can handle only what reaches it: a host error"""
            for c in group:
                if c["forwarder"] != "qemu":
                    continue
                if c["inject"] not in ("host", "host-real"):
                    fail(section, "forwarder", f"forwarder = qemu needs a host error (inject = host or "
                                               f"host-real): with inject = {c['inject']} the guest makes "
                                               "the error itself and QEMU never hears of it")

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
                    forwarder=one_of(section, "forwarder", s.get("forwarder", "vmced"), FORWARDERS),
                    expect=s.get("expect"))])
                scenarios[-1] = [as_errors(c, errors) for c in scenarios[-1]]
                check_real(section, scenarios[-1])
                check_selftest(section, scenarios[-1])
                check_forwarder(section, scenarios[-1])
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
                forwarders = [one_of(section, "forwarder", f, FORWARDERS)
                              for f in _list(s.get("forwarder", "vmced"))]
                scenarios.append([dict(scenario=name, guest=guest.name, page=p, kind=k, kill=kl,
                                       inject=i, recovery=r, burst=integer(section, "burst", 1, 1),
                                       repeat=boolean(section, "repeat", False), forwarder=f)
                                  for p, k, kl, i, r, f in itertools.product(pages, kinds, kills, injects,
                                                                             recoveries, forwarders)])
                scenarios[-1] = [as_errors(c, errors) for c in scenarios[-1]]
                check_real(section, scenarios[-1])
                check_selftest(section, scenarios[-1])
                check_forwarder(section, scenarios[-1])
        # kernel outermost, then QEMU: a worker is done with one (kernel,
        # QEMU)'s guests before it boots the next one's
        kernel_order = list(dict.fromkeys(k for g in self.guests.values() for k in g.kernels))
        qemu_order = list(dict.fromkeys(q for g in self.guests.values() for q in g.qemus))
        for kernel, qemu in itertools.product(kernel_order, qemu_order):
            for rep in range(self.repetitions):
                for group in scenarios:
                    for c in group:
                        g = self.guests[c["guest"]]
                        if kernel in g.kernels and qemu in g.qemus:
                            self.cases.append(Case(rep=rep, kernel=self.kernels[kernel],
                                                   qemu=self.qemus[qemu], accel=g.accel, cpu=g.cpu,
                                                   qemu_in_id=len(qemu_order) > 1, **c))
        if not self.cases:
            raise SpecError(f"{path}: names no cases: add a [matrix NAME] or a [case NAME]")
        seen = {}
        for case in self.cases:
            if case.id in seen:
                raise SpecError(f"{path}: two cases are the same ({case.id}): give them different "
                                "names or change them")
            seen[case.id] = case
        # an image's guest has no data disk of vmce's: its files go on its own disk (qga.DATA_DIR)
        if any(NEEDS.get(c.page) == "disk" and not self.guests[c.guest].image for c in self.cases) \
                and not os.path.exists(paths.disk()):
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
            # shuffled within each (kernel, QEMU)'s cases, which stay together
            rng = random.Random(self.seed)
            shuffled = []
            for variant in dict.fromkeys((c.kernel, c.qemu) for c in cases):
                mine = [c for c in cases if (c.kernel, c.qemu) == variant]
                rng.shuffle(mine)
                shuffled += mine
            cases = shuffled
        return cases

    def split_done(self, recorded):
        """(done, todo) given @recorded (case id -> its last record): a case
        is done when its id has a record of the same QEMU (a results file
        resumed under another QEMU runs its cases again, rather than take
        another QEMU's outcome for theirs)"""
        done = {c.id: recorded[c.id] for c in self.cases if c.ran_as(recorded.get(c.id))}
        return done, [c for c in self.ordered() if c.id not in done]

    def guest_for(self, case):
        """The guest type @case runs on, on its kernel, under its QEMU"""
        return self.guests[case.guest].on(case.kernel_info, case.qemu_info)

    @property
    def kernel_names(self):
        return list(dict.fromkeys(c.kernel for c in self.cases))

    @property
    def qemu_names(self):
        return list(dict.fromkeys(c.qemu for c in self.cases))
