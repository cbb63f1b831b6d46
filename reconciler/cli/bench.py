"""CLI: `denv bench` — rank benchmark results for a workload and latency target,
`denv bench get` — one result in full, and `denv bench compare` — two side by side."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.table import Table
from rich.text import Text

from reconciler.bench import ranked
from reconciler.catalog.cost import parse_price_overrides
from reconciler.catalog.latency import parse_latency_target
from reconciler.catalog.ranking import RankBy, Ranking, Row
from reconciler.catalog.roofline import Roofline, roofline_lines
from reconciler.cli import bench_run
from reconciler.cli.common import JsonOption, RepoOption, console, load, print_json, show
from reconciler.errors import NotFound
from reconciler.spec.loader import RANKING_FILES
from reconciler.spec.repo import Repo
from reconciler.spec.result import Result
from reconciler.spec.words import counted

app = typer.Typer(
    help="Rank benchmark results; show one; compare two; run one.", invoke_without_command=True
)
app.command("run")(bench_run.run)

PriceOption = Annotated[
    list[str] | None,
    typer.Option("--price", help="Your own price, HW=USD per GPU-hour (repeatable)."),
]


def _state_file() -> Path:
    """The last ranking, per user, so `bench get N` can name a row by its number."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "denv" / "last-bench.json"


@app.callback()
def bench(
    ctx: typer.Context,
    workload: Annotated[
        str | None,
        typer.Option(help="Traffic the results must match: a profile of catalog/workloads.yaml."),
    ] = None,
    latency: Annotated[
        str | None,
        typer.Option(help="Latency target, e.g. 'p99<1.5s' or 'ttft:p99<1.5s;itl:p95<50ms'."),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model id or name.")] = None,
    hardware: Annotated[str | None, typer.Option(help="Hardware id, e.g. h200.")] = None,
    rank_by: Annotated[
        Literal["cost", "throughput", "speed"],
        typer.Option(
            "--rank", help="cost: $/M output; throughput: tok/s/GPU; speed: tok/s per user."
        ),
    ] = "cost",
    price: PriceOption = None,
    limit: Annotated[int, typer.Option(help="Rows of each part to show (--json: all).")] = 15,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Rank results for a workload and latency target; misses come after, with the reason."""
    if ctx.invoked_subcommand is not None:
        return
    target = parse_latency_target(latency) if latency else None  # a bad one: before the load
    prices = parse_price_overrides(price or [])
    loaded = load(repo, only=RANKING_FILES)
    ranking = ranked.ranking(
        loaded,
        workload=workload,
        latency=latency,
        model=model,
        hardware=hardware,
        rank_by=rank_by,
        prices=prices,
    )
    _remember(loaded, ranking, prices)
    if as_json:
        print_json(
            {
                "ranked": [r.model_dump(mode="json") for r in ranking.ranked],
                "missed": [r.model_dump(mode="json") for r in ranking.missed],
            }
        )
        return
    criteria = ", ".join(
        f"{k} {v}"
        for k, v in (
            ("workload", workload),
            ("latency", target),
            ("model", model),
            ("hardware", hardware),
        )
        if v
    )
    _print_ranking(ranking, rank_by, limit, criteria or "all results")


def _print_rows(title: str, rows: tuple[Row, ...], start: int, limit: int, part: str) -> None:
    """One part of the ranking; missed rows carry their reason."""
    reasons = part == "missed"
    table = Table(
        *ranked.COLUMNS,
        *(("REASON",) if reasons else ()),
        box=None,
        title=title,
        title_justify="left",
    )
    for number, row in enumerate(rows[:limit], start=start):
        table.add_row(*_cells(number, row), *((row.reason or "",) if reasons else ()))
    console.print(table)
    if len(rows) > limit:
        console.print(f"… {len(rows) - limit} more {part} (--limit, --json)")


def _print_ranking(ranking: Ranking, rank_by: RankBy, limit: int, criteria: str) -> None:
    title = f"{criteria} — ranked by {rank_by} ({ranked.RANK_COLUMN[rank_by]})"
    _print_rows(title, ranking.ranked, 1, limit, "ranked")
    if not ranking.ranked:
        console.print("no result meets the target")
    if ranking.missed:
        _print_rows(
            f"missed ({len(ranking.missed)})",
            ranking.missed,
            len(ranking.ranked) + 1,
            limit,
            "missed",
        )
    rows = ranking.ranked[:limit] + ranking.missed[:limit]
    if any(row.band is not None for row in rows):
        console.print(ranked.SIMULATED_NOTE, markup=False)
    console.print("row details: denv bench get N; '…' = the source does not give the figure")


def _cells(number: int, row: Row) -> list[str]:
    return [str(number), *ranked.row_cells(row)]


def _remember(repo: Repo, ranking: Ranking, prices: dict[str, float]) -> None:
    state = {"repo": repo.label, "prices": prices, "rows": [r.result for r in ranking.rows]}
    path = _state_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(state))
        temporary.replace(path)
    except OSError:
        pass  # remembering is a convenience; the ranking itself was shown


@app.command("get")
def get(
    which: Annotated[
        str, typer.Argument(help="Row number of the last ranking, a result id, or a file.")
    ],
    price: PriceOption = None,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """One result in full: speed, throughput, cost, recipe and source."""
    loaded = load(repo)
    result, prices = find_result(which, lambda: loaded)
    prices.update(parse_price_overrides(price or []))
    details = ranked.describe(loaded, result, prices)
    if as_json:
        print_json(details)
        return
    _print_details(details)


def _row(which: str) -> tuple[str, dict[str, float]]:
    """The result id of row `which` of the last ranking, and the prices it was ranked at."""
    try:
        state = json.loads(_state_file().read_text())
    except (OSError, ValueError) as exc:
        raise NotFound("no ranking to pick a row from: run denv bench first") from exc
    rows: list[str] = state.get("rows", [])
    number = int(which)
    if not 1 <= number <= len(rows):
        raise NotFound(f"row {number} is not in the last ranking (rows 1–{len(rows)})")
    return rows[number - 1], dict(state.get("prices", {}))


def _ms(p: dict[str, float | None]) -> str:
    return "  ".join(f"{k} {show(v, 1)}" for k, v in p.items()) + "  (ms)"


def _print_details(d: dict[str, Any]) -> None:
    speed, tput, cost, recipe = d["speed"], d["throughput"], d["cost"], d["recipe"]
    roofline = Roofline.model_validate(d["roofline"])
    engine = recipe["engine"]
    lines: list[str | Text] = [
        Text(d["result"], style="bold"),
        f"{d['model']} on {d['hardware']}, precision {d['precision'] or '…'}, "
        f"{ranked.workload_text(d['workload'])}, {ranked.load_text(d['load'])}",
        "",
        Text("speed", style="bold"),
        f"  TTFT  {_ms(speed['ttft_ms'])}",
        f"  TPOT  {_ms(speed['tpot_ms'])}",
        f"  ITL   {_ms(speed['itl_ms'])}",
        f"  E2E   {_ms(speed['e2e_ms'])}",
        f"  per user  {show(speed['tok_s_per_user'], 1)} tok/s",
        Text("throughput", style="bold"),
        f"  output {show(tput['output_tok_s'], 0)} tok/s on {counted(tput['gpus'], 'GPU')} = "
        f"{show(tput['output_tok_s_per_gpu'], 1)} tok/s/GPU (total "
        f"{show(tput['total_tok_s_per_gpu'], 1)} tok/s/GPU)",
        Text("cost", style="bold"),
        f"  ${show(cost['usd_per_m_output'], 3)} per M output tokens at "
        f"${show(cost['gpu_hour'])}/GPU-hour ({cost['price_source'] or 'no price'})",
        f"  {cost['formula']}",
        Text("recipe", style="bold"),
        f"  {recipe['id'] or '(no denv recipe)'}: {engine.get('name')} "
        f"{engine.get('version', '…')}"
        + (f" under {engine['orchestrator']}" if engine.get("orchestrator") else "")
        + (f", image {engine['image']}" if engine.get("image") else ""),
        f"  topology {recipe['topology_text'] or '…'}",
    ]
    if recipe["settings"] is not None:
        lines.append(f"  settings {ranked.flat(recipe['settings']) or 'engine defaults'}")
    lines += [Text("roofline", style="bold"), *(f"  {line}" for line in roofline_lines(roofline))]
    source = d["source"]
    lines += [
        Text("source", style="bold"),
        f"  {source['kind']}, {source.get('by', '…')}, {source.get('at', '…')}",
        f"  {source.get('url', '…')}",
        f"  {source.get('citation', '')}",
    ]
    if source.get("notes"):
        lines.append(f"  notes: {source['notes']}")
    for line in lines:  # headings in bold; data is printed as is
        console.print(line, highlight=False, soft_wrap=True)


@app.command("compare")
def compare_results(
    first: Annotated[
        str, typer.Argument(help="Result A: a row number of the last ranking, an id or a file.")
    ],
    second: Annotated[
        str, typer.Argument(help="Result B: a row number of the last ranking, an id or a file.")
    ],
    price: PriceOption = None,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Two results side by side: what each ran, every figure, and B − A; a change within the
    results' uncertainty is no clear difference."""
    # imported here, as in _find_result: `denv bench` (the ranking) starts fast
    from reconciler.bench.compare import compare
    from reconciler.cli.bench_view import print_comparison

    overrides = parse_price_overrides(price or [])
    loaded: list[Repo] = []  # the repository, read only when an id needs it

    def the_repo() -> Repo:
        if not loaded:
            loaded.append(load(repo))
        return loaded[0]

    a, b = (
        ranked.priced(result, {**prices, **overrides}, the_repo)
        for result, prices in (find_result(which, the_repo) for which in (first, second))
    )
    comparison = compare(a, b, ranked.uncertainty(the_repo, a), ranked.uncertainty(the_repo, b))
    if as_json:
        print_json(comparison)
        return
    print_comparison(comparison)


def find_result(
    which: str, the_repo: Callable[[], Repo], files: bool = True
) -> tuple[Result, dict[str, float]]:
    """The one way `bench get`, `bench compare` and `deploy` name a result: a row number of
    the last ranking (with the prices it was ranked at), a result id, or (`files`) a result
    file."""
    from reconciler.bench.results import read_result

    prices: dict[str, float] = {}
    if which.isdigit():
        which, prices = _row(which)
    elif files and (Path(which).suffix == ".json" or Path(which).is_file()):
        return read_result(Path(which)), prices
    loaded = the_repo()
    found = next((r for r in loaded.results if r.id == which), None)
    if found is None:
        also = ", a result id or a .json file" if files else " or a result id"
        raise NotFound(
            f"no result '{which}' in {loaded.label} (give a row number of the last ranking{also})"
        )
    return found, prices
