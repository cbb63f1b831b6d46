"""Pure logic: the simulator's tokenizer, prefix-block hashes and deterministic answers.

Text becomes token ids by hashing short word pieces; ids become short pronounceable words, so
answers read as text. A greedy answer is a function of the weights id, the prompt's token ids
and the position only — never of batching or timing — so two simulators of one weights id
agree token for token. Quantized weights and an fp8 KV cache perturb a documented fraction of
answers (`PERTURBED_FRACTION`) from a position decided by a hash, so parity checks catch them.
"""

from __future__ import annotations

import hashlib
import re
import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from reconciler.engines.model.kvcache import BLOCK_TOKENS

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
# A natural (EOS) answer length is drawn uniformly from this range, then capped by max_tokens.
NATURAL_LENGTH = (16, 512)
# Fraction of answers that diverge from the reference weights' answer, by cause.
PERTURBED_FRACTION = {"quantization": 0.20, "kv_fp8": 0.10}
MAX_TOP_LOGPROBS = 20

_PIECE = re.compile(r"\w{1,6}|[^\w\s]")
_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_SYLLABLES = [c + v for c in _CONSONANTS for v in _VOWELS]  # 70 two-letter syllables


def chat_prompt(turns: Sequence[tuple[str, str]]) -> str:
    """The simulator's chat template: one `<|role|>` line and the content per (role, content)
    turn, then the assistant's opening line the answer follows."""
    lines = [f"<|{role}|>\n{content}" for role, content in turns]
    lines.append("<|assistant|>\n")
    return "\n".join(lines)


def mix64(x: int) -> int:
    """splitmix64's finalizer: a fast, well-spread 64-bit hash of a 64-bit integer."""
    x = (x + GOLDEN) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def digest64(*parts: bytes) -> int:
    """A stable 64-bit digest of byte strings (the same in every process and version)."""
    h = hashlib.blake2b(digest_size=8)
    for part in parts:
        h.update(struct.pack("<I", len(part)))
        h.update(part)
    return int.from_bytes(h.digest(), "little")


def _ids_bytes(ids: Sequence[int]) -> bytes:
    return array("q", ids).tobytes()


def block_hashes(ids: Sequence[int], block: int = BLOCK_TOKENS) -> list[int]:
    """One hash per full block, chained: equal hashes at index i mean equal first i+1 blocks."""
    hashes: list[int] = []
    previous = 0
    for start in range(0, len(ids) - block + 1, block):
        previous = digest64(previous.to_bytes(8, "little"), _ids_bytes(ids[start : start + block]))
        hashes.append(previous)
    return hashes


class Tokenizer:
    """Word pieces (up to 6 word characters, or one punctuation mark) hashed into the vocab;
    ids rendered as syllable words (base-70 digits, so distinct ids read differently). Every
    token's text is a space and lowercase ASCII letters: JSON needs no escaping for it."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self._piece_id = lru_cache(maxsize=65536)(self._hash_piece)

    def _hash_piece(self, piece: str) -> int:
        return digest64(piece.encode()) % self.vocab_size

    def encode(self, text: str) -> list[int]:
        return [self._piece_id(piece) for piece in _PIECE.findall(text)]

    @staticmethod
    def text(token: int) -> str:
        """The text of one output token: a leading space and a short word."""
        return " " + _word(token)

    @staticmethod
    def word(token: int) -> str:
        """The text of one output token without its leading space."""
        return _word(token)


# Two base-70 digits at a time: streaming renders every token once, and a 128k vocabulary
# defeats a cache of rendered ids, so the table keeps it to one or two look-ups.
_PAIRS = [high + low for high in _SYLLABLES for low in _SYLLABLES]
_BASE2 = len(_PAIRS)


def _word(token: int) -> str:
    """The syllables of a token's base-70 digits, most significant first, no leading zeros."""
    if token < len(_SYLLABLES):
        return _SYLLABLES[token]
    if token < _BASE2:
        return _PAIRS[token]
    high, low = divmod(token, _BASE2)
    if high < len(_SYLLABLES):  # three syllables: a 128k vocabulary's ids are nearly all here
        return _SYLLABLES[high] + _PAIRS[low]
    return _word(high) + _PAIRS[low]


@dataclass(frozen=True)
class Answer:
    """The tokens one request's answer is made of; `token(i)` and `top(i, k)` are pure."""

    vocab_size: int
    stream: int  # seed of the token stream before `diverge_at`
    natural_length: int  # where the answer would emit EOS
    diverge_at: int | None = None  # position from which a perturbed stream takes over
    perturbed_stream: int = 0

    def _seed(self, position: int) -> int:
        if self.diverge_at is not None and position >= self.diverge_at:
            return self.perturbed_stream
        return self.stream

    def token(self, position: int) -> int:
        diverge_at = self.diverge_at  # _seed, inlined: streaming calls this once per token
        seed = self.stream if diverge_at is None or position < diverge_at else self.perturbed_stream
        return mix64(seed ^ ((position * GOLDEN) & MASK64)) % self.vocab_size

    def tokens(self, start: int, stop: int) -> list[int]:
        return [self.token(i) for i in range(start, stop)]

    def top(self, position: int, k: int) -> list[tuple[int, float]]:
        """The k most likely tokens at a position with their logprobs, descending; the chosen
        token is always first (the simulator always emits its model's most likely token)."""
        seed = mix64(self._seed(position) ^ (position + 1))
        chosen = self.token(position)
        logprob = -0.7 * (seed % 1000) / 1000
        ranked = [(chosen, round(logprob, 4))]
        seen = {chosen}
        draw = seed
        while len(ranked) < k:
            draw = mix64(draw)
            token = draw % self.vocab_size
            if token in seen:
                continue
            seen.add(token)
            logprob -= 0.5 + 2.0 * ((draw >> 20) % 1000) / 1000
            ranked.append((token, round(logprob, 4)))
        return ranked


class Answers:
    """Plans answers for one simulated model: weights id, quantization and KV dtype decide
    them; the server's batching and timing never do."""

    def __init__(
        self, weights: str, vocab_size: int, quantization: str = "none", kv_dtype: str = "auto"
    ) -> None:
        self.weights = weights.encode()
        self.vocab_size = vocab_size
        self._perturbations: list[tuple[int, float]] = []
        if quantization != "none":
            self._perturbations.append(
                (
                    digest64(b"quantization", quantization.encode()),
                    PERTURBED_FRACTION["quantization"],
                )
            )
        if kv_dtype.startswith("fp8"):
            self._perturbations.append((digest64(b"kv_fp8"), PERTURBED_FRACTION["kv_fp8"]))

    def plan(self, prompt: Sequence[int], temperature: float, seed: int | None) -> Answer:
        """Greedy (temperature 0) answers depend on the prompt only; sampled ones also on the
        seed, which the caller draws at random when the request gives none."""
        stream = digest64(self.weights, _ids_bytes(prompt))
        if temperature > 0:
            sampled = struct.pack("<dq", temperature, seed if seed is not None else 0)
            stream = digest64(stream.to_bytes(8, "little"), sampled)
        natural = _natural_length(stream)
        for tag, fraction in self._perturbations:
            decider = mix64(stream ^ tag)
            if (decider >> 11) / float(1 << 53) < fraction:
                perturbed = mix64(decider)
                diverge_at = perturbed % natural
                length = max(diverge_at + 1, _natural_length(perturbed))
                return Answer(self.vocab_size, stream, length, diverge_at, perturbed)
        return Answer(self.vocab_size, stream, natural)


def _natural_length(stream: int) -> int:
    low, high = NATURAL_LENGTH
    return low + mix64(stream ^ 0xE05) % (high - low + 1)
