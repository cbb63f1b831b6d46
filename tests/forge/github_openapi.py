"""GitHub's own published descriptions, for the fake GitHub to check itself against.

The REST API's OpenAPI description (npm `@octokit/openapi`) and the webhook payloads' JSON
Schemas (npm `@octokit/webhooks-schemas`; the GraphQL schema: github_graphql.py), pinned and
fetched by `make github-schemas` once per machine into the tests' cache (tests/labs/cache.py;
tens of MB). The description is read once per test process and its operations indexed by path
template; each operation gets its own small OpenAPI document (one path, GitHub's shared
components) so that openapi-core never searches GitHub's eight hundred paths. A request no
operation documents, or a body or answer that does not validate, is a problem, named in words.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema.exceptions import best_match
from openapi_core import Config, OpenAPI
from openapi_core.testing import MockRequest, MockResponse
from openapi_schema_validator import OAS30Validator
from werkzeug.datastructures import ImmutableMultiDict

from tests.conftest import require_installed
from tests.labs.cache import machine_cache

SCHEMAS = machine_cache() / "octokit"
REST = SCHEMAS / "api.github.com.json"
WEBHOOKS = SCHEMAS / "webhooks.json"
HOST = "https://api.github.com"
METHODS = ("get", "put", "post", "delete", "patch")
# Answers GitHub may give to any operation, documented or not for it: bad credentials, no
# permission or a rate limit, a server error. Their body is GitHub's basic error.
ANY_OPERATION = frozenset({401, 403, 429, 500, 502, 503})
Json = dict[str, Any]


@dataclass(frozen=True)
class Operation:
    template: str  # GitHub's path template, "/repos/{owner}/{repo}/pulls/{pull_number}"
    method: str  # lower case
    app: OpenAPI  # a document of this operation alone
    statuses: frozenset[int]  # the answers it documents

    @property
    def name(self) -> str:
        return f"{self.method.upper()} {self.template}"


@dataclass(frozen=True)
class _Template:
    literals: int  # segments without a parameter: the more, the more specific
    pattern: re.Pattern[str]
    template: str


@dataclass
class RestDescription:
    """GitHub's REST operations, found by method and path."""

    spec: Json
    # (method, number of segments) -> the templates of that length, most specific first
    index: dict[tuple[str, int], list[_Template]] = field(default_factory=dict)
    _operations: dict[tuple[str, str], Operation] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for template, item in self.spec["paths"].items():
            segments = template.split("/")
            pattern = "/".join("[^/]+" if "{" in s else re.escape(s) for s in segments)
            entry = _Template(sum("{" not in s for s in segments), re.compile(pattern), template)
            for method in METHODS:
                if method in item:
                    self.index.setdefault((method, len(segments)), []).append(entry)
        for entries in self.index.values():
            entries.sort(key=lambda e: -e.literals)

    def operation(self, method: str, path: str) -> Operation | None:
        method = method.lower()
        for entry in self.index.get((method, len(path.split("/"))), []):
            if entry.pattern.fullmatch(path):
                return self._operation(method, entry.template)
        return None

    def _operation(self, method: str, template: str) -> Operation:
        key = (method, template)
        if key not in self._operations:
            item = self.spec["paths"][template]
            document = {
                "openapi": self.spec["openapi"],
                "info": self.spec["info"],
                "servers": [{"url": HOST}],
                "paths": {template: {k: v for k, v in item.items() if k in (method, "parameters")}},
                "components": self.spec["components"],
            }
            app = OpenAPI.from_dict(document, config=Config(spec_validator_cls=None))
            statuses = frozenset(int(s) for s in item[method]["responses"] if s.isdigit())
            self._operations[key] = Operation(template, method, app, statuses)
        return self._operations[key]

    def check_request(
        self,
        method: str,
        path: str,
        query: Mapping[str, list[str]],
        headers: Mapping[str, str],
        body: bytes,
    ) -> tuple[Operation | None, MockRequest, list[str]]:
        """The operation a request is, and what is wrong with it."""
        request = MockRequest(
            HOST,
            method,
            path,
            headers=dict(headers),
            data=body,
            content_type=headers.get("content-type", "application/json").split(";")[0],
        )
        request.parameters.query = ImmutableMultiDict(
            [(k, v) for k, values in query.items() for v in values]
        )
        found = self.operation(method, path)
        if found is None:
            return None, request, [f"GitHub documents no operation {method} {path}"]
        try:
            found.app.validate_request(request)
        except Exception as exc:  # openapi-core's errors carry the schema's in __cause__
            return found, request, [f"{found.name}: the request {_describe(exc)}"]
        return found, request, []

    def check_response(
        self, found: Operation, request: MockRequest, status: int, data: Any
    ) -> list[str]:
        body = b"" if data is None else json.dumps(data).encode()
        if status not in found.statuses and status in ANY_OPERATION:
            basic_error = OAS30Validator(self.spec["components"]["schemas"]["basic-error"])
            return [
                f"{found.name} answered {status}: {_at(e)}" for e in basic_error.iter_errors(data)
            ]
        if (
            status not in found.statuses
            and "default" not in self.spec["paths"][found.template][found.method]["responses"]
        ):
            documented = ", ".join(str(s) for s in sorted(found.statuses))
            return [f"{found.name} answered {status}; GitHub documents {documented}"]
        response = MockResponse(body, status, content_type="application/json")
        try:
            found.app.validate_response(request, response)
        except Exception as exc:
            return [f"{found.name} answered {status}, which {_describe(exc)}"]
        return []


def _describe(exc: BaseException) -> str:
    """openapi-core's error and, under it, jsonschema's, each at its place in the body."""
    cause: BaseException | None = exc
    errors: list[jsonschema.ValidationError] = []
    while cause is not None and not errors:
        errors = [e for e in getattr(cause, "schema_errors", ()) if hasattr(e, "absolute_path")]
        cause = cause.__cause__
    if not errors:
        return f"is invalid: {exc}"
    return (
        "does not validate: "
        + "; ".join(_at(e) for e in errors[:12])
        + (f" (and {len(errors) - 12} more)" if len(errors) > 12 else "")
    )


def _at(error: jsonschema.ValidationError) -> str:
    deepest = best_match(error.context) if error.context else error
    place = "".join(f"[{p!r}]" for p in deepest.absolute_path) or "the body"
    return f"at {place}: {deepest.message[:200]}"


def schema_problems(schema: Json, value: Any, root: Json | None = None) -> list[str]:
    """What is wrong with `value` under a JSON Schema (Draft 7; `root` holds its $refs)."""
    validator = jsonschema.Draft7Validator(
        {**schema, **({"definitions": root["definitions"]} if root else {})}
    )
    return [_at(e) for e in validator.iter_errors(value)]


@functools.cache
def _rest() -> RestDescription:
    with REST.open() as file:
        return RestDescription(json.load(file))


@functools.cache
def _webhooks() -> Json:
    with WEBHOOKS.open() as file:
        loaded: Json = json.load(file)
        return loaded


def require_description(path: Path) -> None:
    """Skip (outside CI; fail in it) a test whose GitHub description is not fetched yet."""
    what = f"GitHub's published description ({path})"
    require_installed(path.is_file(), what, target="github-schemas")


def rest_description() -> RestDescription:
    """GitHub's REST description, read once per test process."""
    require_description(REST)
    return _rest()


def webhook_problems(event: str, payload: Json) -> list[str]:
    """What is wrong with a webhook payload of `event` ("pull_request_review") under
    GitHub's published schema of that event and the payload's action."""
    require_description(WEBHOOKS)
    schemas = _webhooks()
    name = f"{event}${payload.get('action')}"
    if name not in schemas["definitions"]:
        return [f"GitHub documents no webhook {name}"]
    return schema_problems({"$ref": f"#/definitions/{name}"}, payload, schemas)
