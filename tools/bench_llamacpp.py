#!/usr/bin/env python3
"""bench_llamacpp.py - the llama.cpp side of tools/bench_gguf.py, run in the
llama-cpp-python venv (/opt/clf-llamacpp, tools/bench-env.sh).  Prints one
JSON line; writes the token ids and logits it was asked for as .npy.

    python bench_llamacpp.py MODEL.gguf --text FILE --threads N --out DIR
        [--repeat 3] [--prompt-tokens 200] [--new-tokens 32] [--greedy-prompt TEXT]

  tokenize  the text with the model's own tokenizer (llama.cpp's, add-BOS as
            the file says), cut to --prompt-tokens: DIR/ids.npy
  logits    one evaluation of those ids with logits at every position:
            DIR/llamacpp_logits.npy [T, V] (float32)
  prefill   the same evaluation timed --repeat times (cache cleared each
            time): the median, tokens/s
  decode    greedy steps of one token after a 16-token prompt, each step's
            llm.eval timed: the median ms/token over --new-tokens steps
  greedy    the greedy continuation of --greedy-prompt (--new-tokens tokens,
            stopping at end of generation): its ids and text
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
from llama_cpp import Llama, llama_cpp


def evaluate(llm, ids):
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(ids)
    return time.perf_counter() - t0


def greedy(llm, ids, n):
    """Greedy tokens after ids, and the seconds of each one-token step."""
    llm.reset()
    llm.eval(ids)
    out, steps = [], []
    for _ in range(n):
        tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        out.append(tok)
        if llm.token_eos() == tok or llama_cpp.llama_vocab_is_eog(llm._model.vocab, tok):
            break
        t0 = time.perf_counter()
        llm.eval([tok])
        steps.append(time.perf_counter() - t0)
    return out, steps


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--text", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--prompt-tokens", type=int, default=200)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--greedy-prompt", default="The capital of France is")
    a = p.parse_args()
    llm = Llama(model_path=a.model, n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=a.threads,
                n_threads_batch=a.threads, logits_all=True, verbose=False)
    with open(a.text, encoding="utf-8") as f:
        ids = llm.tokenize(f.read().encode(), add_bos=llm._model.add_bos_token(), special=False)[:a.prompt_tokens]
    np.save(os.path.join(a.out, "ids.npy"), np.array([ids], dtype=np.int64))
    evaluate(llm, ids)  # warm
    np.save(os.path.join(a.out, "llamacpp_logits.npy"), np.array(llm.scores[:len(ids)], dtype=np.float32))
    prefill = statistics.median(evaluate(llm, ids) for _ in range(a.repeat))
    _, steps = greedy(llm, ids[:16], a.new_tokens)
    g_ids = llm.tokenize(a.greedy_prompt.encode(), add_bos=llm._model.add_bos_token(), special=False)
    g_out, _ = greedy(llm, g_ids, a.new_tokens)
    np.save(os.path.join(a.out, "greedy_prompt.npy"), np.array([g_ids], dtype=np.int64))
    print(json.dumps({
        "llama_cpp_python": __import__("llama_cpp").__version__,
        "threads": a.threads,
        "prompt_tokens": len(ids),
        "prefill_s": prefill,
        "prefill_tok_s": len(ids) / prefill,
        "decode_ms": 1e3 * statistics.median(steps),
        "decode_steps": len(steps),
        "greedy_ids": g_out,
        "greedy_text": llm.detokenize(g_out).decode("utf-8", "replace"),
    }))


if __name__ == "__main__":
    sys.exit(main())
