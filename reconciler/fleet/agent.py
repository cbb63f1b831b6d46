#!/usr/bin/env python3
"""Adapter: denv's host agent — one stdlib-only file the bot runs on every host.

It answers in JSON on stdout, one object per call, and keeps the only record of what runs
where: unit records under ~/.denv/units/, written atomically (temp file + rename), so the bot
holds no state of its own. Verbs:

  probe  [--simulated JSON]   GPUs (NVML, amdsmi, nvidia-smi/amd-smi, else the declared
                              simulated GPUs), driver, and every unit — one round trip
  units                       the unit records, each with `alive` checked against pid reuse
  launch                      start the unit given as JSON on stdin, detached (own session),
                              under a supervisor that keeps a size-capped log and the exit code
  stop   UNIT [--grace S]     SIGTERM to the unit's process group, wait, SIGKILL; drop the record
  logs   UNIT [--tail N]      the last lines of the unit's log

Runs on Python 3.8+ with nothing installed: hosts are not ours to provision.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HOME = os.environ.get("DENV_HOME") or os.path.join(os.path.expanduser("~"), ".denv")
UNITS = os.path.join(HOME, "units")
LOGS = os.path.join(HOME, "logs")
LOG_CAP = int(os.environ.get("DENV_LOG_CAP", str(64 * 1024 * 1024)))  # bytes, then rotate once
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class AgentError(Exception):
    pass


def emit(value):
    sys.stdout.write(json.dumps(value, sort_keys=True) + "\n")
    sys.stdout.flush()


def write_atomic(path, value):
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(handle, "w") as stream:
            json.dump(value, stream, sort_keys=True)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def read_json(path):
    try:
        with open(path) as stream:
            return json.load(stream)
    except (OSError, ValueError):
        return None


def record_path(unit_id):
    if not unit_id or "/" in unit_id or unit_id.startswith("."):
        raise AgentError(f"bad unit id: {unit_id!r}")
    return os.path.join(UNITS, unit_id + ".json")


# --- processes -------------------------------------------------------------------------------


def start_time(pid):
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or
    None when there is no such process: with the pid it names one process, whatever reuse."""
    try:
        with open(f"/proc/{pid}/stat") as stream:
            stat = stream.read()
    except (OSError, ValueError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19]) if fields[0] != "Z" else None  # a zombie has exited


def alive(record):
    pid, started = record.get("pid"), record.get("start_time")
    return bool(pid) and started is not None and start_time(pid) == started


# --- GPUs ------------------------------------------------------------------------------------


def gpus_from_nvml():
    import pynvml  # nvidia-ml-py, when the host has it

    pynvml.nvmlInit()
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        runtime = None
        if hasattr(pynvml, "nvmlSystemGetCudaDriverVersion"):
            version = pynvml.nvmlSystemGetCudaDriverVersion()
            runtime = f"CUDA {version // 1000}.{version % 1000 // 10}"
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            processes = [
                {"pid": p.pid, "used_mib": (p.usedGpuMemory or 0) // 2**20}
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            ]
            gpus.append(
                {
                    "index": index,
                    "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                    "name": _text(pynvml.nvmlDeviceGetName(handle)),
                    "memory_total_mib": memory.total // 2**20,
                    "memory_used_mib": memory.used // 2**20,
                    "processes": processes,
                    "domain": nvml_domain(pynvml, handle),
                }
            )
        return {"source": "nvml", "driver": _text(driver), "runtime": runtime, "gpus": gpus}
    finally:
        pynvml.nvmlShutdown()


def nvml_domain(pynvml, handle):
    """NVLink domain of GB200-class systems: GPUs of one domain share cluster and clique."""
    try:
        info = pynvml.c_nvmlGpuFabricInfoV_t()
        pynvml.nvmlDeviceGetGpuFabricInfoV(handle, info)
        if info.state != pynvml.NVML_GPU_FABRIC_STATE_COMPLETED:
            return None
        cluster = bytes(info.clusterUuid).hex()
        return f"{cluster}/{info.cliqueId}" if cluster.strip("0") else None
    except Exception:  # older drivers and PCIe boards have no fabric
        return None


def gpus_from_amdsmi():
    import amdsmi

    amdsmi.amdsmi_init()
    try:
        gpus = []
        for index, handle in enumerate(amdsmi.amdsmi_get_processor_handles()):
            usage = amdsmi.amdsmi_get_gpu_vram_usage(handle)
            processes = []
            for process in amdsmi.amdsmi_get_gpu_process_list(handle):
                pid = process.get("pid") if isinstance(process, dict) else None
                if pid:
                    processes.append({"pid": pid, "used_mib": None})
            gpus.append(
                {
                    "index": index,
                    "uuid": None,
                    "name": amdsmi.amdsmi_get_gpu_asic_info(handle).get("market_name"),
                    "memory_total_mib": usage.get("vram_total"),
                    "memory_used_mib": usage.get("vram_used"),
                    "processes": processes,
                    "domain": None,
                }
            )
        return {"source": "amdsmi", "driver": None, "runtime": None, "gpus": gpus}
    finally:
        amdsmi.amdsmi_shut_down()


def gpus_from_nvidia_smi():
    fields = "index,uuid,name,memory.total,memory.used,driver_version"
    out = run_tool(["nvidia-smi", "--query-gpu=" + fields, "--format=csv,noheader,nounits"])
    apps = run_tool(
        [
            "nvidia-smi",
            "--query-compute-apps=gpu_uuid,pid,used_memory",
            "--format=csv,noheader,nounits",
        ]
    )
    by_uuid = {}
    for line in apps.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[1].isdigit():
            used = int(parts[2]) if parts[2].isdigit() else None
            by_uuid.setdefault(parts[0], []).append({"pid": int(parts[1]), "used_mib": used})
    gpus, driver = [], None
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 6:
            continue
        driver = parts[5]
        gpus.append(
            {
                "index": int(parts[0]),
                "uuid": parts[1],
                "name": parts[2],
                "memory_total_mib": int(float(parts[3])),
                "memory_used_mib": int(float(parts[4])),
                "processes": by_uuid.get(parts[1], []),
                "domain": None,
            }
        )
    return {"source": "nvidia-smi", "driver": driver, "runtime": None, "gpus": gpus}


def run_tool(argv):
    done = subprocess.run(argv, capture_output=True, timeout=20)
    if done.returncode != 0:
        raise AgentError(f"{argv[0]}: exit {done.returncode}")
    return done.stdout.decode("utf-8", "replace")


def gpus_simulated(declared):
    """The GPUs a simulated host declares; processes are denv's own units on them."""
    used = {}
    for record in list_units():
        if record["alive"]:
            for index in record.get("gpus", []):
                used.setdefault(index, []).append({"pid": record["pid"], "used_mib": None})
    memory = int(declared.get("memory_gb", 0) * 1024)
    gpus = [
        {
            "index": index,
            "uuid": "SIM-{}-{}".format(declared.get("host", "host"), index),
            "name": declared.get("name", "simulated GPU"),
            "memory_total_mib": memory,
            "memory_used_mib": memory if used.get(index) else 0,
            "processes": used.get(index, []),
            "domain": declared.get("domain"),
        }
        for index in range(int(declared.get("count", 0)))
    ]
    return {"source": "simulated", "driver": None, "runtime": None, "gpus": gpus}


def probe(simulated):
    """GPUs through the first source that works; simulated when the fleet declares so."""
    if simulated is not None:
        found = gpus_simulated(simulated)
    else:
        found, tried = None, []
        for source in (gpus_from_nvml, gpus_from_amdsmi, gpus_from_nvidia_smi, gpus_from_amd_smi):
            try:
                found = source()
                break
            except Exception as exc:  # ImportError, OSError, KeyError (amdsmi), NVMLError …
                tried.append(f"{source.__name__[10:]}: {type(exc).__name__}")
        if found is None:
            found = {"source": "none", "driver": None, "runtime": None, "gpus": [], "tried": tried}
    found["host"] = os.uname()[1]
    found["units"] = list_units()
    return found


def gpus_from_amd_smi():
    out = run_tool(["amd-smi", "static", "--asic", "--vram", "--json"])
    gpus = []
    for index, entry in enumerate(json.loads(out)):
        vram = entry.get("vram", {}).get("size", {})
        gpus.append(
            {
                "index": entry.get("gpu", index),
                "uuid": None,
                "name": entry.get("asic", {}).get("market_name"),
                "memory_total_mib": vram.get("value") if isinstance(vram, dict) else None,
                "memory_used_mib": None,
                "processes": [],
                "domain": None,
            }
        )
    return {"source": "amd-smi", "driver": None, "runtime": None, "gpus": gpus}


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


# --- units -----------------------------------------------------------------------------------


def list_units():
    records = []
    if os.path.isdir(UNITS):
        for name in sorted(os.listdir(UNITS)):
            if name.endswith(".json") and not name.startswith("."):
                record = read_json(os.path.join(UNITS, name))
                if record is not None:
                    record["alive"] = alive(record)
                    records.append(record)
    return records


def launch(unit):
    """Start a unit unless it already runs with the same digest (then do nothing)."""
    path = record_path(unit["id"])
    previous = read_json(path)
    if previous is not None and alive(previous):
        if previous.get("digest") == unit["digest"]:
            previous["alive"] = True
            previous["changed"] = False
            return previous
        raise AgentError(
            "unit {} runs another spec ({}); stop it first".format(
                unit["id"], previous.get("digest")
            )
        )
    os.makedirs(LOGS, exist_ok=True)
    log = os.path.join(LOGS, unit["id"] + ".log")
    if previous is None:  # a new unit starts a new log; a restart appends to its last one
        for stale in (log, log + ".1"):
            if os.path.exists(stale):
                os.unlink(stale)
    record = {
        "id": unit["id"],
        "digest": unit["digest"],
        "argv": unit["argv"],
        "port": unit.get("port"),
        "gpus": unit.get("gpus", []),
        "log": log,
        "restarts": (previous.get("restarts", 0) + 1) if previous else 0,
        "started_at": time.time(),
        "pid": None,
        "start_time": None,
        "exit_code": None,
    }
    env = dict(os.environ)
    env.update(unit.get("env", {}))
    spec_file = path + ".launch"
    write_atomic(spec_file, {"record": record, "env": env, "cwd": unit.get("cwd") or HOME})
    # The supervisor detaches in its own session, so the unit outlives this SSH session.
    supervisor = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "supervise", unit["id"]],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    deadline = time.time() + 10
    while time.time() < deadline:  # the record is written before we answer
        current = read_json(path)
        if (
            current is not None
            and current.get("pid")
            and current.get("started_at") == record["started_at"]
        ):
            current["alive"] = alive(current)
            current["changed"] = True
            return current
        if supervisor.poll() is not None:
            break
        time.sleep(0.01)
    raise AgentError(
        "unit {} did not start (supervisor exit {})".format(unit["id"], supervisor.poll())
    )


def supervise(unit_id):
    """Run one unit: its output into a size-capped log, its exit code into its record."""
    path = record_path(unit_id)
    launch_spec = read_json(path + ".launch")
    os.unlink(path + ".launch")
    record = launch_spec["record"]
    child = subprocess.Popen(
        record["argv"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=launch_spec["env"],
        cwd=launch_spec["cwd"],
    )
    record["pid"] = child.pid
    record["pgid"] = os.getpgid(0)
    record["supervisor_pid"] = os.getpid()
    record["start_time"] = start_time(child.pid)
    write_atomic(path, record)
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    log_error = copy_capped(child.stdout, record["log"], lambda error: note(path, record, error))
    code = child.wait()
    final = read_json(path)
    if final is not None and final.get("started_at") == record["started_at"]:
        final["exit_code"] = code
        if log_error:
            final["log_error"] = log_error
        write_atomic(path, final)


def note(path, record, error):
    """Put a log error into the record at once, so `units` shows it while the unit runs."""
    current = read_json(path)
    if current is not None and current.get("started_at") == record["started_at"]:
        current["log_error"] = error
        write_atomic(path, current)


def copy_capped(stream, log_path, on_error):
    """Copy output to the log, rotating once to .1 past LOG_CAP; on a write error (disk full)
    keep draining so the unit never blocks on its output, and report the error."""
    error = None
    log = open(log_path, "ab")  # noqa: SIM115 - reopened on rotation
    written = log.tell()
    for chunk in iter(lambda: stream.read1(65536), b""):
        if error is not None:
            continue
        try:
            while chunk:
                if written >= LOG_CAP:
                    log.close()
                    os.replace(log_path, log_path + ".1")
                    log, written = open(log_path, "ab"), 0  # noqa: SIM115
                part, chunk = chunk[: LOG_CAP - written], chunk[LOG_CAP - written :]
                log.write(part)
                written += len(part)
            log.flush()
        except OSError as exc:
            error = f"log write failed: {exc.strerror}"
            on_error(error)
    try:
        log.close()
    except OSError as exc:
        error = error or f"log write failed: {exc.strerror}"
    return error


def stop(unit_id, grace):
    path = record_path(unit_id)
    record = read_json(path)
    if record is None:
        return {"id": unit_id, "stopped": False, "reason": "no such unit"}
    was_alive = alive(record)
    if was_alive:  # never signal a group whose leader may be a reused pid
        group = record.get("pgid")
        with contextlib.suppress(OSError, TypeError):
            os.killpg(group, signal.SIGTERM)
        deadline = time.time() + grace
        while time.time() < deadline and alive(record):
            time.sleep(0.05)
        if alive(record):
            with contextlib.suppress(OSError, TypeError):
                os.killpg(group, signal.SIGKILL)
            while alive(record):
                time.sleep(0.01)
    supervisor = record.get("supervisor_pid")
    deadline = time.time() + 5
    while supervisor and time.time() < deadline and start_time(supervisor) is not None:
        time.sleep(0.01)  # it writes the exit code last; let it finish before the record goes
    if os.path.exists(path):
        os.unlink(path)
    return {"id": unit_id, "stopped": was_alive, "exit_code": record.get("exit_code")}


def logs(unit_id, tail):
    record = read_json(record_path(unit_id))
    if record is None:
        raise AgentError(f"no unit {unit_id} on this host")
    try:
        with open(record["log"], "rb") as stream:
            stream.seek(0, os.SEEK_END)
            stream.seek(max(0, stream.tell() - 256 * 1024))
            lines = stream.read().decode("utf-8", "replace").splitlines()[-tail:]
    except OSError as exc:
        lines = []
        record["log_error"] = record.get("log_error") or f"cannot read log: {exc.strerror}"
    return {
        "id": unit_id,
        "lines": lines,
        "log": record["log"],
        "log_error": record.get("log_error"),
    }


def option(args, name, default):
    if name in args:
        index = args.index(name)
        if index + 1 >= len(args):
            raise AgentError(f"{name} needs a value")
        return args[index + 1]
    return default


def main(argv):
    if not argv:
        raise AgentError("usage: agent.py probe|units|launch|stop|logs …")
    verb, args = argv[0], argv[1:]
    if verb == "probe":
        simulated = option(args, "--simulated", None)
        return probe(json.loads(simulated) if simulated else None)
    if verb == "units":
        return {"host": os.uname()[1], "units": list_units()}
    if verb == "launch":
        return launch(json.loads(sys.stdin.read()))
    if verb == "stop":
        return stop(args[0], float(option(args, "--grace", "10")))
    if verb == "logs":
        return logs(args[0], int(option(args, "--tail", "100")))
    if verb == "supervise":
        supervise(args[0])
        return None
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
