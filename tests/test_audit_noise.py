"""The pieces of `privrl audit server`, in process: the declared noise of billboard increments,
the variance test's false alarms and power, re-deriving noise from a seed, and field searches."""

from __future__ import annotations

import numpy as np
import pytest
from privrl.algorithms import bind, effective
from privrl.algorithms.ucbvi.counts import tabular_counts
from privrl.audit.increments import (
    increment_coefficients,
    increment_test,
    moments,
    release_coefficients,
    single_draw,
)
from privrl.client.api import ServerAPI
from privrl.client.audit.server_attack import (
    Document,
    ServerAudit,
    central_noise,
    clean_distance,
    harvest,
    local_noise,
    raw_looking,
    secret_looking,
)
from privrl.config import RunConfig
from privrl.privacy.continual import CounterPlan
from privrl.privacy.matrix_counter import (
    ENCODER_BITS,
    MatrixCounter,
    matrix_increment_variance,
    matrix_release_variance,
    sqrt_coefficients,
)
from privrl.privacy.mechanisms import Laplace
from privrl.privacy.noise import FLOAT_NOISE
from privrl.privacy.privatizers import from_units
from privrl.privacy.tree import TreeCounter, release_variance
from privrl.run import Run, user_episode
from privrl.seeding import generator
from privrl.worlds import make, riverswim
from privrl.worlds.model_spec import model_spec_of
from support.server import create, play, spec

MDP = riverswim(5, n_states=4)
# the practical presets' counter under Gaussian seeded integer noise, with few bands
MATRIX = {"counter": "matrix", "counter_bands": 4, "mechanism": "gaussian", "delta": 1e-5}


def config(privacy: str, preset: str = "practical", episodes: int = 40, **kw) -> RunConfig:
    # the tree every episode: the mechanics these tests check (the preset's: test_preset_schedules)
    tree = "tree" if preset == "faithful" else "smoothed"
    central = {"counter": tree, "schedule": "every"} if privacy == "jdp" else {}
    return RunConfig(n_states=MDP.S, n_actions=MDP.A, horizon=MDP.H, episodes=episodes,
                     privacy=privacy, preset=preset, **{**central, **kw})


def feed(run: Run, episodes: int, client_seed: int, scale: float = 1.0) -> list[tuple]:
    """Play `episodes` honest users into `run`; after each, (t, released arrays, exact counts),
    with the release's noise multiplied by `scale` (a server that under-noises)."""
    out, exact = [], None
    for k in range(episodes):
        message = run.message()
        traj, noisy = user_episode(MDP, message, [client_seed], k, run.algorithm,
                                   run.calibration, nonces=[k])
        counts = tabular_counts(traj, MDP.S, MDP.A)
        exact = counts if exact is None else {n: exact[n] + counts[n] for n in counts}
        if noisy is None:
            run.ingest_trajectories(traj, message)
        else:
            run.ingest_noisy(noisy)
        release = run.privatizer.release()
        arrays = [exact[f.name][0] + scale * (release[f.name][0] - exact[f.name][0])
                  for f in run.calibration.families]
        out.append((run.reported, arrays, {n: a[0] for n, a in exact.items()}))
    return out


@pytest.mark.parametrize("smooth", [False, True])
def test_release_coefficients_have_the_declared_variance(smooth: bool) -> None:
    for t in range(1, 70):
        coeffs = np.asarray(list(release_coefficients(t, True, smooth).values()))
        assert moments(coeffs, 6.0)[0] == pytest.approx(release_variance(t, smooth))
    # seven new users: E[e^4] = 7 kappa + 3 (7^2 - 7)
    assert moments(increment_coefficients(3, 10, False, False), 6.0) == (7.0, 7 * 6.0 + 3 * 42)


@pytest.mark.parametrize("bands", [None, 4])
def test_matrix_increment_variance_matches_the_counter_and_the_closed_form(bands) -> None:
    """The decoded noise of 300 replica counters (300 seeds x 60 entries): its increments
    between releases have the variance `matrix_increment_variance` states."""
    steps, reps, n = 24, 300, 60
    mech = CounterPlan("matrix", steps, bands).noise(0.5, 1.0)
    counter = MatrixCounter((n,), mech, list(range(reps)), "x", steps, bands)
    noise = [np.zeros((reps, n))]
    for _ in range(steps):
        counter.add(np.zeros((reps, n), np.int64))
        noise.append(counter.noise_sum().copy())
    samples = reps * n
    for t1, t2 in ((0, 5), (1, 2), (3, 9), (7, 8), (5, 24), (23, 24)):
        want = mech.sigma**2 * matrix_increment_variance(t1, t2, steps, bands)
        got = float(np.var(noise[t2] - noise[t1]))
        assert abs(got / want - 1.0) < 5 * np.sqrt(2.0 / samples), (t1, t2, got, want)
    for t in (1, 7, 24):  # from nothing: the release variance
        assert matrix_increment_variance(0, t, steps, bands) == pytest.approx(
            matrix_release_variance(t, steps, bands), rel=1e-12)
    if bands is None:  # the square root's closed form: D = L / 2^16, d_k = c_k / 2^16
        c = sqrt_coefficients(steps)
        for t1, t2 in ((1, 2), (3, 9), (5, 24)):
            diff = c[:t2][::-1].copy()
            diff[:t1] -= c[:t1][::-1]
            closed = float(np.sum(diff**2)) / 4.0**ENCODER_BITS
            assert matrix_increment_variance(t1, t2, steps) == pytest.approx(closed, rel=1e-3)


def test_matrix_increment_coefficients_are_in_the_calibrations_units() -> None:
    """From nothing, the increment's declared variance is the calibration's release variance:
    the encoder's 2^16 units per grid unit are accounted once."""
    cfg = config("jdp", episodes=40, **MATRIX)
    cal = bind(cfg).calibration()
    assert cal.plan.kind == "matrix" and cal.integer
    sigma = cal.mechanism.std()
    for t in (1, 5, 40):
        coeffs = increment_coefficients(0, t, True, cal.smooth, cal.plan)
        assert sigma**2 * moments(coeffs, 3.0)[0] == pytest.approx(cal.release_std(t) ** 2)


@pytest.mark.parametrize("smooth", [pytest.param(False, marks=pytest.mark.slow), True])  # long
def test_increment_moments_match_the_tree(smooth: bool) -> None:
    """Monte Carlo over 4000 replica trees of unit (float) Laplace noise (variance 2, kurtosis
    6): the moments of the continuous law the coefficients assume."""
    reps = 4000
    tree = TreeCounter((1,), Laplace(1.0, FLOAT_NOISE), list(range(reps)), "x", 64, smooth)
    releases = []
    for _ in range(40):
        tree.add(np.zeros((reps, 1)))
        releases.append(tree.release()[:, 0].copy())
    for t1, t2 in ((1, 2), (7, 8), (5, 13), (12, 31), (31, 32)):
        e = releases[t2 - 1] - releases[t1 - 1]
        second, fourth = moments(increment_coefficients(t1, t2, True, smooth), 6.0)
        assert np.var(e) / 2 == pytest.approx(second, rel=0.08)
        assert np.mean(e**4) / 4 == pytest.approx(fourth, rel=0.3)


@pytest.mark.parametrize(("privacy", "preset", "kw"), [
    ("jdp", "faithful", {}), ("jdp", "practical", {}), ("jdp", "practical", MATRIX),
    ("ldp", "practical", {})])
def test_honest_increments_pass_and_under_noised_ones_are_flagged(privacy, preset, kw) -> None:
    cfg = config(privacy, preset, **kw)
    honest = feed(Run(cfg, [11]), 40, client_seed=12)
    quiet = feed(Run(cfg, [11]), 40, client_seed=12, scale=0.5)
    cal = bind(cfg).calibration()
    for t1, t2 in ((9, 16), (16, 17), (20, 40), (31, 32), (32, 40)):
        ok = increment_test(cal, t1, honest[t1 - 1][1], t2, honest[t2 - 1][1], 1e-3)
        assert ok.decisive and not ok.flagged and 0.8 < ok.ratio < 1.25, ok
        bad = increment_test(cal, t1, quiet[t1 - 1][1], t2, quiet[t2 - 1][1], 1e-3)
        assert bad.flagged and bad.ratio == pytest.approx(0.5, abs=0.1), bad


def test_false_alarm_rate_is_at_most_alpha() -> None:
    """Pure declared noise plus arbitrary fixed data: flagged in at most alpha of the trials."""
    cfg = config("jdp", "practical", episodes=64)
    cal = bind(cfg).calibration()
    rng = generator(3, "false-alarm")
    shapes = [f.shape for f in cal.families]
    sigma = cal.mechanism.std()
    alpha, trials, flagged = 0.05, 400, 0
    for _ in range(trials):
        t1 = int(rng.integers(1, 40))
        t2 = t1 + int(rng.integers(1, 20))
        coeffs = increment_coefficients(t1, t2, True, True)
        before = [np.zeros(s) for s in shapes]
        after = [rng.integers(0, t2 - t1 + 1, s) + (sigma / np.sqrt(2)) * np.tensordot(
            coeffs, rng.laplace(size=(coeffs.size, *s)), axes=1) for s in shapes]
        flagged += increment_test(cal, t1, before, t2, after, alpha).flagged
    assert flagged / trials <= alpha


@pytest.mark.parametrize(("preset", "kw"), [("faithful", {}), ("practical", {}),
                                             ("practical", MATRIX)])
def test_the_right_seed_rederives_the_central_noise(preset: str, kw) -> None:
    cfg = config("jdp", preset, **kw)
    run = Run(cfg, [2024])
    history = feed(run, 21, client_seed=5)
    t, released, exact = history[-1]
    cal = bind(cfg).calibration()
    arrays = {f.name: a for f, a in zip(cal.families, released, strict=True)}
    noise = central_noise(cal, 2024, cfg.episodes, t)
    for f in cal.families:
        assert np.allclose(arrays[f.name] - noise[f.name], exact[f.name], atol=1e-9)
    assert clean_distance(cal, arrays, t, noise) < 1e-9
    assert clean_distance(cal, arrays, t, central_noise(cal, 2025, cfg.episodes, t)) > 1.0


def test_the_right_seed_rederives_a_linear_mixture_runs_noise() -> None:
    """UCRL-VTR's practical JDP run (the matrix counter, each family at its own scale):
    symmetric Gram matrices and targets on a fine grid, with negative clean values; billboard
    minus the true seed's noise is the exact sums, inside the clean range."""
    world = make("lm-hard")
    cfg = RunConfig(algo="ucrl-vtr", n_states=world.S, n_actions=world.A, horizon=world.H,
                    model=model_spec_of(world), episodes=40, privacy="jdp", epsilon=1.0,
                    delta=1e-5, mechanism="gaussian")
    run = Run(cfg, [2024])
    for k in range(15):
        message = run.message()
        run.ingest_trajectories(user_episode(world, message, [5], k, run.algorithm,
                                             run.calibration)[0], message)
    cal, t = run.calibration, run.reported
    assert cal.plan.kind == "matrix" and any(f.symmetric and f.clean_min < 0
                                             for f in cal.families)
    arrays = {n: a[0] for n, a in run.billboard().items()}
    noise = central_noise(cal, 2024, cfg.episodes, cal.counter_items(t))
    for name, counter in run.privatizer.trees.items():
        exact = from_units(cal, name, counter.exact)[0]
        assert np.array_equal(arrays[name] - noise[name], exact)
        assert exact.min() < 0  # a clean value below zero: the range is not [0, t max]
    assert clean_distance(cal, arrays, t, noise) == 0.0
    wrong = central_noise(cal, 2025, cfg.episodes, cal.counter_items(t))
    assert clean_distance(cal, arrays, t, wrong) > 1.0


@pytest.mark.parametrize("schedule", ["geometric:1.1", "batch:4"])
def test_on_a_sparse_schedule_the_audit_counts_releases_not_reports(schedule: str) -> None:
    """The practical preset's release path: the tree holds one item per release, so the seed
    re-derives the noise of `counter_items(t)` items of the counters a K-episode run builds, and
    a pair of polls is tested over the releases between them (none: the billboard did not
    move)."""
    cfg = config("jdp", counter="smoothed", schedule=schedule)
    run = Run(cfg, [2024])
    history = feed(run, 23, client_seed=5)
    cal = bind(cfg).calibration()
    t, released, _ = history[-1]
    items = cal.counter_items(t)
    assert 1 < items < t
    arrays = {f.name: a for f, a in zip(cal.families, released, strict=True)}
    noise = central_noise(cal, 2024, cfg.episodes, items)
    clean = {n: tree.exact[0] for n, tree in run.privatizer.trees.items()}
    for f in cal.families:  # billboard minus the seed's noise: the released episodes' counts
        assert np.allclose(arrays[f.name] - noise[f.name], clean[f.name], atol=1e-9)
    assert clean_distance(cal, arrays, t, noise) < 1e-9  # not the noise of another release:
    assert clean_distance(cal, arrays, t, central_noise(cal, 2024, cfg.episodes, items - 1)) > 1
    moved = [(a, b) for a, b in ((5, 12), (9, 23)) if cal.counter_items(b) > cal.counter_items(a)]
    assert moved
    for a, b in moved:
        ok = increment_test(cal, cal.counter_items(a), history[a - 1][1], cal.counter_items(b),
                            history[b - 1][1], 1e-3)
        assert not ok.flagged, ok


def test_an_honest_run_on_a_sparse_schedule_passes_the_noise_test(apps) -> None:
    """The practical preset's geometric releases (after episodes 118, 130, ...): polls at 118,
    121 and 124 reports see the same release, which is no evidence of missing noise; only the
    pair across episode 130 is tested, and an honest server passes."""
    client = apps()
    cfg = spec("jdp", episodes=400, seed=None, epsilon=1.0)
    run_id = create(client, cfg)
    play(client, run_id, cfg, 118)
    api = ServerAPI("http://testserver")
    api.http = client
    audit = ServerAudit(api, [run_id], polls=4, interval=0.0, rng=generator(1, "audit"))
    audit.collect()
    for more in (3, 3, 7, 0):
        audit.poll_once()
        play(client, run_id, cfg, more)
    audit.finish_polls()
    report = audit.check()
    assert report.findings == [], report.text()
    noise = {c.check: c for c in report.checks if c.run_id == run_id}["noise"]
    assert noise.ran and "increment" in noise.message, noise


def audited(client, run_ids: list[str], polls: int = 1, between: int = 0,
            config: dict | None = None) -> dict[str, dict]:
    """The in-process audit of `run_ids` (`polls` readings, `between` episodes of `config`
    played after each); each run's checks by name, and its findings."""
    api = ServerAPI("http://testserver")
    api.http = client  # the TestClient is an httpx.Client bound to the app
    audit = ServerAudit(api, run_ids, polls=polls, interval=0.0, rng=generator(1, "audit"))
    audit.collect()
    for _ in range(polls):
        audit.poll_once()
        for run_id in run_ids if between else ():
            play(client, run_id, config, between)
    audit.finish_polls()
    report = audit.check()
    return {run_id: {"checks": {c.check: c for c in report.checks if c.run_id == run_id},
                     "findings": [f for f in report.findings if f.run_id == run_id]}
            for run_id in run_ids}


def test_a_typed_seed_of_a_matrix_counter_run_is_found(apps) -> None:
    """The practical preset's JDP counter under Gaussian seeded integer noise (the banded matrix
    counter): a seed people type re-derives its noise; a run's secret seed is not found."""
    client = apps()
    cfgs = {seed: spec("jdp", episodes=12, seed=seed, mechanism="gaussian", delta=1e-5)
            for seed in (7, None)}
    runs = {seed: create(client, cfg) for seed, cfg in cfgs.items()}
    for seed, run_id in runs.items():
        assert client.get(f"/v1/runs/{run_id}").json()["config"]["counter"] == "matrix"
        play(client, run_id, cfgs[seed], 12)
    done = audited(client, list(runs.values()))
    typed, secret = done[runs[7]], done[runs[None]]
    assert [(f.check, f.evidence["seed"]) for f in typed["findings"]] == [("seed", "7")]
    assert min(typed["findings"][0].evidence["random_seed_distances"]) > 1.0  # decisive
    assert secret["findings"] == [] and "re-derive none" in secret["checks"]["seeds"].message


def test_the_noise_test_covers_a_matrix_counter_run(apps, monkeypatch) -> None:
    """Polled while users report, an honest matrix-counter run passes the increment test, and
    one whose billboard carries half the noise is flagged."""
    client = apps()
    cfg = spec("jdp", episodes=80, seed=None, mechanism="gaussian", delta=1e-5)
    honest, quiet = create(client, cfg), create(client, cfg)
    for run_id in (honest, quiet):
        play(client, run_id, cfg, 20)
    done = audited(client, [honest], polls=3, between=10, config=cfg)[honest]
    assert done["findings"] == [], done
    assert done["checks"]["noise"].ran and "increment" in done["checks"]["noise"].message

    def halved(self: Run) -> dict:
        release = self.privatizer.release()
        exact = {n: from_units(self.calibration, n, c.exact)
                 for n, c in self.privatizer.trees.items()}
        return self.algorithm.postprocess(
            {n: exact[n] + np.round((release[n] - exact[n]) / 2) for n in release})

    monkeypatch.setattr(Run, "billboard", halved)
    play(client, quiet, cfg, 1)  # public reads answer from the snapshot of the last change
    done = audited(client, [quiet], polls=3, between=10, config=cfg)[quiet]
    assert [f.check for f in done["findings"]] == ["noise"], done


def test_the_right_users_seed_rederives_the_local_noise() -> None:
    cfg = config("ldp")
    run = Run(cfg, [1])
    t, released, exact = feed(run, 15, client_seed=77)[-1]
    cal = bind(cfg).calibration()
    arrays = {f.name: a for f, a in zip(cal.families, released, strict=True)}
    noise = local_noise(cal, cfg.horizon, 77, range(t), cal.integer)  # Bernoulli rewards drawn
    for f in cal.families:
        assert np.allclose(arrays[f.name] - noise[f.name], exact[f.name], atol=1e-9)
    assert clean_distance(cal, arrays, t, local_noise(cal, cfg.horizon, 78, range(t))) > 1.0


def test_field_names_and_values() -> None:
    for key in ("seed", "noise_seed", "rngState", "bit_generator", "entropy", "nodeNoise",
                "server-seed", "RNG"):
        assert secret_looking(key), key
    for key in ("noise", "n_states", "epsilon", "reported", "policy_version", "strings",
                "arrays", "seeding"):
        assert not secret_looking(key), key
    assert raw_looking("states", [0, 1, 2]) and raw_looking("trajectory", {})
    assert raw_looking("actions", [0, 1, 1])  # a trajectory's action sequence
    assert not raw_looking("actions", [[0, 1], [1, 1]])  # a policy table actions[h][s]
    assert not raw_looking("n_states", 4)


def test_harvest_reads_numbers_keys_strings_and_metrics() -> None:
    docs = [
        Document("GET /a", None, {"x": 5, "7": [1.0, "12", "0x1f"], "id": "00ff00ff00ff00ff"}),
        Document("GET /v1/runs/{run_id}/billboard", "r", {"arrays": {"sas": [3.0, 99.0]},
                                                          "reported": 4}),
        Document("GET /metrics", None, 'privrl_x{run="a"} 123.0\nprivrl_y 0.5\n'),
    ]
    found = harvest(docs)
    assert {5, 7, 1, 12, 31, 0x00FF00FF00FF00FF, 4, 123} <= set(found)
    assert 99 not in found and 3 not in found  # the noisy release itself is not harvested
    assert found[123] == "GET /metrics (text)"


def test_in_process_audit_flags_an_exact_billboard(apps, monkeypatch) -> None:
    """A server that publishes exact counts (its noise switched off) is flagged as raw data and
    by the noise test, even without knowing why."""
    client = apps()
    cfg = spec("jdp", episodes=30, seed=None)
    run_id = create(client, cfg)
    play(client, run_id, cfg, 9)
    monkeypatch.setattr(Run, "billboard", lambda self: self.algorithm.postprocess(
        {name: tree.exact.copy() for name, tree in self.privatizer.trees.items()}))
    play(client, run_id, cfg, 1)  # public reads answer from the snapshot of the last change
    api = ServerAPI("http://testserver")
    api.http = client  # the TestClient is an httpx.Client bound to the app
    audit = ServerAudit(api, [run_id], polls=1, rng=generator(1, "audit"))
    first = audit.run()
    assert any(f.check == "raw-data" and "integer-valued" in f.message for f in first.findings)
    audit = ServerAudit(api, [run_id], polls=3, interval=0.0, rng=generator(1, "audit"))
    audit.collect()
    for _ in range(3):  # users report between the polls
        audit.poll_once()
        play(client, run_id, cfg, 3)
    audit.finish_polls()
    report = audit.check()
    assert any(f.check == "noise" for f in report.findings), report.text()
    assert "re-derive none" in {c.check: c for c in report.checks}["seeds"].message


def test_the_seed_search_stops_at_its_budget_and_says_so(apps) -> None:
    client = apps()
    cfg = spec("jdp", episodes=12, seed=None)
    run_id = create(client, cfg)
    play(client, run_id, cfg, 12)
    api = ServerAPI("http://testserver")
    api.http = client
    report = ServerAudit(api, [run_id], polls=1, rng=generator(1, "audit"),
                         seed_budget=1e-9).run()
    seeds = {c.check: c for c in report.checks if c.run_id == run_id}["seeds"]
    assert seeds.message.startswith("0 candidate seeds (of ") and "--seed-budget" in seeds.message
    assert report.findings == []


def test_field_search_flags_seeds_raw_data_and_metric_labels() -> None:
    audit = ServerAudit(ServerAPI("http://127.0.0.1:9"), polls=1)  # nothing is fetched here
    audit.docs = [
        Document("GET /v1/runs/{run_id}/debug", "r", {"rng": {"bit_generator": "PCG64"}}),
        Document("GET /v1/runs/{run_id}/last", "r", {"user": {"states": [0, 1], "actions": [1]}}),
        Document("GET /metrics", None, 'privrl_noise_seed{run="r"} 42.0\n'
                 'privrl_report_bytes_total{run="r"} 1570.0\n'),
        Document("GET /openapi.json", None, {"properties": {"seed": {"type": "integer"}}}),
        Document("GET /v1/runs/{run_id}/policy", "r", {"version": 3, "actions": [[0, 1]]}),
    ]
    audit.check_fields()
    found = [(f.check, f.where, f.message.split(" = ")[0]) for f in audit.report.findings]
    assert ("secret-field", "GET /v1/runs/{run_id}/debug", "field rng") in found
    assert ("secret-field", "GET /v1/runs/{run_id}/debug", "field rng.bit_generator") in found
    assert ("raw-data", "GET /v1/runs/{run_id}/last", "field user.states") in found
    assert ("raw-data", "GET /v1/runs/{run_id}/last", "field user.actions") in found
    assert any(f.where == "GET /metrics" and "privrl_noise_seed" in f.message
               for f in audit.report.findings)
    assert [f.message.split(" counts")[0] for f in audit.report.findings
            if f.check == "side-channel"] == ["metric 'privrl_report_bytes_total'"]
    assert not any("openapi" in f.where or "policy" in f.where for f in audit.report.findings)


def test_the_noise_test_takes_each_family_at_its_own_scale() -> None:
    """LinOpt-VI's practical JDP run: four families at different noise scales, two of them
    symmetric (mirrored noise). Honest increments (pure noise, from the run's own counters)
    sit at the declared std; halving every family's noise is flagged, which a test pooling
    the families at the smallest family's scale misses (the others' noise stays above it)."""
    world = make("zhou-mix")
    cfg = effective(RunConfig(algo="linopt-vi", n_states=world.S, n_actions=world.A,
                              horizon=world.H, model=model_spec_of(world), episodes=4000,
                              privacy="jdp", epsilon=1.0, delta=1e-5, mechanism="gaussian"))
    cal = bind(cfg).calibration()
    scales = {cal.mechanism_of(f.name).std() for f in cal.families}
    assert cal.plan.kind == "matrix" and len(scales) > 1
    assert any(f.symmetric for f in cal.families)
    names = [f.name for f in cal.families]
    ratios, flagged = [], 0
    for seed in range(8):
        before = central_noise(cal, seed, cfg.episodes, 100)
        after = central_noise(cal, seed, cfg.episodes, 300)
        honest = increment_test(cal, 100, [before[n] for n in names], 300,
                                [after[n] for n in names], 1e-3)
        assert honest.decisive
        ratios.append(honest.ratio)
        flagged += honest.flagged
        quiet = increment_test(cal, 100, [before[n] / 2 for n in names], 300,
                               [after[n] / 2 for n in names], 1e-3)
        assert quiet.flagged, quiet
    assert flagged == 0 and abs(np.mean(ratios) - 1.0) < 0.06, ratios


def test_a_single_draw_reading_counts_releases_not_reports() -> None:
    """The float-noise check needs a billboard whose entries each hold one raw draw: under a
    sparse schedule that is a count of releases (none before the first), never a matrix
    counter's release; in LDP, one user's report."""
    mdp = riverswim(6)

    def cal(**kw):  # noqa: ANN003, ANN202
        cfg = RunConfig(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=64, **kw)
        return bind(cfg).calibration()

    float_jdp = dict(privacy="jdp", mechanism="laplace", noise="float", schedule="batch:4")
    smoothed, tree = cal(**float_jdp, counter="smoothed"), cal(**float_jdp, counter="tree")
    assert [t for t in range(1, 33) if single_draw(smoothed, t)] == [4, 5, 6, 7]
    assert [t for t in range(1, 33) if single_draw(tree, t)] == [
        4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 32]
    matrix = cal(privacy="jdp", mechanism="gaussian", delta=1e-5, counter="matrix")
    assert not any(single_draw(matrix, t) for t in range(65))
    ldp = cal(privacy="ldp", mechanism="laplace")
    assert [t for t in range(4) if single_draw(ldp, t)] == [1]
