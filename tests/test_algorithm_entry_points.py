"""Third-party algorithms through the `privrl.algorithms` entry-point group (issue 41 part 7),
found by importlib.metadata in an installed distribution's metadata, as pip would leave it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from privrl.algorithms import registry

PLUGIN = '''
from support.toy_algorithm import ToyRandom


class EntryPointRandom(ToyRandom):
    """The toy random policy under another name, offered only by an entry point."""

    name = "toy-entry-point-random"
'''


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A distribution on sys.path whose metadata names one algorithm class."""
    (tmp_path / "toy_ep_plugin.py").write_text(PLUGIN)
    info = tmp_path / "toy_ep_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-ep-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{registry.ENTRY_POINTS}]\ntoy-entry-point-random = toy_ep_plugin:EntryPointRandom\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # also invalidates importlib's path caches
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    monkeypatch.delitem(sys.modules, "toy_ep_plugin", raising=False)
    return "toy-entry-point-random"


def test_an_installed_entry_point_registers_its_algorithm(installed: str) -> None:
    assert installed in registry.names()
    algorithm = registry.get(installed)
    assert algorithm.name == installed and algorithm.__module__ == "toy_ep_plugin"


def test_without_the_distribution_the_name_is_unknown() -> None:
    with pytest.raises(ValueError, match="unknown algorithm 'toy-entry-point-random'"):
        registry.get("toy-entry-point-random")


def test_a_versioned_id_names_the_version_whose_numbers_a_result_holds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from privrl.config import RunConfig
    from privrl.studies.frontier import run_key

    algorithm = registry.get("dp-ucbvi")
    assert registry.get(algorithm.versioned_id()) is algorithm
    config = RunConfig(algo="dp-ucbvi", n_states=6, n_actions=2, horizon=20, episodes=100,
                       privacy="jdp",
                       epsilon=1.0)
    before = run_key(config)
    monkeypatch.setattr(algorithm, "version", algorithm.version + 1)
    assert run_key(config) != before  # a new version's numbers are new runs
    old = f"dp-ucbvi-v{algorithm.version - 1}"
    with pytest.raises(ValueError, match=f"this privrl has 'dp-ucbvi-v{algorithm.version}'"):
        registry.get(old)
    with pytest.raises(ValueError, match="unknown algorithm 'no-such-v1'"):
        registry.get("no-such-v1")


def test_a_summary_record_names_the_algorithms_version(tmp_path: Path) -> None:
    import privrl
    from privrl.lab.experiments import read_summary

    privrl.simulate("dp-ucbvi", privacy="jdp", epsilon=1.0, episodes=30, seeds=1).save(tmp_path)
    record = read_summary(tmp_path)["results"][0]
    assert record["algorithm"] == registry.get("dp-ucbvi").versioned_id() == "dp-ucbvi-v1"
