"""The command line explains itself: version, help with defaults, one-line errors without
framework prefixes, commands that can do nothing say so, readable runs/ledger/evaluate output."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from privrl import __version__
from privrl.client.cli import build_parser
from privrl.client.cli_common import HelpFormatter
from privrl.privacy.accountant import rho_to_epsilon
from privrl.worlds import optimal_return, uniform_random_return
from support.client import (
    MDP,
    TOKEN,
    config_for,
    create_run,
    one_line_error,
    run_cli,
    start_server,
)
from support.server import AUTH, spec

FLAGS = (argparse._StoreTrueAction, argparse._StoreConstAction, argparse._AppendAction,
         argparse._HelpAction, argparse._VersionAction)


def subparsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every parser under `parser` (itself included)."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from subparsers(child)


@pytest.mark.slow
def test_version() -> None:
    done = run_cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"privrl {__version__}"


def test_every_option_has_help_and_states_its_default() -> None:
    parsers = list(subparsers(build_parser()))
    assert {"privrl demo", "privrl run", "privrl ledger", "privrl runs show"} <= {
        p.prog for p in parsers}
    for parser in parsers:
        formatter = HelpFormatter(parser.prog)
        one_of = {id(a) for g in parser._mutually_exclusive_groups if g.required
                  for a in g._group_actions}  # e.g. users --run / --run-file: one is required
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            name = "/".join(action.option_strings) or action.dest
            assert action.help and action.help.strip(), f"{parser.prog} {name} has no help text"
            if (not action.option_strings or action.required or id(action) in one_of
                    or isinstance(action, FLAGS)):
                continue
            shown = formatter._get_help_string(action) or ""
            assert "(default" in shown or "default:" in shown, f"{parser.prog} {name}: no default"


@pytest.mark.slow
def test_help_output_shows_the_defaults() -> None:
    demo = run_cli("demo", "--help").stdout.split("\noptions:\n", 1)[1]
    for option in ("--epsilon", "--delta", "--mechanism", "--episodes"):
        block = " ".join(demo.split(f"\n  {option} ", 1)[1].split("\n  --", 1)[0].split())
        assert "(default: " in block, (option, block)
    run = " ".join(run_cli("run", "--help").stdout.split())
    assert "garnet: number of states S (default: 10)" in run
    assert "number of seeds (replicas) (default: 5)" in run
    assert "(default: jdp)" in run  # a list default is shown as its values


@pytest.mark.slow
@pytest.mark.parametrize(("args", "pattern"), [
    (["runs", "create", "--epsilon", "1", "10"],
     r"unrecognized arguments: 10; a run has one .*`privrl run`.*privrl runs create --help"),
    (["run", "--bogus"], r"unrecognized arguments: --bogus .*`privrl run --help`"),
    (["run", "--mechanism", "gaussian", "--delta", "0"], r"^privrl: error: the Gaussian mechanism"
     r" needs 0 < delta < 1"),
    (["run", "--knob", "bonus_scale=-1"], r"bonus_scale"),
    (["runs", "show"], r"required: run"),
    ([], r"required: COMMAND"),
])
def test_errors_are_one_line_without_framework_prefixes(args: list[str], pattern: str) -> None:
    one_line_error(run_cli(*args), pattern)


def test_server_messages_have_no_pydantic_prefix(apps) -> None:
    client = apps()
    body = {**spec("jdp", mechanism="laplace"), "delta": 0.1}
    resp = client.post("/v1/runs", json=body, headers=AUTH)
    assert resp.status_code == 422
    detail = resp.json()["detail"]
    assert "pure epsilon-DP" in detail and "Value error" not in detail, detail


@pytest.mark.slow
def test_run_refuses_to_overwrite_results_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (out / "summary.json").write_text('{"results": []}')
    args = ["run", "--privacy", "none", "--episodes", "5", "--seeds", "1", "--quiet", "--out",
            str(out)]
    one_line_error(run_cli(*args), r"already holds summary\.json.*--force")
    assert (out / "summary.json").read_text() == '{"results": []}'
    done = run_cli(*args, "--force")
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "summary.json").read_text())["results"][0]["label"] == "non-private"
    assert "%random: " in done.stdout  # the column is explained under the table


@pytest.mark.slow
def test_demo_refuses_to_overwrite_results_unless_forced(tmp_path: Path) -> None:
    (tmp_path / "regret.png").write_bytes(b"old")
    one_line_error(run_cli("demo", "--out", str(tmp_path)), r"regret\.png.*--force")
    assert (tmp_path / "regret.png").read_bytes() == b"old"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    proc = start_server(tmp_path_factory.mktemp("explains"))
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def finished_jdp(server) -> str:
    """A JDP run (Gaussian, eps = 1, K = 30) played to the end."""
    run_id = create_run(server, config_for("jdp", "gaussian", episodes=30), seed=5)
    done = run_cli("users", "--server", server.url, "--run", run_id, "--seed", "2", "--quiet",
                   "--concurrency", "3")
    assert done.returncode == 0, done.stderr
    return run_id


@pytest.mark.slow
def test_users_on_a_finished_run_exit_nonzero_saying_so(server, finished_jdp: str) -> None:
    done = run_cli("users", "--server", server.url, "--run", finished_jdp, "--quiet")
    one_line_error(done, rf"run {finished_jdp} has already finished.*nothing to play")


@pytest.mark.slow
def test_evaluate_on_an_empty_run_exits_nonzero_saying_so(server) -> None:
    run_id = create_run(server, config_for("ldp", "gaussian", episodes=10))
    done = run_cli("evaluate", "--server", server.url, "--run", run_id)
    one_line_error(done, rf"run {run_id} has no reported episode yet: nothing to evaluate")


@pytest.mark.slow
def test_evaluate_puts_regret_beside_optimal_and_random(server, finished_jdp: str) -> None:
    done = run_cli("evaluate", "--server", server.url, "--run", finished_jdp, "--tail", "10")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "30 episodes served" in out
    rows = {ln[:24].strip(): ln[24:].split() for ln in out.splitlines()[2:5]}
    assert set(rows) == {"this run", "optimal policy", "uniformly random policy"}
    random_regret = optimal_return(MDP) - uniform_random_return(MDP)
    assert float(rows["uniformly random policy"][0]) == pytest.approx(random_regret, abs=1e-4)
    assert float(rows["uniformly random policy"][1]) == pytest.approx(30 * random_regret, abs=0.1)
    assert float(rows["optimal policy"][0]) == 0.0
    assert float(rows["optimal policy"][2]) == pytest.approx(optimal_return(MDP), abs=1e-4)
    this = float(rows["this run"][0])
    pct = re.search(r"the last 10 episodes are at ([\d.]+)% of random", out)
    assert pct and float(pct.group(1)) == pytest.approx(100 * this / random_regret, abs=0.1)


@pytest.mark.slow
def test_runs_show_is_readable_with_the_spend(server, finished_jdp: str) -> None:
    done = run_cli("runs", "show", finished_jdp, "--server", server.url)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith(f"run {finished_jdp}\n")
    assert "JDP" in out and "budget eps = 1, delta = 1e-05 per user" in out
    spent = re.search(r"spent\s+eps = ([\d.]+), delta = 1e-05 \(zCDP rho ([\d.e-]+)\)", out)
    assert spent and float(spent.group(1)) == pytest.approx(1.0, abs=1e-3)
    assert "30 of K = 30 reported" in out and "finished" in out
    assert re.search(r"created\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+ s ago\)", out)
    assert not re.search(r"\b1[6-9]\d{8}\.\d", out)  # no raw Unix timestamp
    assert json.loads(run_cli("runs", "show", finished_jdp, "--server", server.url,
                              "--json").stdout)["id"] == finished_jdp


@pytest.mark.slow
def test_ledger_lists_every_charge_with_the_running_total(server, finished_jdp: str) -> None:
    done = run_cli("ledger", finished_jdp, "--server", server.url)
    assert done.returncode == 0, done.stderr
    view = json.loads(run_cli("ledger", finished_jdp, "--server", server.url, "--json").stdout)
    rows = [ln.split() for ln in done.stdout.splitlines()
            if re.match(r"\s+\d+\s+\d+\s+(tree|matrix):", ln)]
    assert len(rows) == len(view["charges"]) > 0
    rho = 0.0
    for row, charge in zip(rows, view["charges"], strict=True):
        rho += charge["rho"]
        assert row[2] == charge["mechanism"] and int(row[1]) == charge["at"]
        assert float(row[5]) == pytest.approx(rho_to_epsilon(rho, 1e-5), rel=1e-3)
    assert float(rows[-1][5]) == pytest.approx(1.0, rel=1e-3)
    assert "spent so far: eps = 1" in done.stdout


@pytest.mark.slow
def test_ledger_of_a_non_private_run(server) -> None:
    run_id = create_run(server, config_for("none", episodes=5))
    done = run_cli("ledger", run_id, "--server", server.url)
    assert done.returncode == 0 and "a non-private run spends nothing" in done.stdout


@pytest.mark.slow
def test_ledger_of_an_unknown_run(server) -> None:
    one_line_error(run_cli("ledger", "no-such-run", "--server", server.url,
                           env={"PRIVRL_ADMIN_TOKEN": TOKEN}), "no-such-run")


@pytest.mark.slow
def test_users_play_every_run_of_the_file_with_a_seed_per_run(server, tmp_path: Path) -> None:
    """One `privrl users --run-file` plays every listed run side by side; the same --seed never
    gives two runs the same user noise (else subtracting their reports would cancel it)."""
    import numpy as np

    ids = [create_run(server, config_for("ldp", "gaussian", episodes=1), seed=9) for _ in "ab"]
    run_file = tmp_path / "runs"
    run_file.write_text("\n".join(ids) + "\n")
    done = run_cli("users", "--server", server.url, "--run-file", str(run_file), "--seed", "4",
                   "--quiet", "--progress-every", "0.01")
    assert done.returncode == 0, done.stderr
    assert all(f"run {i}: 1 episodes reported" in done.stdout for i in ids)
    from privrl.client.api import ServerAPI

    with ServerAPI(server.url) as api:
        boards = [np.asarray(api.billboard(i).arrays["sas"]) for i in ids]
    # the clean counts of one episode each differ by at most 1 an entry: were the noise the same
    # in both runs, it would cancel and leave |diff| <= 1 everywhere
    diff = boards[0] - boards[1]
    assert np.mean(np.abs(diff) > 1) > 0.9


@pytest.mark.parametrize("argv", [["users", "--run", ""], ["evaluate", "--run", ""],
                                  ["evaluate", "--run", "  "], ["runs", "show", ""],
                                  ["ledger", ""]])
def test_an_empty_run_id_is_a_usage_error(argv: list[str], capsys) -> None:
    """An empty --run (e.g. `RUN=$(...)` that printed nothing) is refused by the parser in one
    line, before any request: never a traceback nor a validation dump."""
    from privrl.client.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "expected a run id (e.g. 698c9e3002c39dea, printed by `privrl runs create`)" in err
    assert "Traceback" not in err and "validation error" not in err
