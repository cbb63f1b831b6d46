"""Pure logic: what the engine cards share — engine versions and their flag tables, the
check of a recipe's extra args, and small helpers for argv and env.

Version policy: a version uses the flag table of the nearest known version at or below it
(0.5.12.post1 uses 0.5.12's, 0.5.24 uses 0.5.23's); a version older than every table is
refused. Every unit says which table checked it (`Unit.flag_table`).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from reconciler.catalog.deployments import Deployment
from reconciler.engines.units import EngineContext, Probe
from reconciler.errors import EngineError, UnknownFlag, UnknownVersion, UnsupportedSetting
from reconciler.spec.base import Spec
from reconciler.spec.catalog import Hardware
from reconciler.spec.recipe import Settings

_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:[.-]?(post|rc|dev)(\d*))?$")
_PHASE = {"dev": -2, "rc": -1, "": 0, "post": 1}


def version_key(version: str) -> tuple[int, int, int, int, int]:
    """Orders versions: 0.5.12.dev1 < 0.5.12rc1 < 0.5.12 < 0.5.12.post1 < 0.5.13."""
    match = _VERSION.match(version)
    if match is None:
        raise EngineError(f"'{version}' is not an engine version (e.g. 0.5.23, 0.5.12.post1)")
    major, minor, patch, phase, number = match.groups()
    return (int(major), int(minor), int(patch or 0), _PHASE[phase or ""], int(number or 0))


class FlagTable(Spec):
    """The flags of one engine version, and the fixed choices of those denv writes."""

    engine: str
    version: str  # the version asked for
    table: str  # the known version whose flags apply
    flags: frozenset[str]
    choices: dict[str, frozenset[str]]

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version}"

    @property
    def source(self) -> str:
        return f"{self.engine} {self.table}"

    def has(self, flag: str) -> bool:
        return flag in self.flags

    def require(self, flag: str, setting: str, shown: object) -> str:
        """`flag`, refused (naming the setting) when the version lacks it."""
        if flag not in self.flags:
            raise UnsupportedSetting(setting, shown, self.label, f"{self.source} has no {flag}")
        return flag

    def value(self, flag: str, value: str, setting: str, shown: object) -> str:
        """`value` for `flag`, refused (naming the setting) when the version lacks it."""
        allowed = self.choices.get(flag)
        if allowed is not None and value not in allowed:
            raise UnsupportedSetting(
                setting, shown, self.label, f"{flag} takes {', '.join(sorted(allowed))}"
            )
        return value


def flag_tables(history: tuple[tuple[str, str, str], ...]) -> dict[str, frozenset[str]]:
    """Each version's flags from (version, added, removed) entries, oldest first."""
    tables: dict[str, frozenset[str]] = {}
    flags: frozenset[str] = frozenset()
    for version, added, removed in history:
        flags = (flags | set(added.split())) - set(removed.split())
        tables[version] = flags
    return tables


def pick_table(
    engine: str,
    version: str,
    tables: Mapping[str, frozenset[str]],
    choices: Mapping[str, Mapping[str, str]],
) -> FlagTable:
    """The table of the nearest known version at or below `version`."""
    wanted = version_key(version)
    known = sorted(tables, key=version_key)
    below = [v for v in known if version_key(v) <= wanted]
    if not below:
        raise UnknownVersion(
            f"{engine} {version} is older than every flag table denv has "
            f"({engine} {', '.join(known)}); use one of those versions or add its table "
            f"(docs/engines.md, 'Adding a version')"
        )
    table = below[-1]
    return FlagTable(
        engine=engine,
        version=version,
        table=table,
        flags=tables[table],
        choices={flag: frozenset(v.split()) for flag, v in choices.get(table, {}).items()},
    )


_NUMBER = re.compile(r"^-[0-9.]")
# Text a shell would act on. recipe.args never meet a shell (each is one argv element, run by
# exec), so these do nothing; in an arg they suggest its author expected one.
_SHELL = re.compile(r"[;|&<>`\n]|\$[({A-Za-z_]")


class ArgFinding(NamedTuple):
    """One problem with recipe.args: the element it is about, and what is wrong."""

    at: int  # the element of args it is about
    message: str
    warning: bool = False


def _did_you_mean(name: str, flags: frozenset[str], managed: Mapping[str, str]) -> str:
    """The shortest flag that `name` begins, else the closest spelling (difflib), and
    whether denv sets that one itself."""
    longer = sorted((f for f in flags if f.startswith(name + "-")), key=lambda f: (len(f), f))
    near = longer[:1] or difflib.get_close_matches(name, sorted(flags), n=1)
    if not near:
        return ""
    owner = managed.get(near[0])
    return f" (did you mean {near[0]}?" + (f" denv sets it from {owner})" if owner else ")")


def arg_findings(args: list[str], table: FlagTable, managed: Mapping[str, str]) -> list[ArgFinding]:
    """Every problem with recipe.args, in order: a first element that is no flag, flags the
    version lacks or that denv sets itself (errors), shell metacharacters (warnings)."""
    found = []
    if args and not args[0].startswith("-"):
        found.append(
            ArgFinding(0, f"'{args[0]}' is not a flag; args are flags, each followed by its values")
        )
    for index, token in enumerate(args):
        shell = _SHELL.search(token)
        if shell is not None:
            found.append(ArgFinding(index, _shell_message(token, shell.group()), warning=True))
        if not token.startswith("-") or _NUMBER.match(token):
            continue
        name = token.split("=", 1)[0]
        if name not in table.flags:
            hint = _did_you_mean(name, table.flags, managed)
            seen = "" if table.table == table.version else f" (flags as of {table.source})"
            found.append(ArgFinding(index, f"{name} is not a flag of {table.label}{seen}{hint}"))
        elif name in managed:
            found.append(
                ArgFinding(
                    index,
                    f"{name} is set by denv from {managed[name]}; change that instead of "
                    f"passing the flag",
                )
            )
    return found


def _shell_message(token: str, found: str) -> str:
    shown = json.dumps(token)
    return (
        f"{shown} holds {json.dumps(found)}, which a shell would act on; args are never run by "
        f"a shell (each is one argv element), so the engine gets this text as it is, "
        f"nothing expanded or redirected"
    )


def check_args(args: list[str], table: FlagTable, managed: Mapping[str, str]) -> list[str]:
    """recipe.args, checked: every flag is one the version has and denv does not set itself
    (UnknownFlag for the first that is not). Values pass through untouched as argv elements."""
    for finding in arg_findings(args, table, managed):
        if not finding.warning:
            raise UnknownFlag(f"recipe.args: {finding.message}")
    return list(args)


# The variable that hands a process its GPUs, by vendor (vLLM's CPU build: its worker's cores).
DEVICE_ENV = {
    "nvidia": "CUDA_VISIBLE_DEVICES",
    "amd": "HIP_VISIBLE_DEVICES",
    "cpu": "VLLM_CPU_OMP_THREADS_BIND",
}


def visible_devices(hardware: Hardware, indices: list[int]) -> dict[str, str]:
    """The env that hands a process its GPUs."""
    if hardware.vendor in DEVICE_ENV:
        return {DEVICE_ENV[hardware.vendor]: ",".join(map(str, indices))}
    raise EngineError(
        f"{hardware.id} is {hardware.vendor} hardware; denv hands GPUs to engines with "
        f"CUDA_VISIBLE_DEVICES (nvidia), HIP_VISIBLE_DEVICES (amd) or, to vLLM's CPU build, "
        f"VLLM_CPU_OMP_THREADS_BIND (cpu cores) only"
    )


def weights_source(weights: str) -> tuple[str, str | None]:
    """(what the engine loads, revision) for hf://org/repo[@rev], file:///path, or a bare
    Hugging Face id or path."""
    if weights.startswith("hf://"):
        repo, _, revision = weights.removeprefix("hf://").partition("@")
        return repo, revision or None
    if weights.startswith("file://"):
        return weights.removeprefix("file://"), None
    if "://" in weights:
        raise EngineError(
            f"weights {weights}: engines load hf:// or file:// weights; copy them to the "
            f"hosts and pass their path as the engine context's model_path"
        )
    return weights, None


def model_source(deployment: Deployment, context: EngineContext) -> tuple[str, str | None]:
    if context.model_path is not None:
        return context.model_path, None
    return weights_source(deployment.weights)


def health() -> Probe:
    """`GET /health`, 200 once the engine serves: vLLM's, SGLang's and the simulator's (503
    until its warm-up has passed)."""
    return Probe(path="/health", status=200)


def number(value: float) -> str:
    """A setting's number as a flag value: 0.9, 64 (not 64.0)."""
    return f"{value:g}"


def check_consistent(settings: Settings, label: str) -> None:
    """Settings that would otherwise be dropped without a word."""
    kv, spec = settings.kv_cache, settings.speculative
    if kv.offload == "none" and kv.offload_gb is not None:
        raise UnsupportedSetting(
            "settings.kv_cache.offload_gb",
            number(kv.offload_gb),
            label,
            "it sizes a KV offload, and settings.kv_cache.offload is none",
        )
    if spec.method == "none" and (spec.draft_tokens is not None or spec.draft_model):
        raise UnsupportedSetting(
            "settings.speculative.method",
            "none",
            label,
            "draft_tokens and draft_model are set; name the method that uses them",
        )
    if spec.method == "ngram" and spec.draft_model:
        raise UnsupportedSetting(
            "settings.speculative.draft_model",
            spec.draft_model,
            label,
            "ngram drafts from the prompt and takes no draft model",
        )


def parallel_where(role: str) -> str:
    """Where a pool's parallel settings sit in a recipe, for messages."""
    return "topology.parallel" if role == "aggregated" else f"topology.{role}.parallel"


def json_arg(value: Mapping[str, Any]) -> str:
    """A JSON flag value, compact and in the given key order."""
    return json.dumps(value, separators=(",", ":"))


def url(address: str, port: int) -> str:
    host = f"[{address}]" if ":" in address else address
    return f"http://{host}:{port}"
