"""docs/ui.md's examples run as printed, in a fresh clone (scripts/walk_guides.py's sandbox)."""

from __future__ import annotations

from scripts.walk_guides import walk_guide


def test_the_ui_docs_examples_run_as_printed() -> None:
    outcomes = walk_guide("docs/ui.md")
    assert [o.command.text for o in outcomes] == ["denv ui --export site"]
    assert [o.problems for o in outcomes] == [[]], outcomes[0].stderr[-2000:]
    assert "pages in site; open site/index.html" in outcomes[0].stdout
