"""A plan as text (terminal) and markdown (pull-request comment), compared with golden files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.forge.comments import render
from reconciler.forge.views import PlanView
from reconciler.reconcile.changes import Change
from reconciler.reconcile.desired import DeploymentError
from reconciler.reconcile.plan import Action, ActionKind, FleetUsage, Group, Plan, Wave
from reconciler.reconcile.render import indices, plan_view, render_text
from reconciler.reconcile.revisions import Pending
from tests.labs.golden import check_text

GOLDEN = Path(__file__).resolve().parent / "golden"

OLD, NEW = "1" * 40, "2" * 40
NO_ROOM = "replica 2 needs 1 GPU in one domain; the most free in one domain of local is 0"
INVALID = "revision 222222222222 has invalid files:\nreleases/beta/denv.yaml:3:1: bad"


def action(kind: ActionKind, wave: Wave, release: str, name: str, **fields: Any) -> Action:
    base: dict[str, Any] = {
        "kind": kind,
        "wave": wave,
        "release": release,
        "stage": "canary",
        "fleet": "local",
        "host": "localhost",
        "unit": f"{release}.canary.local.{name}",
        "role": "router" if name == "router" else "aggregated",
        "replica": int(name[-1]) if name[-1].isdigit() else 0,
        "node": 0,
        "reason": "new",
    }
    return Action.model_validate(base | fields)


def sample() -> Plan:
    return Plan(
        head=NEW,
        actions=(
            action(
                ActionKind.START, Wave.START, "chat", "aggregated-2", gpus_after=(2,), port=8096
            ),
            action(
                ActionKind.REPLACE,
                Wave.ROLL,
                "chat",
                "aggregated-0",
                reason="spec changed",
                surge=True,
                gpus_before=(0,),
                gpus_after=(0,),
                port=8032,
                changes=(Change(field="argv", name="--max-num-seqs", old="128", new="256"),),
            ),
            action(
                ActionKind.REPLACE,
                Wave.ROLL,
                "chat",
                "router",
                reason="spec changed",
                port=8000,
                changes=(
                    Change(field="argv", name="--worker-urls", old="a b", new="a b c"),
                    Change(field="argv", name="--enable-trace", old=None, new=""),
                ),
            ),
            action(ActionKind.KEEP, Wave.NONE, "chat", "aggregated-1", reason="up to date"),
            action(
                ActionKind.STOP,
                Wave.FREE,
                "old",
                "router",
                reason="release old was removed",
                port=8200,
            ),
            action(
                ActionKind.STOP,
                Wave.FREE,
                "old",
                "aggregated-0",
                reason="release old was removed",
                gpus_before=(4, 5, 6, 7),
                port=8232,
            ),
        ),
        groups=(
            Group(
                release="chat",
                stage="canary",
                fleet="local",
                revision=NEW,
                running_revisions=(OLD,),
                gpus_before=2,
                gpus_after=3,
                endpoint="http://127.0.0.1:8000",
            ),
            Group(
                release="chat",
                stage="prod",
                fleet="local",
                revision=None,
                running_revisions=(OLD,),
                gpus_before=2,
                gpus_after=2,
                error=NO_ROOM,
            ),
            Group(
                release="old",
                stage="canary",
                fleet="local",
                revision=None,
                running_revisions=(OLD,),
                gpus_before=4,
                gpus_after=0,
            ),
        ),
        fleets=(
            FleetUsage(
                fleet="local",
                gpus=16,
                trial_gpus=8,
                before=8,
                after=7,
                unreachable={"gpu-2": "gpu-2: connection refused"},
            ),
        ),
        pending=(
            Pending(
                release="chat",
                stage="eu",
                reason="not deployed yet: no pin in releases/chat/promotions.yaml",
            ),
        ),
        errors=(
            DeploymentError(
                release="chat",
                stage="prod",
                fleet="local",
                revision=OLD,
                message=NO_ROOM,
            ),
            DeploymentError(
                release="beta",
                stage="canary",
                fleet=None,
                revision=NEW,
                message=INVALID,
            ),
        ),
    )


def test_text_reads_like_terraform_plan() -> None:
    check_text(GOLDEN / "plan.txt", render_text(sample()))


def test_markdown_for_a_pull_request_comment() -> None:
    text = render(plan_view(sample()))
    assert text.startswith("<!-- denv:plan -->\n")
    check_text(GOLDEN / "plan.md", text)


def test_an_empty_plan_says_there_is_nothing_to_do() -> None:
    empty = Plan(
        head=NEW,
        actions=(action(ActionKind.KEEP, Wave.NONE, "chat", "aggregated-0", reason="up to date"),),
        groups=(
            Group(
                release="chat",
                stage="canary",
                fleet="local",
                revision=NEW,
                gpus_before=1,
                gpus_after=1,
            ),
        ),
    )
    assert empty.empty
    assert render_text(empty).splitlines()[-1] == "No changes: 1 unit up to date."
    check_text(GOLDEN / "empty.txt", render_text(empty))


def test_a_long_markdown_plan_is_cut_per_group() -> None:
    starts = tuple(
        action(ActionKind.START, Wave.START, "wide", f"aggregated-{i}", gpus_after=(i,))
        for i in range(60)
    )
    group = Group(release="wide", stage="canary", fleet="local", revision=NEW, gpus_after=60)
    text = render(plan_view(Plan(head=NEW, actions=starts, groups=(group,))))
    assert "… and 10 more lines: run `denv plan` to see them all." in text
    assert text.count("\n+ wide.canary.local.aggregated-") == 50


def test_gpu_indices_are_shown_as_ranges() -> None:
    assert [indices(g) for g in ([0], [0, 1], [0, 1, 2, 3, 6], [7, 5, 6])] == [
        "0",
        "0,1",
        "0-3,6",
        "5-7",
    ]


def test_a_plan_and_invalid_files_share_the_comment_template() -> None:
    """The valid plan's comment is forge/templates/plan.md, as the invalid files' one is."""
    files = ["releases/chat/denv.yaml"]
    valid = render(plan_view(sample(), "main", files)).splitlines()
    invalid = render(PlanView(head_sha=NEW, files=files, problems=[INVALID])).splitlines()
    assert (
        valid[:2]
        == invalid[:2]
        == ["<!-- denv:plan -->", f"### denv plan for `{NEW[:12]}` against `main`"]
    )
    assert valid[-8:] == invalid[-8:]  # the files changed, then the footer
