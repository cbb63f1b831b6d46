"""Pure logic: a pull request's bench results as the forge's comment views — per subject and
load level, the figures of the current release beside the pull request's with the change
(compare.py), and both sweeps as points of the Pareto chart (interactivity against
throughput per GPU); each result with its roofline (catalog/roofline.py)."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.bench.compare import LOWER_BETTER, Figure, compare
from reconciler.bench.pareto import load_label
from reconciler.bench.pr_subjects import BenchSubject
from reconciler.catalog.roofline import result_roofline, summary
from reconciler.forge.views import BenchRow, MetricDelta, ParetoPoint
from reconciler.spec.repo import Repo
from reconciler.spec.result import Result

# The figures a reviewer weighs a change by: compare.py's name, then as the table shows it.
SHOWN = (
    ("output tok/s/GPU", "output", "tok/s/GPU"),
    ("TTFT p99", "TTFT p99", "ms"),
    ("TPOT p50", "TPOT p50", "ms"),
    ("E2E p99", "E2E p99", "ms"),
    ("$/M output", "cost", "$/M output"),
    ("errors", "errors", "requests"),
)


def _delta(figure: Figure, name: str, unit: str) -> MetricDelta | None:
    if figure.b is None or (figure.name == "errors" and not (figure.a or figure.b)):
        return None  # errors only when there are some
    return MetricDelta(
        name=name,
        unit=unit,
        current=figure.a,
        candidate=figure.b,
        higher_is_better=not figure.name.startswith(LOWER_BETTER),
    )


def _deltas(current: Result | None, candidate: Result) -> list[MetricDelta]:
    # with nothing to compare with, the result is compared with itself and its side dropped
    figures = {f.name: f for f in compare(current or candidate, candidate).figures}
    found = []
    for key, name, unit in SHOWN:
        delta = _delta(figures[key], name, unit)
        if delta is not None:
            found.append(delta if current else delta.model_copy(update={"current": None}))
    return found


def bench_rows(
    subject: BenchSubject,
    current: Sequence[Result],
    candidate: Sequence[Result],
    simulated: bool,
    repo: Repo,
) -> list[BenchRow]:
    """A table per load level the pull request's side was measured at, compared with the
    current release's result at the same load (when it has one), with the roofline of the
    pull request's result from `repo`'s catalog."""
    at_load = {r.load: r for r in current}
    rows = []
    for result in candidate:
        rows.append(
            BenchRow(
                subject=f"{subject.name} at {load_label(result.load)}",
                fleet=subject.fleet,
                hardware=result.hardware,
                simulated=simulated,
                result_id=result.id,
                metrics=_deltas(at_load.get(result.load), result),
                roofline=summary(result_roofline(repo, result)),
            )
        )
    return rows


def _points(series: str, results: Sequence[Result]) -> list[ParetoPoint]:
    points = []
    for result in results:
        tpot, per_gpu = result.metrics.tpot_ms.p50, result.metrics.output_tok_s_per_gpu
        if not tpot or per_gpu is None:
            continue  # one-token answers have no TPOT: no speed per user to draw
        points.append(
            ParetoPoint(
                series=series,
                label=load_label(result.load),
                interactivity=1000.0 / tpot,
                throughput=per_gpu,
            )
        )
    return points


def pareto_points(
    subject: BenchSubject, current: Sequence[Result], candidate: Sequence[Result], alone: bool
) -> list[ParetoPoint]:
    """Both sides' levels; series named `release` and `PR`, prefixed by the subject unless it
    is the only one on the chart."""
    prefix = "" if alone else f"{subject.name} {subject.fleet} "
    return _points(f"{prefix}release", current) + _points(f"{prefix}PR", candidate)
