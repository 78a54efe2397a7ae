"""A chat template from a file for a model that ships none (a GGUF file may
lack tokenizer.chat_template: Gemma 3 270M's does): Model(chat_template=...)
renders and chats with it, with the tokenizer's special tokens as its
variables (Gemma's template opens with {{ bos_token }}), and
`python -m clformer.serve --chat-template FILE` serves chat completions with
it.  The model: tests/fixtures/gguf_models/llama_mixed (a tokenizer, no
template); the template: Gemma's, from the chat template fixtures."""
import os

import pytest

import clformer
from conftest import FIXTURES

GGUF = os.path.join(FIXTURES, "gguf_models", "llama_mixed", "model.gguf")
TEMPLATE = os.path.join(FIXTURES, "chat_templates", "templates", "gemma-2-2b-it.jinja")
HI = [{"role": "user", "content": "hi"}]
# what transformers renders of HI with add_generation_prompt and bos_token "<s>" (llama_mixed's)
RENDERED = "<s><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n"


def _source():
    with open(TEMPLATE, encoding="utf-8") as f:
        return f.read()


def test_model_renders_and_chats_with_the_template():
    with clformer.Model(GGUF, chat_template=_source()) as m:
        assert m.apply_chat_template(HI, add_generation_prompt=True) == RENDERED
        # the template's own refusal still reaches the caller
        with pytest.raises(clformer.InvalidArgumentError, match="System role not supported"):
            m.apply_chat_template([{"role": "system", "content": "x"}] + HI)
        r = m.chat(HI, max_new_tokens=3, do_sample=False)
        assert r.prompt_tokens == len(m.tokenize(RENDERED, add_special_tokens=False))
        assert r.completion_tokens == 3 and r.finish_reason == "length"
    with clformer.Model(GGUF) as m:
        with pytest.raises(clformer.NotFoundError, match="has no chat template"):
            m.apply_chat_template(HI)


def test_model_refuses_a_bad_template():
    with pytest.raises(clformer.FormatError, match="at 1:7"):
        clformer.Model(GGUF, chat_template="{% if %}")
    with pytest.raises(clformer.InvalidArgumentError, match="chat_template"):
        clformer.Model(GGUF, chat_template="a\0b")


def test_serve_option(tmp_path):
    from clformer.serve import __main__ as cmd
    a = cmd.parse([GGUF, "--chat-template", TEMPLATE])
    assert a.chat_template == _source() and cmd.options(a).chat_template == _source()
    assert "chat_template" not in repr(cmd.options(a))  # the text stays out of logs
    assert cmd.options(cmd.parse([GGUF])).chat_template == ""  # none given: the model's
    for bad, words in ((tmp_path / "missing.jinja", "No such file"), (tmp_path / "big.jinja", "larger than 1 MiB")):
        if bad.name == "big.jinja":
            bad.write_bytes(b"x" * ((1 << 20) + 1))
        with pytest.raises(SystemExit):
            cmd.parse([GGUF, "--chat-template", str(bad)])
