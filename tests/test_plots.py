"""The figures read on their own: legends name the algorithm and the world of each curve, every
figure colours a privacy mode the same way (one palette), and the policy-evaluation figure draws
only panels with data, beside a table that says it shows RMSE."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from matplotlib.colors import to_hex
from privrl.config import RunConfig
from privrl.lab import policy_eval as pe
from privrl.lab.experiments import WorldSpec, run_many
from privrl.lab.plots import (
    PRIVACY_COLORS,
    cumulative_figure,
    frontier_figure,
    learning_figure,
    switches_figure,
)


def configs(world: WorldSpec, episodes: int, epsilons: tuple[float, ...] = (10.0,)
            ) -> list[RunConfig]:
    """Non-private, then JDP and LDP at each epsilon, of DP-UCBVI on the world."""
    mdp = world.build()
    common = dict(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=episodes)
    return [RunConfig(privacy="none", **common)] + [
        RunConfig(privacy=mode, epsilon=eps, mechanism="laplace", **common)
        for mode in ("jdp", "ldp") for eps in epsilons
    ]


@pytest.fixture(scope="module")
def two_worlds() -> list[dict]:
    """Real result records of two worlds, as `privrl plot DIR1 DIR2` overlays them."""
    out = []
    for world in (WorldSpec("riverswim", 5), WorldSpec("garnet", 4)):
        out += run_many(configs(world, 40, (1.0, 10.0)), world, [0, 1], workers=1,
                        show_progress=False)
    return out


def colour_by_label(lines) -> dict[str, str]:  # noqa: ANN001 (matplotlib artists)
    return {ln.get_label(): to_hex(ln.get_color()) for ln in lines
            if not ln.get_label().startswith("_")}


def mode_of(label: str) -> str:
    """The privacy mode a legend label names."""
    text = label.split(": ", 1)[1].lower()
    return "none" if text.startswith("non-private") else text[:3]


def test_legends_name_the_algorithm_and_the_world(two_worlds: list[dict]) -> None:
    fig = cumulative_figure(two_worlds)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    curves = [t for t in labels if "random" not in t]
    assert len(curves) == len(two_worlds)
    assert sum(t.startswith("dp-ucbvi on riverswim H=5: ") for t in curves) == 5
    assert sum(t.startswith("dp-ucbvi on garnet H=4: ") for t in curves) == 5
    assert len(set(curves)) == len(curves)  # no two curves share a label
    frontier = frontier_figure(two_worlds)
    labels = [t.get_text() for t in frontier.legends[0].get_texts()]
    for world in ("riverswim H=5", "garnet H=4"):
        for mode in ("non-private", "JDP (laplace)", "LDP (laplace)"):
            assert f"dp-ucbvi on {world}: {mode}" in labels, labels
    # each world's own random-policy level is drawn, and named
    assert sum("uniformly random policy (" in t for t in labels) == 2


def test_one_colour_per_privacy_mode_in_every_figure(two_worlds: list[dict]) -> None:
    """regret.png, the demo's learning figure, frontier.png and switches.png."""
    cum = cumulative_figure(two_worlds).axes[0]
    seen = colour_by_label(cum.get_lines())
    learning = learning_figure(two_worlds).axes[1]
    seen_right = colour_by_label(learning.get_lines())
    frontier = frontier_figure(two_worlds).axes[0]
    bars = {c.get_label(): to_hex(c.lines[0].get_color()) for c in frontier.containers}
    flat = colour_by_label(frontier.get_lines())  # the non-private levels
    for colours in (seen, {k: v for k, v in seen_right.items() if ": " in k}, bars, flat):
        curves = {k: v for k, v in colours.items() if ": " in k}
        assert curves
        for label, colour in curves.items():
            assert colour == PRIVACY_COLORS[mode_of(label)], (label, colour)
    assert {mode_of(k) for k in seen if ": " in k} == {"none", "jdp", "ldp"}
    # curves of one mode still differ (dash pattern or marker)
    jdp = [ln for ln in cum.get_lines() if ": jdp" in ln.get_label()]
    assert len({(str(ln.get_linestyle()), ln.get_marker()) for ln in jdp}) == len(jdp) == 4


def test_the_switches_figure_colours_by_mode_too() -> None:
    world = WorldSpec("riverswim", 4)
    results = []
    for k in (20, 40):
        results += run_many(configs(world, k), world, [0], workers=1, show_progress=False)
    ax = switches_figure(results).axes[0]
    bars = {c.get_label(): to_hex(c.lines[0].get_color()) for c in ax.containers}
    assert len(bars) == 3
    for label, colour in bars.items():
        mode = "none" if ": non-private" in label else label.split(": ")[1][:3]
        assert colour == PRIVACY_COLORS[mode], (label, colour)
        assert "on riverswim" in label


@functools.cache  # read only: one sweep per lambda_at serves every test
def small_sweep(lambda_at: tuple[int, ...]) -> dict:
    spec = pe.SweepSpec(estimators=pe.ALL_ESTIMATORS, features=("tabular", "agg2"),
                        trajectories=(100, 316), runs=2, seed=0, lambdas=(1.5, 10.0),
                        lambda_at=lambda_at)
    return pe.sweep(spec, workers=1, progress=False)


@pytest.mark.parametrize("lambda_at", [pytest.param((), marks=pytest.mark.slow), (316,)])
def test_policy_eval_figure_has_no_empty_panel_and_colours_by_mode(lambda_at) -> None:
    summary = small_sweep(lambda_at)
    fig = pe.figure(summary)
    titles = [ax.get_title() for ax in fig.axes]
    assert len(fig.axes) == (3 if not lambda_at else 4), titles
    assert any(t.startswith("2:") for t in titles) == bool(lambda_at)
    for ax in fig.axes:
        assert ax.containers or ax.lines, ax.get_title()  # every drawn panel has data
        for artist in list(ax.containers) + list(ax.lines):
            label = artist.get_label()
            if label.startswith("_"):
                continue
            line = artist.lines[0] if hasattr(artist, "lines") else artist
            name = label.split()[0].lower()
            mode = pe.estimator_run(name)[1]
            assert to_hex(line.get_color()) == PRIVACY_COLORS[mode], (ax.get_title(), label)


def test_policy_eval_plot_writes_only_drawn_panels_and_the_table_says_rmse(tmp_path) -> None:
    summary = small_sweep(())
    paths = pe.plot(summary, tmp_path)
    assert [p.name for p in paths] == ["figure1.png", "panel1.png", "panel3.png", "panel4.png"]
    first = pe.table(summary).splitlines()[0]
    assert "RMSE" in first and "2 runs" in first and "batch size m" in first
    assert np.all([p.stat().st_size > 5_000 for p in paths])
