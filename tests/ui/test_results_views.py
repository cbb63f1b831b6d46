"""The results explorer, a result's page and the compare page over this repository's own
results: the same ranking, words and figures as `denv bench`, `bench get`, `bench compare`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from markupsafe import escape

from reconciler.bench import ranked
from reconciler.bench.compare import compare, figure_text
from reconciler.catalog.latency import parse_latency_target
from reconciler.catalog.ranking import ErrorBand
from reconciler.catalog.roofline import result_roofline, roofline_lines
from reconciler.errors import UsageError
from reconciler.ui.pages import ROUTES
from reconciler.ui.server import UiServer
from reconciler.ui.site import NotFoundPage
from tests.conftest import ROOT
from tests.ui.results_support import head, page, points, state, table_ids
from tests.ui.test_server import get


def test_the_ranking_is_denv_bench_s_for_the_same_filters(tmp_path: Path) -> None:
    args = {"workload": "agent", "latency": "p99<1.5s", "rank": "throughput"}
    options = [f"--{key}={value}" for key, value in args.items()]
    cli = subprocess.run(
        [sys.executable, "-m", "reconciler", "bench", *options, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path)},
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    expected = json.loads(cli.stdout)
    status, html = page("results", args)
    assert status == 200
    assert table_ids(html, "ranked") == [r["result"] for r in expected["ranked"]]
    assert table_ids(html, "missed") == [r["result"] for r in expected["missed"]]
    assert expected["ranked"] and expected["missed"]
    # the CLI's words: its columns, a missed row's reason, a simulated row's band
    assert str(escape(expected["missed"][0]["reason"])) in html
    banded = next(r for r in expected["ranked"] if r["band"] is not None)
    band = ErrorBand.model_validate(banded["band"]).text
    assert f'<td class="kind-simulated">simulated {band}</td>' in html
    for column in ("TTFT p99", "tok/s/GPU", "$/M out", "source"):
        assert f">{escape(column)!s}</th>" in html


def test_filters_change_the_ranking_and_stay_in_the_form() -> None:
    base = table_ids(page("results", {"workload": "agent"})[1], "ranked")
    by_speed = table_ids(page("results", {"workload": "agent", "rank": "speed"})[1], "ranked")
    chat = table_ids(page("results", {"workload": "chat"})[1], "ranked")
    assert base and chat and by_speed
    assert set(chat) != set(base)
    assert by_speed != base
    _, h200 = page("results", {"workload": "chat", "hardware": "h200", "model": "llama-3.1-8b"})
    rows = table_ids(h200, "ranked") + table_ids(h200, "missed")
    assert rows and len(rows) < len(chat)
    found = {r.id: r for r in head().results}
    assert {(found[i].model, found[i].hardware) for i in rows} == {("llama-3.1-8b", "h200")}
    assert 'name="hardware" id="f-hardware" value="h200"' in h200
    assert '<option value="chat" selected>' in h200
    assert '<form class="filters" method="get" action="/results"' in h200


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"latency": "p99<abc"}, None),
        ({"workload": "nope"}, "unknown workload 'nope' (known: chat, agent"),
        ({"rank": "price"}, "unknown rank 'price' (known: cost, throughput, speed)"),
    ],
)
def test_a_bad_filter_shows_the_cli_s_message(params: dict[str, str], message: str | None) -> None:
    if message is None:  # the latency target's own words, as `denv bench --latency` says them
        with pytest.raises(UsageError) as raised:
            parse_latency_target(params["latency"])
        message = str(raised.value)
    status, html = page("results", params)
    assert status == 400
    assert str(escape(message)) in html and 'role="alert"' in html
    assert "Traceback" not in html and not table_ids(html, "ranked")


def test_each_ranked_row_is_a_point_that_opens_its_result() -> None:
    _, html = page("results", {"workload": "chat"})
    shown = points(html)
    rows = ranked.ranking(head(), workload="chat").ranked
    charted = [r for r in rows if r.tok_s_per_user is not None and r.output_tok_s_per_gpu]
    assert set(shown) == {r.result for r in charted}
    for row in charted:
        tag = shown[row.result]
        assert f'href="/results/{row.result}"' in tag
        assert f'data-kind="{row.source}"' in tag and f"kind-{row.source}" in tag
        assert 'aria-label="' + str(escape(row.model)) in tag
    for kind in ("published", "measured", "simulated"):  # the legend
        assert f'<li class="kind-{kind}">' in html
    assert 'class="frontier"' in html and "data-frontier" in html
    for result in table_ids(html, "ranked"):
        assert f'<a href="/results/{result}">' in html


def test_a_result_shows_what_bench_get_shows() -> None:
    repo = head()
    result = next(r for r in repo.results if r.source.kind == "simulated" and r.recipe.id)
    details = ranked.describe(repo, result, {})
    status, html = page("result", {"id": result.id})
    assert status == 200
    assert f"<code>{result.id}</code>" in html
    assert 'data-kind="simulated"' in html
    assert details["recipe"]["id"] in html and details["recipe"]["topology_text"] in html
    assert details["cost"]["formula"] in html
    assert f"{details['throughput']['output_tok_s_per_gpu']:,.1f} tok/s/GPU" in html
    assert f'href="/compare?a={result.id}"' in html
    published = next(r for r in repo.results if r.source.kind == "published" and r.source.url)
    html = page("result", {"id": published.id})[1]
    assert f'href="{escape(str(published.source.url))!s}"' in html
    assert "published" in html


def test_an_unknown_result_is_not_found() -> None:
    with pytest.raises(NotFoundPage, match="no result 'nope'"):
        page("result", {"id": "nope"})


def test_a_result_shows_its_roofline_as_bench_get_does() -> None:
    repo = head()
    result = next(r for r in repo.results if r.source.kind == "published")
    lines = roofline_lines(result_roofline(repo, result))
    html = page("result", {"id": result.id})[1]
    assert f'<p class="roofline-summary">{escape(lines[0])}</p>' in html
    for line in lines[1:]:
        assert f"<li>{escape(line)}</li>" in html


def test_compare_shows_bench_compare_s_figures() -> None:
    repo = head()
    a, b = repo.results[0], repo.results[1]
    status, html = page("compare", {"a": a.id, "b": b.id})
    assert status == 200
    c = compare(ranked.priced(a, {}, lambda: repo), ranked.priced(b, {}, lambda: repo))
    for setting in c.settings:
        assert f"<td>{escape(setting.a)!s}</td><td>{escape(setting.b)!s}</td>" in html
    ttft = next(f for f in c.figures if f.name == "TTFT p99")
    assert f'<td class="num">{figure_text(ttft.a, ttft.unit)}</td>' in html
    assert f'value="{a.id}"' in html and f'value="{b.id}"' in html  # the form, filled in
    # one chosen: the same model's other results to pick from
    html = page("compare", {"a": a.id})[1]
    assert f'href="/compare?a={a.id}&amp;b=' in html
    status, html = page("compare", {"a": a.id, "b": "nope"})
    assert status == 404 and "no result &#39;nope&#39;" in html


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    server = UiServer(state(), ROUTES, "127.0.0.1:0", None)
    try:
        yield server.start()
    finally:
        server.stop()


def test_the_server_answers_bad_filters_and_unknown_results(served: str) -> None:
    status, html, _ = get(served + "results?workload=agent&latency=p99%3Cabc")
    assert status == 400 and "limit &#39;abc&#39;" in html and "<h1>Results</h1>" in html
    assert get(served + "results/nope")[0] == 404
    status, html, _ = get(served + "results?workload=rag&rank=speed&latency=&model=&hardware=")
    assert status == 200 and '<option value="rag" selected>' in html
