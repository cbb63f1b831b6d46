"""The plan on a scheduler's fleet: a job the queue holds is kept and shown as pending with
the scheduler's reason; a job the scheduler ended is submitted again with its end as the
reason; an ended job nothing wants is not stopped."""

from __future__ import annotations

from reconciler.fleet.model.observed import UnitRecord
from reconciler.reconcile.desired import running_replicas
from reconciler.reconcile.plan import ActionKind, Plan, plan
from reconciler.reconcile.render import render_text
from tests.labs.release import release_yaml
from tests.reconcile.conftest import GitRepo, applied, desired_of, observation

ENGINE_0 = "chat-8b.canary.local.aggregated-0"


Records = list[tuple[str, UnitRecord]]


def as_jobs(records: Records, **queue: object) -> Records:
    """The records as a scheduler reports its jobs (engines only: the router runs on the
    login node as an ordinary unit)."""
    return [
        (host, r.model_copy(update={"job": str(7 + n), "nodes": (host,), **queue}))
        if not r.id.endswith("router")
        else (host, r)
        for n, (host, r) in enumerate(records)
    ]


def planned(repo: GitRepo, records: Records) -> Plan:
    seen = observation(records)
    observed = {"local": {host: found.units for host, found in seen.hosts.items()}}
    return plan(desired_of(repo, {"local": seen}), observed)


def test_a_pending_job_is_kept_and_shown_with_its_reason(git_repo: GitRepo) -> None:
    records = applied(desired_of(git_repo, {"local": observation([])}), alive=False)
    queued = as_jobs(records, queue="PENDING", queue_reason="Resources")
    result = planned(git_repo, queued)
    engines = [a for a in result.actions if a.role != "router"]
    assert {(a.kind, a.reason) for a in engines} == {(ActionKind.KEEP, "pending: Resources")}
    shown = render_text(result)
    assert f"… {ENGINE_0}" in shown and "pending: Resources" in shown


def test_a_job_the_scheduler_ended_is_submitted_again_with_why(git_repo: GitRepo) -> None:
    records = applied(desired_of(git_repo, {"local": observation([])}))
    ended = as_jobs(records[:1], queue="TIMEOUT", alive=False) + records[1:]
    result = planned(git_repo, ended)
    [start] = [a for a in result.actions if a.kind == ActionKind.START]
    assert (start.unit, start.reason) == (ENGINE_0, "job 7 ended: TIMEOUT; start it again")


def test_an_ended_job_nothing_wants_is_not_stopped(git_repo: GitRepo) -> None:
    records = applied(desired_of(git_repo, {"local": observation([])}))
    gone = records[0][1].model_copy(
        update={"id": ENGINE_0 + "~surge", "job": "9", "queue": "CANCELLED", "alive": False}
    )
    result = planned(git_repo, [*records, (records[0][0], gone)])
    assert result.empty, [(a.kind, a.unit) for a in result.actions]


def test_an_elastic_count_read_from_jobs_counts_pending_ones_and_not_ended_ones(
    git_repo: GitRepo,
) -> None:
    """One job per replica: one running, one whose node boots, one the queue holds, one the
    scheduler ended (the queue remembers it a while after a scale-down cancelled it) — three
    replicas."""
    git_repo.write("releases/chat-8b/denv.yaml", release_yaml(replicas=4))
    git_repo.commit("chat-8b: four replicas")
    records = applied(desired_of(git_repo, {"local": observation([])}))
    running, booting, held, ended, router = records
    jobs = [
        *as_jobs([running]),
        *as_jobs([booting], queue="CONFIGURING", alive=False),
        *as_jobs([held], queue="PENDING", queue_reason="Resources", alive=False),
        *as_jobs([ended], queue="CANCELLED", alive=False, exited_at=1.0),
        router,
    ]
    assert running_replicas({"local": observation(jobs)}) == {("chat-8b", "canary", "local"): 3}


def test_a_job_whose_node_boots_is_stopped_when_nothing_wants_it(git_repo: GitRepo) -> None:
    """CONFIGURING (a cloud node powering up) holds its node: no ended job, so cancelled."""
    records = applied(desired_of(git_repo, {"local": observation([])}))
    booting = records[0][1].model_copy(
        update={"id": ENGINE_0 + "~surge", "job": "9", "queue": "CONFIGURING", "alive": False}
    )
    result = planned(git_repo, [*records, (records[0][0], booting)])
    stops = [a.unit for a in result.actions if a.kind == ActionKind.STOP]
    assert stops == [ENGINE_0 + "~surge"], [(a.kind, a.unit) for a in result.actions]
