"""Example views of every comment kind, as their callers would fill them."""

from __future__ import annotations

from datetime import UTC, datetime

from reconciler.forge.views import (
    AlarmRow,
    BenchFailure,
    BenchFigure,
    BenchRow,
    BenchView,
    CandidateView,
    ClosedView,
    DeployView,
    LeverChange,
    MetricDelta,
    ParetoPoint,
    ParityMismatch,
    ParityView,
    PlanFleet,
    PlanGroup,
    PlanView,
    PromotionView,
    RollbackView,
)

HEAD = "3f2a1b0c9d1e8f7a6b5c4d3e2f1a0b9c8d7e6f5a"

PLAN = PlanView(
    head_sha=HEAD,
    files=["releases/chat-8b/denv.yaml", "fleets/local.yaml"],
    note="This pull request changes `fleets/local.yaml`: fleets, policies and parity suites are "
    "read from the default branch, `main`, so they take effect once merged there; this run used "
    "`main`'s.",
    summary="Plan: 1 to start, 2 to replace, 0 to stop, 1 unchanged.",
    groups=[
        PlanGroup(
            title="chat-8b / canary / local — revision 111111111111 → 3f2a1b0c9d1e — GPUs 2 → 3",
            lines=[
                "+ chat-8b.canary.local.aggregated-2  localhost  GPUs 2      port 8096   new",
                "! chat-8b.canary.local.aggregated-0  localhost  GPUs 0      port 8032   "
                "spec changed, surge",
                "      --max-num-seqs: 128 → 192",
                "! chat-8b.canary.local.router        localhost  no GPUs     port 8000   "
                "spec changed, in place",
                "      --worker-urls: a b → a b c",
            ],
            kept=1,
            endpoint="http://127.0.0.1:8000",
        ),
        PlanGroup(
            title="chat-8b / prod / local — not planned — GPUs 2 → 2",
            error="replica 2 needs 1 GPU in one domain; the most free in one domain of local is 0",
        ),
    ],
    notes=["chat-8b / eu: not deployed yet: no pin in releases/chat-8b/promotions.yaml"],
    fleets=[PlanFleet(fleet="local", before=4, after=5, gpus=8, trial_gpus=2)],
    unreachable=["gpu-2: connection refused"],
)

PLAN_INVALID = PlanView(
    head_sha=HEAD,
    files=["releases/chat-8b/denv.yaml"],
    problems=["releases/chat-8b/denv.yaml:8:15: max_batch: Input should be greater than 0"],
)

DEPLOY = DeployView(
    release="chat-8b",
    origin="result ix-2026-01-05T10-00-00-chat-8b",
    recipe="llama-3.1-8b/vllm@1",
    fleet="local",
    weights="llama-3.1-8b-instruct",
)

CLOSED = ClosedView(
    reason="Closed by denv: superseded, `canary` runs the newer `3f2a1b0c9d1e` already; "
    "promoting `0a1b2c3d4e5f` would take it back."
)

PLAN_NOTHING = PlanView(head_sha=HEAD, summary="No changes: 2 units up to date.")


def _metrics(
    tps: tuple[float, float], ttft: tuple[float, float], cost: tuple[float | None, float]
) -> list[MetricDelta]:
    return [
        MetricDelta(
            name="output", unit="tok/s/GPU", current=tps[0], candidate=tps[1], higher_is_better=True
        ),
        MetricDelta(
            name="TTFT p99", unit="s", current=ttft[0], candidate=ttft[1], higher_is_better=False
        ),
        MetricDelta(
            name="cost",
            unit="$/M output",
            current=cost[0],
            candidate=cost[1],
            higher_is_better=False,
        ),
    ]


BENCH = BenchView(
    head_sha=HEAD,
    current="chat-8b @ 9c8d7e6f5a4b",
    traffic="agent",
    rows=[
        BenchRow(
            subject="llama-3.1-8b/vllm@1",
            fleet="local",
            hardware="h200",
            simulated=True,
            result_id="r-20250101-01",
            metrics=_metrics((2410.0, 2795.6), (0.412, 0.409), (0.438, 0.378)),
            roofline="decode 31% of HBM bandwidth (4.8 TB/s), prefill 4.2% of bf16 compute "
            "(989 TFLOPS)",
        ),
        BenchRow(
            subject="llama-3.1-8b/sglang@1",
            fleet="h200-use1",
            hardware="h200",
            simulated=False,
            metrics=_metrics((2410.0, 2288.0), (0.412, 0.61), (None, 0.46)),
        ),
    ],
    pareto=[
        ParetoPoint(series="release", label="c16", interactivity=112.0, throughput=1500.0),
        ParetoPoint(series="release", label="c64", interactivity=61.5, throughput=2410.0),
        ParetoPoint(series="PR", label="c16", interactivity=118.2, throughput=1630.0),
        ParetoPoint(series="PR", label="c64", interactivity=66.0, throughput=2795.6),
    ],
    failures=[
        BenchFailure(
            subject="chat-8b on h200-use1",
            error="trial-chat-8b-0 on gpu-1 exited (exit 1); its last log lines: "
            "ValueError: `--max-model-len` 65536 > 32768 | Engine core failed",
        )
    ],
)

PARITY_PASS = ParityView(
    reference="chat-8b @ 9c8d7e6f5a4b",
    candidate="llama-3.1-8b/vllm@2",
    mode="tolerant",
    rule="each generated token within the reference's top-5",
    passed=True,
    prompts=200,
    mismatched=0,
)

PARITY_FAIL = ParityView(
    reference="chat-8b @ 9c8d7e6f5a4b",
    candidate="llama-3.1-8b/vllm@3 (fp8)",
    mode="strict",
    rule="greedy tokens identical",
    passed=False,
    prompts=200,
    mismatched=2,
    mismatches=[
        ParityMismatch(prompt=17, position=41, detail="token 1043 | reference 889"),
        ParityMismatch(prompt=132, position=7, detail="token 29901, reference 13"),
    ],
    suite="`policies/parity/default.jsonl` of `main @ 9c8d7e6f5a4b`",
)

# The pull request changed the suite: its own version's verdict, beside the gate's
PARITY_PROPOSED = PARITY_PASS.model_copy(
    update={
        "prompts": 1,
        "suite": "`policies/parity/default.jsonl` as this pull request changes it, at "
        "`1a2b3c4d5e6f`",
        "gating": False,
    }
)

CANDIDATE = CandidateView(
    release="chat-8b",
    target="prod",
    goal="throughput",
    study="opt-7f3a",
    current_recipe="llama-3.1-8b/vllm@1",
    candidate_recipe="llama-3.1-8b/vllm@2",
    changes=[
        LeverChange(lever="max_batch", current="128", candidate="256"),
        LeverChange(lever="kv_cache.memory_fraction", current="0.90", candidate="0.95"),
    ],
    metric="goodput/GPU (req/s)",
    current_value=24.1,
    candidate_value=27.956,
    gain=0.16,
    current_rate=48.2,
    candidate_rate=55.91,
    latency_target="ttft:p99<1.5s",
    ci_low=0.121,
    ci_high=0.198,
    repeats=3,
    trials=24,
    parity="pass (tolerant, 200 of 200 prompts agree)",
    simulated=True,
)

ROLLBACK = RollbackView(
    release="chat-8b",
    stage="prod",
    fleets=["local"],
    from_revision="3f2a1b0c9d1e8f7a6b5c4d3e2f1a0b9c8d7e6f5a",
    to_revision="9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d",
    alarm="ttft-p99-1.5s",
    observed="TTFT p99 2.31 s over 412 requests",
    threshold="1.5 s over 5m",
    at=datetime(2025, 3, 14, 9, 26, tzinfo=UTC),
    stages=[
        "`canary`: keeps running 3f2a1b0c9d1e: rolled back only if its own alarms fire; "
        "3f2a1b0c9d1e is not promoted from it",
        "`prod`: rolled back from 3f2a1b0c9d1e to 9c8d7e6f5a4b; 3f2a1b0c9d1e rejected here",
    ],
)

PROMOTION = PromotionView(
    release="chat-8b",
    from_stage="canary",
    to_stage="prod",
    revision="3f2a1b0c9d1e8f7a6b5c4d3e2f1a0b9c8d7e6f5a",
    fleets=["lab"],
    baked_from=datetime(2025, 3, 14, 9, 0, tzinfo=UTC),
    baked_until=datetime(2025, 3, 14, 9, 30, tzinfo=UTC),
    bake="30m",
    alarms=[
        AlarmRow(
            name="ttft-p99-1.5s",
            observed="TTFT p99 0.41 s over 1,204 requests",
            limit="≤ 1.5 s over 5m",
            ok=True,
        ),
        AlarmRow(
            name="errors-1pct",
            observed="error_rate: not judged, 38 requests < 100 (30m bake)",
            limit="≤ 1% over 5m",
            ok=True,
            judged=False,
        ),
    ],
    parity="one recipe on every fleet: no deploy-time parity check needed",
    bench=[
        BenchFigure(
            fleet="prod-h200",
            hardware="h200",
            load="c8",
            tok_s_gpu=1480.5,
            ttft_p99_ms=212.0,
            itl_p99_ms=11.4,
            source="measured",
            result_id="llama-3.1-8b-vllm-1-h200-c8-20250313t120000",
            decode_hbm=0.412,
            prefill_compute=0.0371,
        ),
        BenchFigure(
            fleet="prod-h200",
            hardware="h200",
            load="c64",
            tok_s_gpu=5210.0,
            ttft_p99_ms=1320.0,
            itl_p99_ms=None,
            source="simulated",
            result_id="llama-3.1-8b-vllm-1-h200-c64-20250313t121500",
        ),
    ],
    approvals="1 approval of the head commit by a user with write permission",
)
