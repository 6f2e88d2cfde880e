"""The secure-aggregation boundary (`privrl.trust.secagg`): its calibration and accounting,
the cohort privatizer (exact sums, dropouts, aborts, range refusals, masked vectors on the
wire), and whole in-process runs of every family that has an LDP mode."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np
import privrl
import pytest
from privrl import algorithms, trust
from privrl.algorithms import bind
from privrl.client.cli import main as cli_main
from privrl.config import RunConfig
from privrl.privacy.accountant import Ledger
from privrl.privacy.grid import released_coordinates
from privrl.run import Run
from privrl.seeding import noise_generator
from privrl.trust.secagg import accounting
from privrl.trust.secagg.boundary import ROUNDS_ENV, CohortPrivatizer, share_calibration
from privrl.trust.secagg.spec import CohortSpec
from privrl.worlds import riverswim

MDP = riverswim(6)


def config(**kw: object) -> RunConfig:
    base = dict(n_states=MDP.S, n_actions=MDP.A, horizon=MDP.H, episodes=60, privacy="secagg",
                epsilon=1.0, mechanism="gaussian", delta=1e-5, schedule="batch:20",
                knobs={"pooled": True})
    return RunConfig(**{**base, **kw})


def test_registered_with_its_parts() -> None:
    b = trust.get("secagg")
    assert (b.label, b.local_noise, b.cohorts, b.counters) == ("SecAgg", True, True, False)
    assert b.colour.startswith("#") and "cohort sums" in b.summary
    for algo in ("dp-ucbvi", "ucrl-vtr", "linopt-vi", "linopt-po"):
        assert "secagg" in algorithms.get(algo).boundaries()
    assert "secagg" not in algorithms.get("dp-lsw").boundaries()


def test_default_cohorts() -> None:
    """Without a schedule a run sums cohorts of K / 50 users, within [100, 1000]."""
    for episodes, size in [(50, 50), (1000, 100), (20_000, 400), (50_000, 1000),
                           (10**6, 1000)]:
        cfg = bind(config(episodes=episodes, schedule=None)).config
        assert cfg.schedule == f"batch:{size}"


def test_spec_worst_case() -> None:
    """n_min = ceil(B (1 - f)) - ceil(B c); assumptions that leave no honest share refuse."""
    spec = CohortSpec(100, 0.1, 0.1)
    assert (spec.min_survivors, spec.colluders, spec.honest_shares) == (90, 10, 80)
    assert spec.variance_factor() == pytest.approx(100 / 80)
    with pytest.raises(ValueError, match="no honest noise share"):
        CohortSpec(4, 0.5, 0.5)


def test_calibration_spends_the_budget_on_n_min_shares() -> None:
    """With discrete Gaussian shares, the families' distributed-discrete-Gaussian costs add
    up to the Gaussian budget; a user's share has variance sigma^2 / n_min."""
    cal = bind(config(secagg_noise="ddg")).calibration()
    spec = cal.cohort
    assert spec is not None and (spec.size, spec.honest_shares) == (20, 16)
    gaussian = bind(config(privacy="ldp", schedule=None, knobs={"pooled": True})).calibration()
    budget = sum(f.cost for f in gaussian.families)
    assert sum(f.cost for f in cal.families) == pytest.approx(budget, rel=1e-9)
    shares = share_calibration(cal)
    for f, s in zip(cal.families, shares.families, strict=True):
        assert s.scale == pytest.approx(f.scale / 4.0)
        dim = released_coordinates(f.shape, f.symmetric)
        assert f.cost == pytest.approx(accounting.rho(f.l2 / f.grid, 16, s.scale / f.grid, dim))


def test_configuration_refusals() -> None:
    with pytest.raises(ValueError, match="mechanism gaussian"):
        bind(config(mechanism="laplace", delta=0.0)).calibration()
    with pytest.raises(ValueError, match="epsilon = inf"):
        bind(config(epsilon=math.inf)).calibration()
    with pytest.raises(ValueError, match="batch:B"):
        bind(config(schedule="geometric:2")).calibration()
    with pytest.raises(ValueError, match="secure-aggregation"):  # at binding (registry.bind)
        Run(RunConfig(**{**config(privacy="ldp", schedule=None).model_dump(), "dropout": 0.2}),
            [0])


@pytest.mark.parametrize(("n", "sigma"), [(2, 0.5), (5, 0.5), (10, 0.6), (4, 1.0), (3, 2.0)])
def test_accounting_dominates_the_exact_renyi_divergence(n: int, sigma: float) -> None:
    """Cross-check of Kairouz, Liu & Steinke's bound: the exact Renyi divergence of the sum of
    n discrete Gaussians shifted by the sensitivity never exceeds alpha * rho, and the central
    Gaussian's rho alone would be too small where shares are small."""
    rho = accounting.rho(1.0, n, sigma, 1)
    gaussian = 1.0 / (2 * n * sigma**2)
    assert rho >= gaussian
    worst = max(accounting.exact_renyi(n, sigma, 1, a) / a for a in (1.5, 2, 4, 8, 16, 64))
    assert worst <= rho * (1 + 1e-9)
    assert worst >= 0.9 * gaussian  # the exact computation is not vacuous
    if sigma <= 0.6:
        assert worst > gaussian  # small shares: the correction term is needed


def test_calibrated_run_matches_dp_accounting() -> None:
    """With shares of a few grid units tau vanishes: the families composed as Gaussians of the
    cohort sigma in dp-accounting's RDP accountant spend the run's epsilon (within its order
    grid's slack)."""
    dp_accounting = pytest.importorskip("dp_accounting")
    cal = bind(config(epsilon=1.0, schedule="batch:100")).calibration()
    acc = dp_accounting.rdp.RdpAccountant()
    for f in cal.families:
        assert f.scale / f.grid / math.sqrt(cal.cohort.honest_shares) > 2.0
        acc.compose(dp_accounting.GaussianDpEvent(f.scale / f.l2))
    assert acc.get_epsilon(1e-5) == pytest.approx(1.0, rel=0.01)


def _reports(cal, seeds: list[int], users: int, rng: np.random.Generator):
    """Clean statistics of `users` users per replica, and what each user sends before
    masking (grid units plus its share, from its own noise stream)."""
    boundary = trust.get("secagg")
    clean, sent = [], []
    for u in range(users):
        stats = {f.name: rng.integers(0, 3, size=(len(seeds), *f.shape)).astype(float)
                 for f in cal.families}
        noise = [noise_generator(s, u) for s in seeds]
        clean.append(stats)
        sent.append(boundary.randomize(stats, cal, noise, noise))
    return clean, sent


def test_cohort_release_is_the_sum_of_what_users_sent() -> None:
    """Through every round of the protocol the billboard gains exactly the sum of the users'
    noisy shares (the masks cancel); the noise has the calibrated cohort variance; the ledger
    charges each user's one release once and notes each cohort."""
    cfg = config(episodes=40)
    cal = bind(cfg).calibration()
    seeds = [3, 4]
    priv = CohortPrivatizer(cal, len(seeds), 40)
    ledger = Ledger()
    clean, sent = _reports(cal, seeds, 40, np.random.default_rng(0))
    for i, report in enumerate(sent):
        priv.ingest(report, ledger)
        if i == 18:
            assert not any(v.any() for v in priv.release().values())  # nothing before it closes
    release = priv.release()
    for f in cal.families:
        assert np.array_equal(release[f.name], sum(r[f.name] for r in sent))
        noise = release[f.name] - sum(c[f.name] for c in clean)
        # two cohorts of 20 shares of variance sigma^2 / 16: std sigma sqrt(40 / 16)
        assert np.std(noise) == pytest.approx(f.scale * math.sqrt(40 / 16), rel=0.35)
    assert [r.outcome for r in priv.records] == ["released"] * 4
    kinds = [c.mechanism for c in ledger.entries]
    assert kinds.count("secagg:cohort") == 2
    (charge,) = priv.plan()  # Skellam: one (epsilon, delta) charge for every family
    assert kinds.count("secagg:skellam") == 1
    assert ledger.approximate == (charge.epsilon, 1e-5) and ledger.rho == 0.0


def test_dropouts_complete_and_too_many_abort_without_charge() -> None:
    """10% dropped after key agreement: the release is the survivors' sum. 60%: the cohort
    aborts, nothing is released, its users are not charged."""
    cal = bind(config(episodes=20)).calibration()
    seeds = [1]
    _, sent = _reports(cal, seeds, 20, np.random.default_rng(1))
    priv = CohortPrivatizer(cal, 1, 20)
    priv.faults = lambda cohort, replica, users: ({2, 7}, set())
    ledger = Ledger()
    for report in sent:
        priv.ingest(report, ledger)
    for f in cal.families:
        kept = sum(r[f.name] for i, r in enumerate(sent) if i not in (2, 7))
        assert np.array_equal(priv.release()[f.name], kept)
    assert priv.records[0].survivors == 18 and ledger.approximate[0] > 0

    priv = CohortPrivatizer(cal, 1, 20)
    priv.faults = lambda cohort, replica, users: (set(range(12)), set())
    ledger = Ledger()
    for report in sent:
        priv.ingest(report, ledger)
    assert priv.records[0].outcome == "aborted"
    assert not any(v.any() for v in priv.release().values())
    assert ledger.approximate == (0.0, 0.0) and ledger.rho == 0.0


def test_poisoned_input_refuses_its_cohort(caplog: pytest.LogCaptureFixture) -> None:
    """A user that reports far outside its bounds (poisoning up to the modulus): the cohort
    sum is infeasible, refused and logged; the next cohort releases."""
    cal = bind(config(episodes=40)).calibration()
    _, sent = _reports(cal, [5], 40, np.random.default_rng(2))
    name = cal.families[0].name
    sent[3] = {**sent[3], name: sent[3][name] + 10**6 * cal.families[0].grid}
    priv = CohortPrivatizer(cal, 1, 40)
    ledger = Ledger()
    with caplog.at_level(logging.WARNING, logger="privrl.trust.secagg.boundary"):
        for report in sent:
            priv.ingest(report, ledger)
    assert [r.outcome for r in priv.records] == ["refused", "released"]
    assert "feasible range" in caplog.text
    assert np.array_equal(priv.release()[name], sum(r[name] for r in sent[20:]))


def test_masked_reports_on_the_wire_look_uniform() -> None:
    """What the privatizer's users sent in a cohort: uniform mod 2^32 (top-nibble chi-square)."""
    cal = bind(config(episodes=20, knobs={"pooled": False})).calibration()
    _, sent = _reports(cal, [9], 20, np.random.default_rng(3))
    priv = CohortPrivatizer(cal, 1, 20)
    for report in sent:
        priv.ingest(report, Ledger())
    assert priv.trace is not None
    words = np.concatenate(list(priv.trace.masked.values()))
    counts = np.bincount((words >> np.uint64(28)).astype(np.int64), minlength=16)
    expected = words.size / 16
    assert float(((counts - expected) ** 2 / expected).sum()) < 37.7  # chi2(15), p = 0.001


def test_in_process_run_releases_per_cohort() -> None:
    """A whole DP-UCBVI run: the billboard changes once per cohort, the ledger spends at most
    the budget and records every cohort."""
    run = Run(config(episodes=58), [0, 1])
    boards = []
    for k in range(58):
        run.play_and_ingest(MDP, [0, 1], k)
        boards.append(run.billboard()["sas"].copy())
    changes = [k for k in range(1, 58) if not np.array_equal(boards[k], boards[k - 1])]
    # cohorts close after episodes 20, 40 and 58 (a partial one of 18 = the survivors needed)
    assert changes == [19, 39, 57]
    eps = run.ledger.totals(1e-5).epsilon
    assert eps <= 1.0 + 1e-9
    notes = [c.note for c in run.ledger.entries if c.mechanism == "secagg:cohort"]
    assert len(notes) == 3


@pytest.mark.parametrize("algo", ["dp-ucbvi", "ucrl-vtr"])
def test_ideal_rounds_give_the_protocols_numbers(algo: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """PRIVRL_SECAGG_ROUNDS=ideal (learning figures at scale): the same regret, billboard and
    spend as every round run with real cryptography, and the ledger says the rounds were
    skipped; an unknown value and a fault drill are refused."""
    def run(rounds: str) -> privrl.Results:
        monkeypatch.setenv(ROUNDS_ENV, rounds)
        return privrl.simulate(algo, privacy="secagg", epsilon=1.0, episodes=70, seeds=2,
                               schedule="batch:20",
                               knobs={"pooled": True} if algo == "dp-ucbvi" else None)

    protocol, ideal = run("protocol"), run("ideal")
    assert np.array_equal(protocol.regret, ideal.regret)
    assert protocol.record["ledger"]["epsilon"] == ideal.record["ledger"]["epsilon"]
    notes = [c["note"] for c in ideal.record["ledger"]["charges"]
             if c["mechanism"] == "secagg:cohort"]
    assert len(notes) == 4 and all("simulation only" in n for n in notes)
    assert not any("simulation only" in c["note"] for c in protocol.record["ledger"]["charges"])
    monkeypatch.setenv(ROUNDS_ENV, "skip")
    with pytest.raises(ValueError, match="PRIVRL_SECAGG_ROUNDS is one of"):
        run("skip")


def test_ideal_rounds_refuse_a_fault_drill(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ROUNDS_ENV, "ideal")
    run = Run(config(episodes=20), [0])
    assert isinstance(run.privatizer, CohortPrivatizer)
    run.privatizer.faults = lambda cohort, replica, users: ({1}, set())
    with pytest.raises(ValueError, match="a fault drill runs the rounds"):
        for k in range(20):
            run.play_and_ingest(MDP, [0], k)


@pytest.mark.parametrize("algo", ["ucrl-vtr", "linopt-vi", "linopt-po", "dp-ucbvi"])
def test_every_family_with_an_ldp_mode_runs(algo: str) -> None:
    res = privrl.simulate(algo, privacy="secagg", mechanism="gaussian", epsilon=1.0,
                          episodes=60, seeds=1, schedule="batch:20",
                          knobs={"pooled": True} if algo == "dp-ucbvi" else None)
    ledger = res.record["ledger"]
    assert ledger["epsilon"] <= 1.0 + 1e-9
    assert ledger["by_mechanism"]["secagg:cohort"]["count"] == 3


def test_cli_run_with_secagg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`privrl run --privacy secagg` picks the Gaussian mechanism and states its assumptions
    (and its noise shares) on the run and in the ledger."""
    out = tmp_path / "r"
    assert cli_main(["run", "--privacy", "secagg", "--episodes", "40", "--seeds", "1",
                     "--schedule", "batch:20", "--dropout", "0.2", "--secagg-noise", "ddg",
                     "--quiet",
                     "--out", str(out)]) == 0
    assert "cohorts of 20, dropout <= 0.2, collusion <= 0.1" in capsys.readouterr().err
    result = json.loads((out / "summary.json").read_text())["results"][0]
    assert result["config"]["mechanism"] == "gaussian"
    assert result["config"]["dropout"] == 0.2
    notes = " ".join(c["note"] for c in result["ledger"]["charges"])
    assert "dropout <= 0.2" in notes and ">= 16 inputs to release" in notes
    assert result["config"]["secagg_noise"] == "ddg" and "14 honest ddg noise shares" in notes


def test_cohort_assumptions_on_a_boundary_without_cohorts_are_refused_at_binding() -> None:
    """dropout, collusion and secagg_noise belong to secure aggregation: an LDP run that states
    them is refused where a run is made (a server answers 422 invalid_run), naming why."""
    import pytest
    from privrl.algorithms import registry
    from privrl.config import RunConfig

    config = RunConfig(algo="dp-ucbvi", n_states=6, n_actions=2, horizon=20, episodes=100,
                       privacy="ldp", epsilon=1.0, mechanism="laplace", dropout=0.2)
    with pytest.raises(ValueError, match="with privacy 'ldp' leave them out"):
        registry.bind(config)


def test_each_boundary_checks_its_own_configuration() -> None:
    """`TrustBoundary.check_config`, asked where a run is bound: by default a boundary without
    cohorts refuses their assumptions; secure aggregation refuses, at binding and before any
    calibration, a schedule that is not batch:B and cohorts that leave no honest noise share."""
    local = trust.local_boundary()
    assert local is not None
    ldp = RunConfig(**{**config(privacy=local.name, schedule=None).model_dump(),
                       "collusion": 0.2})
    with pytest.raises(ValueError, match=f"with privacy {local.name!r} leave them out"):
        local.check_config(ldp)
    local.check_config(ldp.model_copy(update={"collusion": None}))  # nothing to refuse
    secagg = trust.get("secagg")
    secagg.check_config(config(dropout=0.2, collusion=0.1))
    secagg.check_config(config(schedule=None))  # its default cohorts
    hopeless = config(schedule="batch:4", dropout=0.5, collusion=0.5)
    with pytest.raises(ValueError, match="no honest noise share"):
        secagg.check_config(hopeless)
    with pytest.raises(ValueError, match="no honest noise share"):
        bind(hopeless)  # refused at binding: a server answers 422 when the run is created
    with pytest.raises(ValueError, match="batch:B"):
        bind(config(schedule="every"))
