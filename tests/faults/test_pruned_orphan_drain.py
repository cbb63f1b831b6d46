"""A pruned orphan is drained before it stops: the release is gone from git, but requests
still stream through its router. The pass that prunes it has the router let its engine go,
waits until the engine's requests in flight finish (what the engine's record says of its
metrics: the stage's spec is gone with its file), then stops the router and the engine. No
stream is cut."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import openai
import pytest

from tests.e2e.test_elastic import Paused, running
from tests.faults.orphans import alive, empty_lab, put_release
from tests.fleet.conftest import wait_for
from tests.labs.elastic_local import FLEET, ElasticLab
from tests.labs.operated import actions_done
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]  # the fixture


@pytest.fixture
def lab(git_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ElasticLab]:
    yield from empty_lab(git_repo, tmp_path_factory.mktemp("lab"))


def test_a_pruned_orphan_finishes_its_streams_before_it_stops(
    lab: ElasticLab, tmp_path: Path
) -> None:
    lab.repo.replace(
        f"fleets/{FLEET}.yaml", "  simulated: true\n", "  simulated: true\n  prune: true\n"
    )
    put_release(lab, "extra")
    lab.repo.commit("extra on a lab that prunes")
    lab.reconcile()
    url = lab.endpoint()
    [engine] = [u for u in alive(lab, "extra") if u.labels["role"] == "aggregated"]
    assert engine.metrics is not None and engine.metrics.running  # recorded at its launch

    lab.repo.remove("releases/extra")
    lab.repo.commit("retire extra")
    lab.timing = ("--ready-timeout", "60s", "--drain", "60s")
    bot = Paused(lab, "after-prepare", tmp_path)  # it has planned the prune, stopped nothing
    with ThreadPoolExecutor(2) as pool:
        streams: list[Future[str]] = [
            pool.submit(stream_to_the_end, url, f"{n} in flight") for n in range(2)
        ]
        wait_for(lambda: running(lab, engine) >= 2, timeout=30, what="streams in flight")
        done = bot.resume()
        answers = [s.result() for s in streams]
    assert answers == ["length", "length"]  # each to its last token: a cut one has no reason
    assert f"drain {engine.id} on localhost (up to 60s; orphan, pruned)" in done.stderr
    assert actions_done(done.stdout) == {"router-remove": 1, "drain": 1, "stop": 2}
    assert alive(lab, "extra") == []


def stream_to_the_end(url: str, prompt: str) -> str | None:
    """A chat request streamed for 1,500 tokens (the simulator's end of sentence ignored:
    about 10 s); the reason its last chunk gives for the end ("length"), None when the stream
    ended without one (cut)."""
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)
    chunks = client.chat.completions.create(
        model="chat-8b",
        messages=[{"role": "user", "content": prompt}],
        max_tokens=1500,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
    return reasons[-1] if reasons else None
