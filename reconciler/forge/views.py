"""Models: the views that denv's PR comments are rendered from, one per comment kind
(forge/comments.py registers each with its template and renderer; a new kind may keep its
view in its own module).

Callers (plan, bench, parity, the optimizer, rollout) fill these from their own types; the
forge knows nothing else about them. Text fields are shown as given, escaped for tables.

A field typed `Said` holds text that hosts, engines or a pull request's files wrote (log
lines, errors, problems, answers): the renderer shows it only quoted, in a code block or a
code span (reconciler/forge/render.py's `quoted` and `code`), never as markdown. Any new
field that can carry such text is a `Said` (tests/forge/test_said.py renders each with
hostile text).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from reconciler.forge.models import Record


@dataclass(frozen=True)
class Source:
    """Who wrote a text field: `said` is anyone but denv."""

    who: str


SAID = Source("said")
Said = Annotated[str, SAID]


class PlanGroup(Record):
    """One release, stage and fleet of a plan, as the reconciler would change it."""

    title: str  # release / stage / fleet — revision — GPUs before → after
    error: Said | None = None  # why it was not planned: it is left as it runs
    lines: list[Said] = []  # the diff: a line an action (+ start, ! replace, - stop), then changes
    kept: int = 0  # units that stay as they are
    endpoint: str | None = None


class PlanFleet(Record):
    fleet: str
    before: int  # GPUs in use now
    after: int  # GPUs in use once the plan is applied
    gpus: int | None = None  # the fleet's, when known
    trial_gpus: int | None = None  # kept for trials


class PlanView(Record):
    head_sha: str
    base: str | None = "main"  # None: a plan of a revision, not of a pull request
    files: list[Said] = []  # the denv files the pull request changes
    problems: list[Said] = []  # path:line:col: message — nothing is applied while any
    note: str | None = None  # what the pull request changes that the bot does not take from it
    summary: str = ""  # the plan's counts in a line
    groups: list[PlanGroup] = []
    notes: list[str] = []  # stages that run nothing: not deployed yet, or not planned
    fleets: list[PlanFleet] = []
    unreachable: list[Said] = []  # hosts not reached, each with its cause


class ClosedView(Record):
    """Why denv closed a pull request without merging it (a stale or rejected promotion)."""

    reason: str


class DeployView(Record):
    """A new release that `denv deploy` proposes: its pull request's description."""

    release: str
    origin: str  # e.g. "result ix-…" or "recipe llama-3.1-8b/vllm@1"
    recipe: str
    fleet: str
    weights: str


class MetricDelta(Record):
    name: str  # e.g. "TTFT p99"
    unit: str  # e.g. "s", "tok/s/GPU", "$/M"
    current: float | None  # the current release's figure; None when there is none
    candidate: float
    higher_is_better: bool


class BenchRow(Record):
    subject: str  # recipe id or release name
    fleet: str
    hardware: str
    simulated: bool
    result_id: str | None = None
    metrics: list[MetricDelta]
    roofline: str | None = None  # the result's roofline summary (catalog/roofline.py)


class ParetoPoint(Record):
    series: str  # "release" or "PR"
    label: str  # e.g. "c64" (concurrency 64)
    interactivity: float  # tok/s per user
    throughput: float  # tok/s per GPU


class BenchFailure(Record):
    subject: str  # e.g. "chat-8b on local"
    error: Said  # what went wrong: the hosts' and engines' own words (last log lines)


class BenchView(Record):
    head_sha: str
    current: str  # what the figures are compared with, e.g. "chat-8b @ 3f2a1b0c9d1e"
    traffic: str  # workload or traffic shape name
    rows: list[BenchRow]
    pareto: list[ParetoPoint] = []
    notes: list[str] = []  # denv's own: subjects left out, what was not compared; one a line
    failures: list[BenchFailure] = []  # runs that failed
    problems: list[str] = []  # invalid or refused files (`path:line:col: …`): nothing benched


class ParityMismatch(Record):
    prompt: int  # index in the suite: prompt text is never stored or shown
    position: int  # first token position that differs
    detail: Said  # e.g. "'Paris' where the reference has 'Lyon'": the engines' tokens


class ParityView(Record):
    reference: str
    candidate: str
    mode: str  # strict or tolerant
    rule: str  # e.g. "greedy tokens identical", "each token within the reference's top-5"
    passed: bool
    prompts: int
    mismatched: int
    mismatches: list[ParityMismatch] = []
    suite: str | None = None  # which suite, and from where: the default branch, for the gate
    gating: bool = True  # False: the pull request's own changed suite, reported beside the gate


class Parities(Record):
    """A pull request's parity comment: one verdict per release it changes."""

    verdicts: list[ParityView]


class LeverChange(Record):
    lever: str
    current: str
    candidate: str


class CandidateView(Record):
    release: str
    target: str  # stage or fleet the study ran for
    goal: str  # throughput, latency, cost
    study: str
    current_recipe: str
    candidate_recipe: str
    change: str = ""  # the candidate's change in words, e.g. "speculative off→ngram ×2"
    changes: list[LeverChange]
    metric: str  # the goal's figure, e.g. "goodput/GPU (req/s)"
    # the verification's comparison (optimize/verify.Gain), shown as it was decided: the
    # means of its repeats and the gain, positive when better (for latency and cost, lower)
    current_value: float
    candidate_value: float
    gain: float
    # the capacity each was measured at (requests/s of the traffic holding the target)
    current_rate: float | None = None
    candidate_rate: float | None = None
    latency_target: str | None = None  # e.g. "ttft:p99<1.5s"
    ci_low: float  # confidence interval of the gain, as fractions
    ci_high: float
    repeats: int
    trials: int
    parity: str  # the parity verdict in a line
    simulated: bool = False


class RollbackView(Record):
    release: str
    stage: str
    fleets: list[str]
    from_revision: str
    to_revision: str
    alarm: str
    observed: str  # e.g. "TTFT p99 2.31 s"
    threshold: str  # e.g. "≤ 1.5 s over 5 m"
    at: datetime
    stages: list[str] = []  # what the rollback did to each stage of the release, one line each


class AlarmRow(Record):
    name: str
    observed: str  # e.g. "TTFT p99 0.21 s over 1,204 requests", or "not enough requests"
    limit: str  # e.g. "≤ 1.5 s over 5 m"
    ok: bool
    judged: bool = True  # False: too few requests (or no data) to say; never shown as ok


class BenchFigure(Record):
    """The newest result at one load of the recipe a promotion moves, on one fleet."""

    fleet: str
    hardware: str
    load: str  # e.g. "c64" (concurrency 64), "2 req/s"
    tok_s_gpu: float | None  # output tok/s per GPU, every GPU counted
    ttft_p99_ms: float | None
    itl_p99_ms: float | None
    source: str  # measured, simulated or published
    result_id: str
    decode_hbm: float | None = None  # roofline: decode's share of HBM bandwidth
    prefill_compute: float | None = None  # roofline: prefill's share of tensor compute


class PromotionView(Record):
    release: str
    from_stage: str
    to_stage: str
    revision: str
    fleets: list[str]  # of the stage that baked
    baked_from: datetime
    baked_until: datetime
    bake: str  # e.g. "30m"
    alarms: list[AlarmRow] = []
    parity: str  # the deploy-time parity verdict in a line
    bench: list[BenchFigure] = []  # newest result per fleet and load; none: `bench_none`
    bench_none: str = "none yet"  # what to say when there are no results
    approvals: str  # e.g. "1 approval from a user with write permission", "none: auto"
