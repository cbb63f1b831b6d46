"""View: the optimizer's studies as `denv optimize status` lists them, and each study's
candidates as `denv optimize candidates` tables them (optimize/candidates.py's `headers` and
`table`: change, figures against the current release, parity, status), with the pull request
each verified candidate became. Studies live in the repository's git directory: --repo must
be a folder."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.optimize.candidates import headers, ranked, table
from reconciler.ui.pulls import pr_link
from reconciler.ui.site import Page
from reconciler.ui.state import UiState


def optimize(state: UiState, params: Mapping[str, str]) -> Page:
    rows = {row.target: row for row in state.study_rows}
    studies: list[dict[str, Any]] = []
    for study in state.studies:
        row = rows.get(study.key)
        cells = table(study)
        # the table's first row is the current release, then the candidates in ranked order
        candidates = [None, *ranked(study)]
        studies.append(
            {
                "key": study.key,
                "anchor": f"study-{study.release}-{study.stage}",
                "study": study,
                "status": row,
                "prs": [pr_link(state, n) for n in (row.pull_requests if row else [])],
                "headers": headers(study.goal),
                "rows": [
                    {
                        "id": candidate.id if candidate is not None else "current",
                        "cells": cells,
                        "pr": pr_link(state, candidate.pr) if candidate is not None else None,
                        "kind": _kind(candidate.status.value) if candidate is not None else "",
                    }
                    for cells, candidate in zip(cells, candidates, strict=True)
                ],
            }
        )
    return Page("optimize.html", "Optimizer", {"studies": studies})


def _kind(status: str) -> str:
    return {"verified": "green", "rejected": "bad", "trialing": "deploying"}.get(status, "idle")
