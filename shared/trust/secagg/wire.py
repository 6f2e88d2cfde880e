"""What a secure-aggregation cohort's server and users agree on over HTTP without asking each
other: the cohort's public parameters, from the run's configuration (`cohort_setup`), and the
encoding of keys, shares and ciphertexts (base64)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping

from privrl.trust.secagg.protocol import Advertisement, CohortSetup
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


def roster_body(adverts: Mapping[int, Advertisement], keys_for: Iterable[int]
                ) -> dict[str, list[str] | None]:
    """A roster as one member receives it: every member's index, with the public keys of
    those in `keys_for` (its neighbours and itself; the only keys it uses), O(B) small
    entries rather than B pairs of keys."""
    wanted = set(keys_for)
    return {str(i): [b64(a.cipher_key), b64(a.mask_key)] if i in wanted else None
            for i, a in adverts.items()}


def roster_of(body: Mapping[str, list[str] | None]) -> dict[int, Advertisement]:
    """The roster a member builds from `roster_body`: a member sent without keys is an index
    only (empty keys: it is no neighbour, and a protocol step that used its keys would fail)."""
    return {int(i): Advertisement(int(i), unb64(k[0]), unb64(k[1])) if k is not None
            else Advertisement(int(i), b"", b"") for i, k in body.items()}


def b64(data: bytes) -> str:
    """Bytes as base64 text."""
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    """The bytes of base64 text (ValueError when it is not)."""
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError("not base64") from exc
