#!/usr/bin/env python3
"""bench_f32_kquant.py - what --weights q4k / q6k (the k-quants made at load
from safetensors) change on a genuine f32 checkpoint: all-MiniLM-L6-v2, a
sentence-embedding BERT (6 layers, 384 wide, FFN 1536) whose weights were
never quantized (issue 42's last accuracy line).

    /opt/clf-py/bin/python tools/bench_f32_kquant.py [--device S ...] [--build build]
        [--model DIR] [--ref-python /opt/clf-ref/bin/python] [--ggml LIB] [--markdown]

The model has no LM or MLM head, so next-token agreement has no meaning for
it; measured instead is what a user of its embeddings sees.  SENTENCES (the
sentences of tools/bench_gguf.py's text, tools/demo.sh's four, and ones
written here in groups on shared topics, so that a sentence's nearest
neighbour is often a close call) are embedded by clformer's Python binding
(Model.embed: mean pooling over the tokens, L2-normalised, as
sentence-transformers uses the model), in batches of 16, the same batches
for every weight type.  Per weight type against clformer's f32 embedding:
  - cos: each sentence's cosine with its f32 embedding (mean, min);
  - NN agree: retrieval agreement, the embedding analogue of next-token
    agreement: for each sentence, the nearest other sentence by cosine
    under these weights is the one nearest under f32 (the fraction; where
    some differ, the largest f32 margin, top-1 minus top-2 cosine, among
    the sentences that changed);
  - abs d cos: the mean (and max) absolute change of the pairwise cosine
    matrix (off the diagonal).

Also printed: linear b/w, the mean bits a weight over the encoder's 36
linear layers (from the types; f32 32), and weight MB, the device bytes of
all the model's weights as clformer counts them (clf_model_weight_bytes:
the 30522 x 384 f32 token table, 47 MB, included).

Rows "clformer --weights T" are the library's own types made at load.
MiniLM's 384-wide layers (Q, K, V, attention output, FFN input) are not
whole 256-element super-blocks, so --weights q4k stores them in Q5_0 and
q6k in Q8_0 (llama-quantize's fallback); only each FFN's output projection
(1536 in) is Q4_K / Q6_K.  clformer has no per-layer choice of type, so the
rows "FFN out only" / "384-wide only" isolate the two parts another way: a
copy of the checkpoint (in a temporary directory) whose chosen layers hold
llama.cpp's quantize -> dequantize round trip (ggml_quantize_chunk without
an importance matrix, i.e. quantize_row_*_ref, and dequantize_row_*, through
ctypes from llama-cpp-python's libggml-base.so, --ggml), every other weight
as it is, run by clformer at f32.  A check line compares the same round
trip applied as q4k / q6k would (both parts) with clformer's --weights q4k /
q6k: equal up to the order of float sums when clformer's blocks are
llama.cpp's and its k-quant products are exact.  q6k's 384-wide Q8_0 is
not quite llama.cpp's: clformer rounds Q8_0's quants against the
f16-rounded scale (host/core/quant.c), llama.cpp's quantize_row_q8_0_ref
against the float one (on MiniLM 0.7% of the quants differ by one step;
the f16-scale rule's squared error is 0.1% lower), so a third check line
emulates q6k with clformer's rule.

Sanity line: clformer's f32 embeddings against transformers' own
(BertModel in float32, the same mean pooling and normalisation, run by
--ref-python, torch + transformers; "none" skips it): max abs difference.
"""
import argparse
import ctypes
import glob
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BATCH = 16

sys.path.insert(0, HERE)
import bench_gguf  # noqa: E402  (its text)

DEMO = [  # tools/demo.sh
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
]

WRITTEN = [
    # food and cooking
    "A woman is slicing onions in the kitchen.",
    "Someone is chopping vegetables on a wooden board.",
    "The chef is frying eggs in a pan.",
    "Fresh bread is baked every morning at the corner shop.",
    "She made a pot of tomato soup for dinner.",
    "The restaurant serves pasta with a creamy mushroom sauce.",
    "He likes his coffee black and without sugar.",
    "A cup of tea with milk is how many people start the day.",
    # animals
    "A dog is running across the park after a ball.",
    "The puppy chased a tennis ball over the grass.",
    "A cat is sleeping on the warm windowsill.",
    "The kitten curled up in a patch of sunlight.",
    "Two horses are grazing in a green field.",
    "A flock of birds flew south for the winter.",
    "The farmer feeds the cows before sunrise.",
    "A monkey is playing a small guitar.",
    # weather
    "It is raining heavily in the city tonight.",
    "A storm brought strong winds and heavy rain to the coast.",
    "The sky was clear and the sun was shining all afternoon.",
    "Snow covered the mountain roads overnight.",
    "The forecast says it will be cold and windy tomorrow.",
    "Fog made it hard to see the other side of the river.",
    # sport
    "The football team won the championship final.",
    "Our side scored twice in the last ten minutes to win the cup.",
    "She runs five kilometres every morning before work.",
    "The tennis match lasted more than four hours.",
    "A cyclist is climbing a steep hill.",
    "The swimmer broke the national record in the relay.",
    # travel
    "The train to the airport leaves every fifteen minutes.",
    "Our flight was delayed because of bad weather.",
    "They spent their holiday walking along the coast of Portugal.",
    "The hotel room had a view of the old harbour.",
    "He lost his passport on the way to the station.",
    "Tourists crowded the square in front of the cathedral.",
    # money and work
    "The company reported higher profits this quarter.",
    "Quarterly earnings rose thanks to strong sales abroad.",
    "Interest rates were raised to slow inflation.",
    "The central bank kept its rates unchanged this month.",
    "She was promoted to head of the engineering department.",
    "Many workers are moving to jobs that can be done from home.",
    "The shop closed after twenty years in business.",
    # health
    "Regular exercise lowers the risk of heart disease.",
    "Walking every day is good for your heart.",
    "The doctor told him to drink more water and sleep longer.",
    "A new vaccine was approved for use in children.",
    "Hospitals are short of nurses this winter.",
    # science and nature
    "The telescope captured images of a distant galaxy.",
    "Astronomers found a planet orbiting a nearby star.",
    "Water boils at a lower temperature high in the mountains.",
    "Plants turn sunlight into chemical energy.",
    "The volcano erupted, sending ash high into the air.",
    "Bees play an important role in pollinating crops.",
    "The ocean absorbs much of the heat trapped by greenhouse gases.",
    # technology
    "The new phone has a larger screen and a better camera.",
    "My laptop battery lasts about six hours.",
    "The update fixed a bug that made the app crash on start.",
    "Please restart your computer to finish installing the software.",
    "The website was down for an hour after the server failed.",
    "Passwords should be long and never reused.",
    "The database query returned no rows.",
    "A neural network learns its weights from examples.",
    "Quantizing a model's weights to four bits makes it smaller and faster.",
    # home and daily life
    "The children are playing in the garden.",
    "Kids are running around in the backyard.",
    "He forgot his keys and was locked out of the house.",
    "The washing machine broke down again.",
    "We painted the living room a light shade of blue.",
    "She reads a novel before going to sleep.",
    "The library is open until eight in the evening.",
    "A man is playing the piano on the stage.",
    "A woman is playing the violin.",
    "The band played songs from their first album.",
    # people and events
    "The mayor opened the new bridge on Saturday.",
    "Thousands of people marched through the capital.",
    "The museum reopened after two years of repairs.",
    "The film won three awards at the festival.",
    "The old castle attracts visitors from all over the world.",
    "The students are preparing for their final exams.",
    "The teacher explained the lesson twice.",
    "My grandmother taught me how to knit.",
    # questions and short statements
    "How do I reset my password?",
    "What time does the store open on Sunday?",
    "Where is the nearest pharmacy?",
    "I cannot find my glasses anywhere.",
    "Thank you for your help yesterday.",
    "This is the best pizza I have ever eaten.",
    "The movie was long and boring.",
    "I really enjoyed the film we saw last night.",
    # transport and city
    "The bus was late again this morning.",
    "Traffic on the motorway was backed up for miles.",
    "A new cycle lane runs along the river.",
    "The city plans to build more homes near the station.",
    "Rents in the centre have doubled in ten years.",
    # programming
    "The function returns an empty list when the input is empty.",
    "This loop never ends because the counter is never increased.",
    "The compiler reported an error on line twelve.",
    "Tests should run on every change before it is merged.",
    "The program reads the file, counts the words and prints the total.",
    # feelings and opinions
    "I am so happy that you could come to the party.",
    "She felt nervous before the job interview.",
    "He was disappointed that the concert was cancelled.",
    "The service at that hotel was excellent.",
    "The food was cold and the waiter was rude.",
    "I think the book is better than the film.",
]


def split_sentences(text):
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


SENTENCES = split_sentences(bench_gguf.TEXT) + DEMO + WRITTEN

# ggml's types: id, elements a block, bytes a block
GGML = {"Q4_0": (2, 32, 18), "Q5_0": (6, 32, 22), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144),
        "Q6_K": (14, 256, 210)}
BPW = {k: 8.0 * b / n for k, (_, n, b) in GGML.items()}
BPW.update({"F32": 32.0, "F16": 16.0, "Q8_0/f16": BPW["Q8_0"]})

REF_SCRIPT = r"""
import sys, json
import numpy as np
import torch
from transformers import AutoTokenizer, BertModel
d, src, out, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
texts = json.load(open(src, encoding="utf-8"))
tok = AutoTokenizer.from_pretrained(d)
m = BertModel.from_pretrained(d, torch_dtype=torch.float32, add_pooling_layer=False).eval()
torch.set_num_threads(1)
rows = []
with torch.no_grad():
    for i in range(0, len(texts), batch):
        enc = tok(texts[i:i + batch], padding=True, truncation=True, max_length=256, return_tensors="pt")
        h = m(**enc).last_hidden_state.double()
        mask = enc["attention_mask"].unsqueeze(-1).double()
        e = (h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        rows.append(torch.nn.functional.normalize(e, p=2, dim=1).float().numpy())
np.save(out, np.concatenate(rows))
print(json.dumps({"torch": torch.__version__, "transformers": __import__("transformers").__version__}))
"""


def default_model():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(cache, "clformer", "models", "all-MiniLM-L6-v2")


# ---------------------------------------------------------------- llama.cpp's round trip
class Ggml:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.ggml_quantize_chunk.restype = ctypes.c_size_t
        self.lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                                 ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
        self.path = path

    def round_trip(self, w, qtype):
        """w [out, in] float32 -> its blocks decoded back to float32."""
        if qtype == "Q8_0/f16":
            return q8_0_f16_scale(w)
        tid, n, nb = GGML[qtype]
        rows, cols = w.shape
        assert cols % n == 0, (qtype, w.shape)
        x = np.ascontiguousarray(w, dtype=np.float32)
        q = np.zeros(rows * cols // n * nb, dtype=np.uint8)
        got = self.lib.ggml_quantize_chunk(tid, x.ctypes.data, q.ctypes.data, 0, rows, cols, None)
        assert got == q.size, (got, q.size)
        deq = getattr(self.lib, "dequantize_row_" + qtype.lower().replace("_k", "_K"))
        deq.restype = None
        deq.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        y = np.empty_like(x)
        deq(q.ctypes.data, y.ctypes.data, x.size)
        return y


def q8_0_f16_scale(w):
    """Q8_0 as clformer makes it (host/core/quant.c, quant_block): the quants
    rounded against the f16-rounded scale, where llama.cpp's
    quantize_row_q8_0_ref divides by the float scale and stores it as f16."""
    x = np.asarray(w, dtype=np.float32).reshape(-1, 32)
    amax = np.abs(x).max(axis=1, keepdims=True)
    d = (amax / np.float32(127)).astype(np.float16).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, np.float32(1)), np.float32(0)).astype(np.float32)
    v = x * inv
    q = np.clip(np.sign(v) * np.floor(np.abs(v) + np.float32(0.5)), -127, 127)  # roundf: half away from 0
    return (d * q).astype(np.float32).reshape(w.shape)


def find_ggml(given):
    if given:
        return given if os.path.exists(given) else None
    hits = sorted(glob.glob("/opt/clf-llamacpp/lib/python3*/site-packages/llama_cpp/lib/libggml-base.so"))
    return hits[0] if hits else None


def read_safetensors(path):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    return data, header, 8 + n


def linear_names(header):
    """The encoder's linear weights (the pooler's is not used by embed)."""
    return sorted(k for k, v in header.items()
                  if k.startswith("encoder.") and k.endswith(".weight") and len(v.get("shape", [])) == 2)


def variant_dir(model, tmp, name, plan, ggml, cached):
    """A copy of `model` (its files linked) whose layers in `plan` ({tensor: qtype}) hold the round trip."""
    data, header, base = cached
    out = os.path.join(tmp, name)
    os.makedirs(out)
    for f in os.listdir(model):
        if f != "model.safetensors":
            os.symlink(os.path.join(model, f), os.path.join(out, f))
    data = bytearray(data)
    for t, qtype in plan.items():
        h = header[t]
        assert h["dtype"] == "F32"
        a, b = h["data_offsets"]
        w = np.frombuffer(bytes(data[base + a:base + b]), dtype="<f4").reshape(h["shape"])
        data[base + a:base + b] = ggml.round_trip(w, qtype).astype("<f4").tobytes()
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(data)
    return out


# ---------------------------------------------------------------- measuring
def embed(clformer, path, device, weights):
    with clformer.Model(path, device=device, weights=weights) as m:
        e = np.concatenate([m.embed(SENTENCES[i:i + BATCH]) for i in range(0, len(SENTENCES), BATCH)])
        return e.astype(np.float64), m.weight_bytes


def cosines(e):
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    return e @ e.T


def nearest(c):
    c = c.copy()
    np.fill_diagonal(c, -np.inf)
    return c.argmax(axis=1)


def compare(e, ref):
    """cos with ref per sentence, nearest-neighbour agreement, |d cos| off the diagonal."""
    en = e / np.linalg.norm(e, axis=1, keepdims=True)
    rn = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    cos = (en * rn).sum(axis=1)
    ce, cr = cosines(e), cosines(ref)
    off = ~np.eye(len(e), dtype=bool)
    d = np.abs(ce - cr)[off]
    flips = nearest(ce) != nearest(cr)
    return {"flip_margin": margin_stats(ref)[flips].max() if flips.any() else None,
            "cos_mean": cos.mean(), "cos_min": cos.min(), "nn": (nearest(ce) == nearest(cr)).mean(),
            "nn_n": int((nearest(ce) == nearest(cr)).sum()), "dcos_mean": d.mean(), "dcos_max": d.max(),
            "maxabs": np.abs(en - rn).max()}


def margin_stats(ref):
    c = cosines(ref)
    np.fill_diagonal(c, -np.inf)
    s = np.sort(c, axis=1)
    return s[:, -1] - s[:, -2]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", action="append", help="an OpenCL device selector (repeatable; default: "
                   "$CLFORMER_DEVICE, else the library's default)")
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build directory (libclformer.so)")
    p.add_argument("--model", default=default_model(), help="all-MiniLM-L6-v2's directory (tools/demo.sh fetches it)")
    p.add_argument("--ref-python", default=os.environ.get("CLF_REF_PYTHON", "/opt/clf-ref/bin/python"),
                   help="a Python with torch + transformers for the sanity line ('none' skips it)")
    p.add_argument("--ggml", default="", help="llama.cpp's libggml-base.so for the isolation rows "
                   "(default: llama-cpp-python's in /opt/clf-llamacpp; none found: those rows are skipped)")
    p.add_argument("--markdown", action="store_true", help="a markdown table")
    a = p.parse_args()

    if not os.path.exists(os.path.join(a.model, "model.safetensors")):
        sys.exit(f"no model at {a.model} (tools/demo.sh fetches all-MiniLM-L6-v2)")
    assert len(set(SENTENCES)) == len(SENTENCES) >= 100, len(SENTENCES)
    os.environ.setdefault("CLFORMER_LIBRARY", os.path.join(os.path.abspath(a.build), "libclformer.so"))
    os.environ.setdefault("CLFORMER_CLI", os.path.join(os.path.abspath(a.build), "tools", "clformer"))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import clformer

    devices = a.device or [os.environ.get("CLFORMER_DEVICE") or None]
    cached = read_safetensors(os.path.join(a.model, "model.safetensors"))
    header = cached[1]
    lin = linear_names(header)
    ffn_out = [t for t in lin if t.endswith(".output.dense.weight") and ".attention." not in t]
    narrow = [t for t in lin if t not in ffn_out]
    assert all(header[t]["shape"][1] % 256 == 0 for t in ffn_out)
    assert all(header[t]["shape"][1] % 256 != 0 for t in narrow)
    n_ffn = sum(np.prod(header[t]["shape"]) for t in ffn_out)
    n_narrow = sum(np.prod(header[t]["shape"]) for t in narrow)

    ggml_path = find_ggml(a.ggml)
    ggml = Ggml(ggml_path) if ggml_path else None
    variants = [  # name, what, plan
        ("FFN out only: Q4_K", "FFN out Q4_K, rest f32", {t: "Q4_K" for t in ffn_out}),
        ("FFN out only: Q4_0", "FFN out Q4_0, rest f32", {t: "Q4_0" for t in ffn_out}),
        ("FFN out only: Q5_0", "FFN out Q5_0, rest f32", {t: "Q5_0" for t in ffn_out}),
        ("FFN out only: Q6_K", "FFN out Q6_K, rest f32", {t: "Q6_K" for t in ffn_out}),
        ("FFN out only: Q8_0", "FFN out Q8_0, rest f32", {t: "Q8_0" for t in ffn_out}),
        ("384-wide only: Q5_0", "384-wide layers Q5_0 (q4k's fallback), FFN out f32", {t: "Q5_0" for t in narrow}),
        ("384-wide only: Q8_0", "384-wide layers Q8_0 (q6k's fallback), FFN out f32", {t: "Q8_0" for t in narrow}),
        ("q4k emulated", "", {**{t: "Q5_0" for t in narrow}, **{t: "Q4_K" for t in ffn_out}}),
        ("q6k emulated", "", {**{t: "Q8_0" for t in narrow}, **{t: "Q6_K" for t in ffn_out}}),
        ("q6k emulated, Q8_0 with clformer's f16-scale rounding", "",
         {**{t: "Q8_0/f16" for t in narrow}, **{t: "Q6_K" for t in ffn_out}}),
    ] if ggml else []
    own = [("f16", "every linear layer f16", {t: "F16" for t in lin}),
           ("q8", "every linear layer clformer's q8 (Q8_0 blocks)", {t: "Q8_0" for t in lin}),
           ("q4", "every linear layer clformer's q4 (Q4_0 blocks)", {t: "Q4_0" for t in lin}),
           ("q6k", "FFN out Q6_K; 384-wide layers Q8_0", {**{t: "Q8_0" for t in narrow}, **{t: "Q6_K" for t in ffn_out}}),
           ("q4k", "FFN out Q4_K; 384-wide layers Q5_0", {**{t: "Q5_0" for t in narrow}, **{t: "Q4_K" for t in ffn_out}})]

    def bits(plan):  # mean bits a weight over the encoder's linear layers
        n = {t: int(np.prod(header[t]["shape"])) for t in lin}
        return sum(n[t] * BPW[plan.get(t, "F32")] for t in lin) / sum(n.values())

    results = {}  # device -> list of rows
    notes = []
    with tempfile.TemporaryDirectory(prefix="bench_f32_kquant.") as tmp:
        ref = None
        ref_info = None
        if a.ref_python != "none" and os.path.exists(a.ref_python):
            src = os.path.join(tmp, "sentences.json")
            json.dump(SENTENCES, open(src, "w", encoding="utf-8"))
            out = os.path.join(tmp, "ref.npy")
            r = subprocess.run([a.ref_python, "-c", REF_SCRIPT, a.model, src, out, str(BATCH)],
                               capture_output=True, text=True,
                               env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                                    "TQDM_DISABLE": "1"})
            if r.returncode == 0:
                ref = np.load(out).astype(np.float64)
                ref_info = json.loads(r.stdout.strip().splitlines()[-1])
            else:
                notes.append("reference failed: " + r.stderr.strip().splitlines()[-1])
        dirs = {}
        for name, _, plan in variants:
            dirs[name] = variant_dir(a.model, tmp, re.sub(r"[^A-Za-z0-9]+", "_", name), plan, ggml, cached)
        for dev in devices:
            t0 = time.time()
            base, base_bytes = embed(clformer, a.model, dev, "f32")
            rows = []
            if ref is not None:
                rows.append(("transformers f32 (sanity)", f"torch {ref_info['torch']}, transformers "
                             f"{ref_info['transformers']} vs clformer f32", None, None, compare(ref, base)))
            rows.append(("f32", "clformer --weights f32", bits({}), base_bytes, compare(base, base)))
            embs = {}
            for wt, what, plan in own:
                e, nbytes = embed(clformer, a.model, dev, wt)
                embs[wt] = e
                rows.append((wt, what, bits(plan), nbytes, compare(e, base)))
            for name, what, plan in variants:
                e, _ = embed(clformer, dirs[name], dev, "f32")
                if " emulated" in name:
                    c = compare(e, embs[name.split()[0]])
                    notes.append(f"{dev or 'default'}: {name} (round trips run at f32) vs clformer "
                                 f"--weights {name.split()[0]}: min cos {c['cos_min']:.9f}, max abs diff "
                                 f"{c['maxabs']:.2e}, NN agree {c['nn_n']}/{len(SENTENCES)}")
                else:
                    rows.append((name, what, bits(plan), None, compare(e, base)))
            results[dev] = rows
            notes.append(f"{dev or 'default'}: {len(own) + 1 + len(variants)} model loads in "
                         f"{time.time() - t0:.0f} s")
        m = margin_stats(base)

    print(f"# k-quants on a genuine f32 checkpoint: {os.path.basename(a.model.rstrip('/'))} "
          f"({time.strftime('%Y-%m-%d')})\n")
    print(f"{len(SENTENCES)} sentences, batches of {BATCH}; linear weights: FFN out {len(ffn_out)} x "
          f"{header[ffn_out[0]]['shape']} = {n_ffn} weights, 384-wide {len(narrow)} layers = {n_narrow} weights; "
          f"f32 nearest-neighbour margin (top-1 minus top-2 cosine): median {np.median(m):.3f}, "
          f"{int((m < 0.01).sum())} sentences under 0.01")
    if ggml:
        print(f"round trips: {ggml.path}")
    else:
        print("no libggml-base.so: the isolation rows are skipped")
    print()
    hdr = ["device", "weights", "what is quantized", "linear b/w", "weight MB", "cos vs f32 mean", "min",
           "NN agree", "mean abs d cos", "max abs d cos"]
    lines = []
    for dev, rows in results.items():
        for name, what, bpw, nbytes, c in rows:
            lines.append([dev or "default", name, what, f"{bpw:.2f}" if bpw else "-",
                          f"{nbytes / 1e6:.1f}" if nbytes else "-",
                          f"{c['cos_mean']:.6f}", f"{c['cos_min']:.6f}",
                          f"{c['nn']:.3f} ({c['nn_n']}/{len(SENTENCES)}"
                          + (f"; f32 margins <= {c['flip_margin']:.3f})" if c["flip_margin"] is not None else ")"),
                          f"{c['dcos_mean']:.5f}",
                          f"{c['dcos_max']:.5f}" + (f" (max abs diff {c['maxabs']:.1e})"
                                                    if name.startswith("transformers") else "")])
    if a.markdown:
        print("| " + " | ".join(hdr) + " |")
        print("|" + "---|" * len(hdr))
        for l in lines:
            print("| " + " | ".join(l) + " |")
    else:
        w = [max(len(x[i]) for x in [hdr] + lines) for i in range(len(hdr))]
        for l in [hdr] + lines:
            print("  ".join(x.ljust(w[i]) for i, x in enumerate(l)))
    print()
    for n in notes:
        print(("- " if a.markdown else "") + n)


if __name__ == "__main__":
    main()
