"""Pure logic: the simulator's continuous-batching loop — one scheduler, clockless, stepped by
`denv sim serve` in wall-clock time and by `denv sim predict` in virtual time.

Each step: decoding requests emit their tokens (when KV runs out vLLM preempts the newest
requests, SGLang retracts those with the fewest output tokens), prefill chunks go in up to the
token budget, waiting requests are admitted first come first served while the batch cap and KV
memory allow — SGLang keeping KV back for a share of the running requests' output that decays
each decode step. vLLM mixes decode and prefill in one step; SGLang runs a prefill batch alone
whenever it has one (PerfModel.limits.mixed_batches).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

from reconciler.engines.model.kvcache import BLOCK_TOKENS, KvCache
from reconciler.engines.model.perf import Batch, PerfModel
from reconciler.engines.model.steps import EPS, RequestTooLarge, Span, Step, Tracked, span_of

__all__ = ["RequestTooLarge", "Scheduler", "Span", "Step"]


class Scheduler:
    """Continuous batching over one replica's PerfModel. Not thread-safe; no clock."""

    def __init__(self, model: PerfModel) -> None:
        self.model = model
        self._kv = KvCache(model.kv_capacity_tokens)
        self._waiting: deque[Tracked] = deque()
        self._inbox: deque[Tracked] = deque()  # added, not yet looked at (poll_interval)
        self._steps = 0
        self._running: list[Tracked] = []
        self._known: dict[str, Tracked] = {}
        self._left = 0  # output tokens the running requests have still to emit
        self._decode_role = model.role == "decode"
        self._prefill_role = model.role == "prefill"
        # The reservation share is _ratio_base less reserve_decay per decode step since it was
        # set (an integer count, so a span of k steps lands exactly where k steps do).
        self._ratio_base = model.limits.reserve_ratio
        self._decode_steps = 0
        self._held = False  # a request was refused for KV; hold_after_refusal waits for a leave

    # ------------------------------------------------------------------ requests
    def add(
        self,
        request_id: str,
        prompt_tokens: int,
        block_hashes: Sequence[int],
        max_tokens: int,
        ignore_eos: bool = False,
    ) -> None:
        if request_id in self._known:
            raise ValueError(f"request {request_id} is already scheduled")
        if prompt_tokens < 1 or max_tokens < 1:
            raise ValueError("a request needs at least one prompt token and one output token")
        if len(block_hashes) > prompt_tokens // BLOCK_TOKENS:
            raise ValueError(
                f"{len(block_hashes)} block hashes for {prompt_tokens} prompt tokens "
                f"(at most one per full {BLOCK_TOKENS}-token block)"
            )
        if prompt_tokens + max_tokens > self.model.max_request_tokens:
            raise RequestTooLarge(
                f"{prompt_tokens} prompt + {max_tokens} output tokens exceed the "
                f"{self.model.max_request_tokens} tokens one request may use here"
            )
        blocks = tuple(block_hashes) if self.model.prefix_caching else ()
        request = Tracked(request_id, prompt_tokens, blocks, max_tokens, ignore_eos)
        self._known[request_id] = request
        self._inbox.append(request)

    def cancel(self, request_id: str) -> None:
        request = self._known.pop(request_id, None)
        if request is None:
            return
        if request in self._running:
            self._running.remove(request)
            self._release(request)
        elif request in self._inbox:
            self._inbox.remove(request)
        else:
            self._waiting.remove(request)

    @property
    def idle(self) -> bool:
        return not self._running and not self._waiting and not self._inbox

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiting) + len(self._inbox)

    @property
    def kv_usage(self) -> float:
        return self._kv.used / self._kv.capacity

    # ------------------------------------------------------------------ one step
    def step(self) -> Step | None:
        """Schedule and account one step; None when nothing can run."""
        if self.idle:
            return None
        self._poll()
        preempted: list[str] = []
        cached = 0
        decoders: list[tuple[Tracked, int]] = []
        chunks: list[tuple[Tracked, int]] = []
        budget = self.model.step_token_budget
        if self._decode_role:
            self._admit_transferred()
            decoders = self._plan_decode(preempted)
        elif self.model.limits.mixed_batches:
            decoders = self._plan_decode(preempted)
            used = len(decoders) * (1 + self.model.draft_tokens)
            growth = sum(n for _, n in decoders)  # KV the decoders take this step
            chunks, cached = self._plan_prefill(budget - used, growth)
        else:
            chunks, cached = self._plan_prefill(budget)
            if not chunks:
                decoders = self._plan_decode(preempted)
        if not decoders and not chunks:
            return None
        return self._run(decoders, chunks, preempted, cached)

    def _run(
        self,
        decoders: list[tuple[Tracked, int]],
        chunks: list[tuple[Tracked, int]],
        preempted: list[str],
        cached: int,
    ) -> Step:
        ctx = sum(r.prompt + r.emitted for r, _ in decoders)
        pairs = sum(size * (r.computed + size / 2) for r, size in chunks)
        prefix = sum(r.computed for r, _ in chunks)
        prompt = sum(size for _, size in chunks)
        batch = Batch(len(decoders), ctx, prompt, pairs, prefix)
        duration = self.model.step_time(batch)
        self._steps += 1

        tokens: dict[str, int] = {}
        first: list[str] = []
        finished: list[Tracked] = []
        for r, n in decoders:
            r.spec_steps += 1
            r.spec_emitted += n
            self._emit(r, n, tokens, first, finished)
        for r, size in chunks:
            r.computed += size
            self._mark_computed(r)
            if r.computed >= r.target:
                self._emit(r, 1, tokens, first, finished)
        self._kv.grow(sum(tokens.values()))
        for r in finished:
            self._finish(r)
        return Step(
            duration,
            tokens,
            tuple(first),
            tuple(r.id for r in finished),
            tuple(preempted),
            len(self._running),
            self.waiting,
            self.kv_usage,
            prompt,
            cached,
        )

    def _emit(
        self,
        r: Tracked,
        n: int,
        tokens: dict[str, int],
        first: list[str],
        finished: list[Tracked],
    ) -> None:
        if r.emitted == 0:
            first.append(r.id)
        r.emitted += n
        r.private += n
        self._left -= n
        tokens[r.id] = n
        if r.emitted >= r.max_tokens or self._prefill_role:
            finished.append(r)

    # ------------------------------------------------------------------ many steps
    def advance(self, horizon_s: float = math.inf, max_steps: int = 1 << 20) -> Span | None:
        """Steps back to back, as `step` would run them, while nothing but decoding can happen:
        it stops at the first step that finishes a request, before KV could run short, and
        before the first step that would start at or after `horizon_s` (when the caller has
        a request to add). Otherwise, or when that leaves one step, exactly one `step`."""
        steps = min(self._quiet_steps(), max_steps)
        if steps < 2:
            single = self.step()
            return None if single is None else span_of(single)
        tps = self.model.tokens_per_step
        batch = len(self._running)
        ctx = float(sum(r.prompt + r.emitted for r in self._running))
        growth = batch * tps
        durations: list[float] = []
        start = 0.0
        while len(durations) < steps and (not durations or start < horizon_s):
            d = self.model.step_time(Batch(batch, round(ctx)))
            durations.append(d)
            start += d
            ctx += growth
        k = len(durations)
        self._steps += k
        self._decode_steps += k
        tokens: dict[str, int] = {}
        finished: list[Tracked] = []
        total = 0
        for r in self._running:
            n = r.next_tokens(tps, k)
            r.spec_steps += k
            r.spec_emitted += n
            r.emitted += n
            r.private += n
            tokens[r.id] = n
            total += n
            if r.emitted >= r.max_tokens:
                finished.append(r)
        self._left -= total
        self._kv.grow(total)
        for r in finished:
            self._finish(r)
        return Span(
            tuple(durations),
            tokens,
            (),
            tuple(r.id for r in finished),
            (),
            len(self._running),
            self.waiting,
            self.kv_usage,
            0,
            0,
        )

    def _quiet_steps(self) -> int:
        """How many steps from now are decode-only with a fixed batch (0 when this one is not):
        until the first request finishes, and while KV room lasts."""
        self._poll()
        if self._prefill_role or not self._running:
            return 0
        tps = self.model.tokens_per_step
        steps = self._kv.room // (len(self._running) * math.ceil(tps - EPS))
        if self._inbox:  # the requests added are looked at in a later step
            interval = self.model.limits.poll_interval
            steps = min(steps, interval - self._steps % interval)
        if steps < 2:
            return 0
        for r in self._running:
            if r.computed < r.target or r.emitted == 0:
                return 0
            left = r.max_tokens - r.emitted
            if left < steps:
                steps = left
        limits = self.model.limits
        if self._waiting and len(self._running) < self.model.max_running:
            budget_used = len(self._running) * (1 + self.model.draft_tokens)
            starved = (
                limits.mixed_batches
                and not self._decode_role
                and budget_used >= self.model.step_token_budget
            )
            if self._holding():
                pass  # no admission until a request leaves, and a leave ends the span
            elif self._fits(self._waiting[0]) and not starved:
                return 0
            elif limits.hold_after_refusal and not self._decode_role:
                self._held = True  # what this step's prefill planning concludes
            elif limits.reserve_decay:
                return 0  # the share shrinks each step: step singly to admit on time
        if self.model.draft_tokens:  # more than one token a step: finishes come sooner
            most = math.ceil(tps - EPS)
            for r in self._running:
                if r.max_tokens - r.emitted < steps * most:
                    steps = min(steps, r.steps_to_finish(tps))
        return steps

    def _holding(self) -> bool:
        return self._held and self.model.limits.hold_after_refusal and not self._decode_role

    def _poll(self) -> None:
        """Look at the requests added since the last look: every step when idle, else every
        poll_interval steps."""
        if self._inbox and (
            not self._running or self._steps % self.model.limits.poll_interval == 0
        ):
            self._waiting.extend(self._inbox)
            self._inbox.clear()

    # ------------------------------------------------------------------ planning
    def _plan_decode(self, preempted: list[str]) -> list[tuple[Tracked, int]]:
        """Decoding requests and the tokens each emits, after preempting the newest requests
        (SGLang: retracting) until the KV those tokens need fits."""
        tps = self.model.tokens_per_step
        if self.model.limits.retract_decode_steps is not None and not self._decode_role:
            return self._retract(preempted)
        while True:
            decoders = [(r, r.next_tokens(tps)) for r in self._running if r.computed >= r.target]
            need = sum(n for _, n in decoders)
            if need <= self._kv.room or not self._running:
                return decoders
            victim = self._running.pop()
            self._requeue(victim)
            self._waiting.appendleft(victim)
            preempted.append(victim.id)

    def _retract(self, preempted: list[str]) -> list[tuple[Tracked, int]]:
        """SGLang 0.5.9's decode step (managers/scheduler.py:2213-2260 update_running_batch,
        schedule_batch.py:1847-1905 retract_decode). When the next tokens' KV does not fit,
        requests are retracted fewest output tokens first (of equal outputs, the longest
        prompt; with speculative decoding, the newest), at least one and never the last, to
        the back of the queue, and the share is set to the kept requests' emitted output plus
        retract_decode_steps per request over their max_tokens. Otherwise the share decays."""
        tps = self.model.tokens_per_step
        decoders = [r for r in self._running if r.computed >= r.target]
        need = sum(r.next_tokens(tps) for r in decoders)
        if need <= self._kv.room or not decoders:
            if decoders:
                self._decode_steps += 1
            return [(r, r.next_tokens(tps)) for r in decoders]
        if not self.model.draft_tokens:  # SGLang keeps batch order for speculative decoding
            decoders.sort(key=lambda r: (r.emitted, -r.prompt), reverse=True)
        while len(decoders) > 1:
            victim = decoders.pop()
            self._running.remove(victim)
            self._requeue(victim)
            self._waiting.append(victim)
            preempted.append(victim.id)
            need = sum(r.next_tokens(tps) for r in decoders)
            if need <= self._kv.room:
                break
        steps = self.model.limits.retract_decode_steps or 0
        emitted = sum(r.emitted for r in decoders)
        wanted = sum(r.max_tokens for r in decoders)
        self._ratio_base = min(1.0, (emitted + steps * len(decoders)) / (wanted + 1))
        self._decode_steps = 0
        return [(r, r.next_tokens(tps)) for r in decoders]

    def _requeue(self, victim: Tracked) -> None:
        """Out of the batch with its KV freed; admitted again, it computes its prompt and the
        tokens it had emitted again (recompute)."""
        self._release(victim)
        victim.computed = 0
        victim.target = victim.prompt + victim.emitted
        victim.ready = 0
        victim.spec_steps = victim.spec_emitted = 0

    def _plan_prefill(self, budget: int, growth: int = 0) -> tuple[list[tuple[Tracked, int]], int]:
        chunk_cap = self.model.limits.chunk_tokens
        chunks: list[tuple[Tracked, int]] = []
        for r in self._running:
            if r.computed < r.target and budget > 0:
                size = self._chunk(r, budget, chunk_cap, bool(chunks))
                if size == 0:
                    break
                chunks.append((r, size))
                budget -= size
        cached = 0
        reserved = self._reserved()
        while (
            self._waiting
            and budget > 0
            and len(self._running) < self.model.max_running
            and not self._holding()
        ):
            r = self._waiting[0]
            hits = self._kv.hits(r.blocks)
            if not self._fits(r, growth, reserved):
                self._held = True
                break
            start = min(hits * BLOCK_TOKENS, r.target - 1)
            if self._chunk_size(r.target - start, budget, chunk_cap, bool(chunks)) == 0:
                break
            self._waiting.popleft()
            reserved += self._own_output(r)  # SGLang: whole, for the rest of this batch
            self._take(r)
            r.computed = start
            r.ready = hits
            cached += start if r.emitted == 0 else 0
            size = self._chunk(r, budget, chunk_cap, bool(chunks))
            chunks.append((r, size))
            budget -= size
        return chunks, cached

    def _admit_transferred(self) -> None:
        """Decode role: a request arrives with its prompt's KV; it decodes from its first step."""
        while self._waiting and len(self._running) < self.model.max_running:
            r = self._waiting[0]
            if not self._fits(r):
                return
            self._waiting.popleft()
            self._take(r)
            r.computed = r.target

    def _chunk(self, r: Tracked, budget: int, cap: int | None, others: bool) -> int:
        return self._chunk_size(r.target - r.computed, budget, cap, others)

    @staticmethod
    def _chunk_size(left: int, budget: int, cap: int | None, others: bool) -> int:
        if cap is None:  # no chunked prefill: a prompt goes in whole, alone if it must
            return left if left <= budget or not others else 0
        return min(left, budget, cap)

    # ------------------------------------------------------------------ KV
    def _need(self, r: Tracked) -> int:
        """KV tokens admitting `r` takes: its new blocks, the rest of its context, one more."""
        tail = r.target - len(r.blocks) * BLOCK_TOKENS
        return self._kv.new_blocks(r.blocks) * BLOCK_TOKENS + tail + 1

    def _fits(self, r: Tracked, growth: int = 0, reserved: float | None = None) -> bool:
        """Whether admitting `r` leaves the KV the engine's admission policy wants kept, beyond
        `growth` tokens the running requests take this step. SGLang 0.5.9 (schedule_policy.py:
        439-446 and 731-744 PrefillAdder): `r`'s own remaining output and the share of each
        running request's, both capped at reserve_clip; `reserved` is what the batch being
        formed already keeps. A request alone always goes in: add() checked its size."""
        need = self._need(r) + growth
        ratio = self.model.limits.reserve_ratio
        if not ratio or not self._running:
            return need <= self._kv.room
        if self._decode_role:  # a P/D decode worker: the fixed share, as before
            return need + int(ratio * (self._left + r.max_tokens - r.emitted)) <= self._kv.room
        if reserved is None:
            reserved = self._reserved()
        if self._runs_to_the_end(r):
            return need + reserved <= self._kv.room and self._holds_to_the_end(r, need)
        return need + self._own_output(r) + reserved <= self._kv.room

    def _runs_to_the_end(self, r: Tracked) -> bool:
        """SGLang 0.5.9 admits an ignore_eos request without a radix cache by another check
        (schedule_policy.py:731-732, add_one_req_ignore_eos)."""
        exact = self.model.limits.end_reserve_tokens is not None
        return exact and r.ignore_eos and not self.model.prefix_caching

    def _holds_to_the_end(self, r: Tracked, need: int) -> bool:
        """SGLang 0.5.9's add_one_req_ignore_eos (schedule_policy.py:636-690): with `r` in,
        the requests ordered by output left (ignore_eos: all of it; others: the share of
        max_tokens), KV must hold, when each finishes, what every request still running has
        grown by then, less what those finished before it freed, plus end_reserve_tokens
        per request still running."""
        ratio, spare = self._ratio(), self.model.limits.end_reserve_tokens or 0
        states = sorted(
            (
                x.max_tokens - x.emitted if x.ignore_eos else ratio * x.max_tokens - x.emitted,
                x.prompt + x.emitted,
            )
            for x in (*self._running, r)
        )
        states = [s for s in states if s[0] > 0]
        free, freed = self._kv.room - need, 0
        for i, (left, occupied) in enumerate(states):
            running = len(states) - i
            if free + freed - left * running <= spare * running:
                return False
            freed += occupied
        return True

    def _ratio(self) -> float:
        """SGLang's new_token_ratio now: max(base − decay × steps, floor) once it has decayed."""
        limits = self.model.limits
        if not self._decode_steps:
            return self._ratio_base
        decayed = self._ratio_base - limits.reserve_decay * self._decode_steps
        return max(decayed, limits.reserve_floor)

    def _own_output(self, r: Tracked) -> int:
        clip = self.model.limits.reserve_clip
        left = r.max_tokens - r.emitted
        return left if clip is None else min(left, clip)

    def _reserved(self) -> float:
        """KV kept for the running requests' output: the share of each one's, capped."""
        ratio = self.model.limits.reserve_ratio
        if not ratio or self._decode_role or not self._running:
            return 0.0
        return self._ratio() * sum(self._own_output(r) for r in self._running)

    def _take(self, r: Tracked) -> None:
        r.private = r.target - len(r.blocks) * BLOCK_TOKENS
        self._kv.take(r.blocks, r.private)
        self._running.append(r)
        self._left += r.max_tokens - r.emitted

    def _release(self, r: Tracked) -> None:
        """Out of the running batch (finished, preempted, cancelled): its KV goes back."""
        self._kv.give_back(r.blocks, r.private)
        self._left -= r.max_tokens - r.emitted
        r.private = 0
        self._held = False  # SGLang's batch_is_full clears when the batch shrinks

    def _mark_computed(self, r: Tracked) -> None:
        done = min(r.computed // BLOCK_TOKENS, len(r.blocks))
        for block in r.blocks[r.ready : done]:
            self._kv.computed(block)
        r.ready = max(r.ready, done)

    def _finish(self, r: Tracked) -> None:
        self._running.remove(r)
        self._release(r)
        del self._known[r.id]
