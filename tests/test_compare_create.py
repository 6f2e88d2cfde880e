"""`privrl compare --create` (the compose setup) and `privrl demo` create the same runs: the
JDP run with the measured counter and release schedule at a budget below 10, the LDP run with
the knobs that apply to it, each accepted by a real app, and the budget stays a limit."""

from __future__ import annotations

import argparse
import json

import pytest
from privrl.client.cli import build_parser
from privrl.client.cli_common import CliError
from privrl.client.demo import demo_configs
from privrl.config import RunConfig
from privrl.worlds import riverswim
from support.server import AUTH, Apps, create, play
from support.vendored import REPO_ROOT

BUDGET = REPO_ROOT / "docs" / "results" / "demo" / "budget.json"


def compare(*extra: str) -> argparse.Namespace:
    """`privrl compare --create` as the compose setup types it, plus `extra`."""
    return build_parser().parse_args(["compare", "--create", "--run-file", "ids", *extra])


def configs(args: argparse.Namespace) -> list[RunConfig]:
    return demo_configs(args, riverswim(args.horizon or 20))


def test_compare_and_demo_create_the_same_measured_runs() -> None:
    by_compare, by_demo = configs(compare()), configs(build_parser().parse_args(["demo"]))
    assert by_compare == by_demo
    none, jdp, secagg, ldp = by_compare
    assert [c.privacy for c in by_compare] == ["none", "jdp", "secagg", "ldp"]
    assert jdp.epsilon < 10 and (jdp.counter, jdp.schedule) == ("matrix", "batch:200")
    assert (jdp.epsilon, jdp.delta, jdp.mechanism) == (ldp.epsilon, ldp.delta, ldp.mechanism)
    assert (secagg.epsilon, secagg.delta, secagg.mechanism) == (ldp.epsilon, ldp.delta,
                                                                ldp.mechanism)
    # the preset and knobs apply to all four; the counter and schedule are JDP's alone, the
    # cohorts (batch:B) secure aggregation's
    assert none.preset == jdp.preset == secagg.preset == ldp.preset == "practical"
    assert none.knobs == jdp.knobs == secagg.knobs == ldp.knobs == {"pooled": True}
    assert secagg.schedule == "batch:10" and secagg.counter is None
    assert ldp.schedule is None and ldp.counter == RunConfig(
        n_states=1, n_actions=1, horizon=1, episodes=1, privacy="ldp").counter


def test_the_default_jdp_run_is_the_measured_one_that_learns() -> None:
    """docs/results/demo/budget.json measured this very configuration (its `demo default` row):
    no measured case at the demo's K learns, on average and in single runs, at a smaller budget."""
    data = json.loads(BUDGET.read_text())
    titles = [c["title"] for c in data["columns"]]
    rows = [dict(zip(titles, r, strict=True)) for r in data["rows"]]
    jdp = configs(compare())[1]
    [default] = [r for r in rows if r["demo default"]]
    assert (default["counter"], default["schedule"], default["ε"], default["K"]) == (
        jdp.counter, jdp.schedule, jdp.epsilon, jdp.episodes)
    assert default["learns"] and default["single runs learn"]
    assert default["last 10%, % of uniform"][0] <= 25
    learned, runs = map(int, default["seeds ≤ 25%"].split("/"))
    assert runs >= 3 and learned >= data["reliable_share"] * runs
    reliable = [r for r in rows if r["K"] == jdp.episodes and r["learns"]
                and r["single runs learn"]]
    assert default["ε"] == min(r["ε"] for r in reliable) < 10


def test_the_epsilon_help_states_the_measured_budget() -> None:
    """`--epsilon`'s help says from which budget the default JDP run learns: the measured row's,
    not a number left over from an older configuration."""
    from privrl.client.cli import build_parser

    data = json.loads(BUDGET.read_text())
    titles = [c["title"] for c in data["columns"]]
    [default] = [dict(zip(titles, r, strict=True)) for r in data["rows"]
                 if dict(zip(titles, r, strict=True))["demo default"]]
    for command in ("demo", "compare"):
        sub = build_parser()._subparsers._group_actions[0].choices[command]
        [eps] = [a for a in sub._actions if "--epsilon" in a.option_strings]
        assert f"the default JDP run learns from {default['ε']:g} " in eps.help, eps.help


def test_the_options_shape_the_runs() -> None:
    args = compare("--epsilon", "2", "--preset", "faithful", "--counter", "tree",
                   "--schedule", "geometric:1.5", "--episodes", "500", "--no-pooled")
    none, jdp, secagg, ldp = configs(args)
    assert (jdp.counter, jdp.schedule, jdp.epsilon, jdp.episodes) == (
        "tree", "geometric:1.5", 2.0, 500)
    assert {c.preset for c in (none, jdp, secagg, ldp)} == {"faithful"}
    assert none.knobs is jdp.knobs is secagg.knobs is ldp.knobs is None
    assert (secagg.epsilon, secagg.schedule) == (2.0, "batch:10")
    assert ldp.epsilon == 2.0 and ldp.schedule is None


@pytest.mark.parametrize("extra,why", [
    (("--episodes", "150"), "schedule 'batch:200' releases nothing in 150 episodes: pass"
     " --schedule batch:B with B at most --episodes (e.g. batch:10)"),
    (("--mechanism", "laplace"), "calibrated in l2"),
    (("--schedule", "hourly"), "unknown release schedule"),
])
def test_an_invalid_demo_is_refused_before_any_run_is_created(extra: tuple[str, ...],
                                                              why: str) -> None:
    with pytest.raises(CliError, match="demo configuration: ") as err:
        configs(compare(*extra))
    assert why in str(err.value)


def test_the_server_creates_the_runs_and_the_budget_stays_a_limit(apps: Apps) -> None:
    """The demo's runs as a real app takes them (JSON over its routes); played to the end, the JDP
    run's ledger spends at most its budget and the run states the schedule it uses."""
    client = apps()
    args = compare("--episodes", "400")
    made = configs(args)
    ids = [create(client, c.model_dump(mode="json")) for c in made]
    jdp_id = ids[1]
    shown = RunConfig.model_validate(client.get(f"/v1/runs/{jdp_id}").json()["config"])
    assert (shown.counter, shown.schedule, shown.epsilon) == ("matrix", "batch:200", args.epsilon)
    play(client, jdp_id, made[1].model_dump(mode="json"), 400)
    ledger = client.get(f"/v1/runs/{jdp_id}/ledger").json()
    assert 0 < ledger["epsilon"] <= args.epsilon
    assert client.get(f"/v1/runs/{jdp_id}").json()["status"]["finished"]
    over = made[1].model_copy(update={"episodes": 150}).model_dump(mode="json")
    resp = client.post("/v1/runs", json=over, headers=AUTH)  # the server refuses it as well
    assert resp.status_code == 422 and "releases nothing" in resp.text
