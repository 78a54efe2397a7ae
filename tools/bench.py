#!/usr/bin/env python3
"""bench.py - clformer on every OpenCL implementation this machine has,
beside PyTorch and ONNX Runtime, each at its best configuration, in one run
on the same machine; prints a markdown table per implementation of ratios
(clformer time / the faster peer's) and checks the outputs agree.

    /opt/clf-ref/bin/python tools/bench.py [--build build] [--repeat 5]
        [--only bert,bert-s16,vit,swin,gpt2,gpt2-decode] [--weights f32,f16,q8,q4]
        [--new-tokens 32] [--decode-repeat 3] [--torch-defaults]
        [--device S ...] [--min-device-gflops 5] [--probe-timeout 120]

Environment: tools/bench-env.sh (Debian python3-torch with OpenBLAS, the
/opt/clf-ref venv with transformers 4.40.2 that runs this script, and the
/opt/clf-ort venv with ONNX Runtime).  tools/bench_vs_torch.py is the older
one-model, PyTorch-only script and stays as it is (a model directory of your
own, several batch x length shapes).

Work (models made from transformers' configs with random, seeded weights,
saved once under --cache, default ~/.cache/clformer-bench, and reused):
  bert         BertModel base, 1 x 128 tokens, last_hidden_state
  bert-s16     the same model on 1 x 16 tokens (a sentence to embed)
  vit          ViTModel B/16, 1 x 3 x 224 x 224, last_hidden_state
  swin         SwinModel tiny (embed 96, depths 2,2,6,2, heads 3,6,12,24,
               window 7), 1 x 3 x 224 x 224, last_hidden_state
  gpt2         GPT2LMHeadModel 124M prefill, 1 x 64 tokens, logits
  gpt2-decode  the same model, greedy decoding of --new-tokens tokens after a
               16-token prompt, ms per token, for each --weights type, beside
               the bandwidth floor and transformers' generate()

Devices (one table each): --device S (repeatable; "P:D", part of a device
name, or rusticl, intel, oclgrind: an implementation clformer loads alone)
names them.  Without it the script finds them: `clformer devices --json`
(the implementations the ICD loader loads by default, one device per
platform and device type, the first whose probe passes: PoCL's "basic"
device, its single-threaded twin of "pthread", comes last and is left out,
and so is a second GPU of the same platform; --device P:D runs one), then
those `clformer devices` lists as not loaded by default, each by its NAME.  Every device is first probed (`clformer probe --json
--quick --no-validate --device S`, killed after --probe-timeout seconds):
its platform, device, driver and GEMM tuning profile head its table, its
best SGEMM rate over the probe's shapes decides whether it runs, and its
device copy bandwidth sets its decode floor.  A device under
--min-device-gflops (default 5: rusticl on llvmpipe does ~0.1, Oclgrind is
a simulator, a BERT pass would take minutes to hours), or whose probe fails
or times out, is skipped with a line naming it and why, on stderr as it
happens and in the output's header.  A --device that names no device stops
the script (exit 2) before anything is timed.

Peers and their configurations (each timed once per work item; clformer runs
on every device right after, so all the ratios come from the same minutes):
  PyTorch      torch.set_num_threads(1) (--torch-threads) and OpenBLAS on
               every core (OPENBLAS_NUM_THREADS = cores, set before torch
               loads).  The script stops (exit 3) when the process maps the
               reference BLAS or when torch threads x BLAS threads exceed the
               cores.  --torch-defaults also times torch as it comes (no
               environment, default threads), printed as a note only.
  ONNX Runtime tools/bench_ort.py in /opt/clf-ort: models exported with
               torch.onnx.export (opset 14) from the same weights,
               intra_op_num_threads = cores, ORT_ENABLE_ALL.
  clformer     `clformer run DIR --repeat N --device S` (its forward_ms
               median; one untimed pass first); decode: `clformer generate`
               of N new tokens, its own figure (the time between its first
               and last new token over the N - 1 between, on stderr), the
               median of --decode-repeat processes after a warm-up run.
               PyTorch's generate() in process: (generate(N) - generate(1))
               / (N - 1), medians: both the steady pace of a decoded token,
               neither the prompt's pass nor a process's start-up.  PyTorch
               is timed again right before each device and weight type's
               clformer cell, and that row's ratio uses it: on a shared
               machine the pace drifts by a third between minutes (28.7 to
               45.1 ms a token in five runs on 2026-12-07), and one PyTorch
               figure for the whole table moved every ratio with it.  (Until
               2026-11-28 clformer was timed over whole processes, (T(N) -
               T(1)) / (N - 1): start-up noise moved a row by 3 ms a token
               from run to run.)  A clformer run that fails puts "failed" in its
               row, its message under the table, and the exit status 1.
Times are medians; forward rows time --repeat runs after a warm-up.  Each
table says how many seconds of the run clformer spent on its device.

Exit status: 0; 1 when clformer failed on a device (after the tables) or no
device is left to bench; 2 for usage errors (an unknown --only or --weights,
no clformer build, a --device that names no device); 3 when a peer is not at
its best (the checks above).

Bandwidth floor of decoding, per device: the bytes of the weights read per
token (every tensor in model.safetensors; for f16/q8/q4 the matrices at 2,
34/32 and 18/32 bytes per weight, 1-D tensors kept f32) over that device's
copy bandwidth as its probe measured it in the same run (bytes read +
written).  A NumPy copy of 512 MiB (read + written over the best of 5) is
printed beside it, as information.
"""
import argparse
import ctypes
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORES = len(os.sched_getaffinity(0))
ORT_PY = os.environ.get("CLF_ORT_PYTHON", "/opt/clf-ort/bin/python")
FIX = "run tools/bench-env.sh"


def fail(msg, code=3):
    sys.stderr.write(f"bench.py: {msg}\n")
    sys.exit(code)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/clformer-bench"))
    ap.add_argument("--repeat", type=int, default=5, help="timed forward passes per peer (median)")
    ap.add_argument("--only", default="bert,bert-s16,vit,swin,gpt2,gpt2-decode")
    ap.add_argument("--weights", default=None,
                    help="clformer weight types for decoding, e.g. f32,f16,q8,q4 (default: f32, no flag)")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--decode-repeat", type=int, default=3, help="processes per decode timing (median)")
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--torch-defaults", action="store_true",
                    help="also time PyTorch with its default threads (a note, not the comparison)")
    ap.add_argument("--allow-idle-cores", action="store_true",
                    help="accept a PyTorch configuration that leaves cores idle (else exit 3)")
    ap.add_argument("--min-gflops", type=float, default=20,
                    help="exit 3 when PyTorch's 1024^3 SGEMM is slower than this (a reference BLAS does ~5)")
    ap.add_argument("--device", action="append", default=[],
                    help="a clformer --device to bench (repeatable); default: every implementation found")
    ap.add_argument("--min-device-gflops", type=float, default=5,
                    help="skip a device whose probe's best SGEMM is slower than this (0 runs every device)")
    ap.add_argument("--probe-timeout", type=float, default=120,
                    help="seconds a device's `clformer probe` may take before the device is skipped")
    ap.add_argument("--torch-worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.only = [s.strip() for s in a.only.split(",") if s.strip()]
    unknown = [s for s in a.only if s not in WORK]
    if unknown:
        fail(f"--only: unknown {unknown}; choose from {', '.join(WORK)}", 2)
    return a


# ---- the work ----

WORK = {
    "bert": dict(label="BERT-base, 1x128", dir="bert", output="last_hidden_state"),
    "bert-s16": dict(label="BERT-base, 1x16", dir="bert", output="last_hidden_state"),
    "vit": dict(label="ViT-B/16, 224", dir="vit", output="last_hidden_state"),
    "swin": dict(label="Swin-T, 224", dir="swin", output="last_hidden_state"),
    "gpt2": dict(label="GPT-2 124M prefill, 64 tokens", dir="gpt2", output="logits"),
    "gpt2-decode": dict(label="GPT-2 124M greedy decode", dir="gpt2", output=None),
}


def make_model(name):
    """A model with random weights from its config (seeded)."""
    import torch
    import transformers as tf
    torch.manual_seed(0)
    if name == "bert":
        return tf.BertModel(tf.BertConfig())
    if name == "vit":
        return tf.ViTModel(tf.ViTConfig())
    if name == "swin":
        return tf.SwinModel(tf.SwinConfig(image_size=224, patch_size=4, embed_dim=96, depths=[2, 2, 6, 2],
                                          num_heads=[3, 6, 12, 24], window_size=7))
    return tf.GPT2LMHeadModel(tf.GPT2Config())


def make_inputs(name):
    import numpy as np
    rng = np.random.default_rng(0)
    if name in ("bert", "bert-s16"):
        n = 128 if name == "bert" else 16
        return {"input_ids": rng.integers(1000, 20000, (1, n)).astype(np.int64),
                "attention_mask": np.ones((1, n), np.int64)}
    if name in ("vit", "swin"):
        return {"pixel_values": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}
    if name == "gpt2":
        return {"input_ids": rng.integers(0, 50000, (1, 64)).astype(np.int64)}
    return {"input_ids": rng.integers(0, 50000, (1, 16)).astype(np.int64)}  # decode prompt


def model_dir(a, name):
    """The saved checkpoint (config.json + model.safetensors), made once."""
    d = os.path.join(a.cache, WORK[name]["dir"])
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return d
    sys.stderr.write(f"bench.py: making {d} (random weights, once)\n")
    tmp = d + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    make_model(WORK[name]["dir"]).eval().save_pretrained(tmp, safe_serialization=True)
    os.replace(tmp, d)
    return d


def load_model(d):
    import transformers as tf
    cfg = json.load(open(os.path.join(d, "config.json")))
    cls = getattr(tf, cfg["architectures"][0])
    return cls.from_pretrained(d).eval()


def onnx_file(a, name, inputs):
    """The model exported with torch.onnx.export (opset 14), made once, from
    a model of its own (an export leaves the model it traced altered)."""
    import torch
    d = os.path.join(a.cache, WORK[name]["dir"])
    path = os.path.join(d, f"{name}.onnx")
    if os.path.exists(path):
        return path
    model = load_model(d)
    sys.stderr.write(f"bench.py: exporting {path} (once)\n")
    names, out = list(inputs), WORK[name]["output"]
    extra = {"use_cache": False} if name == "gpt2" else {}

    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *xs):
            return getattr(self.m(**dict(zip(names, xs)), **extra, return_dict=True), out)

    args = tuple(torch.from_numpy(inputs[k]) for k in names)
    with torch.no_grad():
        torch.onnx.export(Wrap(model), args, path + ".tmp", input_names=names, output_names=[out],
                          opset_version=14, do_constant_folding=True)
    os.replace(path + ".tmp", path)
    return path


# ---- the PyTorch peer: configured before torch loads, then checked ----

def configure_torch_env(defaults):
    if defaults:
        for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.pop(k, None)
        return
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(CORES))


def blas_libs():
    """Paths of the BLAS/LAPACK libraries this process maps."""
    libs = []
    for line in open("/proc/self/maps"):
        p = line.split()[-1] if len(line.split()) >= 6 else ""
        if re.search(r"blas|lapack|mkl", os.path.basename(p)) and p not in libs:
            libs.append(p)
    return libs


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def sgemm_provider():
    """The library whose sgemm_ the dynamic linker resolves in this process
    for torch's libtorch_cpu (the one its BLAS calls reach), or None."""
    libdl = ctypes.CDLL(None)
    torch_lib = [line.split()[-1] for line in open("/proc/self/maps") if "libtorch_cpu" in line]
    try:  # dlsym on torch's handle searches it and its dependencies in load order
        addr = ctypes.cast(getattr(ctypes.CDLL(torch_lib[0]) if torch_lib else libdl, "sgemm_"),
                           ctypes.c_void_p).value
    except (AttributeError, OSError):
        return None
    info = _DlInfo()
    libdl.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    if not libdl.dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.path.realpath(info.dli_fname.decode())


def check_torch(a):
    """Refuses a reference BLAS and oversubscribed threads; returns a
    description of the configuration."""
    import torch
    x = torch.randn(512, 512)
    x @ x  # maps the BLAS
    cfg = torch.__config__.show()
    info = re.search(r"BLAS_INFO=(\w+)", cfg)
    blas_info = info.group(1) if info else "?"
    libs = blas_libs()
    openblas = [p for p in libs if "libopenblas" in os.path.basename(p)]
    # The reference BLAS: Debian's /usr/lib/<triplet>/blas/libblas.so.3 (libblas3).
    ref = [p for p in libs if os.path.basename(os.path.dirname(p)) == "blas" and "libblas" in p]
    sgemm = sgemm_provider()
    if blas_info != "mkl" and (ref or not openblas or (sgemm and "openblas" not in sgemm and "mkl" not in sgemm)):
        alt = "/etc/alternatives/libblas.so.3-x86_64-linux-gnu"
        target = os.path.realpath(alt) if os.path.exists(alt) else "?"
        fail(f"PyTorch's BLAS is not OpenBLAS or MKL: sgemm_ comes from {sgemm or '?'}, the process maps "
             f"{', '.join(ref or libs) or 'no BLAS'} ({alt} -> {target}, LD_LIBRARY_PATH="
             f"{os.environ.get('LD_LIBRARY_PATH', '')}).  The reference BLAS is 10-30x slower: a comparison "
             "with it says nothing.  Fix: apt-get install libopenblas0-pthread (tools/bench-env.sh), or "
             "update-alternatives --config libblas.so.3-x86_64-linux-gnu, and no LD_LIBRARY_PATH "
             "pointing at another libblas.so.3")
    blas_threads, blas_desc = None, blas_info
    if openblas:
        lib = ctypes.CDLL(openblas[0])
        lib.openblas_get_config.restype = ctypes.c_char_p
        blas_threads = lib.openblas_get_num_threads()
        blas_desc = f"{lib.openblas_get_config().decode()} ({os.path.basename(os.path.dirname(openblas[0]))})"
        if "openmp" in openblas[0]:  # the OpenMP build shares torch's OpenMP threads
            blas_threads = 1
    tt = torch.get_num_threads()
    if blas_threads is not None and tt * blas_threads > CORES:
        fail(f"threads oversubscribe the {CORES} cores: torch {tt} x OpenBLAS {blas_threads}.  Fix: "
             f"OPENBLAS_NUM_THREADS={CORES} with --torch-threads 1 (the defaults of this script), or "
             f"OPENBLAS_NUM_THREADS=1 with --torch-threads {CORES}")
    used = tt * (blas_threads or 1)
    if used < CORES and not a.allow_idle_cores:
        fail(f"PyTorch would use {used} of the {CORES} cores (torch {tt} x BLAS {blas_threads}): not its "
             f"best.  Fix: unset OPENBLAS_NUM_THREADS (the script sets it to {CORES}) and keep "
             "--torch-threads 1, or pass --allow-idle-cores")
    note = "" if used >= CORES else f" (only {used} of {CORES} cores: not its best)"
    y = torch.randn(1024, 1024)
    gflops = 2 * 1024 ** 3 / _timed(lambda: torch.mm(y, y), 5) / 1e6
    if gflops < a.min_gflops:
        fail(f"PyTorch's 1024^3 SGEMM ran at {gflops:.0f} GFLOP/s, under --min-gflops {a.min_gflops:g}: "
             "a reference BLAS, wrong threads or a busy machine.  Fix the configuration or wait for an idle "
             "machine (--min-gflops 0 skips this check)")
    return (f"PyTorch {torch.__version__}, torch.set_num_threads({tt}), {blas_desc}, "
            f"{blas_threads if blas_threads is not None else '?'} BLAS threads{note}; "
            f"1024^3 SGEMM {gflops:.0f} GFLOP/s")


def _timed(fn, n):
    """Median ms of n calls after one warm-up."""
    fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def torch_forward(model, inputs, output, repeat):
    import torch
    feeds = {k: torch.from_numpy(v) for k, v in inputs.items()}
    with torch.no_grad():
        want = getattr(model(**feeds), output).numpy()
        ms = _timed(lambda: model(**feeds), repeat)
    return ms, want


def torch_decode(model, ids, n, repeat):
    """ms per token: (generate(n) - generate(1)) / (n - 1), medians."""
    import torch
    t = torch.from_numpy(ids)
    kw = dict(do_sample=False, num_beams=1, pad_token_id=model.config.eos_token_id,
              attention_mask=torch.ones_like(t))
    with torch.no_grad():
        seq = model.generate(t, max_new_tokens=n, **kw).numpy()
        tn = _timed(lambda: model.generate(t, max_new_tokens=n, **kw), repeat)
        t1 = _timed(lambda: model.generate(t, max_new_tokens=1, **kw), repeat)
    return (tn - t1) / (n - 1), seq


# ---- clformer ----

class ClfFailed(Exception):
    """A clformer run that failed on one device: its row says so, the run goes on."""


def clformer_exe(a):
    return os.path.join(a.build, "tools", "clformer")


def clformer(a, dev, args, what):
    cmd = [clformer_exe(a)] + args + ["--device", dev["sel"]]
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:  # e.g. the binary being relinked by a build at that moment
        raise ClfFailed(f"{what}: cannot run {cmd[0]}: {e}")
    wall = (time.perf_counter() - t0) * 1e3
    dev["clf_s"] += wall / 1e3
    if r.returncode != 0:
        if "--weights" in args and re.search(r"--weights|unknown option|unrecognized", r.stderr):
            fail(f"this clformer rejects --weights ({r.stderr.strip()}); it needs a build with the "
                 "--weights option, or leave out bench.py's --weights (f32 only)", 2)
        msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit status {r.returncode}"
        raise ClfFailed(f"{what} failed ({' '.join(cmd)}): {msg}")
    return r, wall


def clformer_forward(a, dev, d, inputs, output, tmp):
    """Reads the inputs that run_forward saved in tmp."""
    import numpy as np
    args = ["run", d]
    for k in inputs:
        args += ["--in", f"{k}={tmp}/{k}.npy"]
    out = f"{tmp}/clf_out.npy"
    if os.path.exists(out):
        os.unlink(out)
    args += ["--out", f"{output}={out}", "--repeat", str(a.repeat)]
    r, _ = clformer(a, dev, args, "clformer run")
    m = re.search(r"forward_ms median=([0-9.]+)", r.stderr)
    if not m:
        raise ClfFailed(f"clformer run printed no forward_ms: {r.stderr.strip()[-500:]}")
    return float(m.group(1)), np.load(out)


def clformer_decode(a, dev, d, ids, weights, tmp):
    import numpy as np
    np.save(f"{tmp}/ids.npy", ids)
    seq = f"{tmp}/seq.npy"
    base = ["generate", d, "--in", f"input_ids={tmp}/ids.npy", "--out", f"sequences={seq}"]
    if weights:
        base += ["--weights", weights]

    clformer(a, dev, base + ["--max-new-tokens", "2"], "clformer generate")  # warms the kernel and page caches
    if os.path.exists(seq):
        os.unlink(seq)
    per = [step_ms(clformer(a, dev, base + ["--max-new-tokens", str(a.new_tokens)], "clformer generate")[0])
           for _ in range(a.decode_repeat)]
    return statistics.median(per), np.load(seq)


def step_ms(r):
    """clformer generate's own figure: the time between its first and last
    new token over the tokens between (its stderr), as llama.cpp and
    PyTorch are timed in their processes; the prompt's pass and the
    process's start-up are not in it."""
    m = re.search(r"new tokens, the first after [0-9.]+ ms, then ([0-9.]+) ms a token", r.stderr)
    if not m:
        raise ClfFailed("clformer generate printed no per-token time (a build older than its timing line?)")
    return float(m.group(1))


def find_devices(a, skipped):
    """[(selector, group, "platform / device")]: the devices of every implementation.  First
    those `clformer devices --json` lists (the ICD loader's defaults, by
    "P:D"; group: platform and device type, of which bench_devices keeps the
    first that its probe passes, PoCL's single-threaded "basic" device, the
    twin of its "pthread" one, put last), then those `clformer devices` lists as not
    loaded by default, each by its NAME (or the part of it before a "-" when
    only that is in the device's name: `--device intel-cpu` loads Intel's
    runtime but matches no device named "Intel(R) OpenCL / ...").  What
    cannot be reached goes to `skipped`."""
    exe = clformer_exe(a)
    r = subprocess.run([exe, "devices", "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"clformer devices --json failed: {r.stderr.strip()}", 1)
    listed = json.loads(r.stdout)["devices"]
    # PoCL's "basic" device is its one-thread twin of "pthread": the last a platform's CPUs offer
    listed.sort(key=lambda d: d["device"].lower().startswith("basic"))
    found = [(f"{d['platform_index']}:{d['device_index']}", (d["platform"], d["type"]),
              f"{d['platform']} / {d['device']}") for d in listed]
    r = subprocess.run([exe, "devices"], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"clformer devices failed: {r.stderr.strip()}", 1)
    others, name = False, None
    for line in r.stdout.splitlines():
        if line.startswith("Not loaded by default"):
            others = True
            continue
        if not others or not line.strip():
            continue
        m = re.match(r"   (\S+)\s+(.*)$", line)
        rest = m.group(2) if m else line.strip()
        dm = re.match(r"(.* / .*) \(driver .*\)$", rest)
        if not m:  # a further device of the implementation above
            skip(skipped, f"{dm.group(1) if dm else rest}: another device of {name}, which `--device {name}` "
                          "does not reach (one table per implementation)")
            continue
        name = m.group(1)
        if not dm:
            skip(skipped, f"{name}: {rest}")
            continue
        desc, sel = dm.group(1), name
        short = name.split("-")[0]
        if name.lower() not in desc.lower() and short.lower() in desc.lower():
            sel = short
        found.append((sel, None, desc))
    return found


def skip(skipped, line):
    """A device left out: said on stderr now and in the output's header."""
    skipped.append(line)
    sys.stderr.write(f"bench.py: skipping {line}\n")


def _value(props, key):
    v = (props.get(key) or {}).get("value")
    return v if v is not None else "?"


def probe_device(a, sel, desc, explicit, skipped):
    """The device's description and measured rates from `clformer probe`, or
    None (a line in `skipped` says why).  A --device naming no device stops
    the script."""
    cmd = [clformer_exe(a), "probe", "--json", "--quick", "--no-validate", "--device", sel]
    who = f"{desc} (`--device {sel}`)" if desc else f"`--device {sel}`"
    sys.stderr.write(f"bench.py: probing --device {sel}\n")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.probe_timeout)
    except subprocess.TimeoutExpired:
        skip(skipped, f"{who}: its probe did not finish in {a.probe_timeout:g} s (--probe-timeout): a simulator "
                      "or a very slow device")
        return None
    err = r.stderr.strip().splitlines()
    if r.returncode != 0:
        msg = next((ln for ln in err if "no OpenCL device matches" in ln), err[-1] if err else "")
        if explicit:
            fail(f"--device {sel}: {msg or f'clformer probe exited {r.returncode}'}"
                 + (" (clformer devices lists what there is)" if "no OpenCL device matches" in msg else ""),
                 2 if "no OpenCL device matches" in msg else 1)
        skip(skipped, f"{who}: its probe failed (exit {r.returncode}): {msg}")
        return None
    dev = json.loads(r.stdout)["devices"][0]
    p = dev["properties"]
    types = _value(p, "CL_DEVICE_TYPE")
    types = types if isinstance(types, list) else [types]
    m = dev.get("measured") or {}
    rates = [g["gflops"] for g in m.get("sgemm", []) if g.get("gflops")]
    res = dict(sel=sel, platform=_value(dev.get("platform", {}), "CL_PLATFORM_NAME"),
               name=_value(p, "CL_DEVICE_NAME"), driver=_value(p, "CL_DRIVER_VERSION"),
               type="/".join(str(t).replace("CL_DEVICE_TYPE_", "") for t in types),
               tuning=(dev.get("tuning") or {}).get("applied") or "none",
               gflops=max(rates) if rates else None,
               copy=(m.get("bandwidth") or {}).get("gb_per_s"),
               clf_s=0.0, rows=[], drows=[], errors=[])
    res["label"] = f"{res['platform']} / {res['name']}"
    rate = f"{res['gflops']:.2f} GFLOP/s" if res["gflops"] is not None else "no rate (the probe measured none)"
    if (res["gflops"] or 0) < a.min_device_gflops:
        skip(skipped, f"{res['label']} (`--device {sel}`): SGEMM {rate}, under --min-device-gflops "
                      f"{a.min_device_gflops:g} (a forward pass would take minutes or more; "
                      "--min-device-gflops 0 benches it anyway)")
        return None
    return res


def bench_devices(a, skipped):
    """The probed devices that will be benched: --device's, else those found,
    one per implementation (of a platform's devices of one type, the first
    whose probe passes; the others are not probed)."""
    cands = [(s, None, None) for s in a.device] if a.device else find_devices(a, skipped)
    devs = []
    for sel, group, desc in cands:
        twin = next((o for o in devs if group is not None and o["group"] == group), None)
        if twin:
            skip(skipped, f"{desc} (`--device {sel}`): another {group[1]} device of {group[0]}, the implementation "
                          f"`--device {twin['sel']}` benches (one table per implementation; --device {sel} "
                          "benches this one)")
            continue
        dev = probe_device(a, sel, desc, bool(a.device), skipped)
        if dev is None:
            continue
        dev["group"] = group
        same = [o for o in devs if (o["label"], o["driver"]) == (dev["label"], dev["driver"])]
        if same:
            skip(skipped, f"{dev['label']} (`--device {sel}`): the device `--device {same[0]['sel']}` benches")
            continue
        devs.append(dev)
    if not devs:
        fail("no device to bench: " + ("; ".join(skipped) or "clformer devices lists none"), 1)
    return devs


# ---- ONNX Runtime ----

def ort_forward(a, onnx, inputs, tmp):
    import numpy as np
    if not os.path.exists(ORT_PY):
        fail(f"no ONNX Runtime python at {ORT_PY}: {FIX} (or set CLF_ORT_PYTHON)")
    cmd = [ORT_PY, os.path.join(HERE, "bench_ort.py"), onnx, f"{tmp}/ort_out.npy",
           "--repeat", str(a.repeat), "--threads", str(CORES)]
    for k in inputs:
        cmd += ["--in", f"{k}={tmp}/{k}.npy"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"ONNX Runtime failed: {r.stderr.strip()[-2000:]}", 1)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    return res, np.load(f"{tmp}/ort_out.npy")


# ---- bandwidth and weight bytes ----

def numpy_copy_gbs():
    import numpy as np
    n = 512 << 20
    src = np.ones(n // 4, np.float32)
    dst = np.empty_like(src)
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        ts.append(time.perf_counter() - t0)
    return 2 * n / min(ts) / 1e9


STORAGE = {"f32": 4.0, "f16": 2.0, "q8": 34 / 32, "q4": 18 / 32}


def weight_bytes(d, weights):
    """Bytes of model.safetensors' tensors with the matrices stored as `weights`."""
    with open(os.path.join(d, "model.safetensors"), "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    total = 0.0
    for k, t in header.items():
        if k == "__metadata__":
            continue
        count = 1
        for s in t["shape"]:
            count *= s
        nbytes = t["data_offsets"][1] - t["data_offsets"][0]
        total += count * STORAGE[weights] if len(t["shape"]) >= 2 else nbytes
    return total


# ---- the table ----

def diff(got, want):
    import numpy as np
    if got.shape != want.shape:
        return f"shape {got.shape} vs {want.shape}"
    d = float(np.abs(got.astype(np.float64) - want).max())
    rel = d / max(1.0, float(np.abs(want).max()))
    return f"{d:.1e} ({rel:.0e} rel)"


def fmt(ms):
    return "-" if ms is None else (f"{ms:.1f}" if ms < 100 else f"{ms:.0f}")


def run_forward(a, name, devs, notes):
    """The peers once, then clformer on each device, on the same work."""
    import numpy as np
    d = model_dir(a, name)
    model = load_model(d)
    inputs = make_inputs(name)
    out, label = WORK[name]["output"], WORK[name]["label"]
    onnx = onnx_file(a, name, inputs)
    with tempfile.TemporaryDirectory() as tmp:
        for k, v in inputs.items():
            np.save(f"{tmp}/{k}.npy", v)
        pt_ms, want = torch_forward(model, inputs, out, a.repeat)
        ort, ort_out = ort_forward(a, onnx, inputs, tmp)
        best = min(pt_ms, ort["median_ms"])
        peers = f"{fmt(pt_ms)} | {fmt(ort['median_ms'])}"
        for dev in devs:
            sys.stderr.write(f"bench.py: {name} on --device {dev['sel']}\n")
            try:
                clf_ms, got = clformer_forward(a, dev, d, inputs, out, tmp)
            except ClfFailed as e:
                dev["errors"].append(f"{label}: {e}")
                dev["rows"].append(f"| {label} | failed | {peers} | - | - | {diff(ort_out, want)} |")
                continue
            dev["rows"].append(f"| {label} | {fmt(clf_ms)} | {peers} | {clf_ms / best:.2f}x | "
                               f"{diff(got, want)} | {diff(ort_out, want)} |")
    notes["ort"] = (f"ONNX Runtime {ort['version']} ({ort['providers'][0]}), intra_op_num_threads "
                    f"{ort['intra_op_num_threads']}, {ort['graph_optimization']}, opset 14 export")
    if a.torch_defaults:
        ms = torch_default_ms(a, name)
        notes.setdefault("defaults", []).append(f"{label}: {fmt(ms)} ms")
    del model


def run_decode(a, devs):
    """For each device and weight type, PyTorch's generate() timed right
    before clformer's cell (its row's figure: each ratio from adjacent
    seconds, as the machine's pace drifts), then clformer; the floor from
    that device's own copy bandwidth."""
    d = model_dir(a, "gpt2-decode")
    model = load_model(d)
    ids = make_inputs("gpt2-decode")["input_ids"]
    pt_all = []
    for dev in devs:
        for w in (a.weights or [None]):
            sys.stderr.write(f"bench.py: gpt2-decode {w or 'f32'} on --device {dev['sel']}\n")
            pt_tok, want = torch_decode(model, ids, a.new_tokens, a.decode_repeat)
            pt_all.append(pt_tok)
            wb = weight_bytes(d, w or "f32")
            floor = wb / (dev["copy"] * 1e9) * 1e3 if dev["copy"] else None
            head = f"| {w or 'f32'} | "
            tail = f"{wb / 1e6:.0f} MB | {fmt(floor)} |"
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    tok, seq = clformer_decode(a, dev, d, ids, w, tmp)
            except ClfFailed as e:
                dev["errors"].append(f"GPT-2 decode, {w or 'f32'} weights: {e}")
                dev["drows"].append(f"{head}failed | {tail} - | {pt_tok:.1f} | - | - |")
                continue
            n = min(seq.shape[1], want.shape[1])
            same = int((seq[0, :n] == want[0, :n]).sum()) - ids.shape[1]
            gen = want.shape[1] - ids.shape[1]
            ratio = f"{tok / floor:.1f}x" if floor else "-"
            dev["drows"].append(f"{head}{tok:.1f} | {tail} {ratio} | {pt_tok:.1f} | {tok / pt_tok:.2f}x | "
                                f"{same}/{gen} |")
    return pt_all


def torch_default_ms(a, name):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    r = subprocess.run([sys.executable, __file__, "--torch-worker", name, "--repeat", str(a.repeat),
                        "--cache", a.cache], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        fail(f"torch defaults worker failed: {r.stderr.strip()[-1000:]}", 1)
    return float(r.stdout.strip().splitlines()[-1])


def machine():
    cpu = "?"
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            cpu = line.split(":", 1)[1].strip()
    load = open("/proc/loadavg").read().split()[0]
    return cpu, float(load)


def git_rev():
    r = subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"], capture_output=True, text=True)
    return r.stdout.strip() or "?"


def main():
    a = parse_args()
    if a.torch_worker:  # PyTorch as it comes, for --torch-defaults
        d = os.path.join(a.cache, WORK[a.torch_worker]["dir"])
        ms, _ = torch_forward(load_model(d), make_inputs(a.torch_worker), WORK[a.torch_worker]["output"],
                              a.repeat)
        print(f"{ms}")
        return
    if a.weights:
        a.weights = [w.strip() for w in a.weights.split(",")]
        bad = [w for w in a.weights if w not in STORAGE]
        if bad:
            fail(f"--weights: unknown {bad}; choose from {', '.join(STORAGE)}", 2)
    if not os.access(os.path.join(a.build, "tools", "clformer"), os.X_OK):
        fail(f"no {a.build}/tools/clformer: build it (meson setup build && meson compile -C build)", 2)
    if a.weights and "gpt2-decode" in a.only:
        h = subprocess.run([os.path.join(a.build, "tools", "clformer"), "generate", "--help"],
                           capture_output=True, text=True)
        if "--weights" not in h.stdout + h.stderr:
            fail(f"{a.build}/tools/clformer generate has no --weights option (this build loads f32 only): "
                 "build a clformer with it, or leave out bench.py's --weights", 2)
    configure_torch_env(False)
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        fail(f"{e}: run this with /opt/clf-ref/bin/python ({FIX})", 2)
    torch.set_num_threads(a.torch_threads)
    cpu, load0 = machine()
    torch_desc = check_torch(a)
    skipped = []
    devs = bench_devices(a, skipped)
    np_bw = numpy_copy_gbs() if "gpt2-decode" in a.only else None
    t_start = time.perf_counter()
    notes, forward, pt_toks = {}, False, None
    for name in a.only:
        sys.stderr.write(f"bench.py: {name}\n")
        if name == "gpt2-decode":
            pt_toks = run_decode(a, devs)
        else:
            forward = True
            run_forward(a, name, devs, notes)
    total = time.perf_counter() - t_start
    _, load1 = machine()
    print(f"## clformer beside PyTorch and ONNX Runtime, {datetime.date.today()}\n")
    print(f"- CPU: {cpu}, {CORES} cores; load average {load0:.2f} before, {load1:.2f} after"
          + (" (NOT IDLE: times are not comparable)" if max(load0, load1) > 0.5 else ""))
    print(f"- clformer {git_rev()}, `{a.build}/tools/clformer`, on {len(devs)} device"
          f"{'s' if len(devs) > 1 else ''}: " + "; ".join(f"{d['label']} (`--device {d['sel']}`)" for d in devs))
    for line in skipped:
        print(f"- skipped: {line}")
    print(f"- {torch_desc}")
    if "ort" in notes:
        print(f"- {notes['ort']}")
    if np_bw:
        print(f"- copy bandwidth (bytes read + written / time): NumPy 512 MiB {np_bw:.1f} GB/s (information); "
              "each device's decode floor uses its own probe's device copy")
    how = []
    if forward:
        how.append(f"forward: median of {a.repeat} after a warm-up")
    if pt_toks is not None:
        how.append(f"decode: {a.new_tokens} new tokens after a {make_inputs('gpt2-decode')['input_ids'].shape[1]}"
                   f"-token prompt, clformer's per-token time between its first and last new token (median of "
                   f"{a.decode_repeat} `clformer generate` processes), PyTorch's (T(N) - T(1)) / (N - 1) over "
                   "generate() calls, timed again right before each clformer row (PyTorch's figures this run: "
                   + ", ".join(f"{t:.1f}" for t in pt_toks) + " ms a token)")
    print(f"- {'; '.join(how)}; the whole run {total:.0f} s (after the devices' probes)\n")
    for dev in devs:
        print(f"### {dev['label']} (`--device {dev['sel']}`)\n")
        print(f"- OpenCL: {dev['platform']} / {dev['name']}, {dev['type']} (driver {dev['driver']}); "
              f"GEMM tuning profile: {dev['tuning']}; probe: SGEMM {dev['gflops']:.1f} GFLOP/s (the best of "
              f"its shapes), device copy {dev['copy'] or 0:.1f} GB/s")
        print(f"- clformer's share: {dev['clf_s']:.0f} s of the run's {total:.0f} s "
              f"({100 * dev['clf_s'] / max(total, 1e-9):.0f}%) went to clformer processes on this device\n")
        if dev["rows"]:
            print("| work | clformer ms | PyTorch ms | ONNX Runtime ms | clformer / faster peer | "
                  "clformer vs PyTorch, max abs diff | ONNX Runtime vs PyTorch |")
            print("| --- | --- | --- | --- | --- | --- | --- |")
            print("\n".join(dev["rows"]) + "\n")
        if dev["drows"]:
            print("GPT-2 124M greedy decode, ms per token (clformer's weights as given by --weights; floor: "
                  "weight bytes / this device's copy bandwidth):\n")
            print("| weights | clformer ms/token | weight bytes | floor ms | clformer / floor | "
                  "PyTorch generate() ms/token | clformer / PyTorch | tokens as PyTorch |")
            print("| --- | --- | --- | --- | --- | --- | --- | --- |")
            print("\n".join(dev["drows"]) + "\n")
        for e in dev["errors"]:
            print(f"- failed: {e}")
        if dev["errors"]:
            print()
    if notes.get("defaults"):
        print("Note, not the comparison: PyTorch as it comes (no OPENBLAS_NUM_THREADS, default threads): "
              + "; ".join(notes["defaults"]))
    print("(clformer / faster peer: a time ratio, above 1 means clformer is slower.)")
    failed = [d["sel"] for d in devs if d["errors"]]
    if failed:
        fail(f"clformer failed on --device {', '.join(failed)} (the tables say where)", 1)

if __name__ == "__main__":
    main()
