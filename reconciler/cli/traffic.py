"""CLI: `denv traffic` — traffic shapes (Mooncake JSONL): generate the standard workloads,
describe a file, record one from live traffic through a proxy."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from reconciler.bench.traffic import (
    WORKLOADS,
    TraceStats,
    generate,
    read_trace,
    trace_digest,
    trace_stats,
    write_trace,
)
from reconciler.cli.common import JsonOption, RepoOption, console, load, print_json, show
from reconciler.errors import DenvError, UsageError
from reconciler.spec.base import Spec

app = typer.Typer(
    help="Traffic shapes: generate workloads, describe a trace, record live traffic.",
    no_args_is_help=True,
)


class Described(Spec):
    file: str
    digest: str
    stats: TraceStats


@app.command("generate")
def generate_command(
    workload: Annotated[
        str,
        typer.Option(
            "--workload", help=f"A profile of catalog/workloads.yaml ({', '.join(WORKLOADS)}, …)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="The JSONL file to write.")],
    requests: Annotated[int, typer.Option("--requests", min=1, help="How many requests.")] = 1000,
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate", min=0.001, help="Poisson arrivals per second (default: all at once)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="The same seed gives the same file.")] = 0,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Write a synthetic trace of a standard workload."""
    lines = generate(workload, requests, seed, rate, profiles=load(repo).workloads)
    try:
        write_trace(lines, out)
    except OSError as exc:
        raise DenvError(f"{out}: cannot write the trace: {exc.strerror or exc}") from exc
    _report(Described(file=str(out), digest=trace_digest(lines), stats=trace_stats(lines)), as_json)


@app.command()
def stats(
    file: Annotated[Path, typer.Argument(help="A Mooncake JSONL trace.")],
    as_json: JsonOption = False,
) -> None:
    """Rate, burstiness, length distributions and prefix reuse of a trace."""
    lines = read_trace(file)
    _report(
        Described(file=str(file), digest=trace_digest(lines), stats=trace_stats(lines)), as_json
    )


def _report(described: Described, as_json: bool) -> None:
    if as_json:
        print_json(described)
        return
    s = described.stats
    console.print(
        f"{described.file}: {s.requests:,} requests over {s.duration_s:,.1f} s", markup=False
    )
    table = Table()
    for column in ("figure", "value"):
        table.add_column(column, justify="right" if column == "value" else "left")
    table.add_row("rate (req/s)", show(s.rate_rps))
    table.add_row("burstiness (CV of gaps)", show(s.burstiness))
    for name, lengths in (("input tokens", s.input), ("output tokens", s.output)):
        table.add_row(
            f"{name} p50 / p90 / p99",
            f"{lengths.p50:,.0f} / {lengths.p90:,.0f} / {lengths.p99:,.0f}",
        )
        table.add_row(
            f"{name} mean (min – max)", f"{lengths.mean:,.0f} ({lengths.min:,} – {lengths.max:,})"
        )
    table.add_row("prefix reuse (blocks seen before)", f"{s.prefix_reuse:.1%}")
    table.add_row("blocks (unique)", f"{s.blocks:,} ({s.unique_blocks:,})")
    console.print(table)
    console.print(f"digest sha256:{described.digest}", markup=False)


# ---------------------------------------------------------------------------- record


def parse_listen(value: str) -> tuple[str, int]:
    """'HOST:PORT' (IPv6 in brackets: '[::1]:8080') -> host, port."""
    host, sep, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--listen '{value}': expected HOST:PORT, e.g. 127.0.0.1:8080")
    return host, int(port)


class Recorded(Spec):
    file: str
    upstream: str
    recorded: int
    passed: int
    unrecorded: dict[str, int]


@app.command()
def record(
    listen: Annotated[
        str, typer.Option("--listen", help="HOST:PORT the proxy listens on (port 0: any free).")
    ],
    upstream: Annotated[
        str,
        typer.Option(
            "--upstream", help="The OpenAI-compatible endpoint, e.g. http://10.0.1.11:8000."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="The JSONL shape file to write.")],
    as_json: JsonOption = False,
) -> None:
    """Record a traffic shape: a proxy that passes every request through and writes only
    arrival times, token counts and prompt block ids (never text). Stop with Ctrl-C."""
    host, port = parse_listen(listen)
    if not upstream.startswith(("http://", "https://")):
        raise UsageError(f"--upstream '{upstream}': expected an http:// or https:// URL")
    summary = asyncio.run(_record(host, port, upstream, out))
    if as_json:
        print_json(summary)
        return
    console.print(
        f"recorded {summary.recorded:,} requests to {summary.file}; "
        f"{summary.passed:,} other requests passed through",
        markup=False,
    )
    for reason, count in sorted(summary.unrecorded.items()):
        console.print(f"  not recorded: {count:,} × {reason}", markup=False)


def _log(message: str) -> None:
    typer.echo(f"denv traffic: {message}", err=True)


async def _record(host: str, port: int, upstream: str, out: Path) -> Recorded:
    from reconciler.bench.recorder import Recorder  # aiohttp: only when recording

    recorder = Recorder(upstream, out, log=_log)
    url = await recorder.start(host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    _log(f"recording at {url} for {upstream} into {out}; Ctrl-C stops")
    try:
        if console.is_terminal:
            with console.status("recording") as status:
                while not stop.is_set():
                    counts = recorder.counts
                    status.update(f"recording: {counts.recorded:,} requests")
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), 0.5)
        else:
            await stop.wait()
    finally:
        await recorder.close()
    counts = recorder.counts
    return Recorded(
        file=str(out),
        upstream=upstream,
        recorded=counts.recorded,
        passed=counts.passed,
        unrecorded=counts.unrecorded,
    )
