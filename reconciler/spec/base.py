"""Models: the base of every spec model and the small value types files share."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema
from pydantic_core import PydanticCustomError

SLUG = r"^[a-z0-9][a-z0-9._-]*$"
RECIPE_ID = r"^[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*@[0-9]+$"
HEX_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


class Spec(BaseModel):
    """Every file model: unknown keys are errors, values never change after loading."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def registered(value: Any, names: Sequence[str], note: str = "") -> Any:
    """`value` when it is one of the registered `names`; else refused as pydantic refuses a
    value outside a Literal, `note` after the names."""
    if value in names:
        return value
    quoted = [repr(name) for name in names]
    expected = " or ".join(filter(None, [", ".join(quoted[:-1]), quoted[-1]]))
    raise PydanticCustomError(
        "literal_error", "Input should be {expected}" + note, {"expected": expected}
    )


def field_error(field: str, message: str) -> PydanticCustomError:
    """A model validator's refusal about one of its fields: the problem names that field and
    its line, not the model's first line (reconciler/spec/problems.py reads `at`)."""
    return PydanticCustomError("field_error", message, {"at": field})


_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d)\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: Any) -> Any:
    """'1.5s', '50ms', '30m' -> seconds; bare numbers are seconds."""
    if isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ValueError(f"'{value}' is not a duration (e.g. 50ms, 1.5s, 30m, 2h)")
        return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    return value


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    Field(ge=0),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": _DURATION.pattern},
            ],
            "description": "seconds, or a number with a unit: ms, s, m, h, d",
        }
    ),
]

Slug = Annotated[str, Field(pattern=SLUG, max_length=128)]
RecipeId = Annotated[str, Field(pattern=RECIPE_ID, max_length=200)]


class Citation(Spec):
    """Where a fact comes from."""

    url: str = Field(pattern=r"^https?://")
    note: str | None = None
