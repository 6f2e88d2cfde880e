"""The `privrl` command: end-to-end small runs and clear errors for bad arguments."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import numpy as np
import pytest
from privrl.client.cli import main


def privrl(*args: str) -> subprocess.CompletedProcess:
    """Run the real command in a subprocess (what a user types)."""
    return subprocess.run(
        [sys.executable, "-m", "privrl.client", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_run_sweep_writes_summary_and_plots(tmp_path):
    out = tmp_path / "res"
    rc = main(
        [
            "run",
            "--privacy",
            "none",
            "jdp",
            "ldp",
            "--epsilon",
            "1",
            "1000",
            "--mechanism",
            "gaussian",
            "--episodes",
            "120",
            "--seeds",
            "2",
            "--out",
            str(out),
            "--quiet",
            "--workers",
            "2",
        ]
    )
    assert rc == 0
    results = json.loads((out / "summary.json").read_text())["results"]
    labels = [r["label"] for r in results]
    assert labels == [
        "non-private",
        "jdp eps=1 gaussian",
        "jdp eps=1000 gaussian",
        "ldp eps=1 gaussian",
        "ldp eps=1000 gaussian",
    ]
    for r in results:
        per = np.asarray(r["regret"]["per_episode"])
        assert per.shape == (2, 120)
        assert r["regret"]["final_cumulative_mean"] == pytest.approx(per.sum(1).mean(), rel=1e-5)
    jdp = results[1]["ledger"]
    assert jdp["epsilon"] == pytest.approx(1.0, rel=1e-6)
    assert jdp["delta"] == 5e-4  # no --delta: the largest 1-2-5 value <= 1/(10 K), K = 120
    assert results[0]["ledger"]["epsilon"] == 0
    assert (out / "regret.png").stat().st_size > 10_000
    assert (out / "frontier.png").stat().st_size > 10_000
    assert main(["plot", str(out), "--out", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "frontier.png").exists()


def test_same_seed_same_numbers(tmp_path):
    args = [
        "run",
        "--privacy",
        "ldp",
        "--epsilon",
        "5",
        "--episodes",
        "60",
        "--seeds",
        "1",
        "--quiet",
        "--seed",
        "3",
    ]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    a = json.loads((tmp_path / "a" / "summary.json").read_text())["results"][0]
    b = json.loads((tmp_path / "b" / "summary.json").read_text())["results"][0]
    assert a["regret"]["per_episode"] == b["regret"]["per_episode"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--epsilon", "-1"], "epsilon must be > 0"),
        (["run", "--epsilon", "abc"], "epsilon must be a number"),
        (["run", "--episodes", "0"], "expected a number >= 1"),
        (["run", "--privacy", "maybe"], "invalid choice"),
        (["run", "--mechanism", "gaussian", "--delta", "0"], "needs 0 < delta < 1"),
        (["run", "--mechanism", "laplace", "--delta", "1e-5"], "pure epsilon-DP"),
        (["run", "--env", "nowhere.npz"], "nowhere.npz"),
        (["run", "--env", "mars"], "unknown world 'mars'"),
        (["plot", "/nonexistent/dir"], "no summary.json"),
    ],
)
def test_bad_arguments_give_one_clear_line(args, message, tmp_path):
    proc = privrl(*args, "--out", str(tmp_path)) if args[0] == "run" else privrl(*args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_bad_npz_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.npz"
    p = np.full((3, 2, 3), 0.3)  # rows sum to 0.9
    np.savez(bad, P=p, R=np.zeros((3, 2)), d1=np.array([1.0, 0, 0]))
    proc = privrl("run", "--env", str(bad), "--episodes", "5", "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert "sums to 0.9" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_run_on_a_world_without_regret_points_to_policy_eval(tmp_path):
    proc = privrl("run", "--algo", "dp-lsw", "--privacy", "jdp", "--episodes", "5", "--seeds",
                  "1", "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "privrl policy-eval" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_reader_that_leaves_early_gets_no_traceback() -> None:
    """`privrl algorithms | head -1`: the pipe closes under the command; it stops quietly."""
    proc = subprocess.Popen([sys.executable, "-m", "privrl.client", "algorithms"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader leaves before the command has written anything
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_a_broken_pipe_that_is_not_stdout_is_still_an_error(monkeypatch, capsys) -> None:
    """Only a closed standard output is quiet: any other broken pipe propagates."""
    from privrl.client import cli

    def broken(args) -> int:
        raise BrokenPipeError("a subprocess went away")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    monkeypatch.setattr(parser, "parse_known_args",
                        lambda argv: (argparse.Namespace(handler=broken), []))
    with pytest.raises(BrokenPipeError):
        main(["algorithms"])


def test_privrl_run_takes_knobs_only_through_knob() -> None:
    """No algorithm's knob has a flag of its own on `privrl run` (issue 41 part 5): one
    family's options on every run would be noise for the others."""
    import argparse

    from privrl import algorithms
    from privrl.client.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = {f for action in sub.choices["run"]._actions for f in action.option_strings}
    knob_flags = {"--" + name.replace("_", "-")
                  for algo in algorithms.names()
                  for name in algorithms.get(algo).knobs_model.model_fields}
    assert "--knob" in flags and knob_flags, "the test needs knobs to look for"
    assert not flags & knob_flags, sorted(flags & knob_flags)
