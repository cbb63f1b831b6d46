"""`denv ui --export`'s explorer: a page for the default view and for each workload × rank,
one page for each result they list, no compare page; the exported form goes by file."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

from reconciler.bench.ranked import RANK_BY
from reconciler.ui.export import export
from reconciler.ui.site import export_name
from tests.ui.results_support import RESULT_ROUTES, small, state, table_ids


def test_the_export_writes_each_workload_and_rank_and_their_results(tmp_path: Path) -> None:
    seen = state(small())
    folder = tmp_path / "site"
    written = {p.name for p in export(seen, RESULT_ROUTES, folder) if p.suffix == ".html"}
    workloads = list(seen.repo.workloads) if seen.repo else []
    views: list[dict[str, str]] = [{}] + [
        {k: v for k, v in (("workload", w), ("rank", r)) if v and v != "cost"}
        for w in ["", *workloads]
        for r in RANK_BY
    ]
    pages = {export_name("results", [], view) for view in views}
    assert "results.html" in pages and "results--rank-speed--workload-chat.html" in pages
    assert len(pages) == (len(workloads) + 1) * len(RANK_BY)
    assert pages <= written
    assert not [name for name in written if name.startswith("compare")]

    listed: set[str] = set()
    for name in pages:
        html = (folder / name).read_text()
        listed.update(table_ids(html, "ranked") + table_ids(html, "missed"))
        for link in re.findall(r'href="([^"#?]+\.html)"', html):
            assert (folder / link).is_file(), (name, link)  # every link opens
    assert listed and {export_name("result", [r], {}) for r in listed} == written - pages

    chat = (folder / "results--workload-chat.html").read_text()
    assert '<option value="chat" selected>' in chat
    assert 'name="latency"' not in chat and 'method="get"' not in chat  # no server to ask
    found = re.search(r'data-export-pages="([^"]+)"', chat)
    assert found is not None
    by_view = json.loads(unescape(found.group(1)))  # what denv.js goes by
    assert set(by_view.values()) == pages
    assert by_view["chat|speed"] == "results--rank-speed--workload-chat.html"
    assert by_view["|cost"] == "results.html"

    result = (folder / export_name("result", [sorted(listed)[0]], {})).read_text()
    assert "Compare with" not in result and 'href="results.html"' in result
