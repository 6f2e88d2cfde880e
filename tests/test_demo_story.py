"""`privrl demo` tells the JDP-vs-LDP story: its defaults make JDP learn and LDP not at the same
epsilon, the table states epsilon, delta and what "% of random" means, explains its terms, judges
each run on its last 10% and says when that verdict is unsteady, every curve of the plot is drawn
in its own style with a band, a seeded sequential demo repeats exactly, and the demo names its
dashboard and keeps serving it with --keep-serving until Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from privrl import trust
from privrl.client.cli import build_parser
from privrl.client.cli_common import CliError
from privrl.client.demo import (
    demo_cohort,
    demo_configs,
    percent_of_random,
    steady_verdict,
    story,
    window_percents,
)
from privrl.client.procs import child_env
from privrl.client.remote_cli import DEMO_COHORT, DEMO_EPSILON
from privrl.lab.experiments import WorldSpec, regret_summary, run_many
from privrl.lab.plots import learning_figure, moving
from privrl.trust.secagg.spec import DEFAULT_COLLUSION, DEFAULT_DROPOUT
from privrl.verdict import verdict, verdict_tail
from privrl.worlds import riverswim
from support.client import run_cli
from support.server import default_sigint


def demo_defaults():
    """The demo's arguments when a newcomer types `privrl demo`."""
    return build_parser().parse_args(["demo"])


def test_defaults_are_pooled_with_one_budget_for_every_private_run() -> None:
    args = demo_defaults()
    configs = demo_configs(args, riverswim(args.horizon))
    # the registry's boundaries, from the one that trusts the server most to the least
    assert [c.privacy for c in configs] == [b.name for b in trust.by_exposure()]
    assert [c.privacy for c in configs] == ["none", "jdp", "secagg", "ldp"]
    jdp, secagg, ldp = configs[1:]
    for other in (secagg, ldp):
        assert (jdp.epsilon, jdp.delta, jdp.mechanism) == (other.epsilon, other.delta,
                                                           other.mechanism)
        assert jdp.preset == other.preset == "practical" and jdp.knobs == other.knobs
    assert all((c.knobs or {}).get("pooled") for c in configs)
    # secure aggregation: cohorts of at most DEMO_COHORT users, every one full, and the
    # default assumptions (stated in its ledger and under the demo's table)
    assert secagg.schedule == f"batch:{DEMO_COHORT}" and args.episodes % DEMO_COHORT == 0
    assert (secagg.dropout, secagg.collusion) == (DEFAULT_DROPOUT, DEFAULT_COLLUSION)
    assert ldp.schedule is None and secagg.counter is None


def test_the_cohort_divides_the_episodes_or_is_refused() -> None:
    """A last, partial cohort smaller than a cohort's survivors could never release: the demo
    takes the largest divisor of K up to --cohort, and refuses a K no cohort of 2 or more
    users up to it divides, before anything runs."""
    assert [demo_cohort(k, DEMO_COHORT) for k in (3000, 40, 25, 20, 2, 14)] == [10, 10, 5, 10,
                                                                                2, 7]
    assert demo_cohort(40, 8) == 8 and demo_cohort(40, 7) == 5
    for k, most in ((11, 10), (1, 10), (9, 2)):
        with pytest.raises(CliError, match="no cohort of 2 to"):
            demo_cohort(k, most)
    args = build_parser().parse_args(["demo", "--episodes", "40", "--schedule", "batch:10",
                                      "--cohort", "8", "--dropout", "0.25", "--collusion", "0.2"])
    secagg = next(c for c in demo_configs(args, riverswim(20)) if c.privacy == "secagg")
    assert (secagg.schedule, secagg.dropout, secagg.collusion) == ("batch:8", 0.25, 0.2)
    laplace = build_parser().parse_args(["demo", "--mechanism", "laplace",
                                         "--counter", "tree"])
    # secure aggregation releases Gaussian (zCDP) noise only: with laplace it sits out
    assert [c.privacy for c in demo_configs(laplace, riverswim(20))] == ["none", "jdp", "ldp"]


@pytest.mark.parametrize("seed", [0, 1])
def test_the_default_demo_runs_tell_the_story_in_process(seed: int) -> None:
    """The demo's exact configurations, in process (one seed each): non-private and JDP learn,
    LDP stays at the random policy's level, at the same epsilon and delta."""
    args = demo_defaults()
    world = WorldSpec("riverswim", args.horizon)
    configs = demo_configs(args, world.build())
    results = run_many(configs, world, [seed], workers=1, show_progress=False)
    tail = verdict_tail(args.episodes)
    assert tail == args.episodes // 10
    for r in results:
        per = np.asarray(r["regret"]["per_episode"])
        r["regret"]["tail_per_episode_mean"] = float(per[:, -tail:].mean())
        r["regret"]["tail_episodes"] = tail
    pct = {r["config"]["privacy"]: percent_of_random(r) for r in results}
    assert pct["none"] < 5 and pct["jdp"] <= 25 and pct["ldp"] >= 75, pct
    steady = {r["config"]["privacy"]: steady_verdict(r)[0] for r in results}
    # at K = 3,000 and the demo's budget JDP's last 10% may span two policies: the
    # verdict may say so, but it never says that JDP failed, and LDP never learns
    assert steady["none"] == "yes" and steady["ldp"] == "no", steady
    assert steady["jdp"] in ("yes", "unsteady"), steady
    for r in results[1:]:
        assert r["ledger"]["epsilon"] == pytest.approx(args.epsilon, rel=1e-6)
    # secure aggregation's cohorts of 10 carry one central noise each: its billboard holds
    # K / 10 of them where LDP's holds K, so it learns at least as much as LDP over the run
    # (measured: 91 to 101% of random in the last 10% at this K; it learns at K = 50,000)
    regret = {r["config"]["privacy"]: np.asarray(r["regret"]["per_episode"]).sum()
              for r in results}
    assert regret["secagg"] < regret["ldp"], regret
    text = story(results)
    assert "of episodes JDP is at" in text and ", SecAgg at " in text
    assert "sees only sums of" not in text  # in process: no cohort counts from a server
    assert ("(learned)" in text) == (steady["jdp"] == "yes")
    assert ("not enough for JDP to learn steadily" in text) == (steady["jdp"] != "yes")


def fake(label: str, privacy: str, per: np.ndarray) -> dict:
    """A result record with the given per-episode regret (seeds, K)."""
    return {"label": label, "config": {"privacy": privacy},
            "ledger": {"epsilon": 0.0 if privacy == "none" else 10.0,
                       "delta": 0.0 if privacy == "none" else 1e-5},
            "regret": {"per_episode": per.tolist(), "random_policy_per_episode": 2.0}}


def test_every_curve_has_its_own_style_and_a_band() -> None:
    rng = np.random.default_rng(0)
    flat = 2.0 + 0.1 * rng.standard_normal((1, 300))
    results = [fake("non-private", "none", np.exp(-np.arange(300) / 30)[None]),
               fake("jdp eps=10", "jdp", flat), fake("ldp eps=10", "ldp", flat.copy())]
    fig = learning_figure(results, "t")
    left, right = fig.axes[:2]
    for ax in (left, right):
        lines = ax.get_lines()[: len(results)]
        styles = {(ln.get_color(), str(ln.get_linestyle()), ln.get_marker()) for ln in lines}
        assert len(styles) == len(results)  # identical curves (jdp, ldp) still look different
        assert len({ln.get_color() for ln in lines}) == len({ln.get_marker() for ln in lines}) == 3
    bands = [c for c in right.collections if isinstance(c, PolyCollection)]
    assert len(bands) == len(results)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "jdp eps=10 (spent ε = 10, δ = 1e-05)" in labels
    assert any("uniformly random" in t for t in labels) and any("optimal" in t for t in labels)


def test_the_plot_title_wraps_a_cohort_runs_assumptions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The title states each cohort run's assumptions in lines that fit the figure's width."""
    from privrl.client import demo

    titles: list[str] = []
    monkeypatch.setattr(demo, "plot_learning",
                        lambda results, path, title: titles.append(title) or path)
    record = {"label": "secagg eps=3 gaussian pooled B=10",
              "cohorts": {"assumptions": "cohorts of 10, dropout <= 0.1, " * 6}}
    demo.draw([{"label": "jdp eps=3"}, record], 20, 3000, tmp_path / "regret.png")
    lines = titles[0].splitlines()
    assert lines[0].startswith("RiverSwim (H = 20) over HTTP, K = 3000 per run")
    assert len(lines) > 2 and max(map(len, lines)) <= demo.TITLE_WIDTH
    assert " ".join(lines[1:]).startswith(record["label"] + ": cohorts of 10, dropout")


def test_moving_mean_and_std() -> None:
    x = np.arange(10.0)[None] ** 2
    mean, std = moving(x, 3)
    for k in range(10):
        window = x[0, max(0, k - 2): k + 1]
        assert mean[0, k] == pytest.approx(window.mean())
        assert std[0, k] == pytest.approx(window.std(), abs=1e-9)


def swinging(tail_pcts: list[float], episodes: int = 1000) -> dict:
    """A record whose last 10% sits at the given % of random, window after window (random = 2)."""
    per = np.full(episodes, 2.0)
    tail = verdict_tail(episodes)
    per[-tail:] = np.repeat(np.array(tail_pcts) / 50.0, tail // len(tail_pcts))
    return {"regret": {"per_episode": [per.tolist()], "random_policy_per_episode": 2.0,
                       "tail_episodes": tail, "tail_per_episode_mean": per[-tail:].mean()}}


def test_a_curve_that_still_swings_is_unsteady_not_learned() -> None:
    """Mean 20% of random is 'yes' by itself; windows at 0% and at 100% make it unsteady."""
    swing = swinging([0, 0, 0, 0, 100])
    assert percent_of_random(swing) == pytest.approx(20) and verdict(20) == "yes"
    np.testing.assert_allclose(window_percents(swing), [0, 0, 0, 0, 100])
    assert steady_verdict(swing) == ("unsteady", "0-100%")
    assert steady_verdict(swinging([3, 10, 5, 8, 1])) == ("yes", "1-10%")
    assert steady_verdict(swinging([90, 80, 100, 95, 120])) == ("no", "80-120%")


def test_the_story_calls_an_unsteady_jdp_run_so() -> None:
    def rec(privacy: str, pcts: list[float]) -> dict:
        r = swinging(pcts)
        r.update(config={"privacy": privacy, "episodes": 1000, "counter": "matrix",
                         "schedule": "batch:200" if privacy == "jdp" else None},
                 ledger={"epsilon": 10.0, "delta": 1e-5})
        return r

    text = story([rec("none", [0] * 5), rec("jdp", [0, 0, 0, 0, 100]), rec("ldp", [100] * 5)])
    assert "JDP is at 20% of random (unsteady, windows 0-100%)" in text
    assert "(matrix counters, released on schedule batch:200)" in text
    assert "LDP at 100% (did not learn)" in text and "not enough for JDP to learn steadily" in text


def test_verdicts() -> None:
    assert [verdict(p) for p in (0, 25, 26, 74.9, 75, 101)] == [
        "yes", "yes", "partly", "partly", "no", "no"]


@pytest.mark.slow
def test_seeded_sequential_demo_repeats_and_the_table_explains_itself(tmp_path: Path) -> None:
    outs = []
    for name in ("a", "b"):
        done = run_cli("demo", "--episodes", "25", "--schedule", "batch:5", "--users-processes",
                       "2", "--concurrency", "2", "--seed", "7", "--sequential", "--seeds", "1",
                       "--out", str(tmp_path / name), timeout=240)
        assert done.returncode == 0, done.stderr[-2000:]
        outs.append(done.stdout)
    first = json.loads((tmp_path / "a" / "summary.json").read_text())
    second = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert first["seeds"] == "derived from --seed"
    for a, b in zip(first["results"], second["results"], strict=True):
        assert a["regret"]["per_episode"] == b["regret"]["per_episode"]
    # the secure-aggregation run repeats too (its cohorts run concurrently: its sums do not
    # depend on the order its members report in), all 5 of its cohorts of 5 released
    secagg = first["results"][2]
    assert secagg["config"]["privacy"] == "secagg" and secagg["cohorts"]["size"] == 5
    assert secagg["cohorts"]["counts"]["released"] == 5
    out = outs[0]
    header = out.splitlines()[0]
    assert "% of random" in header and "eps spent" in header and "delta" in header
    assert "% of random: the last 2 episodes' (10%) mean regret divided by a uniformly" in out
    assert "when all 2 windows of those episodes agree, else unsteady" in out
    for term in ("pooled: ", "eps spent, delta: ", "claim / report p50/p99 ms: median and"
                 " 99th-percentile", "report bytes: "):
        assert term in out, term
    assert "windows" in header and "learned" in header
    eps = f"{DEMO_EPSILON:g}"
    jdp = next(ln for ln in out.splitlines() if ln.startswith(f"jdp eps={eps} gaussian pooled"))
    assert jdp.split()[-2:] == [eps, "1e-05"]  # eps and delta spent, from the ledger
    assert f"Same budget, eps = {eps} and delta = 1e-05 per user" in out


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_the_demo_names_its_dashboard_and_keeps_serving_until_ctrl_c(tmp_path: Path,
                                                                     stop: int) -> None:
    """--keep-serving: the tables, then the dashboard's URL; the page and /healthz answer until
    SIGINT (Ctrl-C) or SIGTERM, which ends the demo cleanly (exit 0, the server stopped). It
    runs in a folder that holds a folder named `privrl`, which must not shadow the package."""
    cmd = ["privrl", "demo", "--episodes", "20", "--schedule", "batch:5", "--seeds", "1",
           "--users-processes", "1", "--concurrency", "2", "--seed", "3",
           "--keep-serving", "--out", str(tmp_path / "demo")]
    cmd[0] = str(Path(sys.executable).with_name("privrl"))  # the console command users type
    (tmp_path / "privrl").mkdir()  # e.g. a clone's or a venv's folder: the command runs beside it
    # started outside the repository: its children must not depend on the working directory
    proc = subprocess.Popen(cmd, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, preexec_fn=default_sigint)
    try:
        lines = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, f"the demo ended early: {proc.wait(timeout=30)} {proc.stderr.read()}"
            lines.append(line)
            if line.startswith("dashboard: "):
                break
        url = lines[-1].split()[1].rstrip("/")
        assert url.startswith("http://127.0.0.1:") and "until Ctrl-C" in lines[-1]
        assert any(ln.startswith("% of random: ") for ln in lines)  # the tables came first
        page = httpx.get(url + "/", timeout=10)
        assert page.status_code == 200 and "privrl dashboard" in page.text
        assert httpx.get(url + "/healthz", timeout=10).status_code == 200
        runs = httpx.get(url + "/v1/runs", timeout=10).json()["runs"]
        assert len(runs) == 4 and all(r["status"]["finished"] for r in runs)
        time.sleep(1.0)
        assert proc.poll() is None  # still serving
        proc.send_signal(stop)
        assert proc.wait(timeout=60) == 0
        err = proc.stderr.read()
        assert "Traceback" not in err and "dashboard: " + url + "/" in err
        with pytest.raises(httpx.HTTPError):
            httpx.get(url + "/healthz", timeout=3)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_seeds_merge_into_one_record_with_each_runs_verdict_and_an_interval(capsys) -> None:
    """Three runs of one configuration: one record with a regret row per seed; the printout
    gives every run's own verdict and the Student-t interval of % of random over the seeds."""
    from privrl.client.demo import interval_text, merge_seeds, print_seed_verdicts

    def run(level: float, run_id: str) -> dict:
        per = np.full(1000, 2.0)
        per[-100:] = level
        return {"label": "jdp", "run_id": run_id, "policy_versions": 5,
                "regret": regret_summary(per[None], riverswim(20), tail=verdict_tail(1000)),
                "http": {"episodes": 1000, "seconds": 10.0, "episodes_per_second": 100.0,
                         "claim_ms_p50": 1.0, "claim_ms_p99": 2.0, "report_ms_p50": 1.0,
                         "report_ms_p99": 2.0, "report_bytes": 100,
                         "report_bytes_range": [100, 100]}}

    rnd = run(0.0, "x")["regret"]["random_policy_per_episode"]
    records = [run(f * rnd, i) for f, i in ((0.1, "a"), (0.2, "b"), (0.9, "c"))]
    merged = merge_seeds(records, riverswim(20))
    assert merged["run_ids"] == ["a", "b", "c"] and len(merged["regret"]["per_episode"]) == 3
    assert merged["http"]["episodes"] == 3000 and merged["policy_changes"] == [4, 4, 4]
    assert interval_text(merged) == "40% [-68, 148]"  # 40 ± t(2) 4.303 x 43.6 / sqrt(3)
    print_seed_verdicts([merged])
    out = capsys.readouterr().out
    assert "each run's verdict (3 seeds per configuration)" in out
    assert "runs: yes (10%), yes (20%), no (90%)" in out
