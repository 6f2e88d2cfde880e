"""The Python API: the examples of the README and of the tutorial run as written, and their objects
keep their promises."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import privrl
import pytest
from matplotlib.figure import Figure

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorials" / "first-sweep.md"


def example(path: Path, heading: str) -> str:
    """The first python block after `heading` in the Markdown file `path`."""
    text = path.read_text()
    section = text[text.index(heading):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    scope: dict = {}
    exec(compile(example(ROOT / "README.md", "## From Python"), "README.md", "exec"), scope)  # noqa: S102
    shape, spent = capsys.readouterr().out.splitlines()[:2]
    assert shape == "(2, 300)" and spent == "eps 1, delta 0.0002"  # its comment; δ = 1/(10K)
    assert isinstance(scope["fig"], Figure)


@pytest.mark.slow  # a long test: the tutorial's sweep of 3 seeds x 2,000 episodes
def test_the_tutorial_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(example(TUTORIAL, "## Python API"), str(TUTORIAL), "exec"), scope)  # noqa: S102
    res, again = scope["res"], scope["again"]
    assert res.regret.shape == (3, 2_000)
    assert isinstance(scope["fig"], Figure)
    assert res.ledger.epsilon == pytest.approx(1.0, rel=1e-9)  # the JDP tree spends it all at K
    assert (tmp_path / "out" / "summary.json").exists()
    np.testing.assert_allclose(again.regret, res.regret, atol=1e-6)  # saved rounded to 1e-6
    assert again.config == res.config and again.seeds == [0, 1, 2]


def test_simulate_matches_the_cli_record_and_learns() -> None:
    res = privrl.simulate("dp-ucbvi", world="riverswim", privacy="none", episodes=600, seeds=2,
                          horizon=10)
    assert res.regret[:, -100:].mean() < res.regret[:, :100].mean()
    assert res.ledger.epsilon == 0
    assert res.record["world"] == {"name": "riverswim", "horizon": 10, "params": {}}
    assert "non-private" in repr(res)


def test_simulate_refuses_what_the_algorithm_does_not_support() -> None:
    with pytest.raises(ValueError, match="knobs of 'dp-ucbvi'"):
        privrl.simulate(episodes=5, seeds=1, knobs={"no_such_knob": 1})
    with pytest.raises(ValueError, match="unknown algorithm"):
        privrl.simulate("nope", episodes=5, seeds=1)


def test_worlds_by_name() -> None:
    assert privrl.make_world("riverswim", horizon=7).H == 7
    assert "garnet" in {w.name for w in privrl.list_worlds()}
