#!/usr/bin/env python3
"""check_layers.py - keeps host/ layered and its functions short.

Every folder of host/ is a layer.  A file may include the public header,
files of its own folder, and files of the layers it sits on (LAYERS below,
drawn in docs/architecture.md); an include of a layer above, of a file that
does not exist, or of a header outside a layer folder fails the check.

The names a header uses obey the same rule (name_errors): a header may not
name a file of a layer it may not include ("linear.c" in a comment of
core.h), nor an identifier that such a layer defines (a function defined
there, or a macro, type or constant declared in its headers; words that
read as prose, "apply", are not taken for identifiers).  Inside models/,
the headers of the runtime the families share may not name a family
(FAMILIES: its words, and the identifiers its files define), and neither
may the layers below.  Every finding is reported with file:line.

The .c and .cc files of every layer but the family files may not hold a
string that is a family's name, a model_type or an architecture ("gpt2",
"LlamaForCausalLM"; literal_errors): where a shared file needs to know
what a family does, the family's rows say it.  The families, their files
and names are read from the registry in models/family.c, not listed here.

With --objects ARCHIVE, the same rule holds for calls: every symbol an
object file of the static library uses must be defined in its own layer or
one below (nm reads them), so an upward call fails even when it is declared
in a lower header.

With --lengths DIR..., every function of the C and C++ files under DIR longer
than MAX_LINES lines fails too, unless the comment right above it says why
with "(long: ...)".

--self-test makes a small tree with one fault of each kind (an upward
include, an over-long function, a lower header naming an upper file and
symbol, a shared model header naming a family, a shared .c file comparing
with a family's name, a registered family no file defines) and checks
that each is reported and nothing else is, so the check cannot pass by
finding nothing.
--help prints the usage.
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


# ---- names: a lower header may not name what sits above it ----

# Within models/: the family files (by stem, .c and .h) and the words that
# name each family, read from the registry (registry_families: the
# families[] of models/family.c, each clf__X_family's file, model_type and
# architectures) with the spellings ALIASES adds.  Every other header of
# models/ is the runtime the families share (blocks.h, kv.h, weights.h,
# family.h, model.h, sampling.h, and any added later): it may not use these
# words, nor the identifiers the family files define.  Nor may the headers
# of any layer that cannot include models/.  set_families fills FAMILIES
# (file stem -> words) and FAMILY_NAMES (every model_type and architecture,
# as written), before any check runs.
FAMILIES = {}
FAMILY_NAMES = {}
# Other spellings of a model_type in prose.
ALIASES = {"gpt2": ["gpt-2"], "qwen2": ["qwen"], "vit_mae": ["vitmae", "mae"]}
MODELS = "models"
REGISTRY = os.path.join(MODELS, "family.c")
# Family words a layer below may use all the same: the tokenizer kinds are
# named after the models they came with (GPT2Tokenizer's byte-level regex,
# RobertaTokenizer, MarianTokenizer, BertTokenizer's WordPiece), and text/ names those kinds, not the
# family files; the files and identifiers of models/ stay out of reach.
FAMILY_WORDS_ALLOWED = {
    "text": {"gpt2", "gpt-2", "roberta", "marian", "bert"},
}

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A file name in code or prose: "linear.c", "host/ops/linear.c", "models/gpt2.c".
FILE_NAME = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.(?:c|cc|h))(?![\w.])")
FAMILY_WORD = {}
FAMILY_RE = None
# Literals a layer's .c files may hold all the same: text/ reads GGUF's
# tokenizer kinds (tokenizer.ggml.model "llama", SentencePiece, "gpt2",
# byte-level BPE, and "bert", WordPiece), and picks a directory's tokenizer by model_type where
# tokenizer_class is absent, as transformers' AutoTokenizer does ("roberta",
# "xlm-roberta"): tokenizers named after models, not the family files.
FAMILY_LITERALS_ALLOWED = {"text": {"gpt2", "llama", "roberta", "xlm-roberta", "bert"}}


def strip_comments(text):
    """The text with comments blanked (newlines kept, so lines still count)."""
    def blank(m):
        s = m.group(0)
        return s if s[0] in "\"'" else re.sub(r"[^\n]", " ", s)
    return re.sub(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*', blank, text, flags=re.S)


def looks_like_identifier(name):
    """Whether a word is a code name rather than prose: it has an
    underscore, a digit or an upper-case letter after its first.  "apply" or
    "Profile" in a comment is English; "clf__skinny_shape", "kSkinny" and
    "CLF__WS_H" are not."""
    return "_" in name or any(c.isdigit() for c in name) or any(c.isupper() for c in name[1:])


def header_definitions(text):
    """name -> kind ("func", "type", "macro", "const", "var") of what a
    header declares: macros, struct/enum/union tags, typedefs, enum
    constants, functions and variables at file scope."""
    code = strip_comments(text)
    found = {}
    for m in re.finditer(r"^\s*#\s*define\s+(\w+)", code, re.M):
        found[m.group(1)] = "macro"
    for m in re.finditer(r"\b(?:struct|enum|union)\s+(\w+)\s*\{", code):
        found[m.group(1)] = "type"
    for m in re.finditer(r"\btypedef\b([^;{]*(?:\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}[^;]*)?);", code):
        body = m.group(1)
        fp = re.search(r"\(\s*\*\s*(\w+)\s*\)", body)
        name = fp.group(1) if fp else (re.findall(r"(\w+)\s*(?:\[[^\]]*\]\s*)*$", body.strip()) or [None])[0]
        if name:
            found[name] = "type"
    for m in re.finditer(r"\benum\b[^{;]*\{([^}]*)\}", code):
        for item in m.group(1).split(","):
            n = re.match(r"\s*(\w+)", item)
            if n:
                found.setdefault(n.group(1), "const")
    for line in code.split("\n"):
        if not line or line[0] in " \t#}" or re.match(r"(typedef|struct\s+\w+\s*\{|enum|union|namespace|extern \"C\"|"
                                                      r"static_assert|template|using)\b", line):
            continue
        fn = re.match(r"[^;=(]*?\b(\w+)\s*\(", line)
        var = re.match(r"(?:extern\s+|constexpr\s+|const\s+)[^;=(]*?\b(\w+)\s*(?:\[[^\]]*\]\s*)*(?:=|;)", line)
        if var:
            found.setdefault(var.group(1), "var")
        elif fn and fn.group(1) not in ("operator", "sizeof"):
            found.setdefault(fn.group(1), "func")
    return found


def source_definitions(text):
    """name -> kind of the functions and variables a source file defines
    at file scope without `static`."""
    lines = strip_comments(text).split("\n")
    found = {}
    for i, line in enumerate(lines):
        if not line or line[0] in " \t#}/" or re.match(r"(static|typedef|extern|namespace|using|template)\b", line):
            continue
        var = re.match(r"[A-Za-z_][^;(]*?\b(\w+)\s*(?:\[[^\]]*\]\s*)*=", line)
        if var:
            found.setdefault(var.group(1), "var")
            continue
        m = FUNC_START.match(line)
        if not m:
            continue
        rest = "\n".join(lines[i:i + 12])
        brace, semi = rest.find("{"), rest.find(";")
        if brace >= 0 and (semi < 0 or brace < semi):
            found.setdefault(m.group(1), "func")
    return found


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


FAMILY_DEF = re.compile(r"\bconst\s+clf__family\s+clf__(\w+)_family\s*=\s*\{\s*\"([^\"]+)\"\s*,\s*\{([^}]*)\}")


def registry_families(host):
    """{file stem: {"types": [...], "classes": [...]}} of the families
    models/family.c registers (its CLF__FAMILIES list: X(name) for each
    clf__name_family), each from the clf__name_family definition of
    its file in models/ (model_type first, then the architectures);
    raises ValueError when the registry or a family's definition is not
    found."""
    path = os.path.join(host, REGISTRY)
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no family registry")
    code = strip_comments(read(path))
    table = re.search(r"#[ \t]*define[ \t]+CLF__FAMILIES[ \t]*\([ \t]*X[ \t]*\)((?:[^\n]*\\\n)*[^\n]*)", code)
    names = re.findall(r"\bX\s*\(\s*(\w+)\s*\)", table.group(1)) if table else []
    if not names:
        raise ValueError(f"{path}: no #define CLF__FAMILIES(X) X(name) ... registry")
    defs = {}
    folder = os.path.join(host, MODELS)
    for f in sorted(os.listdir(folder)):
        if f.endswith((".c", ".cc")):
            for m in FAMILY_DEF.finditer(strip_comments(read(os.path.join(folder, f)))):
                defs[m.group(1)] = (os.path.splitext(f)[0], m.group(2), re.findall(r'"([^"]+)"', m.group(3)))
    out = {}
    for n in names:
        if n not in defs:
            raise ValueError(f"{path}: clf__{n}_family is registered, and no file of {folder} defines it")
        stem, mtype, classes = defs[n]
        fam = out.setdefault(stem, {"types": [], "classes": []})
        fam["types"].append(mtype)
        fam["classes"] += classes
    return out


def set_families(families):
    """The family tables every check reads, from registry_families."""
    global FAMILY_WORD, FAMILY_RE
    FAMILIES.clear()
    FAMILY_NAMES.clear()
    for stem, fam in families.items():
        words = [t.lower() for t in fam["types"]] + [a for t in fam["types"] for a in ALIASES.get(t, [])]
        FAMILIES[stem] = sorted(set(words))
        for name in fam["types"] + fam["classes"]:
            FAMILY_NAMES[name] = stem
    FAMILY_WORD = {w: fam for fam, words in FAMILIES.items() for w in words}
    FAMILY_RE = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(sorted(map(re.escape, FAMILY_WORD), key=len, reverse=True))
                           + r")(?![A-Za-z0-9])", re.I)


STRING = re.compile(r'"((?:\\.|[^"\\\n])*)"')


def literal_errors(host):
    """Every string literal in the code (not the comments) of a .c or .cc
    file outside the family files that is a family's name, a model_type or
    an architecture ("gpt2", "LlamaForCausalLM"): the shared layers branch
    on what a family's rows say, never on which family it is."""
    errors = []
    for layer, name, path in layer_files(host):
        if name.endswith(".h") or (layer == MODELS and family_of(name)):
            continue
        code = strip_comments(read(path))
        for m in STRING.finditer(code):
            fam = FAMILY_NAMES.get(m.group(1))
            if fam and m.group(1) not in FAMILY_LITERALS_ALLOWED.get(layer, ()):
                line = code.count("\n", 0, m.start()) + 1
                errors.append(f"{path}:{line}: the string \"{m.group(1)}\" names the model family {fam} "
                              f"(only its file {MODELS}/{fam}.c may: give the shared code a row to read)")
    return errors


def family_of(name):
    """The family whose file `name` (a models/ file name) is, or None."""
    stem = os.path.splitext(name)[0]
    return stem if stem in FAMILIES else None


def layer_files(host):
    """[(layer, name, path)] of every source and header of every layer."""
    out = []
    for layer in LAYERS:
        folder = os.path.join(host, layer)
        if os.path.isdir(folder):
            out += [(layer, n, os.path.join(folder, n)) for n in sorted(os.listdir(folder)) if n.endswith(SOURCE_EXT)]
    return out


def name_errors(host, public=None):
    """Every header that names a module or symbol it may not use: a file or
    an identifier of a layer it may not include, or (the headers of the
    shared model runtime and of the layers below) a model family."""
    files = layer_files(host)
    # name -> [(layer, file)] of what defines it.  The public header's types
    # and constants are everybody's; a public function belongs to the layer
    # that defines it.
    defined, files_of = {}, {}
    public_names = set()
    if public and os.path.isfile(public):
        public_names = {n for n, k in header_definitions(read(public)).items() if k != "func"}
    declared = {}
    for layer, name, path in files:
        files_of.setdefault(name, set()).add(layer)
        header = name.endswith(".h")
        defs = header_definitions(read(path)) if header else source_definitions(read(path))
        for ident in defs:
            if looks_like_identifier(ident) and ident not in public_names:
                (declared if header else defined).setdefault(ident, []).append((layer, name))
    # A function belongs to the file defining it, not to the headers that
    # declare it (a lower header declaring an upper function names it).
    for ident, owners in declared.items():
        defined.setdefault(ident, owners)
    errors = []
    for layer, name, path in files:
        if name.endswith(".h"):
            errors += header_name_errors(layer, name, path, defined, files_of)
    return errors


def header_name_errors(layer, name, path, defined, files_of):
    allowed = {layer, *LAYERS[layer]}
    shared_runtime = layer == MODELS and not family_of(name)
    text = read(path)
    found, spans = [], []

    def report(m, msg):
        spans.append((m.start(), m.end()))
        found.append((text.count("\n", 0, m.start()) + 1, m.start(), msg))

    def usable(owner_layer, owner_file):
        return owner_layer in allowed and not (shared_runtime and owner_layer == MODELS and family_of(owner_file))

    for m in IDENT.finditer(text):
        owners = defined.get(m.group(0))
        if not owners or any(usable(*o) for o in owners):
            continue
        l, f = owners[0]
        where = f"the family file {l}/{f}" if l in allowed else f"{l}/{f} ({layer} may not use {l})"
        report(m, f"names {m.group(0)}, defined in {where}")
    for m in FILE_NAME.finditer(text):
        parts = m.group(1).split("/")
        named = [p for p in parts[:-1] if p in LAYERS]
        layers = {named[-1]} if named else files_of.get(parts[-1], set())
        if layers and not layers & allowed:
            target = sorted(layers)[0]
            report(m, f"names {m.group(1)}, a file of {target}/ ({layer} may not use {target})")
    if shared_runtime or MODELS not in allowed:
        who = "the shared model runtime" if shared_runtime else layer
        for m in FAMILY_RE.finditer(text):
            word = m.group(1).lower()
            if word in FAMILY_WORDS_ALLOWED.get(layer, ()) or any(a <= m.start() < b for a, b in spans):
                continue
            ident = [i.group(0) for i in IDENT.finditer(text, max(0, m.start() - 80), m.end() + 80)
                     if i.start() <= m.start() and m.end() <= i.end()]
            inside = f" (in {ident[0]})" if ident and ident[0] != m.group(1) else ""
            report(m, f"names \"{m.group(1)}\"{inside}, the model family {FAMILY_WORD[word]} "
                      f"({who} may not name a family)")
    return [f"{path}:{line}: {msg}" for line, _, msg in sorted(found)]


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def self_test():
    """A small tree with one of each fault: an upward include, an over-long
    function, a lower header naming an upper file and an upper function, a
    shared model header naming a family and a family file's symbol; and
    names that are allowed (a lower symbol named from above, prose), which
    must not be reported."""
    with tempfile.TemporaryDirectory() as tmp:
        host = os.path.join(tmp, "host")
        write(os.path.join(host, "models", "model.h"), "/* a model */\nvoid clf__model_run(void);\n")
        write(os.path.join(host, "models", "swin.c"), "int clf__swin_shift(int x) {\n  return x;\n}\n"
              'const clf__family clf__swin_family = {"swin", {"SwinModel", NULL}, 0};\n'
              'static const char *swin_arch = "swin";\n')
        write(os.path.join(host, "models", "family.c"), "/* the registry: X(name) */\n"
              "#define CLF__FAMILIES(X) \\\n  X(swin)\n")
        write(os.path.join(host, "models", "model.c"),
              '/* the swin family is found by its row ("swin") */\nconst char *k = "swinish";\n')
        write(os.path.join(host, "io", "gguf_model.c"), '#include "base/status.h"\n\n'
              'int is_swin(const char *arch) {\n  return strcmp(arch, "swin") == 0;\n}\n')
        write(os.path.join(host, "base", "status.h"), "/* status */\n")
        set_families(registry_families(host))
        write(os.path.join(host, "models", "blocks.h"),
              "/* blocks shared by the families (apply, Profile: prose) */\n"
              "enum { CLF__WS_X, CLF__WS_SWIN_SHIFT };\nint clf__swin_shift(int x);\n")
        write(os.path.join(host, "ops", "linear.c"),
              '#include "ops.h"\n\nvoid clf__skinny_shape(void) {\n  clf__scratch(0);\n}\n')
        write(os.path.join(host, "ops", "ops.h"), '#include "core/core.h"\n/* over clf__scratch */\n'
              "void clf__skinny_shape(void);\n")
        write(os.path.join(host, "core", "core.h"),
              "/* the skinny kernel's tuning (linear.c), see clf__skinny_shape */\nvoid clf__scratch(int slot);\n")
        write(os.path.join(host, "core", "context.c"),
              '#include "models/model.h"\n\nint f(void) {\n' + "  x();\n" * (MAX_LINES + 5) + "}\n")
        inc = include_errors(host)
        lens = length_errors([host])
        names = name_errors(host) + literal_errors(host)
        write(os.path.join(host, "models", "family.c"),
              "#define CLF__FAMILIES(X) \\\n  X(swin) \\\n  X(opt)\n")
        try:
            registry_families(host)
            unregistered = []
        except ValueError as e:
            unregistered = [str(e)]
    want = {
        "the upward include": lambda e: "core may not include models" in e,
        "the long function": lambda e: "f() is" in e,
        "an upper file named below": lambda e: "core.h:1: names linear.c, a file of ops/" in e,
        "an upper function named below": lambda e: "core.h:1: names clf__skinny_shape, defined in ops/linear.c" in e,
        "a family named by the shared runtime": lambda e: 'blocks.h:2: names "SWIN" (in CLF__WS_SWIN_SHIFT)' in e,
        "a family file's function named by the shared runtime":
            lambda e: "blocks.h:3: names clf__swin_shift, defined in the family file models/swin.c" in e,
        "a family's name compared in a shared .c file":
            lambda e: 'gguf_model.c:4: the string "swin" names the model family swin' in e,
        "a registered family that no file defines":
            lambda e: "clf__opt_family is registered, and no file of" in e,
    }
    errors = inc + lens + names + unregistered
    missed = [what for what, hit in want.items() if not any(hit(e) for e in errors)]
    extra = [e for e in names if not any(hit(e) for hit in want.values())]
    ok = not missed and not extra
    print("self-test:", "each fault is reported, and nothing else" if ok else "FAILED",
          *(f"not reported: {m}" for m in missed), *(f"reported wrongly: {e}" for e in extra), *errors,
          sep="\n  ")
    return 0 if ok else 1


USAGE = """usage: check_layers.py HOST_DIR [--objects ARCHIVE] [--lengths DIR...]
       check_layers.py --self-test
       check_layers.py --help

Checks that host/ keeps its layers: includes (always), the names in each
header (always), calls (--objects: the static library), and function
lengths (--lengths: the C and C++ files under each DIR).  --self-test runs
the checks on a small tree with one fault of each kind."""


def main(argv):
    args = argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args == ["--self-test"]:
        return self_test()
    host, rest = args[0], args[1:]
    if host.startswith("-") or not os.path.isdir(host):
        print(f"check_layers.py: {host}: not a directory\n\n{USAGE}", file=sys.stderr)
        return 2
    try:
        set_families(registry_families(host))
    except ValueError as e:
        print(f"check_layers.py: {e}", file=sys.stderr)
        return 1
    public = os.path.join(os.path.dirname(os.path.abspath(host)), "include", "clformer.h")
    errors = include_errors(host) + name_errors(host, public) + literal_errors(host)
    checked = ["includes", "names in headers", f"family names in .c files ({len(FAMILY_NAMES)} from the registry)"]
    if rest[:1] == ["--objects"] and len(rest) >= 2:
        errors += call_errors(rest[1])
        checked.append("calls")
        rest = rest[2:]
    if rest[:1] == ["--lengths"] and len(rest) >= 2:
        errors += length_errors(rest[1:])
        checked.append(f"function lengths in {', '.join(rest[1:])}")
        rest = []
    if rest:
        print(f"check_layers.py: unexpected {' '.join(rest)}\n\n{USAGE}", file=sys.stderr)
        return 2
    for e in errors:
        print(e)
    print(f"{', '.join(checked)}: {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
