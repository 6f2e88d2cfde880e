"""`privrl frontier`: the smallest learning ε and its interval on data whose answer is known, the
study's JSON (schema, resumption, refused and unavailable rows), its tables and its figure."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from matplotlib.colors import to_hex
from privrl.algorithms.registry import bind
from privrl.lab.plots import PRIVACY_COLORS, frontier_panels_figure
from privrl.studies import frontier as fr
from privrl.studies.cases import ABLATIONS, CASES, LEVER_KINDS, Lever, case_named
from privrl.studies.threshold import (
    Interval,
    final_fractions,
    smallest_learning_epsilon,
    tail_episodes,
)
from support.docs_hooks import load_hooks

GRID = (1.0, 2.0, 4.0, 8.0, 16.0)
SPREAD = (-8.0, 0.0, 8.0)  # three seeds around each mean: s = 8, half-width t₂·8/√3 = 19.87


def seeds_around(means: list[float]) -> dict[float, list[float]]:
    return {e: [m + o for o in SPREAD] for e, m in zip(GRID, means, strict=True)}


def test_the_interval_is_mean_plus_minus_t_s_over_root_n() -> None:
    ci = Interval.of([11.0, 12.0, 13.0])
    assert (ci.mean, ci.n) == (12.0, 3)
    assert ci.high - ci.mean == pytest.approx(4.303 / math.sqrt(3), rel=1e-4)  # t_{0.975,2}
    assert ci.mean - ci.low == pytest.approx(ci.high - ci.mean)
    one = Interval.of([7.0])
    assert one.low == one.mean == one.high == 7.0
    near_zero = Interval.of([0.1, 3.0, 0.2])  # mean 1.1, t s/√n ≈ 4.1: cut at 0%
    assert near_zero.low == 0.0 and near_zero.high > 5.0


def test_threshold_and_its_interval_on_known_data() -> None:
    """Means 100, 60, 30, 20, 0 with half-width 19.9: the mean crosses 25% at ε = 8, the
    interval's lower end at ε = 4 (30 − 19.9 ≤ 25), its upper end at ε = 16 (20 + 19.9 > 25,
    0 + 19.9 ≤ 25)."""
    found = smallest_learning_epsilon(seeds_around([100.0, 60.0, 30.0, 20.0, 0.0]))
    assert (found.low, found.epsilon, found.high) == (4.0, 8.0, 16.0)
    assert found.grid == GRID
    assert found.decided == 16.0 and not found.on_floor  # decided where learning is established


def test_a_lucky_dip_below_a_failing_epsilon_does_not_count() -> None:
    found = smallest_learning_epsilon(seeds_around([100.0, 0.0, 60.0, 20.0, 0.0]))
    assert found.epsilon == 8.0  # ε = 2 learns, but ε = 4 does not


def test_never_and_always() -> None:
    never = smallest_learning_epsilon(seeds_around([100.0, 90.0, 80.0, 70.0, 60.0]))
    assert (never.low, never.epsilon, never.high) == (None, None, None)
    always = smallest_learning_epsilon({e: [1.0, 2.0, 3.0] for e in GRID})
    assert (always.low, always.epsilon, always.high) == (1.0, 1.0, 1.0)
    assert always.on_floor and not never.on_floor  # the threshold may lie below the grid
    assert never.decided is None and never.to_dict()["decided"] is None


def test_a_known_curve_is_recovered_from_noisy_seeds() -> None:
    """f(ε) = 100 / (1 + (ε/3)²) crosses 25% at ε = 3√3 ≈ 5.2: on a decade grid of 13 points
    the first grid ε past it is 10; 20 noisy seeds per ε (sd 2) find it, and the interval
    holds it."""
    rng = np.random.default_rng(7)
    grid = np.geomspace(0.1, 1000, 13)
    data = {float(e): list(100 / (1 + (e / 3) ** 2) + rng.normal(0, 2, 20)) for e in grid}
    found = smallest_learning_epsilon(data)
    assert found.epsilon == pytest.approx(10.0)
    assert found.low <= found.epsilon <= found.high


def test_the_interval_always_holds_the_threshold() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        data = {e: list(rng.uniform(0, 60, 3)) for e in GRID}
        found = smallest_learning_epsilon(data)
        order = [x if x is not None else math.inf for x in (found.low, found.epsilon,
                                                             found.high)]
        assert order == sorted(order)


def test_final_fractions_are_the_last_tenth_over_the_random_regret() -> None:
    regret = np.zeros((2, 100))
    regret[0, 90:] = 1.0
    regret[1, 89] = 50.0  # just before the tail: not counted
    assert tail_episodes(100) == 10 and tail_episodes(3) == 1
    assert final_fractions(regret, 2.0) == [50.0, 0.0]


def test_cases_and_levers_are_data_and_name_real_algorithms() -> None:
    from privrl.algorithms import registry

    assert len({c.name for c in CASES}) == len(CASES) >= 9
    for case in CASES:
        algo = registry.get(case.algo)
        assert case.privacy in algo.boundaries()
        grid = case.grid(8)
        assert grid == sorted(grid) and grid[0] == case.epsilon_range[0]
        assert grid[-1] == case.epsilon_range[1]
        assert case.target is not None and case.target in grid  # the study checks every target
        assert len(set(grid) - {case.target}) in (7, 8) and len(grid) <= 9
    for ablation in ABLATIONS:
        case_named(ablation.case)
        assert {lever.kind for lever in ablation.levers} <= set(LEVER_KINDS)
    with pytest.raises(ValueError, match="unknown case"):
        case_named("nope")


def test_the_default_study_plans_every_frontier_point_and_ablation_row() -> None:
    jobs = fr.Planner(fr.StudySpec()).jobs()
    cases = {c.name for c in CASES}
    assert {j.case for j in jobs if j.kind == "frontier"} == cases
    ablated = {a.case for a in ABLATIONS}
    assert {j.case for j in jobs if j.kind != "frontier"} == ablated
    matrix = [j for j in jobs if j.config is not None and j.config.counter == "matrix"]
    assert matrix and all(j.config.mechanism == "gaussian" for j in matrix)
    for job in jobs:  # every planned row is a run its algorithm accepts
        if job.config is not None:
            bind(job.config)


def test_a_lever_names_what_this_build_lacks() -> None:
    lever = Lever("counter", "x", {"no_such_field": 1}, {"no_such_knob": 2, "beta": 2.0})
    assert lever.missing("lsvi-ucb-batched") == [
        "RunConfig has no field 'no_such_field'", "lsvi-ucb-batched has no knob 'no_such_knob'"]
    assert Lever("learner", "y", {"tree_smoothing": True}, {"pooled": True}).missing(
        "dp-ucbvi") == []


TINY = fr.StudySpec(episodes=20, seeds=(0, 1), cases=("lsvi-ucb-batched-jdp",),
                    epsilons=(1.0, 1000.0))


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[fr.Study, dict, list]:
    """A real tiny study (one case, two ε, two seeds, K = 20) run in this process, and the
    notes it printed; the ablation's levers include one that no build has."""
    ghost = Lever("schedule", "ghost schedule", {"ghost_schedule": "x"})
    ablations = tuple(
        fr.Ablation(a.case, a.epsilon, (ghost, *a.levers)) for a in ABLATIONS)
    monkeypatch.setattr(fr, "ABLATIONS", ablations)
    notes: list[str] = []
    study = fr.Study(tmp_path / "frontier.json", TINY, "privrl frontier (test)", "abc1234")
    data = fr.run_study(study, workers=1, quiet=True, note=notes.append)
    return study, data, notes


def test_the_study_json_has_its_schema(tiny: tuple[fr.Study, dict, list]) -> None:
    study, data, notes = tiny
    saved = json.loads(study.path.read_text())
    assert saved == json.loads(json.dumps(data))
    assert {"schema", "command", "commit", "load_average", "spec", "learns_below_percent",
            "frontier", "ablation", "runs", "thresholds"} <= set(saved)
    assert saved["command"] == "privrl frontier (test)" and len(saved["load_average"]) == 3
    (invocation,) = saved["invocations"]  # where and how long the runs took
    assert invocation["executor"] == "LocalExecutor" and invocation["cores"] == 1
    assert invocation["done"] == invocation["runs"] > 0 and invocation["wall_seconds"] > 0
    assert saved["spec"]["episodes"] == 20 and saved["spec"]["seeds"] == [0, 1]
    assert saved["spec"]["delta"] == 5e-3  # the runs' default at K = 20: 1 / (10 K)
    assert [(r["label"], r["epsilon"]) for r in saved["frontier"]] == [
        ("faithful", 1.0), ("faithful", 1000.0), ("practical", 1.0), ("practical", 1000.0)]
    for row in saved["frontier"]:
        run = saved["runs"][row["run"]]
        assert run["status"] == "done" and run["seeds"] == [0, 1]
        assert len(run["fractions"]) == 2 and run["seconds"] > 0
        assert run["config"]["epsilon"] == row["epsilon"] and run["config"]["delta"] == 5e-3
        assert run["ledger"]["epsilon"] <= row["epsilon"] * (1 + 1e-9)
        assert run["ledger"]["smaller_delta"] == pytest.approx(5e-4)  # the second δ: δ / 10
        assert run["ledger"]["epsilon_at_smaller_delta"] >= run["ledger"]["epsilon"]
    assert {t["preset"] for t in saved["thresholds"]} == {"faithful", "practical"}
    ghost = [r for r in saved["ablation"] if r["label"] == "ghost schedule"]
    assert ghost and ghost[0]["run"] == "" and "ghost_schedule" in ghost[0]["unavailable"]
    assert ("lever 'ghost schedule' (schedule) is not available for family"
            " lsvi-ucb-batched-jdp: RunConfig has no field 'ghost_schedule'") in notes
    labels = [r["label"] for r in saved["ablation"]]
    assert labels[0] == "faithful preset" and labels[-1] == "practical preset"
    assert any(x.startswith("all available levers") for x in labels)
    # the ablation's practical row at ε = 1000 is the frontier's run: run once
    practical = {r["run"] for r in saved["frontier"] + saved["ablation"]
                 if r["label"] in ("practical", "practical preset") and r["epsilon"] == 1000.0}
    assert len(practical) == 1


def test_a_rerun_continues_where_the_study_stopped(tiny: tuple[fr.Study, dict, list],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    study, data, _ = tiny
    saved = json.loads(study.path.read_text())
    lost = saved["frontier"][1]["run"]
    del saved["runs"][lost]  # as if interrupted before this run finished
    study.path.write_text(json.dumps(saved))
    ran: list[str] = []
    real = fr.run_task

    def counting(task, progress=None):  # noqa: ANN001, ANN202
        ran.append(fr.Job("frontier", "", "", 0, task.config, task.world).key)
        return real(task, progress)

    monkeypatch.setattr(fr, "run_task", counting)
    again = fr.Study(study.path, TINY, "privrl frontier (test)", "abc1234")
    assert again.resume() == len(saved["runs"])
    after = fr.run_study(again, workers=1, quiet=True, note=lambda _: None)
    assert ran == [lost]
    assert after["runs"][lost]["status"] == "done"
    first, last = after["invocations"]  # each invocation's runs and wall time, kept
    assert (first["runs"], first["done"]) == (len(data["runs"]), len(data["runs"]))
    assert (last["runs"], last["done"], last["workers"]) == (1, 1, 1)
    assert 0 < last["wall_seconds"] < first["wall_seconds"]
    timing = fr.timing_table(after)["note"]
    assert (f"ran 1 of its 1 runs in {fr.clock(last['wall_seconds'])} of wall time on 1"
            " workers") in timing
    assert after["runs"][lost]["fractions"] == data["runs"][lost]["fractions"]  # same seeds
    other = fr.Study(study.path, fr.StudySpec(episodes=21, seeds=(0, 1),
                                              cases=TINY.cases, epsilons=TINY.epsilons), "x",
                      "abc1234")
    with pytest.raises(ValueError, match="another spec"):
        other.resume()


def test_a_rerun_with_another_case_grows_the_study(tiny: tuple[fr.Study, dict, list],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    study, data, _ = tiny
    ran: list[str] = []
    real = fr.run_task

    def counting(task, progress=None):  # noqa: ANN001, ANN202
        ran.append(task.config.algo)
        return real(task, progress)

    monkeypatch.setattr(fr, "run_task", counting)
    more = fr.StudySpec(episodes=TINY.episodes, seeds=TINY.seeds, epsilons=TINY.epsilons,
                        cases=("lsvi-ucb-switching-jdp",))
    grown = fr.Study(study.path, more, "privrl frontier (test)", "def5678")
    assert grown.resume() == len(data["runs"])
    after = fr.run_study(grown, workers=1, quiet=True, note=lambda _: None)
    assert set(ran) == {"lsvi-ucb-switching"}  # the first case's runs are not run again
    assert after["spec"]["cases"] == [*TINY.cases, "lsvi-ucb-switching-jdp"]
    assert {r["case"] for r in after["frontier"]} == set(after["spec"]["cases"])
    commits = {r["algo"]: r["commit"] for r in after["runs"].values() if r["status"] == "done"}
    assert commits == {"lsvi-ucb-batched": "abc1234", "lsvi-ucb-switching": "def5678"}
    done = Counter(commits[r["algo"]] for r in after["runs"].values() if r["status"] == "done")
    note = fr.threshold_table(after)["note"]  # the tables name every commit that ran a run
    assert f"{done['abc1234']} at abc1234, {done['def5678']} at def5678" in note


def test_a_failed_run_is_recorded_and_retried(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    spec = fr.StudySpec(episodes=10, seeds=(0, 1), cases=("lsvi-ucb-batched-jdp",),
                        presets=("practical",), epsilons=(10.0,), ablation=False)

    def broken(task, progress=None):  # noqa: ANN001, ANN202
        raise RuntimeError("boom")

    monkeypatch.setattr(fr, "run_task", broken)
    study = fr.Study(tmp_path / "f.json", spec, "x", "abc1234")
    data = fr.run_study(study, workers=1, quiet=True, note=lambda _: None)
    (run,) = data["runs"].values()
    assert run["status"] == "failed" and run["message"] == "RuntimeError: boom"
    monkeypatch.undo()
    again = fr.Study(tmp_path / "f.json", spec, "x", "abc1234")
    assert again.resume() == 0  # a failed run does not count as finished
    (run,) = fr.run_study(again, workers=1, quiet=True, note=lambda _: None)["runs"].values()
    assert run["status"] == "done"


def test_an_overspending_configuration_is_recorded_as_refused(tmp_path: Path) -> None:
    """The faithful LinOpt-VI calibration overspends at large ε: refused before it runs, and its
    ε is left out of the threshold's grid."""
    spec = fr.StudySpec(episodes=200, seeds=(0, 1), cases=("linopt-vi-jdp",),
                        presets=("faithful",), epsilons=(1e5,), ablation=False)
    data = fr.run_study(fr.Study(tmp_path / "f.json", spec, "x", "abc1234"), workers=1, quiet=True,
                        note=lambda _: None)
    (run,) = data["runs"].values()
    assert run["status"] == "refused" and "would spend" in run["message"]
    (threshold,) = data["thresholds"]
    assert threshold["grid"] == [] and threshold["not_run"] == [1e5]


def test_the_tables_render_from_the_json(tiny: tuple[fr.Study, dict, list], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _, data, _ = tiny
    hooks = load_hooks()
    monkeypatch.setattr(hooks, "RESULTS", tmp_path)
    (tmp_path / "f.json").write_text(json.dumps(data))
    thresholds = hooks.render("<!-- generated: results-frontier f.json -->")
    lines = [line for line in thresholds.splitlines() if line.startswith("|")]
    assert lines[0].startswith("| case | preset | ε grid | smallest ε that learns |")
    assert len(lines) == 2 + 2  # header, rule, one row per preset
    assert "| lsvi-ucb-batched-jdp | faithful | 1 … 1000 (2) |" in thresholds
    assert "`privrl frontier (test)`" in thresholds
    ablation = hooks.render("<!-- generated: results-frontier-ablation f.json -->")
    rows = [line for line in ablation.splitlines() if line.startswith("| lsvi")]
    assert len(rows) == len(data["ablation"])
    assert any("not available: RunConfig has no field 'ghost_schedule'" in r for r in rows)
    faithful = next(r for r in rows if "| faithful preset |" in r)
    assert "| +0.0 |" in faithful  # the baseline's own difference
    timing = hooks.render("<!-- generated: results-frontier-timing f.json -->")
    rows = [line for line in timing.splitlines() if line.startswith("| lsvi")]
    assert [r.split(" | ")[1:3] for r in rows] == [["faithful", "2 of 2"],
                                                   ["practical", "2 of 2"]]
    assert "h on 2 workers" in timing and "Not yet run" not in timing
    hours = json.loads(json.dumps(data))  # every frontier run an hour, every other run two
    fronts = {r["run"] for r in hours["frontier"]}
    for key, run in hours["runs"].items():
        run["seconds"] = 3600.0 if key in fronts else 7200.0
    (tmp_path / "f.json").write_text(json.dumps(hours))
    timing = hooks.render("<!-- generated: results-frontier-timing f.json -->")
    others = len(hours["runs"]) - len(fronts)
    assert others > 0 and f"the frontier alone {len(fronts):.2f} h" in timing
    assert f"{(len(fronts) + 2 * others):.2f} h of runs in all" in timing
    lost = data["frontier"][0]["run"]
    partial = {**data, "runs": {k: r for k, r in data["runs"].items() if k != lost}}
    (tmp_path / "f.json").write_text(json.dumps(partial))
    timing = hooks.render("<!-- generated: results-frontier-timing f.json -->")
    assert "| lsvi-ucb-batched-jdp | faithful | 1 of 2 |" in timing
    assert "Not yet run: 1 runs, about" in timing


def test_the_figure_has_a_panel_per_case_in_its_privacy_colour() -> None:
    panels = [{"title": "a JDP", "privacy": "jdp", "presets": {
                  "faithful": [(1.0, 90.0, 80.0, 100.0), (10.0, 50.0, 40.0, 60.0)],
                  "practical": [(1.0, 40.0, 30.0, 50.0), (10.0, 5.0, 0.0, 10.0)]}},
              {"title": "b LDP", "privacy": "ldp", "presets": {
                  "faithful": [(1.0, 100.0, 99.0, 101.0)], "practical": []}}]
    fig = frontier_panels_figure(panels)
    drawn = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in drawn] == ["a JDP", "b LDP"]
    for ax, panel in zip(drawn, panels, strict=True):
        assert ax.get_xscale() == "log"
        curves = {ln.get_label(): ln for ln in ax.get_lines()
                  if ln.get_label() in ("faithful", "practical")}
        assert set(curves) == {p for p, pts in panel["presets"].items() if pts}
        for line in curves.values():
            assert to_hex(line.get_color()) == PRIVACY_COLORS[panel["privacy"]]
        if len(curves) == 2:  # the presets differ by dash pattern and marker
            assert curves["faithful"].get_linestyle() != curves["practical"].get_linestyle()
        assert any(ln.get_label().startswith("learns (25%)") and ln.get_ydata()[0] == 25
                   for ln in ax.get_lines())


def test_progress_estimates_from_the_finished_runs_per_algorithm() -> None:
    spec = fr.StudySpec(episodes=100, seeds=(0, 1), cases=("dp-ucbvi-pooled-jdp",
                                                           "lsvi-ucb-batched-jdp"),
                        presets=("practical",), epsilons=(1.0, 10.0), ablation=False)
    jobs = fr.Planner(spec).jobs()
    tasks = [fr.Task((i, 0), j.config, j.world, spec.seeds) for i, j in enumerate(jobs)]
    progress = fr.Progress(tasks, workers=2, quiet=True)
    assert progress.eta() is None
    progress.finished(tasks[0], 20.0, "ucbvi")  # 0.1 s per replica-episode
    progress.finished(tasks[2], 2.0, "lsvi")  # 0.01 s per replica-episode
    assert progress.eta() == pytest.approx((20.0 + 2.0) / 2)  # one of each left, two workers
    assert [fr.clock(s) for s in (12, 185, 3720)] == ["12s", "3m05s", "1h02m"]


@pytest.mark.parametrize("args,message", [
    (["--cases", "nope"], "unknown case(s) nope"),
    (["--seeds", "1"], "at least 2 seeds"),
])
def test_the_command_refuses_bad_options_in_one_line(args: list[str], message: str,
                                                     capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    from privrl.client.cli import main

    assert main(["frontier", *args, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_the_threshold_table_reports_each_case_at_its_target(
        tiny: tuple[fr.Study, dict, list]) -> None:
    _, data, _ = tiny
    target = case_named("lsvi-ucb-batched-jdp").target
    assert target not in TINY.epsilons
    columns = [c["title"] for c in fr.threshold_table(data)["columns"]]
    assert columns[-2:] == ["target ε", "% of uniform at the target"]
    assert all(row[-2:] == [target, None] for row in fr.threshold_table(data)["rows"])
    moved = json.loads(json.dumps(data))  # the ε = 1 runs, as if they had run at the target
    for row in moved["frontier"]:
        if row["epsilon"] == 1.0:
            row["epsilon"] = target
    moved["thresholds"] = fr.thresholds(moved)
    for row, t in zip(fr.threshold_table(moved)["rows"], moved["thresholds"], strict=True):
        fractions = fr._run_at(moved, t["case"], t["preset"], target)["fractions"]
        assert row[-2] == target and row[-1][0] == pytest.approx(np.mean(fractions))


def test_a_presets_new_knob_values_make_new_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from privrl.algorithms import registry

    planner = fr.Planner(fr.StudySpec())
    config, world = planner.config(case_named("dp-ucbvi-step-jdp"), "practical", 1.0)
    before = fr.Job("frontier", "dp-ucbvi-step-jdp", "practical", 1.0, config, world).key
    algorithm = registry.get("dp-ucbvi")
    presets = {**algorithm.presets, "practical": algorithm.presets["practical"].model_copy(
        update={"unknown_below": 7.0})}
    monkeypatch.setattr(algorithm, "presets", presets)
    after = fr.Job("frontier", "dp-ucbvi-step-jdp", "practical", 1.0, config, world).key
    assert after != before  # the same RunConfig, run with other knobs: not the same run
    knobs = algorithm.resolve_knobs("practical", None).model_dump(mode="json")
    assert after == fr.run_key(config, knobs) and before != fr.run_key(config, knobs)


def test_a_case_can_run_on_its_world_drawn_from_another_seed() -> None:
    planner = fr.Planner(fr.StudySpec())
    case = case_named("lsvi-ucb-batched-jdp")
    default, world = planner.config(case, "practical", 10.0)
    other, held_out = planner.config(case, "practical", 10.0, world_params={"seed": 101})
    assert (world.params, held_out.params) == ({}, {"seed": 101})
    assert held_out.build().P.tolist() != world.build().P.tolist()  # other secret signs
    assert other == default  # the secret seed is not in the public model the server knows
    assert planner.config(case, "practical", 10.0)[1] == world  # the default is untouched


def test_the_list_names_each_cases_target_and_grid(capsys: pytest.CaptureFixture[str]) -> None:
    from privrl.client.frontier_cli import list_cases

    assert list_cases() == 0
    lines = capsys.readouterr().out.splitlines()
    for case in CASES:
        [line] = [ln for ln in lines if ln.startswith(f"{case.name} ")]
        assert f"target ε {case.target:g}; ε grid {case.grid(8)}" in line


@pytest.mark.parametrize("mode", ["jdp", "ldp"])
def test_ucrl_vtr_plus_has_a_case_beside_ucrl_vtrs(mode: str) -> None:
    """UCRL-VTR+'s case runs on UCRL-VTR's world over its ε range; its target is on its grid and
    not below UCRL-VTR's (its four families share one budget: Luyo et al.'s remark)."""
    plus, base = case_named(f"ucrl-vtr-plus-{mode}"), case_named(f"ucrl-vtr-{mode}")
    assert (plus.algo, plus.privacy, dict(plus.knobs)) == ("ucrl-vtr-plus", mode, {})
    assert plus.epsilon_range == base.epsilon_range and plus.target in plus.grid(8)
    assert plus.target is not None and base.target is not None and plus.target >= base.target
    planner = fr.Planner(fr.StudySpec())
    assert planner.world(plus.algo)[0] == planner.world(base.algo)[0]  # LM-Hard, same H


def test_ucrl_vtr_plus_cases_run_in_the_study_with_an_exact_ledger(tmp_path: Path) -> None:
    """A real tiny study of both UCRL-VTR+ cases, both presets, at their targets and the top of
    their ranges: the practical preset spends exactly its budget; the faithful one (the paper's
    noise scales) never more, and at LDP's 10⁶ its plan would overspend: refused, not run."""
    cases = ("ucrl-vtr-plus-jdp", "ucrl-vtr-plus-ldp")
    # delta stated: at K = 30 the population's delta (2e-3) would make the faithful LDP plan at
    # its target overspend, which is not what this test is about
    spec = fr.StudySpec(episodes=30, seeds=(0, 1), cases=cases, ablation=False, grid_size=1,
                        delta=1e-5)
    data = fr.run_study(fr.Study(tmp_path / "f.json", spec, "x", "abc1234"), workers=1,
                        quiet=True, note=lambda _: None)
    rows = {(r["case"], r["label"], r["epsilon"]) for r in data["frontier"]}
    assert rows == {(name, preset, eps) for name in cases for preset in fr.PRESETS
                    for eps in (case_named(name).target, case_named(name).epsilon_range[1])}
    for row in data["frontier"]:
        run = data["runs"][row["run"]]
        if (row["case"], row["label"], row["epsilon"]) == ("ucrl-vtr-plus-ldp", "faithful", 1e6):
            assert run["status"] == "refused" and "would spend" in run["message"]
            continue
        assert run["status"] == "done", run.get("message")
        assert run["algo"] == "ucrl-vtr-plus" and run["world"]["name"] == "lm-hard"
        assert run["config"]["privacy"] == row["case"].rsplit("-", 1)[1]
        assert run["ledger"]["epsilon"] <= row["epsilon"] * (1 + 1e-12)
        if row["label"] == "practical":
            assert run["ledger"]["epsilon"] == pytest.approx(row["epsilon"], rel=1e-9)
        assert len(run["fractions"]) == 2 and all(math.isfinite(f) for f in run["fractions"])
    assert {(t["case"], t["preset"]) for t in data["thresholds"]} == {
        (name, preset) for name in cases for preset in fr.PRESETS}


@pytest.mark.parametrize("noise", ["numpy", "float"])
def test_a_runs_ledger_restated_at_another_delta_is_the_ledgers_own(noise: str) -> None:
    """`epsilon_at` (the thresholds' column at the runs' default δ) equals what the ledger
    itself states at that δ, for a zCDP ledger with a pure part, and leaves a pure one alone."""
    from privrl.privacy.accountant import Ledger

    ledger = Ledger()
    ledger.charge("gaussian", rho=0.02, sensitivity=1.0, scale=5.0, noise=noise)
    ledger.charge("laplace", epsilon=0.3, sensitivity=1.0, scale=3.0)
    at = ledger.totals(1e-5)
    run = {"config": {"noise": noise},
           "ledger": {"epsilon": at.epsilon, "delta": at.delta, "rho": at.rho}}
    for delta in (1e-5, 2e-6, 1e-9):
        assert fr.epsilon_at(run, delta) == pytest.approx(ledger.totals(delta).epsilon,
                                                          rel=1e-12)
    assert fr.epsilon_at(run, 2e-6) > at.epsilon  # a smaller δ states more ε for the noise
    pure = {"config": {"noise": noise}, "ledger": {"epsilon": 0.7, "delta": 0.0, "rho": 0.0}}
    assert fr.epsilon_at(pure, 2e-6) == 0.7


def _fake_runs(monkeypatch: pytest.MonkeyPatch, learns_from: float) -> list[float]:
    """Runs that learn (5% of uniform) from `learns_from` on, else stay at 90%; the ε run."""
    ran: list[float] = []

    def fake(task: fr.Task, progress: object = None) -> fr.TaskResult:
        ran.append(task.config.epsilon)
        level = fr.random_regret(task.world.build())
        share = 0.05 if task.config.epsilon >= learns_from else 0.9
        regret = np.full((len(task.seeds), task.config.episodes), share * level)
        return fr.TaskResult(task.seeds, regret, {"epsilon": task.config.epsilon,
                                                  "delta": 0.0, "rho": 0.0}, 1, 0.01)

    monkeypatch.setattr(fr, "run_or_error", fake)
    return ran


@pytest.mark.parametrize("learns_from", [0.003, 0.0])
def test_a_case_that_learns_on_its_floor_is_run_lower(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, learns_from: float) -> None:
    """A grid step lower at a time while the case learns at its smallest ε, at most
    EXTEND_BELOW steps; the threshold then comes off the floor (or stays on it, marked)."""
    ran = _fake_runs(monkeypatch, learns_from)
    spec = fr.StudySpec(episodes=20, seeds=(0, 1), cases=("lsvi-ucb-batched-jdp",),
                        presets=("practical",), grid_size=4, ablation=False)
    grid = spec.grid(case_named("lsvi-ucb-batched-jdp"))
    data = fr.run_study(fr.Study(tmp_path / "f.json", spec, "test", "abc1234"), workers=1,
                        quiet=True, note=lambda _: None)
    lo, hi = case_named("lsvi-ucb-batched-jdp").epsilon_range
    lower = [min(grid)]
    while len(lower) <= fr.EXTEND_BELOW and lower[-1] >= learns_from:
        lower.append(float(f"{lower[-1] / (hi / lo) ** (1 / 3):.2g}"))
    lower = lower[1:]  # learns_from 0.003: 0.022 learns, 0.00047 does not; 0: three that learn
    assert len(lower) == (2 if learns_from else fr.EXTEND_BELOW)
    assert sorted(ran) == sorted([*grid, *lower])  # each run once, the lower ones in turn
    assert sorted(r["epsilon"] for r in data["frontier"]) == sorted([*grid, *lower])
    (found,) = data["thresholds"]
    assert found["on_floor"] is (not learns_from)
    assert found["epsilon"] == (min(lower) if not learns_from else lower[0])


def test_the_secure_aggregation_rows_run_a_short_smoke(tmp_path: Path) -> None:
    """Every family with an LDP mode has a secagg case (DP-UCBVI per step and pooled, UCRL-VTR,
    LinOpt-VI and -PO). A short study of them (K = 200, one seed, both presets, eps = 10): every
    run finishes, its default cohorts of 100 release (the ledger charges each user's one cohort
    release, within the budget), and the practical runs spend their budget and replan on the
    first cohort's sum. The whole frontier is not re-run here (docs/results/frontier.md)."""
    from privrl import trust

    secagg = [c for c in CASES if trust.get(c.privacy).cohorts]
    assert {(c.algo, bool(c.knobs.get("pooled"))) for c in secagg} == {
        ("dp-ucbvi", False), ("dp-ucbvi", True), ("ucrl-vtr", False), ("linopt-vi", False),
        ("linopt-po", False)}
    assert {c.title.rsplit(" ", 1)[1] for c in secagg} == {trust.get("secagg").label}
    spec = fr.StudySpec(episodes=200, seeds=(0,), cases=tuple(c.name for c in secagg),
                        epsilons=(10.0,), ablation=False)
    data = fr.run_study(fr.Study(tmp_path / "f.json", spec, "x", "abc1234"), workers=1,
                        quiet=True, note=lambda _: None)
    runs = list(data["runs"].values())
    assert len(runs) == 2 * len(secagg)
    for run in runs:
        assert run["status"] == "done", run
        assert run["config"]["schedule"] == "batch:100"  # K / 50 within [100, 1000], at most K
        assert 0 < run["ledger"]["epsilon"] <= 10.0 * (1 + 1e-9), run["ledger"]
        if run["preset"] == "practical":
            assert run["ledger"]["epsilon"] == pytest.approx(10.0, rel=1e-6)
            assert run["policy_versions"] >= 2, run  # the first cohort's sum was released
