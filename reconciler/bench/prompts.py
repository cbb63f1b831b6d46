"""Pure logic: the prompt of a trace line — exactly `input_length` tokens whose 512-token
blocks are derived from the line's `hash_ids`, so equal ids give equal blocks and an engine's
prefix cache sees the reuse the trace recorded. No text is ever read or stored: the tokens
are made up from the ids.

Two forms (docs/benchmarks.md, "Load generator"):

- `token_ids`: a list of token ids in [1000, 31000), inside every vocabulary of the catalog's
  models; exact on any engine that takes token ids (vLLM, SGLang, denv's simulator).
- `text`: one common English word per token (" the", " water", …, at most six letters, so
  each is one token in the simulator's tokenizer and in the usual BPE vocabularies). For
  endpoints that take text only, such as sglang-router 0.3.2, which answers 422 to token ids.
  Exact on the simulator; on a real tokenizer the count can differ, and the usage the engine
  reports is what the figures use.
"""

from __future__ import annotations

import random
from array import array
from collections import OrderedDict
from typing import Literal

from reconciler.bench.traffic import BLOCK_TOKENS, TraceLine
from reconciler.engines.model.tokens import Tokenizer, chat_prompt

PromptFormat = Literal["token_ids", "text"]

TOKEN_ID_LOW = 1000  # below: special and byte tokens in many vocabularies
TOKEN_ID_SPAN = 30000  # ids stay under 31,000: every model in the catalog has more

_WORD_LIST = (
    "the of and to in is you that it he was for on are as with his they at be this have "
    "from or one had by word but not what all were we when your can said there use an "
    "each which she do how their if will up other about out many then them these so some "
    "her would make like him into time has look two more write go see number no way could "
    "people my than first water been call who oil its now find long down day did get come "
    "made may part over new sound take only little work know place year live me back give "
    "most very after thing our just name good man think say great where help much before "
    "line right too mean old any same tell boy follow came want show also around form "
    "three small set put end does well large must big even such turn here why ask went "
    "men read need land differ home us move try kind hand again change off play spell air "
    "away animal house point page letter mother answer found study still learn should "
    "world high every near add food own below plant last school father keep tree never "
    "start city earth eye light though head under story saw left few while along might "
    "close seem next hard open begin life always those both paper got group often run "
    "until side feet car mile night walk white sea began grow took river four carry state "
    "once book hear stop "
)
WORDS: tuple[str, ...] = tuple(" " + word for word in _WORD_LIST.split())
_ID_TEXT = tuple(str(TOKEN_ID_LOW + i) for i in range(TOKEN_ID_SPAN))
# A block of a request's own (past its hash ids) is seeded apart from every hash id.
_OWN_BLOCK = 1 << 62


class PromptBuilder:
    """Prompt bodies as JSON fragments: block contents are cached by hash id (least recently
    used first out), so a shared block is made once however many requests send it."""

    def __init__(self, form: PromptFormat, cache_blocks: int = 4096, seed: int = 0) -> None:
        self.form = form
        self.seed = seed
        self._cache: OrderedDict[int, list[str]] = OrderedDict()
        self._cache_blocks = cache_blocks
        self._sep = "," if form == "token_ids" else ""

    def _make(self, key: int) -> list[str]:
        draw = random.Random(key ^ (self.seed << 1)).getrandbits(16 * BLOCK_TOKENS)
        values = array("H", draw.to_bytes(2 * BLOCK_TOKENS, "little"))
        if self.form == "token_ids":
            return [_ID_TEXT[v % TOKEN_ID_SPAN] for v in values]
        return [WORDS[v & 0xFF] for v in values]

    def _block(self, hash_id: int) -> list[str]:
        tokens = self._cache.get(hash_id)
        if tokens is not None:
            self._cache.move_to_end(hash_id)
            return tokens
        tokens = self._make(hash_id)
        self._cache[hash_id] = tokens
        if len(self._cache) > self._cache_blocks:
            self._cache.popitem(last=False)
        return tokens

    def tokens(self, line: TraceLine, index: int, length: int | None = None) -> list[str]:
        """The prompt's tokens (ids as decimal text, or words): `length` of them (default:
        the line's input_length). Blocks past the line's hash ids are the request's own,
        seeded by `index`, so they are shared with no other request."""
        wanted = line.input_length if length is None else length
        out: list[str] = []
        block = 0
        while len(out) < wanted:
            if block < len(line.hash_ids):
                tokens = self._block(line.hash_ids[block])
            else:
                tokens = self._make(_OWN_BLOCK + index * 4096 + block)
            out += tokens[: wanted - len(out)]
            block += 1
        return out

    def json_value(self, line: TraceLine, index: int, length: int | None = None) -> str:
        """The prompt as a JSON value: `[1042,7731,…]` or `" the water …"`."""
        joined = self._sep.join(self.tokens(line, index, length))
        return f"[{joined}]" if self.form == "token_ids" else f'"{joined}"'


def simulator_chat_overhead(vocab_size: int = 128256) -> int:
    """Tokens the simulator's chat template adds around one user message: chat prompts to a
    simulator are that much shorter, so the engine sees exactly `input_length` tokens."""
    return len(Tokenizer(vocab_size).encode(chat_prompt([("user", "")])))
