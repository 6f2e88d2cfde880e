"""A store that went backwards is not served: the high-water mark, held runs, an admin's
continue (a new noise epoch, charged) or stop; and it fails closed: a store holding runs whose
mark is lost (deleted, empty, unreadable, another database's) is held too. In-process apps; the
mark file is edited to stand for a store that lost what was published (the real drill is in
test_server_process_rollback.py)."""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from privrl.privacy.accountant import epsilon_to_rho, rho_to_epsilon
from privrl.privacy.tree import TreeCounter
from privrl.server.app import create_app
from privrl.server.ops.highwater import HighWater, Mark
from privrl.server.settings import Settings
from privrl.server.store import Store
from support.server import (
    ADMIN,
    AUTH,
    MARK_DAMAGE,
    Apps,
    claim,
    create,
    damage_marks,
    play,
    public,
    spec,
    state,
    user_report,
    world,
)


def marks(db: Path) -> dict[str, dict]:
    """The high-water marks beside the database, as the files hold them."""
    return {k: asdict(v) for k, v in HighWater.beside(db).marks.items()}


def set_mark(db: Path, run_id: str, mark: Mark) -> None:
    """Write one run's mark (what a server that published it would have written)."""
    highwater = HighWater.beside(db)
    highwater.set(run_id, mark)
    highwater.close()


def publish_more(db: Path, run_id: str, reported: int) -> None:
    """Pretend the server had published `reported` reports that the store no longer holds."""
    set_mark(db, run_id, replace(HighWater.beside(db).marks[run_id], reported=reported))


def open_app(apps: Apps) -> TestClient:
    """An app on the test database, once its runs are rebuilt (held ones included)."""
    client = TestClient(create_app(Settings(admin_token=ADMIN, db=apps.db)))
    client.__enter__()
    apps.opened.append(client)
    deadline = time.monotonic() + 10
    while "rebuilding" in client.get("/readyz").json()["detail"]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return client


def asdict_mark(mark: Mark) -> dict:
    """A mark as the file holds it."""
    return {"epoch": mark.epoch, "reported": mark.reported, "stopped": mark.stopped,
            "deleted": mark.deleted}


def recover(client: TestClient, run_id: str, action: str):
    """POST the admin's choice."""
    return client.post(f"/v1/runs/{run_id}/recovery", json={"action": action}, headers=AUTH)


def test_each_commit_raises_the_mark(apps: Apps) -> None:
    client = apps()
    config = spec(episodes=10)
    run_id = create(client, config)
    play(client, run_id, config, 3)
    assert marks(apps.db)[run_id] == asdict_mark(Mark(0, 3))
    apps.reopen(client)  # a store that is not behind is served at once


def test_a_store_behind_its_mark_is_held_until_an_admin_stops_the_run(apps: Apps) -> None:
    client = apps()
    config = spec(episodes=10)
    run_id, other = create(client, config), create(client, config)
    play(client, run_id, config, 3)
    before = state(client, run_id)
    apps.close(client)
    publish_more(apps.db, run_id, 7)

    client = open_app(apps)
    ready = client.get("/readyz")
    assert ready.status_code == 503 and run_id in ready.json()["detail"]
    assert "7 reports" in ready.json()["detail"]
    for path in ("", "/billboard", "/ledger", "/policies"):
        resp = client.get(f"/v1/runs/{run_id}{path}")
        assert resp.status_code == 503 and resp.json()["code"] == "rolled_back", resp.text
    assert client.post(f"/v1/runs/{run_id}/claims").status_code == 503
    assert client.get(f"/v1/runs/{other}").status_code == 200  # other runs are served
    assert client.post(f"/v1/runs/{run_id}/recovery", json={"action": "stop"}).status_code == 401
    assert recover(client, other, "stop").json()["code"] == "not_held"

    # 3 counted users were in nodes published up to 7: a fresh tree would exceed epsilon = 1
    refused = recover(client, run_id, "continue")
    assert refused.status_code == 409 and refused.json()["code"] == "budget", refused.text
    assert "stop it" in refused.json()["detail"]
    assert client.get("/readyz").status_code == 503  # still held

    stopped = recover(client, run_id, "stop")
    assert stopped.status_code == 200 and stopped.json()["status"]["finished"] is True
    assert client.get("/readyz").status_code == 200
    after = state(client, run_id)
    assert after["billboard"] == before["billboard"] and after["ledger"] == before["ledger"]
    resp = client.post(f"/v1/runs/{run_id}/claims")
    assert resp.status_code == 410 and resp.json()["code"] == "stopped"

    client = apps.reopen(client)  # stopped for good, and no longer behind
    assert client.post(f"/v1/runs/{run_id}/claims").json()["code"] == "stopped"
    assert state(client, run_id)["billboard"] == before["billboard"]


def test_continue_starts_a_charged_noise_epoch_that_replays(apps: Apps) -> None:
    client = apps()
    config = spec(episodes=12, counter="smoothed", schedule="every")
    run_id = create(client, config)
    play(client, run_id, config, 2)
    apps.close(client)
    # a store that lost everything: 0 reports (the mark says 5 were published)
    with sqlite3.connect(apps.db) as db:
        db.execute("DELETE FROM reports WHERE run_id = ?", (run_id,))
        db.execute("DELETE FROM claims WHERE run_id = ?", (run_id,))
        db.execute("DELETE FROM policies WHERE run_id = ? AND version > 1", (run_id,))
    publish_more(apps.db, run_id, 5)

    client = open_app(apps)
    assert client.get("/readyz").status_code == 503
    resp = recover(client, run_id, "continue")
    assert resp.status_code == 200, resp.text
    assert marks(apps.db)[run_id] == asdict_mark(Mark(1, 0))
    ledger = client.get(f"/v1/runs/{run_id}/ledger").json()
    notes = [c["note"] for c in ledger["charges"]]
    assert any("noise epoch 1" in n for n in notes), notes
    assert ledger["epsilon"] == pytest.approx(1.0)  # one fresh tree: the whole budget
    play(client, run_id, config, 12)
    done = state(client, run_id)
    assert done["status"]["finished"] and done["ledger"]["epsilon"] == pytest.approx(1.0)
    assert marks(apps.db)[run_id] == asdict_mark(Mark(1, 12))

    client = apps.reopen(client)  # the replay starts the epoch at the same count
    assert state(client, run_id) == done


def test_a_run_the_store_lost_is_held_and_can_be_forgotten(apps: Apps) -> None:
    client = apps()
    apps.close(client)
    set_mark(apps.db, "feedbeefcafe0001", Mark(0, 4))
    client = open_app(apps)
    assert "feedbeefcafe0001" in client.get("/readyz").json()["detail"]
    assert recover(client, "feedbeefcafe0001", "continue").json()["code"] == "gone"
    resp = recover(client, "feedbeefcafe0001", "stop")
    assert resp.status_code == 200 and resp.json() is None
    assert client.get("/readyz").status_code == 200
    assert client.get("/v1/runs/feedbeefcafe0001").status_code == 404


def test_a_held_run_can_be_deleted(apps: Apps) -> None:
    client = apps()
    config = spec(episodes=10)
    run_id = create(client, config)
    play(client, run_id, config, 2)
    apps.close(client)
    publish_more(apps.db, run_id, 4)
    client = open_app(apps)
    assert client.delete(f"/v1/runs/{run_id}", headers=AUTH).status_code == 204
    assert client.get("/readyz").status_code == 200
    assert marks(apps.db)[run_id]["deleted"] is True
    client = apps.reopen(client)
    assert client.get(f"/v1/runs/{run_id}").status_code == 404


def test_a_torn_mark_falls_back_to_the_older_copy_and_a_lost_one_says_how(
    tmp_path: Path,
) -> None:
    db = tmp_path / "x.db"
    highwater = HighWater.beside(db, "store-a")
    assert highwater.state == "missing"  # a new database: no file yet
    highwater.set("a", Mark(0, 5))
    highwater.set("a", Mark(0, 6))
    highwater.close()
    newer = highwater.paths[highwater.seq % 2]
    newer.write_bytes(newer.read_bytes()[:-7])  # a write cut short by a crash
    older = HighWater.beside(db, "store-a")
    assert older.state == "ok" and older.marks == {"a": Mark(0, 5)}
    foreign = HighWater.beside(db, "store-b")
    assert foreign.state == "foreign" and foreign.marks == {}
    assert "store store-a, this one is store-b" in foreign.lost()
    for path in highwater.paths:
        path.write_text("{not json")
    unreadable = HighWater.beside(db, "store-a")
    assert unreadable.state == "unreadable" and unreadable.marks == {}
    assert "valid checksum" in unreadable.lost()
    for path in highwater.paths:
        path.write_bytes(b"")
    assert HighWater.beside(db, "store-a").state == "missing"


def refused_everywhere(client: TestClient, run_id: str, code: str) -> None:
    """Every route of a held run answers 503 with `code`, nothing of it is listed or claimed,
    and /readyz names it: not one billboard is published."""
    ready = client.get("/readyz")
    assert ready.status_code == 503 and run_id in ready.json()["detail"], ready.text
    for path in ("", "/billboard", "/ledger", "/policies", "/policy", "/regret?world=riverswim"):
        resp = client.get(f"/v1/runs/{run_id}{path}")
        assert resp.status_code == 503 and resp.json()["code"] == code, (path, resp.text)
    assert client.post(f"/v1/runs/{run_id}/claims").json()["code"] == code
    assert run_id not in {r["id"] for r in client.get("/v1/runs").json()["runs"]}


# one case per HighWater.state in the fast tier; the others (same states, other damage) slow:
# the file-level unit test above reads each kind of damage cheaply
@pytest.mark.parametrize("how", [
    pytest.param(how, marks=[pytest.mark.slow] if how in ("truncated", "bad_checksum") else [])
    for how in sorted(MARK_DAMAGE)])
def test_a_lost_mark_holds_every_run_the_store_holds(apps: Apps, how: str) -> None:
    client = apps()
    config = spec(episodes=10)
    run_id, idle = create(client, config), create(client, config)  # idle: 0 reports
    play(client, run_id, config, 3)
    before = state(client, run_id)
    apps.close(client)
    damage_marks(apps.db, how)

    client = open_app(apps)
    for held in (run_id, idle):
        refused_everywhere(client, held, MARK_DAMAGE[how])
    assert "high-water mark is lost" in client.get("/readyz").json()["detail"]
    fresh = create(client, config)  # other runs are created and served meanwhile
    assert client.get(f"/v1/runs/{fresh}").status_code == 200

    # nothing says how many were published: epoch 0 is charged to its end, over the budget
    refused = recover(client, run_id, "continue")
    assert refused.status_code == 409 and refused.json()["code"] == "budget", refused.text
    assert "its mark is lost" in refused.json()["detail"]
    assert recover(client, run_id, "stop").status_code == 200
    assert recover(client, idle, "continue").status_code == 200  # 0 reports: in budget
    assert client.get("/readyz").status_code == 200
    assert state(client, run_id)["billboard"] == before["billboard"]  # as published

    client = apps.reopen(client)  # the marks are written again, for this store
    assert marks(apps.db)[run_id] == asdict_mark(Mark(0, 3, stopped=True))
    assert marks(apps.db)[idle] == asdict_mark(Mark(1, 0))
    assert HighWater.beside(apps.db).store == Store(apps.db).identity


def test_a_new_database_starts_and_each_run_has_a_mark_from_its_creation(apps: Apps) -> None:
    client = apps()  # ready at once: no run, no mark file
    assert not any(p.exists() for p in HighWater.beside(apps.db).paths)
    run_id = create(client, spec(episodes=10))
    assert marks(apps.db) == {run_id: asdict_mark(Mark())}
    apps.close(client)
    set_mark(apps.db, "feedbeefcafe0002", Mark())  # a creation the store never committed
    client = open_app(apps)
    assert client.get("/readyz").status_code == 200, client.get("/readyz").text
    assert client.get(f"/v1/runs/{run_id}").status_code == 200


def test_a_store_with_only_a_newer_run_than_its_mark_holds_that_run(apps: Apps) -> None:
    client = apps()
    config = spec(episodes=10)
    kept = create(client, config)
    apps.close(client)
    saved = [p.read_bytes() for p in HighWater.beside(apps.db).paths]
    client = apps()
    lost = create(client, config)
    play(client, lost, config, 2)
    apps.close(client)
    for path, data in zip(HighWater.beside(apps.db).paths, saved, strict=True):
        path.write_bytes(data)  # the mark as it was before `lost` existed

    client = open_app(apps)
    refused_everywhere(client, lost, "mark_missing")
    assert "hold no mark of it" in client.get(f"/v1/runs/{lost}").json()["detail"]
    assert client.get(f"/v1/runs/{kept}").status_code == 200


def test_a_lost_mark_charges_the_stores_epoch_to_its_end(apps: Apps) -> None:
    config = epoch_spec("tree-batch5")
    client = apps()
    run_id = create(client, config)
    play(client, run_id, config, 3)  # nothing released before episode 5
    apps.close(client)
    damage_marks(apps.db, "deleted")
    client = open_app(apps)
    # with its mark (4 published: still no release) it continues in budget (test above);
    # without, every release of epoch 0 may have been published: twice the counter
    total = refused_epsilon(recover(client, run_id, "continue"))
    assert total == pytest.approx(rho_to_epsilon(2 * RHO_BUDGET, 1e-6), rel=1e-5)


def test_continue_after_a_lost_mark_serves_under_a_new_noise_epoch(apps: Apps) -> None:
    config = spec(episodes=12, counter="smoothed", schedule="every")
    client = apps()
    run_id = create(client, config)
    lost = [report_one(client, run_id, config) for _ in range(3)]
    apps.close(client)
    with sqlite3.connect(apps.db) as db:  # the store lost every report, and the mark is gone
        db.execute("DELETE FROM reports WHERE run_id = ?", (run_id,))
        db.execute("DELETE FROM claims WHERE run_id = ?", (run_id,))
        db.execute("DELETE FROM policies WHERE run_id = ? AND version > 1", (run_id,))
    damage_marks(apps.db, "truncated")

    client = open_app(apps)
    refused_everywhere(client, run_id, "mark_missing")
    assert recover(client, run_id, "continue").status_code == 200
    ledger = client.get(f"/v1/runs/{run_id}/ledger").json()
    assert any("noise epoch 1" in c["note"] for c in ledger["charges"])
    assert ledger["epsilon"] == pytest.approx(1.0)  # one fresh tree: the whole budget
    again = [report_one(client, run_id, config) for _ in range(3)]
    for (_, first), (_, second) in zip(lost, again, strict=True):  # same counts, fresh noise
        assert second["reported"] == first["reported"]
        assert second["arrays"] != first["arrays"]
    assert marks(apps.db)[run_id] == asdict_mark(Mark(1, 3))
    done = state(client, run_id)
    client = apps.reopen(client)  # served from now on, the epoch replayed
    assert state(client, run_id) == done


def test_a_noise_epoch_draws_independent_nodes_and_epoch_0_is_unchanged() -> None:
    from privrl.privacy.mechanisms import Laplace

    def tree() -> TreeCounter:
        return TreeCounter((3,), Laplace(1.0), [7], "n", 16)

    plain, same, fresh = tree(), tree(), tree()
    same.noise_epoch = 0
    fresh.noise_epoch = 1
    a, b, c = (t.node_noise(2, 3) for t in (plain, same, fresh))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    assert plain._stream_path(2) == ("tree", "n", 2)


# Noise epochs on every counter and schedule. `weights`: each release's charge in node costs,
# by hand (tree: 1 at releases 2^j; matrix, 4 bands: (round(2^16 c_k) / 2^16)^2, c = 1, 1/2,
# 3/8, 5/16, then 0); `first`: the first release episode; `refused`: (store's reports,
# published reports, releases among the published).
EPOCH_CASES = {
    "tree-batch5": (dict(counter="tree", schedule="batch:5", episodes=20),
                    [1.0, 1.0, 0.0, 1.0], 5, (4, 12, 2)),
    "matrix": (dict(counter="matrix", counter_bands=4, episodes=12),  # geometric:1.1: every
               [1.0, 0.25, 0.140625, 0.09765625] + [0.0] * 8, 1, (2, 3, 3)),
    "matrix-batch3": (dict(counter="matrix", counter_bands=4, schedule="batch:3", episodes=12),
                      [1.0, 0.25, 0.140625, 0.09765625], 3, (4, 10, 3)),
}
RHO_BUDGET = epsilon_to_rho(1.0, 1e-6)  # discrete Gaussian: the run spends all of it


def epoch_spec(case: str) -> dict:
    """A Gaussian, integer-noise run of `case`, calibrated to epsilon = 1."""
    return spec(mechanism="gaussian", delta=1e-6, noise="numpy", **EPOCH_CASES[case][0])


def report_one(client: TestClient, run_id: str, config: dict) -> tuple[dict, dict]:
    """One honest user's report (its trajectory) and the billboard after it."""
    ticket = claim(client, run_id)
    body = user_report(ticket, config, world(config))
    assert client.post(f"/v1/runs/{run_id}/reports", json=body).status_code == 200
    trajectory = {k: body[k] for k in ("states", "actions", "rewards")}
    return trajectory, client.get(f"/v1/runs/{run_id}/billboard").json()


def refused_epsilon(resp) -> float:
    """The total epsilon a budget refusal names."""
    assert resp.status_code == 409 and resp.json()["code"] == "budget", resp.text
    return float(re.search(r"epsilon = ([0-9.e+-]+),", resp.json()["detail"]).group(1))


@pytest.mark.parametrize("case", sorted(EPOCH_CASES))
def test_continue_redraws_sparse_and_matrix_counters(apps: Apps, case: str) -> None:
    config, weights = epoch_spec(case), EPOCH_CASES[case][1]
    first = EPOCH_CASES[case][2]
    client = apps()
    run_id = create(client, config)
    lost = [report_one(client, run_id, config) for _ in range(first + 1)]
    apps.close(client)
    with sqlite3.connect(apps.db) as db:  # the store lost every report: none counted
        db.execute("DELETE FROM reports WHERE run_id = ?", (run_id,))
        db.execute("DELETE FROM claims WHERE run_id = ?", (run_id,))
        db.execute("DELETE FROM policies WHERE run_id = ? AND version > 1", (run_id,))
    publish_more(apps.db, run_id, first + 1)

    client = open_app(apps)
    assert recover(client, run_id, "continue").status_code == 200
    ledger = client.get(f"/v1/runs/{run_id}/ledger").json()
    epoch = [c for c in ledger["charges"] if "noise epoch 1" in c["note"]]
    assert len(epoch) == 2 * sum(w > 0 for w in weights)  # 2 families, every weighted release
    assert ledger["rho"] == pytest.approx(RHO_BUDGET, rel=1e-9)  # the whole counter again
    assert ledger["epsilon"] <= 1.0 + 1e-9
    again = [report_one(client, run_id, config) for _ in range(first + 1)]
    # the same users up to the first release, so only the noise can tell them apart
    assert [t for t, _ in again[:first]] == [t for t, _ in lost[:first]]
    assert again[first - 1][1]["reported"] == first
    assert again[first - 1][1]["arrays"] != lost[first - 1][1]["arrays"]  # fresh noise
    assert all(b["arrays"] == lost[0][1]["arrays"] for _, b in again[:first - 1])
    play(client, run_id, config, config["episodes"] - first - 1)
    done = state(client, run_id)
    assert done["status"]["finished"] and done["ledger"]["rho"] == ledger["rho"]

    client = apps.reopen(client)  # the replay starts the epoch at the same count
    assert state(client, run_id) == done
    apps.close(client)
    publish_more(apps.db, run_id, config["episodes"] + 1)  # lost again, in epoch 1
    client = open_app(apps)
    total = refused_epsilon(recover(client, run_id, "continue"))  # a second whole counter
    assert total == pytest.approx(rho_to_epsilon(2 * RHO_BUDGET, 1e-6), rel=1e-5)


@pytest.mark.parametrize("case", sorted(EPOCH_CASES))
def test_continuing_charges_the_lost_releases_counted_in_counter_items(apps: Apps,
                                                                       case: str) -> None:
    config, weights = epoch_spec(case), EPOCH_CASES[case][1]
    kept, published, releases = EPOCH_CASES[case][3]
    client = apps()
    run_id = create(client, config)
    play(client, run_id, config, kept)
    apps.close(client)
    publish_more(apps.db, run_id, published)
    client = open_app(apps)
    # the store's and the lost epoch-0 releases up to the published ones, then a whole counter
    spent = sum(weights[:releases]) / sum(weights)
    total = refused_epsilon(recover(client, run_id, "continue"))
    assert total == pytest.approx(rho_to_epsilon((1 + spent) * RHO_BUDGET, 1e-6), rel=1e-5)
    assert client.get("/readyz").status_code == 503  # still held


def test_a_sparse_run_whose_lost_reports_released_nothing_continues_in_budget(
        apps: Apps) -> None:
    config = epoch_spec("tree-batch5")
    client = apps()
    run_id = create(client, config)
    play(client, run_id, config, 3)  # pending: nothing released before episode 5
    apps.close(client)
    publish_more(apps.db, run_id, 4)
    client = open_app(apps)
    assert recover(client, run_id, "continue").status_code == 200
    assert client.get(f"/v1/runs/{run_id}/ledger").json()["rho"] == pytest.approx(RHO_BUDGET)
    play(client, run_id, config, 17)
    done = state(client, run_id)
    assert done["status"]["finished"] and done["ledger"]["epsilon"] <= 1.0 + 1e-9
    client = apps.reopen(client)
    assert state(client, run_id) == done


def test_a_jdp_run_drawing_noise_outside_the_counters_cannot_continue(apps: Apps) -> None:
    from privrl.worlds import make
    from privrl.worlds.model_spec import model_spec_of

    cube = make("lin-cube")  # LSVI's own privatizer: no noise epoch would redraw its targets
    config = spec(algo="lsvi-ucb-batched", n_states=cube.S, n_actions=cube.A, horizon=cube.H,
                  model=model_spec_of(cube), episodes=6, epsilon=1e5, delta=1e-5,
                  mechanism="gaussian", knobs={"batches": 2})
    client = apps()
    run_id = create(client, config)
    play(client, run_id, config, 1, mdp=cube)
    apps.close(client)
    publish_more(apps.db, run_id, 3)
    client = open_app(apps)
    refused = recover(client, run_id, "continue")
    assert refused.status_code == 409, refused.text
    assert "outside the continual counters" in refused.json()["detail"]
    assert recover(client, run_id, "stop").status_code == 200


def test_only_central_counters_take_noise_epochs_in_jdp() -> None:
    from privrl.lab.policy_eval import round_config
    from privrl.run import Run
    from privrl.server.ops import noise_epochs
    from privrl.worlds.chain import ChainMRP

    def run(config) -> Run:
        return Run(config, [5])

    chain = ChainMRP()  # policy evaluation's one-shot theta: its own seeded draw
    assert not noise_epochs.supported(run(round_config(chain, "dp-lsw", "tabular", 3, 0.1, 0.1,
                                                       1.0)))
    assert noise_epochs.supported(run(round_config(chain, "lsw", "tabular", 3, 0.1, 0.1, 1.0)))
    for case in EPOCH_CASES:
        assert noise_epochs.supported(run(public(epoch_spec(case))))


def test_the_mark_can_live_on_other_storage(apps: Apps, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    client = apps(highwater=elsewhere / "marks")
    run_id = create(client, spec(episodes=10))
    assert HighWater(elsewhere / "marks").marks == {run_id: Mark()}
    assert not any(p.exists() for p in HighWater.beside(apps.db).paths)
    client = apps.reopen(client, highwater=elsewhere / "marks")  # served: its mark is found
    apps.close(client)
    client = open_app(apps)  # started without it: the run's mark is lost
    refused_everywhere(client, run_id, "mark_missing")
