"""Model.engine(): clformer.Engine over the library's clf_engine, on the tiny
GPT-2 (f32, with the tokenizer of tests/fixtures/sampling, as
test_cli_equal.py builds it) and the GGUF fixture gguf_models/smollm_like
(Q4_1 layers, its own tokenizer).  The numbers expected are what
Model.generate and Model.stream give for the same prompt and settings
alone, computed before the engine is opened (while it is open the model
runs nothing else); the C suite test_engine checks the engine itself
against transformers.  Prefix reuse counts are the C suite's for blocks of
4 positions: an 18-token prompt leaves 4 full blocks, 16 positions."""
import gc
import os
import shutil
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import clformer
from conftest import FIXTURES as FX
from conftest import require_device

pytestmark = pytest.mark.device

GGUF = os.path.join(FX, "gguf_models", "smollm_like", "model.gguf")


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    """The tiny GPT-2 (32 positions, vocabulary 128, end token 33) with a tokenizer."""
    require_device()
    d = tmp_path_factory.mktemp("gpt2tok")
    for f in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(os.path.join(FX, "gpt2", f), d)
    tok = os.path.join(FX, "sampling", "tokenizer")
    for f in os.listdir(tok):
        shutil.copy(os.path.join(tok, f), d)
    with clformer.Model(d) as m:
        yield m


@pytest.fixture(scope="module")
def smollm():
    require_device()
    with clformer.Model(GGUF) as m:
        yield m


def alone(m, ids, **kw):
    """The new tokens Model.generate gives for one prompt: up to and with
    the end token (generate pads the row after it), and why it ended."""
    new = [int(t) for t in m.generate(np.asarray(ids), **kw)[0, len(ids):]]
    eos = 33 if m.model_type == "gpt2" else None
    if eos is not None and eos in new:
        return new[:new.index(eos) + 1], "eos"
    return new, "length"


def submit_together(e, jobs):
    """Submits every (prompt, settings) from its own thread, all released at
    once; returns the sequences in the jobs' order."""
    seqs = [None] * len(jobs)
    errors = []
    go = threading.Barrier(len(jobs))

    def one(i):
        try:
            go.wait()
            seqs[i] = e.submit(jobs[i][0], **jobs[i][1])
        except BaseException as x:  # reported by the test, not lost in the thread
            errors.append(x)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return seqs


def test_threads_submitting_at_once_get_the_tokens_of_generate_alone(gpt2):
    # greedy and sampled with seeds (seed 0 a seed like any other: the
    # package's S, the library's S + 1, as in generate), prompts of 1 to 13 ids
    jobs = []
    for i, n in enumerate((1, 3, 6, 9, 13, 4, 7, 2)):
        ids = [(i * 31 + j * 17 + 3) % 90 + 1 for j in range(n)]
        kw = {"max_new_tokens": 12}
        kw.update({"do_sample": False} if i % 2 == 0 else {"temperature": 0.9, "top_k": 20, "seed": i // 2})
        jobs.append((ids, kw))
    want = [alone(gpt2, ids, **kw) for ids, kw in jobs]
    with gpt2.engine(block_size=4) as e:
        seqs = submit_together(e, jobs)
        got = [s.result(timeout=120) for s in seqs]
    for i, (r, (tokens, why)) in enumerate(zip(got, want)):
        assert (r.tokens, r.finish_reason) == (tokens, why), (i, jobs[i])
        assert r.prompt_tokens == len(jobs[i][0])
        assert r.text == gpt2.decode(r.tokens)
    # seed 0 draws as generate's seed 0 does, not as a fresh seed
    assert jobs[1][1]["seed"] == 0 and got[1].tokens == want[1][0]
    assert got[3].tokens != got[1].tokens  # another seed, another draw


def test_gguf_sequences_give_the_text_of_stream_alone(smollm):
    prompts = ["hello there, how are you?", "the cat", "once upon a time there was", "a"]
    want = [("".join(smollm.stream(p, max_new_tokens=16, do_sample=False)),
             alone(smollm, smollm.tokenize(p), max_new_tokens=16, do_sample=False)[0]) for p in prompts]
    with smollm.engine() as e:
        seqs = submit_together(e, [(p, {"max_new_tokens": 16, "do_sample": False}) for p in prompts])
        pieces = [list(s) for s in seqs]
        got = [s.result() for s in seqs]
    for prompt, p, r, (text, tokens) in zip(prompts, pieces, got, want):
        assert r.tokens == tokens
        assert "".join(p) == r.text == text
        assert r.finish_reason == "length" and r.prompt_tokens == len(smollm.tokenize(prompt))


def test_tokens_and_text_stream_in_order_and_in_pieces(gpt2):
    # the fixture's promise (test_cli_equal.py): the greedy continuation of
    # "(a+b)*c=d" starts with U+0139 split across two tokens
    prompt = "(a+b)*c=d"
    text = "".join(gpt2.stream(prompt, max_new_tokens=20))
    with gpt2.engine() as e:
        s = e.submit(prompt, max_new_tokens=20)
        pieces, tokens = list(s), list(s.tokens())
        again = list(s.tokens())  # a second reader sees it all too
        r = s.result()
    assert tokens == again == r.tokens and len(tokens) >= 2
    assert list(tokens[:2]) == [98, 18]
    assert "".join(pieces) == r.text == text
    assert pieces[0].startswith("\u0139") and len(pieces) > 1, pieces


def test_a_stop_string_ends_the_sequence(gpt2):
    prompt = "(a+b)*c=d"
    text = "".join(gpt2.stream(prompt, max_new_tokens=20))
    stop = text[2:4]
    want = gpt2.stream(prompt, max_new_tokens=20, stop=stop)
    want_text = "".join(want)
    with gpt2.engine() as e:
        r = e.submit(prompt, max_new_tokens=20, stop=stop).result()
    assert r.text == want_text == text[:text.find(stop)]
    assert r.finish_reason == "stop_string" and r.tokens == want.tokens


def test_cancel_mid_stream_ends_it_cancelled(smollm):
    ids = smollm.tokenize("the cat")
    want, _ = alone(smollm, ids, max_new_tokens=200, do_sample=False)
    with smollm.engine() as e:
        s = e.submit(ids, max_new_tokens=200, do_sample=False)
        other = e.submit(ids, max_new_tokens=5, do_sample=False)
        it = s.tokens()
        first = [next(it) for _ in range(3)]
        # the stepping thread pushes each token through the tokenizer's text
        # stream: holding the tokenizer's lock holds it at its next token, so
        # the cancellation lands long before the 200th
        with smollm._tok.locked():
            s.cancel()
        rest = list(it)
        r = s.result()
        s.cancel()  # once ended: nothing
        assert other.result().tokens == want[:5] and other.finish_reason == "length"
    assert r.finish_reason == "cancelled" and s.done
    assert first + rest == r.tokens == want[:len(r.tokens)]
    assert 3 <= len(r.tokens) <= 5, r.tokens


def test_prefix_reuse_is_counted_within_an_isolation_key_only(gpt2):
    a = [(j * 7 + 3) % 90 + 1 for j in range(24)]
    kw = {"max_new_tokens": 4, "do_sample": False}
    want = {n: alone(gpt2, a[:n], **kw)[0] for n in (18, 24)}
    with gpt2.engine(block_size=4) as e:
        st = e.stats()
        assert (st.block_size, st.prefix_tokens_reused, st.steps, st.running, st.waiting) == (4, 0, 0, 0, 0)
        assert e.submit(a[:18], isolation="alice", **kw).result().tokens == want[18]
        st = e.stats()
        assert st.prefix_tokens_reused == 0 and st.blocks_cached >= 4 and st.blocks_used == 0
        # the same 18 tokens then 6 more, the same key: blocks 0-3 (16 positions) reused
        r = e.submit(a, isolation="alice", **kw).result()
        assert r.tokens == want[24] and (r.prompt_tokens, r.cached_tokens) == (24, 16)
        assert e.stats().prefix_tokens_reused == 16
        # another client's key: computed anew, the same tokens
        r = e.submit(a, isolation="bob", **kw).result()
        assert r.tokens == want[24] and r.cached_tokens == 0
        assert e.stats().prefix_tokens_reused == 16
        # keys as ints: 0 (None's) is a key like any other, apart from "alice"'s
        assert e.submit(a, **kw).result().tokens == want[24]
        assert e.stats().prefix_tokens_reused == 16
        # key 0 again: all 6 blocks of the 24 ids are cached, 5 reused (the
        # last prompt position is computed anew: its logits give the first token)
        assert e.submit(a, isolation=0, **kw).result().tokens == want[24]
        assert e.stats().prefix_tokens_reused == 16 + 20
        st = e.stats()
        assert st.running == st.waiting == st.blocks_used == 0 and st.steps > 0 and st.rows > 0
    assert st.blocks * st.block_bytes > 0


def test_closing_cancels_what_runs_and_frees_the_model(smollm):
    ids = smollm.tokenize("once upon a time")
    e = smollm.engine()
    seqs = [e.submit(ids, max_new_tokens=200, do_sample=False) for _ in range(3)]
    next(seqs[0].tokens())
    with smollm._tok.locked():  # the stepping thread waits at its next token
        closer = threading.Thread(target=e.close)
        closer.start()
        while not e.closed:
            closer.join(0.01)
    closer.join()
    assert [s.result().finish_reason for s in seqs] == ["cancelled"] * 3
    assert all(len(s.result().tokens) < 200 for s in seqs)
    with pytest.raises(clformer.InvalidArgumentError, match="Engine is closed"):
        e.submit(ids, max_new_tokens=2)
    with pytest.raises(clformer.InvalidArgumentError, match="Engine is closed"):
        e.stats()
    e.close()  # idempotent
    assert smollm.generate(ids, max_new_tokens=2).shape == (1, len(ids) + 2)  # the model's again


def test_while_open_the_model_runs_nothing_else(gpt2):
    ids = [5, 7, 9]
    with gpt2.engine() as e:
        for call in (lambda: gpt2.generate(ids, max_new_tokens=2), lambda: gpt2(input_ids=np.array([ids])),
                     lambda: gpt2.stream("abc", max_new_tokens=2), lambda: gpt2.engine()):
            with pytest.raises(clformer.InvalidArgumentError, match="engine"):
                call()
        assert list(gpt2.tokenize("abc", add_special_tokens=False))  # host-only: allowed
        assert len(e.submit(ids, max_new_tokens=2).result().tokens) == 2
    assert gpt2.generate(ids, max_new_tokens=2).shape == (1, 5)


def test_an_engine_dropped_unclosed_is_freed(gpt2):
    e = gpt2.engine()
    s = e.submit([5, 7, 9], max_new_tokens=3)
    del e
    gc.collect()
    assert len(s.result().tokens) == 3  # a sequence keeps its engine alive
    del s
    gc.collect()
    assert gpt2.generate([5, 7, 9], max_new_tokens=2).shape == (1, 5)


def test_closing_the_model_closes_its_engine(tmp_path):
    require_device()
    m = clformer.Model(os.path.join(FX, "gpt2"))
    e = m.engine()
    s = e.submit([5, 7, 9], max_new_tokens=3)
    m.close()
    assert e.closed and s.done and s.finish_reason in ("length", "eos", "cancelled")
    with pytest.raises(clformer.InvalidArgumentError):
        e.submit([5], max_new_tokens=1)


def test_without_a_tokenizer_tokens_stream_and_text_is_refused(model_of):
    m = model_of("gpt2")
    with m.engine() as e:
        s = e.submit(np.array([5, 7, 9], dtype=np.int32), max_new_tokens=3)
        assert len(list(s.tokens())) == 3 and s.result().text is None
        with pytest.raises(clformer.InvalidArgumentError, match="no tokenizer"):
            iter(s)
        with pytest.raises(clformer.InvalidArgumentError, match="need a tokenizer"):
            e.submit([5], stop="x")


def test_errors_are_the_library_s(model_of, gpt2):
    with pytest.raises(clformer.UnsupportedError, match="clf_engine_create: .*not a decoder-only"):
        model_of("marian").engine()
    with pytest.raises(clformer.InvalidArgumentError, match="kv_bytes 1 holds no block"):
        gpt2.engine(kv_bytes=1)
    for bad in ({"block_size": 0}, {"max_sequences": -1}, {"kv_bytes": 1.5}, {"max_step_rows": True}):
        with pytest.raises(clformer.InvalidArgumentError, match="positive int"):
            gpt2.engine(**bad)
    with gpt2.engine() as e:
        with pytest.raises(clformer.InvalidArgumentError, match=r"ids\[1\] is 500, outside the vocabulary"):
            e.submit([5, 500])
        with pytest.raises(clformer.InvalidArgumentError, match="leaves no position to generate"):
            e.submit(list(range(1, 33)))
        with pytest.raises(clformer.InvalidArgumentError, match="no prompt"):
            e.submit([])
        with pytest.raises(clformer.UnsupportedError, match="num_beams 2"):
            e.submit([5], num_beams=2)
        with pytest.raises(clformer.InvalidArgumentError, match="temperature"):
            e.submit([5], temperature=-1)  # the package's check of the library's range
        with pytest.raises(clformer.InvalidArgumentError, match="unknown generation setting 'beams'"):
            e.submit([5], beams=2)
        with pytest.raises(clformer.InvalidArgumentError, match="isolation"):
            e.submit([5], isolation=-1)
        with pytest.raises(clformer.DtypeError):
            e.submit([5.5])
        # the engine is still usable after refusals
        assert len(e.submit([5], max_new_tokens=2).result().tokens) == 2


def test_exit_with_an_engine_running(tmp_path):
    # the interpreter exits mid-sequence and with an idle engine: the atexit
    # hook closes the engine (its thread joined) before freeing the model
    require_device()
    for idle in (False, True):
        code = textwrap.dedent(f"""
            import clformer
            m = clformer.Model({GGUF!r})
            e = m.engine()
            s = e.submit("the cat", max_new_tokens=200, do_sample=False)
            it = s.tokens()
            next(it)
            if {idle}:
                s.result()
            print("ok", flush=True)
            """)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and p.stdout == "ok\n", p.stderr


def test_f16_pool(gpt2):
    """A pool of f16: half the bytes a block, greedy tokens as alone on the fixture."""
    a = [(j * 5 + 2) % 90 + 1 for j in range(9)]
    kw = {"max_new_tokens": 6, "do_sample": False}
    want = alone(gpt2, a, **kw)[0]
    with gpt2.engine(block_size=4) as e32:
        b32 = e32.stats().block_bytes
    with gpt2.engine(block_size=4, kv_dtype="f16") as e:
        assert e.stats().block_bytes * 2 == b32
        assert e.submit(a, **kw).result().tokens == want
    with pytest.raises(clformer.InvalidArgumentError, match="f32"):
        gpt2.engine(kv_dtype="q8_0")


# ------------------------------------------------------------ n copies and logprobs

def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


@pytest.mark.parametrize("seed", [0, 5])
def test_n_copies_sample_as_seeds_s_plus_i_alone(gpt2, smollm, seed):
    """submit(n=3, seed=S): copy i is what Model.generate (and, for the text,
    Model.stream) gives alone with seed S + i (the package's S is the
    library's S + 1, and the library's copy i takes its seed + i); the
    prompt is computed once, its blocks shared (copies on write)."""
    kw = {"max_new_tokens": 10, "temperature": 0.9, "top_k": 20}
    ids = [7, 21, 40, 3, 9]
    want = [alone(gpt2, ids, seed=seed + i, **kw) for i in range(3)]
    p = "once upon a time"
    want_text = ["".join(smollm.stream(p, seed=seed + i, **kw)) for i in range(3)]
    with gpt2.engine(block_size=4) as e:
        seqs = e.submit(ids, n=3, seed=seed, **kw)
        got = [s.result(timeout=120) for s in seqs]
        assert [s.id for s in seqs] == [seqs[0].id + i for i in range(3)]
        assert e.stats().blocks_copied >= 1
    assert [(r.tokens, r.finish_reason) for r in got] == want
    assert len({tuple(r.tokens) for r in got}) > 1  # different seeds, different draws
    assert all(r.prompt_tokens == len(ids) for r in got)
    with smollm.engine() as e:
        seqs = e.submit(p, n=3, seed=seed, **kw)
        streamed = [list(s) for s in seqs]  # each copy streams its own text
        assert ["".join(x) for x in streamed] == [s.result().text for s in seqs] == want_text
        one = e.submit(p, n=1, seed=seed, **kw)
        assert isinstance(one, list) and one[0].result().text == want_text[0]


def test_n_copies_cancel_and_stop_each_alone(gpt2):
    want = alone(gpt2, [5, 6], max_new_tokens=20, do_sample=False)[0]
    with gpt2.engine() as e:
        a, b = e.submit([5, 6], n=2, max_new_tokens=20, do_sample=False)
        b.cancel()  # a copy alone: the first runs on
        ra, rb = a.result(timeout=120), b.result(timeout=120)
        assert rb.finish_reason == "cancelled" and ra.tokens == want
        for bad in (0, -1, 129, 2.0, True):
            with pytest.raises(clformer.InvalidArgumentError, match="n must be"):
                e.submit([5], n=bad)
        assert e.stats().running == 0


def test_logprobs_are_the_log_softmax_of_the_model_s_logits(gpt2):
    """A greedy token's logprob is its top list's first, and both are the
    log-softmax of Model.run's logits for the prompt and the tokens so far
    (computed before the engine opens: it then holds the model)."""
    ids = [7, 21, 40, 3]
    tokens, _ = alone(gpt2, ids, max_new_tokens=6, do_sample=False)
    rows = []
    for t in range(len(tokens)):
        x = np.array([ids + tokens[:t]], dtype=np.int64)
        rows.append(log_softmax(gpt2.run({"input_ids": x}, ["logits"])["logits"][0, -1]))
    sampled = alone(gpt2, ids, max_new_tokens=6, temperature=1.5, seed=3)[0]
    with gpt2.engine() as e:
        s = e.submit(ids, max_new_tokens=6, do_sample=False, logprobs=True, top_logprobs=5)
        deltas = list(s.deltas())
        pieces = list(s)
        r = s.result(timeout=120)
        plain = e.submit(ids, max_new_tokens=6, do_sample=False).result()
        hot = e.submit(ids, max_new_tokens=6, temperature=1.5, seed=3, logprobs=True).result()
        with pytest.raises(clformer.InvalidArgumentError, match="top_logprobs needs logprobs"):
            e.submit(ids, top_logprobs=2)
        with pytest.raises(clformer.InvalidArgumentError, match="top_logprobs 21 is past its limit"):
            e.submit(ids, logprobs=True, top_logprobs=21)
    assert r.tokens == tokens and plain.logprobs is None and plain.tokens == tokens
    assert len(r.logprobs) == len(tokens) and [lp.token for lp in r.logprobs] == tokens
    assert [t for d in deltas for t in d.tokens] == tokens
    assert [lp for d in deltas for lp in d.logprobs] == r.logprobs
    assert "".join(d.text for d in deltas) == r.text
    assert [d.text for d in deltas if d.text] == pieces  # iter(seq)'s pieces, each with the token that released it
    for lp, row in zip(r.logprobs, rows):
        assert len(lp.top) == 5 and lp.top[0] == (lp.token, lp.logprob)
        assert [t for t, _ in lp.top] == sorted(range(len(row)), key=lambda i: (-row[i], i))[:5]
        np.testing.assert_allclose([v for _, v in lp.top], row[[t for t, _ in lp.top]], atol=2e-4)
    # sampled at temperature 1.5: the logprobs are still the model's, not the sampler's
    assert hot.tokens == sampled and all(lp.top == () for lp in hot.logprobs)
    for t, lp in enumerate(hot.logprobs):
        x = np.array([ids + sampled[:t]], dtype=np.int64)
        np.testing.assert_allclose(lp.logprob, log_softmax(gpt2.run({"input_ids": x}, ["logits"])["logits"][0, -1])[
            lp.token], atol=2e-4)


def _only(allowed_ids):
    """An allowed callback that leaves only allowed_ids (vectorised: the
    mask cleared, then their bits set) and records what it was shown."""
    seen = []

    def fn(tokens, mask):
        seen.append((tokens.copy(), mask.dtype, mask.shape))
        mask[:] = 0
        for t in allowed_ids:
            mask[t // 32] |= np.uint32(1 << (t % 32))
        return False
    return fn, seen


def test_allowed_mask_lets_only_its_tokens_out(gpt2):
    """A mask allowing only {5, 40, 77} (the tiny GPT-2's vocabulary is
    128: 4 words): every sampled token is one of them, and the callback
    sees, before each token, the new tokens so far (none before the
    first) and the mask as a uint32 view of ceil(128 / 32) = 4 words."""
    fn, seen = _only([5, 40, 77])
    with gpt2.engine() as e:
        r = e.submit([7, 21, 40], max_new_tokens=12, temperature=1.0, seed=3, allowed=fn).result(timeout=120)
        free = e.submit([7, 21, 40], max_new_tokens=12, temperature=1.0, seed=3).result(timeout=120)
    assert r.finish_reason == "length" and len(r.tokens) == 12
    assert set(r.tokens) <= {5, 40, 77}, r.tokens
    assert not set(free.tokens) <= {5, 40, 77}  # unmasked, the same seed draws elsewhere
    assert len(seen) == 12 and all(dt == np.uint32 and shape == (4,) for _, dt, shape in seen)
    assert [list(t) for t, _, _ in seen] == [r.tokens[:i] for i in range(12)]


def test_allowed_stops_raises_and_forbids_everything(gpt2):
    with gpt2.engine() as e:
        # a true result ends the sequence before the token it was asked about
        stop = e.submit([7, 8], max_new_tokens=12, do_sample=False,
                        allowed=lambda toks, mask: len(toks) >= 3).result(timeout=120)
        assert (len(stop.tokens), stop.finish_reason) == (3, "stop_string")

        def boom(toks, mask):
            raise ValueError("grammar broke")
        with pytest.raises(clformer.Error, match="allowed callback raised ValueError: grammar broke"):
            e.submit([7, 8], max_new_tokens=5, allowed=boom).result(timeout=120)

        def none(toks, mask):
            mask[:] = 0
        with pytest.raises(clformer.Error, match="forbade every token"):
            e.submit([7, 8], max_new_tokens=5, allowed=none).result(timeout=120)
        # n copies: one callable each
        fa, _ = _only([9])
        fb, _ = _only([10])
        a, b = e.submit([7, 8], n=2, max_new_tokens=4, seed=1, temperature=1.0, allowed=[fa, fb])
        assert a.result(timeout=120).tokens == [9] * 4 and b.result(timeout=120).tokens == [10] * 4
        with pytest.raises(clformer.InvalidArgumentError, match="need a list of 2 callables"):
            e.submit([7, 8], n=2, allowed=fa)
        with pytest.raises(clformer.InvalidArgumentError, match="allowed must be a callable"):
            e.submit([7, 8], allowed="json")
        assert e.stats().running == 0
