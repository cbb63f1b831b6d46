"""Pure logic: a recorded prompt's `hash_ids` — chained hashes of its 512-token blocks (each
block's hash covers the previous block's hash and its own tokens, so equal hashes mean equal
prefixes), named in the file by small sequential integers so the file holds no hash of text."""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

from reconciler.engines.model.kvcache import BLOCK_TOKENS
from reconciler.engines.model.tokens import block_hashes, digest64
from reconciler.spec.result import TrafficLine


def prompt_block_hashes(ids: Sequence[int]) -> list[int]:
    """One chained 64-bit hash per block, the last one possibly partial (Mooncake's rule)."""
    hashes = block_hashes(ids, BLOCK_TOKENS)
    tail = ids[len(hashes) * BLOCK_TOKENS :]
    if tail:
        previous = hashes[-1] if hashes else 0
        hashes.append(digest64(previous.to_bytes(8, "little"), array("q", tail).tobytes()))
    return hashes


class BlockNames:
    """Hashes -> 0, 1, 2, … in order of first sight; `fresh` ids stand for blocks whose
    tokens are unknown and so are shared with nothing. Holds one dict entry per distinct
    block for the life of a recording (about 100 bytes each)."""

    def __init__(self) -> None:
        self._names: dict[int, int] = {}
        self._next = 0

    def fresh(self, count: int) -> list[int]:
        start, self._next = self._next, self._next + count
        return list(range(start, start + count))

    def name(self, hashes: Sequence[int]) -> list[int]:
        out = []
        for value in hashes:
            if value not in self._names:
                self._names[value] = self.fresh(1)[0]
            out.append(self._names[value])
        return out


def recorded_line(
    timestamp_ms: int,
    prompt_ids: Sequence[int] | None,
    prompt_tokens: int,
    completion_tokens: int,
    names: BlockNames,
) -> TrafficLine:
    """A trace line for one answered request. The engine's own count (usage) is the input
    length; the token ids, when known, give the block ids. Should the two counts differ (a
    template or special tokens the tokenizer call did not add), the blocks are cut to the
    engine's count or padded with fresh ids."""
    wanted = math.ceil(prompt_tokens / BLOCK_TOKENS)
    known = names.name(prompt_block_hashes(prompt_ids)) if prompt_ids else []
    ids = known[:wanted] + names.fresh(max(0, wanted - len(known)))
    return TrafficLine(
        timestamp=timestamp_ms,
        input_length=prompt_tokens,
        output_length=completion_tokens,
        hash_ids=ids,
    )
