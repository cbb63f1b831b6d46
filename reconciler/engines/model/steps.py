"""Models: what the simulator's scheduler reports per step (Step) and per run of steps (Span),
and the state it keeps for each request."""

from __future__ import annotations

import math
from dataclasses import dataclass

EPS = 1e-9


class RequestTooLarge(ValueError):
    """A request whose prompt and output can never fit this replica."""


@dataclass(frozen=True)
class Step:
    duration_s: float  # modelled time this step takes (not scaled)
    tokens: dict[str, int]  # request id -> tokens emitted this step (first token included)
    first_token: tuple[str, ...]  # requests whose first token is emitted this step
    finished: tuple[str, ...]  # requests that reached their max_tokens this step
    preempted: tuple[str, ...]
    running: int  # after the step
    waiting: int
    kv_usage: float  # 0..1 after the step
    prompt_tokens: int  # prompt tokens computed this step (cache hits excluded)
    cached_tokens: int  # prompt tokens served from the prefix cache this step


@dataclass(frozen=True)
class Span:
    """Steps run back to back. Every request in `tokens` emits one chunk in each step (its
    total over the span is given); first tokens, finishes and preemptions happen in the last.
    A span of several steps only ever holds decoding."""

    durations: tuple[float, ...]
    tokens: dict[str, int]
    first_token: tuple[str, ...]
    finished: tuple[str, ...]
    preempted: tuple[str, ...]
    running: int
    waiting: int
    kv_usage: float
    prompt_tokens: int
    cached_tokens: int


class Tracked:
    """One request as the scheduler tracks it."""

    __slots__ = (
        "blocks", "computed", "emitted", "id", "ignore_eos", "max_tokens", "private", "prompt",
        "ready", "spec_emitted", "spec_steps", "target",
    )  # fmt: skip

    def __init__(
        self,
        rid: str,
        prompt: int,
        blocks: tuple[int, ...],
        max_tokens: int,
        ignore_eos: bool = False,
    ) -> None:
        self.id = rid
        self.prompt = prompt
        self.blocks = blocks
        self.max_tokens = max_tokens
        self.ignore_eos = ignore_eos  # runs to max_tokens: the client asked it to ignore EOS
        self.emitted = 0
        self.computed = 0  # tokens of `target` whose KV is computed
        self.target = prompt  # tokens to compute before decoding (outputs too after preemption)
        self.private = 0  # KV tokens held outside shared blocks
        self.ready = 0  # leading blocks marked computed in the cache
        self.spec_steps = 0  # decode steps since (re)admission
        self.spec_emitted = 0  # tokens those steps emitted

    def next_tokens(self, tokens_per_step: float, steps: int = 1) -> int:
        """Tokens the next `steps` decode steps emit: the integer part of the expected total."""
        total = math.floor((self.spec_steps + steps) * tokens_per_step + EPS)
        return min(total - self.spec_emitted, self.max_tokens - self.emitted)

    def steps_to_finish(self, tokens_per_step: float) -> int:
        """Decode steps until max_tokens: the first k with next_tokens(k) reaching it."""
        goal = self.spec_emitted + self.max_tokens - self.emitted
        k = max(math.ceil((goal - EPS) / tokens_per_step) - self.spec_steps, 1)
        while k > 1 and math.floor((self.spec_steps + k - 1) * tokens_per_step + EPS) >= goal:
            k -= 1
        while math.floor((self.spec_steps + k) * tokens_per_step + EPS) < goal:
            k += 1
        return k


def span_of(step: Step) -> Span:
    return Span(
        (step.duration_s,),
        step.tokens,
        step.first_token,
        step.finished,
        step.preempted,
        step.running,
        step.waiting,
        step.kv_usage,
        step.prompt_tokens,
        step.cached_tokens,
    )
