"""Injection campaigns: the campaign file, the cases it names, and what each
case is expected to do.

A campaign file is a key file (GKeyFile/INI syntax: [section], key = value,
# comments), documented in run/campaigns/README.md:

  [campaign]        name, seed, order, concurrency, repetitions, max-poisoned, reuse,
                    restore
  [guest NAME]      arch, mem, cpus, accel, cpu, hugepages, ksm, disk, kernel, qemu (kernel
                    and qemu are lists: every case on that guest runs on each
                    kernel under each QEMU), image (a list too, instead of
                    kernel: debian-12, debian-12-cloud or a PATH; the image is
                    the whole guest, driven through qemu-guest-agent), and
                    for an image firmware (auto, uefi, bios) and disk-bus
                    (virtio-blk, virtio-scsi); arch = arm64 is the Arm64 guest
                    (arm64.py: its own kernel, an aarch64 QEMU, TCG)
  [matrix NAME]     guest (a list: the same cases on each guest), pages, kinds, kill, inject, recovery, burst, repeat,
                    forwarder, panic_on_unrecoverable (lists: every combination
                    is a case)
  [case NAME]       guest, page, kind, kill, inject, recovery, burst, repeat, forwarder,
                    panic_on_unrecoverable, expect
  [hosts]           NAME = ssh://[user@]host[:port][?keyfile=&no_verify=1&tree=PATH&vmced=PATH&build=PATH]: run
                    the cases on those hosts (NAME.libvirt and NAME.vmced: the same
                    host as run/virsh/campaign --hosts FILE reaches it)

inject: host (vmced's simulated host error), host-real (the host kernel's
memory_failure(): the host lab, run/hostlab --campaign FILE), guest-madvise,
guest-corrupt-pfn, guest-mce-inject. forwarder: vmced (it forwards the host
error), or qemu (vmced passes it on and QEMU handles it by itself).

Errors name the file, the line and the problem, and come before anything
runs. SECTIONS is the table of the sections and their keys (each key's
type, default and allowed values); _File reads a section's keys by it, and
_Reader makes the sections into the campaign's guests and cases.
"""
import configparser
import itertools
import os
import random
import re
from collections import namedtuple

from . import arm64
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

# What an arm64 guest cannot have, (key, value) -> why (_Reader.check_arch;
# its accel, image, cpu and the host lab: _Reader.arm64)
ARM64_REFUSED = {
    ("inject", "guest-mce-inject"): "mce-inject is x86's machine-check injector (arch/x86/kernel/cpu/mce/"
                                    "inject.c); the arm64 kernel has none: use inject = host, guest-madvise "
                                    "or guest-corrupt-pfn",
    ("inject", "host-real"): "a real host error needs a host lab whose L1 runs vmced: the host lab's L1 is "
                             "an x86 guest, and the Arm64 lab's (run/armlab) has no vmced, whose "
                             "remote-syscall.c knows x86_64 alone (use inject = host, vmced's simulated error)",
    ("forwarder", "qemu"): "what qemu-system-aarch64 does by itself with a host memory error under TCG is "
                           "abort (run/armlab --accel tcg: kvm_on_sigbus() outside KVM, every Debian QEMU), "
                           "nothing to judge; its answer under KVM is run/armlab's: use forwarder = vmced",
}

# The campaign file's keys, section by section (SECTIONS): each key's type
# (how its text is read, and the error when it cannot be), its default, and
# the values it may take. A key with `each` is a comma-separated list, each
# item read and checked alike.
Type = namedtuple("Type", "parse error")
Key = namedtuple("Key", "name type default allowed low each", defaults=(None, None, None, False))


def _number(text):
    return int(text, 0)


def _boolean(text):
    try:
        return configparser.ConfigParser.BOOLEAN_STATES[text.lower()]
    except KeyError:
        raise ValueError(text) from None


def _cpu(text):
    """QEMU's -cpu: a model with its flags (their QEMU features are checked
    against the guest's QEMUs, _Reader.cpu)"""
    if not text:
        return DEFAULT_CPU
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+=,-]*", text):
        raise ValueError(text)
    return text


TEXT = Type(str, None)
NUMBER = Type(_number, "'{key}' must be a number, not '{value}'")
BOOLEAN = Type(_boolean, "'{key}' must be true or false")
CPU = Type(_cpu, "'{value}' is not a -cpu model with flags (say EPYC,succor=on)")
# the errors of a value of the right type that is not one the key takes
TOO_LOW = "'{key}' must be at least {low}"
NOT_ALLOWED = "'{value}' is not a {key} (known: {allowed})"

SECTIONS = {
    "campaign": (
        Key("name", TEXT),  # default: the file's name
        Key("seed", NUMBER, 1, low=0),
        Key("concurrency", NUMBER, 1, low=1),
        Key("repetitions", NUMBER, 1, low=1),
        Key("max-poisoned", NUMBER, 48, low=1),
        Key("reuse", BOOLEAN, True),
        Key("restore", BOOLEAN, True),
        Key("order", TEXT, "file", allowed=("file", "random")),
    ),
    # kernel, image and qemu: names or PATHs, each resolved once (_Reader.names)
    "guest": (
        # arm64: the Arm64 guest, its kernel and QEMU its own (_Reader.arm64)
        Key("arch", TEXT, "amd64", allowed=arm64.ARCHES),
        Key("accel", TEXT, "tcg", allowed=("tcg", "kvm")),
        Key("qemu", TEXT, [], each=True),
        Key("image", TEXT, [], each=True),
        Key("kernel", TEXT, [], each=True),
        Key("mem", TEXT),  # default: 1G for an image's guest (systemd and its services), else 512M
        Key("cpus", NUMBER, 1, low=1),
        Key("hugepages", NUMBER, 0, low=0),
        Key("ksm", BOOLEAN, False),
        Key("disk", BOOLEAN, True),
        Key("cpu", CPU, DEFAULT_CPU),
        # an image's: how it boots (auto: as its partition table says) and its disk
        Key("firmware", TEXT, "auto", allowed=images_mod.FIRMWARES),
        Key("disk-bus", TEXT, "virtio-blk", allowed=images_mod.BUSES),
    ),
    # every combination of the lists is a case
    "matrix": (
        # default: the file's first guest; more than one: the same cases on
        # each (an amd64 and an arm64 guest: the report's rows side by side)
        Key("guest", TEXT, [], each=True),
        Key("pages", TEXT, ["anon-dirty"], PAGES, each=True),
        Key("kinds", TEXT, ["ao"], KINDS, each=True),
        Key("kill", TEXT, ["early"], KILLS, each=True),
        Key("inject", TEXT, ["host"], INJECTS, each=True),
        Key("recovery", NUMBER, [1], (0, 1), each=True),
        # vm.panic_on_unrecoverable_memory_failure (Linux 7.3); not
        # applicable on a kernel without it
        Key("panic_on_unrecoverable", NUMBER, [0], (0, 1), each=True),
        Key("burst", NUMBER, 1, low=1),
        Key("repeat", BOOLEAN, False),
        Key("forwarder", TEXT, ["vmced"], FORWARDERS, each=True),
    ),
    "case": (
        Key("guest", TEXT),  # default: the file's first guest
        Key("page", TEXT, "anon-dirty", PAGES),
        Key("kind", TEXT, "ao", KINDS),
        Key("kill", TEXT, "early", KILLS),
        Key("inject", TEXT, "host", INJECTS),
        Key("recovery", NUMBER, 1, (0, 1)),
        Key("panic_on_unrecoverable", NUMBER, 0, (0, 1)),
        Key("burst", NUMBER, 1, low=1),
        Key("repeat", BOOLEAN, False),
        Key("forwarder", TEXT, "vmced", FORWARDERS),
        Key("expect", TEXT),
    ),
    # NAME = ssh://..., NAME.libvirt, NAME.vmced: read by hosts_of()
    "hosts": None,
}
# sections that take a name: [guest NAME]
NAMED = ("guest", "matrix", "case")


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
                 kernels=None, qemus=None, cpu=DEFAULT_CPU, arch="amd64"):
        self.name, self.mem, self.cpus, self.accel, self.arch = name, mem, cpus, accel, arch
        self.hugepages, self.ksm, self.disk, self.cpu = hugepages, ksm, disk, cpu
        # kernel and QEMU spellings (names or paths); kernel, qemu: the one
        # Kernel and Qemu a booted guest of this type runs (set by on())
        self.kernels = kernels or [kernels_mod.DEFAULT]
        self.qemus = qemus or [qemus_mod.DEFAULT]
        self.kernel = self.qemu = None
        self.image = False  # kernels are images (images.Image)
        self.firmware, self.disk_bus = "auto", "virtio-blk"  # an image's (images.Image.boot)

    def on(self, kernel, qemu):
        """This guest type running @kernel under @qemu: what a worker boots.
        Its name says which, where the guest type has more than one or not
        the default, so that its VMs, state directories and template (the
        saved first boot) are its own"""
        g = Guest(self.name, self.mem, self.cpus, self.accel, self.hugepages, self.ksm, self.disk,
                  [kernel.name], [qemu.name], self.cpu, self.arch)
        g.kernel, g.qemu, g.image = kernel, qemu, self.image
        g.firmware, g.disk_bus = self.firmware, self.disk_bus
        if len(self.kernels) > 1 or kernel.name not in (kernels_mod.DEFAULT, arm64.KERNEL):
            g.name += f"-{kernel_slug(kernel.name)}"
        if len(self.qemus) > 1 or qemu.name not in (qemus_mod.DEFAULT, arm64.DEFAULT_QEMU):
            g.name += f"-{qemus_mod.slug(qemu.name)}"
        return g

    def to_dict(self):
        return dict(name=self.name, arch=self.arch, mem=self.mem, cpus=self.cpus, accel=self.accel, cpu=self.cpu,
                    hugepages=self.hugepages, ksm=self.ksm, disk=self.disk, kernels=self.kernels,
                    qemus=self.qemus, image=self.image, firmware=self.firmware, disk_bus=self.disk_bus)


def kernel_slug(spelling):
    """A kernel's name as part of a VM or file name"""
    if not kernels_mod.is_spelled_as_path(spelling):
        return spelling
    return "custom-" + re.sub(r"[^A-Za-z0-9.]+", "-", os.path.basename(spelling.rstrip("/")))[:24]


class Case:
    FIELDS = ("guest", "page", "kind", "kill", "inject", "recovery", "burst", "repeat", "forwarder",
              "kernel", "qemu", "accel", "cpu", "panic_on_unrecoverable", "arch")

    def __init__(self, scenario, guest, page, kind="ao", kill="early", inject="host",
                 recovery=1, burst=1, repeat=False, expect=None, rep=0, kernel=None,
                 forwarder="vmced", qemu=None, accel="tcg", cpu=DEFAULT_CPU, qemu_in_id=False,
                 not_real=None, panic_on_unrecoverable=0, arch="amd64"):
        self.scenario, self.guest, self.page, self.kind, self.kill = scenario, guest, page, kind, kill
        # set when --errors real asked for a real error this case cannot
        # have: why, for its "not run"
        self.not_real = not_real
        self.inject, self.recovery, self.burst, self.repeat = inject, recovery, burst, repeat
        self.forwarder = forwarder
        # vm.panic_on_unrecoverable_memory_failure in the guest, where it has it
        self.panic_on_unrecoverable = panic_on_unrecoverable
        self.expect_override, self.rep = expect, rep
        # the Kernel it runs on (kernels.resolve), and the Qemu (qemus.resolve)
        self.kernel_info = kernel
        self.kernel = kernel.name if kernel else kernels_mod.DEFAULT
        self.qemu_info = qemu
        self.qemu = qemu.name if qemu else qemus_mod.DEFAULT
        # its guest's accelerator and CPU: what QEMU does by itself depends on
        # them; its architecture: the report's column (the kernel says it too)
        self.accel, self.cpu, self.arch = accel, cpu, arch
        # the id names the QEMU when the campaign runs more than one
        self.qemu_in_id = qemu_in_id

    @property
    def key(self):
        """The same case on any kernel and QEMU: a row of the comparison"""
        extra = (f":burst{self.burst}" if self.burst > 1 else "") + (":repeat" if self.repeat else "") \
            + (":by-qemu" if self.forwarder == "qemu" else "") \
            + (":panic-on-unrecoverable" if self.panic_on_unrecoverable else "")
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
        self.kernels = {}  # spelling -> Kernel, or images.Image
        self.qemus = {}  # spelling -> Qemu

    @classmethod
    def load(cls, path, kernels=None, qemus=None, images=None, resolve_image=None, errors=None,
             machine=None, boot=None):
        try:
            with open(path) as f:
                text = f.read()
        except OSError as e:
            raise SpecError(f"{path}: cannot read it: {e.strerror}") from None
        return cls.parse(text, path, kernels, qemus, images, resolve_image, errors, machine, boot)

    @staticmethod
    def hosts_file(path):
        """the [hosts] of another key file (run/fleet up writes one)"""
        try:
            with open(path) as f:
                text = f.read()
        except OSError as e:
            raise SpecError(f"{path}: cannot read it: {e.strerror}") from None
        file = _File(text, path)
        if "hosts" not in file.parser:
            raise SpecError(f"{path}: has no [hosts] section")
        hosts = hosts_of(file.parser["hosts"], lambda key, problem: file.fail("hosts", key, problem))
        if not hosts:
            raise SpecError(f"{path}: its [hosts] section names no host")
        return hosts

    @classmethod
    def parse(cls, text, path="<campaign>", kernels=None, qemus=None, images=None, resolve_image=None,
              errors=None, machine=None, boot=None):
        """kernels, qemus, images: lists that replace every guest's `kernel`,
        `qemu` and `image` (the command line's --kernels, --qemus and
        --images; --images makes every guest an image's). resolve_image:
        what an image's name stands for (default images.resolve; libvirt
        domains, for run/virsh/campaign). errors: "simulated" or "real"
        (ERRORS) makes every host error that (run/campaign --errors).
        machine: (accel, cpu) for every guest (run/hostlab --campaign
        --accel). boot: {"accel", "firmware", "disk_bus"}, each given
        replacing every guest's (run/campaign --accel, --firmware,
        --disk-bus; the last two an image's guest's only)"""
        if kernels and images:
            raise SpecError(f"{path}: --kernels and --images: an image boots its own kernel")
        if errors is not None and errors not in ERRORS:
            raise SpecError(f"{path}: --errors {errors}: say {' or '.join(ERRORS)}")
        self = cls()
        self.path = path
        _Reader(self, _File(text, path), dict(kernels=kernels, qemus=qemus, images=images,
                                              resolve_image=resolve_image, errors=errors,
                                              machine=machine, boot=boot or {})).read()
        return self

    def _expand(self, scenarios):
        """The cases of @scenarios (lists of dicts of Case's arguments, a list
        per [case] or [matrix]) on each of their guest's kernels and QEMUs,
        repetitions times"""
        # kernel outermost, then QEMU: a worker is done with one (kernel,
        # QEMU)'s guests before it boots the next one's
        kernel_order = list(dict.fromkeys(k for g in self.guests.values() for k in g.kernels))
        qemu_order = list(dict.fromkeys(q for g in self.guests.values() for q in g.qemus))
        # the ids name the QEMU where an architecture's guests run more than
        # one (an arm64 guest beside the amd64 ones changes none of theirs)
        arch_qemus = {}
        for g in self.guests.values():
            arch_qemus.setdefault(g.arch, set()).update(g.qemus)
        for kernel, qemu in itertools.product(kernel_order, qemu_order):
            for rep in range(self.repetitions):
                for group in scenarios:
                    for c in group:
                        g = self.guests[c["guest"]]
                        if kernel in g.kernels and qemu in g.qemus:
                            self.cases.append(Case(rep=rep, kernel=self.kernels[kernel],
                                                   qemu=self.qemus[qemu], accel=g.accel, cpu=g.cpu,
                                                   arch=g.arch, qemu_in_id=len(arch_qemus[g.arch]) > 1,
                                                   **c))
        if not self.cases:
            raise SpecError(f"{self.path}: names no cases: add a [matrix NAME] or a [case NAME]")
        seen = {}
        for case in self.cases:
            if case.id in seen:
                raise SpecError(f"{self.path}: two cases are the same ({case.id}): give them different "
                                "names or change them")
            seen[case.id] = case
        # an image's guest has no data disk of vmce's: its files go on its own disk (qga.DATA_DIR)
        if any(NEEDS.get(c.page) == "disk" and not self.guests[c.guest].image for c in self.cases) \
                and not os.path.exists(paths.disk()):
            raise SpecError(f"{self.path}: the guest data disk is missing at {paths.disk()}: run `make image`")

    def check_host(self):
        """inject = host-real needs a host kernel that can poison a page
        (CONFIG_MEMORY_FAILURE): said before anything runs"""
        if self.host_real_line is None or host_can_poison():
            return
        raise SpecError(f"{self.path}:{self.host_real_line}: inject = host-real needs a host kernel "
                        "with MEMORY_FAILURE, which this one has not: run the campaign in the host "
                        f"lab (run/hostlab --campaign {self.path})")

    def check_boot(self):
        """What a guest needs of this host to boot, said before anything
        runs: a disk something boots, OVMF for an image that boots by UEFI,
        a KVM that runs a guest where one asks for accel = kvm"""
        if any(g.accel == "kvm" for g in self.guests.values()):
            from .kvm import kvm_usable  # here: it boots a probe guest once per build (cached)
            usable, why = kvm_usable()
            if not usable:
                raise SpecError(f"{self.path}: accel = kvm: KVM is not usable on this host ({why}): use "
                                "accel = tcg here, or run it where KVM runs guests (the host lab's L1)")
        for g in self.guests.values():
            for spelling in g.kernels if g.image else ():
                image = self.kernels[spelling]
                if g.firmware == "auto" and image.image is None and image.firmware is None:
                    raise SpecError(f"{self.path}: image {spelling}: no partition table nor boot signature: "
                                    "nothing boots this disk (say firmware = bios or uefi to boot it all the same)")
                try:
                    fw, _ = image.boot(g.firmware, g.disk_bus)
                    if fw == "uefi":
                        images_mod.ovmf()
                except images_mod.ImageError as e:
                    raise SpecError(f"{self.path}: image {spelling}: {e}") from None

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


class _File:
    """A campaign file as read: its sections, each key's line, and errors as
    FILE:LINE: problem"""

    def __init__(self, text, path):
        self.path, self.where = path, _locate(text)
        self.parser = configparser.ConfigParser(interpolation=None, strict=True,
                                                inline_comment_prefixes=("#", ";"))
        try:
            self.parser.read_string(text, source=path)
        except configparser.Error as e:
            line = getattr(e, "lineno", None)
            msg = str(e).splitlines()[0]
            raise SpecError(f"{path}:{line}: {msg}" if line else f"{path}: {msg}") from None

    def fail(self, section, key, problem):
        line = self.where.get((section, key)) or self.where.get((section, None)) or "?"
        raise SpecError(f"{self.path}:{line}: {problem}")

    def sections(self):
        """[(section, kind, name)] in the file's order; an unknown kind fails"""
        out = []
        for section in self.parser.sections():
            kind, _, name = section.partition(" ")
            if kind not in SECTIONS:
                known = ", ".join(f"[{k} NAME]" if k in NAMED else f"[{k}]" for k in SECTIONS)
                self.fail(section, None, f"unknown section [{section}] (known: {known})")
            out.append((section, kind, name.strip()))
        return out

    def values(self, section, kind):
        """{key: value} of every key SECTIONS has for @kind: the file's, read
        and checked, or the default"""
        keys = SECTIONS[kind]
        known = sorted(k.name for k in keys)
        for key in self.parser[section]:
            if key not in known:
                self.fail(section, key, f"unknown key '{key}' in [{section}] (known: {', '.join(known)})")
        return {k.name: self.value(section, k) for k in keys}

    def value(self, section, key):
        text = self.parser[section].get(key.name)
        if text is None:
            return key.default
        if key.each:
            return [self.item(section, key, t) for t in _list(text)]
        return self.item(section, key, text)

    def item(self, section, key, text):
        try:
            value = key.type.parse(text)
        except ValueError:
            self.fail(section, key.name, key.type.error.format(key=key.name, value=text))
        if key.low is not None and value < key.low:
            self.fail(section, key.name, TOO_LOW.format(key=key.name, low=key.low))
        if key.allowed is not None and value not in key.allowed:
            self.fail(section, key.name, NOT_ALLOWED.format(key=key.name, value=value,
                                                             allowed=", ".join(map(str, key.allowed))))
        return value


def _arch_of(resolved):
    """The architecture of a resolved kernel or QEMU"""
    return "arm64" if isinstance(resolved, arm64.ArmQemu) or getattr(resolved, "table", None) == arm64.KERNEL \
        else "amd64"


class _Reader:
    """Campaign.parse's work: the sections of @file made into @campaign's
    settings, guests and cases, with what the command line (@opts: parse's
    arguments) puts in place of the file's"""

    def __init__(self, campaign, file, opts):
        self.c, self.file, self.opts = campaign, file, opts
        self.fail = file.fail

    def read(self):
        sections = self.file.sections()
        for section, kind, _ in sections:
            if kind == "hosts":
                self.c.hosts = hosts_of(self.file.parser[section],
                                        lambda key, problem: self.fail("hosts", key, problem))
            elif kind == "campaign":
                self.settings(section)
        for section, kind, name in sections:
            if kind == "guest":
                guest = self.guest(section, self.file.values(section, kind), name or "guest")
                self.c.guests[guest.name] = guest
        if not self.c.guests:
            self.c.guests["guest"] = self.default_guest()
        scenarios = [self.scenario(section, kind, name or kind) for section, kind, name in sections
                     if kind in ("case", "matrix")]
        self.c._expand(scenarios)

    def settings(self, section):
        for key, value in self.file.values(section, "campaign").items():
            setattr(self.c, key.replace("-", "_"), value)
        if self.c.name is None:
            self.c.name = os.path.splitext(os.path.basename(self.file.path))[0]

    def guest(self, section, v, name):
        if v["arch"] == "arm64":
            return self.arm64(section, v, name)
        machine = self.opts["machine"]
        accel = machine[0] if machine else self.opts["boot"].get("accel") or v["accel"]
        qemus = self.names(section, "qemu", v["qemu"])
        if v["image"] and v["kernel"]:
            self.fail(section, "image", "a guest has a kernel or an image, not both: an image boots "
                                        "its own kernel")
        is_image = bool(self.opts["images"] or v["image"])
        guest = Guest(name, mem=v["mem"] or ("1G" if is_image else "512M"), cpus=v["cpus"], accel=accel,
                      hugepages=v["hugepages"], ksm=v["ksm"], disk=v["disk"],
                      kernels=self.names(section, "image" if is_image else "kernel",
                                         v["image"] if is_image else v["kernel"]),
                      qemus=qemus, cpu=self.cpu(section, (machine[1] or DEFAULT_CPU) if machine else v["cpu"],
                                                qemus, accel))
        guest.image = is_image
        self.image_boot(section, guest, v, is_image)
        return guest

    def arm64(self, section, v, name):
        """An arm64 guest (arm64.py): its own kernel and an aarch64 QEMU
        under TCG; what cannot be on one is refused here, in one line"""
        opts, given = self.opts, self.file.parser[section]
        machine = opts["machine"]
        accel = machine[0] if machine else opts["boot"].get("accel") or v["accel"]
        if accel != "tcg":
            self.fail(section, "accel" if "accel" in given and not machine and not opts["boot"].get("accel")
                      else None, f"accel = {accel} on an arm64 guest: it runs under TCG only (KVM runs a guest of "
                                 "the host's own architecture)")
        if machine:
            self.fail(section, "arch", "an arm64 guest in the host lab: the host lab's L1 is an x86 guest, "
                                       "and there is no Arm64 host lab")
        if v["image"] or opts["images"]:
            self.fail(section, "image" if v["image"] else "arch",
                      "an operator's image is an x86 guest: an arm64 guest boots vmce's own "
                      f"({arm64.KERNEL}), say kernel = or leave it out")
        for key in ("firmware", "disk-bus"):
            if key in given:
                self.fail(section, key, f"'{key}' is an image's: an arm64 guest boots AAVMF and its "
                                        "data disk is on virtio-blk")
        qemus = self.names(section, "qemu", v["qemu"], arch="arm64")
        guest = Guest(name, mem=v["mem"] or "512M", cpus=v["cpus"], accel=accel, hugepages=v["hugepages"],
                      ksm=v["ksm"], disk=v["disk"], arch="arm64",
                      kernels=self.names(section, "kernel", v["kernel"], arch="arm64"), qemus=qemus,
                      cpu=self.arm64_cpu(section, given.get("cpu"), qemus))
        return guest

    def arm64_cpu(self, section, cpu, spellings):
        """An arm64 guest's -cpu: arm64.CPU, or a model every one of its
        QEMUs has (an x86 model is not one)"""
        if cpu is None:
            return arm64.CPU
        model = cpu.split(",")[0].strip()
        for q in spellings:
            if model not in arm64.cpu_models(self.c.qemus[q].binary):
                self.fail(section, "cpu", f"cpu = {cpu} on an arm64 guest: {model} is not a CPU model of "
                                          f"qemu-system-aarch64 ({q}); say max (the default is {arm64.CPU}), "
                                          "neoverse-n1, cortex-a76...")
        return cpu

    def image_boot(self, section, guest, v, is_image):
        """An image's firmware and disk bus: the command line's, else the
        file's; a kernel's guest has neither (vmce's own guest boots its
        kernel directly, its data disk on virtio-blk)"""
        boot = self.opts["boot"]
        for key, attr in (("firmware", "firmware"), ("disk-bus", "disk_bus")):
            value = boot.get(attr) or v[key]
            if not is_image and v[key] != dict(firmware="auto", disk_bus="virtio-blk")[attr]:
                self.fail(section, key, f"'{key}' is an image's: this guest boots a kernel (say image =)")
            setattr(guest, attr, value)

    def default_guest(self):
        """The guest of a file with no [guest]: the defaults, on the command
        line's images, kernels and QEMUs"""
        images, machine = self.opts["images"], self.opts["machine"]
        guest = Guest("guest", mem="1G" if images else "512M",
                      kernels=self.names(None, "image" if images else "kernel", []),
                      qemus=self.names(None, "qemu", []))
        guest.image = bool(images)
        boot = self.opts["boot"]
        guest.accel = boot.get("accel") or guest.accel
        if images:
            guest.firmware, guest.disk_bus = boot.get("firmware") or "auto", boot.get("disk_bus") or "virtio-blk"
        if machine:
            guest.accel, guest.cpu = machine[0], machine[1] or DEFAULT_CPU
        return guest

    def names(self, section, key, value, arch="amd64"):
        """A guest's kernels, images or QEMUs (@key): the command line's, or
        the file's (@value), or the default; each name or PATH resolved once,
        before anything runs (a kernel's PATH gets its initramfs here, a
        QEMU is asked its version and target). @arch: the guest's"""
        what, override, default, resolve, error, cache = self.name_kinds(key, arch)
        spellings = override or value or default
        # the command line's or the default have no line to name: where they come from instead
        at_line = key if section and value and not override else None
        env = os.environ.get("VMCE_QEMU")
        origin = f"--{key}s: " if override else (f"VMCE_QEMU={env}: " if key == "qemu" and env else "")

        def wrong(problem):
            if at_line is None:
                raise SpecError(f"{self.file.path}: {origin}{problem}") from None
            self.fail(section, at_line, problem)
        if len(set(spellings)) != len(spellings):
            wrong(f"{what} is named twice in '{', '.join(spellings)}'")
        for s in spellings:
            # resolved for a guest of the other architecture, it is resolved
            # again: the resolver says why it is not this one's
            if s not in cache or _arch_of(cache[s]) != arch:
                try:
                    cache[s] = resolve(s)
                except error as e:
                    wrong(str(e))
        return spellings

    def name_kinds(self, key, arch="amd64"):
        """(what one is called, the command line's list, the default list,
        how one is resolved, its error, where resolved ones are kept)"""
        if arch == "arm64":
            return {"qemu": ("a QEMU", self.opts["qemus"], [arm64.DEFAULT_QEMU], arm64.resolve_qemu,
                             arm64.Arm64Error, self.c.qemus),
                    "kernel": ("a kernel", self.opts["kernels"], [arm64.KERNEL], arm64.kernel,
                               arm64.Arm64Error, self.c.kernels)}[key]
        if key == "qemu":
            return ("a QEMU", self.opts["qemus"], [qemus_mod.spelling()], qemus_mod.resolve,
                    qemus_mod.QemuError, self.c.qemus)
        if key == "kernel":
            return ("a kernel", self.opts["kernels"], [kernels_mod.DEFAULT],
                    lambda k: kernels_mod.resolve(k, prepare=True), kernels_mod.KernelError, self.c.kernels)
        resolve_image = self.opts["resolve_image"]

        def image(name):
            # an image stands where a kernel stands (the cases on it are that image's)
            if name in kernels_mod.NAMES and resolve_image is None:
                raise images_mod.ImageError(f"'{name}' is a kernel, not an image: say kernel = {name}")
            return (resolve_image or images_mod.resolve)(name)
        return ("an image", self.opts["images"], [], image, images_mod.ImageError, self.c.kernels)

    def cpu(self, section, cpu, spellings, accel):
        """The guest's -cpu; every QEMU of the guest must have what its
        flags ask for"""
        features = qemus_mod.cpu_features(cpu)
        for feature in sorted(features):
            for q in spellings:
                try:
                    self.c.qemus[q].require(feature, f"-cpu {cpu}")
                except qemus_mod.QemuError as e:
                    self.fail(section, "cpu", str(e))
        # QEMU leaves it out under TCG ("TCG doesn't support requested
        # feature: CPUID.80000007H:EBX.succor"), 7.2's series and 10.0
        # alike: the AMD guest would have no SUCCOR, and vmced refuses
        # the errors of an AMD guest that cannot recover
        if "succor" in features and accel == "tcg":
            self.fail(section, "cpu", f"-cpu {cpu} under TCG: QEMU gives a guest SUCCOR under KVM only "
                                      "(TCG leaves the flag out, and an AMD guest without it cannot recover): "
                                      "use accel = kvm")
        return cpu

    def scenario(self, section, kind, name):
        """The cases of a [case NAME] (one) or a [matrix NAME] (every
        combination of its lists, on each of its guests), as dicts of Case's
        arguments"""
        v = self.file.values(section, kind)
        if kind == "case":
            guest = self.guest_of(section, v["guest"])
            self.needs(section, "page", guest, v["page"])
            group = [dict(scenario=name, guest=guest.name, page=v["page"], kind=v["kind"], kill=v["kill"],
                          inject=v["inject"], recovery=v["recovery"], burst=v["burst"], repeat=v["repeat"],
                          forwarder=v["forwarder"], expect=v["expect"],
                          panic_on_unrecoverable=v["panic_on_unrecoverable"])]
        else:
            if len(set(v["guest"])) != len(v["guest"]):
                self.fail(section, "guest", f"a guest is named twice in '{', '.join(v['guest'])}'")
            guests = [self.guest_of(section, g) for g in v["guest"] or [None]]
            for guest, p in itertools.product(guests, v["pages"]):
                self.needs(section, "pages", guest, p)
            group = [dict(scenario=name, guest=g.name, page=p, kind=k, kill=kl, inject=i, recovery=r,
                          burst=v["burst"], repeat=v["repeat"], forwarder=f, panic_on_unrecoverable=pu)
                     for g, p, k, kl, i, r, f, pu in itertools.product(
                         guests, v["pages"], v["kinds"], v["kill"], v["inject"], v["recovery"], v["forwarder"],
                         v["panic_on_unrecoverable"])]
        group = [as_errors(c, self.opts["errors"]) for c in group]
        for check in (self.check_arch, self.check_real, self.check_selftest, self.check_forwarder):
            for c in group:
                check(section, kind, c)
        return group

    def guest_of(self, section, name):
        name = name or next(iter(self.c.guests))
        if name not in self.c.guests:
            self.fail(section, "guest", f"no [guest {name}] in this file")
        return self.c.guests[name]

    def check_arch(self, section, kind, c):
        """What an arm64 guest cannot have (ARM64_REFUSED), refused before
        anything runs; a host error that --errors real makes real is not
        run, saying why, as any other that cannot be real"""
        if self.c.guests[c["guest"]].arch != "arm64":
            return
        if c["inject"] == "host-real" and self.opts["errors"] == "real":
            c["not_real"] = f"not a real error here: {ARM64_REFUSED['inject', 'host-real']}"
            return
        for field, value in (("inject", c["inject"]), ("forwarder", c["forwarder"]), ("page", c["page"])):
            why = ARM64_REFUSED.get((field, value))
            if why:
                self.fail(section, "pages" if field == "page" and kind == "matrix" else field,
                          f"{field} = {value} on arm64 guest {c['guest']}: {why}")

    def needs(self, section, key, guest, page):
        """What @page needs of @guest, which must have it"""
        need = NEEDS.get(page)
        if need == "hugepages" and guest.hugepages < 1:
            self.fail(section, key, f"page {page} needs hugepages: set 'hugepages' in [guest {guest.name}]")
        if need == "ksm" and not guest.ksm:
            self.fail(section, key, f"page {page} needs KSM: set 'ksm = true' in [guest {guest.name}]")
        if need == "disk" and not guest.disk:
            self.fail(section, key, f"page {page} needs the data disk of [guest {guest.name}]")

    def check_real(self, section, kind, c):
        """A real host error is one the host kernel can be made to send"""
        if c["inject"] != "host-real":
            return
        why = None if c.get("not_real") else real_refusal(c)
        if why:
            self.fail(section, "repeat" if c["repeat"] else "kind" if kind == "case" else "kinds", why)
        where = self.file.where
        line = where.get((section, "inject")) or where.get((section, None))
        if self.c.host_real_line is None or line < self.c.host_real_line:
            self.c.host_real_line = line

    def check_selftest(self, section, kind, c):
        """A selftest's page and its injection go together"""
        if (c["page"] in SELFTEST_PROGRAMS) != (c["inject"] == "guest-selftest"):
            self.fail(section, "inject", f"page = {c['page']} and inject = {c['inject']} do not go "
                                         "together: a selftest's page (" + ", ".join(SELFTEST_PROGRAMS)
                                         + ") makes its own errors, inject = guest-selftest, and only it")

    def check_forwarder(self, section, kind, c):
        """QEMU can handle only what reaches it: a host error"""
        if c["forwarder"] == "qemu" and c["inject"] not in ("host", "host-real"):
            self.fail(section, "forwarder", f"forwarder = qemu needs a host error (inject = host or "
                                            f"host-real): with inject = {c['inject']} the guest makes "
                                            "the error itself and QEMU never hears of it")
