"""denv's host agent: a stdlib-only zip application the bot runs on every host.

It answers in JSON on stdout, one object per call, and keeps the only record of what runs
where: unit records under ~/.denv/units/ (or $DENV_HOME), written atomically, so the bot holds
no state of its own. Verbs:

  probe  [--simulated JSON]   GPUs (NVML, amdsmi, nvidia-smi/amd-smi, else the declared
                              simulated GPUs), driver, container engine, and every unit
  units                       the unit records, each with `alive` checked against pid reuse,
                              and the paths of those that cannot be read (`unreadable`)
  launch                      start the unit given as JSON on stdin, detached (own session),
                              under a supervisor that keeps a size-capped log and the exit code
  stop   UNIT [--grace S]     SIGTERM to the unit's process group, wait, SIGKILL; clean up
  logs   UNIT [--tail N]      the last lines of the unit's log
  prepare [--wait S]          make the runtime and weights on stdin ready (a detached job;
                              idempotent); answers the job's state and progress
  runtimes                    environments, images and weights that are ready, in use, sizes
  prune  [--keep-hours H]     remove runtimes and weights no unit needs any more
  lease  NAME --holder H --ttl S [--release]   take, renew or give back a fleet's lease
  repair [--grace S]          mend the records that cannot be read: a lease or fence file
                              moved aside, a unit record too once its processes are stopped
  slurm-observe|slurm-submit|slurm-cancel|slurm-logs   on a Slurm cluster's login node:
                              the cluster in one call, a unit as a job, scancel (slurm.py)
  serve                       stay resident: read one JSON request per line on stdin, answer
                              each with one JSON line (same `id`), requests on threads, until
                              stdin closes; the first line says hello with this file's digest

Any verb may carry `--fence FLEET:EPOCH` (fences.py): refused when a newer epoch of the
fleet's lease has been seen here, that is when its bot lost the lease since.

One-shot, every call starts Python (about 60 ms of a host's CPU); the bot keeps `serve` running
on its kept SSH channel, so a call is one message — the shape mitogen gives Ansible.

A record that is there and cannot be read is never taken for absent: the verbs that need it
refuse, naming its path (`unreadable` in the answer), until `repair` (recovery.py).

Runs on Python 3.8+ with nothing installed: hosts are not ours to provision.
"""

import errno
import hashlib
import json
import os
import select
import shutil
import sys
import threading

import fences
import gpus
import jobs
import leases
import recovery
import runtimes
import slurm
import sockets
import supervisors
import units
import weights
from common import HOME, AgentError, Unreadable, agent_path, emit, option


def probe(simulated):
    found = gpus.probe(simulated)
    found["home"] = HOME
    found["container_engine"] = next((e for e in ("docker", "podman") if shutil.which(e)), None)
    found["listening"] = sockets.listening_ports()
    found["loopback_listening"] = sockets.loopback_only()
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


def main(argv, payload=lambda: json.loads(sys.stdin.read())):
    """Run one verb; `payload` reads the JSON a verb takes (one-shot: stdin)."""
    if not argv:
        raise AgentError("usage: agent probe|units|launch|stop|logs|prepare|runtimes|prune|repair")
    verb, args = argv[0], argv[1:]
    fence = option(args, "--fence", None)
    if fence is not None:  # the lease holder's epoch: an older one is a bot that lost it
        fences.check(fence)
        at = args.index("--fence")
        args = args[:at] + args[at + 2 :]
    if verb == "probe":
        simulated = option(args, "--simulated", None)
        return probe(json.loads(simulated) if simulated else None)
    if verb == "units":
        records, unreadable = units.scan()
        return {"host": os.uname()[1], "units": records, "unreadable": unreadable}
    if verb == "launch":
        return units.launch(payload())
    if verb == "stop":
        return units.stop(args[0], float(option(args, "--grace", "10")))
    if verb == "logs":
        return units.logs(args[0], int(option(args, "--tail", "100")))
    if verb == "prepare":
        return jobs.prepare(payload(), float(option(args, "--wait", "5")))
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
            machine="--machine" in args,
        )
    if verb == "repair":
        return recovery.repair(float(option(args, "--grace", "10")))
    if verb == "supervise":
        units.supervise(args[0])
        return None
    if verb == "run-job":
        jobs.run_job(args[0])
        return None
    if verb == "hf-fetch":
        return weights.hf_fetch_main(args)
    if verb.startswith("slurm-"):
        return slurm.main(verb, args, payload)
    raise AgentError(f"unknown verb {verb!r}")


def answer(argv, payload=lambda: json.loads(sys.stdin.read())):
    """One verb's answer as the bot reads it: ok and the result, or the error."""
    try:
        return {"ok": True, "result": main(argv, payload)}
    except Unreadable as exc:
        return {"ok": False, "error": str(exc), "unreadable": exc.path}
    except AgentError as exc:
        return {"ok": False, "error": str(exc)}
    except OSError as exc:
        said = {"ok": False, "error": "{}: {}".format(exc.filename or "host", exc.strerror or exc)}
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            said["host_fault"] = exc.strerror  # any verb that writes fails here the same way
        return said


def own_digest():
    """The first 16 hex digits of this agent file's sha256: what the bot named it by."""
    with open(agent_path(), "rb") as stream:
        return hashlib.sha256(stream.read()).hexdigest()[:16]


def hung_up(stream):
    """Whether the bot closed its end of `stream`, even with lines still unread in it."""
    closed = select.POLLHUP | getattr(select, "POLLRDHUP", 0)  # a pipe; a socket's half-close
    poller = select.poll()
    poller.register(stream.fileno(), select.POLLIN | closed)
    return any(events & closed for _fd, events in poller.poll(0))


def serve():
    """Answer requests from stdin until it closes. Each runs on its own thread (a slow stop
    does not hold a probe); answers are whole lines, written under a lock. A request still
    running when stdin closes is finished before the agent exits (threads are not daemons):
    a launch cut off by a lost channel completes, and the next one finds its unit. A request
    not yet started when the bot hung up is never started: the bot gave up on it (this agent
    was stopped or slow past its timeout) and has gone on without it, so acting on it now
    would act behind the bot's back."""
    supervisors.start_spawner(units.supervise)  # before the first thread
    writing = threading.Lock()

    def reply(value):
        with writing:
            emit(value)

    def handle(request):
        if request.get("verb") in ("serve", "supervise", "run-job", "hf-fetch", "slurm-task"):
            result = {"ok": False, "error": "verb {!r} is not served".format(request["verb"])}
        else:
            given = request.get("payload")
            argv = [request.get("verb") or ""] + [str(a) for a in request.get("args") or []]
            try:
                result = answer(argv, lambda: given)
            except Exception as exc:  # a bug in one verb must not end the agent's other calls
                result = {"ok": False, "error": f"agent: {type(exc).__name__}: {exc}"}
        result["id"] = request.get("id")
        reply(result)

    reply({"hello": {"digest": own_digest(), "pid": os.getpid(), "home": HOME}})
    for line in sys.stdin:
        if not line.strip():
            continue
        if hung_up(sys.stdin):
            break
        try:
            request = json.loads(line)
        except ValueError:
            reply({"ok": False, "error": f"not JSON: {line[:100]!r}", "id": None})
            continue
        threading.Thread(target=handle, args=(request,)).start()


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve()
        sys.exit(0)
    outcome = answer(sys.argv[1:])
    if not outcome["ok"] or outcome["result"] is not None:
        emit(outcome)
    sys.exit(0 if outcome["ok"] else 2)
