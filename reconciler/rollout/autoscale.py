"""Adapter: the autoscaler of elastic stages — before each plan, each elastic deployment's
count, decided (rollout/scaling.py) from what its engines say now.

Signals, read at most every policy `interval`: each serving replica's /metrics (requests
waiting, KV cache in use, and the counters of requests and tokens, whose increase since the
last read is the arrival rate and the traffic's lengths), the stage's alarms as the rollout
last read them, and the simulator's capacity of one replica for those lengths
(rollout/capacity.py). Level-triggered: the count a deployment runs is read from the fleets
(reconcile/desired.running_replicas), so a bot that restarts carries on from it; what is kept
here (each deployment's decision history, its events, the count it asked for) goes into the
bot's lease note, from which a bot that restarts knows the replicas asked for that never came.
A stage's pool (`pool: stage`) is decided once, from the signals of all its fleets' replicas.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from reconciler.catalog.deployments import deployments
from reconciler.engines.base import url as base_url
from reconciler.engines.units import EngineSeries, Series
from reconciler.fleet.model.labels import DeploymentKey, fleet_key
from reconciler.fleet.model.observed import FleetObservation
from reconciler.reconcile.desired import Counts, Desired, DesiredDeployment, running_replicas
from reconciler.reconcile.pool import count_key, counted
from reconciler.reconcile.source import GitSource
from reconciler.rollout.capacity import capacity_key, replica_capacity, targets
from reconciler.rollout.scaling import History, Signals, as_number, decide
from reconciler.rollout.series import series_for
from reconciler.rollout.watch import AlarmWatch, fetch_all
from reconciler.spec.policy import stage_alarms
from reconciler.spec.repo import Repo
from reconciler.spec.scaling import DEFAULT_POLICY, ScalingPolicy

STATE_VERSION = 1
KEPT_CAPACITIES = 32  # capacity searches kept in the note, the oldest dropped first
# Requests (counted once per window they fall in) the mean lengths are kept over.
LENGTH_MEMORY = 500.0


@dataclass(frozen=True)
class _Counters:
    at: float
    requests: float
    prompt: float | None
    generated: float | None

    @classmethod
    def of(cls, data: Any) -> _Counters | None:
        """From the note's [at, requests, prompt, generated]; None when it is not that."""
        if not isinstance(data, list) or len(data) != 4:
            return None
        if not all(v is None or isinstance(v, int | float) for v in data) or data[0] is None:
            return None
        if data[1] is None:
            return None
        return cls(float(data[0]), float(data[1]), data[2], data[3])


@dataclass
class _Deployment:
    history: History
    count: int | None = None  # the last decided count (until the fleets run it)
    asked: int | None = None  # the count the bot before this one asked for (its note)
    reason: str = ""
    signals: Signals | None = None
    lengths: tuple[int, int] | None = None  # mean input and output tokens lately
    # replicas asked for that did not fit when the last pass placed them (no free GPU): they
    # are on no fleet, so a bot that starts again takes them from its note
    pending: int = 0
    weight: float = 0.0  # the requests those means are over

    def smooth_lengths(self, requests: float, prompt: float, generated: float) -> None:
        """The means moved by one window's requests and tokens, the earlier ones weighing at
        most LENGTH_MEMORY requests: a few requests in a quiet window do not swing the
        capacity (whose lengths are rounded to 64 tokens) from one decision to the next."""
        kept = min(self.weight, LENGTH_MEMORY) if self.lengths else 0.0
        before_in, before_out = self.lengths or (0, 0)
        total = kept + requests
        self.lengths = (
            round((before_in * kept + prompt) / total),
            round((before_out * kept + generated) / total),
        )
        self.weight = total


class Autoscaler:
    """`Reconciler(scale=…)`: (desired, observations, kept) -> elastic deployments' counts."""

    def __init__(
        self,
        source: GitSource,
        say: Callable[[str], None] = lambda message: None,
        clock: Callable[[], float] = time.time,
        timeout: float = 2.0,
    ) -> None:
        self.source = source
        self.say = say
        self.clock = clock
        self.timeout = timeout
        self._deployments: dict[str, _Deployment] = {}
        self._counters: dict[str, list[_Counters]] = {}  # metrics URL -> reads, oldest first
        self._capacities: dict[str, float | None] = {}  # capacity_key -> req/s (note-kept)
        self._restored = False

    def __call__(
        self, desired: Desired, observations: Mapping[str, FleetObservation], kept: dict[str, Any]
    ) -> Counts:
        self._restore(kept.get("scaling"))
        elastic = [d for d in desired.deployments if d.bounds is not None]
        if not elastic:
            return {}
        repo = self.source.repo_at(desired.head)
        now = self.clock()
        groups: dict[DeploymentKey, list[DesiredDeployment]] = {}
        for deployment in elastic:  # a stage's pool: one count for all its fleets
            groups.setdefault(count_key(deployment), []).append(deployment)
        return {
            key: self._count(repo, key, members, observations, kept, now)
            for key, members in groups.items()
        }

    def state(self, desired: Desired | None = None) -> dict[str, Any]:
        """What the lease note keeps: each elastic deployment's count, why, its events and the
        replicas of it that did not fit in `desired` (the pass's); the engines' last counter
        reads (a `--once` bot's next run takes its rates from them)."""
        placed = desired.deployments if desired is not None else ()
        pending = counted((d, d.pending_replicas) for d in placed if d.bounds is not None)
        for key, count in pending.items():
            if (mine := self._deployments.get("/".join(key))) is not None:
                mine.pending = count
        return {
            "version": STATE_VERSION,
            "capacities": dict(self._capacities),
            "counters": {
                url: [[r.at, r.requests, r.prompt, r.generated] for r in reads]
                for url, reads in sorted(self._counters.items())
            },
            "deployments": {
                key: {
                    **kept.history.as_dict(),
                    "count": kept.count,
                    "pending": kept.pending,
                    "reason": kept.reason,
                    "signals": kept.signals.as_dict() if kept.signals else None,
                }
                for key, kept in sorted(self._deployments.items())
            },
        }

    def _restore(self, state: Any) -> None:
        """On the bot's first pass that read a note: the histories it kept, and the counts it
        asked for (a restarted bot knows which replicas are pending, and gives them up)."""
        if self._restored or not isinstance(state, dict):
            return
        self._restored = True
        if state.get("version") != STATE_VERSION:
            return
        for known, found in (state.get("capacities") or {}).items():
            if isinstance(known, str) and (found is None or as_number(found) is not None):
                self._capacities.setdefault(known, as_number(found))
        for url, reads in (state.get("counters") or {}).items():
            found = [_Counters.of(r) for r in reads] if isinstance(reads, list) else []
            if isinstance(url, str) and all(found):
                self._counters.setdefault(url, [r for r in found if r is not None])
        for key, data in (state.get("deployments") or {}).items():
            if isinstance(key, str) and key not in self._deployments:
                kept = data if isinstance(data, dict) else {}
                reason, count = kept.get("reason"), kept.get("count")
                pending = kept.get("pending")
                self._deployments[key] = _Deployment(
                    History.of(data),
                    asked=count if isinstance(count, int) and not isinstance(count, bool) else None,
                    reason=reason if isinstance(reason, str) else "",
                    pending=pending if isinstance(pending, int) and pending > 0 else 0,
                )

    def _count(
        self,
        repo: Repo,
        counted_as: DeploymentKey,
        members: list[DesiredDeployment],
        observations: Mapping[str, FleetObservation],
        kept: dict[str, Any],
        now: float,
    ) -> int:
        """The count decided now, or the last one until the policy's interval has passed, for
        one deployment or a stage's pool (`members`: its deployments, one per fleet). The
        count the fleets run is the last decision's; a bot that starts reads it from them, and
        the pending replicas (on no fleet) from its note."""
        bounds = members[0].bounds
        assert bounds is not None
        key = "/".join(counted_as)
        mine = self._deployments.setdefault(key, _Deployment(History()))
        replicas = sum(d.replicas for d in members)
        if mine.count is None and mine.asked is not None:
            # more than run: replicas that never came (pending, given up when fewer will do);
            # fewer: a scale-down it did not finish, decided again from what runs; none run:
            # the stage starts afresh (removed from git and back), at its minimum
            running = running_replicas(observations)
            if any(running.get(d.key) for d in members):
                mine.count = max(mine.asked, replicas)
            mine.asked = None
        policy = repo.policies.scaling.get(bounds.policy)
        policy = policy or repo.policies.scaling.get(DEFAULT_POLICY) or ScalingPolicy()
        asked = replicas + mine.pending  # a bot that starts: its note adds the pending
        count = bounds.clamp(mine.count if mine.count is not None else asked)
        decided = mine.history.decided_at
        if decided is not None and now - decided < policy.interval and mine.count is not None:
            return count
        # never came: no GPU to place them on, or jobs the scheduler holds back
        queued = sum(_queued(observations, d) for d in members)
        pending = max(0, count - replicas) + queued
        signals = self._signals(repo, members, policy, mine, kept, now)
        decision = decide(policy, bounds, count, min(pending, count), signals, mine.history, now)
        if decision.count != count:
            self.say(f"scale {key}: {count} → {decision.count} ({decision.reason})")
        mine.count, mine.reason, mine.signals = decision.count, decision.reason, signals
        return decision.count

    def _signals(
        self,
        repo: Repo,
        members: list[DesiredDeployment],
        policy: ScalingPolicy,
        mine: _Deployment,
        kept: dict[str, Any],
        now: float,
    ) -> Signals:
        """What the replicas of `members` say together: their arrival rates summed, the
        busiest one's queue and cache; one replica's capacity, on the fleet where it is least
        (a stage's pool may span hardware)."""
        engines = [
            (u.unit.engine, base_url(u.unit.address, u.unit.metrics.port) + u.unit.metrics.path)
            for deployment in members
            for u in deployment.units
            if u.unit.role == "aggregated" and u.unit.metrics is not None
        ]
        answers = fetch_all([url for _, url in engines], self.timeout)
        serving, waiting, kv, rate, rated = 0, [], [], 0.0, 0
        requests = prompt = generated = 0.0
        for engine, url in engines:
            series = series_for(engine)
            text = answers.get(url)
            if series is None or not isinstance(text, str):
                continue
            read = _read(series, text, now)
            if read is None:
                continue
            serving += 1
            gauges, counters = read
            waiting += [gauges["waiting"]] if "waiting" in gauges else []
            kv += [gauges["kv_usage"]] if "kv_usage" in gauges else []
            before = self._remember(url, counters, policy.window)
            if before is None or counters.requests < before.requests or now <= before.at:
                continue  # a first read, or the engine restarted
            done = counters.requests - before.requests
            rate += done / (counters.at - before.at)
            rated += 1
            requests += done
            if counters.prompt is not None and before.prompt is not None:
                prompt += counters.prompt - before.prompt
            if counters.generated is not None and before.generated is not None:
                generated += counters.generated - before.generated
        if requests > 0 and prompt > 0 and generated > 0:
            mine.smooth_lengths(requests, prompt, generated)
        capacities = [self._capacity(d, policy, mine.lengths) for d in members]
        known = [c for c in capacities if c is not None]
        return Signals(
            serving=serving,
            # None when no replica has a rate yet (each started or restarted since the last
            # read, as after a roll): no prediction, rather than a rate of 0
            arrival_rps=rate if rated else None,
            waiting=max(waiting) if waiting else None,
            kv_usage=max(kv) if kv else None,
            firing=_firing(repo, members[0], kept, now),
            capacity_rps=min(known) if known else None,
            lengths=mine.lengths,
            note="" if mine.lengths else "no lengths read yet: no prediction",
        )

    def _remember(self, url: str, read: _Counters, window: float) -> _Counters | None:
        """Keep `read`, and the reads of the last `window` before it with the newest older one
        (so that the rates span the whole window); the oldest, which they are taken over. A
        counter that went down (the engine restarted) drops the reads before it."""
        reads = [r for r in self._counters.get(url, []) if r.requests <= read.requests]
        older = [r for r in reads if read.at - r.at > window][-1:]
        kept = older + [r for r in reads if read.at - r.at <= window]
        self._counters[url] = [*kept, read]
        return kept[0] if kept else None

    def _capacity(
        self,
        deployment: DesiredDeployment,
        policy: ScalingPolicy,
        lengths: tuple[int, int] | None,
    ) -> float | None:
        """One replica's capacity as the stage runs it: the recipe at the stage's revision with
        the release's overrides (a max_batch of its own changes what a replica holds)."""
        if not policy.predictive or lengths is None:
            return None
        repo = self.source.repo_at(deployment.revision)
        key = deployment.key
        found = (d.recipe for d in deployments(repo) if (d.release, d.stage, d.fleet) == key)
        recipe = next(found, None)
        fleet = repo.fleets.get(deployment.fleet)
        if recipe is None or fleet is None:
            return None
        hardware = repo.resolve_hardware(fleet.hardware)
        model = repo.models.get(recipe.model)
        if hardware is None or model is None:
            return None
        wanted = targets(policy, _stage_alarms(repo, deployment))
        known = capacity_key(recipe, hardware, model, *lengths, wanted)
        if known not in self._capacities:  # a search takes seconds: kept in the note
            self._capacities[known] = replica_capacity(recipe, hardware, model, *lengths, wanted)
            while len(self._capacities) > KEPT_CAPACITIES:
                del self._capacities[next(iter(self._capacities))]
        return self._capacities[known]


def _read(series: EngineSeries, text: str, now: float) -> tuple[dict[str, float], _Counters] | None:
    """The gauges (waiting, kv_usage; the highest sample) and counters of one scrape."""
    wanted: dict[str, Series] = {
        name: s for name, s in series.metrics.items() if name in ("waiting", "kv_usage")
    }
    counters: dict[str, Series | None] = {
        "requests": series.requests,
        "prompt": series.prompt_tokens,
        "generated": series.generation_tokens,
    }
    gauges: dict[str, float] = {}
    totals: dict[str, float] = {}
    try:
        samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    except (ValueError, IndexError, KeyError):
        return None
    for sample in samples:
        for name, s in wanted.items():
            if sample.name == s.name and s.matches(sample.labels):
                gauges[name] = max(gauges.get(name, sample.value), sample.value)
        for name, c in counters.items():
            if c is not None and sample.name == c.name and c.matches(sample.labels):
                totals[name] = totals.get(name, 0.0) + sample.value
    found = _Counters(
        at=now,
        requests=totals.get("requests", 0.0),
        prompt=totals.get("prompt"),
        generated=totals.get("generated"),
    )
    return gauges, found


def _stage_alarms(repo: Repo, deployment: DesiredDeployment) -> dict[str, Any]:
    release = repo.releases.get(deployment.release)
    stage = (
        next((s for s in release.stages if s.name == deployment.stage), None) if release else None
    )
    if stage is None:
        return {}
    return stage_alarms(repo.policies, stage.alarms)


def _firing(
    repo: Repo, deployment: DesiredDeployment, kept: dict[str, Any], now: float
) -> tuple[str, ...]:
    """The stage's alarms over their threshold as the rollout last read them (its tracks)."""
    alarms = _stage_alarms(repo, deployment)
    rollout = kept.get("rollout")
    state = rollout.get("alarms") if isinstance(rollout, dict) else None
    if not alarms or not isinstance(state, dict):
        return ()
    watch = AlarmWatch(alarms, state=state)
    readings = watch.readings(f"{deployment.release}/{deployment.stage}", now)
    return tuple(sorted(r.name for r in readings if r.firing))


def _queued(observations: Mapping[str, FleetObservation], deployment: DesiredDeployment) -> int:
    """The deployment's replicas that are jobs the scheduler has not started."""
    found = observations.get(deployment.fleet)
    return sum(
        1
        for seen in (found.hosts.values() if found is not None else ())
        for record in seen.units
        if record.pending
        and record.labels.get("role") == "aggregated"
        and fleet_key(record, deployment.fleet) == deployment.key
    )
