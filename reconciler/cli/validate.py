"""CLI: `denv validate` and `denv schema`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from reconciler.cli.common import JsonOption, open_checked, print_json
from reconciler.errors import SpecError
from reconciler.spec.schema import FILE_KINDS, schema_for


def validate(
    path: Annotated[Path, typer.Argument(help="Repository folder (default: current).")] = Path("."),
    rev: Annotated[str | None, typer.Option("--rev", help="Validate this git revision.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Check every denv file and the references between them; print every error at once."""
    repo = open_checked(path, rev)
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
        print_json(
            {
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
        )
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
