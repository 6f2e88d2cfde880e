"""Privacy accounting: zCDP <-> (epsilon, delta) conversions and the per-run ledger.

A run's `Ledger` records every privacy-spending release with the cost computed from the
calibration actually in use (docs: "The ledger"). It describes the worst-case privacy loss of ONE
user under the replace-one-user neighbouring relation, so composition is plain addition: pure
epsilons add (basic composition), zCDP rhos add (Bun & Steinke 2016, Lemma 2.3, also adaptively).
The total is reported as `epsilon_pure + eps(rho, delta)` with the tight zCDP conversion below.
A release that is only (epsilon, delta)-DP (e.g. the smoothed Gaussian perturbation of policy
evaluation, whose variance depends on the data) is charged with both numbers; such charges compose
by basic composition: their epsilons and deltas add to the totals.

The conversion `rho_to_epsilon` is the tight one of Canonne, Kamath & Steinke 2020 (Prop. 12 /
Cor. 13; also Asoodeh et al. 2020): rho-zCDP means Renyi DP of every order alpha > 1 at level
rho * alpha, which implies (epsilon, delta)-DP with

    epsilon = inf_{alpha > 1}  rho alpha + (ln(1/delta) + (alpha - 1) ln(1 - 1/alpha) - ln alpha)
                                           / (alpha - 1).

It is never larger than the classical `rho + 2 sqrt(rho ln(1/delta))` (Bun & Steinke, Prop. 1.3),
which `rho_to_epsilon_classical` keeps available (the papers' reference values use it).

When every zCDP charge of a ledger is a continuous Gaussian release (noise backend 'float'), the
composition is exactly a sqrt(2 rho)-GDP mechanism and the ledger converts rho with that
mechanism's exact privacy profile (`privrl.privacy.profile`; 3-9% below the conversion above).
Integer (discrete Gaussian) noise keeps the zCDP conversion: the continuous profile does not
bound the discrete Gaussian's. Calibration inverts the same conversion (`continuous=`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from privrl.privacy.mechanisms import check_nonneg
from privrl.privacy.noise import noise_label
from privrl.privacy.profile import gaussian_epsilon

__all__ = [
    "Budget",
    "BudgetExhausted",
    "Charge",
    "Ledger",
    "Totals",
    "continuous_gaussian",
    "encode_number",
    "epsilon_to_rho",
    "epsilon_to_rho_classical",
    "pure_to_rho",
    "rdp_to_epsilon",
    "rho_to_epsilon",
    "rho_to_epsilon_classical",
]

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
# Search range for t = alpha - 1 in log space: the optimum is near sqrt(ln(1/delta) / rho), which
# lies inside for every rho in [1e-300, 1e300] and delta in [1e-300, 1 - 1e-16].
_LOG_T_GRID = np.linspace(-420.0, 420.0, 1681)


def _check_delta(delta: float) -> float:
    """Return `delta` as a float, refusing values outside the open interval (0, 1)."""
    delta = float(delta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in the open interval (0, 1), got {delta!r}")
    return delta


def _order_term(log_t: np.ndarray | float, log_inv_delta: float) -> Any:
    """What converting RDP of order alpha = 1 + exp(log_t) to (epsilon, delta) adds to the RDP
    level: ln(1/delta)/(alpha-1) + ln(1 - 1/alpha) - ln(alpha)/(alpha-1)."""
    t = np.exp(log_t)
    log1p_t = np.log1p(t)
    return (log_inv_delta - log1p_t) / t + (log_t - log1p_t)


def _rdp_epsilon(log_t: np.ndarray | float, rho: float, log_inv_delta: float) -> Any:
    """The (epsilon, delta) bound from RDP of order alpha = 1 + exp(log_t) at level rho * alpha."""
    return rho * (1.0 + np.exp(log_t)) + _order_term(log_t, log_inv_delta)


def rdp_to_epsilon(orders: Sequence[float], rdp: Sequence[float] | np.ndarray,
                   delta: float) -> float:
    """The epsilon at `delta` of a mechanism that is Renyi DP of each order `orders[i]` > 1 at
    level `rdp[i]` (and of no other order claimed): Canonne, Kamath & Steinke's conversion
    (Prop. 12) at each order, the best of them. For bounds proven at some orders only (the
    Skellam mechanism's, at integer orders)."""
    delta = _check_delta(delta)
    levels = np.asarray(rdp, dtype=float)
    terms = _order_terms(tuple(orders), delta)
    if terms.shape != levels.shape:
        raise ValueError("one RDP level per order, every order > 1")
    if not (levels >= 0.0).all():  # NaN fails the comparison too
        raise ValueError("RDP levels are non-negative numbers")
    values = levels + terms
    return max(0.0, float(values.min()))


# memoised: a run's Skellam accounting converts curves over the same orders at the same delta
# again and again (every step of its noise's calibration, every release of its plan)
@functools.lru_cache(maxsize=64)
def _order_terms(orders: tuple[float, ...], delta: float) -> np.ndarray:
    """What converting RDP at each of `orders` (each > 1) adds to its level at `delta`
    (`_order_term`), read-only."""
    alphas = np.asarray(orders, dtype=float)
    if alphas.ndim != 1 or alphas.size == 0 or np.any(alphas <= 1.0):
        raise ValueError("one RDP level per order, every order > 1")
    terms = _order_term(np.log(alphas - 1.0), -math.log(delta))
    terms.flags.writeable = False
    return terms


def rho_to_epsilon_classical(rho: float, delta: float) -> float:
    """The classical zCDP -> DP conversion rho + 2 sqrt(rho ln(1/delta)) (looser, closed form)."""
    rho, delta = check_nonneg("rho", rho), _check_delta(delta)
    if rho == 0.0:
        return 0.0
    return rho + 2.0 * math.sqrt(rho * -math.log(delta))


def epsilon_to_rho_classical(epsilon: float, delta: float) -> float:
    """Inverse of the classical conversion: (sqrt(ln(1/delta) + eps) - sqrt(ln(1/delta)))^2."""
    epsilon, delta = check_nonneg("epsilon", epsilon), _check_delta(delta)
    if math.isinf(epsilon):
        return math.inf
    log_inv_delta = -math.log(delta)
    # Same value as (sqrt(l + eps) - sqrt(l))^2, written without cancellation.
    return (epsilon / (math.sqrt(log_inv_delta + epsilon) + math.sqrt(log_inv_delta))) ** 2


def continuous_gaussian(noise: str) -> bool:
    """Whether Gaussian releases drawn by backend `noise` (a name or its ledger label) are
    continuous, so that their composition is converted by the exact Gaussian profile."""
    return noise in ("float", noise_label("float"))


def rho_to_epsilon(rho: float, delta: float, *, continuous: bool = False) -> float:
    """Tight epsilon such that rho-zCDP implies (epsilon, delta)-DP (Canonne-Kamath-Steinke);
    with `continuous`, rho is the total of continuous Gaussian releases: the exact profile of
    sqrt(2 rho)-GDP (never larger)."""
    rho, delta = check_nonneg("rho", rho), _check_delta(delta)
    if rho == 0.0:
        return 0.0
    if math.isinf(rho):
        return math.inf
    if continuous:
        return min(gaussian_epsilon(math.sqrt(2.0 * rho), delta), _cks_epsilon(rho, delta))
    return _cks_epsilon(rho, delta)


def _cks_epsilon(rho: float, delta: float) -> float:
    """The Canonne-Kamath-Steinke conversion of rho-zCDP at delta (rho finite and positive)."""
    # The KL bound (KL <= rho) with Bretagnolle-Huber gives TV <= sqrt(1 - e^-rho) <= delta.
    if -math.expm1(-rho) <= delta * delta:
        return 0.0
    log_inv_delta = -math.log(delta)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        values = _rdp_epsilon(_LOG_T_GRID, rho, log_inv_delta)
    values = np.where(np.isnan(values), np.inf, values)
    i = int(np.argmin(values))
    lo = float(_LOG_T_GRID[max(i - 1, 0)])
    hi = float(_LOG_T_GRID[min(i + 1, len(_LOG_T_GRID) - 1)])
    best = float(values[i])
    # Golden-section refinement inside the grid bracket (the objective is unimodal there).
    a, b = lo, hi
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    fc, fd = float(_rdp_epsilon(c, rho, log_inv_delta)), float(_rdp_epsilon(d, rho, log_inv_delta))
    for _ in range(80):
        if b - a <= 1e-12 * max(1.0, abs(a)):
            break
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - _GOLDEN * (b - a)
            fc = float(_rdp_epsilon(c, rho, log_inv_delta))
        else:
            a, c, fc = c, d, fd
            d = a + _GOLDEN * (b - a)
            fd = float(_rdp_epsilon(d, rho, log_inv_delta))
    best = min(best, fc, fd)
    tight = max(0.0, best)
    return min(tight, rho_to_epsilon_classical(rho, delta))


# memoised: a pure function of its numbers that every calibration of a run, a plan check and a
# bisection over budgets asks again with the same few (epsilon, delta); each call bisects ~50
# conversions
@functools.lru_cache(maxsize=4096)
def epsilon_to_rho(epsilon: float, delta: float, *, continuous: bool = False) -> float:
    """The largest rho with rho_to_epsilon(rho, delta, continuous=...) <= epsilon (bisection,
    ~1e-12 relative): what a calibration may spend (memoised)."""
    epsilon, delta = check_nonneg("epsilon", epsilon), _check_delta(delta)
    if math.isinf(epsilon):
        return math.inf
    # Feasible start: the classical inverse (the tight conversion is never larger), or the
    # zero-epsilon KL region rho <= -ln(1 - delta^2).
    lo = max(epsilon_to_rho_classical(epsilon, delta), -math.log1p(-delta * delta))
    if rho_to_epsilon(lo, delta, continuous=continuous) > epsilon:  # rounding at the KL edge
        lo = 0.0
    hi = max(2.0 * lo, 1e-300)
    while rho_to_epsilon(hi, delta, continuous=continuous) <= epsilon:
        lo, hi = hi, 2.0 * hi
        if math.isinf(hi):
            return lo
    for _ in range(200):
        if hi - lo <= 1e-13 * hi:
            break
        mid = 0.5 * (lo + hi)
        if rho_to_epsilon(mid, delta, continuous=continuous) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo


def pure_to_rho(eps: float) -> float:
    """The zCDP level implied by pure eps-DP: eps^2 / 2 (Bun & Steinke 2016, Prop. 1.4)."""
    eps = check_nonneg("epsilon", eps)
    return eps * eps / 2.0


def _continuous_charge(charge: Charge) -> bool:
    """Whether `charge` spends no zCDP, or spends it by continuous Gaussian noise."""
    return charge.rho == 0.0 or continuous_gaussian(charge.noise)


def encode_number(x: float) -> float | str:
    """JSON-safe float: inf becomes the string "inf" (the ledger's and the protocol's)."""
    return "inf" if math.isinf(x) else float(x)


def _decode(x: float | int | str) -> float:
    """Inverse of `encode_number`: accepts numbers and the string "inf"; refuses NaN."""
    value = float(x)
    if math.isnan(value):
        raise ValueError(f"NaN is not a valid ledger value: {x!r}")
    return value


def _copy_sum(total: _ExactSum) -> _ExactSum:
    """An independent copy of a running exact sum."""
    out = _ExactSum()
    out._partials, out._inf = list(total._partials), total._inf
    return out


class _ExactSum:
    """Running sum of non-negative floats, exact up to the final rounding (Shewchuk partials)."""

    __slots__ = ("_inf", "_partials")

    def __init__(self) -> None:
        """Start at zero."""
        self._partials: list[float] = []
        self._inf = False

    def add(self, x: float) -> None:
        """Add one value in O(len(partials)) time, keeping the sum exact."""
        if math.isinf(x):
            self._inf = True
            return
        i = 0
        for y in self._partials:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo:
                self._partials[i] = lo
                i += 1
            x = hi
        self._partials[i:] = [x]

    @property
    def value(self) -> float:
        """The correctly rounded sum (inf once any inf was added)."""
        return math.inf if self._inf else math.fsum(self._partials)


@dataclass(frozen=True)
class Charge:
    """One privacy-spending release: mechanism, cost (pure eps and/or zCDP rho), scale, backend.

    `noise` names the backend that drew the release's noise ('numpy': seeded discrete noise;
    'opendp': CSPRNG, exact discrete samplers; 'float ...': simulation only, labelled so by
    `privrl.privacy.noise.noise_label`); the cost is the same either way.
    """

    mechanism: str
    epsilon: float = 0.0
    rho: float = 0.0
    sensitivity: float = 0.0
    scale: float = 0.0
    note: str = ""
    at: int | None = None
    noise: str = "numpy"
    delta: float = 0.0  # > 0: an (epsilon, delta)-DP release (its epsilon is not pure)

    def __post_init__(self) -> None:
        """Validate the fields (non-negative, no NaN) and normalise numbers to Python floats."""
        for name in ("mechanism", "noise"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        object.__setattr__(self, "epsilon", check_nonneg("epsilon", self.epsilon))
        object.__setattr__(self, "rho", check_nonneg("rho", self.rho))
        delta = check_nonneg("delta", self.delta)
        if delta >= 1.0:
            raise ValueError(f"delta must be < 1, got {delta!r}")
        object.__setattr__(self, "delta", delta)
        for name in ("sensitivity", "scale"):
            value = float(getattr(self, name))
            if math.isnan(value) or value < 0.0:
                raise ValueError(f"{name} must be a non-negative number, got {value!r}")
            object.__setattr__(self, name, value)
        if not isinstance(self.note, str):
            raise ValueError(f"note must be a string, got {self.note!r}")
        if self.at is not None:
            if isinstance(self.at, bool) or int(self.at) != self.at or self.at < 0:
                raise ValueError(f"at must be a non-negative integer or None, got {self.at!r}")
            object.__setattr__(self, "at", int(self.at))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict of this charge (inf encoded as "inf")."""
        d = asdict(self)
        for name in ("epsilon", "rho", "sensitivity", "scale", "delta"):
            d[name] = encode_number(d[name])
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Charge:
        """Rebuild a charge from `to_dict` output."""
        return cls(
            mechanism=d["mechanism"],
            epsilon=_decode(d.get("epsilon", 0.0)),
            rho=_decode(d.get("rho", 0.0)),
            sensitivity=_decode(d["sensitivity"]),
            scale=_decode(d["scale"]),
            note=d.get("note", ""),
            at=d.get("at"),
            noise=d.get("noise", "numpy"),
            delta=_decode(d.get("delta", 0.0)),
        )


@dataclass(frozen=True)
class Totals:
    """Total spend of a run: (epsilon, delta)-DP overall, plus its pure and zCDP parts."""

    epsilon: float
    delta: float
    epsilon_pure: float
    rho: float

    def to_dict(self) -> dict[str, float | str]:
        """JSON-safe dict of the totals (inf encoded as "inf")."""
        return {k: encode_number(v) for k, v in asdict(self).items()}


# relative slack of the budget check: a calibration that spends exactly the budget lands within
# a few ulps of it after the zCDP -> (epsilon, delta) conversion
BUDGET_SLACK = 1e-9


@dataclass(frozen=True)
class Budget:
    """A run's privacy budget (epsilon, delta): the most its ledger may ever total."""

    epsilon: float
    delta: float

    def admits(self, totals: Totals) -> bool:
        """Whether `totals` stays within this budget (up to `BUDGET_SLACK` relative)."""
        return (totals.epsilon <= self.epsilon * (1.0 + BUDGET_SLACK)
                and totals.delta <= self.delta * (1.0 + BUDGET_SLACK))


class BudgetExhausted(RuntimeError):
    """A release refused by a ledger's privacy filter: it would take the ledger past the budget.
    Raised before the release is recorded (and, by the privatizers, before its noise is drawn)."""

    @classmethod
    def refusing(cls, budget: Budget, totals: Totals, charges: Sequence[Charge]
                 ) -> BudgetExhausted:
        """The refusal of `charges`, which would take the ledger to `totals`."""
        names = sorted({c.mechanism for c in charges})
        at = next((c.at for c in charges if c.at is not None), None)
        when = f" at item {at}" if at is not None else ""
        return cls(
            f"privacy budget exhausted: the release {', '.join(names)}{when} would take the ledger"
            f" to (epsilon = {totals.epsilon:.6g}, delta = {totals.delta:.3g}), past the run's"
            f" budget (epsilon = {budget.epsilon:.6g}, delta = {budget.delta:.3g}); it was"
            " refused and the run releases nothing more"
        )


class Ledger:
    """Append-only record of every privacy-spending release of one run, for one user.

    With a `budget` it is also a privacy filter (as OpenDP's filters / Tumult's session budgets):
    a charge that would take the totals past the budget raises `BudgetExhausted` and is not
    recorded. Totals are kept as exact running sums, so `epsilon_pure`, `rho`, `totals` and
    `by_mechanism` cost O(1) (per mechanism name) however many charges a long run records.
    """

    def __init__(self, entries: Iterable[Charge] = (), budget: Budget | None = None,
                 data_dependent: bool = False) -> None:
        """Start a ledger, optionally from existing charges (e.g. when restoring a run) and with
        a budget it refuses to exceed (existing entries are not checked). `data_dependent`: how
        many charges the run makes depends on released data, so the totals are an odometer (what
        was realized) and the users' guarantee is the budget alone."""
        self.budget = budget
        self.data_dependent = bool(data_dependent)
        self._entries: list[Charge] = []
        self._epsilon = _ExactSum()
        self._rho = _ExactSum()
        self._approx = (_ExactSum(), _ExactSum())  # epsilons and deltas of (eps, delta) charges
        self._continuous = True  # every zCDP charge so far is a continuous Gaussian release
        self._groups: dict[str, tuple[_ExactSum, _ExactSum, list[int], _ExactSum]] = {}
        for entry in entries:
            if not isinstance(entry, Charge):
                raise TypeError(f"ledger entries must be Charge objects, got {type(entry)!r}")
            self._append(entry)

    def _append(self, entry: Charge) -> None:
        """Store a validated charge and update the running sums (O(1) totals later)."""
        self._entries.append(entry)
        self._add_to_totals(entry)
        eps, rho, count, delta = self._groups.setdefault(
            entry.mechanism, (_ExactSum(), _ExactSum(), [0], _ExactSum())
        )
        eps.add(entry.epsilon)
        rho.add(entry.rho)
        delta.add(entry.delta)
        count[0] += 1

    def _add_to_totals(self, entry: Charge) -> None:
        """Add one charge to the sums the totals are computed from."""
        if entry.delta > 0.0:
            self._approx[0].add(entry.epsilon)
            self._approx[1].add(entry.delta)
        else:
            self._epsilon.add(entry.epsilon)
        self._rho.add(entry.rho)
        self._continuous = self._continuous and _continuous_charge(entry)

    def charge(
        self,
        mechanism: str,
        *,
        epsilon: float = 0.0,
        rho: float = 0.0,
        sensitivity: float,
        scale: float,
        note: str = "",
        at: int | None = None,
        noise: str = "numpy",
        delta: float = 0.0,
    ) -> None:
        """Record one release: pure `epsilon` and/or zCDP `rho` spent by `mechanism`, or an
        (`epsilon`, `delta`)-DP release when `delta` > 0 (BudgetExhausted past the budget)."""
        self.charge_all([
            Charge(
                mechanism=mechanism,
                epsilon=epsilon,
                rho=rho,
                sensitivity=sensitivity,
                scale=scale,
                note=note,
                at=at,
                noise=noise,
                delta=delta,
            )
        ])

    def totals_with(self, charges: Sequence[Charge], delta: float) -> Totals:
        """The totals at `delta` if `charges` were recorded too (the ledger is unchanged)."""
        if not charges:
            return self.totals(delta)
        scratch = Ledger()
        scratch._epsilon, scratch._rho = _copy_sum(self._epsilon), _copy_sum(self._rho)
        scratch._approx = (_copy_sum(self._approx[0]), _copy_sum(self._approx[1]))
        scratch._continuous = self._continuous
        for c in charges:
            scratch._add_to_totals(c)
        return scratch.totals(delta)

    def admit(self, charges: Sequence[Charge]) -> None:
        """Refuse (BudgetExhausted) `charges` if recording them all would pass the budget."""
        if self.budget is None or not charges:
            return
        totals = self.totals_with(charges, self.budget.delta)
        if not self.budget.admits(totals):
            raise BudgetExhausted.refusing(self.budget, totals, charges)

    def charge_all(self, charges: Sequence[Charge]) -> None:
        """Record several charges as one release: all of them, or none past the budget."""
        self.admit(charges)
        for c in charges:
            self._append(c)

    def prefix(self, charges: int) -> Ledger:
        """A new ledger of this one's first `charges` charges, with its budget and its
        data-dependence (what the run's ledger said when it held that many)."""
        return Ledger(self._entries[:charges], self.budget, self.data_dependent)

    @property
    def entries(self) -> tuple[Charge, ...]:
        """All charges, in the order they were made."""
        return tuple(self._entries)

    @property
    def epsilon_pure(self) -> float:
        """Sum of the pure-DP epsilons (basic composition)."""
        return self._epsilon.value

    @property
    def approximate(self) -> tuple[float, float]:
        """Summed (epsilon, delta) of the (epsilon, delta)-DP charges (basic composition)."""
        return self._approx[0].value, self._approx[1].value

    @property
    def rho(self) -> float:
        """Sum of the zCDP rhos (zCDP composition)."""
        return self._rho.value

    def totals(self, delta: float) -> Totals:
        """Overall (epsilon, delta): pure part, plus the (epsilon, delta) charges, plus the tight
        conversion of the zCDP part at `delta` (the exact Gaussian profile when every zCDP charge
        is a continuous Gaussian release)."""
        eps_pure, rho = self.epsilon_pure, self.rho
        eps_approx, delta_approx = self.approximate
        if rho > 0.0:
            return Totals(
                epsilon=eps_pure + eps_approx
                + rho_to_epsilon(rho, delta, continuous=self._continuous),
                delta=delta_approx + float(delta),
                epsilon_pure=eps_pure,
                rho=rho,
            )
        return Totals(
            epsilon=eps_pure + eps_approx, delta=delta_approx, epsilon_pure=eps_pure, rho=0.0
        )

    def noise_backends(self) -> list[str]:
        """The noise backends that drew the charged releases, sorted (one in a normal run)."""
        return sorted({entry.noise for entry in self._entries})

    def by_mechanism(self) -> dict[str, dict[str, float | int]]:
        """Summed epsilon, rho and delta and the number of charges, per mechanism name."""
        return {
            name: {"epsilon": eps.value, "rho": rho.value, "delta": delta.value,
                   "count": count[0]}
            for name, (eps, rho, count, delta) in self._groups.items()
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: the entries plus (informational) summed epsilon_pure and rho."""
        return {
            "entries": [c.to_dict() for c in self._entries],
            "epsilon_pure": encode_number(self.epsilon_pure),
            "rho": encode_number(self.rho),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Ledger:
        """Rebuild a ledger from `to_dict` output (sums are recomputed from the entries)."""
        return cls(Charge.from_dict(e) for e in d["entries"])

    def __len__(self) -> int:
        """Number of charges recorded."""
        return len(self._entries)

    def __repr__(self) -> str:
        """Short summary: number of charges and summed costs."""
        return f"Ledger(n={len(self)}, epsilon_pure={self.epsilon_pure!r}, rho={self.rho!r})"
