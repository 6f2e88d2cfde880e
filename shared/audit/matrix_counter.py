"""Black-box audit of the matrix-factorization counter (`privrl.privacy.matrix_counter`): an
empirical lower bound on the epsilon of all its releases over a stream of K items.

The two worlds are count streams of K users that differ in the first one (count 1 vs 0; the
others are the same in both, so their known contribution is subtracted). The auditor sees only
the K rounded releases r_1..r_K. It inverts the public factorization, w ~ E (r_t - r_{t-1}),
and thresholds the log-likelihood ratio of the declared Gaussian on w (mean E e_1 vs 0); the
threshold search, Clopper-Pearson rates and the bound are `privrl.audit.lower_bound`'s. The counter
is calibrated by the library (`privrl.privacy.calibration.calibrate`) for one count of l2
sensitivity 1. The releases are also checked to lie on their integer grid.
"""

from __future__ import annotations

import math
import time

import numpy as np
from privrl import trust
from privrl.algorithms.base import Family
from privrl.audit.lower_bound import (
    LEAK_ROWS,
    Progress,
    RandomizerAudit,
    check_sizes,
    threshold_test,
)
from privrl.config import RunConfig
from privrl.privacy.calibration import calibrate
from privrl.privacy.matrix_counter import (
    ENCODER_BITS,
    MatrixCounter,
    encoder_coefficients,
    encoder_column_norm,
)
from privrl.privacy.mechanisms import Gaussian
from privrl.privacy.profile import gaussian_epsilon
from privrl.privacy.tree import NoiseSampler

CHUNK_RUNS = 100_000  # independent runs simulated at once (one counter entry each)
CounterFactory = type[MatrixCounter]


def matrix_releases(noise: NoiseSampler, episodes: int, first: int, runs: int, seed: int,
                    counter: CounterFactory = MatrixCounter, bands: int | None = None
                    ) -> np.ndarray:
    """(runs, K) releases of independent counters over the stream (first, 0, ..., 0)."""
    ctr = counter((runs,), noise, [seed], "audit", episodes, bands)
    out = np.empty((runs, episodes), dtype=np.int64)
    for t in range(episodes):
        item = np.full((1, runs), first if t == 0 else 0, dtype=np.int64)
        ctr.add(item)
        out[:, t] = ctr.release()[0]
    return out


def _statistic(releases: np.ndarray, sigma: float, bands: int | None) -> np.ndarray:
    """The declared Gaussian's LLR of 'first user counted' against 'not', per run: on
    w = E diff(r), (2 <w, E e_1> - ||E e_1||^2) / (2 sigma^2)."""
    episodes = releases.shape[1]
    col = encoder_coefficients(episodes, bands).astype(np.float64)
    steps = np.diff(releases, axis=1, prepend=0).astype(np.float64)
    # w_t = sum_{k<=t} E_k steps_{t-k}, so <w, E e_1> = sum_j steps_j sum_i E_{i+j} E_i
    lagged = np.array([col[j:] @ col[: episodes - j] for j in range(episodes)])
    return (2.0 * (steps @ lagged) - col @ col) / (2.0 * sigma * sigma)


def audit_matrix_counter(
    config: RunConfig,
    rng: np.random.Generator,
    samples: int = 200_000,
    confidence: float = 0.95,
    pilot: int | None = None,
    counter: CounterFactory = MatrixCounter,
    progress: Progress | None = None,
    bands: int | None = None,
) -> RandomizerAudit:
    """Lower-bound the epsilon of the matrix counter's K = config.episodes releases, calibrated
    to config's (eps, delta) with l2 sensitivity 1 (banded if `bands`); `counter` may be
    swapped to audit another implementation against the same declaration."""
    if config.mechanism != "gaussian":
        raise ValueError("the matrix counter is a Gaussian (zCDP) mechanism: use --mechanism"
                         " gaussian")
    check_sizes(samples, confidence)
    say = progress or (lambda line: None)
    start = time.perf_counter()
    episodes, delta = config.episodes, config.delta
    counter_config = config.model_copy(update={
        "privacy": trust.central_boundary().name, "counter": "matrix", "counter_bands": bands,
        "schedule": "every"})
    calibration = calibrate(counter_config, [Family("count", (1,), 1.0, 1.0)])
    noise = calibration.counter_sampler("count")
    if not isinstance(noise, Gaussian) or not noise.sigma:
        raise ValueError("the configuration releases nothing with noise: there is nothing to audit")

    def draw(counted: bool, n: int) -> np.ndarray:
        """The statistic over n runs whose first user is counted (x) or not (y)."""
        parts = [_statistic(matrix_releases(noise, episodes, int(counted),
                                            min(CHUNK_RUNS, n - done),
                                            int(rng.integers(0, 2**63)), counter, bands),
                            noise.sigma, bands)
                 for done in range(0, n, CHUNK_RUNS)]
        return np.concatenate(parts)

    pilot, bound = threshold_test(draw, samples, pilot, confidence, delta, say)
    leak_rows = matrix_releases(noise, episodes, 1, LEAK_ROWS, int(rng.integers(0, 2**63)),
                                counter, bands).astype(np.float64)
    return RandomizerAudit(
        algo="matrix counter",
        release=(f"{bands}-banded " if bands else "")
        + f"matrix-factorization counter over {episodes} release(s)",
        mechanism="gaussian",
        epsilon=config.epsilon,
        delta=delta,
        shape=(config.n_states, config.n_actions, config.horizon),
        families=("count",),
        noise_scale=noise.sigma / 2**ENCODER_BITS,
        differing_entries=1,
        noisy_copies=episodes,
        pair_epsilon=gaussian_epsilon(
            math.sqrt(2.0 * noise.rho(encoder_column_norm(episodes, bands))), delta),
        confidence=confidence,
        samples=samples,
        pilot=pilot,
        seconds=time.perf_counter() - start,
        **bound,
        float_entries=leak_rows.size,
        off_grid=int((leak_rows != np.rint(leak_rows)).sum()),
    )
