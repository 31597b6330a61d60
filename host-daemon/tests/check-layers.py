#!/usr/bin/env python3
"""vmced's sources go one way: each file includes only headers of its own
layer or of the layers below it, and no two modules include each other,
however indirectly; and a header declares only functions of its own
module (one declared in vm.h and defined in vm-json.c made vm.c depend on
vm-json.c with no include to show it). Prints the violations (TAP); with
--figures, the numbers the README quotes (modules in an include cycle, the
longest function)."""
import os
import re
import sys

# lowest first; a module is NAME.c with NAME.h
LAYERS = [
    ("base", "page policy error json-util host-pfn mce-encode cper-encode mce-event decision poison-set poison-xml proc-info "
             "proc-maps line-socket config log-writer metrics"),
    ("adapters", "ptrace-watch qmp-client ram-layout journal libvirt-monitor remote-syscall "
                 "poison-scan poison-index poison-mark page-replace rom-blobs control ctl-connect agent-client "
                 "metrics-export attach-watch ras-lookup"),
    ("vm session", "vm"),
    ("vm as JSON", "vm-json"),
    ("simulator", "sim-poison vcpu-hold qemu-hwpoison"),
    ("forwarder and guards", "forward reset-guard migration-guard migration-incoming migration-lend hugepage-loss hugepage-salvage guest-answer"),
    ("daemon", "daemon"),
    ("commands", "commands libvirt-watch libvirt-carry"),
    ("programs", "vmced vmcectl"),
]
LAYER_OF = {m: i for i, (_, mods) in enumerate(LAYERS) for m in mods.split()}
INCLUDE = re.compile(r'^#include "([a-z0-9-]+)\.h"', re.M)
DECLARED = re.compile(r"\b(vmce_[a-z0-9_]+) \(")
# G_DEFINE_QUARK (name, prefix) defines prefix_quark ()
QUARK = re.compile(r"^G_DEFINE_QUARK \([^,]+, (\w+)\)", re.M)


def graph(src):
    deps = {}
    for name in sorted(os.listdir(src)):
        mod, ext = os.path.splitext(name)
        # NAME-private.h is NAME's own, for its files only
        mod = mod.removesuffix("-private")
        if ext not in (".c", ".h"):
            continue
        with open(os.path.join(src, name)) as f:
            for inc in INCLUDE.findall(f.read()):
                inc = inc.removesuffix("-private")
                if inc != mod:
                    deps.setdefault(mod, {}).setdefault(inc, name)
        deps.setdefault(mod, {})
    return deps


def defined_elsewhere(src):
    """(header, function, the .c that defines it) for each function a
    header declares that its own module does not define"""
    defined = {}
    for name in sorted(os.listdir(src)):
        if name.endswith(".c"):
            text = open(os.path.join(src, name)).read()
            for fn in re.findall(r"^([a-z_][a-z0-9_]*) \(", text, re.M):
                defined.setdefault(fn, name)
            for prefix in QUARK.findall(text):
                defined.setdefault(prefix + "_quark", name)
    out = []
    for name in sorted(os.listdir(src)):
        if not name.endswith(".h"):
            continue
        text = re.sub(r"/\*.*?\*/", "", open(os.path.join(src, name)).read(), flags=re.S)
        text = re.sub(r"^#define.*$", "", text, flags=re.M)
        own = name[:-2] + ".c"
        for fn in sorted(set(DECLARED.findall(text))):
            where = defined.get(fn)
            if where is not None and where != own:
                out.append((name, fn, where))
    return out


def in_cycles(deps):
    """modules on some include cycle (Tarjan's strongly connected components)"""
    index, low, stack, on, out, n = {}, {}, [], set(), set(), [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in deps.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.update(comp)

    for v in list(deps):
        if v not in index:
            visit(v)
    return out


def longest_function(src):
    best = (0, "", "")
    for name in sorted(os.listdir(src)):
        if not name.endswith(".c"):
            continue
        lines = open(os.path.join(src, name)).read().split("\n")
        start = None
        for i, line in enumerate(lines):
            if line == "{":
                start = i
                j = i - 1
                while j > 0 and not re.match(r"^[a-z_][a-z0-9_]* ?\(", lines[j]):
                    j -= 1
                fn = lines[j].split("(")[0].strip()
            elif line == "}" and start is not None:
                best = max(best, (i - start + 1, name, fn))
                start = None
    return best


def main():
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    deps = graph(src)
    if "--figures" in sys.argv:
        length, name, fn = longest_function(src)
        print(f"modules in an include cycle: {len(in_cycles(deps))}")
        print(f"longest function: {fn} ({name}), {length} lines")
        return 0
    bad = 0
    checks = []
    unknown = sorted(m for m in deps if m not in LAYER_OF)
    checks.append((not unknown, "every module has a layer", f"no layer: {unknown}"))
    for mod in sorted(deps):
        for inc, where in sorted(deps[mod].items()):
            if mod in LAYER_OF and inc in LAYER_OF and LAYER_OF[inc] > LAYER_OF[mod]:
                checks.append((False, f"{where} includes {inc}.h",
                               f"{inc} ({LAYERS[LAYER_OF[inc]][0]}) is above "
                               f"{mod} ({LAYERS[LAYER_OF[mod]][0]})"))
    cyc = sorted(in_cycles(deps))
    checks.append((not cyc, "no include cycle", f"modules on a cycle: {cyc}"))
    checks.append((all(ok for ok, _, _ in checks), "no file includes a header above its layer", ""))
    stray = defined_elsewhere(src)
    checks.append((not stray, "every function a header declares is its own module's",
                   "; ".join(f"{h} declares {fn}, which {c} defines" for h, fn, c in stray)))
    print(f"1..{len(checks)}")
    for i, (ok, what, why) in enumerate(checks, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {what}")
        if not ok:
            bad += 1
            print(f"# {why}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
