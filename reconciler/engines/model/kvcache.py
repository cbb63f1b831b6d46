"""Pure logic: the simulator's KV memory — tokens held by running requests, and a prefix cache
of 512-token blocks named by chained hashes (equal hash = equal prefix, as in vLLM), kept in
least-recently-used order once no running request holds them."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

BLOCK_TOKENS = 512  # the Mooncake trace's hash_ids block


class KvCache:
    """Capacity in tokens. A shared block counts once however many requests hold it; a block
    nobody holds stays cached (and can be hit) until its memory is needed."""

    def __init__(self, capacity_tokens: int) -> None:
        self.capacity = capacity_tokens
        self._refs: dict[int, int] = {}  # block -> running requests that hold it
        self._ready: set[int] = set()  # blocks whose KV is computed: prefix hits
        self._idle: OrderedDict[int, None] = OrderedDict()  # ready, held by nobody; LRU first
        self._private = 0  # tokens outside shared blocks (prompt tails, outputs)

    @property
    def used(self) -> int:
        """Tokens held by running requests (the engines' KV usage)."""
        return len(self._refs) * BLOCK_TOKENS + self._private

    @property
    def room(self) -> int:
        """Tokens that can still be taken, evicting idle cached blocks as needed."""
        return self.capacity - self.used

    @property
    def cached_blocks(self) -> int:
        return len(self._idle)

    def hits(self, blocks: Sequence[int]) -> int:
        """How many leading blocks are computed and cached."""
        n = 0
        for block in blocks:
            if block not in self._ready:
                break
            n += 1
        return n

    def new_blocks(self, blocks: Sequence[int]) -> int:
        """Blocks that taking `blocks` adds to the memory in use."""
        return sum(1 for block in blocks if block not in self._refs)

    def take(self, blocks: Sequence[int], private: int) -> None:
        """Hold `blocks` and `private` more tokens; the caller checked `room`."""
        for block in blocks:
            if block in self._refs:
                self._refs[block] += 1
            else:
                self._refs[block] = 1
                self._idle.pop(block, None)
        self._private += private
        self._evict()

    def grow(self, tokens: int) -> None:
        self._private += tokens
        self._evict()

    def give_back(self, blocks: Sequence[int], private: int) -> None:
        """Release a request's blocks and tokens; its computed blocks stay cached."""
        for block in blocks:
            left = self._refs[block] - 1
            if left:
                self._refs[block] = left
                continue
            del self._refs[block]
            if block in self._ready:
                self._idle[block] = None
        self._private -= private
        self._evict()

    def computed(self, block: int) -> None:
        self._ready.add(block)

    def _evict(self) -> None:
        over = self.used + len(self._idle) * BLOCK_TOKENS - self.capacity
        while over > 0 and self._idle:
            block, _ = self._idle.popitem(last=False)
            self._ready.discard(block)
            over -= BLOCK_TOKENS
