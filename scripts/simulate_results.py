#!/usr/bin/env python3
"""Predict the simulated rows `denv bench` ranks and write results/simulated/sim-predict.jsonl.

    .venv/bin/python scripts/simulate_results.py            # predict what is stale, write
    .venv/bin/python scripts/simulate_results.py --check    # exit 1 when the file is stale

Every recipe of recipes/ on every hardware it names (where its weights fit), on every profile
of catalog/workloads.yaml, at the concurrencies of reconciler/engines/model/simulated_results.py,
less what a published or measured result already covers. Rows whose inputs digest is still
current are kept as they are; only new or changed targets are predicted. Run it after changing
a recipe, a workload profile, the hardware or model catalog, or the simulator's constants;
tests/engines/test_simulated_results.py fails until then.
"""

from __future__ import annotations

import argparse
import sys
import time
from multiprocessing import Pool
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from reconciler.cli.common import load  # noqa: E402
from reconciler.engines.model.simulated_results import (  # noqa: E402
    PATH,
    Target,
    digest_of,
    simulate,
    targets,
)
from reconciler.spec.repo import Repo  # noqa: E402
from reconciler.spec.result import Result  # noqa: E402


def wanted(repo: Repo) -> list[Target]:
    return targets(
        repo.recipes.values(),
        repo.hardware,
        repo.models,
        list(repo.workloads.values()),
        repo.results,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether it is stale")
    parser.add_argument("--jobs", type=int, default=2, help="processes")
    args = parser.parse_args()
    repo = load(REPO)
    todo = wanted(repo)
    digests = {t.digest for t in todo}
    held = [r for r in repo.results if r.source.kind == "simulated"]
    kept = [r for r in held if digest_of(r) in digests]
    have = {digest_of(r) for r in kept}
    missing = [t for t in todo if t.digest not in have]
    stale = len(held) - len(kept)
    print(f"{len(todo)} targets: {len(missing)} to predict, {stale} stale rows", file=sys.stderr)
    if args.check:
        sys.exit(1 if missing or stale else 0)
    began = time.time()
    path = REPO / PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(_line(r) for r in kept))
    fresh: list[Result] = []
    with Pool(args.jobs) as pool, path.open("a") as out:
        for done, rows in enumerate(pool.imap_unordered(simulate, missing), start=1):
            out.write("".join(_line(r) for r in rows))  # kept if interrupted: run again
            out.flush()
            fresh += rows
            print(f"  {done}/{len(missing)} {time.time() - began:.0f} s", file=sys.stderr)
    rows = sorted(kept + fresh, key=lambda r: r.id)
    path.write_text("".join(_line(r) for r in rows))
    print(
        f"wrote {len(rows)} rows to {PATH} ({len(fresh)} new) in {time.time() - began:.0f} s",
        file=sys.stderr,
    )


def _line(result: Result) -> str:
    return result.model_dump_json(exclude_none=True, exclude_defaults=True) + "\n"


if __name__ == "__main__":
    main()
