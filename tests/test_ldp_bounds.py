"""LDP acceptance bounds: derived from the mechanism's tail, tight, and one user's influence.

An honest local report is a clean value in [0, clean_max] per entry plus calibrated noise. The
server accepts an entry within `Calibration.acceptance_margin()` of that range: the noise tail
at a false-refusal probability of FALSE_REFUSAL per honest report. A dishonest user can then move
one billboard entry by at most `max_shift(calibration)` noise scales.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from privrl.algorithms import bind
from privrl.config import RunConfig
from privrl.privacy.calibration import FALSE_REFUSAL, Calibration
from privrl.privacy.mechanisms import Gaussian, Laplace
from privrl.privacy.noise import FLOAT_NOISE as FLOAT
from privrl.seeding import generator
from support.server import Apps, claim, create, play, public, spec


def max_shift(cal: Calibration) -> float:
    """The largest change one dishonest user can make to one billboard entry, in noise scales:
    any accepted value minus any honest clean value, over the noise scale."""
    if not cal.noise_scale:
        return 0.0
    return max((f.clean_max - f.clean_min + cal.acceptance_margin(FALSE_REFUSAL, f.name)) / f.scale
               for f in cal.families)


@pytest.mark.parametrize("mechanism", [Laplace(1.0, FLOAT), Gaussian(1.0, FLOAT)],
                         ids=["laplace", "gaussian"])
def test_max_abs_bound_refuses_honest_reports_at_the_stated_rate(mechanism) -> None:
    """With p = 5% and 20 entries, honest reports exceed the bound about 4.9% of the time."""
    n, p, reports = 20, 0.05, 20_000
    t = mechanism.max_abs_bound(n, p)
    noise = mechanism.sample(generator(5, "bound-test"), (reports, n))
    rate = float(np.mean(np.abs(noise).max(axis=1) > t))
    exact = 1.0 - (1.0 - p / n) ** n  # P(max > t) when the per-entry tail is exactly p / n
    sd = math.sqrt(exact * (1 - exact) / reports)
    assert abs(rate - exact) < 5 * sd, (rate, exact)  # the bound is the tail, not looser


def test_gaussian_bound_inverts_the_tail_exactly() -> None:
    mech = Gaussian(3.0)
    t = mech.max_abs_bound(1680, FALSE_REFUSAL)
    assert math.erfc(t / (3.0 * math.sqrt(2))) * 1680 == pytest.approx(FALSE_REFUSAL, rel=1e-9)


def test_laplace_bound_is_b_log_n_over_p() -> None:
    assert Laplace(2.0).max_abs_bound(100, 1e-9) == pytest.approx(2.0 * math.log(1e11))


def demo_config(mechanism: str) -> RunConfig:
    """The figures of docs/explanation/dp-ucbvi.md: RiverSwim (S = 6, A = 2, H = 20), LDP, eps 1."""
    delta = 1e-5 if mechanism == "gaussian" else 0.0
    return RunConfig(n_states=6, n_actions=2, horizon=20, episodes=2000, privacy="ldp",
                     epsilon=1.0, mechanism=mechanism, delta=delta)


@pytest.mark.parametrize(("mechanism", "shift"), [("laplace", 28.87), ("gaussian", 7.35)])
def test_one_dishonest_user_moves_an_entry_by_a_few_noise_scales(mechanism, shift) -> None:
    """Those figures under integer noise (28.16 / 7.23 with float noise: the discrete
    Laplace tail and the grid step widen the margin a little)."""
    cal = bind(demo_config(mechanism)).calibration()
    assert cal.report_entries() == 20 * 6 * 2 * 6 + 20 * 6 * 2
    assert max_shift(cal) == pytest.approx(shift, abs=0.01)


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_server_accepts_up_to_the_bound_and_refuses_beyond(apps: Apps, mechanism: str) -> None:
    client = apps()
    delta = 1e-5 if mechanism == "gaussian" else 0.0
    config = spec("ldp", episodes=8, epsilon=1.0, mechanism=mechanism, delta=delta)
    run_id = create(client, config)
    play(client, run_id, config, 3)  # honest reports pass
    cal = bind(public(config)).calibration()
    margin = cal.acceptance_margin()
    assert 0 < margin < 40 * cal.noise_scale
    shapes = {f.name: f.shape for f in cal.families}

    def report(fill: float, poke: tuple[str, int, float] | None = None) -> int:
        arrays = {n: [fill] * math.prod(s) for n, s in shapes.items()}
        if poke:
            arrays[poke[0]][poke[1]] = poke[2]
        body = {"kind": "noisy", "ticket": claim(client, run_id)["ticket"], "arrays": arrays}
        resp = client.post(f"/v1/runs/{run_id}/reports", json=body)
        if resp.status_code == 422:
            detail = resp.json()["detail"]
            where = f"[{poke[1] if poke else 0}] is "
            assert where + "outside" in detail or where + "not on this run's public grid" in detail
        return resp.status_code

    before = client.get(f"/v1/runs/{run_id}/billboard").json()["arrays"]["sas"]
    top = math.floor(1.0 + margin)  # the most one user can add to every entry, on the grid
    assert report(top + 0.5) == 422  # off the integer grid: refused
    assert report(top) == 200
    after = client.get(f"/v1/runs/{run_id}/billboard").json()["arrays"]["sas"]
    moved = np.subtract(after, before)
    assert moved.max() == top
    assert max_shift(cal) - 1.0 / cal.noise_scale < top / cal.noise_scale <= max_shift(cal)
    assert report(0.0, ("sas", 7, 1.0 + margin * (1 + 1e-6))) == 422
    assert report(0.0, ("r", 3, -margin * (1 + 1e-6))) == 422
    assert client.get(f"/v1/runs/{run_id}").json()["status"]["reported"] == 4
