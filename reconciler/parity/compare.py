"""Pure logic: comparing two greedy answers to one prompt by the rule vLLM's model tests use
(`check_logprobs_close`): equal tokens pass; at the first differing position, each side's
token must be among the other side's top-k alternatives, and comparison stops there (after
one difference the answers go their own ways). That is a tolerant pass; strict mode fails it.

An answer that ends where the other goes on differs at that position too. Servers do not list
the end-of-sequence token among the alternatives, so that case cannot be shown tolerable and
fails in both modes."""

from __future__ import annotations

from typing import Literal

from reconciler.parity.verdict import END, Divergence, Match, Outcome
from reconciler.parity.wire import Answer


def first_divergence(reference: Answer, candidate: Answer, top_k: int) -> Divergence | None:
    """Where the answers first differ, or None when they are the same tokens."""
    for position, (ref, cand) in enumerate(zip(reference.tokens, candidate.tokens, strict=False)):
        if ref != cand:
            tolerable = (
                cand in reference.top[position][:top_k] and ref in candidate.top[position][:top_k]
            )
            return Divergence(position=position, reference=ref, candidate=cand, in_top_k=tolerable)
    shorter = min(len(reference.tokens), len(candidate.tokens))
    if len(reference.tokens) == len(candidate.tokens):
        return None
    return Divergence(
        position=shorter,
        reference=reference.tokens[shorter] if len(reference.tokens) > shorter else END,
        candidate=candidate.tokens[shorter] if len(candidate.tokens) > shorter else END,
        in_top_k=False,
    )


def compare(
    prompt_id: str,
    reference: Answer,
    candidate: Answer,
    mode: Literal["strict", "tolerant"],
    top_k: int,
) -> Outcome:
    divergence = first_divergence(reference, candidate, top_k)
    if divergence is None:
        match = Match.EXACT
    else:
        match = Match.TOLERANT if divergence.in_top_k else Match.DIVERGED
    return Outcome(id=prompt_id, match=match, passed=match.passes(mode), divergence=divergence)
