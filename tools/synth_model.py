#!/usr/bin/env python3
"""Writes a checkpoint in the Hugging Face layout (config.json +
model.safetensors) with random weights at the shape of a real model, for
timing where the real file cannot go: the lent GPU machine reaches nothing
outside itself, and the working tree that travels there is capped at 64 MiB
(tools/gpu-check.sh).  Decoding's speed depends on the shapes and the weight
bytes, not on the values; the tokens a random model makes mean nothing.

  gpt2     GPT-2 124M (GPT2LMHeadModel: 12 layers of 768, vocab 50257, tied head)
  smollm2  SmolLM2-135M (LlamaForCausalLM: 30 layers of 576, 9 heads, 3 KV heads,
           MLP 1536, vocab 49152, tied head)

Weights are normal with sd 0.02 (the models' initializer_range), the norms'
gains 1 and the biases 0, in f32; --layers N makes a shallower model (tests).
NumPy only.

usage: tools/synth_model.py {gpt2,smollm2} OUT_DIR [--layers N] [--seed S]
"""
import argparse
import json
import os
import struct
import sys

import numpy as np


def gpt2(layers):
    d, v, ctx = 768, 50257, 1024
    config = {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
        "bos_token_id": 50256, "eos_token_id": 50256, "n_embd": d, "n_head": 12, "n_inner": None,
        "n_layer": layers, "n_positions": ctx, "n_ctx": ctx, "layer_norm_epsilon": 1e-5, "vocab_size": v,
        "initializer_range": 0.02, "scale_attn_weights": True, "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }
    shapes = {"transformer.wte.weight": (v, d), "transformer.wpe.weight": (ctx, d)}
    for i in range(layers):
        p = f"transformer.h.{i}."
        shapes.update({
            p + "ln_1.weight": (d,), p + "ln_1.bias": (d,),
            p + "attn.c_attn.weight": (d, 3 * d), p + "attn.c_attn.bias": (3 * d,),
            p + "attn.c_proj.weight": (d, d), p + "attn.c_proj.bias": (d,),
            p + "ln_2.weight": (d,), p + "ln_2.bias": (d,),
            p + "mlp.c_fc.weight": (d, 4 * d), p + "mlp.c_fc.bias": (4 * d,),
            p + "mlp.c_proj.weight": (4 * d, d), p + "mlp.c_proj.bias": (d,),
        })
    shapes.update({"transformer.ln_f.weight": (d,), "transformer.ln_f.bias": (d,)})
    return config, shapes


def smollm2(layers):
    d, ff, v, heads, kv = 576, 1536, 49152, 9, 3
    dh = d // heads
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "bos_token_id": 1, "eos_token_id": 2, "hidden_size": d, "intermediate_size": ff,
        "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": dh,
        "num_hidden_layers": layers, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
        "rope_theta": 100000.0, "rope_scaling": None, "attention_bias": False, "mlp_bias": False,
        "tie_word_embeddings": True, "vocab_size": v, "initializer_range": 0.02, "torch_dtype": "float32",
    }
    shapes = {"model.embed_tokens.weight": (v, d)}
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": (d,), p + "post_attention_layernorm.weight": (d,),
            p + "self_attn.q_proj.weight": (heads * dh, d), p + "self_attn.k_proj.weight": (kv * dh, d),
            p + "self_attn.v_proj.weight": (kv * dh, d), p + "self_attn.o_proj.weight": (d, heads * dh),
            p + "mlp.gate_proj.weight": (ff, d), p + "mlp.up_proj.weight": (ff, d),
            p + "mlp.down_proj.weight": (d, ff),
        })
    shapes["model.norm.weight"] = (d,)
    return config, shapes


def write_safetensors(path, shapes, rng):
    """safetensors: an 8-byte little-endian header length, the JSON header
    (each tensor's dtype, shape and byte range), then the bytes."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in shapes.items():
        n = int(np.prod(shape)) * 4
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, shape in shapes.items():
            if len(shape) == 1:  # norms' gains 1, biases 0
                a = np.ones(shape, np.float32) if name.endswith("weight") else np.zeros(shape, np.float32)
            else:
                a = (rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)).astype(np.float32)
            f.write(a.tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", choices=["gpt2", "smollm2"])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, help="layers (default: the model's, 12 or 30)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    make = gpt2 if a.model == "gpt2" else smollm2
    layers = a.layers if a.layers else (12 if a.model == "gpt2" else 30)
    if layers < 1:
        sys.exit("synth_model.py: --layers must be at least 1")
    config, shapes = make(layers)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    write_safetensors(os.path.join(a.out, "model.safetensors"), shapes, np.random.default_rng(a.seed))
    n = sum(int(np.prod(s)) for s in shapes.values())
    print(f"synth_model: {a.model}, {layers} layers, {n / 1e6:.1f}M parameters in {a.out}")


if __name__ == "__main__":
    main()
