"""Comment commands, approval candidates and the merge gate: pure, table-driven."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconciler.forge.commands import (
    USAGE,
    Command,
    Ignore,
    Reply,
    approval_candidates,
    approver_rule,
    merge_blockers,
    parse_command,
)
from reconciler.forge.models import (
    Approvals,
    CheckRun,
    CommandKind,
    Conclusion,
    Review,
    ReviewState,
)


@pytest.mark.parametrize(
    ("body", "parsed"),
    [
        ("/denv plan", Command(CommandKind.PLAN, [])),
        ("  /denv bench --fleet 'local'\nok", Command(CommandKind.BENCH, ["--fleet", "local"])),
        ("/denv", Reply(USAGE)),
        ("/denv deploy", Reply(f"unknown command `deploy`: {USAGE}")),
        ("/denv bench 'unclosed", Reply(f"cannot read `/denv bench 'unclosed`: {USAGE}")),
        ("/denvx plan", Ignore()),
        ("lgtm\n/denv plan", Ignore()),
        ("", Ignore()),
    ],
    ids=[
        "plan",
        "bench-args",
        "bare",
        "unknown",
        "bad-quote",
        "other-word",
        "not-first-line",
        "empty",
    ],
)
def test_parse_command(body: str, parsed: Command | Reply | Ignore) -> None:
    assert parse_command(body) == parsed


T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _review(user: str, state: ReviewState, commit: str, minute: int) -> Review:
    return Review(user=user, state=state, commit=commit, at=T0 + timedelta(minutes=minute))


def test_latest_word_of_each_reviewer_counts() -> None:
    reviews = [
        _review("grace", ReviewState.APPROVED, "head", 1),
        _review("grace", ReviewState.COMMENTED, "head", 2),  # a comment keeps the approval
        _review("linus", ReviewState.APPROVED, "head", 1),
        _review("linus", ReviewState.CHANGES_REQUESTED, "head", 3),
        _review("ken", ReviewState.APPROVED, "old", 1),
        _review("ada", ReviewState.APPROVED, "head", 1),
    ]
    found = approval_candidates(reviews, "head", author="Ada")
    assert found.users == ["grace"]
    assert [(i.user, i.reason) for i in found.ignored] == [
        ("ada", "author of the pull request"),
        ("ken", "approved old, not the head"),
    ]


def test_approver_rule_splits_users_and_teams() -> None:
    assert approver_rule(["Grace", "acme/SRE"]) == ({"grace"}, {"acme/sre"})


def test_merge_blockers() -> None:
    none = Approvals(head_sha="h", counted=[], ignored=[])
    one = Approvals(head_sha="h", counted=["grace"], ignored=[])
    failed = CheckRun(
        name="denv plan", title="invalid files", summary="", conclusion=Conclusion.FAILURE
    )
    neutral = failed.model_copy(update={"conclusion": Conclusion.NEUTRAL})
    assert merge_blockers(one, 1, [neutral]) == []
    assert merge_blockers(none, 1, [failed]) == [
        "check 'denv plan' is failure: invalid files",
        "0 of 1 approvals of the head",
    ]
    assert merge_blockers(one, 2, []) == ["1 of 2 approvals of the head (grace)"]
