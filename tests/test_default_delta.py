"""A run's default delta fits its population: delta <= 1/(10 K) on a 1-2-5 grid (issue 43 part 2),
wherever delta is defaulted (RunConfig, the CLI, `privrl.simulate`, the frontier); an explicit
delta wins, and above 1/K it warns."""

from __future__ import annotations

import math
import warnings

import privrl
import pytest
from privrl.client.cli import build_parser
from privrl.client.lab_cli import sweep_configs
from privrl.config import DeltaWarning, RunConfig, population_delta
from privrl.studies.cases import case_named
from privrl.studies.frontier import Planner, StudySpec
from privrl.worlds import riverswim


@pytest.mark.parametrize("episodes", [1, 2, 3, 7, 10, 99, 300, 1000, 4999, 20_000, 50_000,
                                      123_457, 10_000_000])
def test_the_rule_is_the_largest_grid_value_under_a_tenth_of_one_over_k(episodes: int) -> None:
    delta = population_delta(episodes)
    assert delta * 10 * episodes <= 1.0 + 1e-12
    exponent = math.floor(math.log10(delta) + 1e-9)
    mantissa = round(delta / 10.0**exponent, 9)
    assert mantissa in (1.0, 2.0, 5.0)
    grid = [c * 10.0**e for e in range(exponent - 1, exponent + 2) for c in (1, 2, 5)]
    assert all(g <= delta * (1 + 1e-9) or g * 10 * episodes > 1.0 + 1e-9 for g in grid)


def test_known_values() -> None:
    assert population_delta(50_000) == 2e-6  # the frontier's K
    assert population_delta(20_000) == 5e-6
    assert population_delta(300) == 2e-4
    assert population_delta(1) == 0.1
    with pytest.raises(ValueError):
        population_delta(0)


def test_a_gaussian_config_without_delta_gets_the_rule_and_an_explicit_one_wins() -> None:
    base = dict(n_states=6, n_actions=2, horizon=20, mechanism="gaussian")
    assert RunConfig(**base, episodes=50_000).delta == 2e-6
    assert RunConfig(**base, episodes=50_000, delta=1e-7).delta == 1e-7
    assert RunConfig(n_states=6, n_actions=2, horizon=20, episodes=50_000).delta == 0.0  # Laplace
    # a JSON configuration without delta (the server's) gets the same
    assert RunConfig.model_validate_json(
        '{"n_states": 6, "n_actions": 2, "horizon": 20, "episodes": 1000,'
        ' "mechanism": "gaussian"}').delta == 1e-4
    assert "required" not in str(RunConfig.model_json_schema()["allOf"][0]["then"])


def test_a_delta_above_one_over_k_warns() -> None:
    base = dict(n_states=6, n_actions=2, horizon=20, mechanism="gaussian")
    with pytest.warns(DeltaWarning, match="above 1/K"):
        RunConfig(**base, episodes=500_000, delta=1e-5)
    with pytest.warns(DeltaWarning, match="delta K = 5"):
        RunConfig(**base, episodes=500_000, delta=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeltaWarning)
        RunConfig(**base, episodes=50_000, delta=1e-5)  # delta K = 0.5: no warning


def test_the_cli_defaults_delta_by_the_rule_and_delta_wins() -> None:
    mdp = riverswim()

    def config(*extra: str) -> RunConfig:
        args = build_parser().parse_args(["run", "--episodes", "20000", *extra])
        (only,) = sweep_configs(args, mdp)
        return only

    assert config("--mechanism", "gaussian").delta == 5e-6
    assert config("--mechanism", "gaussian", "--delta", "1e-9").delta == 1e-9
    assert config("--mechanism", "laplace").delta == 0.0
    assert config("--mechanism", "gaussian", "--privacy", "none").delta == 0.0


def test_simulate_defaults_delta_by_the_rule() -> None:
    res = privrl.simulate("dp-ucbvi", privacy="jdp", epsilon=1.0, mechanism="gaussian",
                          episodes=50, seeds=1)
    assert res.config.delta == population_delta(50) == 2e-3
    again = privrl.simulate("dp-ucbvi", privacy="jdp", epsilon=1.0, mechanism="gaussian",
                            delta=1e-6, episodes=50, seeds=1)
    assert again.config.delta == 1e-6


def test_the_frontier_runs_at_the_rule_unless_told() -> None:
    case = case_named("ucrl-vtr-jdp")
    config, _ = Planner(StudySpec(episodes=50_000)).config(case, "practical", 1.0)
    assert config.delta == 2e-6
    told, _ = Planner(StudySpec(episodes=50_000, delta=1e-7)).config(case, "practical", 1.0)
    assert told.delta == 1e-7
    assert StudySpec(episodes=50_000).to_dict()["delta"] == 2e-6
