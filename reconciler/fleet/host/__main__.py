"""denv's host agent: a stdlib-only zip application the bot runs on every host.

It answers in JSON on stdout, one object per call, and keeps the only record of what runs
where: unit records under ~/.denv/units/ (or $DENV_HOME), written atomically, so the bot holds
no state of its own. Verbs:

  probe  [--simulated JSON]   GPUs (NVML, amdsmi, nvidia-smi/amd-smi, else the declared
                              simulated GPUs), driver, container engine, and every unit
  units                       the unit records, each with `alive` checked against pid reuse
  launch                      start the unit given as JSON on stdin, detached (own session),
                              under a supervisor that keeps a size-capped log and the exit code
  stop   UNIT [--grace S]     SIGTERM to the unit's process group, wait, SIGKILL; clean up
  logs   UNIT [--tail N]      the last lines of the unit's log
  prepare [--wait S]          make the runtime and weights on stdin ready (a detached job;
                              idempotent); answers the job's state and progress
  runtimes                    environments, images and weights that are ready, in use, sizes
  prune  [--keep-hours H]     remove runtimes and weights no unit needs any more
  lease  NAME --holder H --ttl S [--release]   take, renew or give back a fleet's lease

Runs on Python 3.8+ with nothing installed: hosts are not ours to provision.
"""

import json
import os
import shutil
import sys

import gpus
import jobs
import leases
import runtimes
import sockets
import units
import weights
from common import HOME, AgentError, emit, option


def probe(simulated):
    found = gpus.probe(simulated)
    found["home"] = HOME
    found["container_engine"] = next((e for e in ("docker", "podman") if shutil.which(e)), None)
    found["listening"] = sockets.listening_ports()
    return found


def inventory():
    records = units.list_units()
    cached = weights.list_weights()
    return {"host": os.uname()[1], "runtimes": runtimes.environments(records), "weights": cached}


def prune(keep_hours):
    records = units.list_units()
    removed = runtimes.prune(records, keep_hours * 3600)
    keep = {r.get("labels", {}).get("weights") for r in records if r.get("alive")}
    removed += weights.prune_weights({k for k in keep if k})
    return {"host": os.uname()[1], "removed": removed}


def main(argv):
    if not argv:
        raise AgentError("usage: agent probe|units|launch|stop|logs|prepare|runtimes|prune …")
    verb, args = argv[0], argv[1:]
    if verb == "probe":
        simulated = option(args, "--simulated", None)
        return probe(json.loads(simulated) if simulated else None)
    if verb == "units":
        return {"host": os.uname()[1], "units": units.list_units()}
    if verb == "launch":
        return units.launch(json.loads(sys.stdin.read()))
    if verb == "stop":
        return units.stop(args[0], float(option(args, "--grace", "10")))
    if verb == "logs":
        return units.logs(args[0], int(option(args, "--tail", "100")))
    if verb == "prepare":
        return jobs.prepare(json.loads(sys.stdin.read()), float(option(args, "--wait", "5")))
    if verb == "runtimes":
        return inventory()
    if verb == "prune":
        return prune(float(option(args, "--keep-hours", "24")))
    if verb == "lease":
        return leases.lease(
            args[0],
            option(args, "--holder", ""),
            float(option(args, "--ttl", "60")),
            release="--release" in args,
            note=json.loads(option(args, "--note", "null")),
            peek="--peek" in args,
        )
    if verb == "supervise":
        units.supervise(args[0])
        return None
    if verb == "run-job":
        jobs.run_job(args[0])
        return None
    if verb == "hf-fetch":
        return weights.hf_fetch_main(args)
    raise AgentError(f"unknown verb {verb!r}")


if __name__ == "__main__":
    try:
        answer = main(sys.argv[1:])
        if answer is not None:
            emit({"ok": True, "result": answer})
    except AgentError as exc:
        emit({"ok": False, "error": str(exc)})
        sys.exit(2)
    except OSError as exc:
        emit({"ok": False, "error": "{}: {}".format(exc.filename or "host", exc.strerror or exc)})
        sys.exit(2)
