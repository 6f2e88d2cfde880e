"""The one verdict rule (`privrl.verdict`): its intervals over seeds and its stated tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from privrl.client.cli_common import CliError
from privrl.client.compare_results import compare_results, holm
from privrl.verdict import compare, interval, judge


def test_judge_reads_the_last_tenth_in_windows() -> None:
    regret = np.r_[np.full(900, 2.0), np.full(80, 0.1), np.full(20, 1.8)]  # random = 2
    v = judge(regret, 2.0)
    assert v.tail_episodes == 100 and v.learned == "unsteady"  # the last window swings up
    assert v.percent_of_random == pytest.approx(100 * (80 * 0.1 + 20 * 1.8) / 100 / 2.0)
    assert judge(np.full(1000, 0.1), 2.0).learned == "yes"
    assert judge(np.full(1000, 1.9), 2.0).learned == "no"


def test_the_interval_is_students_t_over_seeds() -> None:
    mean, lo, hi = interval([10.0, 12.0, 14.0])
    assert mean == 12.0 and hi - mean == pytest.approx(4.302653 * 2.0 / np.sqrt(3), rel=1e-5)
    assert mean - lo == pytest.approx(hi - mean)
    one = interval([5.0])
    assert one[0] == 5.0 and np.isnan(one[1]) and np.isnan(one[2])


@pytest.mark.parametrize("test", ["welch", "permutation"])
def test_the_tests_tell_apart_what_differs_and_not_what_does_not(test: str) -> None:
    rng = np.random.default_rng(0)
    a, b = 1.0 + 0.01 * rng.standard_normal(6), 0.5 + 0.01 * rng.standard_normal(6)
    apart = compare(a, b, test)
    assert apart["test"] == test and apart["p_value"] < 0.01
    assert apart["difference"] == pytest.approx(a.mean() - b.mean())
    same = compare(a, a[::-1] + 1e-9, test)
    assert same["p_value"] > 0.5
    with pytest.raises(ValueError, match="at least 2 seeds"):
        compare(a[:1], b, test)


def test_holm_adjusts_step_down() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def summary(path: Path, rows: dict[str, np.ndarray]) -> Path:
    """A summary.json with one record per label (per-seed regret rows, random = 2)."""
    records = [{"label": label, "regret": {"per_episode": per.tolist(),
                                           "random_policy_per_episode": 2.0}}
               for label, per in rows.items()]
    path.mkdir(parents=True, exist_ok=True)
    (path / "summary.json").write_text(json.dumps({"results": records}))
    return path / "summary.json"


def test_compare_names_its_test_and_pairs_the_same_configuration(tmp_path: Path,
                                                                 capsys) -> None:
    rng = np.random.default_rng(1)
    good = 0.1 + 0.01 * rng.standard_normal((4, 200))
    bad = 1.9 + 0.01 * rng.standard_normal((4, 200))
    a = summary(tmp_path / "a", {"jdp": good, "ldp": bad})
    b = summary(tmp_path / "b", {"jdp": bad.copy(), "ldp": bad + 0.001})
    out = compare_results([str(a), str(b)], "welch", 0.05)
    text = capsys.readouterr().out
    assert [(r["a"], r["b"]) for r in out["comparisons"]] == [
        ("jdp [summary.json#1]", "jdp [summary.json#2]"),
        ("ldp [summary.json#1]", "ldp [summary.json#2]")]
    assert out["comparisons"][0]["different"]  # jdp learned in a, not in b
    assert "test: Welch's two-sample t-test" in text and "Holm's step-down" in text
    assert "% of random" in text and "[95% Student-t interval]" in text
    one = compare_results([str(a)], "permutation", 0.05)  # one file: its configurations pairwise
    assert len(one["comparisons"]) == 1 and one["comparisons"][0]["test"] == "permutation"


def test_compare_refuses_one_seed_in_one_line(tmp_path: Path) -> None:
    a = summary(tmp_path / "a", {"jdp": np.full((1, 50), 0.1), "ldp": np.full((1, 50), 1.9)})
    with pytest.raises(CliError, match="at least 2 seeds on each side"):
        compare_results([str(a)], "welch", 0.05)


def test_the_95_percent_interval_needs_no_scipy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bare install has no scipy (it is a test extra): the demo's and compose's intervals over
    up to 31 seeds come from the t table, equal to scipy's quantile to six decimals."""
    with_scipy = interval([10.0, 12.0, 14.0, 9.0])
    monkeypatch.setitem(sys.modules, "scipy", None)  # `import scipy` fails from here on
    assert interval([10.0, 12.0, 14.0, 9.0]) == pytest.approx(with_scipy, rel=1e-6)
    with pytest.raises(ImportError):
        interval([1.0, 2.0], level=0.9)  # another level still asks scipy


def test_the_t_table_is_student_t_to_six_decimals() -> None:
    from privrl.verdict import T975
    from scipy import stats

    for df, t in enumerate(T975, start=1):
        assert t == pytest.approx(stats.t.ppf(0.975, df), abs=1e-6), df
