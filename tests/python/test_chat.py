"""Model.apply_chat_template, Model.chat and Model.chat_stream on the GGUF
fixture tests/fixtures/gguf_models/smollm_like (SmolLM2-Instruct's chat
template, ChatML specials, Q4_1 layers).  The renderer is checked against
transformers in the C suite test_chat_template; here a reply must be what
Model.generate gives greedily on the rendered conversation, tokenized
without special tokens (apply_chat_template(tokenize=True)'s ids), whether
the KV cache of the previous call was reused or not, and the command line's
`clformer chat` must print the same replies."""
import os
import subprocess

import numpy as np
import pytest

import clformer
from conftest import FIXTURES as FX

pytestmark = pytest.mark.device

GGUF = os.path.join(FX, "gguf_models", "smollm_like", "model.gguf")


@pytest.fixture(scope="module")
def models():
    """Two models of the same file: `chat` keeps its conversation's cache,
    `ref` generates the references (its generate() would take chat's)."""
    chat, ref = clformer.Model(GGUF), clformer.Model(GGUF)
    yield chat, ref
    chat.close()
    ref.close()


def greedy_reply(ref, messages, n):
    """The reference: generate() on the rendered conversation."""
    text = ref.apply_chat_template(messages, add_generation_prompt=True)
    ids = ref.tokenize(text, add_special_tokens=False)
    seq = ref.generate(ids, max_new_tokens=n, do_sample=False)[0, len(ids):]
    return ref.decode(seq), len(ids), len(seq)


def test_template_renders_the_smollm2_prompt(models):
    chat, _ = models
    msgs = [{"role": "user", "content": "hello there"}]
    assert chat.apply_chat_template(msgs, add_generation_prompt=True) == \
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n" \
        "<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\n"
    assert chat.apply_chat_template(msgs).endswith("hello there<|im_end|>\n")


def test_chat_equals_generate_and_reuses_the_cache(models):
    chat, ref = models
    msgs = [{"role": "system", "content": "you are terse."}, {"role": "user", "content": "hello there"}]
    for turn, user in enumerate(("hello there", "what is the cat doing?", "and then?")):
        if turn:
            msgs.append({"role": "user", "content": user})
        want, prompt_len, n = greedy_reply(ref, msgs, 10)
        got = chat.chat(msgs, max_new_tokens=10, do_sample=False)
        assert isinstance(got, clformer.ChatReply)
        assert got == want, turn
        assert (got.prompt_tokens, got.completion_tokens) == (prompt_len, n)
        assert got.finish_reason in ("stop", "length")
        if n < 10:
            assert got.finish_reason == "stop"
        if turn == 0:
            assert got.cached_tokens == 0
        else:
            assert 0 < got.cached_tokens < got.prompt_tokens
        msgs.append({"role": "assistant", "content": str(got)})


def test_chat_stream_pieces_join_to_the_reply(models):
    chat, ref = models
    msgs = [{"role": "user", "content": "tell me about the mat"}]
    want, _, _ = greedy_reply(ref, msgs, 16)
    s = chat.chat_stream(msgs, max_new_tokens=16, do_sample=False)
    pieces = list(s)
    assert "".join(pieces) == want
    assert pieces and all(pieces)
    assert s.reply == want and s.reply.completion_tokens > 0


def test_chat_stop_string(models):
    chat, ref = models
    msgs = [{"role": "user", "content": "hello there"}]
    want, _, _ = greedy_reply(ref, msgs, 16)
    stop = want[2:4]
    got = chat.chat(msgs, stop=stop, max_new_tokens=16, do_sample=False)
    assert got == want[:want.index(stop)]
    assert got.finish_reason == "stop"


def test_chat_refusals(models, fx):
    chat, _ = models
    with pytest.raises(clformer.InvalidArgumentError, match="list"):
        chat.chat("hello")
    with pytest.raises(clformer.InvalidArgumentError, match="role"):
        chat.chat([{"content": "hello"}])
    with pytest.raises(clformer.InvalidArgumentError, match="stop"):
        chat.chat([{"role": "user", "content": "x"}], stop=[""])
    with pytest.raises(clformer.InvalidArgumentError, match="num_beams"):
        chat.chat([{"role": "user", "content": "x"}], num_beams=2)
    with pytest.raises(clformer.InvalidArgumentError, match="positions"):
        chat.chat([{"role": "user", "content": "x"}], max_new_tokens=10 ** 6)
    with clformer.Model(os.path.join(fx, "gpt2")) as plain:  # no chat template
        with pytest.raises(clformer.NotFoundError):
            plain.chat([{"role": "user", "content": "x"}])
        with pytest.raises(clformer.NotFoundError):
            plain.apply_chat_template([{"role": "user", "content": "x"}])


def test_nul_refused_as_the_server_refuses_it(models):
    """A NUL in a message cut the text ("a\\x00b" rendered as "a"); the
    server answers 400 "messages[1].content contains a NUL character", and so
    does the library here."""
    chat, _ = models
    msgs = [{"role": "user", "content": "x"}, {"role": "user", "content": "a\x00b"}]
    with pytest.raises(clformer.InvalidArgumentError, match=r"messages\[1\]\.content contains a NUL character"):
        chat.apply_chat_template(msgs)
    with pytest.raises(clformer.InvalidArgumentError, match=r"messages\[1\]\.content contains a NUL character"):
        chat.chat(msgs, max_new_tokens=1)


def test_template_budget():
    """A budget too small for the template: LimitError naming it; the
    defaults render."""
    msgs = [{"role": "user", "content": "hello"}]
    with pytest.raises(clformer.InvalidArgumentError, match="TemplateBudget.steps"):
        clformer.TemplateBudget(steps=-1)
    with pytest.raises(clformer.InvalidArgumentError, match="template_budget"):
        clformer.Model(GGUF, template_budget=(1, 2, 3))
    with clformer.Model(GGUF, template_budget=clformer.TemplateBudget(steps=5)) as m:
        with pytest.raises(clformer.LimitError, match=r"steps budget \(5 "):
            m.apply_chat_template(msgs)
        with pytest.raises(clformer.LimitError, match=r"steps budget \(5 "):
            m.chat(msgs, max_new_tokens=1)
    with clformer.Model(GGUF, template_budget=clformer.TemplateBudget(bytes=1 << 30)) as m:
        assert m.apply_chat_template(msgs).endswith("hello<|im_end|>\n")


def test_cli_chat_prints_the_same_replies(models):
    _, ref = models
    cli = clformer._device.cli_path()
    lines = ["hello there", "what is the cat doing?"]
    p = subprocess.run([cli, "chat", GGUF, "--greedy", "--max-new-tokens", "8"], input="\n".join(lines) + "\n",
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr
    msgs, want = [], []
    for line in lines:
        msgs.append({"role": "user", "content": line})
        reply, _, _ = greedy_reply(ref, msgs, 8)
        want.append(reply)
        msgs.append({"role": "assistant", "content": reply})
    assert p.stdout == "".join(r + "\n" for r in want)
    # the second turn's prompt came from the cache, but for what is new
    turns = [ln for ln in p.stderr.splitlines() if ln.startswith("clformer chat:")]
    assert len(turns) == 2 and " 0 of them cached" in turns[0] and " 0 of them cached" not in turns[1]
