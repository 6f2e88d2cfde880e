"""JSON number types of the strict wire models: what JSON Schema calls an integer, and infinity.

Strict models refuse a value of the wrong JSON type ("0" is not a number, 0 is not a boolean).
JSON itself has one number type, though: 10.0 *is* the integer 10 to JSON Schema, so an integer
field accepts a number without a fractional part. Infinity has no JSON number: an infinite
float travels as the string "Infinity", the one string such a field accepts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer


def _integral(value: Any) -> Any:
    """A float with no fractional part (JSON 10.0) as the int it is; anything else unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _infinity(value: Any) -> Any:
    """The JSON string "Infinity" (how an infinite float is serialized) as float inf."""
    return math.inf if isinstance(value, str) and value == "Infinity" else value


def _as_json(value: float) -> float | str:
    """inf as "Infinity" in JSON output, also in model_dump(mode="json") dicts (which `json`
    and httpx would otherwise write as the invalid literal Infinity, or refuse)."""
    return "Infinity" if value == math.inf else value


# Put bounds *before* INTEGRAL (Annotated[int, Field(ge=0), INTEGRAL]): bounds added on top of
# JsonInt inside another Annotated are emitted as "ge"/"le", which JSON Schema does not know.
INTEGRAL = BeforeValidator(_integral)
JsonInt = Annotated[int, INTEGRAL]
FloatOrInfinity = Annotated[
    float, BeforeValidator(_infinity), PlainSerializer(_as_json, when_used="json")
]


# pydantic prefixes the message of an exception raised in a validator with its kind; a person
# reading the message needs only what follows ("Value error, the Gaussian ..." -> "the Gaussian").
_FRAMEWORK_PREFIXES = ("Value error, ", "Assertion failed, ")


def error_text(err: Mapping[str, Any]) -> str:
    """The message of one pydantic error (an `errors()` item) without the framework's prefix."""
    msg = str(err.get("msg", "invalid"))
    for prefix in _FRAMEWORK_PREFIXES:
        if msg.startswith(prefix):
            return msg[len(prefix):]
    return msg
