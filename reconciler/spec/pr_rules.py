"""Pure logic: one value a pull request proposes, judged against a rule of the PR policy —
a container image, a weights source, an engine flag and its values. Each judge returns why
the value is refused, or None; reconciler/spec/pr_policy.py says where it came from.

Paths and names are compared component by component after splitting, never by string
prefix: `file:///srv/models-evil` is not under `file:///srv/models`, and a source with an
empty, `.` or `..` component (`file:////`, `file:///srv/models/../../home`) is refused
before any root is looked at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.spec.policy import PrWeights

DOCKER_HUB = "docker.io"
_COMPONENT = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True)
class ImageRef:
    """An image reference, normalised as a container runtime reads it: `vllm/vllm-openai:v1`
    is `docker.io/vllm/vllm-openai` tag `v1`; `ubuntu` is `docker.io/library/ubuntu`."""

    registry: str
    path: tuple[str, ...]
    tag: str | None = None
    digest: str | None = None

    @property
    def pinned(self) -> bool:
        return self.digest is not None or self.tag not in (None, "latest")


def _is_registry(component: str) -> bool:
    first = component.lower()
    return "." in first or ":" in first or first == "localhost"


def _split_repository(name: str) -> tuple[str, list[str]] | None:
    parts = name.split("/")
    if len(parts) > 1 and _is_registry(parts[0]):
        registry, path = parts[0].lower(), parts[1:]
    else:
        registry, path = DOCKER_HUB, parts
    if registry in ("index.docker.io", "registry-1.docker.io"):
        registry = DOCKER_HUB
    if not all(_COMPONENT.match(part) for part in path):
        return None
    return registry, path


def parse_image(text: str) -> ImageRef | None:
    """The reference, or None when `text` is not one."""
    rest, at, digest = text.partition("@")
    if at and not _DIGEST.match(digest):
        return None
    name, tag = rest, None
    if ":" in rest.rsplit("/", 1)[-1]:
        name, tag = rest.rsplit(":", 1)
        if not _TAG.match(tag):
            return None
    split = _split_repository(name)
    if split is None or not split[1]:
        return None
    registry, path = split
    if registry == DOCKER_HUB and len(path) == 1:
        path = ["library", *path]
    return ImageRef(registry, tuple(path), tag, digest or None)


def image_matches(ref: ImageRef, pattern: str) -> bool:
    """Whether `pattern` (a repository, `namespace/*`, or a pinned image) allows `ref`."""
    if pattern.endswith("/*"):
        above = pattern[:-2]
        split: tuple[str, list[str]] | None = (above.lower(), [])  # a whole registry
        if "/" in above or not _is_registry(above):
            split = _split_repository(above)  # a namespace
        if split is None:
            return False
        registry, prefix = split
        return (
            ref.registry == registry
            and ref.path[: len(prefix)] == tuple(prefix)
            and len(ref.path) > len(prefix)
        )
    wanted = parse_image(pattern)
    if wanted is None or (wanted.registry, wanted.path) != (ref.registry, ref.path):
        return False
    if wanted.digest is not None:
        return ref.digest == wanted.digest
    if wanted.tag is not None:
        return ref.tag == wanted.tag and ref.digest is None
    return True


def official_repository(image: str) -> str:
    """An engine card's image (`vllm/vllm-openai:v{version}`) as the repository it names."""
    name = image.split("@", 1)[0]
    return name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name


def image_refusal(image: str, allowed: Sequence[str]) -> str | None:
    ref = parse_image(image)
    if ref is None:
        return f"'{image}' is not a container image reference"
    if not any(image_matches(ref, pattern) for pattern in allowed):
        return f"{image} is not an allowed image (allowed: {', '.join(allowed)})"
    if not ref.pinned:
        return f"{image} is not pinned: name a version tag or an @sha256 digest"
    return None


# -- weights ---------------------------------------------------------------------------------

_HF = re.compile(r"^hf://([^/@]+)/([^/@]+)(?:@(.*))?$")
_HF_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$")
_FULL_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def _hf_refusal(source: str, rule: PrWeights, pinned: bool) -> str | None:
    if rule.hf == "off":
        return f"{source}: Hugging Face weights are not allowed"
    match = _HF.match(source)
    if match is None or not (_HF_NAME.match(match[1]) and _HF_NAME.match(match[2])):
        return f"{source} does not name a Hugging Face repository as hf://org/repo"
    if rule.hf_orgs and match[1] not in rule.hf_orgs:
        return f"{source}: {match[1]} is not an allowed organisation ({', '.join(rule.hf_orgs)})"
    if pinned and not (match[3] and _FULL_COMMIT.match(match[3])):
        return f"{source} is not pinned to a full commit (write hf://org/repo@<40 hex digits>)"
    if not pinned and match[3] is not None:
        return f"{source} names a revision: a catalog model's hf_repo is org/repo alone"
    return None


def location(source: str) -> tuple[str, tuple[str, ...]] | None:
    """('file', folders) or ('s3', (bucket, keys…)); None when it is neither. Components are
    kept as written: the caller refuses empty, `.` and `..` ones."""
    if source.startswith("file://"):
        path = source.removeprefix("file://")
        if not path.startswith("/"):
            return ("file", ("",))  # file://host/… or file://relative: no plain absolute path
        return ("file", tuple(path.removesuffix("/").split("/")[1:]) or ("",))
    if source.startswith("s3://"):
        return ("s3", tuple(source.removeprefix("s3://").removesuffix("/").split("/")))
    return None


def _under(parts: tuple[str, ...], kind: str, roots: Iterable[str]) -> bool:
    for root in roots:
        found = location(root)
        if found is not None and found[0] == kind and parts[: len(found[1])] == found[1]:
            return True
    return False


def weights_refusal(
    source: str, rule: PrWeights, roots: Mapping[str, Sequence[str]], pinned: bool = True
) -> str | None:
    """Why `source` may not be fetched on the fleets of `roots` (fleet -> its weights.roots),
    or None. `pinned`: an hf:// source must name its full commit; else it names none (a
    catalog model's repository, whose commit its `weights` pin says)."""
    if source.startswith("hf://"):
        return _hf_refusal(source, rule, pinned)
    found = location(source)
    if found is None:
        return f"{source}: weights are hf://, or file:// and s3:// under a fleet's weights.roots"
    kind, parts = found
    if any(part in ("", ".", "..") for part in parts):
        return f"{source} is not a plain path (an empty, '.' or '..' component)"
    if not rule.fleet_roots:
        return f"{source}: {kind}:// weights are not allowed"
    if not roots:
        return f"{source}: no fleet it runs on declares weights.roots"
    outside = sorted(fleet for fleet, held in roots.items() if not _under(parts, kind, held))
    if not outside:
        return None
    shown = ", ".join(
        f"{fleet} ({', '.join(roots[fleet]) or 'no weights.roots'})" for fleet in outside
    )
    return f"{source} is under no weights root of fleet {shown}"


# -- flags -----------------------------------------------------------------------------------

# A flag whose name has one of these words takes a host path (a file, a folder, a socket,
# code to import): `--chat-template`, `--download-dir`, `--ssl-keyfile`, `--worker-cls`.
PATH_WORDS = frozenset(
    {"path", "paths", "dir", "file", "files", "plugin", "socket", "certfile", "keyfile", "certs"}
)
PATH_LAST_WORDS = frozenset({"template", "cls", "modules", "processors", "middleware", "loader"})
# Whose name says nothing of it, yet take a path or a repository the engine loads.
PATH_FLAGS = frozenset(
    {
        "--config",
        "--tokenizer",
        "--model",
        "--generation-config",
        "--speculative-draft-model",
    }
)
_NUMBER = re.compile(r"^-[0-9.]")
# A value that names a host path: absolute, home-relative, `.`/`..`, or inside JSON and
# key=value text ("cache_dir": "/tmp/x"); or a file: URL.
_HOST_PATH = re.compile(
    r"""(^|[\s"'=,;\[{(])(/|~|\.\.?([/\\]|$))|(^|[/\\])\.\.([/\\]|$)|file:""", re.I
)


def flag_name(token: str) -> str:
    """`--Trust_Remote_Code=1` -> `--trust-remote-code` (engines read `_` as `-`)."""
    return token.split("=", 1)[0].lower().replace("_", "-")


def takes_host_path(flag: str) -> bool:
    name = flag_name(flag)
    words = name.lstrip("-").removeprefix("no-").split("-")
    return name in PATH_FLAGS or bool(PATH_WORDS & set(words)) or words[-1] in PATH_LAST_WORDS


def is_flag(token: str) -> bool:
    return token.startswith("-") and not _NUMBER.match(token)


def arg_refusals(args: Sequence[str], refused: Sequence[str]) -> list[tuple[int, str]]:
    """(element, why) for each arg the policy refuses: a flag it names (or an abbreviation of
    one, which argparse would expand), a flag that takes a host path, a value naming one."""
    names = [flag_name(flag) for flag in refused]
    found = []
    for index, token in enumerate(args):
        value = token
        if is_flag(token):
            name = flag_name(token)
            if any(name == r or (len(name) > 3 and r.startswith(name)) for r in names):
                found.append((index, f"{name} is refused in pull requests"))
                continue
            if takes_host_path(name):
                found.append((index, f"{name} takes a host path"))
                continue
            value = token.split("=", 1)[1] if "=" in token else ""
        if value and _HOST_PATH.search(value):
            found.append((index, f"{value!r} names a host path"))
    return found
