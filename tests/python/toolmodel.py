"""A random GPT-2 (64 wide, 2 layers, 4096 positions) with a byte-level BPE
tokenizer (tests/fixtures/tokenizers_json/qwen2's, every byte a token) and
the special tokens of the tool-calling template families, serving one of
the fixture chat templates: the model's words are noise, so tests of
constrained decoding check the form of the output, never its sense."""
import json
import os
import shutil

import numpy as np

FX = os.environ.get("CLF_FIXTURES") or os.path.join(os.path.dirname(__file__), "..", "fixtures")
TEMPLATES = os.path.join(FX, "chat_templates", "templates")
# (content, special): the families' markers; <tool_call> is an ordinary added
# token in Qwen 2.5, the others are control tokens
ADDED = [("<tool_call>", False), ("</tool_call>", False), ("[TOOL_CALLS]", True), ("[AVAILABLE_TOOLS]", True),
         ("[/AVAILABLE_TOOLS]", True), ("[TOOL_RESULTS]", True), ("[/TOOL_RESULTS]", True), ("[INST]", True),
         ("[/INST]", True), ("<s>", True), ("</s>", True), ("<|begin_of_text|>", True),
         ("<|start_header_id|>", True), ("<|end_header_id|>", True), ("<|eot_id|>", True), ("<|eom_id|>", True),
         ("<|python_tag|>", True)]
END_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>", "<|endoftext|>")


def make(root, template, width=64, layers=2, positions=4096, seed=41):
    """The model directory under root for the fixture template `template`
    (a file name in chat_templates/templates); returns its path."""
    d = os.path.join(root, template.replace(".jinja", ""))
    os.makedirs(d)
    src = os.path.join(FX, "tokenizers_json", "qwen2")
    tok = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
    ids = {a["content"]: a["id"] for a in tok["added_tokens"]}
    nxt = max(ids.values()) + 1
    for content, special in ADDED:
        tok["added_tokens"].append({"id": nxt, "content": content, "single_word": False, "lstrip": False,
                                    "rstrip": False, "normalized": False, "special": special})
        ids[content] = nxt
        nxt += 1
    json.dump(tok, open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8"))
    family_bos = {"mistral": "<s>", "llama3": "<|begin_of_text|>"}
    bos = next((v for k, v in family_bos.items() if k in template), "<|endoftext|>")
    eos = "</s>" if "mistral" in template else "<|eot_id|>" if "llama" in template else "<|im_end|>"
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": bos, "eos_token": eos,
           "pad_token": "<|endoftext|>", "add_bos_token": False, "add_eos_token": False,
           "clean_up_tokenization_spaces": False,
           "chat_template": open(os.path.join(TEMPLATES, template), encoding="utf-8").read()}
    json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8"))
    V = nxt
    mcfg = json.load(open(os.path.join(FX, "gpt2", "config.json")))
    end = [ids[t] for t in END_TOKENS]
    mcfg.update(n_embd=width, n_layer=layers, n_positions=positions, n_head=4, vocab_size=V,
                bos_token_id=ids[bos], eos_token_id=end, pad_token_id=ids["<|endoftext|>"])
    json.dump(mcfg, open(os.path.join(d, "config.json"), "w"))
    json.dump({"eos_token_id": end, "bos_token_id": ids[bos], "pad_token_id": ids["<|endoftext|>"]},
              open(os.path.join(d, "generation_config.json"), "w"))
    write_gpt2_weights(d, np.random.default_rng(seed), V, width, layers, positions)
    return d


def write_gpt2_weights(d, rng, V, D, layers, positions, zero_rows=()):
    """d/model.safetensors: a random GPT-2 (V tokens, D wide) drawn from rng,
    the embedding rows of zero_rows set to 0."""
    t = {"transformer.wte.weight": rng.normal(0, 0.5, (V, D)),
         "transformer.wpe.weight": rng.normal(0, 0.02, (positions, D)),
         "transformer.ln_f.weight": np.ones(D), "transformer.ln_f.bias": np.zeros(D)}
    for r in zero_rows:
        t["transformer.wte.weight"][r] = 0
    for i in range(layers):
        p = f"transformer.h.{i}."
        for name, shape in (("attn.c_attn", (D, 3 * D)), ("attn.c_proj", (D, D)), ("mlp.c_fc", (D, 4 * D)),
                            ("mlp.c_proj", (4 * D, D))):
            t[p + name + ".weight"] = rng.normal(0, 0.02, shape)
            t[p + name + ".bias"] = np.zeros(shape[1])
        for ln in ("ln_1", "ln_2"):
            t[p + ln + ".weight"], t[p + ln + ".bias"] = np.ones(D), np.zeros(D)
    header, off, blobs = {}, 0, []
    for k in sorted(t):
        b = np.ascontiguousarray(t[k], dtype="<f4").tobytes()
        header[k] = {"dtype": "F32", "shape": list(t[k].shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for b in blobs:
            f.write(b)
