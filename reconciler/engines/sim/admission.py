"""Pure logic: from a parsed request to what the engine runs — the prompt's token ids, the
answer, how many tokens it has and why it ends there (EOS: "stop", the limit: "length")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reconciler.engines.model.tokens import Answer, Answers, Tokenizer
from reconciler.engines.sim.protocol import ApiError, GenRequest


@dataclass(frozen=True)
class Admitted:
    prompt: list[int]
    answer: Answer
    tokens: int  # the answer's length
    finish_reason: str


def prompt_ids(req: GenRequest, tokenizer: Tokenizer) -> list[int]:
    """Token ids as given (checked against the vocab), or the text tokenized."""
    if req.prompt_ids is not None:
        vocab = tokenizer.vocab_size
        if any(t < 0 or t >= vocab for t in req.prompt_ids):
            raise ApiError(400, f"token ids must be in [0, {vocab})", "prompt")
        return req.prompt_ids
    ids = tokenizer.encode(req.prompt_text or "")
    if not ids:
        raise ApiError(400, "the prompt is empty", "prompt")
    return ids


def admit(
    req: GenRequest,
    tokenizer: Tokenizer,
    answers: Answers,
    *,
    limit: int,
    prefill_only: bool,
    draw_seed: Callable[[], int],
) -> Admitted:
    """What to generate. `limit` bounds prompt + output (the context, or less when the KV
    cache holds less); a P/D prefill worker (`prefill_only`) answers with its first token;
    `draw_seed` gives sampled requests without a seed one of their own."""
    ids = prompt_ids(req, tokenizer)
    room = limit - len(ids)
    if room < 1 or (req.max_tokens is not None and req.max_tokens > room):
        asked = req.max_tokens or 1
        raise ApiError(
            400,
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{len(ids) + asked} tokens ({len(ids)} in the prompt, {asked} for the completion).",
        )
    wanted = req.max_tokens or room
    seed = req.seed
    if req.temperature > 0 and seed is None:
        seed = draw_seed()
    answer = answers.plan(ids, req.temperature, seed)
    if prefill_only:
        return Admitted(ids, answer, 1, "length")
    if not req.ignore_eos and answer.natural_length <= wanted:
        return Admitted(ids, answer, answer.natural_length, "stop")
    return Admitted(ids, answer, wanted, "length")
