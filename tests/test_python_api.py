"""The Python API: the README's example runs as written, and its objects keep their promises."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import privrl
import pytest
from matplotlib.figure import Figure

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_example() -> str:
    """The first python block after '## Python API' in the README."""
    text = README.read_text()
    section = text[text.index("## Python API"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(readme_example(), "README.md", "exec"), scope)  # noqa: S102
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
