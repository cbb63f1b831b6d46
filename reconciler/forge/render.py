"""Pure logic: PR comments rendered from views with the templates in `templates/`.

One template per comment kind, each starting with its hidden marker; tables, deltas and the
chart are partials built here. (The templates are the package's own files, read once.)

Text that hosts, engines or a pull request's files wrote (the views' `Said` fields: an
engine's log lines, a host's error, a file's problems, a parity answer) is shown only quoted:
`quoted` puts it in a fenced block, `code` in a code span, each fenced with more backticks
than any run inside, so a mention, an image, a link, HTML or a hidden marker in it is shown
as written, never rendered or acted on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC
from functools import cache
from importlib.resources import files
from string import Template

from reconciler.catalog.roofline import percent as roofline_percent
from reconciler.forge.markers import marker, strip_marker
from reconciler.forge.views import (
    AlarmRow,
    BenchFailure,
    BenchFigure,
    BenchRow,
    BenchView,
    CandidateView,
    ClosedView,
    DeployView,
    MetricDelta,
    ParetoPoint,
    ParityView,
    PlanFleet,
    PlanGroup,
    PlanView,
    PromotionView,
    RollbackView,
)
from reconciler.shown import shown

SAME = 0.005  # a change under half a percent reads as "same": runs vary more than that


@cache
def _template(name: str) -> Template:
    return Template(files("reconciler.forge.templates").joinpath(f"{name}.md").read_text())


def fill(name: str, **values: str) -> str:
    """Template `name` filled in, with the footer; blank runs and line-end spaces dropped."""
    text = _template(name).substitute(footer=_template("footer").template.strip(), **values)
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"


def _fence(text: str, least: int) -> str:
    """Backticks no run in `text` is as long as."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(least, longest + 1)


def quoted(said: str, info: str = "") -> str:
    """Text someone else wrote, as a fenced code block: shown as written."""
    body = shown(said).strip("\n")
    fence = _fence(body, 3)
    return f"{fence}{info}\n{body}\n{fence}"


def unquoted(text: str) -> str:
    """What `quoted` quoted (a check's summary read back from GitHub); other text as is."""
    found = re.fullmatch(r"(`{3,})\n(.*)\n\1", text, re.DOTALL)
    return found[2] if found else text


def code(said: str) -> str:
    """Text someone else wrote, in a line, as a code span: shown as written (in a table
    cell, `table` escapes its '|' as GitHub asks)."""
    body = " ".join(shown(said).split()) or " "
    fence = _fence(body, 1)
    pad = " " if body[0] == "`" or body[-1] == "`" else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def cell(text: str) -> str:
    """Text that stays inside one table cell."""
    return " ".join(text.replace("|", "\\|").split())


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    rule = ["---:" if i in right else "---" for i in range(len(headers))]
    lines = [headers, rule, *[[cell(c) for c in row] for row in rows]]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def number(value: float) -> str:
    """Three significant figures for small values, thousands separators for large ones."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def percent(fraction: float) -> str:
    return f"{fraction * 100:+.1f}%".replace("-", "−")


def short(sha: str) -> str:
    return sha[:12]


# -- plan ------------------------------------------------------------------------------------


PLAN_LINES_PER_GROUP = 50  # a PR comment stays readable (and under GitHub's size limit)


def text(plain: str) -> str:
    """Plain text inside markdown: characters that would start markup are escaped."""
    for char in "\\`*_[]<>|":
        plain = plain.replace(char, "\\" + char)
    return plain


def _indented(plain: str) -> str:
    """A list item's text, its continuation lines indented under its first."""
    return text(plain).replace("\n", "\n  ")


def _plan_summary(view: PlanView) -> str:
    if view.problems:
        listing = quoted("\n".join(view.problems))
        return f"**Invalid files: nothing will be applied.**\n\n{listing}"
    return view.summary


def _plan_group(group: PlanGroup) -> str:
    lines = [f"**{group.title}**", ""]
    if group.error is not None:
        lines += ["Left as it runs:", "", quoted(group.error)]
    if group.lines:
        lines.append(quoted("\n".join(group.lines[:PLAN_LINES_PER_GROUP]), "diff"))
        if (more := len(group.lines) - PLAN_LINES_PER_GROUP) > 0:
            lines.append(f"… and {more} more lines: run `denv plan` to see them all.")
    if group.kept:
        lines.append(f"{group.kept} unit{'s' * (group.kept != 1)} unchanged.")
    if group.endpoint:
        lines.append(f"Endpoint: `{group.endpoint}`")
    return "\n".join(lines)


def _plan_fleets(fleets: Sequence[PlanFleet]) -> str:
    if not fleets:
        return ""
    rows = [
        (
            f.fleet,
            str(f.before),
            str(f.after),
            "…" if f.gpus is None else str(f.gpus),
            "…" if f.trial_gpus is None else str(f.trial_gpus),
        )
        for f in fleets
    ]
    headers = ("fleet", "GPUs in use before", "after", "of", "kept for trials")
    return table(headers, rows, right=(1, 2, 3, 4))


def _plan_details(view: PlanView) -> str:
    if view.problems:
        return ""
    parts = [_plan_group(g) for g in view.groups]
    parts.append("\n".join(f"- {_indented(note)}" for note in view.notes))
    parts.append(_plan_fleets(view.fleets))
    if view.unreachable:
        parts.append("Hosts not reached:\n\n" + quoted("\n".join(view.unreachable)))
    return "\n\n".join(p for p in parts if p)


def _files(paths: Sequence[str]) -> str:
    if not paths:
        return ""
    listing = "\n".join(f"- {code(p)}" for p in paths)
    return f"<details><summary>Files changed ({len(paths)})</summary>\n\n{listing}\n\n</details>"


def render_plan(view: PlanView) -> str:
    return fill(
        "plan",
        head=short(view.head_sha),
        against=f" against `{view.base}`" if view.base else "",
        note=f"> {view.note}" if view.note else "",
        summary=_plan_summary(view),
        details=_plan_details(view),
        files=_files(view.files),
    )


def render_closed(view: ClosedView) -> str:
    return fill("closed", reason=view.reason)


def render_deploy(view: DeployView) -> str:
    return fill(
        "deploy",
        release=view.release,
        origin=view.origin,
        recipe=view.recipe,
        fleet=view.fleet,
        weights=view.weights,
    )


# -- bench -----------------------------------------------------------------------------------


def change(metric: MetricDelta) -> str:
    if metric.current is None or metric.current == 0:
        return "new"
    delta = (metric.candidate - metric.current) / metric.current
    if abs(delta) < SAME:
        return f"{percent(delta)} (same)"
    better = (delta > 0) == metric.higher_is_better
    return f"{percent(delta)} ({'better' if better else 'worse'})"


def _bench_table(row: BenchRow) -> str:
    where = f"{row.hardware}, simulated" if row.simulated else row.hardware
    head = f"#### `{row.subject}` on `{row.fleet}` ({where})"
    if row.result_id:
        head += f", result `{row.result_id}`"
    rows = [
        (
            f"{m.name} ({m.unit})",
            "…" if m.current is None else number(m.current),
            number(m.candidate),
            change(m),
        )
        for m in row.metrics
    ]
    body = table(("metric", "current release", "this PR", "change"), rows, right=(1, 2, 3))
    roofline = f"\n\nRoofline of this PR's result: {row.roofline}" if row.roofline else ""
    return f"{head}\n\n{body}{roofline}"


def _point_name(point: ParetoPoint) -> str:
    # mermaid's quadrant grammar takes letters, digits, spaces and '-' in names
    return re.sub(r"[^A-Za-z0-9 -]+", " ", f"{point.series} {point.label}").strip()


def _scale(value: float, top: float) -> str:
    return f"{min(max(value / top, 0.0), 0.999):.3f}" if top > 0 else "0"


def pareto_chart(points: Sequence[ParetoPoint]) -> str:
    """Throughput per GPU against interactivity as a mermaid quadrant chart (axes 0..1, so
    scaled to 110% of the largest value, which the caption states)."""
    if not points:
        return ""
    top_x = max(p.interactivity for p in points) * 1.1
    top_y = max(p.throughput for p in points) * 1.1
    lines = [
        "```mermaid",
        "quadrantChart",
        "    title Pareto - throughput per GPU against interactivity",
        "    x-axis slower per user --> faster per user",
        "    y-axis fewer tokens per GPU --> more tokens per GPU",
        *(
            f"    {_point_name(p)}: [{_scale(p.interactivity, top_x)}, "
            f"{_scale(p.throughput, top_y)}]"
            for p in points
        ),
        "```",
    ]
    caption = (
        f"x: output tok/s per user, 0 to {number(top_x)}; "
        f"y: output tok/s per GPU, 0 to {number(top_y)}. Up and right is better."
    )
    return "\n".join(lines) + f"\n\n{caption}"


def _bench_tables(view: BenchView) -> str:
    if view.problems:
        refused = "**Invalid or refused files: nothing benched.**"
        listing = "\n".join(view.problems)
        return f"{refused}\n\n{quoted(listing)}"
    return "\n\n".join(_bench_table(r) for r in view.rows) or "No results."


def _failure(failure: BenchFailure) -> str:
    """A list item: who failed, and what the engines and hosts said, quoted under it."""
    block = quoted(failure.error).replace("\n", "\n  ")
    return f"- **{failure.subject} failed**:\n\n  {block}"


def render_bench(view: BenchView) -> str:
    simulated = any(r.simulated for r in view.rows)
    return fill(
        "bench",
        head=short(view.head_sha),
        current=f"`{view.current}`",
        traffic=view.traffic,
        simulated=" Figures marked simulated come from denv's simulator, not GPUs."
        if simulated
        else "",
        tables=_bench_tables(view),
        notes="\n".join(
            [*(f"- {' '.join(note.split())}" for note in view.notes), *map(_failure, view.failures)]
        ),
        chart=pareto_chart(view.pareto),
    )


# -- parity, candidate, rollback -------------------------------------------------------------


def render_parity(view: ParityView) -> str:
    mismatches = ""
    if view.mismatches:
        rows = [(str(m.prompt), str(m.position), code(m.detail)) for m in view.mismatches]
        mismatches = table(("prompt", "token", "difference"), rows, right=(0, 1)) + "\n"
    agreed = view.prompts - view.mismatched
    if view.gating:
        verdict = "pass" if view.passed else "FAIL: this candidate does not ship"
    else:
        verdict = f"{'pass' if view.passed else 'fail'} on the suite this pull request proposes"
    suite = f"Suite: {view.suite}." if view.suite else ""
    if not view.gating:
        suite += " The parity suite changed by this pull request: this verdict does not gate."
    return fill(
        "parity",
        verdict=verdict,
        suite=suite,
        candidate=view.candidate,
        reference=view.reference,
        mode=view.mode,
        rule=view.rule,
        counts=f"{agreed} of {view.prompts} prompts agree; {view.mismatched} differ.",
        mismatches=mismatches,
    )


def render_parities(views: Sequence[ParityView]) -> str:
    """Several verdicts (a pull request's releases) as one parity comment: each rendered from
    the template, all under the first's marker and above the last's footer."""
    bodies = [render_parity(view) for view in views]
    if len(bodies) == 1:
        return bodies[0]
    parts = [strip_marker(b, "parity").rstrip("\n") for b in bodies]
    parts = [p.rsplit("\n", 1)[0].rstrip() for p in parts[:-1]] + parts[-1:]
    return marker("parity") + "\n" + "\n\n---\n\n".join(parts) + "\n"


def _counted(count: int, noun: str) -> str:
    """`1 trial`, `24 trials`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def render_candidate(view: CandidateView) -> str:
    interval, runs = "", _counted(view.repeats, "run") + " each"
    if view.repeats >= 2:
        interval = f" (95% interval {percent(view.ci_low)} to {percent(view.ci_high)})"
    else:  # one run each has no interval (the optimizer's verify.gain_interval)
        runs += " (no interval)"
    rows = [(c.lever, c.current, c.candidate) for c in view.changes]
    figures = [f"| {view.metric} | {number(view.current_value)} | {number(view.candidate_value)} |"]
    measured_at = ""
    if view.current_rate is not None and view.candidate_rate is not None:
        current_rate, candidate_rate = number(view.current_rate), number(view.candidate_rate)
        figures.append(f"| capacity (req/s) | {current_rate} | {candidate_rate} |")
        held = f" `{view.latency_target}`" if view.latency_target else ""
        measured_at = (
            "Each is measured at its capacity: the highest rate of the stage's traffic (its "
            f"own arrival pattern, time-scaled) that holds the latency target{held}.\n"
        )
    return fill(
        "candidate",
        release=view.release,
        target=view.target,
        gain=percent(view.gain),
        metric=view.metric,
        study=view.study,
        goal=view.goal,
        recipes=_recipes(view),
        simulated=" Measured on simulated GPUs." if view.simulated else "",
        changes=table(("lever", "current", "candidate"), rows),
        figures="\n".join(figures),
        measured_at=measured_at,
        interval=interval,
        runs=runs,
        trials=_counted(view.trials, "trial"),
        parity=view.parity,
    )


def _recipes(view: CandidateView) -> str:
    """What the candidate changes: its change in words on the current recipe (which names a
    new recipe when it has one), or the two recipes; never an arrow between equal things."""
    if view.change:
        return f"recipe `{view.current_recipe}`, {view.change}"
    if view.candidate_recipe != view.current_recipe:
        return f"`{view.current_recipe}` → `{view.candidate_recipe}`"
    return f"recipe `{view.current_recipe}` with the changes below"


def render_rollback(view: RollbackView) -> str:
    return fill(
        "rollback",
        release=view.release,
        stage=view.stage,
        to_revision=short(view.to_revision),
        from_revision=short(view.from_revision),
        at=view.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        alarm=view.alarm,
        fleets=", ".join(f"`{f}`" for f in view.fleets),
        observed=view.observed,
        threshold=view.threshold,
        stages="\n".join(f"- {line}" for line in view.stages) or "- —",
    )


def _alarm_table(rows: Sequence[AlarmRow]) -> str:
    if not rows:
        return "No alarms are set for this stage."
    lines = [(r.name, r.observed, r.limit, _verdict(r)) for r in rows]
    return table(("alarm", "observed", "limit", "verdict"), lines)


def _verdict(row: AlarmRow) -> str:
    if not row.judged:
        return "not judged"
    return "ok" if row.ok else "FIRING"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{number(value)} ms"


def _bench_figures(rows: Sequence[BenchFigure], none: str) -> str:
    if not rows:
        return none
    lines = [
        (
            f"`{r.fleet}`",
            r.hardware,
            r.load,
            "—" if r.tok_s_gpu is None else number(r.tok_s_gpu),
            _ms(r.ttft_p99_ms),
            _ms(r.itl_p99_ms),
            _share(r.decode_hbm),
            _share(r.prefill_compute),
            r.source,
            f"`{r.result_id}`",
        )
        for r in rows
    ]
    headers = (
        "fleet",
        "hardware",
        "load",
        "tok/s/GPU",
        "TTFT p99",
        "ITL p99",
        "decode HBM",
        "prefill compute",
        "source",
        "result",
    )
    intro = (
        "the newest result per fleet and load of the recipe this revision runs, with the "
        "share of HBM bandwidth and compute its figures imply (docs/benchmarks.md, Roofline):"
    )
    return intro + "\n\n" + table(headers, lines, right=(3, 4, 5, 6, 7))


def _share(value: float | None) -> str:
    return "—" if value is None else roofline_percent(value)


def render_promotion(view: PromotionView) -> str:
    stamp = "%Y-%m-%d %H:%M:%S UTC"
    return fill(
        "promotion",
        release=view.release,
        revision=short(view.revision),
        from_stage=view.from_stage,
        to_stage=view.to_stage,
        fleets=", ".join(f"`{f}`" for f in view.fleets),
        bake=view.bake,
        baked_from=view.baked_from.astimezone(UTC).strftime(stamp),
        baked_until=view.baked_until.astimezone(UTC).strftime(stamp),
        alarms=_alarm_table(view.alarms),
        parity=view.parity,
        bench=_bench_figures(view.bench, view.bench_none),
        approvals=view.approvals,
    )
