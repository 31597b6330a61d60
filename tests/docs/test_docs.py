#!/usr/bin/env python3
"""The docs against the code (README.md and docs/*.md; the convention is
docs/internals.md's "The docs test"):

- every fenced code block has an info string; blocks of commands are `sh`;
- the line before every `sh` fence is a marker: `<!-- docs-test: run -->`
  runs the block for real (bash -euo pipefail, from the top of the tree,
  with vmced and vmcectl as built first on PATH, in a process group of its
  own, within RUN_TIMEOUT) and wants exit status 0; `<!-- docs-test: by
  NAME[, NAME...] -->` names the meson tests that run those commands, which
  must exist, and each command's program must exist and know every
  --long-option the block gives it (its own --help, or its subcommand's);
- every relative link points to a file that exists, and an anchor to a
  heading of that file.

With --links-only, only the fences, markers and links are checked: no
command is run and no program asked for its --help. TAP on stdout; the last
lines say what the docs hold (README.md's length, blocks and commands, how
many run for real, how many are checked against a named test).
"""
import functools
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

from tap import Tap  # noqa: E402

MESON_DIR = (os.environ.get("VMCE_MESON_DIR")
             or os.path.join(os.environ.get("VMCE_BUILD_DIR") or os.path.join(ROOT, "build"), "meson"))
BIN_DIR = os.path.abspath(os.path.join(MESON_DIR, "host-daemon"))
BUILT = {"vmced", "vmcectl"}
RUN_TIMEOUT = 120
HELP_TIMEOUT = 30
README_MAX_LINES = 200

FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([^`\s]*)")
MARKER = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
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


def doc_files():
    docs = os.path.join(ROOT, "docs")
    names = sorted(n for n in os.listdir(docs) if n.endswith(".md")) if os.path.isdir(docs) else []
    return [os.path.join(ROOT, "README.md")] + [os.path.join(docs, n) for n in names]


def rel(path):
    return os.path.relpath(path, ROOT)


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
                bad.append(f"{number}: {target}: no such file {rel(dest)}")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                bad.append(f"{number}: {target}: {rel(dest)} has no heading with anchor #{anchor}")
    return bad


# ----------------------------------------------------------------------- shell

def strip_heredocs(body):
    """The block's lines without here-documents' bodies (they are data)"""
    out, end = [], None
    for line in body:
        if end is not None:
            if line.strip() == end:
                end = None
            continue
        out.append(line)
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


def commands_of(body):
    """Every simple command of a block, as its words (leading assignments and
    keywords off); lines joined at a trailing backslash"""
    joined, cur = [], ""
    for line in strip_heredocs(body):
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        joined.append(cur + line)
        cur = ""
    if cur:
        joined.append(cur)
    out = []
    for line in joined:
        for words in split_words(line):
            while words and (ASSIGNMENT.match(words[0]) or words[0] in KEYWORDS_THEN_COMMAND):
                words = words[1:]
            if words and words[0] not in KEYWORDS_NO_COMMAND:
                out.append(words)
    return out


# ------------------------------------------------------------------ programs

# what a `by` block may name besides meson's tests: the make goal that runs
# its commands (ci: .ci/run's make check; the matrices, outside it)
PSEUDO = {"ci": "check", "bench": "bench", "hostlab": "hostlab"}


@functools.lru_cache(maxsize=None)
def makefile_rules():
    """target -> (its prerequisites, its recipe's lines); .PHONY's
    prerequisites are the phony targets"""
    rules, target = {}, None
    with open(os.path.join(ROOT, "Makefile")) as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.-]+)\s*:(?![=:])(.*)$", line)
            if m and not line.startswith("\t"):
                target = m.group(1)
                rules.setdefault(target, ([], []))[0].extend(w for w in m.group(2).split() if "$" not in w)
            elif line.startswith("\t") and target:
                rules[target][1].append(line.strip())
            elif not line.strip().startswith("#") and line.strip():
                target = None
    return rules


def makefile_targets():
    rules = makefile_rules()
    return (set(rules) | set(rules.get(".PHONY", ([], []))[0])) - {".PHONY"}


def closure(goal):
    """@goal and every target it makes first, through the prerequisites"""
    rules = makefile_rules()
    seen, todo = set(), [goal]
    while todo:
        t = todo.pop()
        if t not in seen:
            seen.add(t)
            todo += rules.get(t, ([], []))[0]
    return seen


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


def by_problems(cmds, names, tests):
    """What the names of a `by` block do not cover: each is a meson test or
    a PSEUDO goal; each `make GOAL` of the block is made by a named goal or
    by a named test whose script runs make with it; a block that names only
    goals has each of its programs run by their recipes"""
    problems = [f"no meson test named {n}" for n in names if n not in PSEUDO and n not in tests]
    if "ci" in names and not runs_make_check():
        problems.append(".ci/run does not run make check")
    goals = [PSEUDO[n] for n in names if n in PSEUDO]
    made = set().union(*(closure(g) for g in goals))
    rules = makefile_rules()
    recipes = "\n".join(line for t in made for line in rules.get(t, ([], []))[1])
    scripts = "\n".join(test_source(n) for n in names)
    only_goals = all(n in PSEUDO for n in names)
    for words in cmds:
        if words[0] == "make":
            problems += [f"make {g}: nothing the block names makes it ({', '.join(PSEUDO)}, or a test "
                         "that runs make)" for g in make_goals(words)
                         if g not in made and not ('"make"' in scripts and f'"{g}"' in scripts)]
        elif only_goals and not re.search(r"(^|[\s@;&|-])" + re.escape(words[0]) + r"(\s|$)", recipes, re.M):
            problems.append(f"{words[0]}: make {' or '.join(goals)} does not run it")
    return problems


def search_path():
    return BIN_DIR + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin")


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


def check_command(words, targets):
    """What is wrong with one command of a `by` block: [] when nothing"""
    if words[0] == "make":
        return [f"make {g}: no such target in the Makefile" for g in make_goals(words) if g not in targets]
    argv, why = resolve(words)
    if argv is None:
        return [why]
    args = words[2:] if words[0] in ("python3", "python") else words[1:]
    options = []
    for w in args:
        if w == "--":
            break
        m = LONG_OPTION.match(w)
        if m:
            options.append("--" + m.group(1))
    name = words[1] if words[0] in ("python3", "python") else words[0]
    if not options:
        return []
    if why:
        return [f"{name}: cannot check {', '.join(options)}: {why}"]
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


def meson_tests():
    """The test names meson knows ('e2e-forward' of 'vmce:e2e / e2e-forward'), or why not"""
    try:
        r = subprocess.run(["meson", "test", "-C", MESON_DIR, "--no-rebuild", "--list"],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    if r.returncode != 0:
        return None, (r.stderr or r.stdout).strip()[-500:]
    return {line.rsplit(" / ", 1)[-1].strip() for line in r.stdout.splitlines() if line.strip()}, None


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


# ---------------------------------------------------------------------- main

def main():
    links_only = "--links-only" in sys.argv[1:]
    tap = Tap()
    files = doc_files()
    targets = makefile_targets()
    tests, tests_why = (None, None) if links_only else meson_tests()
    figures = {"sh": 0, "commands": 0, "run": 0, "run_commands": 0, "by": 0, "by_commands": 0}

    for path in files:
        blocks, prose = parse(path)
        untagged = [b.where() for b in blocks if not b.info]
        tap.ok(not untagged, f"{rel(path)}: every fenced block says what it holds ({len(blocks)} blocks)",
               diag=f"fences without an info string (```sh for commands, ```text, ```json ...): {untagged}")
        bad = bad_links(path, prose)
        tap.ok(not bad, f"{rel(path)}: every relative link leads to a file and heading that exist",
               diag="\n".join(bad))
        sh_lines = {b.line - 1 for b in blocks if b.info == "sh"}
        stray = [f"{rel(path)}:{n}" for n, text in prose if MARKER.match(text) and n not in sh_lines]
        tap.ok(not stray, f"{rel(path)}: every docs-test marker stands just before a ```sh fence",
               diag=f"markers with no sh block after them: {stray}")

        for b in (b for b in blocks if b.info == "sh"):
            cmds = commands_of(b.body)
            figures["sh"] += 1
            figures["commands"] += len(cmds)
            m = MARKER.match(b.before)
            kind = m.group(1) if m else ""
            if kind == "run":
                figures["run"] += 1
                figures["run_commands"] += len(cmds)
                if links_only:
                    continue
                ok, why = run_block(b)
                tap.ok(ok, f"{b.where()}: runs for real, exit status 0 ({len(cmds)} commands)", diag=why)
            elif kind.startswith("by ") and kind[3:].strip():
                names = [n.strip() for n in kind[3:].split(",") if n.strip()]
                figures["by"] += 1
                figures["by_commands"] += len(cmds)
                if links_only:
                    continue
                if tests is None:
                    problems = [f"meson test --list failed: {tests_why}"]
                else:
                    problems = by_problems(cmds, names, tests)
                for words in cmds:
                    problems += check_command(words, targets)
                tap.ok(not problems, f"{b.where()}: by {', '.join(names)}: the tests exist, and "
                       f"{len(cmds)} commands' programs and options", diag="\n".join(problems))
            else:
                tap.ok(False, f"{b.where()}: a ```sh block says how it is checked",
                       diag=f"the line before it is {b.before!r}, not <!-- docs-test: run --> "
                            "or <!-- docs-test: by NAME -->")

    with open(os.path.join(ROOT, "README.md")) as f:
        readme_lines = len(f.read().splitlines())
    tap.ok(readme_lines <= README_MAX_LINES, f"README.md stays a front page: {readme_lines} lines "
           f"(at most {README_MAX_LINES}; the rest goes to docs/)")
    tap.diag(f"README.md: {readme_lines} lines; {len(files)} files")
    tap.diag(f"documented: {figures['sh']} sh blocks, {figures['commands']} commands")
    tap.diag(f"run for real: {figures['run']} blocks, {figures['run_commands']} commands"
             + (" (not run: --links-only)" if links_only else ""))
    tap.diag(f"checked against a named test: {figures['by']} blocks, {figures['by_commands']} commands")
    tap.done()


if __name__ == "__main__":
    main()
