"""Adapter: a recipe deployed on a fleet's trial GPUs for as long as a `with` block runs —
observe the fleet, launch the engines, wait until they are ready, then the router; on the way
out stop every unit of the trial, also on an error, on Ctrl-C and on SIGTERM (turned into the
same KeyboardInterrupt). `denv bench run` uses it, and parity and the optimizer can too: it
knows nothing of the CLI.

On a fleet of real GPUs the hosts first make the engine's runtime and the weights ready
(reconciler.fleet.prepare), as for a release. On a Slurm fleet each engine is a job in the
trial partition: one still waiting in the queue is waited for within the ready timeout (a
trial has no next pass to look again), and the error then gives the scheduler's reason.

A process killed with SIGKILL cannot tear down: its units keep their trial GPUs, and the
reconciler leaves them alone. Each unit names its owning process (reconciler.trials.owner);
the next trial placed on the fleet from this machine stops those whose owner is gone first,
and `denv fleet trials` stops any by hand.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import secrets
import signal
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from types import FrameType

from reconciler.engines.units import EngineContext
from reconciler.errors import DenvError, NotFound, UsageError
from reconciler.fleet.drivers.base import FleetDriver
from reconciler.fleet.drivers.registry import Drivers
from reconciler.fleet.model.observed import FleetObservation
from reconciler.fleet.prepare import (
    JobState,
    PrepareFailed,
    prepare_hosts,
    prepare_payload,
    weights_request,
)
from reconciler.reconcile import probes
from reconciler.spec.base import Spec
from reconciler.spec.checks import domain_size
from reconciler.spec.fleet import Fleet
from reconciler.spec.recipe import Recipe
from reconciler.spec.release import weights_commit
from reconciler.spec.repo import Repo
from reconciler.trials.owner import (
    FoundTrial,
    TrialState,
    found_trials,
    owner_state,
    this_process,
)
from reconciler.trials.plan import (
    ProbeInfo,
    TrialPlan,
    TrialUnit,
    default_weights,
    plan_trial,
    probe_info,
    trial_spec,
)

Say = Callable[[str], None]


class TrialEndpoint(Spec):
    """A trial deployment that is up: where to send requests, and what runs it."""

    trial: str
    url: str  # the router's root, without /v1
    model: str  # the served model name
    weights: str  # what the engines load
    engine: str  # what runs it: `sim` on a simulated fleet
    units: dict[str, str]  # unit id -> host, router last
    hosts: dict[str, list[int]]  # host -> GPU indices the engines use
    gpus: int  # every GPU of the deployment (prefill included)
    simulated: bool
    probe: ProbeInfo
    ready_s: float  # from the prepare step (or the first launch) until the router was ready


class UnitExited(DenvError):
    """A unit of the trial is no longer running."""


def new_trial_id(now: dt.datetime) -> str:
    """e.g. `20261201t120000-3f9a`: sortable, and unique across runs started together."""
    return f"{now:%Y%m%dt%H%M%S}-{secrets.token_hex(2)}"


def _not_running(driver: FleetDriver, unit_id: str, host: str) -> str | None:
    """Why a unit is not running — its exit code (a scheduler's job: its end state) and last
    log lines — or None when it runs or waits in the scheduler's queue to start."""
    record = next((r for r in driver.units(host) if r.id == unit_id), None)
    if record is not None and (record.alive or record.pending or record.exiting):
        return None
    if record is None:
        return f"{unit_id} on {host} is gone"
    try:
        tail: list[str] = driver.logs(host, unit_id, tail=5)["lines"]
    except DenvError:
        tail = []
    shown = [line if len(line) <= 200 else line[:200] + "…" for line in tail]
    log = ("; its last log lines: " + " | ".join(shown)) if shown else ""
    if record.job is not None and record.exit_code is None:
        return f"{unit_id} on {host}: job {record.job} ended: {record.queue}{log}"
    return f"{unit_id} on {host} exited (exit {record.exit_code}){log}"


def _not_ready(driver: FleetDriver, unit_id: str, host: str, timeout: float) -> str:
    """Why a unit still running (or still queued) is not ready after `timeout`."""
    record = next((r for r in driver.units(host) if r.id == unit_id), None)
    if record is not None and record.pending:
        reason = record.queue_reason or "no reason given"
        return (
            f"{unit_id} on {host}: job {record.job} still pending in partition "
            f"{record.partition} after {timeout:g}s ({reason})"
        )
    return f"{unit_id} on {host}: not ready after {timeout:g}s"


class _Trial:
    """The units of one planned trial, started and stopped through the hosts' agents."""

    def __init__(
        self, plan: TrialPlan, fleet: Fleet, drivers: Drivers, secrets: Collection[str] | None
    ) -> None:
        self.plan = plan
        self.fleet = fleet
        self.drivers = drivers
        self.secrets = secrets  # the bot's variables its prepare may read (None: the fleet's)

    @property
    def driver(self) -> FleetDriver:
        return self.drivers.get(self.fleet)

    def prepare(self, say: Say) -> None:
        """Runtimes and weights ready on every host first (as a release's apply does);
        nothing to do on a simulated fleet. PrepareFailed naming the hosts that failed."""
        wanted: dict[tuple[str, str | None], list[TrialUnit]] = {}
        for unit in self.plan.units:
            if unit.need is not None or unit.weights is not None:
                wanted.setdefault((unit.host, unit.weights), []).append(unit)
        asks, payloads = {}, {}
        for (host, weights), units in sorted(wanted.items(), key=str):
            key = f"{host} {weights or ''}".strip()
            needs = [u.need for u in units if u.need is not None]
            request = weights_request(self.fleet, weights, secrets=self.secrets)
            payloads[key] = prepare_payload(needs, request, host)
            asks[key] = (host, functools.partial(self.driver.prepare, host))
        if not payloads:
            return
        shown: dict[str, str] = {}

        def progress(key: str, state: JobState) -> None:
            if shown.get(key) != state.step:  # one line per step and host
                shown[key] = state.step
                done, total = state.bytes_done / 1e9, state.bytes_total / 1e9
                say(f"prepare {key}: {state.step} {done:.1f}/{total:.1f} GB")

        _, errors = prepare_hosts(asks, payloads, self.fleet.weights.parallel, progress)
        if errors:
            raise PrepareFailed("; ".join(f"{key}: {why}" for key, why in sorted(errors.items())))

    def start(self, units: tuple[TrialUnit, ...], timeout: float, say: Say) -> None:
        """Launch the units, then wait until each is ready; UnitExited when one exits first
        or is not ready in time."""
        for unit in units:
            say(f"+ start {unit.id} on {unit.host} (GPUs {_gpus(unit)})")
            self.driver.launch(unit.host, unit.payload())
        for unit in units:
            why: list[str] = []

            def stopped(unit: TrialUnit = unit, why: list[str] = why) -> bool:
                found = _not_running(self.driver, unit.id, unit.host)
                why.extend([found] if found else [])
                return found is not None

            ready = functools.partial(probes.is_ready, unit.unit)
            if not probes.wait_until(ready, timeout, abort=stopped):
                raise UnitExited(
                    why[0] if why else _not_ready(self.driver, unit.id, unit.host, timeout)
                )

    def stop_all(self, grace: float, say: Say) -> list[str]:
        """Stop every unit of the trial, router first; what could not be stopped, and why.
        Units never launched are asked too: the agent answers 'no such unit'."""
        units = [(u.id, u.host) for u in self.plan.units]
        left = stop_units(self.fleet, self.drivers, units, grace)
        say(f"- stopped trial {self.plan.trial} ({len(units) - len(left)} units)")
        return left


def stop_units(
    fleet: Fleet, drivers: Drivers, units: Iterable[tuple[str, str]], grace: float
) -> list[str]:
    """Stop a trial's units — (id, host) pairs, router last — router first, so no request
    reaches an engine that is going; what could not be stopped, and why."""
    left = []
    for unit_id, host in reversed(list(units)):
        try:
            drivers.get(fleet).stop(host, unit_id, grace=grace)
        except DenvError as exc:
            left.append(f"{unit_id} on {host}: {exc}")
    return left


def stop_trial(fleet: Fleet, drivers: Drivers, trial: FoundTrial, grace: float) -> list[str]:
    """Stop every unit of a trial the agents report, in the teardown's order; what is left."""
    return stop_units(fleet, drivers, [(u.id, u.host) for u in trial.units], grace)


def reclaim_abandoned(
    fleet: Fleet, drivers: Drivers, observation: FleetObservation, grace: float, say: Say
) -> list[FoundTrial]:
    """Stop the trials whose owning process on this machine is gone (killed with SIGKILL,
    or its machine restarted), so their GPUs are free again; the ones stopped. A trial
    whose owner runs, is on another machine or is unknown is never touched."""
    abandoned = [
        t for t in found_trials(observation, owner_state) if t.state == TrialState.ABANDONED
    ]
    for trial in abandoned:
        left = stop_trial(fleet, drivers, trial, grace)
        say(
            f"- reclaimed abandoned trial {trial.trial} ({trial.purpose or 'purpose unknown'}; "
            f"its owner {trial.owner} is gone): GPUs freed: {trial.gpus_text()}"
        )
        for why in left:
            say(f"warning: not stopped: {why}")
    return abandoned


def _gpus(unit: TrialUnit) -> str:
    return ",".join(map(str, unit.unit.gpu_indices)) or "none"


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, so it tears down as Ctrl-C does (main thread only:
    elsewhere Python cannot set a handler, and the caller's own handling stands)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _shielded() -> Iterator[list[int]]:
    """Ctrl-C and SIGTERM wait while the trial tears down, so a second Ctrl-C cannot leave
    units behind (SIGKILL still ends the process); the signals that came are yielded."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return

    def note(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    previous = {s: signal.signal(s, note) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield caught
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def trial_deployment(
    repo: Repo,
    recipe: Recipe,
    fleet: Fleet,
    *,
    drivers: Drivers,
    trial: str,
    weights: str | None = None,
    secrets: Collection[str] | None,
    purpose: str = "bench",
    ready_timeout: float = 900.0,
    stop_grace: float = 10.0,
    say: Say = lambda _message: None,
) -> Iterator[TrialEndpoint]:
    """`recipe` on free trial GPUs of `fleet`, ready, for the `with` block; every unit stopped
    after it, whatever ended it. DenvError (PlacementError, EngineError, UnitExited, …) when
    it cannot be deployed, after stopping what was started. `trial` names it (new_trial_id).
    `secrets`: the bot's environment variables the trial may receive (a pull request's: its
    trusted PR policy's list; None: any its fleet names, for the operator's own runs)."""
    hardware = repo.resolve_hardware(fleet.hardware)
    if hardware is None:
        raise NotFound(f"fleet {fleet.name}: unknown hardware '{fleet.hardware}'")
    if not fleet.simulated and not repo.recipe_runs_on(recipe, fleet):
        raise UsageError(
            f"{recipe.id} is for {', '.join(recipe.hardware)}; {fleet.name} has "
            f"{fleet.hardware} (a simulated fleet runs any recipe)"
        )
    arch = repo.models.get(recipe.model)
    driver = drivers.get(fleet)
    python = driver.python
    weights = weights or default_weights(repo, recipe)
    if not fleet.simulated and weights.startswith("hf://") and weights_commit(weights) is None:
        raise UsageError(
            f"weights {weights} are not pinned to a commit: give hf://org/repo@<commit> "
            "(--weights), as a release pins them"
        )
    deployment = trial_spec(recipe, fleet.name, trial, weights)
    observation = driver.observe(hardware)
    if reclaim_abandoned(fleet, drivers, observation, stop_grace, say):
        observation = driver.observe(hardware)  # their GPUs are free now
    for host, why in sorted(observation.errors.items()):
        say(f"warning: {host} did not answer; its trial GPUs are left out: {why}")
    if not observation.hosts:
        raise DenvError(f"no host of fleet {fleet.name} answered")
    context = EngineContext(hardware=hardware, model=arch, python=python, engine_python=python)
    size = domain_size(repo, fleet.name) or 1
    plan = plan_trial(
        deployment, fleet, observation, context, size, purpose, this_process(), rules=driver
    )
    running = _Trial(plan, fleet, drivers, secrets)
    started = time.monotonic()
    failed = True
    try:
        with sigterm_as_interrupt():
            running.prepare(say)
            running.start(plan.engines, ready_timeout, say)
            running.start((plan.router,), ready_timeout, say)
            yield TrialEndpoint(
                trial=plan.trial,
                url=plan.endpoint,
                model=deployment.served_model,
                weights=deployment.weights,
                engine=plan.engine,
                units={u.id: u.host for u in plan.units},
                hosts=plan.gpus_by_host(),
                gpus=deployment.gpus,
                simulated=fleet.simulated,
                probe=probe_info(plan, observation),
                ready_s=round(time.monotonic() - started, 3),
            )
            failed = False
    finally:
        with _shielded() as caught:
            left = running.stop_all(stop_grace, say)
        message = "trial units left running (stop them by hand): " + "; ".join(left)
        if left and failed:
            say(message)  # the error that ended the block is the one to raise
        elif left:
            raise DenvError(message)
        if caught and not failed:
            raise KeyboardInterrupt  # Ctrl-C came while tearing down: still an interrupt


def check_running(endpoint: TrialEndpoint, fleet: Fleet, drivers: Drivers) -> None:
    """UnitExited when a unit of the trial no longer runs (an engine that crashed in the
    middle of a sweep): figures taken since then are not the recipe's."""
    by_host: dict[str, list[str]] = {}
    for unit_id, host in endpoint.units.items():
        by_host.setdefault(host, []).append(unit_id)
    for host, ids in by_host.items():
        driver = drivers.get(fleet)
        for unit_id in ids:
            why = _not_running(driver, unit_id, host)
            if why is not None:
                raise UnitExited(why)
