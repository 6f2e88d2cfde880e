"""The Figure 1 sweep (privrl.lab.policy_eval) and `privrl policy-eval` / `privrl plot`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from privrl.algorithms.policy_eval.features import feature_matrix
from privrl.client.cli import main as cli_main
from privrl.lab import policy_eval as pe


def rows_by(summary: dict, **where: object) -> list[dict]:
    return [r for r in summary["rows"] if all(r.get(k) == v for k, v in where.items())]


def mean_rmse(summary: dict, estimator: str, features: str, m: int) -> float:
    (row,) = rows_by(summary, estimator=estimator, features=features, m=m, lambda_fixed=False)
    return row["rmse"]["mean"]


SMALL = pe.SweepSpec(features=("tabular", "agg2"), trajectories=(100, 1000), runs=3,
                     lambdas=(1.5, 30.0), lambda_at=(1000,))


def test_a_small_sweep_has_every_cell_with_runs_mean_and_standard_error() -> None:
    summary = pe.sweep(SMALL, workers=1, progress=False)
    assert summary["kind"] == "policy-eval" and len(summary["values"]) == 40
    schedule = rows_by(summary, lambda_fixed=False)
    assert len(schedule) == 4 * 2 * 2
    fixed = rows_by(summary, lambda_fixed=True)
    assert {(r["estimator"], r["lambda"]) for r in fixed} == {
        (e, lam) for e in ("lsl", "dp-lsl") for lam in (1.5, 30.0)}
    for row in summary["rows"]:
        values = np.array(row["rmse"]["values"])
        assert values.size == 3 and (values > 0).all()
        assert row["rmse"]["mean"] == pytest.approx(values.mean())
        assert row["rmse"]["se"] == pytest.approx(values.std(ddof=1) / math.sqrt(3))
        assert ("excess_risk" in row) == row["estimator"].startswith("dp-")
    (lsl,) = rows_by(summary, estimator="lsl", features="agg2", m=100, lambda_fixed=False)
    assert lsl["lambda"] == 10.0  # max(sqrt(100), 2 ||Phi||^2) with ||Phi||^2 = 2
    (lsl,) = rows_by(summary, estimator="lsl", features="tabular", m=1000, lambda_fixed=False)
    assert lsl["lambda"] == pytest.approx(math.sqrt(1000))


def test_every_estimator_sees_the_same_batch_and_infinite_epsilon_is_non_private() -> None:
    spec = pe.SweepSpec(features=("tabular", "agg4"), trajectories=(300,), runs=2,
                        epsilon=math.inf, lambda_at=())
    summary = pe.sweep(spec, workers=1, progress=False)
    for features in ("tabular", "agg4"):
        for est in ("lsw", "lsl"):
            (plain,) = rows_by(summary, estimator=est, features=features)
            (private,) = rows_by(summary, estimator=f"dp-{est}", features=features)
            assert private["rmse"]["values"] == plain["rmse"]["values"]
            assert private["excess_risk"]["values"] == [0.0, 0.0]


@pytest.mark.slow
def test_sweeps_are_reproducible_and_independent_of_the_worker_count() -> None:
    one = pe.sweep(SMALL, workers=1, progress=False)
    two = pe.sweep(SMALL, workers=2, progress=False)
    assert one["rows"] == two["rows"]
    other = pe.sweep(pe.SweepSpec(**{**SMALL.__dict__, "seed": 1}), workers=1, progress=False)
    assert other["rows"] != one["rows"]


def test_the_ledger_of_a_batch_lists_every_release_made_from_it() -> None:
    summary = pe.sweep(SMALL, workers=1, progress=False)
    ledgers = summary["ledger"]["per_batch"]
    small, big = ledgers["100"], ledgers["1000"]
    assert len(small["charges"]) == 2 * 2  # dp-lsw, dp-lsl x tabular, agg2
    assert len(big["charges"]) == 2 * 2 + 2  # plus panel 2's two DP-LSL lambdas
    assert small["epsilon"] == pytest.approx(0.4) and small["delta"] == pytest.approx(0.4)
    assert all(c["epsilon"] == 0.1 and c["delta"] == 0.1 for c in big["charges"])


@pytest.mark.slow
def test_utility_trends_of_the_chain() -> None:
    """At reduced scale: DP-LSW's mean RMSE falls from 10^4 to 10^6, non-private
    tabular LSW improves with m, and the pairs' noise is below the tabular one."""
    spec = pe.SweepSpec(estimators=("lsw", "dp-lsw"), features=("tabular", "agg2"),
                        trajectories=(10**4, 10**5, 10**6), runs=4, lambda_at=())
    summary = pe.sweep(spec, workers=2, progress=False)
    for features in ("tabular", "agg2"):
        dp = [mean_rmse(summary, "dp-lsw", features, m) for m in spec.trajectories]
        assert dp[0] > dp[1] > dp[2]
    plain = [mean_rmse(summary, "lsw", "tabular", m) for m in spec.trajectories]
    assert plain[0] > plain[1] > plain[2]
    for m in spec.trajectories:
        assert mean_rmse(summary, "dp-lsw", "agg2", m) < mean_rmse(summary, "dp-lsw", "tabular", m)


@pytest.mark.slow
def test_dp_lsw_with_pairs_is_close_to_lsw_at_a_million_trajectories() -> None:
    """The full-scale check: 20 runs, pairs, F_max = 1, m = 10^6: DP-LSW <= 1.3 x LSW."""
    spec = pe.SweepSpec(estimators=("lsw", "dp-lsw"), features=("agg2",),
                        trajectories=(10**6,), runs=20, lambda_at=())
    summary = pe.sweep(spec, workers=2, progress=False)
    ratio = mean_rmse(summary, "dp-lsw", "agg2", 10**6) / mean_rmse(summary, "lsw", "agg2", 10**6)
    assert 1.0 < ratio <= 1.3


def test_normalised_aggregation_is_the_same_function_class_with_unit_norm() -> None:
    plain, unit = feature_matrix("agg4", 40), feature_matrix("agg4n", 40)
    assert np.linalg.norm(unit, 2) == pytest.approx(1.0)
    np.testing.assert_allclose(unit * 2.0, plain)


@pytest.mark.slow  # a long test: a sweep, then ten figures drawn
def test_cli_writes_the_summary_and_the_four_panels_and_plot_redraws_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pe"
    code = cli_main(["policy-eval", "--trajectories", "1e2", "316", "--runs", "2",
                     "--features", "tabular", "agg2", "--lambda", "1.5", "10",
                     "--lambda-at", "316", "--workers", "1", "--quiet", "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["spec"]["runs"] == 2 and summary["spec"]["trajectories"] == [100, 316]
    assert summary["spec"]["epsilon"] == 0.1 and summary["spec"]["delta"] == 0.1
    names = ["figure1.png"] + [f"panel{i}.png" for i in range(1, 5)]
    assert all((out / n).stat().st_size > 10_000 for n in names)
    printed = capsys.readouterr().out
    assert "dp-lsw" in printed and "sweep:" in printed
    again = tmp_path / "again"
    assert cli_main(["plot", str(out), "--out", str(again)]) == 0
    assert all((again / n).exists() for n in names)


@pytest.mark.slow  # a long test: the forced sweep draws its five figures
def test_cli_refuses_to_overwrite_results_unless_forced(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "summary.json").write_text("earlier")
    small = ["policy-eval", "--runs", "1", "--trajectories", "100", "--features", "tabular",
             "--workers", "1", "--quiet", "--out", str(tmp_path)]
    assert cli_main(small) == 2
    err = capsys.readouterr().err
    assert "summary.json" in err and "--force" in err, err
    assert (tmp_path / "summary.json").read_text() == "earlier"
    assert cli_main([*small, "--force"]) == 0
    assert json.loads((tmp_path / "summary.json").read_text())["kind"] == "policy-eval"


@pytest.mark.parametrize("argv", [
    ["--features", "pairs"],
    ["--trajectories", "0"],
    ["--trajectories", "2e7"],
    ["--delta", "1"],
    ["--estimator", "td"],
    ["--constants", "appendix", "--epsilon", "6"],
])
def test_cli_refuses_bad_arguments_with_exit_code_2(argv: list[str], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = cli_main(["policy-eval", "--runs", "1", "--trajectories", "100", "--out",
                         str(tmp_path), "--quiet", *argv])
    except SystemExit as exc:  # argparse refusals
        code = int(exc.code or 0)
    assert code == 2
    assert "error" in capsys.readouterr().err
    assert not (tmp_path / "summary.json").exists()
