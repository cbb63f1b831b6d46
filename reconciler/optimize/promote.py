"""Adapter: a verified candidate as the bot's pull request — the release's denv.yaml edited in
place (the round-trip writer keeps comments, layout and flow maps; a changed value is a
one-line diff), with the evidence in its body (forge/templates/candidate.md).

One branch per release and stage, `optimize/<release>-<stage>`: a later winner updates the
same pull request rather than opening another. Merging it is an ordinary change of the
release: the first stage gets it, later stages through their promotions and approvals.
A candidate that failed parity, or is not verified, is refused here whatever asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from reconciler.errors import DenvError
from reconciler.forge.comments import render
from reconciler.forge.protocol import BotChange, BotFiles, Forge
from reconciler.forge.views import CandidateView, LeverChange
from reconciler.optimize.candidates import Row, Status, StudyState
from reconciler.optimize.feasible import flatten
from reconciler.optimize.goal import searches_capacity
from reconciler.optimize.workload import GOAL_LABEL
from reconciler.spec.overrides import apply_overrides
from reconciler.spec.paths import release_file
from reconciler.spec.recipe import AggregatedTopology, DisaggregatedTopology, Recipe, Topology
from reconciler.spec.repo import Repo
from reconciler.spec.yamlio import YamlDoc, plain

_TOPOLOGY: TypeAdapter[AggregatedTopology | DisaggregatedTopology] = TypeAdapter(Topology)

MARKER_KIND = "candidate"


def refusal(row: Row) -> str | None:
    """Why the row cannot become a pull request, or None."""
    if row.parity_passed is False:
        why = f" ({row.reason})" if row.reason else ""
        return f"candidate {row.id} failed parity against the current release{why}: it never ships"
    if row.status is not Status.VERIFIED or row.parity_passed is not True:
        why = f": {row.reason}" if row.reason else ""
        retry = f": `{row.retry}` verifies it again" if row.retry else ""
        return (
            f"candidate {row.id} is {row.status.value}{why}; only verified candidates ship{retry}"
        )
    return None


def _leaves(data: Mapping[str, Any], at: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found: list[tuple[tuple[str, ...], Any]] = []
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            found.extend(_leaves(value, (*at, key)))
        else:
            found.append(((*at, key), value))
    return found


def _set(doc: YamlDoc, loc: tuple[str, ...], value: Any) -> None:
    """Set a leaf, creating the maps on its way that the file lacks."""
    for depth in range(len(loc)):
        if doc.get(list(loc[: depth + 1])) is None:
            nested: Any = value
            for key in reversed(loc[depth + 1 :]):
                nested = {key: nested}
            doc.set(list(loc[: depth + 1]), nested)
            return
    doc.set(list(loc), value)


def edit_release(
    doc: YamlDoc, recipe: str | None, overrides: Mapping[str, Any], topology: Any
) -> None:
    """The release as the candidate has it: its recipe, its overrides and its topology. The
    round-trip writer changes only what differs, so the file's comments, layout and flow maps
    stay; a topology that means the candidate's already (defaults written out) stays as is."""
    if recipe is not None:
        doc.set(["release", "recipe"], recipe)
    if overrides:
        doc.set(["release", "overrides"], dict(overrides))
    else:
        doc.delete(["release", "overrides"])
    if topology is None:
        return
    if isinstance(doc.get(["release", "topology"]), Mapping):
        for loc, value in _leaves(topology):
            _set(doc, ("release", "topology", *loc), value)
        wanted = _TOPOLOGY.validate_python(topology)
        try:
            if _TOPOLOGY.validate_python(plain(doc.get(["release", "topology"]))) == wanted:
                return
        except ValidationError:  # a key the candidate leaves out still says otherwise
            pass
    doc.set(["release", "topology"], dict(topology))


def _text(value: Any) -> str:
    if value is None:
        return "none"
    return str(value).lower() if isinstance(value, bool) else str(value)


def _levers(recipe: Recipe) -> dict[str, str]:
    dumped = recipe.model_dump(include={"engine", "settings", "topology", "args"})
    return {name: _text(value) for name, value in flatten(dumped).items()}


def lever_changes(current: Recipe, candidate: Recipe) -> list[LeverChange]:
    """Every setting, engine and topology value that differs, by dotted name."""
    before, after = _levers(current), _levers(candidate)
    return [
        LeverChange(lever=name, current=before.get(name, "…"), candidate=after.get(name, "…"))
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    ]


def candidate_view(
    state: StudyState, row: Row, current: Recipe, candidate: Recipe, simulated: bool
) -> CandidateView:
    assert row.gain is not None  # verified rows carry their gain
    return CandidateView(
        release=state.release,
        target=state.stage,
        goal=state.goal,
        study=state.study,
        current_recipe=current.id,
        candidate_recipe=candidate.id,
        change=row.change,
        changes=lever_changes(current, candidate),
        metric=GOAL_LABEL[state.goal],
        current_value=row.gain.current_mean,
        candidate_value=row.gain.candidate_mean,
        gain=row.gain.gain,
        current_rate=state.current.mean("rate") if searches_capacity(state.goal) else None,
        candidate_rate=row.mean("rate") if searches_capacity(state.goal) else None,
        latency_target=state.target,
        ci_low=row.gain.low,
        ci_high=row.gain.high,
        repeats=row.gain.runs,
        trials=state.trials,
        parity=row.parity or "…",
        simulated=simulated,
    )


def open_pr(
    forge: Forge, state: StudyState, row: Row, view: CandidateView, base: str | None = None
) -> int:
    """Open or update the study's pull request for `row` (into `base`, default: the default
    branch); its number."""
    why = refusal(row)
    if why is not None:
        raise DenvError(why)
    path = release_file(state.release)

    def edit(files: BotFiles) -> None:
        edit_release(files.yaml(path), row.recipe, row.overrides, row.topology)

    body = render(view)
    change = BotChange(
        branch=f"optimize/{state.release}-{state.stage}",
        title=f"Optimize {state.release} for {state.stage}: {row.change}",
        body=body,
        message=f"optimize {state.release}: {row.change} (candidate {row.id}, {state.study})",
        edit=edit,
        base=base,
    )
    pr = forge.open_or_update_bot_pr(change)
    forge.upsert_comment(pr.number, MARKER_KIND, body)
    return pr.number


def recipes_of(repo: Repo, state: StudyState, row: Row) -> tuple[Recipe, Recipe]:
    """The release's recipe as it runs now and as the candidate would have it."""
    body = repo.releases[state.release].release
    current = apply_overrides(repo.recipes[body.recipe], body.overrides, body.topology)
    base = repo.recipes.get(row.recipe or body.recipe)
    if base is None:
        raise DenvError(f"candidate {row.id}: recipe {row.recipe} is no longer in the repository")
    topology = _TOPOLOGY.validate_python(row.topology) if row.topology else None
    return current, apply_overrides(base, row.overrides, topology)


def promote_row(
    forge: Forge, repo: Repo, state: StudyState, row: Row, base: str | None = None
) -> int:
    """`denv optimize promote` and `--auto`: the verified row as the study's pull request."""
    why = refusal(row)
    if why is not None:
        raise DenvError(why)
    current, candidate = recipes_of(repo, state, row)
    fleet = repo.fleets.get(state.fleet)
    view = candidate_view(state, row, current, candidate, bool(fleet and fleet.simulated))
    return open_pr(forge, state, row, view, base)
