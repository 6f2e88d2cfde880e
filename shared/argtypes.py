"""argparse types for numbers, shared by the `privrl` CLI and the server's own command line:
each returns the value or raises `argparse.ArgumentTypeError` saying what was expected."""

from __future__ import annotations

import argparse
import math


def whole_number(text: str, minimum: int) -> int:
    """A whole number >= `minimum`, or an argparse error saying what was expected."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected a number >= {minimum}, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return whole_number(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (counts, seeds)."""
    return whole_number(text, 0)


def _number(text: str) -> float:
    """A float, or an argparse error."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    value = _number(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text}")
    return value


def unit_interval(text: str) -> float:
    """argparse type: a number strictly between 0 and 1."""
    value = _number(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text}")
    return value
