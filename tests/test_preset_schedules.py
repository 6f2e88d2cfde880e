"""Presets' release schedules and counters: faithful releases every episode from the binary tree
(the papers'), practical on the algorithm's measured schedule and counter (JDP only); an explicit
choice wins; a server stores and shows the schedule and counter a run uses, and serves the
numbers of the in-process run."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from privrl.algorithms import bind, effective, get
from privrl.budget import release_plan
from privrl.config import RunConfig
from privrl.privacy.schedules import parse_schedule
from privrl.protocol import RunInfo, RunRequest
from privrl.run import Run, user_episode
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of
from support.server import AUTH, Apps, create, play, state

K = 120
# The practical schedules and counters measured in docs/results/linear.md, docs/results/lsvi.md
# and docs/results/frontier.md (the counters on tuning seeds).
MEASURED = {"ucrl-vtr": "geometric:1.1", "linopt-vi": "batch:10", "linopt-po": "batch:10",
            "lsvi-ucb-switching": "batch:50", "lsvi-ucb-batched": "every",
            "dp-ucbvi": "geometric:1.1"}
MATRIX = ("matrix", 256)
COUNTERS = {"ucrl-vtr": MATRIX, "linopt-vi": MATRIX, "linopt-po": MATRIX,
            "lsvi-ucb-switching": MATRIX, "lsvi-ucb-batched": MATRIX, "dp-ucbvi": MATRIX}
LINEAR = ("ucrl-vtr", "linopt-vi", "linopt-po", "lsvi-ucb-switching")


def config(algo: str, preset: str = "practical", privacy: str = "jdp", episodes: int = K,
           **kw: Any) -> RunConfig:
    """A run of `algo` on its default world (Gaussian, eps = 10)."""
    world = make(get(algo).default_world)
    return RunConfig(algo=algo, n_states=world.S, n_actions=world.A, horizon=world.H,
                     model=model_spec_of(world), episodes=episodes, privacy=privacy,
                     epsilon=10.0, delta=1e-5 if privacy != "none" else 0.0,
                     mechanism="gaussian", preset=preset, **kw)


@pytest.mark.parametrize("algo", sorted(MEASURED))
def test_each_algorithm_declares_its_practical_schedule(algo: str) -> None:
    assert get(algo).practical_schedule == MEASURED[algo]
    assert bind(config(algo)).config.schedule == MEASURED[algo]
    assert bind(config(algo, "faithful")).config.schedule == "every"


@pytest.mark.parametrize("algo", sorted(COUNTERS))
def test_each_algorithm_declares_its_practical_counter(algo: str) -> None:
    """Gaussian integer noise takes the measured counter; Laplace or float noise, where the
    matrix counter cannot run, the smoothed tree; faithful the binary tree; an explicit
    counter wins."""
    assert get(algo).practical_counter == COUNTERS[algo]
    used = bind(config(algo)).config
    assert (used.counter, used.counter_bands) == COUNTERS[algo]
    assert bind(config(algo, "faithful")).config.counter == "tree"
    laplace = config(algo).model_copy(update={"mechanism": "laplace", "delta": 0.0})
    for other_noise in (config(algo, noise="float"), laplace):  # not every algorithm runs both
        assert get(algo).preset_counter(other_noise) == ("smoothed", None)
    assert bind(config(algo, counter="tree")).config.counter == "tree"
    for privacy in get(algo).boundaries():
        if privacy != "jdp":
            assert bind(config(algo, privacy=privacy)).config.counter == "smoothed"


@pytest.mark.parametrize("algo", LINEAR)
def test_practical_releases_on_its_schedule_and_faithful_every_episode(algo: str) -> None:
    schedule = MEASURED[algo]
    practical = release_plan(config(algo))
    assert practical == release_plan(config(algo, schedule=schedule))
    assert practical != release_plan(config(algo, schedule="every"))
    assert release_plan(config(algo, "faithful")) == release_plan(
        config(algo, "faithful", schedule="every"))
    due = set(parse_schedule(schedule).release_episodes(K))
    assert {c.at for c in practical if c.at} <= due  # linear mixtures charge at releases


@pytest.mark.parametrize(("counter", "charged"), (({"counter": "smoothed"}, [10, 20, 40]),
                                                  ({}, [10, 20, 30, 40])))
def test_the_ledger_of_a_practical_run_charges_at_its_batches_only(counter: dict[str, str],
                                                                    charged: list[int]) -> None:
    """Over floor(K/B) items, charged at releases only: the tree's levels as they open (episodes
    B, 2B, 4B, ...), the preset's matrix counter's columns at every release."""
    algo = "linopt-vi"
    run = Run(config(algo, episodes=40, **counter), [0])
    assert run.config.schedule == "batch:10"
    world = make(get(algo).default_world)
    for k in range(40):
        run.play_and_ingest(world, [11], k)
    at = sorted({c.at for c in run.ledger.entries})
    assert at == charged
    faithful = Run(config(algo, "faithful", episodes=40), [0])
    for k in range(40):
        faithful.play_and_ingest(world, [11], k)
    assert sorted({c.at for c in faithful.ledger.entries}) == [1, 2, 4, 8, 16, 32]


@pytest.mark.parametrize("algo", LINEAR)
def test_an_explicit_schedule_wins(algo: str) -> None:
    for schedule in ("every", "batch:4", "geometric:1.5"):
        for preset in ("faithful", "practical"):
            assert bind(config(algo, preset, schedule=schedule)).config.schedule == schedule


@pytest.mark.parametrize("algo", ("ucrl-vtr", "linopt-vi", "linopt-po"))
@pytest.mark.parametrize("privacy", ("ldp", "none"))
def test_ldp_and_non_private_runs_never_get_a_schedule(algo: str, privacy: str) -> None:
    assert bind(config(algo, privacy=privacy)).config.schedule == "every"
    assert bind(config(algo, privacy=privacy, schedule="every")).config.schedule == "every"
    batched = config(algo, privacy=privacy, schedule="batch:10")  # plain data: RunConfig takes it
    with pytest.raises(ValueError, match=f"with privacy '{privacy}' leave schedule at 'every'"):
        bind(batched)  # where a run is made


def test_a_preset_schedule_that_would_not_release_before_the_last_episode_is_dropped() -> None:
    """K <= B: batch:B would never let the learner plan from a release; the run releases every
    episode instead (an explicit schedule is the user's, kept)."""
    assert bind(config("linopt-vi", episodes=10)).config.schedule == "every"
    assert bind(config("linopt-vi", episodes=11)).config.schedule == "batch:10"
    assert bind(config("lsvi-ucb-switching", episodes=50)).config.schedule == "every"
    assert bind(config("linopt-vi", episodes=10, schedule="batch:5")).config.schedule == "batch:5"


def test_an_unbound_config_leaves_the_schedule_to_the_preset() -> None:
    raw = config("linopt-vi")
    assert raw.schedule is None and raw.counter is None
    assert effective(raw) == raw.model_copy(update={"schedule": "batch:10", "counter": "matrix",
                                                    "counter_bands": 256})
    assert effective(effective(raw)) == effective(raw)


# -- over HTTP -------------------------------------------------------------------------------


def body(cfg: RunConfig, seed: int = 3) -> dict[str, Any]:
    """The POST /v1/runs body of `cfg` (schedule omitted when the preset's)."""
    return RunRequest(**cfg.model_dump(), seed=seed).model_dump(mode="json", exclude_none=True)


def test_a_server_stores_and_shows_the_schedule_its_run_uses(apps: Apps) -> None:
    client: TestClient = apps()
    sent = body(config("ucrl-vtr", episodes=30))
    assert "schedule" not in sent
    run_id = create(client, sent)
    shown = RunInfo.model_validate(client.get(f"/v1/runs/{run_id}").json()).config
    assert shown.schedule == MEASURED["ucrl-vtr"]
    assert shown == effective(config("ucrl-vtr", episodes=30))
    client = apps.reopen(client)  # rebuilt from the stored config
    assert RunInfo.model_validate(client.get(f"/v1/runs/{run_id}").json()).config == shown
    explicit = create(client, body(config("ucrl-vtr", episodes=30, schedule="every")))
    got = RunInfo.model_validate(client.get(f"/v1/runs/{explicit}").json()).config
    assert got.schedule == "every"
    ldp = create(client, body(config("ucrl-vtr", privacy="ldp", episodes=30)))
    assert RunInfo.model_validate(client.get(f"/v1/runs/{ldp}").json()).config.schedule == "every"
    resp = client.post("/v1/runs", headers=AUTH,
                       json={**body(config("ucrl-vtr", privacy="ldp")), "schedule": "batch:10"})
    refused = resp.json()
    assert resp.status_code == 422 and refused["code"] == "invalid_run"  # beyond the schema
    assert "leave schedule at 'every'" in refused["detail"] and "\n" not in refused["detail"]
    for privacy in ("ldp", "none"):  # a matrix counter would do nothing outside JDP either
        resp = client.post("/v1/runs", headers=AUTH, json={
            **body(config("ucrl-vtr", privacy=privacy)),
            "counter": "matrix"})
        assert resp.status_code == 422 and resp.json()["code"] == "invalid_run", resp.text
        assert "leave counter at its default" in resp.json()["detail"]


def test_a_server_stores_and_shows_the_counter_its_run_uses(apps: Apps) -> None:
    client: TestClient = apps()
    sent = body(config("linopt-vi", episodes=30))
    assert "counter" not in sent and "counter_bands" not in sent
    run_id = create(client, sent)
    shown = RunInfo.model_validate(client.get(f"/v1/runs/{run_id}").json()).config
    assert (shown.counter, shown.counter_bands) == MATRIX
    client = apps.reopen(client)  # rebuilt from the stored config
    assert RunInfo.model_validate(client.get(f"/v1/runs/{run_id}").json()).config == shown
    smoothed = create(client, body(config("linopt-vi", episodes=30, counter="smoothed")))
    got = RunInfo.model_validate(client.get(f"/v1/runs/{smoothed}").json()).config
    assert (got.counter, got.counter_bands) == ("smoothed", None)


def test_an_http_run_on_the_preset_schedule_gives_the_in_process_numbers(apps: Apps) -> None:
    client: TestClient = apps()
    hard = make("lm-hard")
    cfg = config("ucrl-vtr", episodes=30)
    sent = body(cfg)
    run_id = create(client, sent)
    play(client, run_id, sent, 30, hard)
    served = state(client, run_id)

    run = Run(cfg, [3])
    for k in range(30):
        message = run.message()
        traj, _ = user_episode(hard, message, [11], k, run.algorithm, run.calibration)
        run.ingest_trajectories(traj, message)
    releases = list(parse_schedule(MEASURED["ucrl-vtr"]).release_episodes(30))
    assert sorted({c["at"] for c in served["ledger"]["charges"]}) == releases  # the matrix's
    assert len(served["ledger"]["charges"]) == len(run.ledger.entries)
    assert served["ledger"]["rho"] == pytest.approx(run.ledger.totals(1e-5).rho, rel=1e-12)
    for name, arr in run.billboard().items():
        np.testing.assert_allclose(np.asarray(served["billboard"]["arrays"][name]),
                                   arr[0].ravel(), rtol=0, atol=1e-9)


def test_privrl_algorithms_lists_each_practical_schedule(capsys: pytest.CaptureFixture) -> None:
    from privrl.client.cli import main

    assert main(["algorithms"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for algo, schedule in MEASURED.items():
        at = next(i for i, line in enumerate(lines) if line.startswith(algo + " "))
        block = lines[at + 1:at + 4]
        kind, bands = COUNTERS[algo]
        counter = f"{kind} ({bands} bands)" if bands else kind
        assert (f"JDP release: faithful every episode, tree; practical {schedule}, {counter}"
                in "\n".join(block)), block
