"""GitHub's published GraphQL schema, for the fake GitHub to check its GraphQL requests against
and to shape its answers by, as github_openapi.py does for REST.

The schema is npm `@octokit/graphql-schema` (GitHub's SDL, generated from its API), pinned and
fetched by `make github-schemas` into the tests' cache beside the REST description. A request
is parsed, validated against the schema (fields, arguments, variable types) and its variables
coerced as GitHub would; any problem is named in words. The fake's answer is the request
executed against the schema with the fake's values at its root, so it holds exactly the fields
asked for, each typed as GitHub types it: an answer the schema refuses fails the test.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from graphql import (
    GraphQLError,
    GraphQLSchema,
    OperationType,
    build_schema,
    get_operation_ast,
    graphql_sync,
    parse,
    validate,
)
from graphql.execution.values import get_variable_values

from tests.forge.github_openapi import SCHEMAS, require_description

SCHEMA = SCHEMAS / "schema.graphql"


@functools.cache
def _schema() -> GraphQLSchema:
    # GitHub's SDL breaks rules of the newer GraphQL spec (two fields defined twice, deprecated
    # fields implementing interface fields that are not): it is taken as GitHub serves it,
    # and requests are checked against its types as GitHub checks them.
    return build_schema(SCHEMA.read_text(), assume_valid=True, assume_valid_sdl=True)


def graphql_schema() -> GraphQLSchema:
    """GitHub's GraphQL schema, read once per test process."""
    require_description(SCHEMA)
    return _schema()


@dataclass(frozen=True)
class Mutation:
    """A GraphQL request as GitHub would take it: its one top-level field, its variables
    coerced to their types; or why GitHub would refuse it."""

    name: str | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


def read_mutation(payload: Mapping[str, Any]) -> Mutation:
    """The request's mutation, checked against the schema."""
    schema = graphql_schema()
    query = payload.get("query")
    if not isinstance(query, str):
        return Mutation(problems=("no query",))
    try:
        document = parse(query)
    except GraphQLError as exc:
        return Mutation(problems=(f"not GraphQL: {exc.message}",))
    errors = validate(schema, document)
    if errors:
        return Mutation(problems=tuple(e.message for e in errors))
    operation = get_operation_ast(document, payload.get("operationName"))
    if operation is None or operation.operation != OperationType.MUTATION:
        return Mutation(problems=("not one mutation",))
    given = payload.get("variables") or {}
    coerced = get_variable_values(schema, operation.variable_definitions or (), given)
    if isinstance(coerced, list):
        return Mutation(problems=tuple(e.message for e in coerced))
    fields = operation.selection_set.selections
    names = [f.name.value for f in fields if hasattr(f, "name")]
    if len(names) != 1:
        return Mutation(problems=(f"{len(names)} mutation fields, the fake answers one",))
    return Mutation(names[0], dict(coerced.coerced))


def answered(payload: Mapping[str, Any], resolvers: Mapping[str, Callable[..., Any]]) -> Any:
    """The request executed against the schema, each top-level field resolved by `resolvers`
    (given `info` and the field's arguments); AssertionError when the schema refuses what a
    resolver gave (a missing non-null field, an interface without `__typename`)."""
    result = graphql_sync(
        graphql_schema(),
        payload["query"],
        root_value=dict(resolvers),
        variable_values=payload.get("variables"),
        operation_name=payload.get("operationName"),
    )
    if result.errors:
        problems = "\n".join(e.message for e in result.errors)
        raise AssertionError(f"the fake's GraphQL answer is not GitHub's:\n{problems}")
    return {"data": result.data}
