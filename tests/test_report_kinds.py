"""A report kind is one object (`privrl.reports.ReportKind`: model, acceptance check,
description, stored form) declared by its owner: the raw kinds by `privrl.reports`, the local
boundary's `noisy` kind by `privrl.trust.local`; `accept` dispatches to the registered object
(issue 41, part 2)."""

from __future__ import annotations

import dataclasses
from typing import Any, get_args

import pytest
from privrl import reports, trust
from privrl.protocol import NoisyReport, Report, TrajectoryReport
from privrl.run import Run, user_episode
from privrl.trust import local
from support.server import public, spec, world


def ldp_report(seed: int = 5) -> tuple[Run, Any, NoisyReport]:
    """A small LDP run, the message it serves and one honest user's noisy report for it."""
    config = spec("ldp", episodes=4, seed=seed)
    run = Run(public(config), [seed])
    message = run.message()
    _, noisy = user_episode(world(config), message, [seed], 0, run.algorithm, run.calibration,
                            nonces=[0])
    assert noisy is not None
    arrays = {name: arr[0].ravel().tolist() for name, arr in noisy.items()}
    return run, message, NoisyReport(kind="noisy", ticket="0" * 16, arrays=arrays)


def test_the_local_boundary_owns_the_noisy_kind() -> None:
    noisy = reports.kind_named("noisy")
    assert noisy is local.NOISY
    assert noisy.accept.__module__ == noisy.body.__module__ == "privrl.trust.local"
    assert noisy.model is NoisyReport
    assert trust.local_boundary() is local.LOCAL
    assert local.LOCAL.report_kind("trajectory") == noisy.name
    assert reports.kind_named("trajectory").accept.__module__ == "privrl.reports"


def test_accept_dispatches_to_the_boundarys_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    run, message, report = ldp_report()
    calls = []

    def spy(*args: Any) -> reports.Accepted:
        calls.append(args[0])
        return local.NOISY.accept(*args)

    owned = dataclasses.replace(local.NOISY, accept=spy, describe="the owner's words")
    monkeypatch.setitem(reports._kinds, "noisy", owned)
    accepted = reports.accept(report, run, message, 0)
    assert calls == [report]
    assert accepted.kind == "noisy" and accepted.noisy is not None
    assert accepted.digest == reports.digest_of(report)  # the kind's stored form, hashed
    raw = TrajectoryReport(kind="trajectory", ticket="0" * 16, states=[0] * 6, actions=[0] * 5,
                           rewards=[0.0] * 5)
    with pytest.raises(reports.ReportRejected, match=r"kind='noisy' reports \(the owner's words\)"):
        reports.accept(raw, run, message, 0)
    assert calls == [report]


def test_the_noisy_check_refuses_what_it_should() -> None:
    run, message, report = ldp_report()
    name = sorted(report.arrays)[0]
    short = report.model_copy(update={"arrays": {**report.arrays, name: [0.0]}})
    with pytest.raises(reports.ReportRejected, match=rf"arrays\['{name}'\] must have \d+ entries"):
        reports.accept(short, run, message, 0)
    restored = reports.restore("noisy", reports.accept(report, run, message, 0).payload, run,
                               message, 0)
    assert restored.digest == reports.digest_of(report)


def test_every_wire_kind_is_registered_in_the_schemas_order() -> None:
    models = get_args(get_args(Report)[0])
    kinds = reports.kinds()
    assert [kind.model for kind in kinds] == list(models)
    assert [kind.name for kind in kinds] == ["trajectory", "noisy", "returns"]
    with pytest.raises(ValueError, match="states another kind"):
        reports.ReportKind("masked", NoisyReport, local.NOISY.accept, "x")
    with pytest.raises(ValueError, match="registered already"):
        reports.register_kind(dataclasses.replace(local.NOISY, describe="another"))
    assert reports.register_kind(local.NOISY) is local.NOISY
