"""The simulator's error table: docs/simulator.md shows what calibration_errors.json holds
(a simulated row's interval: tests/cli/test_bench.py, error_intervals.py's tests)."""

from __future__ import annotations

import re

import pytest

from reconciler.engines.model.error_bands import (
    IN_SAMPLE_FILE,
    ErrorGroup,
    ErrorTable,
    markdown_table,
    read_error_table,
)
from tests.conftest import ROOT

TABLE = ErrorTable(
    generated="test",
    engine="sglang",
    model="deepseek-r1",
    aggregated=(
        ErrorGroup(group="h200", points=17, tok_s_per_gpu=3.2, ttft_p50=6.0, tpot_p50=5.4),
        ErrorGroup(group="all", points=174, tok_s_per_gpu=8.4, ttft_p50=15.0, tpot_p50=9.1),
    ),
    disaggregated=(
        ErrorGroup(group="all", points=137, tok_s_per_gpu=19.0, ttft_p50=49.0, tpot_p50=17.0),
    ),
)


def _doc_table(after: str) -> str:
    """The first Markdown table after the paragraph that starts with `after`."""
    text = (ROOT / "docs" / "simulator.md").read_text()
    tail = text[text.index(after) :]
    found = re.search(r"^\|.*(?:\n\|.*)*", tail, flags=re.MULTILINE)
    assert found is not None, f"no table after {after!r}"
    return found.group(0)


@pytest.mark.parametrize(
    ("heading", "mode"),
    [
        ("**In-sample errors.**", "aggregated"),
        ("**In-sample, disaggregated points**", "disaggregated"),
    ],
)
def test_docs_appendix_shows_the_in_sample_file(heading: str, mode: str) -> None:
    table = read_error_table(IN_SAMPLE_FILE)
    groups = table.aggregated if mode == "aggregated" else table.disaggregated
    assert _doc_table(heading) == markdown_table(groups)


@pytest.mark.parametrize("mode", ["aggregated", "disaggregated"])
def test_docs_show_the_bands_bench_uses(mode: str) -> None:
    """Bench's file holds the cross-validated tables once `--cv --write` has run (shown under
    "Cross-validated errors"); until then the in-sample ones of the appendix."""
    table = read_error_table()
    groups = table.aggregated if mode == "aggregated" else table.disaggregated
    if "--cv" in table.generated:
        heading = "**Cross-validated errors, aggregated**"
        heading = heading if mode == "aggregated" else "**Cross-validated errors, disaggregated**"
        assert _doc_table(heading) == markdown_table(groups)
    else:
        assert table == read_error_table(IN_SAMPLE_FILE)
