"""What a user gets without flags is the frontier's row for that case (issue 43 part 3): the
mechanism, counter, schedule and delta of `privrl run --privacy P --epsilon E` and of
`privrl.simulate(...)` come from the same home as the frontier's practical rows."""

from __future__ import annotations

import pytest
from privrl.algorithms import registry
from privrl.client.cli import build_parser
from privrl.client.lab_cli import sweep_configs
from privrl.studies.cases import CASES, Case
from privrl.studies.frontier import Planner, StudySpec, default_mechanism
from privrl.worlds import make

EPISODES = 50_000


def cli_config(case: Case, epsilon: float):
    """The configuration `privrl run` makes for `case` with no other flag than its knobs."""
    algo = registry.get(case.algo)
    knobs = [x for k, v in case.knobs.items() for x in ("--knob", f"{k}={str(v).lower()}")]
    args = build_parser().parse_args(
        ["run", "--algo", case.algo, "--privacy", case.privacy, "--epsilon", str(epsilon),
         "--episodes", str(EPISODES), *knobs])
    (config,) = sweep_configs(args, make(algo.default_world, None))
    return algo.effective_config(config)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_default_run_is_the_frontiers_practical_row(case: Case) -> None:
    row, _ = Planner(StudySpec(episodes=EPISODES)).config(case, "practical", 1.0)
    mine = cli_config(case, 1.0)
    assert mine == row
    assert mine.mechanism == default_mechanism(case)


def test_the_default_dp_ucbvi_jdp_run_releases_through_the_matrix_counter() -> None:
    """The row the frontier measured (Gaussian, matrix counter, geometric releases, δ by the
    population rule), not the Laplace smoothed tree that reached only ~100% of uniform."""
    case = next(c for c in CASES if c.algo == "dp-ucbvi" and c.privacy == "jdp"
                and not c.knobs)
    config = cli_config(case, 1.0)
    assert (config.mechanism, config.counter, config.delta) == ("gaussian", "matrix", 2e-6)
    assert config.schedule == registry.get("dp-ucbvi").practical_schedule


def test_the_default_pooled_ldp_run_is_pure_epsilon() -> None:
    """Where Laplace wins (DP-UCBVI's pooled LDP), the row and the default are pure epsilon."""
    case = next(c for c in CASES if c.algo == "dp-ucbvi" and c.privacy == "ldp")
    config = cli_config(case, 10.0)
    assert (config.mechanism, config.delta) == ("laplace", 0.0)
    row, _ = Planner(StudySpec(episodes=EPISODES)).config(case, "practical", 10.0)
    assert row == config


def test_simulate_without_flags_runs_the_frontiers_row() -> None:
    import privrl

    case = next(c for c in CASES if c.algo == "dp-ucbvi" and c.privacy == "jdp"
                and not c.knobs)
    res = privrl.simulate(case.algo, epsilon=1.0, episodes=30, seeds=1)
    row, _ = Planner(StudySpec(episodes=30)).config(case, "practical", 1.0)
    assert res.config == row
