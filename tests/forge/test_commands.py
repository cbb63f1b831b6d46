"""Comment commands, approval candidates and the merge gate: pure, table-driven."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconciler.forge.commands import (
    USAGE,
    Command,
    Ignore,
    Reply,
    allowed_signers_problems,
    approval_candidates,
    approver_rule,
    merge_blockers,
    parse_command,
)
from reconciler.forge.models import (
    Approvals,
    CheckRun,
    Conclusion,
    Review,
    ReviewState,
)


@pytest.mark.parametrize(
    ("body", "parsed"),
    [
        ("/denv plan", Command("plan", [])),
        ("  /denv bench --fleet 'local'\nok", Command("bench", ["--fleet", "local"])),
        ("/denv", Reply(USAGE)),
        # read as a name: pr/commands.py, which knows the commands, refuses an unknown one
        ("/denv deploy", Command("deploy", [])),
        ("/denv <img src=x>", Reply(f"no command is named like `<img`: {USAGE}")),
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
        "not-a-name",
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


ED25519 = "AAAAC3NzaC1lZDI1NTE5AAAAIEhZcmm9ZaQDvKpqN8WHTUQx8Zx2d3qM4rKf1mN0bY7a"


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        (f"# signers\n\ngrace ssh-ed25519 {ED25519} grace@laptop\n", []),
        (f'grace,linus namespaces="denv-approval" ssh-ed25519 {ED25519}\n', []),
        (f'"Ada Lovelace" ssh-ed25519 {ED25519}\n', []),
        ("grace ssh-ed25519\n", [(1, "expected `PRINCIPALS")]),
        (f"ssh-ed25519 {ED25519}\n", [(1, "expected `PRINCIPALS")]),
        (f"\ngrace ssh-rsa {ED25519}\n", [(2, "the ssh-rsa key is not a base64 ssh-rsa key")]),
        ("grace ssh-ed25519 not*base64\n", [(1, "not a base64 ssh-ed25519 key")]),
        ('grace namespaces="x ssh-ed25519 AAAA\n', [(1, "unbalanced quotes: expected")]),
    ],
    ids=["ok", "options", "quoted", "no-key", "no-principal", "wrong-type", "junk", "quote"],
)
def test_allowed_signers_problems(text: str, problems: list[tuple[int, str]]) -> None:
    found = allowed_signers_problems(text)
    assert [line for line, _ in found] == [line for line, _ in problems]
    for (_, said), (_, wanted) in zip(found, problems, strict=True):
        assert wanted in said
