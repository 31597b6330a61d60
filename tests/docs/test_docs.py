#!/usr/bin/env python3
"""The docs against the code: every Markdown file of the tree (README.md,
docs/*.md, each directory's README.md) and the man pages. The convention is
docs/internals.md's "The docs test"; this checks:

- every fenced code block has an info string; blocks of commands are `sh`;
- the line before every `sh` fence is a marker: `<!-- docs-test: run -->`
  runs the block for real (bash -euo pipefail, from the top of the tree,
  with vmced and vmcectl as built first on PATH, in a process group of its
  own, within RUN_TIMEOUT) and wants exit status 0; `<!-- docs-test: by
  NAME[, NAME...] -->` names the meson tests that run those commands, which
  must exist, and each command's program must exist and know every
  --long-option the block gives it (its own --help, or its subcommand's);
- every relative link points to a file that exists, and an anchor to a
  heading of that file;
- what the prose names in `code`: a `make GOAL` is a target of the
  Makefile, a path of the tree exists, a meson test (`e2e-*`, `py-*`,
  `unit/NAME`) exists, and a command of vmced, vmcectl or a program of the
  tree knows its --long-options;
- the tables a marker stands before: `files GLOB...`, a directory's file
  table, names every file GLOB matches and no file that is not there;
  `tests GLOB...`, the same, and its second column names the meson tests
  each file runs as, every one of them, both ways; `control-commands` and
  `control-events`, vmced's control protocol, against the commands, their
  arguments and the events of host-daemon/src, both ways;
- each man page (host-daemon/man/PROG.N) against PROG --help (and each of
  its commands' --help), both ways;
- `make help` against the Makefile's .PHONY goals, both ways (NOT_IN_HELP
  says which goals it need not name, and why).

Every problem is one line that starts FILE:LINE. With --links-only, only
what needs nothing built is checked (the fences, markers, links, file
tables, and the make goals and paths prose names): nothing is run, meson
asked or a program asked for its --help. TAP on stdout; the last lines say
what the docs hold and how much was checked.
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, HERE)

import sources  # noqa: E402
from sources import (BIN_DIR, OPTION, closure, help_text, makefile_rules, makefile_targets, rel,  # noqa: E402
                     search_path)
from tap import Tap  # noqa: E402

BUILT = {"vmced", "vmcectl"}
RUN_TIMEOUT = 120
README_MAX_LINES = 200

FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([^`\s]*)")
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
LONG_OPTION = re.compile(r"^--([a-z0-9][a-z0-9-]*)")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# what a command line may start with that is not the program itself
KEYWORDS_THEN_COMMAND = {"do", "then", "else", "if", "while", "until", "!", "time", "{"}
KEYWORDS_NO_COMMAND = {"for", "case", "esac", "done", "fi", "}", "in"}
# bash builtins the docs use: they exist wherever bash does
BUILTINS = {"cd", "echo", "export", "kill", "wait", "break", "continue", "true", "false", "test", "[",
            "[[", "read", "set", "trap", "exit", "return", "printf", "source", ".", "unset", "local",
            "exec", "eval", "shift", ":"}
# the markers that stand before a table, not a ```sh fence
TABLE_KINDS = {"files", "tests", "control-commands", "control-events"}
# a meson test as prose names it: e2e-forward, py-qga, unit/decision
TEST_NAME = re.compile(r"^(?:e2e-|py-)[a-z0-9.-]*[a-z0-9]$|^unit/[a-z0-9-]+$")
# the .PHONY goals `make help` need not name, and why: the rest it must
NOT_IN_HELP = {
    "all": "make's default goal (make with no goal): build and image, which make help names",
    "help": "make help itself",
    "deps": "run/install-deps, which every goal that needs packages runs first",
    "kernel": "Debian's 6.1 guest kernel alone: make image makes it",
    "qemu-10.0": "make qemu under its base's name (vmce-10.0 alone)",
    "qemu-10.2": "a part of make qemus (vmce-10.2 alone)",
    "qemus-check": "make qemus without vmce-10.2: the QEMUs make check builds",
    "qemu-debian-10.0": "a part of make qemus (debian-10.0 alone)",
    "qemu-debian-11.1": "a part of make qemus (debian-11.1 alone)",
    "hostlab-matrix": "the first half of make hostlab",
    "bench-campaign": "a part of make bench (run/campaign --bench)",
    "bench-libvirt": "run/libvirt/bench alone; make bench runs it with its own sizes",
    "bench-libvirt-restarts": "a part of make bench (run/libvirt/restarts)",
    "bench-hostlab": "a part of make bench (run/hostlab --bench)",
    "bench-table": "make bench's last step: the table of the figures already measured",
}


def doc_files():
    """Every Markdown file of the tree: README.md and docs/*.md first"""
    found = []
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "build"
                         and not os.path.exists(os.path.join(top, d, "meson-private")))
        found += [os.path.join(top, f) for f in sorted(files) if f.endswith(".md")]
    first = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    return [f for f in first if f in found] + [f for f in found if f not in first]


def where(path, line):
    return f"{rel(path)}:{line}"


# -------------------------------------------------------------------- markdown

class Block:
    def __init__(self, path, line, info, body, before):
        self.path, self.line, self.info, self.body, self.before = path, line, info, body, before

    def where(self):
        return f"{rel(self.path)}:{self.line}"


def parse(path):
    """(fenced blocks, prose lines as (number, text) outside them)"""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, prose = [], []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            prose.append((i + 1, lines[i]))
            i += 1
            continue
        fence, info = m.group(2), m.group(3)
        close = re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        before = lines[i - 1] if i > 0 else ""
        blocks.append(Block(path, i + 1, info, lines[i + 1:j], before))
        i = j + 1
    return blocks, prose


def slug(heading):
    """The anchor GitHub gives a heading: its text, lower case, without
    punctuation, spaces made hyphens"""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen = {}
        found = set()
        _, prose = parse(path)
        for _, text in prose:
            m = HEADING.match(text)
            if m:
                s = slug(m.group(2))
                n = seen.get(s, 0)
                found.add(s if n == 0 else f"{s}-{n}")
                seen[s] = n + 1
        _anchors[path] = found
    return _anchors[path]


def bad_links(path, prose):
    """Relative links of @path's prose that lead nowhere, as 'line: why'"""
    bad = []
    for number, text in prose:
        for m in LINK.finditer(CODE_SPAN.sub("", text)):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue            # a URL: not ours to check
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                bad.append(f"{where(path, number)}: {target}: no such file {rel(dest)}")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                bad.append(f"{where(path, number)}: {target}: {rel(dest)} has no heading with anchor #{anchor}")
    return bad


# ----------------------------------------------------------------------- shell

def strip_heredocs(body):
    """The block's lines as (index, text), without here-documents' bodies
    (they are data)"""
    out, end = [], None
    for i, line in enumerate(body):
        if end is not None:
            if line.strip() == end:
                end = None
            continue
        out.append((i, line))
        m = re.search(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1", line)
        if m:
            end = m.group(2)
    return out


def split_words(line):
    """One shell line as a list of commands, each a list of words, roughly as
    bash reads it: quotes and $(...) kept inside words, # starting a comment
    only at a word's start, && || ; | & ending a command, redirections and
    their targets left out"""
    commands, words, word = [], [], None
    i, n = 0, len(line)
    skip_next = False

    def end_word():
        nonlocal word, skip_next
        if word is not None:
            if skip_next:
                skip_next = False
            else:
                words.append(word)
            word = None

    while i < n:
        c = line[i]
        if c in " \t":
            end_word()
            i += 1
        elif c == "#" and word is None:
            break
        elif c in "'\"":
            j = i + 1
            while j < n and line[j] != c:
                j += 2 if c == '"' and line[j] == "\\" else 1
            word = (word or "") + line[i + 1:j]
            i = j + 1
        elif c == "$" and line[i + 1:i + 2] == "(":
            depth, j = 1, i + 2
            while j < n and depth:
                depth += {"(": 1, ")": -1}.get(line[j], 0)
                j += 1
            word = (word or "") + line[i:j]
            i = j
        elif c == "\\" and i + 1 < n:
            word = (word or "") + line[i + 1]
            i += 2
        elif c in "&|;":
            end_word()
            op = line[i:i + 2] if line[i:i + 2] in ("&&", "||", ";;") else c
            if op == "&" and line[i + 1:i + 2] == ">":      # &> FILE
                skip_next = True
                i += 2
                continue
            if words:
                commands.append(words)
            words = []
            i += len(op)
        elif c in "<>":
            if word is not None and word.isdigit():        # 2> FILE
                word = None
            j = i
            while j < n and line[j] in "<>&":
                j += 1
            if line[j - 1] == "&" or (j < n and line[j].isdigit() and line[i:j].endswith("&")):
                while j < n and line[j].isdigit():         # 2>&1
                    j += 1
            else:
                skip_next = True
            i = j
        else:
            word = (word or "") + c
            i += 1
    end_word()
    if words:
        commands.append(words)
    return commands


def in_quotes(line):
    """True when @line ends inside a quoted string (a # comment, which
    may hold an apostrophe, starts only at a word's start outside quotes)"""
    quote, start = None, True
    for i, c in enumerate(line):
        if quote:
            if c == quote and not (quote == '"' and line[i - 1] == "\\"):
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and start:
            return False
        start = c in " \t;|&("
    return quote is not None


def commands_of(body):
    """Every simple command of a block as (the index of its first line, its
    words), leading assignments and keywords off; lines joined at a trailing
    backslash or inside a single-quoted string"""
    joined, cur, first = [], "", None
    for i, line in strip_heredocs(body):
        first = i if first is None else first
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        if in_quotes(cur + line):             # a quoted string goes on
            cur += line + " "
            continue
        joined.append((first, cur + line))
        cur, first = "", None
    if cur:
        joined.append((first, cur))
    out = []
    for i, line in joined:
        for words in split_words(line):
            while words and (ASSIGNMENT.match(words[0]) or words[0] in KEYWORDS_THEN_COMMAND):
                words = words[1:]
            if words and words[0] not in KEYWORDS_NO_COMMAND:
                out.append((i, words))
    return out


# ------------------------------------------------------------------ programs

# what a `by` block may name besides meson's tests: the make goal that runs
# its commands (ci: .ci/run's make check; the matrices, outside it)
PSEUDO = {"ci": "check", "bench": "bench", "hostlab": "hostlab"}


def make_goals(words):
    """the goals of a `make ...` command"""
    return [w for w in words[1:] if not w.startswith("-") and not ASSIGNMENT.match(w)]


def test_source(name):
    """the text of meson test @name's script, where its name says which
    (e2e-demo: tests/e2e/test_demo.py), or ''"""
    if not name.startswith("e2e-"):
        return ""
    path = os.path.join(ROOT, "tests", "e2e", "test_" + name[4:].replace("-", "_") + ".py")
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def runs_make_check():
    try:
        with open(os.path.join(ROOT, ".ci", "run")) as f:
            return re.search(r"\bmake\b[^\n]*\bcheck\b", f.read()) is not None
    except OSError:
        return False


def by_problems(block, cmds, names, tests):
    """What the names of a `by` block do not cover, as FILE:LINE lines: each
    is a meson test or a PSEUDO goal; each `make GOAL` of the block is made
    by a named goal or by a named test whose script runs make with it; a
    block that names only goals has each of its programs run by their recipes"""
    marker = where(block.path, block.line - 1)
    problems = [f"{marker}: {n}: no such meson test" for n in names if n not in PSEUDO and n not in tests]
    if "ci" in names and not runs_make_check():
        problems.append(f"{marker}: ci: .ci/run does not run make check")
    goals = [PSEUDO[n] for n in names if n in PSEUDO]
    made = set().union(*(closure(g) for g in goals))
    rules = makefile_rules()
    recipes = "\n".join(line for t in made for line in rules.get(t, ([], []))[1])
    scripts = "\n".join(test_source(n) for n in names)
    only_goals = all(n in PSEUDO for n in names)
    for i, words in cmds:
        at = where(block.path, block.line + 1 + i)
        if words[0] == "make":
            problems += [f"{at}: make {g}: nothing the block names makes it ({', '.join(PSEUDO)}, or a "
                         "test that runs make)" for g in make_goals(words)
                         if g not in made and not ('"make"' in scripts and f'"{g}"' in scripts)]
        elif only_goals and not re.search(r"(^|[\s@;&|-])" + re.escape(words[0]) + r"(\s|$)", recipes, re.M):
            problems.append(f"{at}: {words[0]}: make {' or '.join(goals)} does not run it")
    return problems


def resolve(words):
    """(argv prefix that runs the program, its help may be asked for, why not
    / None), or (None, why it does not exist)"""
    prog = words[0]
    if prog in ("python3", "python") and len(words) > 1 and not words[1].startswith("-"):
        script = os.path.join(ROOT, words[1])
        if not os.path.isfile(script):
            return None, f"{words[1]}: no such file in the tree"
        return [sys.executable, script], help_is_safe(script)
    if prog in BUILT:
        path = os.path.join(BIN_DIR, prog)
        if not os.access(path, os.X_OK):
            return None, f"{prog}: not built in {rel(BIN_DIR)}"
        return [path], None
    if "/" in prog:
        path = os.path.join(ROOT, prog)
        if not os.access(path, os.X_OK) or os.path.isdir(path):
            return None, f"{prog}: no such program in the tree"
        return [path], (None if os.path.dirname(os.path.abspath(path)) == BIN_DIR else help_is_safe(path))
    if prog in BUILTINS:
        return [prog], "a shell builtin"
    path = shutil.which(prog, path=search_path())
    if not path:
        return None, f"{prog}: not on PATH"
    return [path], None


def help_is_safe(script):
    """None when @script can be asked for --help without doing anything
    else (argparse, or a script that handles --help itself), else why not:
    run/demo, for one, takes no options and would run the demo"""
    try:
        with open(script, errors="replace") as f:
            text = f.read()
    except OSError as e:
        return str(e)
    if "argparse" in text or "--help" in text:
        return None
    return f"{rel(script)} has no --help (it would run instead)"


def check_command(words, targets, strict=True):
    """What is wrong with one command of a `by` block: [] when nothing; not
    @strict (a command in prose): a program that cannot be asked for its
    --help is not checked"""
    if words[0] == "make":
        return [f"make {g}: no such target" for g in make_goals(words) if g not in targets]
    argv, why = resolve(words)
    if argv is None:
        return [why]
    args = words[2:] if words[0] in ("python3", "python") else words[1:]
    options = []
    for w in args:
        if w == "--":
            break
        m = LONG_OPTION.match(w)
        if m and m.group(1) != "help":
            options.append("--" + m.group(1))
    name = words[1] if words[0] in ("python3", "python") else words[0]
    if not options:
        return []
    if why:
        return [f"{name}: cannot check {', '.join(options)}: {why}"] if strict else []
    text = help_text(argv)
    missing = [o for o in options if not re.search(re.escape(o) + r"(?![a-z0-9-])", text)]
    # a subcommand's own options: `run/vm start --help`, `vmcectl poison --help`
    # (the first word that looks like one and is no option's value)
    sub = next((w for before, w in zip([""] + args, args)
                if re.fullmatch(r"[a-z][a-z0-9-]*", w) and not before.startswith("-")), None)
    if missing and sub and re.search(r"\b" + re.escape(sub) + r"\b", text):
        name += " " + sub
        text += help_text(argv + [sub])
        missing = [o for o in options if not re.search(re.escape(o) + r"(?![a-z0-9-])", text)]
    return [f"{name}: {o} is in neither its --help nor its subcommand's" if " " in name
            else f"{name}: {o} is not in its --help" for o in missing]


def run_block(block):
    """Runs a `run` block: (ok, what to say)"""
    env = dict(os.environ, PATH=search_path())
    env.pop("VMCE_SOCKET", None)        # never the host's vmced
    # the output goes to a file, not a pipe: a process the block left behind
    # would hold a pipe open, and reading it would wait for that process
    with tempfile.TemporaryFile(mode="w+") as out_file:
        proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", "\n".join(block.body)], cwd=ROOT,
                                env=env, stdin=subprocess.DEVNULL, stdout=out_file, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=RUN_TIMEOUT)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            timed_out = True
        # whatever the block started and left running goes with its group
        left = False
        try:
            os.killpg(proc.pid, 0)
            left = True
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out_file.seek(0)
        out = out_file.read()
    tail = "\n".join(out.splitlines()[-15:])
    if timed_out:
        return False, f"still running after {RUN_TIMEOUT} s, killed\n{tail}"
    if proc.returncode != 0:
        return False, f"exit status {proc.returncode}\n{tail}"
    if left:
        return False, "exit status 0, but it left processes running (killed)"
    return True, None



# ---------------------------------------------------------------- prose names

def spans(text):
    """the code spans of a line of prose, without their backticks"""
    return [m.group(0).strip("`").replace("\\|", "|").strip() for m in CODE_SPAN.finditer(text)]


def placeholder(path):
    """True for a path that stands for many (NAME, BASE, *, ...)"""
    return (re.search(r"[*?\[\]{}<>$…]|\.\.\.", path) is not None
            or any(re.fullmatch(r"[A-Z][A-Z0-9_]+", part) for part in re.split(r"[/.-]", path)))


def in_tree(path, item):
    """@item, a path as the doc at @path writes it, resolved against the
    doc's directory, then the top of the tree: the files or directories it
    names (a glob: all it matches), [] for none"""
    for base in (os.path.dirname(path), ROOT):
        candidate = os.path.join(base, item)
        found = glob.glob(candidate) if re.search(r"[*?\[]", item) else (
            [candidate] if os.path.exists(candidate) else [])
        if found:
            return [os.path.normpath(f) for f in found]
    return []


def tree_path(path, word):
    """@word when it claims to be a path of the tree, else None: its
    directory is one of the tree (from the top, or beside the doc) and not
    build/; a path into a directory the tree does not have is another
    tree's (QEMU's tests/qtest/, Linux's mm/)"""
    if ("/" not in word.rstrip("/") or ":" in word or placeholder(word)
            or word.startswith(("/", "~", ".", "build/"))):
        return None
    parent = os.path.dirname(word.rstrip("/"))
    return word if any(os.path.isdir(os.path.join(base, parent)) for base in (os.path.dirname(path), ROOT)) \
        else None


def span_problems(path, number, span, names, targets):
    """What is wrong with one `code` span of prose: a make goal, a path, a
    meson test, an option"""
    words = span.split()
    if not words:
        return []
    at = where(path, number)
    if words[0] == "make" and len(words) > 1:
        return [f"{at}: make {g}: no such target" for g in make_goals(words)
                if g not in targets and not placeholder(g)]
    if names is not None and TEST_NAME.match(span) and span.split("/")[-1] not in names:
        return [f"{at}: {span}: no such meson test"]
    problems = []
    for w in words[:1]:
        p = tree_path(path, w)
        if p and not in_tree(path, p):
            problems.append(f"{at}: {p}: no such file or directory in the tree")
    if names is not None and not problems and (words[0] in BUILT or tree_path(path, words[0])):
        if any(LONG_OPTION.match(w) for w in words) and not placeholder(words[0]):
            problems += [f"{at}: {p}" for p in check_command(words, targets, strict=False)]
    return problems


def prose_problems(path, prose, names, targets):
    """(problems, how many spans were checked) of a doc's prose code spans;
    @names None: no meson test or --help asked (--links-only)"""
    problems, checked = [], 0
    for number, text in prose:
        if MARKER.match(text):
            continue
        for span in spans(text):
            checked += 1
            problems += span_problems(path, number, span, names, targets)
    return problems, checked


# --------------------------------------------------------------------- tables

class Table:
    """A Markdown table after a `<!-- docs-test: KIND ARGS -->` marker"""

    def __init__(self, path, line, kind, args, header, rows):
        self.path, self.line, self.kind, self.args, self.header, self.rows = (
            path, line, kind, args, header, rows)

    def where(self, line=None):
        return where(self.path, self.line if line is None else line)


def split_cells(text):
    cells = [c.strip() for c in re.split(r"(?<!\\)\|", text.strip())]
    return cells[1:-1] if len(cells) >= 2 and not cells[0] and not cells[-1] else cells


def tables_of(path, prose):
    """The marked tables of a doc, and the markers with no table after them"""
    lines = dict(prose)
    found, stray = [], []
    for number, text in prose:
        m = MARKER.match(text)
        kind, _, args = (m.group(1) if m else "").partition(" ")
        if kind not in TABLE_KINDS:
            continue
        rows, i = [], number + 1
        while lines.get(i, "").lstrip().startswith("|"):
            rows.append((i, split_cells(lines[i])))
            i += 1
        if len(rows) < 2:
            stray.append(f"{where(path, number)}: docs-test: {kind}: no table after it")
            continue
        found.append(Table(path, number, kind, args.split(), [c.lower() for c in rows[0][1]], rows[2:]))
    return found, stray


def row_paths(table, cell):
    """[(a path as the first column writes it, what it names)]: every code
    span of a `file` column (a bare name is in the directory of the path
    before it); the program, the first word, of a `command` column"""
    items = spans(cell)
    if table.header and table.header[0] == "command":
        items = items[:1]
    out, last_dir = [], ""
    for item in (i.split()[0] for i in items if i.split()):
        if "/" not in item and last_dir:
            item = last_dir + "/" + item
        last_dir = os.path.dirname(item.rstrip("/")) or last_dir
        out.append((item, in_tree(table.path, item)))
    return out


def file_table_problems(table):
    """A file table against its directory, both ways: every path in it
    exists, every file its marker's globs match is in it"""
    problems, named = [], set()
    for line, cells in table.rows:
        for item, found in row_paths(table, cells[0] if cells else ""):
            if not found:
                problems.append(f"{table.where(line)}: {item}: no such file")
            named |= set(found)
    base = os.path.dirname(table.path)
    for pattern in table.args:
        matched = [os.path.normpath(f) for f in sorted(glob.glob(os.path.join(base, pattern)))
                   if os.path.isfile(f) and os.path.normpath(f) != os.path.normpath(table.path)]
        if not matched:
            problems.append(f"{table.where()}: {pattern}: the marker's glob matches no file")
        problems += [f"{table.where()}: {rel(f)}: not in this table (docs-test: {table.kind} {pattern})"
                     for f in matched if f not in named]
    return problems


def tests_problems(tables, meson):
    """The tests tables against meson's tests, both ways: each row names
    every test meson runs from its files and no other; every meson test is
    in a row"""
    problems, listed = [], set()
    for t in tables:
        for line, cells in t.rows:
            files = {rel(f) for _, found in row_paths(t, cells[0] if cells else "") for f in found}
            names = spans(cells[1]) if len(cells) > 1 else []
            listed |= set(names)
            for n in names:
                if n not in meson:
                    problems.append(f"{t.where(line)}: {n}: no such meson test")
                elif not meson[n] & files:
                    runs = ", ".join(sorted(meson[n])) or "nothing of the tree"
                    problems.append(f"{t.where(line)}: {n}: meson runs it from {runs}, not this row's files")
            problems += [f"{t.where(line)}: meson runs {', '.join(sorted(its & files))} as {n} too: "
                         "not named here" for n, its in sorted(meson.items()) if its & files and n not in names]
    at = tables[0].where() if tables else "tests/README.md:1"
    problems += [f"{at}: meson test {n} ({', '.join(sorted(meson[n])) or '?'}) is in no docs-test: tests "
                 "table" for n in sorted(set(meson) - listed)]
    return problems


def command_row_problems(table, line, cells, commands):
    """One row of a control-commands table against vmced's command"""
    problems = []
    documented = {a.rstrip("?") for a in spans(cells[1])} if len(cells) > 1 else set()
    for name in spans(cells[0]):
        if name not in commands:
            problems.append(f"{table.where(line)}: {name}: vmced has no such command "
                            "(no vmce_control_add_command names it in host-daemon/src)")
            continue
        read, src, src_line = commands[name]
        problems += [f"{table.where(line)}: {name} {a}: its handler ({src}:{src_line}) reads no such "
                     "argument" for a in sorted(documented - read)]
        problems += [f"{table.where(line)}: {name}: its handler ({src}:{src_line}) reads `{a}`, which this "
                     "row leaves out" for a in sorted(read - documented)]
    return problems


def control_problems(tables):
    """(problems, rows checked): the control-commands and control-events
    tables against host-daemon/src, both ways"""
    commands, events = sources.control_commands(), sources.control_events()
    problems, rows = [], 0
    for kind, known in (("control-commands", commands), ("control-events", events)):
        mine = [t for t in tables if t.kind == kind]
        if not mine:
            problems.append(f"README.md:1: no docs-test: {kind} table in the docs")
            continue
        documented = set()
        for t in mine:
            for line, cells in t.rows:
                rows += 1
                names = spans(cells[0]) if cells else []
                documented |= set(names)
                if kind == "control-commands":
                    problems += command_row_problems(t, line, cells, commands)
                else:
                    problems += [f"{t.where(line)}: {n}: vmced sends no such event"
                                 for n in names if n not in known]
        problems += [f"{mine[0].where()}: {n} ({known[n][-2]}:{known[n][-1]}): not in this table"
                     for n in sorted(set(known) - documented)]
    return problems, rows


# ------------------------------------------------------------------ man pages

def man_section_problems(path, prog, sections, options):
    """Every option of PROG --help in the SYNOPSIS, and in OPTIONS where the
    page has one"""
    problems = []
    for name in ["SYNOPSIS"] + (["OPTIONS"] if "OPTIONS" in sections else []):
        lines = sections.get(name, [(1, "")])
        there = {"--" + o for _, text in lines for o in OPTION.findall(text)}
        problems += [f"{where(path, lines[0][0] - 1)}: {o}: in {prog} --help, not in {name}"
                     for o in sorted(options - there)]
    return problems


def man_command_problems(path, prog, man, argv, subs, global_options):
    """Each command of PROG --help has an entry under COMMANDS naming every
    option of its own --help, and no option neither knows"""
    sections, entries = man
    heading = sections.get("COMMANDS", sections.get("SYNOPSIS", [(2, "")]))[0][0] - 1
    problems = []
    mine = {re.sub(r"^\.\w+\s+", "", e.tag).replace('"', " ").split()[0]: e
            for e in entries if e.section == "COMMANDS" and e.tag.split()[1:]}
    for sub in subs:
        e = mine.get(sub)
        if e is None:
            problems.append(f"{where(path, heading)}: {prog} {sub}: in {prog} --help, no entry under COMMANDS")
            continue
        own = sources.help_options(help_text(argv + [sub]))
        problems += [f"{where(path, e.line)}: {prog} {sub} {o}: in its --help, not in this entry"
                     for o in sorted(own - e.options())]
        problems += [f"{where(path, e.line)}: {prog} {sub} {o}: neither its --help nor {prog}'s knows it"
                     for o in sorted(e.options() - own - global_options - {"--help"})]
    problems += [f"{where(path, e.line)}: {prog} {name}: no such command in {prog} --help"
                 for name, e in sorted(mine.items()) if name not in subs]
    return problems


def man_problems(path, prog):
    """(problems, options checked) of one man page against its program's
    --help, both ways"""
    argv = [os.path.join(BIN_DIR, prog)]
    if not os.access(argv[0], os.X_OK):
        return [f"{where(path, 1)}: {prog}: not built in {rel(BIN_DIR)}"], 0
    text = help_text(argv)
    subs = sources.subcommands(text)
    options = sources.help_options(text)
    known = options.union(*(sources.help_options(help_text(argv + [s])) for s in subs))
    sections, entries = sources.man_page(path)
    others = set(sources.man_pages().values()) - {prog}
    problems, checked = [], 0
    for lines in sections.values():
        for number, line in lines:
            if line.split()[:1] and line.split()[0] in others:
                continue            # another program's command line (EXAMPLE)
            for o in ("--" + o for o in OPTION.findall(line)):
                checked += 1
                if o not in known and o != "--help":
                    problems.append(f"{where(path, number)}: {o}: {prog} --help knows no such option")
    problems += man_section_problems(path, prog, sections, options)
    problems += man_command_problems(path, prog, (sections, entries), argv, subs, options)
    return problems, checked


# ------------------------------------------------------------------ make help

def line_of(path, start):
    """the number of @path's first line that starts with @start, or 1"""
    with open(path) as f:
        return next((i for i, text in enumerate(f, 1) if text.startswith(start)), 1)


def make_help_problems():
    """(problems, goals checked): `make help` against the .PHONY goals"""
    named, why = sources.make_help()
    if named is None:
        return [f"Makefile:{sources.makefile_line('help')}: make help failed: {why}"], 0
    targets = makefile_targets()
    problems = [f"Makefile:{line}: make help names make {g}: no such target"
                for g, line in named if g not in targets]
    in_help = {g for g, _ in named}
    problems += [f"Makefile:{sources.makefile_line(g) or 1}: make {g}: a .PHONY goal make help does not "
                 "name (name it, or add it to NOT_IN_HELP in tests/docs/test_docs.py with why)"
                 for g in sources.phony_goals() if g not in in_help and g not in NOT_IN_HELP]
    for g in (g for g in NOT_IN_HELP if g not in sources.phony_goals()):
        at = where(__file__, line_of(__file__, '    "' + g + '"'))
        problems.append(f"{at}: NOT_IN_HELP: {g}: no such .PHONY goal")
    return problems, len(set(sources.phony_goals()) | in_help)


# ----------------------------------------------------------------------- main

class Context:
    def __init__(self, links_only):
        self.links_only = links_only
        self.targets = makefile_targets()
        self.meson, self.meson_why = (None, None) if links_only else sources.meson_tests()
        self.names = None if self.meson is None else set(self.meson) | {
            f"{suite}/{n}" for n, suites in sources.meson_suites().items() for suite in suites}
        self.tables = []
        self.figures = dict.fromkeys(("sh", "commands", "run", "run_commands", "by", "by_commands", "spans",
                                      "file_rows", "test_files", "protocol_rows", "man_options",
                                      "make_goals"), 0)


def check_block(tap, ctx, b):
    cmds = commands_of(b.body)
    figures = ctx.figures
    figures["sh"] += 1
    figures["commands"] += len(cmds)
    m = MARKER.match(b.before)
    kind = m.group(1) if m else ""
    if kind == "run":
        figures["run"] += 1
        figures["run_commands"] += len(cmds)
        if not ctx.links_only:
            ok, why = run_block(b)
            tap.ok(ok, f"{b.where()}: runs for real, exit status 0 ({len(cmds)} commands)", diag=why)
    elif kind.startswith("by ") and kind[3:].strip():
        names = [n.strip() for n in kind[3:].split(",") if n.strip()]
        figures["by"] += 1
        figures["by_commands"] += len(cmds)
        if ctx.links_only:
            return
        if ctx.meson is None:
            problems = [f"{where(b.path, b.line - 1)}: meson introspect --tests failed: {ctx.meson_why}"]
        else:
            problems = by_problems(b, cmds, names, ctx.meson)
        for i, words in cmds:
            problems += [f"{where(b.path, b.line + 1 + i)}: {p}" for p in check_command(words, ctx.targets)]
        tap.ok(not problems, f"{b.where()}: by {', '.join(names)}: the tests exist, and "
               f"{len(cmds)} commands' programs and options", diag="\n".join(problems))
    else:
        tap.ok(False, f"{b.where()}: a ```sh block says how it is checked",
               diag=f"{where(b.path, b.line - 1)}: {b.before!r} is not <!-- docs-test: run --> "
                    "or <!-- docs-test: by NAME -->")


def check_doc(tap, ctx, path):
    blocks, prose = parse(path)
    name = rel(path)
    untagged = [f"{b.where()}: a fence without an info string (```sh, ```text, ```json ...)"
                for b in blocks if not b.info]
    tap.ok(not untagged, f"{name}: every fenced block says what it holds ({len(blocks)} blocks)",
           diag="\n".join(untagged))
    bad = bad_links(path, prose)
    tap.ok(not bad, f"{name}: every relative link leads to a file and heading that exist", diag="\n".join(bad))
    tables, stray = tables_of(path, prose)
    ctx.tables += tables
    sh_lines = {b.line - 1 for b in blocks if b.info == "sh"}
    stray += [f"{where(path, n)}: a docs-test marker with no ```sh fence after it" for n, text in prose
              if MARKER.match(text) and n not in sh_lines
              and MARKER.match(text).group(1).split(" ")[0] not in TABLE_KINDS]
    tap.ok(not stray, f"{name}: every docs-test marker stands just before a ```sh fence or its table",
           diag="\n".join(stray))
    names = None if ctx.links_only else (ctx.names or set())
    problems, checked = prose_problems(path, prose, names, ctx.targets)
    ctx.figures["spans"] += checked
    tap.ok(not problems, f"{name}: every make goal, path, test and option its prose names exists "
           f"({checked} code spans)", diag="\n".join(problems))
    for t in (t for t in tables if t.kind == "files"):
        ctx.figures["file_rows"] += len(t.rows)
        problems = file_table_problems(t)
        tap.ok(not problems, f"{t.where()}: the file table names every file of {', '.join(t.args)} there, "
               f"and only files that are ({len(t.rows)} rows)", diag="\n".join(problems))
    for b in (b for b in blocks if b.info == "sh"):
        check_block(tap, ctx, b)


def check_code(tap, ctx):
    """The tables, man pages and make help against the code"""
    tests = [t for t in ctx.tables if t.kind == "tests"]
    problems = [p for t in tests for p in file_table_problems(t)]
    problems += tests_problems(tests, ctx.meson) if ctx.meson is not None else [
        f"tests/README.md:1: meson introspect --tests failed: {ctx.meson_why}"]
    ctx.figures["test_files"] = sum(len(row_paths(t, r[1][0] if r[1] else "")) for t in tests for r in t.rows)
    tap.ok(not problems, f"tests tables: every test file and every meson test ({len(ctx.meson or {})}), "
           "both ways", diag="\n".join(problems))
    problems, ctx.figures["protocol_rows"] = control_problems(ctx.tables)
    tap.ok(not problems, "control protocol tables: vmced's commands, their arguments and its events, "
           "both ways", diag="\n".join(problems))
    for path, prog in sources.man_pages().items():
        problems, checked = man_problems(path, prog)
        ctx.figures["man_options"] += checked
        tap.ok(not problems, f"{rel(path)}: its options are {prog}'s --help's, both ways ({checked})",
               diag="\n".join(problems))
    problems, ctx.figures["make_goals"] = make_help_problems()
    tap.ok(not problems, f"make help: every goal a user runs, and only goals that exist "
           f"({ctx.figures['make_goals']})", diag="\n".join(problems))


def say_figures(tap, ctx, files):
    f = ctx.figures
    with open(os.path.join(ROOT, "README.md")) as readme:
        readme_lines = len(readme.read().splitlines())
    tap.ok(readme_lines <= README_MAX_LINES, f"README.md stays a front page: {readme_lines} lines "
           f"(at most {README_MAX_LINES}; the rest goes to docs/)")
    tap.diag(f"README.md: {readme_lines} lines; {len(files)} Markdown files")
    tap.diag(f"documented: {f['sh']} sh blocks, {f['commands']} commands; {f['spans']} code spans in prose")
    tap.diag(f"run for real: {f['run']} blocks, {f['run_commands']} commands"
             + (" (not run: --links-only)" if ctx.links_only else ""))
    tap.diag(f"checked against a named test: {f['by']} blocks, {f['by_commands']} commands")
    if not ctx.links_only:
        tap.diag(f"file-table rows checked: {f['file_rows']}; test files checked: {f['test_files']}")
        tap.diag(f"control protocol rows checked: {f['protocol_rows']}; man page options checked: "
                 f"{f['man_options']}; make goals checked: {f['make_goals']}")


def main():
    ctx = Context("--links-only" in sys.argv[1:])
    tap = Tap()
    files = doc_files()
    for path in files:
        check_doc(tap, ctx, path)
    if not ctx.links_only:
        check_code(tap, ctx)
    say_figures(tap, ctx, files)
    tap.done()


if __name__ == "__main__":
    main()
