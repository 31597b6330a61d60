"""QEMUs by name, like guest kernels: the five vmce knows, or one of your own.

  debian-7.2   Debian 12's qemu-system-x86 (installed by run/install-deps)
  debian-10.0  Debian 12's bookworm-backports qemu-system-x86 (10.0.2),
               downloaded and unpacked with its data files, never installed
               (`make qemus`: qemu-patches/fetch); it runs with Debian 12's
               own libraries. On a Debian 13 host (run/fleet up --suite
               trixie) it is that host's own qemu-system-x86, the same 10.0
  vmce-10.0    Debian 13's QEMU 10.0 source with qemu-patches/10.0/, built
               here once per machine (`make qemu`, `make qemus`:
               qemu-patches/build --base 10.0)
  vmce-10.2    Debian's QEMU 10.2 source (sid's 10.2.2) with qemu-patches/10.2/,
               built here once per machine (`make qemus`: qemu-patches/build
               --base 10.2)
  debian-11.1  Debian 13's trixie-backports qemu-system-x86 (11.1.3), built for
               a newer libc than Debian 12's: downloaded with the packages it
               depends on into a private root, never installed, and run
               through that root's own loader by a small generated script,
               the binary vmce runs (`make qemus`: qemu-patches/fetch --own-libs)
  vmce-10.2-arm64  the same source and series built for aarch64 (qemu-system-
               aarch64, the Arm guest's: its 0010 gives x-vmce-inject-sea), built
               here once per machine (`make qemu-10.2-arm64`: qemu-patches/build
               --base 10.2 --target aarch64); run/vm start --arch arm64 --qemu
               and a campaign's arm64 guest take the name (ARM64 below), as
               debian-7.2-arm64, Debian 12's qemu-system-aarch64
  PATH         a qemu-system-x86_64 of your own (a QEMU developer's build): its
               version is read, and it is judged by the nearest known QEMU's
               behaviour (a vmce-* one when it has the series' inject-mce), and
               every verdict says so

vmce-7.2 (Debian 12's source with the 7.2 series) was retired in part 20:
asked for by name, it says where the series is (RETIRED).

What a QEMU does *by itself* with a host memory error differs by version,
and that is what a campaign or the host lab expects of it when vmced lets
QEMU handle the signal (vmced's policy `pass`, the `forwarder = qemu` rows).
BEHAVIOUR has one entry per known QEMU, each read from that QEMU's source
(11.1's source answers 404 at Debian: its rows are read from the public
index's system/cpus.c after 10.0 and from Debian's 11.1.3 binary itself,
its symbols and messages; its TCG row measured by qemus.ini, its amd_kvm and
reset rows by the host lab, in the Debian 13 L1):

- tcg_sigbus: a BUS_MCEERR_AO/AR under TCG. QEMU 7.2, 10.0, 10.2 and 11.1
  build kvm_on_sigbus()/kvm_on_sigbus_vcpu() in whatever the accelerator,
  and sigbus_handler() (softmmu/cpus.c, system/cpus.c) calls them: with no
  KVM state they fail and QEMU aborts ("abort"). vmce's 0005 forwards it
  into the guest as KVM does ("forward").
- amd_kvm: on an AMD KVM host kvm_amd strips MCG_SER_P from every guest, so
  an AMD guest recovers only with the SUCCOR CPUID bit and AMD encodings.
  QEMU 7.2 has neither: it injects Intel-style and the guest panics
  ("panic"). 9.1 has both (2ba8b7ee6358, 4b77512b2782), as had vmce's
  retired 7.2 series (0004): the guest recovers when its CPU model has
  `succor=on` ("recover").
- reset: at a guest reset QEMU maps a fresh page where it knows of a
  poisoned one (kvm_unpoison_all() -> qemu_ram_remap()). 7.2 maps the same
  file again, so for shared memory the same poisoned page comes back and the
  next boot consumes it ("remap-same"); 10.0 discards the page first
  (3e05dedb9f3a, ram_block_discard_range()), as the retired 7.2 series'
  0006 did ("discard"). QEMU knows only the pages it handled itself: those vmced
  forwarded are vmced's to replace (reset-guard).
- migration: 9.0 refuses to migrate a guest with poisoned memory it knows of
  (06152b89db64, kvm_hwpoisoned_mem()): "refuse"; before, the migration
  thread reads the page and QEMU dies ("read"); vmce's series (0008) carries
  the list to the destination, which poisons the pages again ("carry").
"""
import hashlib
import os
import re
import subprocess

from . import axes, paths

DEFAULT = "debian-7.2"

# what each known QEMU does by itself (module docstring)
BEHAVIOUR = {
    "debian-7.2": dict(tcg_sigbus="abort", amd_kvm="panic", reset="remap-same", migration="read"),
    "debian-10.0": dict(tcg_sigbus="abort", amd_kvm="recover", reset="discard", migration="refuse"),
    "vmce-10.0": dict(tcg_sigbus="forward", amd_kvm="recover", reset="discard", migration="carry"),
    # read from Debian's 10.2.2 source: sigbus_handler(), the SUCCOR flags,
    # qemu_ram_remap() and migrate_prepare()'s refusal are 10.0's; with
    # 0005 the list covers TCG's forwarded errors too, and 0008 carries it
    "vmce-10.2": dict(tcg_sigbus="forward", amd_kvm="recover", reset="discard", migration="carry"),
    # TCG measured (run/campaigns/qemus.ini); amd_kvm and reset measured in
    # the host lab's Debian 13 L1 (run/hostlab --l1 debian-13 --qemu
    # debian-11.1 --accel kvm --forwarder qemu: AO and AR recovered, the
    # rebooted guest back clean, the page punched out); migration read:
    # 11.1.3 has kvm_hwpoisoned_mem() and its "Can't migrate this vm with
    # hardware poisoned memory"
    "debian-11.1": dict(tcg_sigbus="abort", amd_kvm="recover", reset="discard", migration="refuse"),
}

# features a campaign or the host lab may ask of a QEMU: who has them
# (a QEMU version from which upstream has it; vmce's series, on any base)
FEATURES = {
    "succor": ("the AMD SUCCOR and OVERFLOW_RECOV CPUID bits (-cpu ...,succor=on)", (9, 1), True),
    "inject-mce": ("the inject-mce QMP command", None, True),
    "query-ram-layout": ("the query-ram-layout QMP command", None, True),
    "tcg-forwarding": ("forwarding a host memory error into a TCG guest by itself", None, True),
    "reset-discard": ("discarding a poisoned page of shared memory at reset", (10, 0), True),
    "migration-refuse": ("refusing to migrate a guest with poisoned memory", (9, 0), False),
}

# -cpu flags that need a QEMU feature (FEATURES)
CPU_FEATURES = {"succor": "succor", "overflow-recov": "succor"}


class QemuError(Exception):
    """One line: what is wrong with the QEMU asked for"""


class Known:
    def __init__(self, name, version, series, how, locate):
        self.name, self.version, self.series, self.how = name, version, series, how
        self.locate = locate  # () -> the binary's path


def _cached(name, *rel):
    """build/qemus/NAME, a link into the per-machine cache made by `make qemus`"""
    return os.path.join(paths.build_dir(), "qemus", name, *rel)


SYSTEM = "/usr/bin/qemu-system-x86_64"


def debian_release(os_release="/etc/os-release"):
    """This host's Debian release ("12", "13"), or None elsewhere"""
    try:
        with open(os_release) as f:
            m = re.search(r'^VERSION_ID="?(\d+)', f.read(), re.M)
    except OSError:
        return None
    return m.group(1) if m else None


def _debian_10_0():
    """Debian 13's own QEMU where it is installed (a Debian 13 host: run/fleet
    up --suite trixie, e2e-package-13); elsewhere bookworm-backports' build of
    the same 10.0, unpacked (make qemus)"""
    if debian_release() == "13" and os.path.exists(SYSTEM):
        return SYSTEM
    return _cached("debian-10.0", "root", "usr", "bin", "qemu-system-x86_64")


KNOWN = {k.name: k for k in (
    Known("debian-7.2", (7, 2), False, "run/install-deps (Debian 12's qemu-system-x86)",
          lambda: SYSTEM),
    Known("debian-10.0", (10, 0), False, "make qemus", _debian_10_0),
    Known("vmce-10.0", (10, 0), True, "make qemu",
          lambda: _cached("vmce-10.0", "build", "qemu-system-x86_64")),
    Known("vmce-10.2", (10, 2), True, "make qemus",
          lambda: _cached("vmce-10.2", "build", "qemu-system-x86_64")),
    # the script that runs it with its own libraries (qemu-patches/fetch)
    Known("debian-11.1", (11, 1), False, "make qemus",
          lambda: _cached("debian-11.1", "qemu-system-x86_64")),
)}
NAMES = tuple(KNOWN)

# the aarch64 builds, for the Arm64 guest alone (arm64.qemu_binary()): name
# -> (the binary, what builds it)
ARM64 = {
    "vmce-10.2-arm64": (lambda: _cached("vmce-10.2-arm64", "build", "qemu-system-aarch64"),
                        "make qemu-10.2-arm64"),
    # Debian 12's own (qemu-system-arm): neither command, so vmced refuses
    # every error it catches there (a campaign's arm64 guest may name it)
    "debian-7.2-arm64": (lambda: "/usr/bin/qemu-system-aarch64", "run/install-deps arm64"),
}

# names vmce knew once: what became of them, in one line
RETIRED = {
    "vmce-7.2": "QEMU vmce-7.2 was retired in part 20: its series is in git at 0093f79 (git show "
                "0093f79:qemu-patches/7.2/series; qemu-patches/README.md says why); use vmce-10.0 or vmce-10.2",
}


class Qemu:
    """A resolved QEMU: the binary, its version, and the known QEMU whose
    behaviour it is judged by"""

    def __init__(self, name, binary, version_line, version, series, table, nearest=None):
        self.name, self.binary, self.version_line = name, binary, version_line
        self.version, self.series = version, series
        # table: the BEHAVIOUR entry; nearest: set when this QEMU is not one
        # vmce knows and table is only the closest
        self.table, self.nearest = table, nearest

    @property
    def label(self):
        return self.name if not self.nearest else f"{self.name} (as {self.table})"

    @property
    def release(self):
        """The version QEMU prints, e.g. 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)"""
        m = re.match(r"QEMU emulator version (.+)$", self.version_line or "")
        return m.group(1).strip() if m else (self.version_line or "?")

    @property
    def behaviour(self):
        return BEHAVIOUR[self.table]

    def has(self, feature):
        _, since, series = FEATURES[feature]
        return bool((series and self.series) or (since and self.version >= since))

    def require(self, feature, why=""):
        """QemuError naming the feature when this QEMU lacks it"""
        if self.has(feature):
            return
        what, since, series = FEATURES[feature]
        who = " or ".join(([f"QEMU {since[0]}.{since[1]}"] if since else [])
                          + (["vmce's series (vmce-10.0, vmce-10.2)"] if series else []))
        raise QemuError(f"QEMU {self.label} ({'.'.join(map(str, self.version))}) is too old for {feature}"
                        f"{' (' + why + ')' if why else ''}: {what} needs {who}")

    def to_dict(self):
        return dict(name=self.name, release=self.release, version=".".join(map(str, self.version)),
                    series=self.series, table=self.table, nearest=self.nearest, binary=self.binary)


def cpu_features(cpu):
    """The QEMU features (FEATURES) a -cpu model with flags asks for:
    'EPYC,succor=on,overflow-recov=on' -> {'succor'}"""
    wanted = set()
    for flag in cpu.split(",")[1:]:
        name, _, value = flag.strip().lstrip("+").partition("=")
        if name in CPU_FEATURES and value.lower() not in ("off", "false", "no"):
            wanted.add(CPU_FEATURES[name])
    return wanted


def amd_cpu(cpu):
    """Whether -cpu @cpu (a model with flags) is an AMD one"""
    model = (cpu or "").split(",")[0].lower()
    return model.startswith(("epyc", "opteron", "phenom", "athlon")) or "vendor=authenticamd" in (cpu or "").lower()


def is_spelled_as_path(value):
    return "/" in value or value.startswith(".")


def spelling():
    """The QEMU asked for through $VMCE_QEMU (a name or a path), or the default"""
    return os.environ.get("VMCE_QEMU") or DEFAULT


def resolve(value=None):
    """The Qemu that @value (a name or a PATH; None: $VMCE_QEMU or the
    default) names. QemuError when it is unknown, missing, or not an x86_64
    QEMU"""
    value = (value or spelling()).strip()
    if value in KNOWN:
        return _known(KNOWN[value])
    if not is_spelled_as_path(value):
        raise _unknown(value)
    return _custom(os.path.abspath(value))


def _unknown(value):
    if value in RETIRED:
        return QemuError(RETIRED[value])
    known = f"{', '.join(NAMES)}, or a PATH to a qemu-system-x86_64"
    # a kernel's name is not a QEMU's: debian-7.2 is a QEMU, debian-7.3 a kernel
    if value in axes.KERNELS:
        return QemuError(f"{value} is a guest kernel, not a QEMU (known QEMUs: {known})")
    if value in ARM64:
        return QemuError(f"QEMU {value} is a qemu-system-aarch64, the Arm64 guest's: an amd64 guest runs "
                         f"{known}; say arch = arm64 in its [guest]")
    return QemuError(f"unknown QEMU '{value}' (known: {known})")


def binary(value=None):
    """Only the binary of @value (None: $VMCE_QEMU or Debian's), without
    running it"""
    value = (value or spelling()).strip()
    if value in KNOWN:
        return KNOWN[value].locate()
    if not is_spelled_as_path(value):
        raise _unknown(value)
    return os.path.abspath(value)


def version_line(path=None):
    """The first line of `qemu-system-x86_64 --version` of the binary at
    @path (None: binary()), or None"""
    try:
        r = subprocess.run([path or binary(), "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.splitlines()[0] if r.returncode == 0 and r.stdout else None


_probed = {}

# what the dynamic loader says when a binary cannot start here (exit 127)
_LOADER_FAILED = r"error while loading shared libraries|version `[^']+' not found"


def cannot_run(path, said):
    """One line for a binary the dynamic loader would not start (@said, its
    stderr): every library it lacks and every symbol version this host's
    libraries are too old for, as ldd lists them (the loader itself names
    only the first), and how a QEMU built for a newer Debian runs here"""
    try:
        listed = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=20).stdout + said
    except (OSError, subprocess.TimeoutExpired):
        listed = said
    libs = list(dict.fromkeys(re.findall(r"^\s*(\S+) => not found", listed, re.M)
                              + re.findall(r"loading shared libraries: ([^:]+):", listed)))
    versions = list(dict.fromkeys(re.findall(r"version `([^']+)' not found", listed)))
    what = ([f"lacks {', '.join(libs)}"] if libs else []) + \
        ([f"needs {', '.join(versions)}, newer than this host's"] if versions else [])
    return (f"{path} cannot run here: it {' and '.join(what) or said.strip().splitlines()[0][:120]}; "
            "run it with its own libraries (qemu-patches/fetch --own-libs, as debian-11.1 is)")


def _probe(path):
    """(version line, (major, minor, micro), is x86_64, has inject-mce) of
    the QEMU at @path, asked once per binary and mtime"""
    try:
        st = os.stat(path)
    except OSError as e:
        raise QemuError(f"{path}: {e.strerror}") from None
    key = (path, st.st_mtime_ns)
    if key in _probed:
        return _probed[key]
    if not os.access(path, os.X_OK) or not os.path.isfile(path):
        raise QemuError(f"{path} is not an executable file")
    try:
        r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise QemuError(f"{path} is not a QEMU: it cannot be run ({e})") from None
    first = (r.stdout.splitlines() or [""])[0].strip()
    m = re.match(r"QEMU emulator version (\d+)\.(\d+)(?:\.(\d+))?", first)
    if r.returncode == 127 and re.search(_LOADER_FAILED, r.stderr):
        raise QemuError(cannot_run(path, r.stderr))
    if r.returncode != 0 or not m:
        said = (r.stderr.strip() or first or "nothing").splitlines()[0][:120]
        raise QemuError(f"{path} is not a QEMU: --version said '{said}'")
    version = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    # a qemu-system-aarch64 answers --version just the same: the machines
    # tell the target apart (x86's pc and q35)
    try:
        mach = subprocess.run([path, "-machine", "help"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise QemuError(f"{path}: -machine help failed ({e})") from None
    x86 = bool(re.search(r"^(pc-i440fx|pc-q35|q35|pc)\b", mach.stdout, re.M))
    # the series' own QMP command, and the target (qemu-system-i386 has the
    # pc machines too), asked without a guest
    series = False
    if x86:
        try:
            q = subprocess.run([path, "-machine", "none", "-nodefaults", "-display", "none", "-qmp", "stdio"],
                               input='{"execute":"qmp_capabilities"}\n{"execute":"query-commands"}\n'
                                     '{"execute":"query-target"}\n{"execute":"quit"}\n',
                               capture_output=True, text=True, timeout=20)
            series = '"inject-mce"' in q.stdout
            arch = re.search(r'"arch":\s*"([^"]+)"', q.stdout)
            if arch and arch.group(1) != "x86_64":
                raise QemuError(f"{path} is a QEMU for {arch.group(1)}, not qemu-system-x86_64")
        except (OSError, subprocess.TimeoutExpired):
            pass
    _probed[key] = (first, version, x86, series)
    return _probed[key]


def resolve_known_at(name, path):
    """Known QEMU @name found at @path rather than where KNOWN locates it (a
    host lab L1's own QEMU: l1hosts.py): checked and judged as @name"""
    return _known(KNOWN[name], path)


def _known(k, path=None):
    path = path or k.locate()
    if not os.path.exists(path):
        raise QemuError(f"QEMU {k.name} is missing at {path}: run `{k.how}`")
    first, version, x86, _ = _probe(path)
    if not x86:
        raise QemuError(f"QEMU {k.name} at {path} is not a qemu-system-x86_64")
    if version[:2] != k.version:
        raise QemuError(f"QEMU {k.name} at {path} is {first.split('version', 1)[-1].strip()}, not "
                        f"{k.version[0]}.{k.version[1]}" + (_other_release(path) if k.name == DEFAULT else ""))
    return Qemu(k.name, path, first, version, k.series, k.name)


def _other_release(path):
    release = debian_release()
    if path == SYSTEM and release == "13":
        return ": this host is Debian 13, whose own QEMU is debian-10.0 (--qemus debian-10.0)"
    return ": this host's qemu-system-x86 is not Debian 12's"


def nearest_table(version, series):
    """The known QEMU whose version is closest to @version, of vmce's
    builds when the QEMU has the series, else of Debian's"""
    pool = [k for k in KNOWN.values() if k.series == series]

    def distance(k):
        return (abs((k.version[0] - version[0]) * 100 + k.version[1] - version[1]), k.version)
    return min(pool, key=distance).name


def _custom(path):
    if os.path.isdir(path):
        for leaf in ("qemu-system-x86_64", os.path.join("build", "qemu-system-x86_64")):
            if os.path.isfile(os.path.join(path, leaf)):
                path = os.path.join(path, leaf)
                break
        else:
            raise QemuError(f"{path} is a directory with no qemu-system-x86_64 (nor build/qemu-system-x86_64)")
    elif not os.path.exists(path):
        raise QemuError(f"{path}: no such QEMU binary")
    first, version, x86, series = _probe(path)
    if not x86:
        raise QemuError(f"{path} is a QEMU but not qemu-system-x86_64 (it has no pc or q35 machine)")
    table = nearest_table(version, series)
    return Qemu(path, path, first, version, series, table, nearest=table)


def slug(spelling_):
    """A QEMU's name as part of a VM or file name"""
    if not is_spelled_as_path(spelling_):
        return spelling_
    return "qemu-" + hashlib.sha256(os.path.abspath(spelling_).encode()).hexdigest()[:8]
