"""The runner against scripted servers of the tests' own: a top-k divergence passes tolerant
and fails strict; transient errors are retried; anything that keeps a prompt from being
compared is an error, never a verdict; concurrency is bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.errors import ParityError
from reconciler.parity.runner import RetryPolicy, run_parity
from reconciler.parity.suite import Suite
from reconciler.parity.suite_files import load_suite
from reconciler.spec.policy import ParityPolicy
from tests.conftest import ROOT
from tests.parity.scripted import Scripted, Steps, serving, write_suite

FAST = RetryPolicy(attempts=3, first_wait_s=0.01, max_wait_s=0.02, timeout_s=10)
SAME: Steps = [(" a", [" a", " q"]), (" b", [" b"]), (" c", [" c"])]
# position 1 differs; each side lists the other's token second
REF_TOPK: Steps = [(" a", [" a"]), (" b", [" b", " x"]), (" c", [" c"])]
CAND_TOPK: Steps = [(" a", [" a"]), (" x", [" x", " b"]), (" y", [" y"])]
# position 0 differs; neither lists the other's token
REF_FAR: Steps = [(" m", [" m", " n"])]
CAND_FAR: Steps = [(" z", [" z", " w"])]


def suite(tmp_path: Path, kind: str = "chat") -> Suite:
    prompts = {"same": "same?", "topk": "top-k?", "far": "far?"}
    return load_suite(ROOT, str(write_suite(tmp_path / "three.jsonl", prompts, kind)))


def servers() -> tuple[Scripted, Scripted]:
    reference = Scripted({"same?": SAME, "top-k?": REF_TOPK, "far?": REF_FAR})
    candidate = Scripted({"same?": SAME, "top-k?": CAND_TOPK, "far?": CAND_FAR})
    return reference, candidate


@pytest.mark.parametrize("kind", ["chat", "completion"])
def test_a_top_k_divergence_passes_tolerant_and_fails_strict(tmp_path: Path, kind: str) -> None:
    reference, candidate = servers()
    prompts = suite(tmp_path, kind)
    with serving(reference.app()) as ref_url, serving(candidate.app()) as cand_url:
        tolerant = run_parity(ref_url, cand_url, prompts, ParityPolicy(), retry=FAST)
        strict = run_parity(ref_url, cand_url, prompts, ParityPolicy(mode="strict"), retry=FAST)
    assert tolerant.headline == "PARITY 2/3"
    assert [(o.id, o.divergence) for o in tolerant.tolerated] == [
        ("topk", tolerant.tolerated[0].divergence)
    ]
    assert [o.id for o in tolerant.failures] == ["far"]
    far = tolerant.failures[0].divergence
    assert far is not None and (far.position, far.reference, far.candidate) == (0, " m", " z")
    assert strict.headline == "PARITY 1/3"
    assert [o.id for o in strict.failures] == ["topk", "far"]
    topk = strict.failures[0].divergence
    assert topk is not None
    assert (topk.position, topk.reference, topk.candidate, topk.in_top_k) == (1, " b", " x", True)


def test_k_decides_whether_a_divergence_is_tolerated(tmp_path: Path) -> None:
    """The other's token is listed second: k=1 does not reach it."""
    reference, candidate = servers()
    with serving(reference.app()) as ref_url, serving(candidate.app()) as cand_url:
        verdict = run_parity(ref_url, cand_url, suite(tmp_path), ParityPolicy(top_k=1), retry=FAST)
    assert verdict.headline == "PARITY 1/3"


def test_transient_errors_are_retried(tmp_path: Path) -> None:
    reference, candidate = servers()
    candidate.statuses = [503, 502, 429]
    with serving(reference.app()) as ref_url, serving(candidate.app()) as cand_url:
        verdict = run_parity(ref_url, cand_url, suite(tmp_path), ParityPolicy(), retry=FAST)
    assert verdict.headline == "PARITY 2/3"
    assert candidate.requests == 3 + 3


def test_errors_that_last_end_the_run_without_a_verdict(tmp_path: Path) -> None:
    reference, candidate = servers()
    candidate.statuses = [503] * 100
    failed = pytest.raises(ParityError, match=r"did not run completely: candidate .* after 3")
    with serving(reference.app()) as ref_url, serving(candidate.app()) as cand_url, failed:
        run_parity(ref_url, cand_url, suite(tmp_path), ParityPolicy(), retry=FAST)


def test_a_refusal_is_not_retried(tmp_path: Path) -> None:
    reference, candidate = servers()
    candidate.statuses = [400]
    failed = pytest.raises(ParityError, match=r"answered HTTP 400: .*scripted 400")
    with serving(reference.app()) as ref_url, serving(candidate.app()) as cand_url, failed:
        run_parity(ref_url, cand_url, suite(tmp_path), ParityPolicy(), concurrency=1, retry=FAST)
    assert candidate.requests == 1


def test_an_endpoint_that_is_not_there_is_an_error(tmp_path: Path) -> None:
    reference, _ = servers()
    with serving(reference.app()) as ref_url:
        with serving(Scripted({}).app()) as gone:
            pass  # its port is closed again: connections are refused
        with pytest.raises(ParityError, match=r"candidate .* failed to list its models"):
            run_parity(ref_url, gone, suite(tmp_path), ParityPolicy(), retry=FAST)


def test_answers_without_logprobs_are_an_error(tmp_path: Path) -> None:
    reference, candidate = servers()
    candidate.no_logprobs = True
    failed = pytest.raises(ParityError, match="cannot compare: the answer carries no logprobs")
    with serving(reference.app()) as ref_url, serving(candidate.app()) as cand_url, failed:
        run_parity(ref_url, cand_url, suite(tmp_path), ParityPolicy(), retry=FAST)


def test_concurrency_is_bounded_and_progress_counts_up(tmp_path: Path) -> None:
    prompts = {f"p{i}": f"prompt {i}?" for i in range(10)}
    answers = {text: SAME for text in prompts.values()}
    reference, candidate = Scripted(answers, hold_until=3), Scripted(answers, hold_until=3)
    loaded = load_suite(ROOT, str(write_suite(tmp_path / "ten.jsonl", prompts)))
    seen: list[tuple[int, int]] = []
    with serving(reference.app()) as ref_url, serving(candidate.app()) as cand_url:
        verdict = run_parity(
            ref_url,
            cand_url,
            loaded,
            ParityPolicy(),
            lambda done, total: seen.append((done, total)),
            concurrency=3,
            retry=FAST,
        )
    assert verdict.headline == "PARITY 10/10"
    assert (reference.most_in_flight, candidate.most_in_flight) == (3, 3)
    assert seen == [(n, 10) for n in range(1, 11)]
