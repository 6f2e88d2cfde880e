"""Shamir secret sharing (Shamir 1979) over the prime field GF(p), p = 2^521 - 1 by default.

A secret s < p is the constant term of a random polynomial f of degree t - 1; share x is
(x, f(x)) for x = 1 .. n. Any t shares give s back by Lagrange interpolation at 0; fewer say
nothing about it. The field is large enough for a 32-byte key (an X25519 private key, a mask
seed) in one share.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence

PRIME = 2**521 - 1  # a Mersenne prime
SHARE_BYTES = 66  # a field element, big-endian (521 bits)

Share = tuple[int, int]


def split(secret: int, xs: Sequence[int], threshold: int, prime: int = PRIME,
          coefficients: Sequence[int] | None = None) -> list[Share]:
    """The shares (x, f(x)) of `secret` at the points `xs` (distinct, in 1 .. p - 1): any
    `threshold` of them reconstruct it. `coefficients` (f's terms of degree 1 .. t - 1) fixes
    the polynomial for known-vector tests; by default they come from the OS CSPRNG."""
    if not 0 <= secret < prime:
        raise ValueError("the secret must be a field element (0 <= s < p)")
    if not 1 <= threshold <= len(xs):
        raise ValueError(f"threshold {threshold} needs 1 <= t <= {len(xs)} shares")
    if len(set(xs)) != len(xs) or any(not 0 < x < prime for x in xs):
        raise ValueError("share points must be distinct and nonzero in the field")
    if coefficients is None:
        coefficients = [secrets.randbelow(prime) for _ in range(threshold - 1)]
    if len(coefficients) != threshold - 1:
        raise ValueError(f"a threshold of {threshold} needs {threshold - 1} coefficients")
    poly = [secret, *coefficients]
    return [(x, _evaluate(poly, x, prime)) for x in xs]


def _evaluate(poly: Sequence[int], x: int, prime: int) -> int:
    """f(x) mod p by Horner's rule (poly: constant term first)."""
    acc = 0
    for c in reversed(poly):
        acc = (acc * x + c) % prime
    return acc


def combine(shares: Iterable[Share], prime: int = PRIME) -> int:
    """The secret behind `shares` (at least the threshold of them; distinct points), by
    Lagrange interpolation at 0. Fewer shares give a wrong value, not an error: the caller
    counts them."""
    points = list(shares)
    xs = [x for x, _ in points]
    if not points or len(set(xs)) != len(xs):
        raise ValueError("combining needs at least one share and distinct points")
    secret = 0
    for i, (xi, yi) in enumerate(points):
        num, den = 1, 1
        for j, xj in enumerate(xs):
            if j != i:
                num = num * -xj % prime
                den = den * (xi - xj) % prime
        secret = (secret + yi * num * pow(den, -1, prime)) % prime
    return secret


def to_bytes(value: int) -> bytes:
    """A field element as SHARE_BYTES big-endian bytes."""
    return value.to_bytes(SHARE_BYTES, "big")


def from_bytes(data: bytes) -> int:
    """The field element `to_bytes` wrote (a ValueError for another length or value)."""
    if len(data) != SHARE_BYTES:
        raise ValueError(f"a field element takes {SHARE_BYTES} bytes, got {len(data)}")
    value = int.from_bytes(data, "big")
    if value >= PRIME:
        raise ValueError("not a field element")
    return value
