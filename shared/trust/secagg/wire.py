"""What a secure-aggregation cohort's server and users agree on over HTTP without asking each
other: the cohort's public parameters, from the run's configuration (`cohort_setup`), and the
encoding of keys, shares and ciphertexts (base64)."""

from __future__ import annotations

import base64
import binascii

from privrl.trust.secagg.protocol import CohortSetup
from privrl.trust.secagg.spec import CohortSpec

ROUNDS = ("keys", "shares", "masked", "unmask")


def cohort_setup(run_id: str, spec: CohortSpec, cohort: int, length: int) -> CohortSetup:
    """Cohort `cohort`'s public parameters, the same on the server and at each user: up to B
    users (user e % B of cohort e // B), the CohortSpec's minimum of survivors, the degree
    its B users take in process. A cohort that ends with fewer members (the run's last, or
    one whose membership the server closed early) lays its neighbour graph over the members
    it has (`CohortSetup.neighbours`)."""
    return CohortSetup(f"run {run_id} cohort {cohort}".encode(), spec.size, spec.min_survivors,
                       length, spec.bits, spec.degree)


def b64(data: bytes) -> str:
    """Bytes as base64 text."""
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    """The bytes of base64 text (ValueError when it is not)."""
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError("not base64") from exc
