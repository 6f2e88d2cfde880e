"""The stored form of a secure-aggregation cohort's reports (one home for writing and
replaying it): each survivor's report row, kind "masked", holds its masked input only; the
first row of a released cohort also holds the cohort's unmasked sum (public: it is what the
billboard added) and its member and survivor counts, so a replay releases the cohort again,
once, at the same report, without any user's unmasked vector. A run's last cohort, too small
to ever release, is stored the same way with no sum: a replay counts its members again."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from privrl.run import Run

KIND = "masked"


def masked_payload(cohort: int, masked: np.ndarray | None, release: dict[str, Any] | None
                   ) -> str:
    """A member's stored report: its cohort, its masked input (None: a member of a cohort
    closed with nothing released), and (the cohort's first row) the release:
    {"sum": [...] or None, "members": n, "survivors": m}."""
    doc: dict[str, Any] = {"cohort": cohort,
                           "masked": None if masked is None else np.asarray(masked).tolist()}
    if release is not None:
        doc["release"] = release
    return json.dumps(doc, separators=(",", ":"))


def replay_masked(run: Run, payload: str) -> int:
    """During a replay: a stored masked report; the cohort's release at its first row (a
    cohort closed with nothing released counts its members again). Its cohort's index."""
    doc = json.loads(payload)
    release = doc.get("release")
    if release is None:
        return int(doc["cohort"])
    privatizer = run.privatizer
    if release["sum"] is None:
        privatizer.close_unreleased(int(release["members"]), run.ledger)  # type: ignore[attr-defined]
    else:
        privatizer.release_sum(  # type: ignore[attr-defined]
            np.asarray(release["sum"], dtype=np.int64), int(release["members"]),
            int(release["survivors"]), run.ledger)
    return int(doc["cohort"])
