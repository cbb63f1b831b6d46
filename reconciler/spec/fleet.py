"""Models: a fleet (fleets/<name>.yaml) — GPUs that denv places engines on."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    TypeAdapter,
    field_validator,
    model_validator,
)

from reconciler.spec.base import Slug, Spec, field_error, registered
from reconciler.spec.fleetkinds import FLEET_KINDS, blocks, kind_names
from reconciler.spec.words import counted

# Names reserved for documentation and tests (RFC 2606, RFC 6761): they never resolve, so an
# example fleet that names them can never reach anyone's machines.
RESERVED_TLDS = ("example", "invalid", "test")
RESERVED_DOMAINS = ("example.com", "example.net", "example.org")


def reserved_name(address: str) -> bool:
    """Whether a host name is one reserved for documentation (`h200-01.h200-use1.example`)."""
    name = address.lower().rstrip(".")
    if name.rsplit(".", 1)[-1] in RESERVED_TLDS and "." in name:
        return True
    return any(name == domain or name.endswith("." + domain) for domain in RESERVED_DOMAINS)


class SshSettings(Spec):
    user: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    key_file: str | None = None
    port: int = Field(default=22, ge=1, le=65535)
    known_hosts: str | None = None
    # Test hosts only: skips host-key checks, and denv warns each time it does.
    check_host_keys: bool = True
    connect_timeout: float = Field(default=10.0, gt=0)
    # Seconds an agent call may take beyond its own wait (a stop's grace, a prepare's poll):
    # a host that does not answer within it costs the pass that, and the others go on.
    call_timeout: float = Field(default=60.0, gt=0)


class Host(Spec):
    name: Slug
    address: str | None = Field(default=None, pattern=r"^[A-Za-z0-9.:_-]+$")
    port: int | None = Field(default=None, ge=1, le=65535)  # SSH port, when not the fleet's
    gpus: NonNegativeInt
    # Hosts that share an NVLink domain (e.g. the trays of one NVL72 rack) name the same id.
    domain: Slug | None = None


class FleetPrice(Spec):
    gpu_hour: PositiveFloat
    note: str | None = None


def _weights_root(value: str) -> str:
    if value.startswith("file:///"):
        parts = value.removeprefix("file://").rstrip("/").split("/")[1:]
    elif value.startswith("s3://"):
        parts = value.removeprefix("s3://").rstrip("/").split("/")
    else:
        raise ValueError("a weights root is file:///absolute/folder or s3://bucket[/prefix]")
    if not parts or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"'{value}': a weights root names a folder plainly (no '.', '..', '//')")
    return value.rstrip("/")


def _agent_home(value: str) -> str:
    parts = value.rstrip("/").split("/")
    if not value.startswith("/") or any(part in (".", "..") for part in parts[1:]):
        raise ValueError(f"'{value}': an agent home is an absolute folder, without '.' or '..'")
    return value.rstrip("/") or "/"


# A folder on the hosts, as the shell sees it: letters, digits and ._/+- only (no '$', '~' or
# spaces: it reaches the hosts' shell quoted, and means the same there as here).
AgentHome = Annotated[str, Field(pattern=r"^/[A-Za-z0-9._/+-]*$"), AfterValidator(_agent_home)]


# An absolute folder or a bucket (with an optional prefix), kept without a trailing slash.
WeightsRoot = Annotated[str, AfterValidator(_weights_root)]


class WeightsSettings(Spec):
    """How hosts fetch weights: at most `parallel` hosts download at once; gated Hugging Face
    repositories take a token from the bot's environment variable `token_env` (a reference:
    the token itself never sits in the repository); s3:// sources go through `s3_command`,
    an argv where {source} and {dest} are replaced."""

    parallel: PositiveInt = 4
    token_env: str | None = Field(default=None, pattern=r"^[A-Z_][A-Z0-9_]*$")
    s3_command: list[str] | None = None
    # Where file:// and s3:// weights may come from on this fleet (`file:///srv/models`,
    # `s3://bucket/models`): a source outside every root is refused; none: neither kind.
    roots: list[WeightsRoot] = Field(default_factory=list)


Block = TypeVar("Block", bound=Spec)


@cache
def _reader(model: type[Spec]) -> TypeAdapter[dict[str, Spec]]:
    """Reads `{block name: block}` with the block's model, so errors carry the name."""
    return TypeAdapter(dict[str, model])  # type: ignore[valid-type]


def _fleet_schema(schema: dict[str, Any]) -> None:
    """The registered kinds: `transport`'s values, and each kind's block as a property."""
    properties = schema["properties"]
    properties["transport"]["enum"] = list(kind_names())
    for name, model in blocks().items():
        block = model.model_json_schema(mode="validation")
        if "$defs" in block:  # its own references resolve inside it
            block["$id"] = f"fleet-{name}"
        properties[name] = {"anyOf": [block, {"type": "null"}], "default": None}
    schema["additionalProperties"] = False


class Fleet(Spec):
    # A fleet file's `fleet:`. Its kind's block (`slurm:`) is read with the settings model the
    # kind registers (reconciler/spec/fleetkinds.py); `settings` returns it.
    # Unknown keys are still refused: the only ones allowed are the registered kinds' blocks.
    model_config = ConfigDict(extra="allow", json_schema_extra=_fleet_schema)

    name: Slug
    provider: str = Field(min_length=1)
    region: str | None = None
    hardware: Slug
    domain: PositiveInt | None = None  # GPUs per NVLink domain; default: the hardware's
    price: FleetPrice | None = None
    # One of the registered fleet kinds (spec/fleetkinds.py), read when a fleet is validated.
    transport: str = "ssh"
    # How to reach the hosts over SSH, for the kinds that do (ssh; slurm: the login node,
    # and without it the bot runs there).
    ssh: SshSettings | None = None
    hosts: list[Host] = Field(min_length=1)
    trial_gpus: NonNegativeInt = 0
    # The unprivileged user a trial's engines run as where engines are processes (the venv
    # runtime): code a trial runs never shares a user with the agent, which must run as root
    # to switch (docs/hosts.md). null: trials run as the agent's user (a fleet that never
    # runs trials of code it does not trust).
    trial_user: str | None = Field(default="denv-trial", pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    simulated: bool = False
    # How engines run on the hosts; default: a container where docker or podman is found.
    runtime: Literal["container", "venv"] | None = None
    # The interpreter on the hosts that runs the agent (and, on a simulated fleet, denv's
    # simulator and the router: it must have denv installed there).
    python: str = Field(default="python3", pattern=r"^[A-Za-z0-9._/+-]+$")
    # Where the agent keeps its state on the hosts (its code, units, runtimes and the weights
    # cache: tens to hundreds of GB), an absolute folder such as a scratch filesystem's; the
    # agent's own default where none: $DENV_HOME, else ~/.denv of the fleet's user.
    agent_home: AgentHome | None = None
    weights: WeightsSettings = WeightsSettings()
    # Actions of one apply wave (starts, stops, deployments rolling) on this fleet at once.
    parallel_actions: PositiveInt = 16
    # Units denv started here whose deployment git no longer has (a release or stage removed,
    # `main` rewound): false, they are shown and left running until `denv prune`; true, the
    # bot stops them (routers first, then engines).
    prune: bool = False

    @property
    def gpus(self) -> int:
        return sum(host.gpus for host in self.hosts)

    def settings(self, model: type[Block]) -> Block | None:
        """The fleet's kind's block, read with its settings model `model` (None: none)."""
        found = (self.model_extra or {}).get(self.transport)
        return found if isinstance(found, model) else None

    @field_validator("transport", mode="before")
    @classmethod
    def _registered(cls, value: Any) -> Any:
        return registered(value, kind_names(), " (the registered fleet kinds)")

    @model_validator(mode="after")
    def _blocks(self) -> Fleet:
        """The kinds' blocks, each read with its kind's settings model; any other key is
        unknown. A kind with a settings model needs its block; no other kind's is allowed."""
        extra = self.model_extra if self.model_extra is not None else {}
        known = blocks()
        for key, value in list(extra.items()):
            if key not in known:
                raise field_error(key, "unknown field")
            if value is None:  # `slurm: null`: no block, as an absent one
                del extra[key]
            elif key != self.transport:
                raise field_error(
                    key,
                    f"a {key} block goes with transport {key} (this fleet's is {self.transport})",
                )
            else:  # its errors name the block's own fields (`fleet.slurm.partition`)
                extra[key] = _reader(known[key]).validate_python({key: value})[key]
        model = known.get(self.transport)
        if model is not None and self.transport not in extra:
            wanted = [n for n, f in model.model_fields.items() if f.is_required()]
            raise field_error(
                "transport",
                f"transport {self.transport} needs a {self.transport} block"
                + (f" (at least its {', '.join(wanted)})" if wanted else ""),
            )
        return self

    @model_validator(mode="after")
    def _consistent(self) -> Fleet:
        check = FLEET_KINDS[self.transport].check
        if check is not None:
            check(self)
        names = [host.name for host in self.hosts]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise field_error("hosts", f"host names must be unique: {', '.join(duplicates)}")
        if self.trial_gpus > self.gpus:
            raise field_error(
                "trial_gpus",
                f"trial_gpus ({self.trial_gpus}) exceeds the fleet's {counted(self.gpus, 'GPU')}",
            )
        return self


class FleetFile(Spec):
    fleet: Fleet
