"""CLI: `denv parity run` — send a parity suite to a reference and a candidate endpoint and
print the verdict (`PARITY 497/512`, then the failing prompts)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.table import Table
from rich.text import Text

from reconciler.cli.common import JsonOption, RepoOption, console, load, print_json
from reconciler.cli.plan import cache_dir
from reconciler.cli.progress import ProgressSink
from reconciler.fleet.drivers.registry import Drivers
from reconciler.parity.runner import (
    DEFAULT_CONCURRENCY,
    RetryPolicy,
    run_parity,
)
from reconciler.parity.suite import Suite
from reconciler.parity.suite_files import load_suite
from reconciler.parity.targets import Reference, candidate_endpoint, is_url, stage_reference
from reconciler.parity.verdict import Verdict
from reconciler.parity.wire import endpoint_base
from reconciler.reconcile.source import GitSource
from reconciler.spec.policy import ParityPolicy
from reconciler.spec.sources import find_root

app = typer.Typer(help="Answer parity: does a candidate answer like the reference?")


@app.command("run")
def run(
    reference: Annotated[
        str,
        typer.Option(help="The reference: a server's URL, or RELEASE/STAGE as it runs now."),
    ],
    candidate: Annotated[
        str,
        typer.Option(
            help="The candidate: a server's URL, or a recipe id deployed on trial GPUs of the "
            "reference's fleet (or --fleet) for the run and torn down after."
        ),
    ],
    fleet: Annotated[
        str | None, typer.Option(help="Where a candidate recipe runs (default: the reference's).")
    ] = None,
    suite: Annotated[
        str | None,
        typer.Option(help="Suite name in policies/parity/, or a .jsonl path (default: policy's)."),
    ] = None,
    mode: Annotated[
        Literal["strict", "tolerant"] | None,
        typer.Option(help="Comparison rule (default: policies/gates.yaml parity.mode)."),
    ] = None,
    top_k: Annotated[
        int | None,
        typer.Option("--top-k", min=1, max=20, help="Tolerant rule's k (default: the policy's)."),
    ] = None,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Prompts in flight at once (each goes to both servers).")
    ] = DEFAULT_CONCURRENCY,
    attempts: Annotated[
        int, typer.Option(min=1, help="Tries per request when a server fails transiently.")
    ] = RetryPolicy.attempts,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Send a suite to both servers greedily and compare the answers; exit 1 unless every
    prompt passes."""
    for url in (reference, candidate):
        if is_url(url):
            endpoint_base(url)  # a malformed URL is an error before anything runs
    loaded = load(repo)
    overrides = {"mode": mode, "top_k": top_k}
    policy = loaded.policies.gates.parity.model_copy(
        update={k: v for k, v in overrides.items() if v is not None}
    )
    prompts = load_suite(find_root(repo), suite or policy.suite)
    # a stage or a recipe is read from git; two URLs need no repository history
    git = not (is_url(reference) and is_url(candidate))
    source = GitSource(str(find_root(repo)), cache_dir()) if git else None
    pair = _Pair(source, reference, candidate, fleet)
    verdict = _compare(pair, prompts, policy, concurrency, RetryPolicy(attempts=attempts))
    if as_json:
        print_json(verdict)
    else:
        _print_verdict(verdict)
    if not verdict.ok:
        raise typer.Exit(1)


@dataclass(frozen=True)
class _Pair:
    """The two servers as given: each a URL, a stage (the reference) or a recipe (the
    candidate, deployed on `fleet`'s trial GPUs); `source` is the repository's history,
    None when both are URLs."""

    source: GitSource | None
    reference: str
    candidate: str
    fleet: str | None


def _compare(
    pair: _Pair,
    prompts: Suite,
    policy: ParityPolicy,
    concurrency: int,
    retry: RetryPolicy,
) -> Verdict:
    """The suite sent to both servers, a candidate recipe deployed for the run and torn
    down after."""
    shown = ProgressSink(unit="prompts")
    drivers = Drivers(warn=lambda m: shown.say(f"warning: {m}"))
    source = pair.source
    try:
        if is_url(pair.reference) or source is None:
            target = Reference(url=pair.reference)
        else:
            target = stage_reference(source, drivers, pair.reference)
        candidate = candidate_endpoint(
            source, drivers, pair.candidate, target, pair.fleet, shown.say
        )
        with shown, candidate as url:
            return run_parity(
                target.url,
                url,
                prompts,
                policy,
                shown.counter("parity"),
                concurrency=concurrency,
                retry=retry,
            )
    finally:
        drivers.close()


def _print_verdict(verdict: Verdict) -> None:
    rule = "strict" if verdict.mode == "strict" else f"tolerant, top {verdict.top_k}"
    console.print(
        Text.assemble(
            (verdict.headline, "bold"),
            f" ({rule}) — suite {verdict.suite}, "
            f"{verdict.exact} exact, {verdict.tolerant} within top {verdict.top_k}, "
            f"{verdict.elapsed_s:.1f}s",
        ),
        highlight=False,
    )
    console.print(f"reference {verdict.reference}\ncandidate {verdict.candidate}", markup=False)
    if not verdict.failures:
        return
    table = Table("PROMPT", "POSITION", "REFERENCE", "CANDIDATE", "IN TOP-K", box=None)
    for outcome in verdict.failures:
        d = outcome.divergence
        if d is None:  # a failure always has a divergence; kept for the type
            continue
        tokens = (Text(repr(d.reference)), Text(repr(d.candidate)))  # as data, never markup
        table.add_row(Text(outcome.id), str(d.position), *tokens, "yes" if d.in_top_k else "no")
    console.print(table)
