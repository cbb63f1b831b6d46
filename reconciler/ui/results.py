"""Views: the results explorer (`denv bench`'s ranking, its filters in the address, and the
Pareto chart), one result in full (`bench get`) and two side by side (`bench compare`). They
read the head's repository from the last look and gather as the CLI does (bench/ranked.py,
bench/compare.py), so the page and the terminal say the same things."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.bench import ranked
from reconciler.bench.compare import (
    BETTER_MARK,
    change_text,
    compare,
    figure_label,
    figure_text,
    unclear_note,
)
from reconciler.catalog.latency import parse_latency_target
from reconciler.catalog.ranking import Ranking, Row
from reconciler.catalog.roofline import Roofline, roofline_lines
from reconciler.errors import DenvError
from reconciler.spec.repo import Repo
from reconciler.spec.result import Result
from reconciler.ui import pareto
from reconciler.ui.site import NotFoundPage, Page, export_name
from reconciler.ui.state import UiState

FILTERS = ("workload", "latency", "model", "hardware", "rank")
DEFAULT_RANK = "cost"
COLUMNS = ("#", "model", "GPU", "recipe", "TTFT p99", "tok/s/user", "tok/s", "tok/s/GPU", "$/M out",
           "source")  # fmt: skip
NUMERIC = {"TTFT p99", "tok/s/user", "tok/s", "tok/s/GPU", "$/M out"}
RANK_WORDS = {"cost": "cost ($/M output)", "throughput": "throughput (tok/s/GPU)",
              "speed": "speed (tok/s/user)"}  # fmt: skip


def filters(params: Mapping[str, str]) -> dict[str, str]:
    """The explorer's filters from a request's parameters: each one's text, '' if not set."""
    given = {key: params.get(key, "").strip() for key in FILTERS}
    given["rank"] = given["rank"] or DEFAULT_RANK
    return given


def query(given: Mapping[str, str]) -> dict[str, str]:
    """The filters as the explorer's address carries them: set ones only, the default rank
    left out (so the plain /results and the export's results.html are the default view)."""
    return {
        key: value
        for key, value in given.items()
        if value and not (key == "rank" and value == DEFAULT_RANK)
    }


# The last rankings asked for, of the last repository: a page and its export share them.
KEPT = 64  # at most; filters are typed by whoever asks
_kept: dict[str, Any] = {"repo": None, "rankings": {}}


def ranking(repo: Repo, given: Mapping[str, str]) -> Ranking:
    """`denv bench`'s ranking for these filters; UsageError (a DenvError) for a bad one."""
    if _kept["repo"] is not repo or len(_kept["rankings"]) >= KEPT:
        _kept.update(repo=repo, rankings={})
    key = tuple(given.get(k, "") for k in FILTERS)
    found: Ranking | None = _kept["rankings"].get(key)
    if found is None:
        found = ranked.ranking(
            repo,
            workload=given.get("workload") or None,
            latency=given.get("latency") or None,
            model=given.get("model") or None,
            hardware=given.get("hardware") or None,
            rank_by=given.get("rank") or DEFAULT_RANK,
        )
        _kept["rankings"][key] = found
    return found


def _row(number: int, row: Row) -> dict[str, Any]:
    return {
        "number": number,
        "result": row.result,
        "cells": ranked.row_cells(row),
        "kind": row.source,
        "reason": row.reason,
    }


def exported_views(state: UiState) -> list[dict[str, str]]:
    """The explorer's pages an export writes: each workload (and none) × each rank."""
    workloads = ["", *state.repo.workloads] if state.repo is not None else [""]
    return [query({"workload": w, "rank": r}) for w in workloads for r in ranked.RANK_BY]


def exported_results(state: UiState) -> list[dict[str, str]]:
    """The result pages an export writes: every row of the explorer's exported pages (so
    each of their links opens)."""
    if state.repo is None:
        return []
    ids: set[str] = set()
    for view in exported_views(state):
        ids.update(row.result for row in ranking(state.repo, filters(view)).rows)
    return [{"id": result} for result in sorted(ids)]


def explorer(state: UiState, params: Mapping[str, str]) -> Page:
    given = filters(params)
    context: dict[str, Any] = {
        "given": given,
        "ranked": [],
        "missed": [],
        "error": None,
        "chart": None,
        "columns": COLUMNS,
        "numeric": NUMERIC,
        "rank_words": RANK_WORDS,
        "simulated_note": ranked.SIMULATED_NOTE,
        "workloads": [],
        "models": [],
        "hardware": [],
        "pages": {},
        "views": [],
    }
    repo = state.repo
    if repo is None:
        return Page("results.html", "Results", context, live=False)
    context.update(
        workloads=list(repo.workloads),
        models=sorted(repo.models),
        hardware=sorted(repo.hardware),
        pages=_export_pages(state),
        views=[(_view_words(v), v) for v in exported_views(state)],
    )
    try:
        found = ranking(repo, given)
    except DenvError as exc:  # a bad filter: the CLI's message, on the page
        context["error"] = str(exc)
        return Page("results.html", "Results", context, live=False, status=400)
    shown = pareto.points(found.ranked)
    words = (
        {**given, "latency": str(parse_latency_target(given["latency"]))}
        if given["latency"]
        else given
    )  # the target as `denv bench` writes it in its heading
    criteria = ", ".join(
        f"{k} {words[k]}" for k in ("workload", "latency", "model", "hardware") if words[k]
    )
    caption = (
        f"Throughput per GPU against interactivity, {len(shown)} ranked results of "
        f"{criteria or 'all results'}, by source kind; the line is the Pareto frontier"
    )
    context.update(
        ranked=[_row(n, row) for n, row in enumerate(found.ranked, start=1)],
        missed=[_row(n, row) for n, row in enumerate(found.missed, start=len(found.ranked) + 1)],
        criteria=criteria or "all results",
        chart=lambda url: pareto.chart(shown, lambda r: url("result", id=r), caption),
        kinds=[(kind, pareto.legend_marker(kind)) for kind in pareto.KINDS],
        banded=any(row.band is not None for row in found.rows),
    )
    return Page("results.html", "Results", context, live=False)


def _view_words(view: Mapping[str, str]) -> str:
    return f"{view.get('workload') or 'any workload'}, by {view.get('rank', DEFAULT_RANK)}"


def _export_pages(state: UiState) -> dict[str, str]:
    """'WORKLOAD|RANK' -> the export's file of that view: the page's script goes there when a
    select changes (an export has no server to ask)."""
    return {
        f"{v.get('workload', '')}|{v.get('rank', DEFAULT_RANK)}": export_name("results", [], v)
        for v in exported_views(state)
    }


def _find(repo: Repo, result_id: str) -> Result | None:
    return next((r for r in repo.results if r.id == result_id), None)


def result(state: UiState, params: Mapping[str, str]) -> Page:
    result_id = params["id"]
    repo = state.repo
    found = _find(repo, result_id) if repo is not None else None
    if repo is None or found is None:
        raise NotFoundPage(f"no result '{result_id}'", back="results")
    details = ranked.describe(repo, found, {})
    context = {
        "d": details,
        "workload_text": ranked.workload_text(details["workload"]),
        "load_text": ranked.load_text(details["load"]),
        "settings_text": (
            ranked.flat(details["recipe"]["settings"]) or "engine defaults"
            if details["recipe"]["settings"] is not None
            else None
        ),
        # decode's share of HBM bandwidth and prefill's of compute, as `bench get` says them
        "roofline": roofline_lines(Roofline.model_validate(details["roofline"])),
    }
    return Page("result.html", f"Result {result_id}", context, live=False)


SUGGESTED = 40  # results offered to compare with, when only one is chosen


def comparison(state: UiState, params: Mapping[str, str]) -> Page:
    a_id, b_id = params.get("a", "").strip(), params.get("b", "").strip()
    repo = state.repo
    context: dict[str, Any] = {"a": a_id, "b": b_id, "error": None, "c": None, "suggested": []}
    if repo is None:
        return Page("compare.html", "Compare", context, live=False)
    chosen = {}
    for which in (a_id, b_id):
        if which:
            found = _find(repo, which)
            if found is None:  # as `denv bench compare` says it
                context["error"] = f"no result '{which}' in {repo.label}"
                return Page("compare.html", "Compare", context, live=False, status=404)
            chosen[which] = ranked.priced(found, {}, lambda: repo)
    if a_id and b_id:
        a, b = chosen[a_id], chosen[b_id]
        c = compare(a, b, ranked.uncertainty(lambda: repo, a), ranked.uncertainty(lambda: repo, b))
        context["c"] = c
        context["unclear"] = unclear_note(c)
        context["figures"] = [
            {
                "label": figure_label(f),
                "a": figure_text(f.a, f.unit),
                "b": figure_text(f.b, f.unit),
                "change": change_text(f),
                "better": BETTER_MARK.get(f.better or "", ""),
            }
            for f in c.figures
        ]
    elif a_id or b_id:
        one = chosen[a_id or b_id]
        context["suggested"] = _suggestions(repo, one)
    return Page("compare.html", "Compare", context, live=False)


def _suggestions(repo: Repo, one: Result) -> list[Result]:
    """Results to set beside `one`: the same model's, its own workload first."""
    same = [r for r in repo.results if r.model == one.model and r.id != one.id]
    same.sort(
        key=lambda r: (
            r.workload.name != one.workload.name,
            r.hardware,
            r.load.concurrency or 0,
            r.id,
        )
    )
    return same[:SUGGESTED]
