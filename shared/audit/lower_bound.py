"""Black-box privacy auditing of the local randomizer and of the central (JDP) release: an
empirical lower bound on epsilon.

In the spirit of Google's DP stochastic tester and of the auditing literature (Jagielski et al.
2020, Nasr et al. 2021): take two neighbouring inputs of the randomizer (two trajectories, the
worst case under replace-one for the declared mechanism), draw many outputs for each, and use a
threshold test on the log-likelihood ratio of the *declared* mechanism. Any test with true
positive rate TPR and false positive rate FPR proves, for an (eps, delta)-DP randomizer,

    TPR <= e^eps FPR + delta,   so   eps >= ln((TPR - delta) / FPR).

Clopper-Pearson bounds on the two rates (TPR from below, FPR from above, each at level
alpha / 2) make this a lower bound that holds with probability >= 1 - alpha. The threshold is
chosen on separate pilot samples, so the bound is not biased by the search. A bound above the
declared epsilon is proof (at that confidence) that the randomizer is less private than claimed.

The central release is audited the same way: the two worlds are runs of K users that differ in
the first one, the outputs are every billboard release the real tree privatizer makes over the
run, and the declared loss is that of the tree's levels together (the first user enters one node
per level), which is what the calibration spends the whole epsilon on.

Both audits also test a sample of outputs for floating-point leaks (`privrl.audit.float_leaks`):
how many entries' clean values the float bits alone prove, and how many lie off their declared
grid; either is a finding whatever the epsilon bound says.

The beta quantiles are computed here (continued fraction of the regularized incomplete beta
function and bisection), so scipy is not a runtime dependency.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import lru_cache, partial
from typing import Any

import numpy as np
from privrl import trust
from privrl.algorithms import registry
from privrl.algorithms.base import Algorithm, Played
from privrl.algorithms.registry import bind
from privrl.audit.float_leaks import LeakReport, count_candidates, float_leaks
from privrl.config import RunConfig
from privrl.privacy.accountant import Ledger
from privrl.privacy.calibration import Calibration
from privrl.privacy.mechanisms import Gaussian
from privrl.privacy.privatizers import Central, Privatizer, randomize_locally
from privrl.privacy.profile import gaussian_epsilon
from privrl.privacy.tree import levels_released
from privrl.run import Run
from privrl.stats import Stats
from privrl.worlds import make
from privrl.worlds.rollout import Trajectories

LocalRandomizer = Callable[[Stats, Calibration, Sequence[np.random.Generator]], Stats]
CentralFactory = Callable[[Calibration, Sequence[int], int], Privatizer]  # (cal, seeds, items)
CHUNK_VALUES = 4_000_000  # noise values drawn per call of the randomizer (bounds the memory)
TIE = 1e-9  # statistic values within this of the threshold count as reaching it (atoms)
PILOT_EVENTS = 25  # a threshold is only chosen where the pilot saw this many events each side
LEAK_ROWS = 200  # outputs whose every entry the float-leak test reads (exact, ~0.1 ms an entry)
Progress = Callable[[str], None]


# --- Clopper-Pearson without scipy -------------------------------------------------------------


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (modified Lentz; converges for x < (a+1)/(a+b+2))."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 200_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            return h
    raise ArithmeticError(f"incomplete beta I_{x}({a}, {b}) did not converge")


def beta_cdf(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b): the Beta(a, b) CDF at x."""
    if a <= 0 or b <= 0:
        raise ValueError(f"beta parameters must be > 0, got a={a}, b={b}")
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def beta_quantile(q: float, a: float, b: float) -> float:
    """x with I_x(a, b) = q (bisection; the CDF is increasing), for q in (0, 1)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"a quantile level must lie in (0, 1), got {q}")
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if beta_cdf(mid, a, b) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return 0.5 * (lo + hi)


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided Clopper-Pearson bounds (lower, upper) on a binomial rate, each at level alpha:
    P(p < lower) <= alpha and P(p > upper) <= alpha, from k successes in n trials."""
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    lower = 0.0 if k == 0 else beta_quantile(alpha, k, n - k + 1)
    upper = 1.0 if k == n else beta_quantile(1.0 - alpha, k + 1, n - k)
    return lower, upper


def epsilon_from_rates(tpr: float, fpr: float, delta: float) -> float:
    """The epsilon a test with these rates proves: ln((TPR - delta) / FPR), at least 0."""
    if tpr - delta <= 0.0 or tpr - delta <= fpr:
        return 0.0
    if fpr <= 0.0:
        return math.inf
    return math.log((tpr - delta) / fpr)


# --- the two neighbouring users ---------------------------------------------------------------


@dataclass(frozen=True)
class NeighbourPair:
    """Two trajectories (one user replaced by another) and their clean released statistics."""

    x: Played
    y: Played
    fx: np.ndarray  # the released families of x, flattened and concatenated (calibration order)
    fy: np.ndarray
    loss: float  # the declared mechanism's exact loss on this pair (pure eps, or mu for Gaussian)


def _trajectory(states: Sequence[int], actions: Sequence[int], rewards: Sequence[float]
                ) -> Trajectories:
    """One trajectory as a batch of one (the shape user statistics take)."""
    return Trajectories(np.asarray([states], dtype=np.int64), np.asarray([actions], dtype=np.int64),
                        np.asarray([rewards], dtype=np.float64))


@lru_cache(maxsize=8)
def _first_message(config_json: str) -> dict[str, np.ndarray]:
    """The policy message a fresh run of this configuration serves its first user (one
    replica): what every user's statistics are computed against before anything is released
    (e.g. UCRL-VTR's optimistic value tables)."""
    run = Run(RunConfig.model_validate_json(config_json), [0])
    return {k: np.array(v[:1], copy=True) for k, v in run.message().items()}


def _message(algorithm: Algorithm, traj: Played) -> dict[str, np.ndarray]:
    """The run's first message, with a deterministic policy that plays a tabular trajectory's
    actions where it went (else 0) when the message carries actions."""
    cfg = algorithm.config
    message = dict(_first_message(cfg.model_dump_json()))
    if "actions" in message and isinstance(traj, Trajectories):
        horizon = traj.actions.shape[1]
        actions = np.zeros((1, horizon, cfg.n_states), dtype=np.int64)
        actions[0, np.arange(horizon), traj.states[0, :-1]] = traj.actions[0] % max(
            cfg.n_actions, 1)
        message["actions"] = actions
    return message


def _clean_stats(algorithm: Algorithm, traj: Played) -> Stats:
    """One user's clean statistics (a batch of one) under the algorithm."""
    return algorithm.user_statistics(traj, _message(algorithm, traj))


def count_families(config: RunConfig, rng: np.random.Generator, trials: int = 8
                   ) -> tuple[str, ...]:
    """The released families whose clean values are whole numbers for any user (counts), as the
    open library computes them for random trajectories with random rewards in [0, 1); none
    when the algorithm's statistics cannot be computed from a tabular trajectory."""
    calibration = bind(config).calibration()
    s, a, h = config.n_states, config.n_actions, config.horizon
    whole = set(calibration.released)
    try:
        algorithm = bind(config)
        for _ in range(trials):
            traj = _trajectory(rng.integers(0, s, h + 1), rng.integers(0, a, h), rng.random(h))
            stats = _clean_stats(algorithm, traj)
            whole = {n for n in whole if np.all(np.mod(np.asarray(stats[n], float), 1.0) == 0)}
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return ()
    return tuple(n for n in calibration.released if n in whole)


def released_vector(algorithm: Algorithm, calibration: Calibration, traj: Played
                    ) -> np.ndarray:
    """One user's clean released statistics, flattened in calibration order."""
    stats = _clean_stats(algorithm, traj)
    return np.concatenate([np.asarray(stats[f.name][0], float).ravel()
                           for f in calibration.families])


def _columns(calibration: Calibration) -> tuple[np.ndarray, np.ndarray]:
    """Per flattened entry (calibration order): its family's noise scale, and whether its noise
    is drawn independently (a symmetric family mirrors its upper triangle's noise: only the
    upper triangle, diagonal included, counts)."""
    scales, free = [], []
    for f in calibration.families:
        shape = tuple(f.shape)
        scales.append(np.full(int(np.prod(shape)), float(f.scale)))
        if getattr(f, "symmetric", False) and len(shape) >= 2:
            upper = np.broadcast_to(np.triu(np.ones(shape[-2:], dtype=bool)), shape)
            free.append(upper.ravel())
        else:
            free.append(np.ones(int(np.prod(shape)), dtype=bool))
    return np.concatenate(scales), np.concatenate(free)


def _differing(calibration: Calibration, fx: np.ndarray, fy: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """The independently noised entries where the two clean inputs differ, and their scales."""
    scales, free = _columns(calibration)
    cols = np.flatnonzero((fx != fy) & free)
    return cols, scales[cols]


def pair_loss(calibration: Calibration, fx: np.ndarray, fy: np.ndarray) -> float:
    """The declared mechanism's loss between two clean inputs: the l1 sum of |diff| / b
    (Laplace) or the l2 norm of diff / sigma (Gaussian), over independently noised entries with
    each family's own scale."""
    cols, scales = _differing(calibration, fx, fy)
    ratio = (fx[cols] - fy[cols]) / scales
    if isinstance(calibration.mechanism, Gaussian):
        return float(np.linalg.norm(ratio))
    return float(np.abs(ratio).sum())


def _audit_world(algorithm: Algorithm) -> Any | None:
    """The algorithm's own world when the audited configuration is its shape (users drawn from
    it are candidates for the worst-case pair), else None."""
    try:
        world = make(type(algorithm).default_world, algorithm.config.horizon)
        algorithm.check_world(world)
    except (ValueError, TypeError):
        return None
    return world


def _candidates(algorithm: Algorithm, rng: np.random.Generator, random_pairs: int
                ) -> list[tuple[Played, Played]]:
    """Pairs of users to try: structured tabular trajectories (every step in a different cell,
    or all steps in one cell, rewards 1 vs 1 or 0) and random ones where the algorithm takes raw
    trajectories; and users played in the algorithm's own world (its message, its `play`)."""
    config = algorithm.config
    s, a, h = config.n_states, config.n_actions, config.horizon
    base = _trajectory([0] * (h + 1), [0] * h, [1.0] * h)
    out: list[tuple[Played, Played]] = []
    try:
        _clean_stats(algorithm, base)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        pass  # it takes another kind of user data: played users only
    else:
        moved = [_trajectory([1 % s] * (h + 1), [1 % a] * h, [r] * h) for r in (1.0, 0.0)]
        walk = _trajectory([i % s for i in range(h + 1)], [i % a for i in range(h)], [1.0] * h)
        walk2 = _trajectory([(i + 1) % s for i in range(h + 1)],
                            [(i + 1) % a for i in range(h)], [1.0] * h)
        out += [(base, m) for m in moved] + [(walk, walk2), (base, walk2)]
        for _ in range(random_pairs):
            x, y = (_trajectory(rng.integers(0, s, h + 1), rng.integers(0, a, h),
                                rng.integers(0, 2, h).astype(float)) for _ in range(2))
            out.append((x, y))
    world = _audit_world(algorithm)
    if world is not None:
        message = _first_message(config.model_dump_json())
        for _ in range(random_pairs):
            x, y = (algorithm.play(world, message, [rng]) for _ in range(2))
            out.append((x, y))
    if not out:
        raise ValueError(f"{config.algo}: no pair of users to audit (it takes no tabular"
                         " trajectory, and its own world is not this configuration's shape)")
    return out


def worst_case_pair(config: RunConfig, rng: np.random.Generator, random_pairs: int = 64
                    ) -> NeighbourPair:
    """The replace-one pair with the largest loss under the declared mechanism, among
    `_candidates`."""
    algorithm = bind(config)
    calibration = algorithm.calibration()
    best: NeighbourPair | None = None
    for x, y in _candidates(algorithm, rng, random_pairs):
        fx, fy = (released_vector(algorithm, calibration, t) for t in (x, y))
        loss = pair_loss(calibration, fx, fy)
        if best is None or loss > best.loss + 1e-12:
            best = NeighbourPair(x, y, fx, fy, loss)
    assert best is not None
    return best


# --- sampling and the test --------------------------------------------------------------------


def llr_statistic(calibration: Calibration, pair: NeighbourPair, out: np.ndarray) -> np.ndarray:
    """ln p(out | x) - ln p(out | y) under the declared mechanism, per row of `out` (over the
    independently noised entries where the pair differs, each at its family's scale)."""
    cols, scale = _differing(calibration, pair.fx, pair.fy)
    y, fx, fy = out[:, cols], pair.fx[cols], pair.fy[cols]
    if isinstance(calibration.mechanism, Gaussian):
        return (((y - fy) ** 2 - (y - fx) ** 2) / (2.0 * scale**2)).sum(axis=1)
    return ((np.abs(y - fy) - np.abs(y - fx)) / scale).sum(axis=1)


def _batched(calibration: Calibration, rows: int) -> Calibration:
    """The same calibration with a leading batch axis on every family: one randomizer call then
    draws `rows` independent reports (the randomizer noises every entry independently)."""
    fams = tuple(replace(f, shape=(rows, *f.shape)) for f in calibration.families)
    return replace(calibration, families=fams)




def _flat(stats: Stats, calibration: Calibration, rows: int) -> np.ndarray:
    """Released families of `rows` outputs, flattened per row in calibration order."""
    return np.concatenate([np.asarray(stats[f.name]).reshape(rows, -1)
                           for f in calibration.families], axis=1)


def _chunks(calibration: Calibration, n: int, copies: int = 1) -> list[int]:
    """Row counts of the batches that draw `n` outputs within CHUNK_VALUES noise values each."""
    chunk = max(1, CHUNK_VALUES // max(calibration.report_entries() * copies, 1))
    return [min(chunk, n - done) for done in range(0, n, chunk)]


def sample_statistic(
    config: RunConfig,
    pair: NeighbourPair,
    which: str,
    n: int,
    rng: np.random.Generator,
    randomizer: LocalRandomizer = randomize_locally,
) -> np.ndarray:
    """The LLR statistic of `n` outputs of the randomizer on the pair's `which` ('x' or 'y')."""
    calibration = bind(config).calibration()
    clean = _clean_stats(bind(config), pair.x if which == "x" else pair.y)
    parts: list[np.ndarray] = []
    for rows in _chunks(calibration, n):
        batched = _batched(calibration, rows)
        stats = {f.name: np.asarray(clean[f.name])[:, None] for f in calibration.families}
        out = _flat(randomizer(stats, batched, [rng]), calibration, rows)
        parts.append(llr_statistic(calibration, pair, out))
    return np.concatenate(parts) if parts else np.empty(0)


def sample_central_statistic(
    config: RunConfig,
    pair: NeighbourPair,
    which: str,
    n: int,
    rng: np.random.Generator,
    privatizer: CentralFactory = Central,
) -> np.ndarray:
    """The LLR statistic of `n` runs of the central (tree) privatizer over K = config.episodes
    users: the pair's `which` user first, then K - 1 copies of user y (the same in both worlds).

    The first user enters exactly the nodes released at t = 1, 2, 4, ... (each B(2^j) is a
    single node: the exact prefix sum plus fresh noise), so the test sums the declared
    mechanism's LLR over those releases, after removing the other users' known contribution.
    The real privatizer runs once per batch, with every family widened by a batch axis (its
    entries are noised independently), so a batch of rows is a batch of independent runs.
    """
    calibration = bind(config).calibration()
    algorithm = bind(config)
    first = _clean_stats(algorithm, pair.x if which == "x" else pair.y)
    other = _clean_stats(algorithm, pair.y)
    episodes = config.episodes
    singles = [1 << j for j in range(levels_released(episodes))]
    parts: list[np.ndarray] = []
    for rows in _chunks(calibration, n, len(singles)):
        batched = _batched(calibration, rows)
        central = privatizer(batched, [int(rng.integers(0, 2**63))], episodes)
        ledger, llr = Ledger(), np.zeros(rows)
        for t in range(1, episodes + 1):
            user = first if t == 1 else other
            central.ingest({f.name: np.broadcast_to(np.asarray(user[f.name])[:, None],
                                                    (1, rows, *f.shape[1:]))
                            for f in batched.families}, ledger)
            if t in singles:
                out = _flat(central.release(), calibration, rows) - (t - 1) * pair.fy
                llr += llr_statistic(calibration, pair, out)
        parts.append(llr)
    return np.concatenate(parts) if parts else np.empty(0)


def counts_at(tx: np.ndarray, ty: np.ndarray, tau: float) -> tuple[int, int]:
    """True and false positives of the test 'statistic >= tau' (ties count)."""
    return int((tx >= tau - TIE).sum()), int((ty >= tau - TIE).sum())


def bound_at(tau: float, tx: np.ndarray, ty: np.ndarray, alpha: float,
             delta: float) -> dict[str, Any]:
    """The test 'statistic >= tau' on the main samples: its counts, Clopper-Pearson rates and
    the epsilon they prove (the RandomizerAudit fields of the bound)."""
    tp, fp = counts_at(tx, ty, tau)
    lo = clopper_pearson(tp, len(tx), alpha / 2)[0]
    hi = clopper_pearson(fp, len(ty), alpha / 2)[1]
    return dict(threshold=tau, true_positives=tp, false_positives=fp, tpr_lower=lo,
                fpr_upper=hi, lower_bound=epsilon_from_rates(lo, hi, delta))


def check_sizes(samples: int, confidence: float) -> None:
    """Refuse a confidence outside (0, 1), or fewer than 10 samples per user."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if samples < 10:
        raise ValueError(f"need at least 10 samples per user, got {samples}")


def threshold_test(draw: Callable[[bool, int], np.ndarray], samples: int, pilot: int | None,
                   confidence: float, delta: float, say: Progress) -> tuple[int, dict[str, Any]]:
    """The pilot (default: samples / 4, at least 1000) chooses the threshold, `samples` more
    outputs per user bound epsilon at it; `draw(x, n)` gives n statistics of user x (True) or y.
    Returns the pilot's size and the RandomizerAudit fields of the bound."""
    alpha = 1.0 - confidence
    pilot = max(1000, samples // 4) if pilot is None else pilot
    say(f"drawing {pilot} pilot outputs per user to choose the threshold")
    tau = choose_threshold(draw(True, pilot), draw(False, pilot), samples, alpha, delta)
    say(f"drawing {samples} outputs per user for the bound")
    return pilot, bound_at(tau, draw(True, samples), draw(False, samples), alpha, delta)


def choose_threshold(tx: np.ndarray, ty: np.ndarray, n_main: int, alpha: float,
                      delta: float) -> float:
    """The threshold whose bound, projected to `n_main` samples, is largest on the pilot."""
    n = len(tx)
    levels = 1.0 - np.geomspace(0.5, min(0.5, 3.0 / n), 48)
    taus = set(np.quantile(tx, levels).tolist()) | {float(tx.max())}
    best_tau, best = float(np.median(tx)), -1.0
    scale = n_main / n
    for tau in sorted(taus):
        tp, fp = counts_at(tx, ty, tau)
        if min(tp, fp) < PILOT_EVENTS:  # the pilot cannot tell such rates apart from noise
            continue
        tp_m, fp_m = min(n_main, round(tp * scale)), min(n_main, round(fp * scale))
        if tp_m == 0:
            continue
        lo = clopper_pearson(tp_m, n_main, alpha / 2)[0]
        hi = clopper_pearson(fp_m, n_main, alpha / 2)[1]
        bound = epsilon_from_rates(lo, hi, delta)
        if bound > best:
            best_tau, best = tau, bound
    return best_tau


@dataclass(frozen=True)
class RandomizerAudit:
    """The outcome of one audit: the declared epsilon and the lower bound the samples prove."""

    algo: str
    release: str  # what was audited: the local randomizer, or the central release over K users
    mechanism: str
    epsilon: float  # declared
    delta: float
    shape: tuple[int, int, int]  # (S, A, H)
    families: tuple[str, ...]
    noise_scale: float
    differing_entries: int  # entries where the two users' statistics differ
    noisy_copies: int  # independently noised copies of them in the release (tree levels)
    pair_epsilon: float  # white-box: the exact epsilon (at delta) of the declared mechanism on
    #                      the pair; the best any black-box test could approach
    lower_bound: float
    confidence: float
    samples: int  # per user, for the bound (plus `pilot` per user to choose the threshold)
    pilot: int
    threshold: float
    true_positives: int
    false_positives: int
    tpr_lower: float
    fpr_upper: float
    seconds: float
    float_entries: int = 0  # output entries the float-leak test read
    float_proven: int = 0  # of them, entries whose clean value the float bits prove
    float_wrong: int = 0  # proven values that differ from the true clean value (0 if sound)
    off_grid: int = 0  # entries off their declared grid

    @property
    def exceeded(self) -> bool:
        """Whether the samples prove more privacy loss than declared (a finding)."""
        return self.lower_bound > self.epsilon

    @property
    def leaks(self) -> bool:
        """Whether the float-leak test proved clean values or found entries off their grid."""
        return self.float_proven > 0 or self.off_grid > 0

    def to_dict(self) -> dict[str, object]:
        """JSON-ready fields (plus `exceeded` and `leaks`)."""
        return {**asdict(self), "exceeded": self.exceeded, "leaks": self.leaks}


Sampler = Callable[[RunConfig, NeighbourPair, str, int, np.random.Generator], np.ndarray]
Outputs = Callable[[RunConfig, Stats, int, np.random.Generator], Stats]  # rows released


def local_outputs(config: RunConfig, clean: Stats, rows: int, rng: np.random.Generator,
                  randomizer: LocalRandomizer = randomize_locally) -> Stats:
    """`rows` reports of the local randomizer on one user's clean statistics."""
    calibration = bind(config).calibration()
    stats = {f.name: np.asarray(clean[f.name])[:, None] for f in calibration.families}
    return randomizer(stats, _batched(calibration, rows), [rng])


def central_outputs(config: RunConfig, clean: Stats, rows: int, rng: np.random.Generator,
                    privatizer: CentralFactory = Central) -> Stats:
    """`rows` independent first releases (t = 1) of the central privatizer after one user."""
    calibration = bind(config).calibration()
    batched = _batched(calibration, rows)
    central = privatizer(batched, [int(rng.integers(0, 2**63))], config.episodes)
    central.ingest({f.name: np.broadcast_to(np.asarray(clean[f.name])[:, None],
                                            (1, rows, *f.shape[1:]))
                    for f in batched.families}, Ledger())
    return central.release()


def leak_test(config: RunConfig, clean: Stats, outputs: Stats, rows: int,
              counts: Sequence[str]) -> tuple[LeakReport, int]:
    """The float-leak test on `rows` outputs of one user's clean statistics `clean` in the
    `counts` families: what it proves, and how many proven values are wrong (compared with the
    known clean values)."""
    calibration = bind(config).calibration()
    kind = calibration.mechanism_name if config.noise != "opendp" else "opendp"
    total, wrong = LeakReport(), 0
    for fam in calibration.families:
        cands = count_candidates(fam.clean_min, fam.clean_max, 1)
        if cands is None or fam.name not in counts:
            continue
        values = np.asarray(outputs[fam.name]).reshape(rows, -1)
        truth = np.broadcast_to(np.asarray(clean[fam.name], float).reshape(1, -1), values.shape)
        found = float_leaks(values, fam.scale, kind, cands, getattr(fam, "grid", None))
        proven = ~np.isnan(found.clean)
        wrong += int((found.clean[proven] != truth.ravel()[proven]).sum())
        total.add(found)
    return total, wrong


def local_algorithms() -> tuple[str, ...]:
    """The registered algorithms that run across the local boundary: those whose randomizer
    `audit_local_randomizer` audits."""
    local = trust.local_boundary()
    return tuple(n for n in registry.names()
                 if local is not None and registry.get(n).refuses(local) is None)


def audit_local_randomizer(
    config: RunConfig,
    rng: np.random.Generator,
    samples: int = 200_000,
    confidence: float = 0.95,
    pilot: int | None = None,
    randomizer: LocalRandomizer = randomize_locally,
    progress: Progress | None = None,
) -> RandomizerAudit:
    """Lower-bound the local randomizer's epsilon on the worst-case pair of users.

    `config` fixes the mechanism, (eps, delta) and the world shape (its privacy mode is taken as
    LDP); `rng` drives every draw (pair search, pilot, samples). `randomizer` defaults to the
    library's; pass another to audit it against the same declaration.
    """
    local = trust.local_boundary()
    if local is None:
        raise ValueError("no registered trust boundary has users noise their own reports")
    config = config.model_copy(update={"privacy": local.name})
    return _audit(config, rng, samples, confidence, pilot,
                  partial(sample_statistic, randomizer=randomizer), "local randomizer", 1,
                  partial(local_outputs, randomizer=randomizer), progress)


def audit_central_release(
    config: RunConfig,
    rng: np.random.Generator,
    samples: int = 200_000,
    confidence: float = 0.95,
    pilot: int | None = None,
    privatizer: CentralFactory = Central,
    progress: Progress | None = None,
) -> RandomizerAudit:
    """Lower-bound the epsilon of the central (JDP) release: every billboard release of a run of
    K = config.episodes users, one of whom is replaced.

    The tree's smoothing is post-processing, so the raw tree is audited, released after every
    episode whatever the configuration's (or its preset's) counter and schedule; the matrix
    counter has its own audit (`privrl.audit.matrix_counter.audit_matrix_counter`). `privatizer`
    defaults to the library's central privatizer; pass another to audit it against the same
    declaration.
    """
    if config.counter == "matrix":
        raise ValueError("the matrix counter has its own audit: `privrl audit randomizer"
                         " --central --counter matrix` (audit_matrix_counter)")
    config = config.model_copy(update={"privacy": trust.central_boundary().name,
                                       "counter": "tree",
                                       "schedule": "every",
                                       "tree_smoothing": None})
    name = f"central release over {config.episodes} episode(s)"
    return _audit(config, rng, samples, confidence, pilot,
                  partial(sample_central_statistic, privatizer=privatizer), name,
                  levels_released(config.episodes),
                  partial(central_outputs, privatizer=privatizer), progress)


def _audit(
    config: RunConfig,
    rng: np.random.Generator,
    samples: int,
    confidence: float,
    pilot: int | None,
    draw: Sampler,
    release: str,
    copies: int,
    outputs: Outputs,
    progress: Progress | None = None,
) -> RandomizerAudit:
    """The threshold test on the worst-case pair and the float-leak test on `outputs` of its
    first user; `copies` is how many independently noised copies of the user's statistics the
    audited release holds (its exact loss scales with it)."""
    check_sizes(samples, confidence)
    calibration = bind(config).calibration()
    if calibration.mechanism is None or not calibration.noise_scale:
        raise ValueError("the configuration releases nothing with noise: there is nothing to audit")
    say = progress or (lambda line: None)
    start = time.perf_counter()
    gaussian = isinstance(calibration.mechanism, Gaussian)
    delta = config.delta if gaussian else 0.0
    say("searching the worst-case pair of users")
    pair = worst_case_pair(config, rng)
    pair_eps = (gaussian_epsilon(pair.loss * math.sqrt(copies), delta) if gaussian
                else pair.loss * copies)
    pilot, bound = threshold_test(
        lambda x, n: draw(config, pair, "x" if x else "y", n, rng), samples, pilot, confidence,
        delta, say)
    say(f"reading clean values off the float bits of {LEAK_ROWS} outputs")
    clean = _clean_stats(bind(config), pair.x)
    leaks, wrong = leak_test(config, clean, outputs(config, clean, LEAK_ROWS, rng), LEAK_ROWS,
                             count_families(config, rng))
    return RandomizerAudit(
        algo=config.algo,
        release=release,
        mechanism=calibration.mechanism_name,
        epsilon=config.epsilon,
        delta=delta,
        shape=(config.n_states, config.n_actions, config.horizon),
        families=calibration.released,
        noise_scale=calibration.noise_scale,
        differing_entries=int((pair.fx != pair.fy).sum()),
        noisy_copies=copies,
        pair_epsilon=pair_eps,
        confidence=confidence,
        samples=samples,
        pilot=pilot,
        seconds=time.perf_counter() - start,
        **bound,
        float_entries=leaks.total,
        float_proven=leaks.proven,
        float_wrong=wrong,
        off_grid=leaks.off_grid,
    )
