"""What the code says, for the docs test (tests/docs/test_docs.py) to hold
the docs against: the Makefile's goals and `make help`, meson's tests and
the files each runs, vmced's control commands (with the arguments each
reads) and events, a program's options in its --help, a man page's options.
Everything is read from the tree or the build each time, never listed here.
"""
import functools
import glob
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MESON_DIR = (os.environ.get("VMCE_MESON_DIR")
             or os.path.join(os.environ.get("VMCE_BUILD_DIR") or os.path.join(ROOT, "build"), "meson"))
BIN_DIR = os.path.abspath(os.path.join(MESON_DIR, "host-daemon"))
SRC_DIR = os.path.join(ROOT, "host-daemon", "src")
HELP_TIMEOUT = 30
# a long option as a program or a man page writes it
OPTION = re.compile(r"(?<![\w-])--([a-z0-9][a-z0-9-]*)")


def rel(path):
    return os.path.relpath(path, ROOT)


def search_path():
    return BIN_DIR + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin")


# -------------------------------------------------------------------- Makefile

@functools.lru_cache(maxsize=None)
def makefile_rules():
    """target -> (its prerequisites, its recipe's lines, the line that
    defines it); .PHONY's prerequisites are the phony targets"""
    rules, target = {}, None
    with open(os.path.join(ROOT, "Makefile")) as f:
        for number, line in enumerate(f, 1):
            m = re.match(r"^([A-Za-z0-9_.-]+)\s*:(?![=:])(.*)$", line)
            if m and not line.startswith("\t"):
                target = m.group(1)
                rules.setdefault(target, ([], [], number))[0].extend(
                    w for w in m.group(2).split() if "$" not in w)
            elif line.startswith("\t") and target:
                rules[target][1].append(line.strip())
            elif not line.strip().startswith("#") and line.strip():
                target = None
    return rules


def makefile_targets():
    rules = makefile_rules()
    return (set(rules) | set(phony_goals())) - {".PHONY"}


def phony_goals():
    return makefile_rules().get(".PHONY", ([], [], 0))[0]


def makefile_line(goal):
    return makefile_rules().get(goal, ([], [], 0))[2]


def closure(goal):
    """@goal and every target it makes first, through the prerequisites"""
    rules = makefile_rules()
    seen, todo = set(), [goal]
    while todo:
        t = todo.pop()
        if t not in seen:
            seen.add(t)
            todo += rules.get(t, ([], [], 0))[0]
    return seen


def make_help():
    """[(goal, the Makefile's line that echoes it)] for every `make GOAL` at
    the start of a line `make help` prints, or None and why not"""
    try:
        r = subprocess.run(["make", "--no-print-directory", "-s", "help"], capture_output=True, text=True,
                           cwd=ROOT, timeout=HELP_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    if r.returncode != 0:
        return None, (r.stderr or r.stdout).strip()[-300:]
    recipe = makefile_rules().get("help", ([], [], 0))
    with open(os.path.join(ROOT, "Makefile")) as f:
        lines = f.read().split("\n")
    out = []
    for text in r.stdout.splitlines():
        m = re.match(r"^make\s+([A-Za-z0-9_.-]+)", text)
        if m:
            goal = m.group(1)
            where = next((i + 1 for i in range(recipe[2] - 1, len(lines))
                          if re.search(r"echo\s+\"make\s+" + re.escape(goal) + r"(\s|\")", lines[i])), recipe[2])
            out.append((goal, where))
    return out, None


# ----------------------------------------------------------------------- meson

@functools.lru_cache(maxsize=None)
def introspect(what):
    r = subprocess.run(["meson", "introspect", "--" + what, MESON_DIR], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError((r.stderr or r.stdout).strip()[-500:])
    return json.loads(r.stdout)


def _in_tree(path):
    """@path as a file of the source tree (not of the build), or None"""
    path = os.path.normpath(path)
    build = os.path.abspath(MESON_DIR)
    if (path.startswith(ROOT + os.sep) and not path.startswith(build + os.sep)
            and os.path.isfile(path)):
        return path
    return None


def meson_tests():
    """({test name: the files of the tree it runs}, None) or (None, why not):
    a script in its command line, or the first source of the program it
    runs (host-daemon/tests/test-vm.c for vm and vm-asan)"""
    try:
        tests, targets = introspect("tests"), introspect("targets")
    except (OSError, subprocess.TimeoutExpired, RuntimeError, ValueError) as e:
        return None, str(e)
    first_source = {}
    for t in targets:
        sources = [s for ts in t.get("target_sources", []) for s in ts.get("sources", [])]
        for out in t.get("filename", []):
            if sources:
                first_source[os.path.normpath(out)] = sources[0]
    found = {}
    for t in tests:
        files = {_in_tree(a) for a in t["cmd"]}
        files |= {_in_tree(first_source.get(os.path.normpath(a), "")) for a in t["cmd"][:1]}
        found[t["name"]] = {rel(f) for f in files if f}
    return found, None


def meson_suites():
    """test name -> its suites ('unit' of 'vmce:unit')"""
    try:
        return {t["name"]: {s.split(":")[-1] for s in t.get("suite", [])} for t in introspect("tests")}
    except (OSError, subprocess.TimeoutExpired, RuntimeError, ValueError):
        return {}


# --------------------------------------------------------- vmced's C sources

def c_functions(path):
    """{name: (body, line)} of the functions defined in a C file (GNU style:
    the name at the start of a line, the body's braces at column 0)"""
    with open(path) as f:
        text = f.read()
    found = {}
    for m in re.finditer(r"^([a-z_][a-z0-9_]*)\s*\([^;{]*?\)\s*\n\{\n(.*?)^\}", text, re.M | re.S):
        found[m.group(1)] = (m.group(2), text.count("\n", 0, m.start()) + 1)
    return found


def _args_read(body, functions, seen):
    """the members a command handler's body reads from its `args`, itself
    or through the file's vmce_commands_get_* helpers given them"""
    names = set(re.findall(r"\(\s*args\s*,\s*\"([a-z][a-z0-9-]*)\"", body))
    for helper in re.findall(r"\b(vmce_commands_get_[a-z0-9_]*)\s*\([^;]*\bargs\b", body):
        if helper in functions and helper not in seen:
            seen.add(helper)
            names |= _args_read(functions[helper][0], functions, seen)
    return names


def control_commands():
    """{command: (the arguments its handler reads, file, line)}: every
    vmce_control_add_command() of host-daemon/src"""
    found = {}
    for path in sorted(glob.glob(os.path.join(SRC_DIR, "*.c"))):
        with open(path) as f:
            text = f.read()
        adds = list(re.finditer(r"vmce_control_add_command\s*\(\s*\w+\s*,\s*\"([a-z][a-z0-9-]*)\"\s*,\s*(\w+)",
                                text))
        if not adds:
            continue
        functions = c_functions(path)
        for m in adds:
            body, _ = functions.get(m.group(2), ("", 0))
            found[m.group(1)] = (_args_read(body, functions, {m.group(2)}), rel(path),
                                 text.count("\n", 0, m.start()) + 1)
    return found


def control_events():
    """{EVENT: (file, line)}: every event name vmced broadcasts to
    subscribers, as host-daemon/src passes it to vmce_control_broadcast(),
    vmce_daemon_emit_record() or vmce_vm_emit_record()"""
    found = {}
    call = re.compile(r"\b(?:vmce_control_broadcast|vmce_daemon_emit_record|vmce_vm_emit_record)\s*"
                      r"\(\s*[^,()]+\s*,\s*\"([A-Z][A-Z0-9_]*)\"")
    for path in sorted(glob.glob(os.path.join(SRC_DIR, "*.c"))):
        with open(path) as f:
            text = f.read()
        for m in call.finditer(text):
            found.setdefault(m.group(1), (rel(path), text.count("\n", 0, m.start()) + 1))
    return found


# ------------------------------------------------------------- programs' help

_help = {}


def help_text(argv):
    key = tuple(argv)
    if key not in _help:
        env = dict(os.environ, PATH=search_path())
        try:
            r = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=HELP_TIMEOUT,
                               cwd=ROOT, env=env, stdin=subprocess.DEVNULL)
            _help[key] = r.stdout + r.stderr
        except (OSError, subprocess.TimeoutExpired) as e:
            _help[key] = f"(no help: {e})"
    return _help[key]


def help_options(text):
    """the long options a --help names (its own --help and --help-* left out,
    and those of the commands it lists under 'Commands:')"""
    listed = set(subcommands(text))
    lines = [line for line in text.splitlines()
             if not (line.split() and line.split()[0] in listed and line.startswith(" "))]
    return {"--" + o for o in OPTION.findall("\n".join(lines)) if o != "help" and not o.startswith("help-")}


def subcommands(text):
    """the commands a --help lists under a 'Commands:' line"""
    found, inside = [], False
    for line in text.splitlines():
        if re.match(r"^\s*Commands:\s*$", line):
            inside = True
        elif inside:
            m = re.match(r"^\s{1,8}([a-z][a-z0-9-]*)(\s{2,}|$)", line)
            if not m:
                break
            found.append(m.group(1))
    return found


# ----------------------------------------------------------------- man pages

def man_text(line):
    """a line of nroff as its words read: escapes and font changes off"""
    line = re.sub(r"\\f[BIRP]|\\f\(..|\\&|\\\(..", "", line)
    return line.replace("\\-", "-").replace("\\e", "\\")


class ManEntry:
    """A .TP entry of a man page: its tag (the line after .TP), the lines to
    the next .TP, .SH or .SS, the section it is in"""

    def __init__(self, section, line, tag):
        self.section, self.line, self.tag, self.lines = section, line, tag, []

    def options(self):
        return {"--" + o for _, text in [(self.line, self.tag)] + self.lines for o in OPTION.findall(text)}


def man_page(path):
    """({section: [(line number, text)]}, [ManEntry]) of a man page, its
    text with nroff's escapes off"""
    sections, entries = {}, []
    section, entry, tag_next = "", None, False
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            text = man_text(raw.rstrip("\n"))
            m = re.match(r"^\.S[HS]\s+\"?(.*?)\"?\s*$", text)
            if m:
                section = m.group(1) if text.startswith(".SH") else section
                entry, tag_next = None, False
                continue
            sections.setdefault(section, []).append((number, text))
            if re.match(r"^\.TP\b", text):
                tag_next = True
            elif tag_next:
                entry, tag_next = ManEntry(section, number, text), False
                entries.append(entry)
            elif entry is not None:
                entry.lines.append((number, text))
    return sections, entries


def man_pages():
    """{man page path: the program it documents}: host-daemon/man/NAME.N"""
    pages = glob.glob(os.path.join(ROOT, "host-daemon", "man", "*.[1-8]"))
    return {p: os.path.splitext(os.path.basename(p))[0] for p in sorted(pages)}


if __name__ == "__main__":
    json.dump({"commands": {k: sorted(v[0]) for k, v in control_commands().items()},
               "events": sorted(control_events())}, sys.stdout, indent=1)
