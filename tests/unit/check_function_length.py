#!/usr/bin/env python3
"""No function over LIMIT lines, in C or in Python: a function that long
does several things, and each wants a name. Counts from the signature's
first line (a C function's return type, a Python def; not its comment or
decorators) to its last (a C function's closing brace). Prints TAP: a
line per function over the limit, naming FILE:LINE, the function and its
length; with --figures, the counts and the longest instead.

C: vmced's and vmcectl's sources (host-daemon/src) and the guest tools
(images/guest-tools). Python: the lab library and every Python program
of run/, and the tests' own Python."""
import ast
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from tap import Tap  # noqa: E402

LIMIT = 80
ROOT = os.path.realpath(os.path.join(HERE, "..", ".."))
C_FILES = ("host-daemon/src/*.c", "images/guest-tools/*.c")
# directories whose Python is checked: .py files, and programs whose first
# line runs python
PYTHON_DIRS = ("run", "tests")


def c_functions(text):
    """[(name, first line, last line)] of the function definitions of C
    source @text: a brace at file level whose head (what stands since the
    last declaration, brace or preprocessor line) ends in a parameter list.
    Comments, strings, character constants and preprocessor lines (with
    their continuations) are skipped, so no brace in them counts"""
    out, depth, head, start = [], 0, [], None
    i, line, n, at_line_start = 0, 1, len(text), True
    while i < n:
        ch = text[i]
        if ch == "\n":
            if depth == 0 and head:
                head.append((" ", line))
            line, at_line_start, i = line + 1, True, i + 1
            continue
        if at_line_start and ch == "#":
            # a preprocessor line, and its continuations
            while i < n and not (text[i] == "\n" and text[i - 1] != "\\"):
                line += text[i] == "\n"
                i += 1
            continue
        if not ch.isspace():
            at_line_start = False
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            line += text.count("\n", i, end)
            i = end
            continue
        if ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch:
                j += 2 if text[j] == "\\" else 1
            line += text.count("\n", i, j)
            if depth == 0:
                head += [(ch, line), (ch, line)]
            i = j + 1
            continue
        if depth == 0 and ch not in "{};" and not ch.isspace():
            head.append((ch, line))
        elif depth == 0 and ch.isspace() and head:
            head.append((" ", line))
        if ch == "{":
            if depth == 0:
                start = declaration(head)
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                if start:
                    out.append((start[0], start[1], line))
                start, head = None, []
        elif ch == ";" and depth == 0:
            head = []
        i += 1
    return out


def declaration(head):
    """(name, first line) of the function whose head is @head ([(char,
    line)] since the last declaration, without comments), or None when the
    brace after it opens no function (an initializer's `= {`, a struct).
    The name is the identifier before the last parameter list; the first
    line is that of the first word of the specifiers and type before the
    name (a macro invocation before them, G_DEFINE_QUARK (...), is not
    part of it)"""
    text = "".join(c for c, _ in head).rstrip()
    if not text.endswith(")"):
        return None
    # the last parameter list: from the final ")" back to its "("
    depth, i = 0, len(text) - 1
    while i >= 0:
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            break
        i -= 1
    m = re.search(r"([A-Za-z_]\w*)\s*$", text[:i])
    if not m or "=" in text[:i]:
        return None
    # back over the type and specifiers: words, "*" and blanks
    j = m.start()
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "_* \t"):
        j -= 1
    while text[j] == " ":
        j += 1
    return m.group(1), head[j][1]


def python_functions(text, name):
    """[(qualified name, first line, last line)] of every def, methods and
    nested functions too"""
    out = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + child.name, child.lineno, child.end_lineno))
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)
    visit(ast.parse(text, name), "")
    return out


def is_python(path):
    if path.endswith(".py"):
        return True
    if os.path.splitext(path)[1] or not os.access(path, os.X_OK):
        return False
    try:
        with open(path, "rb") as f:
            first = f.readline()
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def python_files():
    out = []
    for top in PYTHON_DIRS:
        for d, dirs, names in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(x for x in dirs if x not in ("__pycache__", "data"))
            out += [os.path.join(d, x) for x in sorted(names) if is_python(os.path.join(d, x))]
    return out


def functions():
    """{"C": [(file, name, first, length)], "Python": [...]}"""
    found = {"C": [], "Python": []}
    for pattern in C_FILES:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
            with open(path) as f:
                found["C"] += [(path, name, a, b - a + 1) for name, a, b in c_functions(f.read())]
    for path in python_files():
        with open(path) as f:
            found["Python"] += [(path, name, a, b - a + 1) for name, a, b in python_functions(f.read(), path)]
    return found


def main():
    found = functions()
    rel = {lang: [(os.path.relpath(p, ROOT), name, a, length) for p, name, a, length in fns]
           for lang, fns in found.items()}
    if "--figures" in sys.argv:
        for lang, fns in rel.items():
            over = [f for f in fns if f[3] > LIMIT]
            p, name, a, length = max(fns, key=lambda f: f[3])
            print(f"{lang}: {len(fns)} functions in {len({f[0] for f in fns})} files, {len(over)} over "
                  f"{LIMIT} lines; the longest {name} ({p}:{a}), {length} lines")
        return 0
    tap = Tap()
    for lang, fns in rel.items():
        # a scan that finds nothing is broken, not clean
        tap.ok(len(fns) > 0, f"{lang}: {len(fns)} functions found", diag="none found: the scan is broken")
        over = sorted((f for f in fns if f[3] > LIMIT), key=lambda f: (f[0], f[2]))
        for p, name, a, length in over:
            tap.ok(False, f"{p}:{a}: {name} is {length} lines (limit {LIMIT})", diag="split it into named steps")
        if not over:
            tap.ok(True, f"{lang}: no function over {LIMIT} lines")
    tap.done()


if __name__ == "__main__":
    sys.exit(main())
