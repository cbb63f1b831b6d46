"""The candidates store and table, and a verified candidate as the bot's pull request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.errors import DenvError, NotFound
from reconciler.forge.local import LocalForge
from reconciler.optimize.candidates import Row, Status, StudyState, headers, table
from reconciler.optimize.promote import (
    candidate_view,
    edit_release,
    lever_changes,
    open_pr,
    refusal,
)
from reconciler.optimize.state import StateStore, StudyBusy, shown_storage
from reconciler.optimize.verify import gain_interval
from reconciler.spec.overrides import apply_overrides
from reconciler.spec.recipe import RecipeFile
from reconciler.spec.yamlio import parse_yaml, plain
from tests.conftest import ROOT
from tests.forge.gitrepo import git, init_repo
from tests.labs.release import release_yaml
from tests.optimize.states import row, run, study_state

RELEASE = release_yaml(batch=8, head="# the chat release\n", note="   # deliberately small")


def state(*rows: Row) -> StudyState:
    return study_state(row("current", Status.VERIFIED, 10.0, 400.0), list(rows))


def test_table_shows_changes_against_current_and_ranks_verified_first() -> None:
    rows = table(
        state(
            row("c-slow", Status.REJECTED, 10.05, 390.0, reason="gain +0.5% is not above +3.0%"),
            row(
                "c-fp8",
                Status.REJECTED,
                15.0,
                300.0,
                reason="parity: 3/20 prompts differ",
                parity_passed=False,
            ),
            row("c-win", Status.VERIFIED, 13.0, 420.0, parity_passed=True, pr=2),
        )
    )
    assert headers("throughput")[2:4] == ("GOODPUT/GPU", "RATE")
    assert rows[0] == (
        "current", "(the release as it is)", "10.00", "20.0 req/s", "400 ms", "", "baseline"
    )  # fmt: skip
    assert [r[0] for r in rows[1:]] == ["c-win", "c-fp8", "c-slow"]
    win = rows[1]
    assert win[2:] == (
        "13.00 (+30%)", "26.0 (+30%) req/s", "420 (+5%) ms", "pass", "verified (PR #2)"
    )  # fmt: skip
    assert rows[2][5:] == ("FAIL", "rejected (parity: 3/20 prompts differ)")
    assert rows[3][2] == "10.05 (=)"


def test_a_run_whose_load_generator_fell_behind_is_never_averaged_in() -> None:
    """The figures shown are the mean of the runs that are evidence: a run in which the load
    generator sent fewer requests than its schedule asked is kept (reported) but left out,
    so the row's TTFT-P99 is that of the runs judged to meet the target."""
    behind = run(6.0, 1811.0).model_copy(
        update={"client_behind": True, "miss": "the load generator sent 30.6 of the 34.6 …"}
    )
    current = row("current", Status.VERIFIED, 10.0, 400.0)
    current = current.model_copy(update={"runs": [*current.runs, behind, run(12.0, 500.0)]})
    assert len(current.runs) == 3
    assert current.mean("goal") == pytest.approx(11.0)
    assert current.mean("ttft_p99") == pytest.approx(450.0)
    assert table(state().model_copy(update={"current": current}))[0][2:5] == (
        "11.00", "22.0 req/s", "450 ms"
    )  # fmt: skip


def test_an_inconclusive_candidate_says_so_and_ranks_before_the_rejected() -> None:
    rows = table(
        state(
            row("c-slow", Status.REJECTED, 10.05, 390.0, reason="gain +0.5% is not above +3.0%"),
            row("c-noisy", Status.INCONCLUSIVE, 13.0, 420.0, reason="gain +29.3% is within noise"),
        )
    )
    assert [r[0] for r in rows[1:]] == ["c-noisy", "c-slow"]
    assert rows[1][6] == "inconclusive (gain +29.3% is within noise)"


def test_rows_still_trialing_are_rejected_when_the_run_ended() -> None:
    ended = state(
        row("c-1", Status.VERIFIED, 1.0, 1.0), row("c-2", Status.TRIALING, 1.0, 1.0)
    ).unfinished("interrupted before its trial ended")
    assert [(r.id, r.status, r.reason) for r in ended.candidates] == [
        ("c-1", Status.VERIFIED, None),
        ("c-2", Status.REJECTED, "interrupted before its trial ended"),
    ]


def test_store_round_trip_find_and_lock(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state")
    saved = state(row("c-1", Status.TRIALING, 1.0, 1.0))
    store.save(saved)
    assert store.load("chat-8b", "canary") == saved
    assert store.find_candidate("c-1").key == "chat-8b/canary"
    assert store.find_candidate("chat-8b/canary:c-1").key == "chat-8b/canary"
    with pytest.raises(NotFound):
        store.find_candidate("c-2")
    assert store.runner_pid("chat-8b", "canary") is None
    with store.running("chat-8b", "canary"):
        assert store.runner_pid("chat-8b", "canary") == os.getpid()
    assert store.runner_pid("chat-8b", "canary") is None


def test_a_second_runner_is_refused(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from reconciler.optimize.state import StateStore; "
            "s = StateStore(Path(sys.argv[1]))\n"
            "with s.running('chat-8b', 'canary'):\n"
            "    print('held', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with (
            pytest.raises(StudyBusy, match=f"process {holder.pid}"),
            store.running("chat-8b", "canary"),
        ):
            pass
        assert store.stop("chat-8b", "canary") == holder.pid
        assert holder.wait(timeout=30) != 0  # SIGTERM ended it
        assert store.stop_requested("chat-8b", "canary")
    finally:
        holder.kill()


def test_storage_urls_hide_passwords() -> None:
    assert shown_storage("postgresql://bot:s3cret@db:5432/optuna") == (
        "postgresql://bot:***@db:5432/optuna"
    )
    assert shown_storage("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"


def test_release_edit_keeps_comments_and_adds_missing_maps() -> None:
    doc, _ = parse_yaml("releases/chat-8b/denv.yaml", RELEASE.encode())
    assert doc is not None
    edit_release(doc, None, {"settings": {"max_batch": 64}}, None)
    text = doc.dumps()
    assert "settings: { max_batch: 64 }   # deliberately small" in text
    assert text.replace("max_batch: 64", "max_batch: 8") == RELEASE  # a one-line diff

    doc, _ = parse_yaml("releases/chat-8b/denv.yaml", RELEASE.encode())
    assert doc is not None
    overrides = {"settings": {"max_batch": 8, "kv_cache": {"dtype": "fp8"}}}
    topology = {"mode": "aggregated", "replicas": 2, "gpus": 1, "parallel": {"tp": 1}}
    edit_release(doc, None, overrides, topology)
    text = doc.dumps()
    assert "# the chat release" in text and "# deliberately small" in text
    assert doc.get(["release", "overrides", "settings", "kv_cache", "dtype"]) == "fp8"
    assert doc.get(["release", "overrides", "settings", "max_batch"]) == 8
    assert doc.get(["release", "topology", "replicas"]) == 2


def test_only_verified_candidates_that_passed_parity_ship() -> None:
    failed = row("c-fp8", Status.REJECTED, 1.0, 1.0, parity_passed=False, parity="3/20 differ")
    assert "failed parity" in (refusal(failed) or "")
    trialing = row("c-t", Status.TRIALING, 1.0, 1.0)
    assert "only verified" in (refusal(trialing) or "")
    noisy = row("c-n", Status.INCONCLUSIVE, 1.0, 1.0, reason="within noise", retry="denv x")
    said = refusal(noisy) or ""
    assert said.endswith("only verified candidates ship: `denv x` verifies it again")
    ok = row("c-ok", Status.VERIFIED, 1.0, 1.0, parity_passed=True)
    assert refusal(ok) is None


def test_a_verified_candidate_becomes_a_local_pull_request(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    repo_dir = tmp_path / "repo"
    (repo_dir / "releases/chat-8b").mkdir(parents=True)
    (repo_dir / "releases/chat-8b/denv.yaml").write_text(RELEASE)
    init_repo(repo_dir)
    recipe = root / "recipes/llama-3.1-8b/vllm@1.yaml"
    parsed, _ = parse_yaml(str(recipe), recipe.read_bytes())
    assert parsed is not None
    current = RecipeFile.model_validate(plain(parsed.data)).recipe
    before = apply_overrides(current, {"settings": {"max_batch": 8}}, None)
    after = apply_overrides(current, {"settings": {"max_batch": 64}}, None)
    changes = lever_changes(before, after)
    assert [(c.lever, c.current, c.candidate) for c in changes] == [
        ("settings.max_batch", "8", "64")
    ]
    win = row(
        "c-win",
        Status.VERIFIED,
        13.0,
        420.0,
        parity_passed=True,
        parity="pass (tolerant, 20 of 20 prompts agree)",
        overrides={"settings": {"max_batch": 64}},
        gain=gain_interval([10.0, 10.01], [13.0, 13.02], True),
    )
    study = state(win)
    view = candidate_view(study, win, before, after, simulated=True)
    forge = LocalForge(repo_dir)
    number = open_pr(forge, study, win, view, "main")
    pr = forge.pull_request(number)
    assert pr.head_branch == "optimize/chat-8b-canary"
    diff = git(repo_dir, "diff", "main", pr.head_branch)
    assert "-    settings: { max_batch: 8 }   # deliberately small" in diff
    assert "+    settings: { max_batch: 64 }   # deliberately small" in diff
    assert "gain +30.0% in goodput/GPU (req/s)" in pr.body
    assert "Measured on simulated GPUs" in pr.body
    assert "| capacity (req/s) | 20.0 | 26.0 |" in pr.body
    assert [c for c in forge.comments(number) if "denv:candidate" in c.body]
    # the same winner again: the same pull request, nothing new
    assert open_pr(forge, study, win, view, "main") == number
    with pytest.raises(DenvError, match="failed parity"):
        open_pr(forge, study, win.model_copy(update={"parity_passed": False}), view, "main")


def test_speculative_decoding_with_a_draft_length_becomes_a_one_line_pull_request(
    tmp_path: Path,
) -> None:
    """docs/optimize.md's first example: a settings block the file lacks (it raised KeyError)."""
    repo_dir = tmp_path / "repo"
    (repo_dir / "releases/chat-8b").mkdir(parents=True)
    (repo_dir / "releases/chat-8b/denv.yaml").write_text(RELEASE)
    init_repo(repo_dir)
    spec = {"method": "ngram", "draft_tokens": 4, "draft_model": None}
    win = row(
        "c-spec",
        Status.VERIFIED,
        1300.0,
        420.0,
        parity_passed=True,
        parity="pass",
        recipe="llama-3.1-8b/vllm@1",
        overrides={"settings": {"max_batch": 8, "speculative": spec}},
        topology={"mode": "aggregated", "replicas": 1, "gpus": 1, "parallel": {"tp": 1}},
        gain=gain_interval([1000.0, 1001.0], [1300.0, 1302.0], True),
    )
    study = state(win)
    forge = LocalForge(repo_dir)
    parsed, _ = parse_yaml("r.yaml", (ROOT / "recipes/llama-3.1-8b/vllm@1.yaml").read_bytes())
    assert parsed is not None
    recipe = RecipeFile.model_validate(plain(parsed.data)).recipe
    view = candidate_view(study, win, recipe, recipe, simulated=True)
    number = open_pr(forge, study, win, view, "main")
    diff = git(repo_dir, "diff", "main", forge.pull_request(number).head_branch)
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in "+++---"]
    assert changed == [
        "-    settings: { max_batch: 8 }   # deliberately small",
        "+    settings: { max_batch: 8, speculative: { method: ngram, draft_tokens: 4, "
        "draft_model: null } }   # deliberately small",
    ]


def test_status_and_stop_from_the_command_line(tmp_path: Path) -> None:
    repo_dir = tmp_path / "repo"
    (repo_dir / "releases/chat-8b").mkdir(parents=True)
    (repo_dir / "releases/chat-8b/denv.yaml").write_text(RELEASE)
    init_repo(repo_dir)
    home = tmp_path / "state"
    StateStore(home).save(state(row("c-1", Status.VERIFIED, 1.0, 1.0, pr=4)))
    env = {**os.environ, "DENV_OPTIMIZE_HOME": str(home)}

    def denv(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "reconciler", "optimize", *args, "--repo", str(repo_dir)]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)

    shown = denv("status", "--json")
    assert shown.returncode == 0, shown.stderr
    [study] = json.loads(shown.stdout)
    # saved as running, but no process holds its lock: it died without saying so
    assert (study["target"], study["state"], study["verified"], study["pull_requests"]) == (
        "chat-8b/canary",
        "interrupted",
        ["c-1"],
        [4],
    )
    stopped = denv("stop", "chat-8b/canary", "--json")
    assert json.loads(stopped.stdout) == {"target": "chat-8b/canary", "pid": None, "stopped": False}
    missing = denv("candidates", "chat-8b/prod")
    assert missing.returncode == 1 and "no study for chat-8b/prod yet" in missing.stderr


def test_a_topology_that_drops_a_key_replaces_the_files_topology() -> None:
    text = RELEASE.replace("parallel: { tp: 1 }", "parallel: { tp: 2 }").replace(
        "gpus: 1,", "gpus: 2,"
    )
    doc, _ = parse_yaml("releases/chat-8b/denv.yaml", text.encode())
    assert doc is not None
    # two replicas of one GPU; tp 1 is the default, so the candidate's topology leaves it out
    two = {"mode": "aggregated", "replicas": 2, "gpus": 1}
    edit_release(doc, None, {"settings": {"max_batch": 8}}, two)
    assert plain(doc.get(["release", "topology"])) == two
    assert "# deliberately small" in doc.dumps()
