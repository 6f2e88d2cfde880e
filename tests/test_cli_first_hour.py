"""A new user's first hour (issue 30): the traps a first session fell into, each closed."""

from __future__ import annotations

import argparse
import json

import pytest
from privrl import algorithms
from privrl.client import remote_cli
from privrl.client.cli import build_parser, main
from privrl.client.cli_common import (
    CliError,
    policy_never_changed_notes,
    run_world,
    world_of_run,
    world_options,
)
from privrl.client.remote_cli import runs_list_row
from privrl.config import RunConfig
from privrl.lab.experiments import WorldSpec
from privrl.protocol import RunList
from privrl.server import __main__ as server_main
from privrl.worlds.model_spec import model_spec_of
from support.client import create_run, run_cli, start_server
from support.server import create, spec


def default_run(algo: str, **fields: object) -> RunConfig:
    """The run `privrl runs create --algo ALGO --privacy none` makes (its own world)."""
    mdp = WorldSpec(algorithms.get(algo).default_world).build()
    return RunConfig(**{"algo": algo, "n_states": mdp.S, "n_actions": mdp.A, "horizon": mdp.H,
                        "model": model_spec_of(mdp), "episodes": 10, "privacy": "none",
                        **fields})


def users_args(*options: str) -> argparse.Namespace:
    return build_parser().parse_args(["users", "--run", "x", *options])


@pytest.mark.parametrize("algo", algorithms.names())
def test_users_and_evaluate_play_the_runs_own_world_without_env(algo: str) -> None:
    run = default_run(algo)
    for command in ("users", "evaluate"):
        args = build_parser().parse_args([command, "--run", "x"])
        mdp = run_world(args, run)  # check_world passes: the run's (S, A, H) and model
        assert (mdp.S, mdp.A, mdp.H) == (run.n_states, run.n_actions, run.horizon)
        assert model_spec_of(mdp) == run.model
    assert world_of_run(run).name == algorithms.get(algo).default_world


def test_the_runs_horizon_and_model_parameters_carry_over() -> None:
    mdp = WorldSpec("lm-hard", 7, {"d": 3}).build()
    run = RunConfig(algo="ucrl-vtr", n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
                    model=model_spec_of(mdp), episodes=10, privacy="none")
    assert world_of_run(run) == WorldSpec("lm-hard", 7, {"d": 3})
    assert (run_world(users_args(), run).H, run_world(users_args(), run).A) == (7, 4)


def test_a_world_that_does_not_fit_the_run_names_the_one_to_pass() -> None:
    run = default_run("ucrl-vtr")
    with pytest.raises(CliError) as err:
        run_world(users_args("--env", "riverswim"), run)
    assert "`--env lm-hard --horizon 5`" in str(err.value), err.value
    assert world_options(WorldSpec("lm-hard", 5, {"d": 3})) == \
        "--env lm-hard --horizon 5 --world-param d=3"


@pytest.mark.parametrize("command", [("runs", "list"), ("runs", "show", "x"), ("ledger", "x"),
                                     ("evaluate", "--run", "x"), ("audit", "server")])
def test_a_server_error_is_one_line_from_any_command(command: tuple[str, ...], capsys) -> None:
    """The CLI's one place that explains a failed API call (no traceback, exit code 2)."""
    assert main([*command, "--server", "not a url"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("privrl: error: invalid server URL") and err.count("\n") == 1, err


def help_of(capsys: pytest.CaptureFixture[str], *command: str) -> str:
    """`privrl COMMAND --help` run in process, its text with lines joined."""
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_users_and_evaluate_help_say_the_default_is_the_runs_world(capsys) -> None:
    for command in ("users", "evaluate"):
        assert "the run's own world" in help_of(capsys, command)


@pytest.mark.slow
def test_users_and_evaluate_a_ucrl_vtr_run_without_world_options(tmp_path) -> None:
    server = start_server(tmp_path)
    try:
        run_id = create_run(server, default_run("ucrl-vtr", episodes=3))
        done = run_cli("users", "--server", server.url, "--run", run_id, "--quiet", timeout=120)
        assert done.returncode == 0, done.stderr
        done = run_cli("evaluate", "--server", server.url, "--run", run_id, timeout=120)
        assert done.returncode == 0 and "lm-hard" in done.stdout, (done.stdout, done.stderr)
        done = run_cli("users", "--server", server.url, "--run", run_id, "--env", "riverswim",
                       "--quiet", timeout=120)
        assert done.returncode == 2 and "--env lm-hard --horizon 5" in done.stderr, done.stderr
    finally:
        server.stop()


def test_an_unknown_knob_lists_the_valid_ones_with_the_presets_values(capsys, tmp_path) -> None:
    code = main(["run", "--algo", "lsvi-ucb-switching", "--knob", "swtich_ratio=3",
                 "--episodes", "5", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "swtich_ratio: unknown knob" in err, err
    assert "Extra inputs" not in err and "preset 'practical'" in err
    knobs = algorithms.get("lsvi-ucb-switching").presets["practical"].model_dump()
    for name, value in knobs.items():
        assert f"{name}={value!r}" in err


def test_runs_list_shows_no_mechanism_for_a_non_private_run(apps) -> None:
    client = apps()
    for privacy in ("none", "jdp"):
        create(client, spec(privacy, mechanism="laplace", epsilon=2.0, delta=0.0))
    runs = {r.config.privacy: r for r in RunList.model_validate(client.get("/v1/runs").json()).runs}
    assert runs_list_row(runs["none"]).split()[1:4] == ["none", "-", "-"]
    assert runs_list_row(runs["jdp"]).split()[1:4] == ["jdp", "2", "laplace"]


def test_serve_help_describes_the_server_the_admin_token_and_the_log_level(capsys) -> None:
    text = help_of(capsys, "serve")
    assert "PRIVRL_ADMIN_TOKEN" in text and "503" in text and "--log-level" in text, text


def test_serve_passes_its_log_level_to_the_server(monkeypatch, tmp_path) -> None:
    started: list[list[str]] = []
    monkeypatch.setattr(remote_cli.os, "chdir", lambda path: None)
    monkeypatch.setattr(remote_cli.os, "execve", lambda path, cmd, env: started.append(cmd))
    main(["serve", "--db", str(tmp_path / "db"), "--log-level", "warning"])
    (cmd,) = started
    assert cmd[cmd.index("--log-level") + 1] == "warning"
    assert server_main.build_parser().parse_args(cmd[cmd.index("privrl.server") + 1:]).log_level \
        == "warning"


def test_the_run_table_names_its_window_and_a_policy_that_never_changed(capsys, tmp_path) -> None:
    """300 episodes are averaged over their last 300, not 'last-1000'; LSVI-UCB with switching
    does not switch in 300 episodes here, and the table says so beside its % of random."""
    code = main(["run", "--algo", "lsvi-ucb-switching", "--episodes", "300", "--seeds", "2",
                 "--counter", "smoothed", "--quiet", "--out", str(tmp_path)])  # never switches
    out = capsys.readouterr().out
    assert code == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    (result,) = summary if isinstance(summary, list) else summary["results"]
    assert result["policy_changes"] == [0, 0]  # what the note must report
    assert "last-300/ep" in out and "last-1000" not in out, out
    assert "the policy never changed in any seed in 300 episodes" in out, out


def test_a_policy_that_changed_gets_no_note_and_http_runs_count_versions() -> None:
    base = {"label": "x", "config": {"episodes": 9}}
    assert policy_never_changed_notes([{**base, "policy_changes": [3, 1]}]) == []
    assert "in 1 of 2 seeds" in policy_never_changed_notes(
        [{**base, "policy_changes": [3, 0]}])[0]
    assert policy_never_changed_notes([{**base, "policy_versions": 4}]) == []
    assert "never changed in 9 episodes" in policy_never_changed_notes(
        [{**base, "policy_versions": 1}])[0]


@pytest.mark.slow
def test_users_with_progress_every_print_lines_and_no_bar(tmp_path) -> None:
    server = start_server(tmp_path)
    try:
        run_id = create_run(server, default_run("dp-ucbvi", episodes=400))
        done = run_cli("users", "--server", server.url, "--run", run_id, "--concurrency", "1",
                       "--progress-every", "0.2", timeout=120)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.replace("\r", "\n").splitlines() if line.strip()]
    assert any("episodes played by this process" in line for line in lines), done.stderr
    assert not any("ep/s" in line or "%|" in line or "it/s" in line for line in lines), lines
