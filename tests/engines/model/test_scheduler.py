"""The continuous-batching loop: its invariants, preemption, the prefix cache, roles, and that
many steps at once (`advance`) account exactly as single steps do."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from reconciler.engines.model.kvcache import BLOCK_TOKENS
from reconciler.engines.model.perf import PerfModel
from reconciler.engines.model.predict import sim_spec
from reconciler.engines.model.scheduler import RequestTooLarge, Scheduler, Step
from tests.engines.model.perfspecs import hardware, model, perf, recipe


@dataclass
class Trace:
    steps: list[Step] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=dict)
    firsts: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)


def drain(s: Scheduler, limit: int = 200_000) -> Trace:
    trace = Trace()
    for _ in range(limit):
        step = s.step()
        if step is None:
            break
        trace.steps.append(step)
        for rid, n in step.tokens.items():
            trace.tokens[rid] = trace.tokens.get(rid, 0) + n
        trace.firsts += step.first_token
        trace.finished += step.finished
    assert s.idle
    return trace


def small(**kwargs: Any) -> PerfModel:
    """Llama-3.1-8B on one H200; kwargs are recipe settings."""
    return perf("llama-3.1-8b", "h200", tp=1, **kwargs)


def load(s: Scheduler, count: int, seed: int = 1, prompt: int = 3000, out: int = 400) -> None:
    rng = random.Random(seed)
    for i in range(count):
        s.add(f"r{i}", rng.randint(16, prompt), (), rng.randint(1, out))


@pytest.mark.parametrize(
    "settings",
    [
        {"max_batch": 4},
        {"max_batch": 16, "speculative": {"method": "ngram", "draft_tokens": 3}},
        {"max_batch": 64, "chunked_prefill": 512},
    ],
    ids=["batch4", "batch16-spec", "batch64-chunk512"],
)
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_never_above_max_batch_and_exact_max_tokens(engine: str, settings: dict[str, Any]) -> None:
    s = Scheduler(small(engine=engine, **settings))
    rng = random.Random(7)
    wanted = {}
    for i in range(60):
        wanted[f"r{i}"] = rng.randint(1, 300)
        s.add(f"r{i}", rng.randint(16, 2000), (), wanted[f"r{i}"])
    trace = drain(s)
    assert max(step.running for step in trace.steps) <= settings["max_batch"]
    assert trace.tokens == wanted
    assert sorted(trace.firsts) == sorted(wanted) == sorted(trace.finished)


def test_preemption_when_kv_runs_out_and_never_above_capacity() -> None:
    preempted = {}
    for engine in ("vllm", "sglang"):
        s = Scheduler(small(engine=engine, kv_cache={"memory_fraction": 0.13}))  # ~2 GB of KV
        for i in range(40):
            s.add(f"r{i}", 1000, (), 2000)
        trace = drain(s)
        assert all(step.kv_usage <= 1.0 for step in trace.steps)
        # vLLM fills the KV; SGLang keeps room for outputs and, these requests all finishing
        # together, admits no more until the first one leaves
        assert max(step.kv_usage for step in trace.steps) > (0.9 if engine == "vllm" else 0.8)
        assert trace.tokens == {f"r{i}": 2000 for i in range(40)}
        preempted[engine] = sum(len(step.preempted) for step in trace.steps)
    # vLLM admits greedily and preempts the newest when KV runs out; SGLang keeps room for the
    # running requests' outputs, so it preempts less
    assert preempted["vllm"] > preempted["sglang"]


def test_preempted_request_recomputes_without_a_second_first_token() -> None:
    s = Scheduler(small(kv_cache={"memory_fraction": 0.13}))
    for i in range(40):
        s.add(f"r{i}", 1000, (), 2000)
    trace = drain(s)
    assert len(trace.firsts) == len(set(trace.firsts)) == 40
    recomputed = sum(step.prompt_tokens for step in trace.steps)
    assert recomputed > 40 * 1000  # preempted requests computed their context again


def test_prefix_cache_hits_skip_prefill() -> None:
    shared = tuple(range(6))  # 3072 shared tokens
    s = Scheduler(small())
    s.add("a", 4000, shared, 4)
    first = drain(s)
    assert sum(step.cached_tokens for step in first.steps) == 0
    assert sum(step.prompt_tokens for step in first.steps) == 4000
    s.add("b", 4000, shared, 4)
    second = drain(s)
    assert sum(step.cached_tokens for step in second.steps) == 6 * BLOCK_TOKENS
    assert sum(step.prompt_tokens for step in second.steps) == 4000 - 6 * BLOCK_TOKENS
    assert second.steps[0].duration_s < first.steps[0].duration_s


def test_prefix_cache_off_never_hits() -> None:
    s = Scheduler(small(kv_cache={"prefix_caching": False}))
    for name in ("a", "b"):
        s.add(name, 4000, tuple(range(6)), 4)
        assert sum(step.cached_tokens for step in drain(s).steps) == 0


def test_a_fully_cached_prompt_still_computes_its_last_token() -> None:
    s = Scheduler(small())
    s.add("a", 2 * BLOCK_TOKENS, (1, 2), 2)
    drain(s)
    s.add("b", 2 * BLOCK_TOKENS, (1, 2), 2)
    steps = drain(s).steps
    assert steps[0].prompt_tokens == 1 and steps[0].cached_tokens == 2 * BLOCK_TOKENS - 1
    assert steps[0].first_token == ("b",)


@pytest.mark.parametrize(
    ("chunked", "steps_for_prompt"),
    [(1024, 4), (False, 1)],
    ids=["chunks-of-1024", "no-chunking"],
)
def test_chunked_prefill(chunked: int | bool, steps_for_prompt: int) -> None:
    s = Scheduler(small(chunked_prefill=chunked, max_batched_tokens=8192))
    s.add("a", 4000, (), 1)
    steps = drain(s).steps
    assert len(steps) == steps_for_prompt
    assert steps[-1].first_token == ("a",) and steps[-1].finished == ("a",)


def test_mixed_steps_in_vllm_prefill_alone_in_sglang() -> None:
    for engine, decodes_during_prefill in (("vllm", True), ("sglang", False)):
        s = Scheduler(small(engine=engine))
        s.add("old", 100, (), 50)
        s.step()  # old: prefill, first token
        s.add("new", 3000, (), 5)
        step = s.step()
        assert step is not None and step.prompt_tokens == 3000
        assert ("old" in step.tokens) is decodes_during_prefill


def test_decode_role_takes_kv_and_decodes_from_its_first_step() -> None:
    topology = {
        "mode": "disaggregated",
        "prefill": {"replicas": 1, "gpus": 1, "parallel": {"tp": 1}},
        "decode": {"replicas": 1, "gpus": 1, "parallel": {"tp": 1}},
    }
    s = Scheduler(perf("llama-3.1-8b", role="decode", topology=topology))
    s.add("a", 4000, (1, 2, 3), 3)
    trace = drain(s)
    assert sum(step.prompt_tokens for step in trace.steps) == 0
    assert trace.steps[0].first_token == ("a",) and trace.tokens == {"a": 3}
    assert len(trace.steps) == 3


def test_prefill_role_finishes_at_the_first_token() -> None:
    topology = {
        "mode": "disaggregated",
        "prefill": {"replicas": 1, "gpus": 1, "parallel": {"tp": 1}},
        "decode": {"replicas": 1, "gpus": 1, "parallel": {"tp": 1}},
    }
    s = Scheduler(perf("llama-3.1-8b", role="prefill", topology=topology))
    s.add("a", 3000, (), 1)
    trace = drain(s)
    assert trace.finished == ["a"] and trace.tokens == {"a": 1}


def test_cancel_frees_the_slot_and_kv() -> None:
    s = Scheduler(small(max_batch=1))
    s.add("a", 1000, (), 100)
    s.add("b", 1000, (), 100)
    s.step()
    s.cancel("a")
    s.cancel("unknown")  # already gone: nothing to do
    step = s.step()
    assert step is not None and step.first_token == ("b",)
    s.cancel("b")
    assert s.idle and s.kv_usage == 0.0 and s.step() is None


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("a", 1000, (1, 2), 10), "block hashes"),
        (("a", 0, (), 10), "at least one"),
        (("a", 10, (), 0), "at least one"),
    ],
    ids=["too-many-hashes", "empty-prompt", "no-output"],
)
def test_add_refuses_malformed_requests(args: tuple[Any, ...], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        Scheduler(small()).add(*args)


def test_add_refuses_duplicates_and_requests_that_can_never_fit() -> None:
    s = Scheduler(small())
    s.add("a", 10, (), 10)
    with pytest.raises(ValueError, match="already"):
        s.add("a", 10, (), 10)
    with pytest.raises(RequestTooLarge):
        s.add("huge", s.model.max_request_tokens, (), 1)


def test_poll_interval_delays_admission_while_busy() -> None:
    """SGLang's --scheduler-recv-interval N: while requests run, new ones are looked at every
    N steps."""
    waited = []
    for args in ([], ["--scheduler-recv-interval", "8"]):
        r = recipe("llama-3.1-8b", engine="sglang", tp=1).model_copy(update={"args": args})
        s = Scheduler(PerfModel.from_spec(sim_spec(r, hardware("h200"), model("llama-3.1-8b"))))
        s.add("old", 100, (), 100)
        s.step()
        s.step()  # busy decoding
        s.add("new", 100, (), 5)
        steps = 1
        while "new" not in _must(s.step()).first_token:
            steps += 1
        waited.append(steps)
    assert waited[0] == 1 and 1 < waited[1] <= 8


def _must(step: Step | None) -> Step:
    assert step is not None
    return step


@pytest.mark.parametrize(
    ("model_kwargs", "engine"),
    [
        ({}, "vllm"),
        ({}, "sglang"),
        ({"speculative": {"method": "ngram", "draft_tokens": 2}}, "vllm"),
        ({"kv_cache": {"memory_fraction": 0.13}}, "vllm"),
        ({"kv_cache": {"memory_fraction": 0.13}}, "sglang"),
    ],
    ids=["vllm", "sglang", "speculative", "preempting", "sglang-retracting"],
)
@pytest.mark.parametrize("closed_loop", [False, True], ids=["batch", "closed-loop"])
def test_advance_accounts_exactly_as_single_steps(
    model_kwargs: dict[str, Any], engine: str, closed_loop: bool
) -> None:
    """Closed loop: 16 clients, each sending its next request when the last one finishes, so
    requests arrive while the SGLang share decays and admission is held."""

    def run(many: bool) -> tuple[float, dict[str, float], dict[str, int]]:
        s = Scheduler(small(engine=engine, **model_kwargs))
        rng = random.Random(5)
        sent = 0

        def send(n: int) -> None:
            nonlocal sent
            for _ in range(n):
                s.add(f"r{sent}", rng.randint(16, 4000), (), rng.randint(1, 1500))
                sent += 1

        if closed_loop:
            send(16)
        else:
            load(s, 50, prompt=2000, out=600)
        now = 0.0
        done: dict[str, float] = {}
        tokens: dict[str, int] = {}
        while not s.idle:
            span = s.advance() if many else s.step()
            assert span is not None
            durations = span.durations if many else (span.duration_s,)  # type: ignore[union-attr]
            now += sum(durations)
            for rid, n in span.tokens.items():
                tokens[rid] = tokens.get(rid, 0) + n
            done.update({rid: now for rid in span.finished})
            if closed_loop:
                send(min(len(span.finished), 80 - sent))
        return now, done, tokens

    one, many = run(False), run(True)
    # exact without speculative decoding; with it, a span grows the context by the expected
    # tokens per step rather than each step's integer count
    rel = 1e-4 if "speculative" in model_kwargs else 1e-9
    assert one[2] == many[2]
    assert many[0] == pytest.approx(one[0], rel=rel)
    assert all(many[1][rid] == pytest.approx(t, rel=rel) for rid, t in one[1].items())


def test_advance_stops_before_the_horizon() -> None:
    s = Scheduler(small())
    s.add("a", 100, (), 1000)
    s.step()
    s.step()
    step_time = s.model.decode_step_time(1, 102)
    span = s.advance(horizon_s=10.5 * step_time)
    assert span is not None and len(span.durations) == 11
    assert span.tokens == {"a": 11}


def _first_token_step(s: Scheduler, rid: str, limit: int = 20_000) -> int:
    """Steps until `rid` emits its first token."""
    for n in range(1, limit):
        if rid in _must(s.step()).first_token:
            return n
    raise AssertionError(f"{rid} had no first token in {limit} steps")


@pytest.mark.parametrize("wait", [2, 700], ids=["initial-share", "decayed-share"])
def test_sglang_share_decays_while_nothing_is_retracted(wait: int) -> None:
    """SGLang's new_token_ratio falls from 0.7 to 0.098 over 600 decode steps: a prompt that
    the share at start keeps out goes in once it has decayed. Refused once, it waits until a
    running request leaves (batch_is_full), however far the share decays meanwhile."""
    s = Scheduler(small(engine="sglang", kv_cache={"memory_fraction": 0.13}))
    capacity = s.model.kv_capacity_tokens
    s.add("long", 100, (), 6000)
    for _ in range(wait):
        s.step()
    # room then: capacity − 100 − 700; it leaves 1,500 for reserving: more than 0.098 × 4096,
    # less than 0.7 × 4096 (and less again 698 steps earlier)
    s.add("b", capacity - 100 - 700 - 1500, (), 1)
    steps = _first_token_step(s, "b")
    if wait == 700:
        assert steps <= 3  # two prefill chunks
    else:
        assert steps > 6000 - wait  # after "long" finished


def test_sglang_reserves_at_most_4096_tokens_of_a_running_requests_output() -> None:
    """CLIP_MAX_NEW_TOKENS: a running request with 12,000 tokens to go holds back 0.7 × 4096,
    not 0.7 × 12,000, so a prompt that needs the difference goes in at once."""
    first = []
    for out in (5000, 12000):
        s = Scheduler(small(engine="sglang", kv_cache={"memory_fraction": 0.13}))
        s.add("long", 100, (), out)
        s.step()
        s.step()
        room = s.model.kv_capacity_tokens - 102
        s.add("b", room - 2 - int(0.7 * 4096) - 500, (), 1)
        first.append(_first_token_step(s, "b"))
    assert first[0] == first[1] <= 3


def test_sglang_retracts_fewest_outputs_first_and_resets_the_share() -> None:
    """retract_decode: the request with the fewest output tokens (of equal outputs, the longest
    prompt) leaves first, to the back of the queue, and the share becomes the kept requests'
    (output + 20 each) / (max_tokens + 1)."""
    s = Scheduler(small(engine="sglang", kv_cache={"memory_fraction": 0.13}))
    rng = random.Random(3)
    for i in range(40):
        s.add(f"r{i}", rng.randint(500, 1500), (), rng.randint(1000, 3000))
    while True:
        before = {r.id: (r.emitted, r.prompt, r.max_tokens) for r in s._running}
        step = _must(s.step())
        if step.preempted:
            break
    kept = {rid: v for rid, v in before.items() if rid not in step.preempted}
    order = sorted(before, key=lambda rid: (before[rid][0], -before[rid][1]))
    assert list(step.preempted) == order[: len(step.preempted)]
    assert [r.id for r in s._waiting][-len(step.preempted) :] == list(step.preempted)
    emitted = sum(v[0] for v in kept.values())
    wanted = sum(v[2] for v in kept.values())
    assert s._ratio() == pytest.approx(min(1.0, (emitted + 20 * len(kept)) / (wanted + 1)))
    assert s._ratio() < 0.7


@pytest.mark.parametrize("ignore_eos", [False, True], ids=["share", "to-the-end"])
def test_sglang_admits_ignore_eos_only_if_every_request_runs_to_its_end(ignore_eos: bool) -> None:
    """add_one_req_ignore_eos: with no prefix cache an ignore_eos request goes in only when KV
    holds every running request to its end, not a share of its output. A running request with
    2,998 tokens to go and a new one of 3,500: the share (0.7) keeps ~2,100 back and lets it
    in; to the end, both grow by 2,998 before the first finishes, which 5,799 free tokens do
    not hold — it waits until the running one leaves."""
    kv = {"memory_fraction": 0.13, "prefix_caching": False}
    s = Scheduler(small(engine="sglang", kv_cache=kv))
    s.add("long", 100, (), 3000, ignore_eos=ignore_eos)
    s.step()
    s.step()
    room = s.model.kv_capacity_tokens - 102
    s.add("b", room - 5800, (), 3500, ignore_eos=ignore_eos)
    steps = _first_token_step(s, "b")
    if ignore_eos:
        assert steps > 2990
    else:
        assert steps <= 3
