"""`denv recipe show` as a user runs it, piped: the recipe's file whole, never cropped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import Edit

RECIPE = "recipes/llama-3.1-8b/vllm@1.yaml"
URL = "https://docs.vllm.ai/en/latest/" + "/".join(["serving/engine-arguments"] * 8) + "#end"


def test_a_piped_show_prints_long_lines_whole(denv_repo: Path, edit: Edit) -> None:
    edit(RECIPE, "recipe:\n", f"# tuned from {URL}\nrecipe:\n")
    run = subprocess.run(
        [sys.executable, "-m", "reconciler", "recipe", "show", "llama-3.1-8b/vllm@1"],
        capture_output=True,
        text=True,
        cwd=denv_repo,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert len(f"# tuned from {URL}") > 160
    assert f"# tuned from {URL}\n" in run.stdout
    assert (denv_repo / RECIPE).read_text() in run.stdout  # the file as written
