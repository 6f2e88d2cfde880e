"""A frontier case across a suite (`privrl frontier --suite`): a study per world, each world's
threshold from the study's own machinery, the suite's median and worst, refused worlds."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from privrl.client.cli import main
from privrl.studies import frontier as fr
from privrl.studies import suite_study as ss
from privrl.studies.threshold import smallest_learning_epsilon
from privrl.worlds.suites import SUITES, Suite, SuiteWorld

MINI = Suite("mini", "three tiny worlds", (
    SuiteWorld("riverswim", {"n_states": 3}, 4, stratum="a"),
    SuiteWorld("gridworld", {"size": 2}, 3, stratum="b"),
    SuiteWorld("strens-chain", {"n_states": 3, "slip": 0.1}, 4, stratum="c"),
))
SPEC = fr.StudySpec(episodes=20, seeds=(0, 1), cases=("dp-ucbvi-step-jdp", "ucrl-vtr-jdp"),
                    presets=("practical",), epsilons=(1.0, 1000.0), ablation=False)


@pytest.fixture
def ran(tmp_path: Path) -> tuple[dict, list[str]]:
    """The mini suite's evaluation worlds (every world: each is alone in its stratum), run in
    this process at K = 20; the notes it printed."""
    notes: list[str] = []
    summary = ss.run_suite(MINI, "evaluation", SPEC, tmp_path, "privrl frontier (test)",
                           workers=1, quiet=True, note=notes.append, commit="abc1234")
    return summary, notes


def test_each_world_has_its_own_study_and_threshold(ran: tuple[dict, list[str]],
                                                     tmp_path: Path) -> None:
    summary, _ = ran
    assert [w["label"] for w in summary["worlds"]] == [w.label for w in MINI.worlds]
    [case] = summary["summary"]
    assert (case["case"], case["preset"], case["worlds"]) == ("dp-ucbvi-step-jdp",
                                                               "practical", 3)
    for world in MINI.worlds:
        data = json.loads((tmp_path / ss.folder(world) / "frontier.json").read_text())
        assert data["spec"]["world"] == ss.world_dict(world)
        runs = [data["runs"][r["run"]] for r in data["frontier"]]
        assert {r["world"]["name"] for r in runs} == {world.name}
        assert {r["config"]["n_states"] for r in runs} == {world.build().S}
        fractions = {float(r["epsilon"]): data["runs"][r["run"]]["fractions"]
                     for r in data["frontier"]}
        expected = smallest_learning_epsilon(fractions)
        got = case["by_world"][world.label]
        assert (got["epsilon"], got["low"], got["high"]) == (expected.epsilon, expected.low,
                                                            expected.high)
        assert set(got["percent"]) == {"1", "1000"}


def test_the_suite_reports_the_median_and_the_worst(ran: tuple[dict, list[str]]) -> None:
    summary, _ = ran
    [case] = summary["summary"]
    eps = sorted(math.inf if t["epsilon"] is None else t["epsilon"]
                 for t in case["by_world"].values())
    median, worst = eps[1], eps[2]
    assert case["median_epsilon"] == (None if math.isinf(median) else median)
    assert case["worst_epsilon"] == (None if math.isinf(worst) else worst)
    for e, stats in case["per_epsilon"].items():
        means = sorted(t["percent"][e][0] for t in case["by_world"].values())
        assert (stats["median"], stats["worst"], stats["worlds"]) == (means[1], means[2], 3)
    rows = summary["rows"]
    assert len(rows) == 4 and rows[-1][2] == "**median / worst of 3 worlds**"


def test_a_world_the_algorithm_refuses_is_listed_not_run(ran: tuple[dict, list[str]]) -> None:
    summary, notes = ran
    for world in summary["worlds"]:
        assert "needs a public linear-mixture model" in world["refused"]["ucrl-vtr-jdp"]
        assert "dp-ucbvi-step-jdp" not in world["refused"]
    assert all(s["case"] != "ucrl-vtr-jdp" for s in summary["summary"])
    assert any("ucrl-vtr-jdp refused" in n for n in notes)
    assert "Worlds a case's algorithm refuses" not in summary["note"]  # none of the reported


def test_a_rerun_continues_and_the_summary_is_saved(ran: tuple[dict, list[str]],
                                                   tmp_path: Path) -> None:
    summary, _ = ran
    saved = json.loads((tmp_path / ss.SUMMARY).read_text())
    assert saved["summary"] == json.loads(json.dumps(summary["summary"]))
    assert {"command", "commit", "load_average", "columns", "rows", "note"} <= set(saved)
    assert saved["run_commits"] == {"abc1234": 3 * 2}  # worlds x ε of dp-ucbvi only
    assert "Runs done: 6 at abc1234." in saved["note"]
    notes: list[str] = []
    again = ss.run_suite(MINI, "evaluation", SPEC, tmp_path, "privrl frontier (test)",
                         workers=1, quiet=True, note=notes.append, commit="abc1234")
    assert again["summary"] == summary["summary"]
    assert sum("2 runs already done or refused, 0 to run" in n for n in notes) == 3


def test_median_and_worst_take_the_upper_middle_and_beyond_the_grid() -> None:
    assert ss.median_and_worst([3.0, 1.0]) == (3.0, 3.0)
    assert ss.median_and_worst([1.0, math.inf, 2.0]) == (2.0, math.inf)
    assert ss.median_and_worst([1.0, 2.0, 5.0, 9.0]) == (5.0, 9.0)


def test_a_study_of_one_world_resumes_a_study_saved_before_worlds(tmp_path: Path) -> None:
    path = tmp_path / "frontier.json"
    old = fr.StudySpec(episodes=20, seeds=(0, 1), cases=("dp-ucbvi-step-jdp",)).to_dict()
    del old["world"]  # a study saved before `StudySpec.world` existed
    path.write_text(json.dumps({"spec": old, "runs": {}}))
    study = fr.Study(path, fr.StudySpec(episodes=20, seeds=(0, 1),
                                        cases=("dp-ucbvi-step-jdp",)), "x", "abc")
    assert study.resume() == 0
    other = fr.Study(path, fr.StudySpec(episodes=20, seeds=(0, 1), cases=("dp-ucbvi-step-jdp",),
                                        world=ss.world_dict(MINI.worlds[0])), "x", "abc")
    with pytest.raises(ValueError, match="another spec"):
        other.resume()


def test_the_command_refuses_an_unknown_suite(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frontier", "--suite", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown suite 'nope': use tabular, linear" in capsys.readouterr().err


def test_only_some_worlds_are_run_and_the_others_named(tmp_path: Path) -> None:
    first = MINI.worlds[0].label
    spec = fr.StudySpec(episodes=20, seeds=(0, 1), cases=("dp-ucbvi-step-jdp",),
                        presets=("practical",), epsilons=(1000.0,), ablation=False)
    summary = ss.run_suite(MINI, "evaluation", spec, tmp_path, "x", quiet=True,
                           note=lambda _: None, commit="abc1234", only=[first])
    assert [w["label"] for w in summary["worlds"]] == [first]
    assert summary["not_run"] == [w.label for w in MINI.worlds[1:]]
    assert summary["summary"][0]["worlds"] == 1 and "Not run (so not in the median" in (
        summary["note"])
    with pytest.raises(ValueError, match="not evaluation worlds of suite 'mini': nope"):
        ss.run_suite(MINI, "evaluation", spec, tmp_path, "x", commit="abc1234", only=["nope"])


def test_a_rerun_with_another_epsilon_grows_each_worlds_study(tmp_path: Path) -> None:
    first = MINI.worlds[0].label
    one = fr.StudySpec(episodes=20, seeds=(0, 1), cases=("dp-ucbvi-step-jdp",),
                       presets=("practical",), epsilons=(1000.0,), ablation=False)
    before = ss.run_suite(MINI, "evaluation", one, tmp_path, "x", quiet=True,
                          note=lambda _: None, commit="abc1234", only=[first])
    notes: list[str] = []
    two = replace(one, epsilons=(1.0,))
    after = ss.run_suite(MINI, "evaluation", two, tmp_path, "x", quiet=True,
                         note=notes.append, commit="def5678", only=[first])
    assert "1 runs already done or refused, 1 to run" in " ".join(notes)  # ε = 1000 kept
    percent = after["summary"][0]["by_world"][first]["percent"]
    assert set(percent) == {"1", "1000"}
    assert percent["1000"] == before["summary"][0]["by_world"][first]["percent"]["1000"]
    assert after["run_commits"] == {"abc1234": 1, "def5678": 1}


def test_each_world_has_its_own_folder() -> None:
    assert ss.folder(SuiteWorld("gridworld", {"size": 4, "slip": 0.2})) == (
        "gridworld_size_4_slip_0.2")
    for suite in SUITES.values():
        names = [ss.folder(w) for w in suite.worlds]
        assert len(set(names)) == len(names)
