"""CLI: `denv validate` and `denv schema`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from reconciler.cli.common import JsonOption, open_checked, print_json
from reconciler.errors import Problem, SpecError, UsageError
from reconciler.spec.bounds import MAX_YAML_BYTES
from reconciler.spec.loader import load_pr_policy
from reconciler.spec.repo import Repo
from reconciler.spec.schema import FILE_KINDS, schema_for


def validate(
    path: Annotated[Path, typer.Argument(help="Repository folder (default: current).")] = Path("."),
    rev: Annotated[str | None, typer.Option("--rev", help="Validate this git revision.")] = None,
    pr_policy: Annotated[
        bool,
        typer.Option(
            "--pr-policy",
            help="Also judge the files as a pull request's: each field the PR policy "
            "(policies/pr.yaml, else its defaults) refuses, with the rule (docs/github.md).",
        ),
    ] = False,
    pr_policy_file: Annotated[
        Path | None,
        typer.Option(
            "--pr-policy-file",
            metavar="FILE",
            help="--pr-policy with the policy of FILE instead of policies/pr.yaml.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Check every denv file and the references between them; print every error at once."""
    repo = open_checked(path, rev)
    if pr_policy or pr_policy_file is not None:
        repo.problems.extend(_pr_policy_problems(repo, pr_policy_file))
    counts = {
        "recipes": len(repo.recipes),
        "fleets": len(repo.fleets),
        "releases": len(repo.releases),
        "results": len(repo.results),
        "hardware": len(repo.hardware),
        "offers": len(repo.offers),
        "models": len(repo.models),
    }
    if as_json:
        print_json(_as_json(repo, counts))
        if repo.errors:
            raise typer.Exit(1)
        return
    if repo.errors:
        raise SpecError(repo.problems)
    for warning in sorted(repo.problems):
        typer.echo(str(warning), err=True)
    summary = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    typer.echo(
        f"ok: {repo.label}: {summary}"
        + (f"; {len(repo.problems)} warning(s)" if repo.problems else "")
    )


def _as_json(repo: Repo, counts: dict[str, int]) -> dict[str, Any]:
    return {
        "ok": not repo.errors,
        "source": repo.label,
        "counts": counts,
        "problems": [
            {
                "path": p.path,
                "line": p.line,
                "col": p.col,
                "message": p.message,
                "warning": p.warning,
            }
            for p in sorted(repo.problems)
        ],
    }


def _pr_policy_problems(repo: Repo, file: Path | None) -> list[Problem]:
    """What the PR policy refuses in `repo`: the policy of `file`, else the repository's own
    (policies/pr.yaml, or the defaults); a `file` that is not a valid policy: its problems."""
    from reconciler.engines.pr_policy import pr_refusals

    if file is None:
        return pr_refusals(repo)
    from reconciler.spec.reading import UnreadableFile, read_bounded

    try:
        data = read_bounded(file, MAX_YAML_BYTES)
    except UnreadableFile as exc:
        raise UsageError(f"--pr-policy-file {file}: {exc}") from None
    policy, problems = load_pr_policy(str(file), data)
    return problems if policy is None else problems + pr_refusals(repo, policy)


def schema(
    out: Annotated[
        Path | None, typer.Option("--out", help="Write <kind>.schema.json here.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """JSON Schema of every file kind (for editors: yaml-language-server)."""
    schemas = {kind: schema_for(kind) for kind in FILE_KINDS}
    if out is None:
        print_json(schemas)
        return
    out.mkdir(parents=True, exist_ok=True)
    for kind, document in schemas.items():
        (out / f"{kind}.schema.json").write_text(json.dumps(document, indent=2) + "\n")
    if as_json:
        print_json({"written": sorted(str(out / f"{kind}.schema.json") for kind in schemas)})
    else:
        typer.echo(f"wrote {len(schemas)} schemas to {out}")
