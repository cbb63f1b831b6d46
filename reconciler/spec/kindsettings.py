"""Models: what the built-in fleet kinds (local, ssh, slurm) read of a fleet file beyond what
every fleet has — a Slurm fleet's `slurm:` block — and their checks of a fleet file, which
the fleet model runs for the kind its `transport` names (reconciler/spec/fleetkinds.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from reconciler.spec.base import Spec, field_error

if TYPE_CHECKING:  # types only: the fleet model reads the registry that names these
    from reconciler.spec.fleet import Fleet


class SlurmSettings(Spec):
    """A fleet whose GPU hosts are the nodes of a Slurm cluster: engines run as jobs that
    the scheduler places on them; the fleet's host without GPUs is the login node, where the
    agent submits and watches jobs and routers run (docs/fleets.md)."""

    partition: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    account: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._-]+$")
    qos: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._-]+$")
    # Bench runs and optimizer trials: their own partition or QOS (the site's policy for
    # work that may wait or be preempted); default: the serving partition and QOS.
    trial_partition: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._-]+$")
    trial_qos: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._-]+$")
    # sbatch --time for serving jobs (`UNLIMITED`, `7-00:00:00`); None: the partition's
    # default. A job ended at its limit is submitted again at the next pass.
    time_limit: str | None = Field(default=None, pattern=r"^(UNLIMITED|[0-9:-]+)$")
    trial_time_limit: str | None = Field(default=None, pattern=r"^(UNLIMITED|[0-9:-]+)$")
    # How a job asks for GPUs: `gres` (--gres=gpu:N) or `gpus` (--gpus-per-node=N).
    gpu_request: Literal["gres", "gpus"] = "gres"


def check_local(fleet: Fleet) -> None:
    if fleet.agent_home is not None:
        raise field_error(
            "agent_home",
            "agent_home is for ssh and slurm fleets; a local fleet's agent uses $DENV_HOME",
        )


def check_ssh(fleet: Fleet) -> None:
    if fleet.ssh is None:
        raise field_error(
            "transport", "transport ssh (the default) needs an ssh block (user, key_file, port)"
        )


def check_slurm(fleet: Fleet) -> None:
    if not any(host.gpus == 0 for host in fleet.hosts):
        raise field_error(
            "hosts",
            "transport slurm needs the login node as a host with gpus: 0 "
            "(where jobs are submitted and routers run)",
        )
