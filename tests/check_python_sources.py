#!/usr/bin/env python3
"""check_python_sources.py - every file of the Python package in the source
tree (python/clformer, python/clformer/serve) is in meson.build's
py.install_sources lists, and every listed file exists: a module left out
installs a wheel that fails on import (python/clformer/_engine.py did, in
a CI rehearsal), which the tests run from the source tree never see."""
import os
import re
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(root, "meson.build"), encoding="utf-8") as f:
    listed = set(re.findall(r"'(python/clformer/[^']+)'", f.read()))
present = set()
for sub in ("python/clformer", "python/clformer/serve"):
    for name in os.listdir(os.path.join(root, sub)):
        if name.endswith(".py") or name == "py.typed":
            present.add(f"{sub}/{name}")
errors = [f"{p}: in the package, not in meson.build's py.install_sources" for p in sorted(present - listed)]
errors += [f"{p}: in meson.build's py.install_sources, not in the tree" for p in sorted(listed - present)]
for e in errors:
    print(e)
print(f"check_python_sources: {len(present)} files, {len(errors)} problems")
sys.exit(1 if errors else 0)
