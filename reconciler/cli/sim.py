"""CLI: `denv sim` — denv's engine simulator: serve it, ask its performance model."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.table import Table
from rich.text import Text

from reconciler.catalog.latency import format_ms
from reconciler.catalog.workloads import profile_for
from reconciler.cli.common import JsonOption, RepoOption, console, load, print_json
from reconciler.cli.recipe import find_recipe
from reconciler.engines.model import traffic
from reconciler.engines.model.calibration import generation
from reconciler.engines.model.error_intervals import (
    ExpectedError,
    Interval,
    Mode,
    for_prediction,
    read_interval_table,
)
from reconciler.engines.model.predict import MAX_REQUESTS, default_requests
from reconciler.engines.model.predict import predict as run_prediction
from reconciler.engines.model.spec import SimSpec
from reconciler.engines.model.stats import Prediction
from reconciler.engines.sim.faults import Faults
from reconciler.errors import DenvError, NotFound, UsageError
from reconciler.spec.bounds import MAX_JSONL_BYTES, MAX_YAML_BYTES
from reconciler.spec.catalog import Hardware, ModelArch
from reconciler.spec.reading import read_text
from reconciler.spec.recipe import DisaggregatedTopology, Recipe
from reconciler.spec.repo import Repo

app = typer.Typer(
    help="denv's engine simulator: an OpenAI-compatible server with a performance model.",
    no_args_is_help=True,
)


def _load_spec(spec_json: str | None, spec_file: Path | None) -> SimSpec:
    if (spec_json is None) == (spec_file is None):
        raise UsageError("give the simulator's SimSpec as --spec-json JSON or --spec FILE")
    if spec_file is not None:
        spec_json = read_text(spec_file, "simulator spec", MAX_YAML_BYTES)
    try:
        return SimSpec.model_validate_json(spec_json or "")
    except ValidationError as exc:
        where = spec_file or "--spec-json"
        raise UsageError(f"{where}: not a valid SimSpec:\n{exc}") from exc


@app.command()
def serve(
    spec_json: Annotated[
        str | None, typer.Option("--spec-json", help="The SimSpec as JSON.")
    ] = None,
    spec_file: Annotated[
        Path | None, typer.Option("--spec", help="A file holding the SimSpec as JSON.")
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free one).")] = 8000,
    bootstrap_port: Annotated[
        int | None,
        typer.Option(help="With role prefill: the P/D bootstrap port (0: any free one)."),
    ] = None,
    time_scale: Annotated[
        float | None,
        typer.Option(
            min=0.001, help="Run this many times faster than real time (default: the spec's)."
        ),
    ] = None,
    fault_warmup_s: Annotated[
        float | None,
        typer.Option(
            min=0, help="Slow start: /health answers 503 this long (default: the spec's)."
        ),
    ] = None,
    fault_crash_after: Annotated[
        int | None, typer.Option(min=1, help="Exit non-zero after answering N requests.")
    ] = None,
    fault_error_rate: Annotated[
        float, typer.Option(min=0, max=1, help="Fraction of requests answered 500.")
    ] = 0.0,
    fault_spike_ms: Annotated[
        float, typer.Option(min=0, help="Latency spike: modelled ms added to every step.")
    ] = 0.0,
    fault_spike_s: Annotated[
        float | None, typer.Option(min=0, help="How long the spike lasts (default: until cleared).")
    ] = None,
    fault_hang: Annotated[
        bool, typer.Option(help="Start hung: the engine loop stalls and nothing answers.")
    ] = False,
    fault_seed: Annotated[
        int, typer.Option(help="Seed deciding which requests the error rate hits.")
    ] = 0,
) -> None:
    """Serve a simulated engine: OpenAI-compatible, vLLM metrics, faults on demand."""
    spec = _load_spec(spec_json, spec_file)
    if time_scale is not None:
        spec = spec.model_copy(update={"time_scale": time_scale})
    faults = Faults(
        warmup_s=fault_warmup_s,
        crash_after=fault_crash_after,
        error_rate=fault_error_rate,
        spike_ms=fault_spike_ms,
        spike_s=fault_spike_s,
        hang=fault_hang,
        seed=fault_seed,
    )
    asyncio.run(_serve(spec, faults, host, port, bootstrap_port))


def _log(message: str) -> None:
    typer.echo(f"denv sim: {message}", err=True)


def _crash(code: int) -> None:
    _log(f"exit {code}")
    os._exit(code)


async def _serve(
    spec: SimSpec, faults: Faults, host: str, port: int, bootstrap_port: int | None
) -> None:
    from reconciler.engines.sim.server import SimServer  # aiohttp: only when serving

    server = SimServer(spec, faults, log=_log, crash=_crash)
    try:
        listening = await server.start(host, port, bootstrap_port)
    except OSError as exc:
        raise DenvError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    # Everything loaded so far lives as long as the process: keep it out of the cyclic garbage
    # collector's full passes, which would otherwise stall the engine loop for milliseconds.
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    bootstrap = f" (bootstrap port {listening.bootstrap_port})" if listening.bootstrap_port else ""
    typer.echo(
        f"denv sim: serving {spec.served_model} ({spec.role}) at {listening.url}{bootstrap}"
        f" — simulated {spec.hardware.id} × {spec.gpus}, time scale x{spec.time_scale:g}"
    )
    await stop.wait()
    await server.close()


# ---------------------------------------------------------------------------- predict
DEFAULT_CONCURRENCY = 16


RecipeOption = Annotated[str, typer.Option("--recipe", help="Recipe id, e.g. llama-3.1-8b/vllm@1.")]
HardwareOption = Annotated[
    str | None,
    typer.Option("--hardware", help="Hardware id or alias (default: the recipe's first)."),
]
WorkloadOption = Annotated[
    str | None, typer.Option("--workload", help="A profile of catalog/workloads.yaml.")
]
TrafficOption = Annotated[
    Path | None, typer.Option("--traffic", help="A Mooncake JSONL traffic file.")
]
IslOption = Annotated[int | None, typer.Option("--isl", min=1, help="Input tokens.")]
OslOption = Annotated[int | None, typer.Option("--osl", min=1, help="Output tokens.")]
RangeRatioOption = Annotated[
    float,
    typer.Option(
        "--range-ratio",
        min=0.01,
        max=1.0,
        help="With --isl/--osl: draw each length between ratio × N and N, as vLLM bench's "
        "--random-range-ratio (InferenceX uses 0.8).",
    ),
]
ConcurrencyOption = Annotated[
    int | None,
    typer.Option(
        "--concurrency",
        min=1,
        help=f"Closed loop: this many clients (default {DEFAULT_CONCURRENCY}; with "
        "--traffic, the trace's own send times).",
    ),
]
RateOption = Annotated[
    float | None,
    typer.Option("--rate", min=0.001, help="Open loop: Poisson arrivals per second."),
]
RequestsOption = Annotated[
    int | None,
    typer.Option(
        "--requests",
        min=1,
        max=MAX_REQUESTS,
        help="Requests to send (default: 11 per client, a minute of arrivals, or the "
        "whole trace); the first client's worth are warm-up.",
    ),
]


@app.command()
def predict(
    recipe_id: RecipeOption,
    hardware_id: HardwareOption = None,
    workload: WorkloadOption = None,
    traffic_file: TrafficOption = None,
    isl: IslOption = None,
    osl: OslOption = None,
    range_ratio: RangeRatioOption = 1.0,
    concurrency: ConcurrencyOption = None,
    rate: RateOption = None,
    requests: RequestsOption = None,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Predict a recipe's latency and throughput with the simulator's performance model."""
    if sum(x is not None for x in (workload, traffic_file, isl or osl)) != 1 or (
        (isl is None) != (osl is None)
    ):
        raise UsageError("give one of --workload W, --traffic FILE, or --isl N with --osl N")
    if concurrency is not None and rate is not None:
        raise UsageError("give --concurrency or --rate, not both")
    loaded = load(repo)
    recipe = find_recipe(loaded, recipe_id)
    hardware, chosen = _chosen_hardware(loaded, recipe, hardware_id)
    model = loaded.models[recipe.model]
    if traffic_file is None and rate is None and concurrency is None:
        concurrency = DEFAULT_CONCURRENCY
    count = requests or default_requests(concurrency, rate)
    load_requests = _requests(loaded, workload, traffic_file, isl, osl, range_ratio, count)
    if requests is None and traffic_file is not None:
        load_requests = load_requests[:MAX_REQUESTS]
    if rate is not None:
        load_requests = traffic.poisson(load_requests, rate)
    result = run_prediction(recipe, hardware, model, load_requests, concurrency, rate=rate)
    error = _expected_error(result, recipe, hardware, model)
    if as_json:
        print_json(
            {
                **result.model_dump(mode="json"),
                "hardware_chosen": chosen,
                "expected_error": error.model_dump(),
            }
        )
    else:
        _render(result, error, chosen, workload or traffic_file or f"{isl} in / {osl} out")


def _chosen_hardware(repo: Repo, recipe: Recipe, given: str | None) -> tuple[Hardware, str]:
    """The hardware to predict on, and how it was chosen (shown with the prediction)."""
    hardware = _hardware(repo, given or recipe.hardware[0])
    if given:
        return hardware, f"{hardware.id}: --hardware {given}"
    return hardware, (
        f"{hardware.id}: the recipe's first of {', '.join(recipe.hardware)} "
        "(--hardware to choose another)"
    )


def _expected_error(
    p: Prediction, recipe: Recipe, hardware: Hardware, model: ModelArch
) -> ExpectedError:
    """The 80% interval of the cross-validated errors (docs/simulator.md, "Errors")."""
    mode: Mode = (
        "disaggregated" if isinstance(recipe.topology, DisaggregatedTopology) else "aggregated"
    )
    return for_prediction(
        read_interval_table(),
        {
            "output_tok_s_per_gpu": p.output_tok_s_per_gpu,
            "ttft_p50_ms": p.ttft_ms.p50,
            "tpot_p50_ms": p.tpot_ms.p50,
        },
        hardware.id,
        generation(hardware.id, hardware.vendor),
        model,
        recipe.engine.name,
        mode,
        p.concurrency,
    )


def _hardware(repo: Repo, key: str) -> Hardware:
    found = repo.resolve_hardware(key)
    if found is None:
        raise NotFound(f"unknown hardware '{key}' (known: {', '.join(sorted(repo.hardware))})")
    return found


def _requests(
    repo: Repo,
    workload: str | None,
    traffic_file: Path | None,
    isl: int | None,
    osl: int | None,
    range_ratio: float,
    count: int,
) -> list[traffic.Request]:
    if workload is not None:
        profile = profile_for(workload, list(repo.workloads.values()))
        return traffic.workload(profile, count)
    if traffic_file is not None:
        text = read_text(traffic_file, "traffic file", MAX_JSONL_BYTES)
        return traffic.traced(traffic.parse_traffic(text, str(traffic_file)))[:count]
    assert isl is not None and osl is not None
    return traffic.fixed(isl, osl, count, range_ratio)


def _render(
    p: Prediction,
    error: ExpectedError,
    chosen: str,
    shape: str | Path,
) -> None:
    load_text = (
        f"{p.concurrency} clients"
        if p.concurrency
        else (f"{p.rate:g} req/s" if p.rate else "trace timing")
    )
    console.print(
        Text.assemble(
            ("SIMULATED", "bold"), f" — {p.recipe} on {p.gpus} × {p.hardware}, {shape}, {load_text}"
        )
    )
    console.print(f"hardware {chosen}", markup=False, highlight=False)
    table = Table()
    table.add_column("metric")
    table.add_column("p50", justify="right")
    table.add_column("80% interval", justify="right")
    table.add_column("p99", justify="right")
    for name, pct, interval in (
        ("TTFT ms", p.ttft_ms, error.ttft_p50_ms),
        ("TPOT ms", p.tpot_ms, error.tpot_p50_ms),
        ("ITL ms", p.itl_ms, None),
        ("E2E ms", p.e2e_ms, None),
    ):
        table.add_row(name, f"{pct.p50:,.1f}", _interval(interval), f"{pct.p99:,.1f}")
    table.add_row("output tok/s", f"{p.output_tok_s:,.0f}", "", "")
    table.add_row(
        "output tok/s/GPU",
        f"{p.output_tok_s_per_gpu:,.1f}",
        _interval(error.output_tok_s_per_gpu),
        "",
    )
    table.add_row("total tok/s/GPU", f"{p.total_tok_s_per_gpu:,.1f}", "", "")
    console.print(table)
    rejected = f"; {p.errors} too large, rejected" if p.errors else ""
    console.print(
        "Predicted by denv's performance model (docs/simulator.md), not measured on hardware: "
        f"{p.requests} requests after {p.warmup} warm-up{rejected}.",
        markup=False,
    )
    kind = error.basis.partition(", ")[0]
    basis = (
        "80% intervals (the measured figure falls inside 8 times in 10; denv bench shows the "
        f"same, in percent) from the {kind} of {error.cell} ({error.points} points)"
    )
    notes = [basis, *([error.fallback.capitalize()] if error.fallback else [])]
    notes += [f"widened: {'; '.join(error.widened)}"] if error.widened else []
    console.print(". ".join(notes) + ".", markup=False)


def _interval(interval: Interval | None) -> str:
    return f"{interval.lo:,.1f}–{interval.hi:,.1f}" if interval else ""


PeakOption = Annotated[
    float | None,
    typer.Option("--peak", min=0.001, help="The traffic's busiest arrival rate, requests/s."),
]
TroughOption = Annotated[
    float | None,
    typer.Option("--trough", min=0.0, help="The traffic's quietest arrival rate, requests/s."),
]
PolicyOption = Annotated[
    str, typer.Option("--policy", help="A scaling policy of policies/scaling.yaml.")
]


@app.command()
def capacity(
    recipe_id: RecipeOption,
    workload: Annotated[
        str, typer.Option("--workload", help="A profile of catalog/workloads.yaml.")
    ],
    hardware_id: HardwareOption = None,
    policy_name: PolicyOption = "default",
    peak: PeakOption = None,
    trough: TroughOption = None,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """What one replica serves at an elastic stage's latency targets (the scaling policy's; a
    stage's latency alarms replace them), as the autoscaler predicts it; with --peak (and
    --trough), the replica bounds that traffic needs (docs/scaling.md)."""
    from reconciler.rollout.capacity import replica_capacity, targets
    from reconciler.spec.scaling import suggested_bounds

    loaded = load(repo)
    recipe = find_recipe(loaded, recipe_id)
    hardware, chosen = _chosen_hardware(loaded, recipe, hardware_id)
    policy = loaded.policies.scaling.get(policy_name)
    if policy is None:
        known = ", ".join(sorted(loaded.policies.scaling))
        raise NotFound(f"no scaling policy '{policy_name}' (known: {known})")
    profile = profile_for(workload, list(loaded.workloads.values()))
    sample = traffic.workload(profile, 1000)
    lengths = (
        round(sum(r.prompt for r in sample) / len(sample)),
        round(sum(r.output for r in sample) / len(sample)),
    )
    wanted = targets(policy, {})
    found = replica_capacity(recipe, hardware, loaded.models[recipe.model], *lengths, wanted)
    per_replica = found * policy.target_utilization if found is not None else None
    bounds = suggested_bounds(per_replica, peak, trough)
    if as_json:
        print_json(
            {
                "simulated": True,
                "recipe": recipe.id,
                "hardware": hardware.id,
                "workload": workload,
                "lengths": {"input": lengths[0], "output": lengths[1]},
                "targets": [{"metric": m, "stat": s, "max_s": v} for m, s, v in wanted],
                "capacity_rps": found,
                "target_utilization": policy.target_utilization,
                "per_replica_rps": per_replica,
                "bounds": bounds,
            }
        )
        return
    held = ", ".join(f"{m.upper()} {s} ≤ {format_ms(v * 1000)}" for m, s, v in wanted)
    console.print(
        Text.assemble(("SIMULATED", "bold"), f" — {recipe.id} on {hardware.id}, {workload}")
    )
    console.print(f"hardware {chosen}", markup=False, highlight=False)
    if found is None or per_replica is None:
        console.print(f"one replica does not hold {held} at any rate", markup=False)
        raise typer.Exit(1)
    console.print(
        f"mean lengths {lengths[0]:,} in / {lengths[1]:,} out: one replica holds "
        f"{found:.3g} req/s at {held}; policy {policy_name} runs it at "
        f"{policy.target_utilization:.0%}: {per_replica:.3g} req/s per replica",
        markup=False,
        highlight=False,
    )
    if bounds is not None:
        console.print(
            f"for {trough or 0:g}–{peak:g} req/s: replicas: {{ min: {bounds['min']}, "
            f"max: {bounds['max']}, policy: {policy_name} }}",
            markup=False,
            highlight=False,
        )
