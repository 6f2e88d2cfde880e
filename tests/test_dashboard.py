"""The dashboard at `/` and the public views it reads: the page and its files (no CDN, a strict
Content-Security-Policy, public GET routes only), exact regret in a public named world, the
ledger's running epsilon, the billboard's public noise std and the report sizes in the metrics."""

from __future__ import annotations

import re

import numpy as np
import pytest
from privrl.algorithms import bind
from privrl.config import RunConfig
from privrl.protocol import LedgerView, PolicyLog, RegretView
from privrl.regret import regret_from_log
from privrl.server.routes.dashboard import DASHBOARD
from privrl.worlds import optimal_return, riverswim, uniform_random_return
from support.server import create, play, public, spec

FILES = ("index.html", "app.js", "style.css", "favicon.svg")


def test_the_page_and_its_files_are_served_with_a_strict_policy(apps) -> None:
    client = apps()
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy
    assert "connect-src 'self'" in policy and "unsafe-inline" not in policy
    assert '<script src="/dashboard/app.js"></script>' in page.text
    assert '<link rel="stylesheet" href="/dashboard/style.css">' in page.text
    js = client.get("/dashboard/app.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert client.get("/dashboard/style.css").headers["content-type"].startswith("text/css")
    for name in ("nope.js", "..%2Fapp.py", "..%2F..%2Fsettings.py"):
        assert client.get(f"/dashboard/{name}").status_code == 404
    assert "/" not in client.get("/openapi.json").json()["paths"]  # not part of the API


def test_no_cdn_and_nothing_but_public_reads() -> None:
    """Every URL in the files is this server's own; the script sends no token and only GETs."""
    for name in FILES:
        text = (DASHBOARD / name).read_text()
        urls = set(re.findall(r"https?://[^\s\"'`)]+", text))
        assert urls <= {"http://www.w3.org/2000/svg"}, (name, urls)  # an XML namespace only
        assert "<script>" not in text and " style=" not in text  # nothing inline (CSP)
    js = (DASHBOARD / "app.js").read_text()
    assert "Authorization" not in js and "method:" not in js and "token" not in js.lower()
    fetched = set(re.findall(r"(?:getJSON|fetch)\(`?\"?(/[^`\"?$]*)", js))
    assert fetched == {"/v1/runs", "/v1/runs/", "/v1/trust"}, fetched
    routes = set(re.findall(r"/v1/runs/\$\{encodeURIComponent\([^)]*\)\}/(\w+)", js))
    assert routes == {"ledger", "regret", "billboard", "cohorts"}, routes


def test_regret_in_a_public_world_equals_the_evaluators(apps) -> None:
    client = apps()
    config = spec("jdp", n_states=6, horizon=5, episodes=12, mechanism="gaussian", delta=1e-5,
                  epsilon=10.0)
    run_id = create(client, config)
    resp = client.get(f"/v1/runs/{run_id}/regret", params={"world": "riverswim"})
    assert resp.status_code == 200 and RegretView.model_validate(resp.json()).regret == []
    play(client, run_id, config, 12)
    view = RegretView.model_validate(client.get(f"/v1/runs/{run_id}/regret",
                                                params={"world": "riverswim"}).json())
    mdp = riverswim(5)
    log = PolicyLog.model_validate(client.get(f"/v1/runs/{run_id}/policies").json())
    expected = regret_from_log(mdp, log).regret
    assert view.world == "riverswim" and view.horizon == 5 and len(view.regret) == 12
    np.testing.assert_allclose(view.regret, expected, atol=1e-6)
    assert view.cumulative == pytest.approx(expected.sum())
    assert view.optimal_return == pytest.approx(optimal_return(mdp))
    assert view.random_policy_per_episode == pytest.approx(
        optimal_return(mdp) - uniform_random_return(mdp))
    again = client.get(f"/v1/runs/{run_id}/regret", params={"world": "riverswim"}).json()
    assert again["regret"] == view.regret  # the second answer comes from the version cache
    # "learned" on the dashboard is the CLI's verdict: the same window, the same rule
    from privrl.client.demo import steady_verdict, window_percents
    from privrl.lab.experiments import regret_summary
    from privrl.verdict import verdict_tail

    record = {"regret": regret_summary(np.asarray([view.regret]), mdp, tail=verdict_tail(12))}
    assert view.verdict is not None and view.verdict.tail_episodes == 1
    assert view.verdict.learned == steady_verdict(record)[0]
    np.testing.assert_allclose(view.verdict.windows, window_percents(record), atol=1e-3)
    assert view.verdict.percent_of_random == pytest.approx(
        100 * np.mean(view.regret[-1:]) / view.random_policy_per_episode, abs=1e-3)


def test_the_dashboard_shows_the_servers_verdict() -> None:
    """The table's "learned" and "% of random" cells read the regret view's verdict (the CLI's
    rule), never a window of the page's own."""
    js = (DASHBOARD / "app.js").read_text()
    html = (DASHBOARD / "index.html").read_text()
    assert "reg.view.verdict" in js and "v.learned" in js and "v.percent_of_random" in js
    assert "regret.slice(-WINDOW)" not in js  # the old "last 100" table window
    assert "<th>learned</th>" in html and "last 10%" in html


@pytest.mark.parametrize(("world", "pattern"), [
    ("mars", "not a public named world"),
    ("/etc/passwd.npz", "not a public named world"),  # never a file on the server
    ("FILE.npz", "not a public named world"),
    ("garnet", r"\(S, A\) = \(10, 3\) but run .* is for \(4, 2\)"),
])
def test_regret_refuses_worlds_that_are_not_public_or_do_not_fit(apps, world, pattern) -> None:
    client = apps()
    run_id = create(client, spec("jdp"))
    resp = client.get(f"/v1/runs/{run_id}/regret", params={"world": world})
    assert resp.status_code == 422 and re.search(pattern, resp.json()["detail"]), resp.text
    assert client.get(f"/v1/runs/{run_id}/regret").status_code == 422  # world is required
    assert client.get(f"/v1/runs/{run_id}/regret",
                      params={"world": "riverswim", "x": "1"}).status_code == 422


def test_ledger_states_epsilon_after_each_charge(apps) -> None:
    client = apps()
    config = spec("jdp", mechanism="gaussian", delta=1e-5, episodes=10)
    run_id = create(client, config)
    play(client, run_id, config, 10)
    view = LedgerView.model_validate(client.get(f"/v1/runs/{run_id}/ledger").json())
    after = [float(x) for x in view.epsilon_after]
    assert len(after) == len(view.charges) > 2
    assert after == sorted(after) and after[0] > 0
    assert after[-1] == pytest.approx(float(view.epsilon), rel=1e-12)
    assert after[-1] == pytest.approx(1.0, rel=1e-6)


@pytest.mark.parametrize("privacy", ["jdp", "ldp", "none"])
def test_billboard_states_its_public_noise_std(apps, privacy) -> None:
    client = apps()
    extra = {} if privacy == "none" else {"mechanism": "gaussian", "delta": 1e-5}
    config = spec(privacy, episodes=6, **extra)
    run_id = create(client, config)
    play(client, run_id, config, 4)
    board = client.get(f"/v1/runs/{run_id}/billboard").json()
    expected = bind(public(config)).calibration().release_std(4)
    assert board["noise_std"] == pytest.approx(expected) and (expected > 0) == (privacy != "none")




def test_the_runs_route_gives_the_labels_public_fields_and_never_a_seed(apps) -> None:
    """The dashboard labels a run by algorithm, privacy mode, epsilon and a short id: all of it
    from GET /v1/runs, whose entries carry the public config only (no seed, whatever was set)."""
    client = apps()
    config = spec("jdp", epsilon=10.0, mechanism="gaussian", delta=1e-5, seed=987654321)
    run_id = create(client, config)
    listed = client.get("/v1/runs")
    assert listed.status_code == 200 and "987654321" not in listed.text
    (run,) = listed.json()["runs"]
    assert run["id"] == run_id
    assert (run["config"]["algo"], run["config"]["privacy"], run["config"]["epsilon"]) == (
        "dp-ucbvi", "jdp", 10.0)

    def keys(x):  # noqa: ANN001, ANN202
        if isinstance(x, dict):
            return set(x) | {k for v in x.values() for k in keys(v)}
        return {k for v in x for k in keys(v)} if isinstance(x, list) else set()

    assert not [k for k in keys(listed.json()) if "seed" in k.lower()]
    js = (DASHBOARD / "app.js").read_text()
    used = {n for pair in re.findall(r"\bc\.(\w+)|run\.config\.(\w+)", js) for n in pair if n}
    assert {"algo", "privacy", "epsilon", "mechanism"} <= used <= set(RunConfig.model_fields)


def test_the_dashboard_colours_boundaries_as_every_figure_does(apps) -> None:
    """One palette: the script holds no colour of its own and reads each trust boundary's from
    GET /v1/trust, which serves the registry's (`privrl.lab.plots` draws with the same)."""
    from privrl.lab.plots import PRIVACY_COLORS, PRIVACY_NAMES

    js = (DASHBOARD / "app.js").read_text()
    assert 'getJSON("/v1/trust")' in js and not re.search(r"#[0-9a-fA-F]{6}", js)
    served = apps().get("/v1/trust").json()
    assert {b["name"]: b["colour"] for b in served} == PRIVACY_COLORS
    assert {b["name"]: b["label"] for b in served} == PRIVACY_NAMES
