"""grammar.py - constrained decoding for the server: a JSON schema or a Lark
grammar compiled by llguidance, and a per-sequence matcher that writes the
next token's mask into the engine's buffer (clformer.Engine's allowed).

llguidance (PyPI, a Rust core with Python bindings and no other dependency)
takes the tokenizer's vocabulary as bytes per token; it is read here from
the library's own tokenizer, for GGUF and Hugging Face models alike, so
that the masks match the ids the engine samples.  docs/serving.md says why
llguidance rather than xgrammar.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Any, Sequence

import numpy as np

# What one grammar may cost: llguidance's own fuel limits, tighter than its
# defaults where a client writes the grammar (a JSON schema in a request).
# The schema's size is already bounded by the request body's.
_LIMITS = dict(max_items_in_row=2000, initial_lexer_fuel=1_000_000, step_lexer_fuel=200_000,
               step_max_items=50_000, max_lexer_states=100_000, max_grammar_size=200_000,
               verbose_errors=False)


# JSON as the grammar lets a model write it: one separator form, no free
# whitespace (a model with nothing to say would fill max_tokens with blanks).
JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


class GrammarError(ValueError):
    """A schema or grammar llguidance refuses (its message names why, on
    one line: a regex error's caret drawing is folded)."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def _llg() -> Any:
    try:
        import llguidance
    except ImportError as e:  # tools/serve-test.sh installs it; the server names it when missing
        raise GrammarError("constrained decoding needs the llguidance package (pip install llguidance)") from e
    return llguidance


def limits() -> Any:
    return _llg().LLParserLimits(**_LIMITS)


def _validate(grammar: str, tokenizer: Any = None) -> str:
    llg = _llg()
    is_error, msgs = llg.LLMatcher.validate_grammar_with_warnings(grammar, tokenizer, limits=limits())
    if is_error:
        raise GrammarError(msgs[0] if msgs else "the grammar is invalid")
    return grammar


def json_schema_grammar(schema: Any) -> str:
    """A JSON schema (a dict; True/{} for any JSON object's json_object
    mode is json_object_grammar) as llguidance's grammar, checked now:
    GrammarError names what is wrong or unsupported ("Unimplemented keys",
    "Invalid type").  Whitespace between tokens is allowed but bounded, so
    that a model cannot run a reply out on blank space."""
    llg = _llg()
    if not isinstance(schema, dict):
        raise GrammarError("a JSON schema must be an object")
    try:
        g = llg.LLMatcher.grammar_from_json_schema(schema, overrides=dict(JSON_OPTIONS))
    except (ValueError, TypeError) as e:
        raise GrammarError(str(e)) from None
    return _validate(g)


def json_object_grammar() -> str:
    """response_format json_object: any JSON object."""
    return json_schema_grammar({"type": "object"})


def lark_grammar(lark: str) -> str:
    """A Lark grammar (llguidance's dialect: %json {schema} embeds a JSON
    schema, <[id]> names a token by id), checked now."""
    return _validate(_llg().LLMatcher.grammar_from_lark(lark))


# ---------------------------------------------------------------- the vocabulary

class _Wrapper:
    """What llguidance's TokenizerWrapper reads: the tokens as bytes
    (special ones marked with a leading 0xFF, so that no text matches
    them), the special ids, the end token, and a tokenize function."""

    def __init__(self, model: Any, tokens: list, special: list, eos: int):
        self.tokens, self.special_token_ids = tokens, special
        self.eos_token_id, self.bos_token_id = eos, None
        self._model = model

    def __call__(self, s: Any) -> list:
        text = s.decode("utf-8", "replace") if isinstance(s, (bytes, bytearray)) else s
        return [int(t) for t in self._model.tokenize(text, add_special_tokens=False)]


def tokenizer_size(model: Any) -> int:
    """The tokenizer's ids: one past the last id clf_tokenizer_token knows
    (a binary search; ids are dense)."""
    from .. import _lib
    lib = _lib.lib
    out = ctypes.c_char_p()
    with model._tok.locked() as h:
        def known(i: int) -> bool:
            return lib.clf_tokenizer_token(h, i, ctypes.byref(out)) == 0
        lo, hi = 0, 1
        while known(hi):
            lo, hi = hi, hi * 2
            if hi > 1 << 24:
                break
        while hi - lo > 1:  # known(lo), not known(hi)
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if known(mid) else (lo, mid)
    return lo + 1


def token_bytes(model: Any, n_vocab: int) -> tuple[list, list]:
    """Each id's bytes as it reads inside a text: decode [anchor, id] less
    decode [anchor] (so that SentencePiece's leading space, which decode
    drops at the start of a text, is kept; byte-level BPE gives the same as
    decoding the id alone), and the special ids: those that decode to
    nothing with skip_special_tokens and to text without."""
    tok = model._tok
    ids = model.tokenize("a", add_special_tokens=False)
    anchor = int(ids[0]) if len(ids) else 0
    base = tok.decode_bytes([anchor], skip_special_tokens=False)
    base_plain = tok.decode_bytes([anchor], skip_special_tokens=True)
    tokens, special = [], []
    for i in range(n_vocab):
        full = tok.decode_bytes([anchor, i], skip_special_tokens=False)
        b = full[len(base):] if full.startswith(base) else tok.decode_bytes([i], skip_special_tokens=False)
        if b and tok.decode_bytes([anchor, i], skip_special_tokens=True) == base_plain:
            special.append(i)
            b = b"\xff" + b
        tokens.append(b)
    return tokens, special


class Vocabulary:
    """A model's vocabulary for llguidance (built once per model: about a
    second per 100,000 tokens) and the ids that end a reply (`eos`: the
    grammar allows them only where it accepts)."""

    def __init__(self, model: Any, n_vocab: int, eos: Sequence[int]):
        llg = _llg()
        self.n_vocab = max(int(n_vocab), tokenizer_size(model))
        tokens, self.special = token_bytes(model, self.n_vocab)
        self.eos = [int(e) for e in eos if 0 <= int(e) < self.n_vocab]
        end = self.eos[0] if self.eos else (self.special[0] if self.special else 0)
        # llguidance needs an end token; without one of the model's, a
        # stand-in whose bit Matcher clears (it must never be sampled as text)
        self.stand_in = None if self.eos else end
        self.tokens = tokens
        self.llg = llg.LLTokenizer(llg.TokenizerWrapper(_Wrapper(model, tokens, self.special, end)),
                                   n_vocab=self.n_vocab, eos_token=self.eos or [end])

    def token_of(self, text: str) -> int | None:
        """The special token whose text is `text` ("[TOOL_CALLS]"), or None."""
        want = b"\xff" + text.encode("utf-8")
        for i in self.special:
            if self.tokens[i] == want:
                return i
        return None


# ---------------------------------------------------------------- matching

class Matcher:
    """One sequence's grammar state, as Engine.submit's allowed callable:
    called before each token with the new tokens so far and the mask, it
    feeds the grammar the tokens it has not seen and writes the next mask
    in place.  Once the grammar is complete (nothing may follow) it ends
    the sequence (True: the engine's "stop"); an end token is allowed only
    where the grammar accepts."""

    def __init__(self, vocab: Vocabulary, grammar: str):
        llg = _llg()
        self.vocab = vocab
        self.m = llg.LLMatcher(vocab.llg, grammar, log_level=0, limits=limits())
        if self.m.is_error():
            raise GrammarError(self.m.get_error())
        self.seen = 0
        self.done = False  # the grammar was complete when the sequence ended

    def __call__(self, tokens: np.ndarray, mask: np.ndarray) -> bool:
        m = self.m
        for t in tokens[self.seen:]:
            if not m.consume_token(int(t)):
                raise GrammarError(f"token {int(t)} broke the grammar: {m.get_error()}")
        self.seen = len(tokens)
        if m.is_stopped():
            self.done = True
            return True
        words = (self.vocab.n_vocab + 31) // 32
        if mask.size < words:
            raise GrammarError(f"the model's vocabulary ({mask.size * 32} at most) is smaller than its "
                               f"tokenizer's ({self.vocab.n_vocab}): the grammar cannot map its ids")
        m.unsafe_compute_mask_ptr(mask.ctypes.data, words * 4)
        if mask.size > words:
            mask[words:] = 0  # the model's ids past the tokenizer's: never text
        e = self.vocab.stand_in
        if e is not None:
            mask[e // 32] &= np.uint32(~(1 << (e % 32)) & 0xFFFFFFFF)
        if m.is_error():
            raise GrammarError(m.get_error())
        return False

    @property
    def accepting(self) -> bool:
        return self.done or self.m.is_accepting()


_cache_lock = threading.Lock()


def vocabulary_of(holder: Any, model: Any, n_vocab: int, eos: Sequence[int]) -> Vocabulary:
    """holder's Vocabulary (made on first use, kept in holder._grammar_vocabulary)."""
    with _cache_lock:
        v = getattr(holder, "_grammar_vocabulary", None)
        if v is None:
            v = Vocabulary(model, n_vocab, eos)
            holder._grammar_vocabulary = v
        return v
