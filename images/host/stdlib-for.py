"""Copies into STAGE the standard library modules MODULE imports (and
what the interpreter needs to start with -S), so that the L1 image carries
Python without all of its library.

Usage: python3 -S stdlib-for.py STAGE PATH MODULE   (MODULE found on PATH)
"""
import modulefinder
import os
import shutil
import sys
import sysconfig

# what the interpreter imports before any script, even with -S
STARTUP = ["encodings", "codecs", "io", "abc", "os", "stat", "posixpath", "genericpath",
           "_collections_abc", "_weakrefset", "runpy", "importlib", "types", "warnings",
           "enum", "functools", "operator", "keyword", "reprlib", "collections", "heapq"]


def main():
    stage, path, module = sys.argv[1:4]
    stdlib = sysconfig.get_paths()["stdlib"]
    platstdlib = sysconfig.get_paths()["platstdlib"]
    finder = modulefinder.ModuleFinder(path=[path] + sys.path)
    finder.import_hook(module)
    if finder.badmodules:
        # "from package import name" is listed as package.name when name is
        # not a submodule: not missing when the package was found
        missing = sorted(m for m, where in finder.badmodules.items() if "vmcelab" in str(where)
                         and m.rpartition(".")[0] not in finder.modules)
        if missing:
            sys.exit(f"stdlib-for: {module} imports what cannot be found: {', '.join(missing)}")
    files = set()
    for mod in finder.modules.values():
        if mod.__file__ and mod.__file__.startswith((stdlib, platstdlib)):
            files.add(mod.__file__)
    for name in STARTUP:
        path = os.path.join(stdlib, name)
        if os.path.isdir(path):
            for root, _, names in os.walk(path):
                files.update(os.path.join(root, n) for n in names if n.endswith(".py"))
        elif os.path.exists(path + ".py"):
            files.add(path + ".py")
    for f in sorted(files):
        dst = stage + f
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(f, dst)


if __name__ == "__main__":
    main()
