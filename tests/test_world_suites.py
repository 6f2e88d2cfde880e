"""World suites: the classic worlds (Strens's chain, gridworlds, FrozenLake from its public map),
their declared transition support, the suites' fixed split, and `privrl worlds --suite`."""

from __future__ import annotations

import gymnasium  # in the test extra: the FrozenLake cross-check must not skip
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from privrl.client.cli import main
from privrl.worlds import TabularMDP, WorldError, as_gymnasium_env, from_gymnasium, make
from privrl.worlds.classic import LAKE_MAPS, frozen_lake, gridworld, strens_chain
from privrl.worlds.registry import list_worlds
from privrl.worlds.suites import LINEAR, SUITES, TABULAR, Suite, SuiteWorld, suite_named
from privrl.worlds.values import optimal_return, uniform_random_return

LEFT, DOWN, RIGHT, UP = 0, 1, 2, 3


@pytest.mark.parametrize(("name", "env_id", "slippery"), [
    ("frozen-lake", "FrozenLake-v1", True), ("frozen-lake", "FrozenLake-v1", False),
    ("frozen-lake-8x8", "FrozenLake8x8-v1", True)])
def test_frozen_lake_is_gymnasiums_table(name: str, env_id: str, slippery: bool) -> None:
    ours = make(name, slippery=slippery)
    theirs = from_gymnasium(env_id, is_slippery=slippery)
    assert (ours.S, ours.A, ours.H) == (theirs.S, theirs.A, theirs.H)
    np.testing.assert_allclose(ours.P, theirs.P, atol=1e-12)
    np.testing.assert_allclose(ours.R, theirs.R, atol=1e-12)
    np.testing.assert_array_equal(ours.d1, theirs.d1)
    assert gymnasium.spec(env_id) is not None
    assert len(LAKE_MAPS["8x8"]) == 8 and all(len(row) == 8 for row in LAKE_MAPS["8x8"])


@pytest.mark.parametrize("size", [2, 3, 5])
def test_a_gridworld_without_slip_is_a_shortest_path(size: int) -> None:
    shortest = 2 * (size - 1)
    assert optimal_return(gridworld(shortest, size)) == pytest.approx(1.0)
    assert optimal_return(gridworld(shortest - 1, size)) == 0.0  # the goal is out of reach
    world = gridworld(20, size)
    assert set(np.unique(world.P)) == {0.0, 1.0}  # deterministic moves
    goal = size * size - 1
    assert (world.P[:, goal, :, goal] == 1.0).all() and (world.R[:, goal] == 0.0).all()
    assert world.P[0, 0, RIGHT, 1] == 1.0 and world.P[0, 0, UP, 0] == 1.0  # off the map: stay


def test_a_slipping_gridworld_moves_sideways() -> None:
    world = gridworld(20, 3, slip=0.2)
    centre = 4  # (1, 1)
    assert world.P[0, centre, RIGHT, 5] == pytest.approx(0.8)
    assert world.P[0, centre, RIGHT, 1] == pytest.approx(0.1)  # up
    assert world.P[0, centre, RIGHT, 7] == pytest.approx(0.1)  # down
    assert world.P[0, centre, RIGHT, 3] == 0.0  # never backwards
    assert optimal_return(world) < optimal_return(gridworld(20, 3))


def test_strens_chain_pays_at_the_end_and_on_return() -> None:
    exact = strens_chain(20, n_states=5, slip=0.0)
    assert optimal_return(exact) == pytest.approx(20 - 4)  # 4 steps up, then 1 per step
    slippery = strens_chain(20, n_states=5, slip=0.2)
    assert slippery.P[0, 2, 0, 3] == pytest.approx(0.8) and slippery.P[0, 2, 0, 0] == 0.2
    assert slippery.R[0, 4, 0] == pytest.approx(0.8 + 0.2 * 0.2)
    assert optimal_return(slippery) > 0.2 * 0.8 * 20  # going up beats returning
    assert uniform_random_return(slippery) < optimal_return(slippery)


def test_the_declared_support_holds_the_transitions_and_hides_the_actions() -> None:
    for world in (strens_chain(20, 10, 0.1), gridworld(20, 4, 0.2), gridworld(20, 3),
                  frozen_lake(20), make("riverswim")):
        support = world.support
        assert support is not None and support.dtype == bool and not support.flags.writeable
        assert ((world.P > 0) <= support[None]).all()
        assert (support == support[:, :1]).all()  # every action of a state: the same states
        assert support.sum() < world.S * world.A * world.S
    # without slip a grid's move is deterministic, but its support is still the neighbours
    assert gridworld(20, 3).support.sum() == gridworld(20, 3, 0.2).support.sum()
    assert make("garnet").support is None  # the successor sets are drawn from the secret seed


def test_a_support_missing_a_transition_is_refused() -> None:
    world = gridworld(5, 2)
    bad = world.support.copy()
    bad[0, RIGHT, 1] = False
    with pytest.raises(WorldError, match=r"P\[h=0, s=0, a=2, s'=1\].*outside the declared"):
        TabularMDP.from_arrays(world.P, world.R, world.d1, support=bad)
    with pytest.raises(WorldError, match="shape"):
        TabularMDP.from_arrays(world.P, world.R, world.d1, support=bad[0])


def test_the_new_worlds_are_registered_and_are_gymnasium_envs() -> None:
    info = {w.name: w for w in list_worlds()}
    assert info["frozen-lake-8x8"].default_horizon == 50
    assert info["gridworld"].params == {"size": 4, "slip": 0.0}
    assert info["strens-chain"].params == {"n_states": 5, "slip": 0.2}
    env = as_gymnasium_env(make("gridworld", size=3, slip=0.2))
    check_env(env, skip_render_check=True)


@pytest.mark.parametrize("suite", list(SUITES.values()), ids=list(SUITES))
def test_every_suite_world_builds_reproducibly(suite: Suite) -> None:
    for world in suite.worlds:
        a, b = world.build(), world.build()
        assert np.array_equal(a.P, b.P) and np.array_equal(a.R, b.R)
    split = suite.split()
    assert list(split) == [w.label for w in suite.worlds]
    assert set(split.values()) == {"tuning", "evaluation"}


def test_the_tabular_suite_spans_its_sizes() -> None:
    cells = {w.label: (m := w.build()).S * m.A * m.S for w in TABULAR.worlds}
    assert min(cells.values()) <= 50 and max(cells.values()) >= 4500
    families = {w.name for w in TABULAR.worlds}
    assert {"riverswim", "strens-chain", "gridworld", "frozen-lake", "frozen-lake-8x8",
            "garnet"} <= families
    slips = {w.params["slip"] for w in TABULAR.worlds if w.name == "gridworld"}
    assert slips == {0.0, 0.2}


def test_the_split_follows_its_stated_rule() -> None:
    for suite in SUITES.values():
        split = suite.split()
        for world in suite.worlds:
            if world.used:
                assert split[world.label] == "tuning"
        strata: dict[str, list[str]] = {}
        for world in suite.worlds:
            if not world.used:
                strata.setdefault(world.stratum, []).append(split[world.label])
        for members in strata.values():  # alternating: evaluation has the extra one
            n_eval = members.count("evaluation")
            assert n_eval - members.count("tuning") in (0, 1)
    assert TABULAR.split_of(TABULAR.worlds[0]) == "tuning"  # RiverSwim: the presets' world


def test_the_split_depends_on_the_names_only() -> None:
    renamed = Suite("other", "", TABULAR.worlds)
    assert renamed.split() != TABULAR.split()  # another suite's hash: another order
    again = Suite("tabular", "", tuple(reversed(TABULAR.worlds)))
    assert again.split() == TABULAR.split()  # the listing order does not matter


def test_the_evaluation_worlds_are_fixed() -> None:
    """The split is data chosen before anything was measured on it: it must never move."""
    assert [w.label for w in TABULAR.worlds_in("evaluation")] == [
        "riverswim(n_states=12, H=40)", "strens-chain(n_states=5, slip=0.2, H=20)",
        "strens-chain(n_states=20, slip=0.05, H=40)", "gridworld(size=3, slip=0.0)",
        "gridworld(size=4, slip=0.0)", "gridworld(size=5, slip=0.2)", "frozen-lake-8x8",
        "garnet(n_states=5, n_actions=2, seed=2)", "garnet(n_states=10, n_actions=3, seed=2)",
        "garnet(n_states=20, n_actions=4, seed=1)", "garnet(n_states=30, n_actions=5, seed=2)"]
    assert [w.label for w in LINEAR.worlds_in("evaluation")] == [
        "lm-hard(seed=1001)", "lm-hard(seed=1004)", "lm-hard(seed=1006)",
        "zhou-mix(feature_seed=1001, seed=1001)", "zhou-mix(feature_seed=1002, seed=1002)",
        "zhou-mix(feature_seed=1006, seed=1006)", "lin-cube(d=5, seed=1001)",
        "lin-cube(d=5, seed=1005)", "lin-cube(d=5, seed=1006)", "lin-cube(d=6, seed=1001)",
        "lin-cube(d=6, seed=1002)"]


def test_a_suite_refuses_a_world_twice_and_an_unknown_name() -> None:
    with pytest.raises(WorldError, match="twice"):
        Suite("x", "", (SuiteWorld("riverswim"), SuiteWorld("riverswim")))
    with pytest.raises(WorldError, match="unknown suite 'nope': use tabular, linear"):
        suite_named("nope")
    with pytest.raises(WorldError, match="a split is one of"):
        TABULAR.worlds_in("test")  # type: ignore[arg-type]


def test_privrl_worlds_lists_a_suite(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["worlds", "--suite", "tabular"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("suite tabular: ")
    split = TABULAR.split()
    for world in TABULAR.worlds:
        [line] = [ln for ln in lines[1:] if f" {world.label} " in ln]
        assert line.startswith(split[world.label])
    assert any("frozen-lake-8x8" in ln and "cells=16,384" in ln and "support=880" in ln
               for ln in lines)
