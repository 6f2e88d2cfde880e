"""JSON number types of the strict wire models (what JSON Schema calls an integer, infinity) and
the compact form of a float array on the wire (base64 of little-endian float64).

Strict models refuse a value of the wrong JSON type ("0" is not a number, 0 is not a boolean).
JSON itself has one number type, though: 10.0 *is* the integer 10 to JSON Schema, so an integer
field accepts a number without a fractional part. Infinity has no JSON number: an infinite
float travels as the string "Infinity", the one string such a field accepts.

Dense float arrays (an LDP report's noisy arrays: 1,680 numbers on per-step RiverSwim) travel
as one base64 string of their little-endian float64 bytes (`pack_floats` / `unpack_floats`):
8 bytes a number before base64, about 10.7 after, against 20-25 for a JSON number with its 17
significant digits. It is lossless (every bit of every float), so a report means the same
numbers in either form, in process or over HTTP, with nothing to round and nothing to document
as post-processing. `F64_PATTERN` matches exactly the base64 texts of a whole number of float64s.
Integer arrays (a JDP report's states and actions) travel likewise as base64 of little-endian
int32s (`pack_ints` / `unpack_ints`, `I32_PATTERN`): with both forms packed, a report's size is
a function of the run's public shape alone, never of what the user did.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
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


# Base64 of 8n bytes: 32 characters per 3 float64s, then 0, 1 (11 + "=") or 2 (22 + "==") more.
F64_PATTERN = r"^(?:[A-Za-z0-9+/]{32})*(?:[A-Za-z0-9+/]{11}=|[A-Za-z0-9+/]{22}==)?$"


# Base64 of 4n bytes: 16 characters per 3 int32s, then 0, 1 (6 + "==") or 2 (11 + "=") more.
I32_PATTERN = r"^(?:[A-Za-z0-9+/]{16})*(?:[A-Za-z0-9+/]{6}==|[A-Za-z0-9+/]{11}=)?$"
_WIDTH = {"<f8": 8, "<i4": 4}


def _pack(values: Any, dtype: str) -> str:
    """An array (flattened in C order) as base64 of its little-endian bytes of `dtype`."""
    return base64.b64encode(np.ascontiguousarray(values, dtype=dtype).tobytes()).decode("ascii")


def _unpack(text: str, dtype: str, what: str) -> np.ndarray:
    """The array of a `_pack` text (ValueError when it is not one)."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError(f"not base64: {exc}") from None
    if len(raw) % _WIDTH[dtype]:
        raise ValueError(f"{len(raw)} bytes is not a whole number of {what}")
    return np.frombuffer(raw, dtype=dtype)


def pack_ints(values: Any) -> str:
    """An integer array (flattened in C order) as base64 of its little-endian int32 bytes."""
    arr = np.asarray(values)
    if arr.size and (arr.min() < -(2**31) or arr.max() >= 2**31):
        raise ValueError("an int32 array holds values in [-2^31, 2^31)")
    return _pack(arr, "<i4")


def unpack_ints(text: str) -> np.ndarray:
    """The int64 array of a `pack_ints` text (ValueError when it is not one)."""
    return _unpack(text, "<i4", "int32s").astype(np.int64)


def pack_floats(values: np.ndarray) -> str:
    """A float array (flattened in C order) as base64 of its little-endian float64 bytes."""
    return _pack(values, "<f8")


def unpack_floats(text: str) -> np.ndarray:
    """The float64 array of a `pack_floats` text (ValueError when it is not one)."""
    return _unpack(text, "<f8", "float64s").astype(np.float64)


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
