#!/usr/bin/env python3
"""check_layers.py - keeps host/ layered and its functions short.

Every folder of host/ is a layer.  A file may include the public header,
files of its own folder, and files of the layers it sits on (LAYERS below,
drawn in docs/architecture.md); an include of a layer above, of a file that
does not exist, or of a header outside a layer folder fails the check.

With --objects ARCHIVE, the same rule holds for calls: every symbol an
object file of the static library uses must be defined in its own layer or
one below (nm reads them), so an upward call fails even when it is declared
in a lower header.

With --lengths DIR..., every function of the C and C++ files under DIR longer
than MAX_LINES lines fails too, unless the comment right above it says why
with "(long: ...)".

--self-test makes a small tree with an upward include and an over-long
function and checks that both are reported, so the check cannot pass by
finding nothing.
"""
import os
import re
import subprocess
import sys
import tempfile

# layer -> the layers its files may include (besides itself).
LAYERS = {
    "base": [],
    "core": ["base"],
    "ops": ["core", "base"],
    "device": ["ops", "core", "base"],
    "io": ["base"],
    "text": ["io", "base"],
    "models": ["ops", "core", "io", "text", "base"],
}
PUBLIC = {"clformer.h"}
SOURCE_EXT = (".c", ".cc", ".h")
MAX_LINES = 80

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def include_errors(host):
    errors = []
    for entry in sorted(os.listdir(host)):
        path = os.path.join(host, entry)
        if os.path.isfile(path) and entry.endswith(SOURCE_EXT):
            errors.append(f"{path}: outside any layer folder (one of {', '.join(LAYERS)})")
        elif os.path.isdir(path) and entry not in LAYERS:
            errors.append(f"{path}: unknown layer \"{entry}\" (add it to LAYERS and docs/architecture.md)")
    for layer in LAYERS:
        folder = os.path.join(host, layer)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if not name.endswith(SOURCE_EXT):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for m in INCLUDE.finditer(text):
                inc = m.group(1)
                line = text.count("\n", 0, m.start()) + 1
                where = f"{path}:{line}: #include \"{inc}\""
                if inc in PUBLIC:
                    continue
                if "/" not in inc:
                    if not os.path.isfile(os.path.join(folder, inc)):
                        errors.append(f"{where}: no such file in {layer}/")
                    continue
                target = inc.split("/")[0]
                if target not in LAYERS:
                    errors.append(f"{where}: \"{target}\" is not a layer")
                elif target == layer:
                    errors.append(f"{where}: include files of the same layer without the folder")
                elif target not in LAYERS[layer]:
                    errors.append(f"{where}: {layer} may not include {target} "
                                  f"(allowed: {', '.join(LAYERS[layer]) or 'base layer, none'})")
                elif not os.path.isfile(os.path.join(host, inc)):
                    errors.append(f"{where}: no such file")
    return errors


# A function definition starts at column 0 with a name and "(" and ends at
# the first "}" in column 0 after its "{".
FUNC_START = re.compile(r"^(?![\s#/}]|static_assert|typedef|struct\s+\w+\s*\{|enum|union|namespace|extern \"C\" \{)"
                        r"[^;=]*\b(\w+)\s*\(")


def long_functions(path, max_lines=MAX_LINES):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    found = []
    i = 0
    while i < len(lines):
        m = FUNC_START.match(lines[i])
        if not m:
            i += 1
            continue
        # the body opens on this line or within the signature's next lines
        j = i
        while j < len(lines) and j < i + 12 and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
            j += 1
        if j >= len(lines) or "{" not in lines[j]:
            i += 1
            continue
        if lines[j].rstrip().endswith("}"):  # one-line body
            i = j + 1
            continue
        k = j + 1
        while k < len(lines) and not lines[k].startswith("}"):
            k += 1
        n = k - i + 1
        if n > max_lines:
            above = "\n".join(lines[max(0, i - 12):i])
            if "(long:" not in above:
                found.append((i + 1, m.group(1), n))
        i = k + 1
    return found


def length_errors(roots):
    errors = []
    for root in roots:
        for dirpath, _, files in os.walk(root):
            for name in sorted(files):
                if not name.endswith((".c", ".cc")):
                    continue
                path = os.path.join(dirpath, name)
                for line, fn, n in long_functions(path):
                    errors.append(f"{path}:{line}: {fn}() is {n} lines (at most {MAX_LINES} "
                                  f"unless the comment above says why with \"(long: ...)\")")
    return errors


def object_layer(obj):
    """host_core_context.c.o -> core; the generated kernel table is core's."""
    m = re.match(r"host_([a-z]+)_", os.path.basename(obj))
    if m:
        return m.group(1)
    return "core" if "kernels_embedded" in obj else None


NM_LINE = re.compile(r"^(?:.*?:)?([^:]+\.o):\s*(?:[0-9a-fA-F]+\s+)?(\S)\s+(\S+)$")


def nm_symbols(archive, flag):
    """(object, nm type letter, symbol) for each symbol line of `nm -A`."""
    out = subprocess.run(["nm", "-A", flag, archive], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = NM_LINE.match(line)
        if m:
            yield m.group(1), m.group(2), m.group(3)


def call_errors(archive):
    defined = {}
    for obj, kind, sym in nm_symbols(archive, "--defined-only"):
        if kind in "TDRBVW" and object_layer(obj):
            defined[sym] = obj
    errors = []
    for obj, kind, sym in nm_symbols(archive, "--undefined-only"):
        layer, owner = object_layer(obj), defined.get(sym)
        if not layer or not owner:
            continue
        target = object_layer(owner)
        if target != layer and target not in LAYERS.get(layer, []):
            errors.append(f"{obj} ({layer}) calls {sym}, defined in {owner} ({target}): an upward call")
    return errors


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        host = os.path.join(tmp, "host")
        for layer in ("core", "models"):
            os.makedirs(os.path.join(host, layer))
        with open(os.path.join(host, "models", "model.h"), "w") as f:
            f.write("/* a model */\n")
        with open(os.path.join(host, "core", "context.c"), "w") as f:
            f.write('#include "models/model.h"\n\nint f(void) {\n' + "  x();\n" * (MAX_LINES + 5) + "}\n")
        inc = include_errors(host)
        lens = length_errors([host])
    ok = any("core may not include models" in e for e in inc) and any("f() is" in e for e in lens)
    print("self-test:", "the upward include and the long function are reported" if ok else "FAILED",
          *(inc + lens), sep="\n  ")
    return 0 if ok else 1


def main(argv):
    if argv[1:2] == ["--self-test"]:
        return self_test()
    if len(argv) < 2:
        print("usage: check_layers.py HOST_DIR [--objects ARCHIVE] [--lengths DIR...] | --self-test", file=sys.stderr)
        return 2
    errors = include_errors(argv[1])
    checked = ["includes"]
    rest = argv[2:]
    if rest[:1] == ["--objects"]:
        errors += call_errors(rest[1])
        checked.append("calls")
        rest = rest[2:]
    if rest[:1] == ["--lengths"]:
        errors += length_errors(rest[1:])
        checked.append(f"function lengths in {', '.join(rest[1:])}")
    for e in errors:
        print(e)
    print(f"{', '.join(checked)}: {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
