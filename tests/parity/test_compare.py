"""The comparison rule, case by case: exact, tolerant within the top-k, diverged, strict."""

from __future__ import annotations

from typing import Literal

import pytest

from reconciler.parity.compare import compare
from reconciler.parity.verdict import END, Divergence, Match, Outcome, compile_verdict
from reconciler.parity.wire import Answer


def answer(*steps: str, finish: str = "stop") -> Answer:
    """'a:b,c' is token a with alternatives a, b, c listed (best first)."""
    tokens, tops = [], []
    for step in steps:
        token, _, alternatives = step.partition(":")
        tokens.append(token)
        tops.append(tuple(alternatives.split(",")) if alternatives else (token,))
    return Answer(tuple(tokens), tuple(tops), finish)


Mode = Literal["strict", "tolerant"]
CASES = [
    # (reference, candidate, mode, k, match, passed, divergence)
    (answer("a", "b", "c"), answer("a", "b", "c"), "tolerant", 5, Match.EXACT, True, None),
    (answer("a", "b", "c"), answer("a", "b", "c"), "strict", 5, Match.EXACT, True, None),
    (answer(), answer(), "strict", 5, Match.EXACT, True, None),
    (
        answer("a", "b:b,x", "c"),
        answer("a", "x:x,b", "z"),
        "tolerant",
        5,
        Match.TOLERANT,
        True,
        Divergence(position=1, reference="b", candidate="x", in_top_k=True),
    ),
    (
        answer("a", "b:b,x", "c"),
        answer("a", "x:x,b", "z"),
        "strict",
        5,
        Match.TOLERANT,
        False,
        Divergence(position=1, reference="b", candidate="x", in_top_k=True),
    ),
    (  # only one side lists the other's token: not tolerable
        answer("a", "b:b,x"),
        answer("a", "x:x,q"),
        "tolerant",
        5,
        Match.DIVERGED,
        False,
        Divergence(position=1, reference="b", candidate="x", in_top_k=False),
    ),
    (  # listed, but below the top k
        answer("b:b,p,q,x"),
        answer("x:x,b"),
        "tolerant",
        3,
        Match.DIVERGED,
        False,
        Divergence(position=0, reference="b", candidate="x", in_top_k=False),
    ),
    (  # the same lists at k 4 make it tolerable
        answer("b:b,p,q,x"),
        answer("x:x,b"),
        "tolerant",
        4,
        Match.TOLERANT,
        True,
        Divergence(position=0, reference="b", candidate="x", in_top_k=True),
    ),
    (  # the candidate stopped where the reference went on
        answer("a", "b", "c"),
        answer("a", "b"),
        "tolerant",
        5,
        Match.DIVERGED,
        False,
        Divergence(position=2, reference="c", candidate=END, in_top_k=False),
    ),
    (
        answer("a"),
        answer("a", "b"),
        "tolerant",
        5,
        Match.DIVERGED,
        False,
        Divergence(position=1, reference=END, candidate="b", in_top_k=False),
    ),
]
IDS = [
    "same",
    "same-strict",
    "both-empty",
    "top-k-tolerant",
    "top-k-strict",
    "one-sided",
    "below-k",
    "at-k",
    "candidate-ends",
    "reference-ends",
]


@pytest.mark.parametrize(
    ("ref", "cand", "mode", "k", "match", "passed", "divergence"), CASES, ids=IDS
)
def test_compare(
    ref: Answer,
    cand: Answer,
    mode: Mode,
    k: int,
    match: Match,
    passed: bool,
    divergence: Divergence | None,
) -> None:
    outcome = compare("p", ref, cand, mode, k)
    assert outcome == Outcome(id="p", match=match, passed=passed, divergence=divergence)


def test_comparison_stops_at_the_first_divergence() -> None:
    """After one tolerable difference the answers go their own ways: later tokens never count."""
    ref = answer("a:a,x", "b", "c")
    cand = answer("x:x,a", "q", "r")
    outcome = compare("p", ref, cand, "tolerant", 5)
    assert outcome.passed and outcome.divergence is not None
    assert outcome.divergence.position == 0


def test_verdict_counts_and_lists_failures_in_suite_order() -> None:
    outcomes = [
        compare("p1", answer("a"), answer("a"), "tolerant", 5),
        compare("p2", answer("a:a,b"), answer("b:b,a"), "tolerant", 5),
        compare("p3", answer("a"), answer("z"), "tolerant", 5),
        compare("p4", answer("a"), answer("a", "b"), "tolerant", 5),
    ]
    verdict = compile_verdict("s", "tolerant", 5, "http://r", "http://c", outcomes, 1.23456)
    assert verdict.headline == "PARITY 2/4"
    assert (verdict.total, verdict.passed, verdict.exact, verdict.tolerant) == (4, 2, 1, 1)
    assert [o.id for o in verdict.failures] == ["p3", "p4"]
    assert [o.id for o in verdict.tolerated] == ["p2"]
    assert not verdict.ok and verdict.elapsed_s == 1.235
