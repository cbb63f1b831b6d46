"""The stage state machine (pure): one step per pass, from a record and the pass's facts."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.rollout.stages import last_good, rollback_effects, step, unhealthy, wants_promotion
from reconciler.rollout.state import (
    AlarmValue,
    Phase,
    PromotionPr,
    RolloutState,
    StageFacts,
    StageRecord,
)
from reconciler.rollout.status import rollout_status
from reconciler.spec.release import Promotions, Release

A, B, C = "a" * 40, "b" * 40, "c" * 40
SLOW = AlarmValue(name="ttft", value=2.0, requests=50, firing=True, text="ttft p99 2 s > 0.5 s")
FINE = AlarmValue(name="ttft", value=0.1, requests=50, firing=False, text="ttft p99 0.1 s")


def facts(**changes: Any) -> StageFacts:
    base: dict[str, Any] = dict(
        key="chat-8b/canary", revision=B, digest="d-b", bake=30.0, rejected=frozenset(),
        ready=True, running=B, parity=None, now=100.0,
    )  # fmt: skip
    return StageFacts(**(base | changes))


def record(**changes: Any) -> StageRecord:
    base: dict[str, Any] = dict(revision=B, digest="d-b", phase=Phase.BAKING, since=50.0,
                                ready_at=90.0, good=A, previous=A)  # fmt: skip
    return StageRecord(**(base | changes))


CASES = [
    ("first sight, not ready", None, facts(ready=False), Phase.DEPLOYING, None),
    (
        "ready: the bake starts",
        record(phase=Phase.DEPLOYING, ready_at=None),
        facts(),
        Phase.BAKING,
        None,
    ),
    ("baking, not long enough", record(), facts(now=110.0), Phase.BAKING, None),
    ("bake elapsed, no alarm", record(), facts(now=121.0, alarms=(FINE,)), Phase.GREEN, None),
    (
        "no bake: green once ready",
        record(phase=Phase.DEPLOYING, ready_at=None),
        facts(bake=0.0),
        Phase.GREEN,
        None,
    ),
    ("alarm during bake", record(), facts(alarms=(SLOW,)), Phase.ROLLED_BACK, A),
    ("alarm after bake: kept", record(phase=Phase.GREEN), facts(alarms=(SLOW,)), Phase.GREEN, None),
    (
        "alarm after bake, always",
        record(phase=Phase.GREEN),
        facts(alarms=(SLOW,), rollback_after_bake=True),
        Phase.ROLLED_BACK,
        A,
    ),
    ("parity failed: degraded", record(), facts(now=200.0, parity="failed"), Phase.DEGRADED, None),
    ("parity waiting: no green", record(), facts(now=200.0, parity="waiting"), Phase.BAKING, None),
    ("a replica lost during bake", record(), facts(ready=False), Phase.DEPLOYING, None),
    (
        "a replica lost during bake, clients refused meanwhile",
        record(),
        facts(ready=False, alarms=(SLOW,)),
        Phase.ROLLED_BACK,
        A,
    ),
    (
        "a replica lost after bake",
        record(phase=Phase.GREEN),
        facts(ready=False, alarms=(SLOW,)),
        Phase.GREEN,
        None,
    ),
    ("new revision from git", record(revision=A, phase=Phase.GREEN), facts(), Phase.BAKING, None),
    (
        "rejected in git: last good",
        record(),
        facts(rejected=frozenset({B})),
        Phase.ROLLED_BACK,
        None,
    ),
    (
        "rejected, nothing earlier",
        record(good=None, previous=None),
        facts(rejected=frozenset({B})),
        Phase.REJECTED,
        None,
    ),
    ("later stage without a pin", record(), facts(revision=None), Phase.PENDING, None),
    (
        "rolled back on another stage: kept here",
        record(),
        facts(elsewhere=frozenset({B}), now=121.0),
        Phase.GREEN,
        None,
    ),
    (
        "alarm: never back to a revision another stage rejected",
        record(good=C, previous=A),
        facts(alarms=(SLOW,), elsewhere=frozenset({C})),
        Phase.ROLLED_BACK,
        A,
    ),
]


@pytest.mark.parametrize(
    ("name", "before", "seen", "phase", "target"), CASES, ids=[c[0] for c in CASES]
)
def test_step(
    name: str, before: StageRecord | None, seen: StageFacts, phase: Phase, target: str | None
) -> None:
    after, rollback = step(before, seen)
    assert after.phase == phase
    assert (rollback.target if rollback else None) == target
    if rollback is not None:
        assert (rollback.bad, after.override, after.rolled_back) == (B, A, B)
        assert after.rolled_back_at == seen.now  # the pass whose scrape decided it
        assert "ttft" in rollback.reason


def test_a_new_revision_remembers_what_ran_before() -> None:
    after, _ = step(record(revision=A, phase=Phase.GREEN, good=A), facts(revision=C, ready=False))
    assert (after.revision, after.previous, after.good, after.phase) == (C, A, A, Phase.DEPLOYING)


def test_after_a_rollback_the_override_is_what_ran() -> None:
    rolled = record(phase=Phase.ROLLED_BACK, override=A, rolled_back=B)
    after, _ = step(rolled, facts(revision=C, ready=False))  # a fix forward
    assert (after.previous, after.override) == (A, None)


def test_the_override_holds_while_git_still_names_the_rejected_revision() -> None:
    rolled = record(phase=Phase.ROLLED_BACK, override=A, rolled_back=B, good=None, previous=None)
    after, rollback = step(rolled, facts(rejected=frozenset({B})))
    assert (after.phase, after.override, rollback) == (Phase.ROLLED_BACK, A, None)


@pytest.mark.parametrize(
    ("good", "previous", "fallback", "rejected", "expected"),
    [
        (A, C, None, set(), A),
        (B, C, None, set(), C),  # the bad one itself is never the target
        (A, C, None, {A}, C),  # nor a rejected one
        (None, None, C, set(), C),
        (None, None, None, set(), None),
    ],
    ids=["good", "bad-is-good", "good-rejected", "git-fallback", "nothing"],
)
def test_last_good(
    good: str | None,
    previous: str | None,
    fallback: str | None,
    rejected: set[str],
    expected: str | None,
) -> None:
    found = record(good=good, previous=previous)
    assert last_good(found, B, frozenset(rejected), fallback) == expected


@pytest.mark.parametrize(
    ("phase", "pin", "digest", "rejected", "expected"),
    [
        (Phase.GREEN, None, None, set(), True),
        (Phase.GREEN, A, "d-a", set(), True),
        (Phase.BAKING, A, "d-a", set(), False),
        (Phase.GREEN, B, "d-b", set(), False),  # the next stage runs it already
        (Phase.GREEN, A, "d-b", set(), False),  # same content under another commit (a revert)
        (Phase.GREEN, A, "d-a", {B}, False),  # rejected: never promoted
    ],
    ids=["first", "newer", "not-green", "pinned", "same-content", "rejected"],
)
def test_wants_promotion(
    phase: Phase, pin: str | None, digest: str | None, rejected: set[str], expected: bool
) -> None:
    assert wants_promotion(record(phase=phase), pin, digest, frozenset(rejected)) is expected


def test_rollout_status_in_words() -> None:
    release = Release.model_validate(
        {
            "release": {"model": "chat-8b", "weights": "file:///w", "recipe": "m/vllm@1"},
            "stages": [
                {"name": "canary", "fleets": ["a"], "bake": "30m"},
                {"name": "prod", "fleets": ["b"]},
                {"name": "eu", "fleets": ["c"]},
            ],
        }
    )
    pr = PromotionPr(number=3, url="u", revision=B, stage="prod", blockers=["0 of 1 approvals"])
    state = RolloutState(
        stages={
            "chat-8b/canary": record(ready_at=100.0, promotion=pr),
            "chat-8b/prod": record(
                revision=A,
                phase=Phase.ROLLED_BACK,
                override=C,
                rolled_back=A,
                reason="ttft p99 2 s > 0.5 s",
            ),
        }
    )
    pins = Promotions.model_validate({"promotions": {"prod": {"revision": A}}})
    rows = rollout_status("chat-8b", release, pins, state, now=820.0, head_revision=B)
    assert [r.state for r in rows] == [
        "baking 12m/30m",
        f"rolled back to {C[:12]} ({A[:12]} rejected: ttft p99 2 s > 0.5 s)",
        "not deployed",
    ]
    assert rows[1].promotion == "PR #3 waiting for approval: 0 of 1 approvals"
    assert (rows[1].revision, rows[1].running) == (A, C)


def test_a_bake_past_its_time_waits_for_the_bots_next_pass() -> None:
    release = Release.model_validate(
        {
            "release": {"model": "chat-8b", "weights": "file:///w", "recipe": "m/vllm@1"},
            "stages": [{"name": "canary", "fleets": ["a"], "bake": "3s"}],
        }
    )
    state = RolloutState(stages={"chat-8b/canary": record(ready_at=100.0)})
    [row] = rollout_status("chat-8b", release, None, state, now=104.0, head_revision=B)
    assert row.state == "baked 3s, judged at the bot's next pass"


D = "d" * 40
EFFECTS = [
    (
        "canary rolled back, prod on the same revision",
        [("canary", B), ("prod", B), ("eu", None)],
        "canary",
        A,
        [
            f"rolled back from {B[:12]} to {A[:12]}; {B[:12]} rejected here",
            f"keeps running {B[:12]}: rolled back only if its own alarms fire",
            f"runs nothing yet; {B[:12]} is never promoted to it",
        ],
    ),
    (
        "prod rolled back, the canary on it, eu elsewhere",
        [("canary", B), ("prod", B), ("eu", D)],
        "prod",
        A,
        [
            f"keeps running {B[:12]}: rolled back only if its own alarms fire; "
            f"{B[:12]} is not promoted from it",
            f"rolled back from {B[:12]} to {A[:12]}; {B[:12]} rejected here",
            f"runs {D[:12]}; {B[:12]} is never promoted to it",
        ],
    ),
    (
        "nothing earlier, an earlier stage on a newer revision",
        [("canary", C), ("prod", B)],
        "prod",
        None,
        [
            f"runs {C[:12]}: unchanged",
            f"{B[:12]} rejected; nothing earlier to return to, so it keeps running it",
        ],
    ),
]


@pytest.mark.parametrize(
    ("name", "runs", "rolled", "target", "texts"), EFFECTS, ids=[c[0] for c in EFFECTS]
)
def test_rollback_effects_say_what_happens_to_each_stage(
    name: str, runs: list[tuple[str, str | None]], rolled: str, target: str | None, texts: list[str]
) -> None:
    found = rollback_effects(runs, rolled, B, target)
    assert [e.text for e in found] == texts
    assert [e.stage for e in found] == [stage for stage, _ in runs]
    assert dict((e.stage, e.runs) for e in found)[rolled] == (target or B)


def test_rollout_status_shows_a_stage_kept_on_a_revision_rolled_back_elsewhere() -> None:
    release = Release.model_validate(
        {
            "release": {"model": "chat-8b", "weights": "file:///w", "recipe": "m/vllm@1"},
            "stages": [{"name": "canary", "fleets": ["a"]}, {"name": "prod", "fleets": ["b"]}],
        }
    )
    state = RolloutState(
        stages={
            "chat-8b/canary": record(phase=Phase.ROLLED_BACK, override=A, rolled_back=B),
            "chat-8b/prod": record(phase=Phase.GREEN),
        },
        rejected={B: "error_rate 100% > 10%"},
        rejected_on={B: ["canary"]},
    )
    pins = Promotions.model_validate({"promotions": {"prod": {"revision": B}}})
    canary, prod = rollout_status("chat-8b", release, pins, state, now=820.0, head_revision=B)
    assert (canary.running, canary.note) == (A, "")
    assert (prod.revision, prod.running, prod.state) == (B, B, "green")
    assert prod.note == (
        f"runs {B[:12]}, rolled back on canary: kept here until this stage's own alarms fire; "
        "never promoted further"
    )
    git = Promotions.model_validate(  # the same once git records it; an entry without a
        {"promotions": {"prod": {"revision": B}}, "rejected": [{"revision": B, "reason": "x"}]}
    )  # stage (written by hand) holds for every stage
    _, prod = rollout_status("chat-8b", release, git, RolloutState(), now=820.0, head_revision=B)
    assert (prod.state, prod.note) == ("rejected", "")


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        (record(phase=Phase.GREEN, ready=True, alarms=[FINE]), ""),
        (record(phase=Phase.GREEN, ready=False), "canary is not ready"),
        (record(phase=Phase.GREEN, ready=True, alarms=[SLOW]), "canary alarm firing: ttft p99 2 s"),
    ],
    ids=["ready-and-quiet", "a-replica-down", "an-alarm-firing"],
)
def test_a_promotion_waits_while_its_stage_is_unhealthy(before: StageRecord, expected: str) -> None:
    found = unhealthy("canary", before)
    assert found.startswith(expected) and bool(found) == bool(expected)
