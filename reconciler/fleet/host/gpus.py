"""GPUs of this host: NVML, amdsmi, nvidia-smi, amd-smi in that order, or the simulated GPUs a
fleet declares. Stdlib only; the vendor libraries are imported when present."""

import json
import os
import subprocess

from common import AgentError
from units import list_units


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
    """The GPUs a simulated host declares (or the cores of a CPU host: source "cpu");
    processes are denv's own units on them."""
    used = {}
    for record in list_units():
        if record["alive"]:
            for index in record.get("gpus", []):
                used.setdefault(index, []).append({"pid": record["pid"], "used_mib": None})
    memory = int(declared.get("memory_gb", 0) * 1024)
    source = declared.get("source", "simulated")
    prefix = "CPU" if source == "cpu" else "SIM"
    gpus = [
        {
            "index": index,
            "uuid": "{}-{}-{}".format(prefix, declared.get("host", "host"), index),
            "name": declared.get("name", "simulated GPU"),
            "memory_total_mib": memory,
            "memory_used_mib": memory if used.get(index) else 0,
            "processes": used.get(index, []),
            "domain": declared.get("domain"),
        }
        for index in range(int(declared.get("count", 0)))
    ]
    return {"source": source, "driver": None, "runtime": None, "gpus": gpus}


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
