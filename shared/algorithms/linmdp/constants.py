"""The public constants of the two private LSVI-UCB algorithms, as pure functions of public numbers.

* `batched_constants`: Luyo et al. 2021, Alg. 2 / App. E.1, with the
  batch schedule's edge cases (erratum 11): B = min(B, K), eps = inf -> B = K, L = ceil(K/B),
  N_K = ceil(K/L), no update after the final batch. Reproduces the paper's reference values.
* `switching_constants`: Ngo, Vietri & Wu, Alg. 1 (ICML 2022): a *sound* calibration
  (errata E3-E6: tree-node variance L Delta_G^2 / rho, target variance
  (ceil(N_max) - 1) Delta_y^2 / rho, the rounds that can occur, where the paper sizes for N_max)
  or the paper's literal one (which under-spends the budget it claims: the ledger charges what its
  scales actually spend). With the papers' sensitivities (Delta_G^2 = 4H,
  Delta_y^2 = 4H (H+1)^2) and N_max it reproduces the paper's reference table (`tight=False`).

Sensitivities (replace one user's trajectory; `gram_sensitivity2`, `target_sensitivity2`): at
each step the Gram item changes by D = phi phi^T - phi' phi'^T, with
||D||_F^2 = ||phi||^4 + ||phi'||^4 - 2 (phi^T phi')^2 <= 2 for ||phi||, ||phi'|| <= 1, attained
by orthogonal unit features, so Delta_G^2 = 2H (the papers' 2 per step squares to 4H). The same
bound holds on the upper-triangle coordinates the symmetric noise is drawn on, whose squared norm
(||D||_F^2 + sum_i D_ii^2) / 2 is at most ||D||_F^2. The target of step h (1-based) is
phi (r + V_{h+1}) with r in [0, 1] and V_{h+1} clipped to [0, H - h], so it changes by at most
2 (H - h + 1): Delta_y^2 = sum_h 4 (H - h + 1)^2 = (2/3) H (H+1) (2H+1) (the papers clip V at H:
4 H (H+1)^2, 1.8x the std at H = 5). A world's public features may allow less per step
(`StepSensitivity`, computed by `common.step_sensitivity`): e.g. lin-cube's Gram 1.29, not
sqrt(2), and targets sqrt(2), not 2, per unit of value range.

Natural logs throughout; the tree depth L of the switching counter is bit_length(K) (E16).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple

CHI_FACTOR_NGO = 25.0**4 * 162.0  # Theorem 16's chi (E11): 63,281,250
CHI_FACTOR_LUYO = 24.0**2 * 18.0  # App. E.1's chi


@dataclass(frozen=True)
class BatchedConstants:
    """Luyo's Alg. 2 constants (App. E.1) for one (K, H, d, eps, delta, p) and batch count B."""

    lam: float
    batches: int  # B
    tree_depth: int  # B0 = ceil(log2 B + 1)
    batch_length: int  # L = ceil(K / B)
    policies: int  # N_K = ceil(K / L): distinct policies played
    sigma_gram: float  # sigma_Lambda: per-entry std of each tree node (a node = one batch sum)
    sigma_target: float  # sigma_u: per-entry std of each release's target noise
    ups: float
    c_k: float
    c: float
    u_k: float
    chi: float
    beta: float


class StepSensitivity(NamedTuple):
    """One step's replace-one sensitivities: the Gram item's squared l2 (upper triangle) and the
    target phi y's l2 per unit of y's range. Generic for ||phi|| <= 1: 2 and 2."""

    gram2: float = 2.0
    target: float = 2.0


GENERIC_STEP = StepSensitivity()


def gram_sensitivity2(horizon: int, step: StepSensitivity = GENERIC_STEP) -> float:
    """The squared replace-one l2 sensitivity of one user's H Gram items: 2 per step (generic)."""
    return step.gram2 * horizon


def target_sensitivity2(horizon: int, step: StepSensitivity = GENERIC_STEP) -> float:
    """The squared replace-one l2 sensitivity of one user's H targets, step h's value clipped
    to [0, H - h]: sum_h (2 (H - h + 1))^2 = (2/3) H (H+1) (2H+1) (generic)."""
    return (step.target / 2.0) ** 2 * 2.0 * horizon * (horizon + 1) * (2 * horizon + 1) / 3.0


def zcdp_batched_sigmas(horizon: int, rounds: int, rho: float,
                        step: StepSensitivity = GENERIC_STEP, weight: float | None = None
                        ) -> tuple[float, float]:
    """The smallest (sigma_Lambda, sigma_u) that spend exactly rho (zCDP) on this schedule: rho/2
    on the Gram counter over `rounds` leaves (a leaf in `weight` node costs: the counter's
    squared largest encoder column norm, by default a tree's bit_length(rounds) levels), rho/2
    on `rounds` target releases, at the sensitivities above."""
    rounds = max(rounds, 1)
    levels = rounds.bit_length() if weight is None else weight
    return (math.sqrt(gram_sensitivity2(horizon, step) * levels / rho),
            math.sqrt(target_sensitivity2(horizon, step) * rounds / rho))


def luyo_batches(episodes: int, horizon: int, d: int, eps: float) -> int:
    """B = ceil((K eps)^{2/5} / (d^{3/5} H^{1/5})), at most K; K when eps = inf (Luyo
    erratum 11)."""
    if math.isinf(eps):
        return episodes
    b = math.ceil((episodes * eps) ** 0.4 / (d**0.6 * horizon**0.2))
    return max(1, min(b, episodes))


def batched_constants(episodes: int, horizon: int, d: int, eps: float, delta: float, p: float,
                      batches: int | None = None, sigmas: tuple[float, float] | None = None
                      ) -> BatchedConstants:
    """App. E.1 verbatim (Ups with B0, not sqrt(B0): erratum 6; C with ln(6KHd/p): erratum 7).

    `batches` overrides B (not privacy-neutral: every sigma is recomputed from it);
    `sigmas` = (sigma_Lambda, sigma_u) replaces the closed forms (another calibration; the
    shift, C, U_K and beta follow); eps = inf gives the non-private limit (no noise, no shift)."""
    K, H = episodes, horizon
    B = luyo_batches(K, H, d, eps) if batches is None else max(1, min(int(batches), K))
    B0 = math.ceil(math.log2(B) + 1.0)
    L = math.ceil(K / B)
    n_k = math.ceil(K / L)
    lam = float(d)
    if math.isinf(eps):
        sig_g = sig_u = 0.0
    else:
        log_term = math.log(32.0 * H * B0 * B / delta) ** 2
        sig_g = (128.0 / eps) * math.sqrt(B * H * B0) * log_term
        sig_u = (128.0 / eps) * H * math.sqrt(H * B) * log_term
    if sigmas is not None:
        sig_g, sig_u = sigmas
    ups = sig_g * B0 * (4.0 * math.sqrt(d) + 2.0 * math.log(6.0 * K * H / p))
    c_k = d * ups
    c = sig_u * (math.sqrt(d) + 2.0 * math.sqrt(math.log(6.0 * K * H * d / p)))
    u_k, chi, beta = batched_beta(K, H, d, lam, c_k, c, p)
    return BatchedConstants(lam, B, B0, L, n_k, sig_g, sig_u, ups, c_k, c, u_k, chi, beta)


def batched_beta(episodes: int, horizon: int, d: int, lam: float, c_k: float, c: float,
                 p: float) -> tuple[float, float, float]:
    """App. E.1's (U_K, chi, beta) from lambda, c_K = d Ups (Ups: the Gram noise's norm) and C
    (the target noise's norm): beta = 24 H sqrt(d (lambda + c_K)) ln chi."""
    K, H = episodes, horizon
    u_k = max(1.0, 2.0 * H * math.sqrt(d * K / (lam + c_k)) + c / (lam + c_k))
    chi = CHI_FACTOR_LUYO * K**2 * d * u_k * H / p
    return u_k, chi, 24.0 * H * math.sqrt(d * (lam + c_k)) * math.log(chi)


Calibration = Literal["sound", "paper"]


@dataclass(frozen=True)
class SwitchingConstants:
    """Ngo's Alg. 1 constants for one (K, H, d, rho, p) and calibration."""

    levels: int  # L = bit_length(K): nodes of the Gram tree a leaf enters
    sigma_node2: float  # per-entry variance of each Gram tree node
    lam_t: float  # high-probability bound on the prefix noise's operator norm (shift 2 lam_t)
    n_max: float  # hard cap of the switch counter (it starts at 1)
    sigma_y2: float  # per-coordinate variance of each release's target noise
    lam_y: float
    u_k: float
    log_chi: float
    beta: float


def switching_constants(episodes: int, horizon: int, d: int, rho: float, p: float,
                        calibration: Calibration = "sound", ridge: float = 1.0,
                        tight: bool = True, step: StepSensitivity = GENERIC_STEP,
                        weight: float | None = None, spread: float | None = None
                        ) -> SwitchingConstants:
    """The sound (default) or the paper-literal constants; rho = inf is the non-private limit
    (no noise, lam_t = 0, no cap), where U_K and beta use `ridge` in place of lam_t. `tight`:
    the sound scales at the sensitivities above, with the target noise sized for the
    ceil(N_max) - 1 rounds that can occur (`rounds_cap`), `step` the world's public per-step
    bounds; False: the papers' (Gram 4H, targets 4H (H+1)^2, N_max rounds), which reproduce its
    golden table. A counter other than the tree over K leaves gives `weight`, the node costs one
    leaf spends (its squared largest encoder column norm), and `spread`, its largest release
    variance in node variances (both the tree's L by default)."""
    K, H = episodes, horizon
    L = int(K).bit_length()
    nodes = L if weight is None else weight
    spread = L if spread is None else spread
    log_3khp = math.log(3.0 * K * H / p)
    if math.isinf(rho):
        node2 = lam_t = sig_y2 = lam_y = 0.0
        n_max = math.inf
    elif calibration == "sound":
        gram2, target2 = ((gram_sensitivity2(H, step), target_sensitivity2(H, step)) if tight
                          else (4.0 * H, 4.0 * H * (H + 1) ** 2))
        node2 = nodes * gram2 / rho
        lam_t = math.sqrt(spread * node2) * (4.0 * math.sqrt(d) + 2.0 * log_3khp)
        n_max = (d * H / math.log(2.0)) * math.log1p(K / (lam_t * d))
        rounds = max(rounds_cap(n_max), 1.0) if tight else n_max
        sig_y2 = target2 * rounds / rho
        lam_y = math.sqrt(sig_y2) * (math.sqrt(d) + 2.0 * math.sqrt(log_3khp))
    elif calibration == "paper":
        lam_t = math.log(K) * (6.0 * math.sqrt(d + 1) + 2.0 * log_3khp) / math.sqrt(2.0 * rho)
        node2 = math.log(K) ** 2 / (2.0 * rho * L)  # the node variance lam_t implies
        n_max = (d * H / math.log(2.0)) * math.log1p(K / (lam_t * d))
        sig_y2 = 6.0 * H**2 * n_max / rho
        lam_y = H * n_max * math.sqrt(log_3khp / rho)
    else:
        raise ValueError(f"unknown calibration {calibration!r}: 'sound' or 'paper'")
    u_k, log_chi, beta = switching_beta(K, H, d, lam_t, lam_y, p, ridge)
    return SwitchingConstants(L, node2, lam_t, n_max, sig_y2, lam_y, u_k, log_chi, beta)


def switching_beta(episodes: int, horizon: int, d: int, lam_t: float, lam_y: float, p: float,
                   ridge: float = 1.0) -> tuple[float, float, float]:
    """Theorem 16's (U_K, ln chi, beta) from lam_t (the Gram noise's norm) and lam_y (the target
    noise's norm), `ridge` in U_K when lam_t = 0: beta = 5 H^2 sqrt(d lam_t ln chi)
    + 6 d H sqrt(ln chi)."""
    K, H = episodes, horizon
    lam = lam_t if lam_t > 0 else ridge
    u_k = max(1.0, 2.0 * H * math.sqrt(d * K / lam) + lam_y / lam)
    log_chi = math.log(CHI_FACTOR_NGO * d * u_k * H / p) + 4.0 * math.log(K)
    beta = 5.0 * H**2 * math.sqrt(d * lam_t * log_chi) + 6.0 * d * H * math.sqrt(log_chi)
    return u_k, log_chi, beta


def rounds_cap(n_max: float) -> float:
    """The most noisy LSVI rounds the cap allows: ceil(N_max) - 1 (the counter starts at 1 and a
    switch needs N_count < N_max); inf without a cap."""
    return math.inf if math.isinf(n_max) else float(max(math.ceil(n_max) - 1, 0))
