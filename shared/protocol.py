"""Every message that crosses the wire (pydantic models), for the server and the users.

Reports are typed by privacy mode. A JDP / non-private report carries one raw trajectory (the
trusted curator turns it into counts), or for policy evaluation one user's first-visit returns.
An LDP report carries only the dense, fixed-shape noisy arrays and the ticket: its schema has no
field that could carry a state, action or reward.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

import numpy as np
from privrl.config import RunConfig
from privrl.privacy.accountant import Ledger, encode_number
from privrl.seeding import SEED_BITS
from privrl.wire import (
    F64_PATTERN,
    I32_PATTERN,
    INTEGRAL,
    JsonInt,
    pack_floats,
    pack_ints,
    unpack_floats,
    unpack_ints,
)
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

API_VERSION = "v1"
# Idle keep-alive connections: the server closes one after SERVER_KEEPALIVE_SECONDS, a client
# drops its own sooner, so no client sends on a connection at the moment the server closes it
# (with both at 5 s, httpx's and uvicorn's defaults, that race showed up as retried ReadErrors).
SERVER_KEEPALIVE_SECONDS = 30
CLIENT_KEEPALIVE_SECONDS = 20.0


def _pair(value: Any) -> Any:
    """A two-item JSON array as the tuple it stands for (other values unchanged)."""
    return tuple(value) if isinstance(value, list) and len(value) == 2 else value
TICKET_PATTERN = r"^[A-Za-z0-9_-]{16,128}$"


class Strict(BaseModel):
    """Base: unknown fields and wrong JSON types are refused (strict: "0" is not a number, 0 not
    a boolean); non-finite floats are sent as "Infinity"/"NaN"."""

    model_config = ConfigDict(extra="forbid", strict=True, ser_json_inf_nan="strings")


class ErrorBody(Strict):
    """Every 4xx/5xx answer: a message that says what is wrong (and a machine-readable code)."""

    detail: str
    code: str | None = Field(
        None,
        description="why, for programs: e.g. 'expired' (claim lapsed: claim again), 'finished'"
        " (stop), 'busy'/'full' (no free slot: retry), 'conflict', 'invalid', 'wrong_kind'",
    )


class RunRequest(RunConfig):
    """The body of POST /v1/runs: the public run config plus, optionally, the server's seed.

    The seed is write-only: it is stored as a secret of the server and returned by no route (a
    seed behind published noise lets anyone subtract that noise). Without it the server draws
    one from the OS CSPRNG. Pass one only for reproducible simulation.
    """

    seed: Annotated[int, Field(ge=0, lt=2**SEED_BITS), INTEGRAL] | None = Field(
        None,
        description="optional secret seed of the server's noise (reproducible experiments"
        " only); write-only: never returned, logged or shown in metrics. Default: drawn from"
        " the OS CSPRNG",
    )

    def public(self) -> dict[str, Any]:
        """The public fields given: everything but the seed, defaults left out (so that
        `privrl.algorithms.registry.configure` gives a run without a mechanism the algorithm's).
        """
        return self.model_dump(exclude={"seed"}, exclude_unset=True)


class RunStatus(Strict):
    """Progress of a run."""

    episodes: int
    claimed: int = Field(description="claims handed out (including expired ones)")
    outstanding: int = Field(description="claims not yet reported nor expired")
    reported: int
    finished: bool
    policy_version: int
    budget_exhausted: str | None = Field(
        None, description="why the run ended early: its privacy filter refused a release that"
        " would pass its (epsilon, delta); claims and reports are then refused (409)")


class BoundaryInfo(Strict):
    """A registered trust boundary, as the CLI, the plots and the dashboard show it."""

    name: str = Field(description="what a run's config says in `privacy`")
    label: str
    colour: str = Field(description="its colour in every figure (#rrggbb)")
    summary: str = Field(description="who is trusted with what")
    private: bool = Field(description="whether it releases noise and spends a budget")
    local_noise: bool = Field(description="whether users noise their reports before sending")
    cohorts: bool = Field(False, description="whether the server sums cohorts of users together"
                          " (`/v1/runs/{id}/cohorts` shows them)")


class CohortState(Strict):
    """One cohort of a run that sums its users in cohorts: counts only, no member's message."""

    cohort: int = Field(description="its index: episode e is in cohort e // B")
    members: int = Field(description="members that joined (sent their keys) so far")
    round: str = Field(description="the round open now, or 'done' once the sum was rebuilt")
    survivors: int = Field(description="members whose masked inputs arrived (0 before round 3)")
    outcome: str | None = Field(description="released, refused or aborted; null while in flight")


class CohortsView(Strict):
    """A run's cohorts as a server sees them (since it started: the rounds live in memory) and
    the run's public assumptions."""

    run_id: str
    size: int = Field(description="B, users per cohort")
    dropout: float = Field(description="the fraction of a cohort that may drop out")
    collusion: float = Field(description="the fraction that may collude with the server")
    min_survivors: int = Field(description="inputs a cohort needs to release")
    honest_shares: int = Field(description="the fewest honest noise shares in a released sum")
    noise: str = Field(description="the users' noise shares")
    assumptions: str = Field(description="the above in one line, as the ledger says it")
    counts: dict[str, int] = Field(description="cohorts by outcome (in_flight: not ended)")
    cohorts: list[CohortState] = Field(description="the latest cohorts, newest last")


class RunInfo(Strict):
    """A run as listed by the server."""

    id: str
    config: RunConfig
    status: RunStatus
    created_at: float
    sequential: bool = Field(
        False, description="at most one outstanding claim at a time (strictly sequential episodes)"
    )
    credentials: bool = Field(
        False,
        description="claims need a user credential issued by the admin (`Authorization: Bearer"
        " <credential>`; `privrl runs credentials RUN`)",
    )


CREDENTIAL_PREFIX = "privrl-cred-v1"  # a user credential: PREFIX.<run id>.<credential id>.<tag>


def credential_run(token: str) -> str | None:
    """The run a user credential names (None: not of a credential's form)."""
    parts = token.split(".")
    return parts[1] if len(parts) == 4 and parts[0] == CREDENTIAL_PREFIX else None


class CredentialList(Strict):
    """User credentials the admin issued for a run (bearer tokens for its claims)."""

    run_id: str
    credentials: list[str]


class RunList(Strict):
    runs: list[RunInfo]


FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
UnitFloat = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Index = Annotated[int, Field(ge=0), INTEGRAL]
# A JSON object's keys are strings: an int key is read from its decimal text (even in strict mode).
IntKey = Annotated[int, Field(strict=False)]


class ArrayPayload(Strict):
    """A float array: its shape and its entries flattened in C order."""

    shape: list[Index]
    data: list[FiniteFloat]

    @classmethod
    def of(cls, arr: np.ndarray) -> ArrayPayload:
        """The payload of an array (floats round-trip exactly through JSON)."""
        return cls(shape=list(arr.shape), data=np.asarray(arr, dtype=np.float64).ravel().tolist())

    def to_array(self) -> np.ndarray:
        """As a float64 array of its shape (ValueError when the sizes disagree)."""
        if math.prod(self.shape) != len(self.data):
            raise ValueError(f"an array of shape {self.shape} needs {math.prod(self.shape)}"
                             f" entries, got {len(self.data)}")
        return np.asarray(self.data, dtype=np.float64).reshape(self.shape)


class PolicyPayload(Strict):
    """A deterministic tabular policy actions[h][s], plus the other arrays of the policy message
    (e.g. ucrl-vtr's value tables, which users need to compute their statistics)."""

    version: int
    actions: list[list[int]]
    arrays: dict[str, ArrayPayload] = Field(
        default_factory=dict,
        description="the policy message's other arrays, by name (the algorithm declares them;"
        " e.g. 'values', the value tables V_1..V_{H+1} of shape (H+1, S))",
    )

    def to_array(self) -> np.ndarray:
        """As an int array (H, S)."""
        return np.asarray(self.actions, dtype=np.int64)

    def message(self) -> dict[str, np.ndarray]:
        """The policy message for one replica (leading axis 1), as `privrl.run` uses it."""
        out = {"actions": self.to_array()[None]}
        out.update({name: arr.to_array()[None] for name, arr in self.arrays.items()})
        return out


class RandomizerParams(Strict):
    """The local randomizer's public calibration (LDP runs only)."""

    mechanism: Literal["laplace", "gaussian"]
    scale: float = Field(description="Laplace b or Gaussian sigma of every entry (the smallest"
                         " when the families have their own scales)")
    families: dict[str, list[int]] = Field(description="name -> shape of each array to send")
    scales: dict[str, float] = Field(
        default_factory=dict, description="name -> that family's own noise scale")
    symmetric: list[str] = Field(
        default_factory=list,
        description="families holding symmetric matrices (last two axes): noise on the upper"
        " triangle, mirrored; the server refuses a report that is not exactly symmetric",
    )


class Ticket(Strict):
    """The answer to a claim: episode index, single-use ticket and the policy to play."""

    run_id: str
    episode: int
    ticket: str
    policy: PolicyPayload
    randomizer: RandomizerParams | None = None
    expires_in: float = Field(description="seconds before the claim lapses")



PackedFloats = Annotated[
    str,
    Field(
        pattern=F64_PATTERN,
        description="the array's entries as base64 of their little-endian float64 bytes"
        " (lossless, about 10.7 bytes a number; `privrl.wire.pack_floats`)",
    ),
]


PackedInts = Annotated[
    str,
    Field(
        pattern=I32_PATTERN,
        description="the array's entries as base64 of their little-endian int32 bytes"
        " (`privrl.wire.pack_ints`)",
    ),
]


def _packed(pattern: str, unpack: Callable[[str], np.ndarray], what: str, schema: Any
            ) -> BeforeValidator:
    """A list field that also takes its fixed-width form, base64 of `what` (decoded here, then
    validated item by item like the JSON array it stands for)."""

    def decode(value: Any) -> Any:
        """A packed text as the list it stands for (a JSON array unchanged: JSON has no NaN or
        infinity, so one that `json.loads` read as such is refused here)."""
        if isinstance(value, list):
            bad = next((i for i, v in enumerate(value)
                        if isinstance(v, float) and not math.isfinite(v)), None)
            if bad is not None:
                raise ValueError(f"item {bad} is not a finite number")
            return value
        if not isinstance(value, str):
            return value
        if re.fullmatch(pattern, value) is None:
            raise ValueError(f"expected a JSON array or base64 of little-endian {what}")
        return unpack(value).tolist()

    return BeforeValidator(decode, json_schema_input_type=schema)


INTS = _packed(I32_PATTERN, unpack_ints, "int32s", list[Index] | PackedInts)
FLOATS = _packed(F64_PATTERN, unpack_floats, "float64s", list[UnitFloat] | PackedFloats)


class TrajectoryReport(Strict):
    """JDP / non-private: one raw trajectory (s_1..s_{H+1}, a_1..a_H, r_1..r_H). Each field is
    a JSON array or (fixed-width, what `privrl users` sends) base64 of its int32 / float64
    bytes, decoded at the edge and checked like the array: then the body's size is a function
    of the run's public H alone, never of the trajectory (a reward 0.005 is as long as 0.0)."""

    kind: Literal["trajectory"] = Field(description="the report's type: required (discriminator)")
    ticket: str = Field(pattern=TICKET_PATTERN)
    # The schema states the ranges; the server checks them after decoding (`privrl.reports`),
    # so a packed value out of range is refused like an array's, as content ("invalid").
    states: Annotated[list[JsonInt], INTS] = Field(
        description="s_1..s_{H+1}: H+1 states in [0, S)")
    actions: Annotated[list[JsonInt], INTS] = Field(
        description="a_1..a_H in [0, A), as the served policy chose")
    rewards: Annotated[list[float], FLOATS] = Field(description="r_1..r_H in [0, 1]")

    def packed(self) -> dict[str, str]:
        """The three fields in the fixed-width form, in this order (what a client sends)."""
        return {"states": pack_ints(self.states), "actions": pack_ints(self.actions),
                "rewards": pack_floats(np.asarray(self.rewards, dtype=np.float64))}


class NoisyReport(Strict):
    """LDP: dense noisy arrays, flattened in C order, one per released family: each a JSON
    array of numbers, or (compact, what `privrl users` sends) base64 of its float64 bytes."""

    kind: Literal["noisy"] = Field(description="the report's type: required (discriminator)")
    ticket: str = Field(pattern=TICKET_PATTERN)
    arrays: dict[str, list[FiniteFloat] | PackedFloats]

    def array(self, name: str) -> np.ndarray:
        """One array as float64, whichever form it came in (ValueError for a bad base64)."""
        values = self.arrays[name]
        return unpack_floats(values) if isinstance(values, str) else np.asarray(values, np.float64)

    def packed(self) -> dict[str, str]:
        """Every array in the compact form (the canonical form a server stores and hashes)."""
        return {name: pack_floats(self.array(name)) for name in sorted(self.arrays)}


NonNegFloat = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
# A JSON array [s, F]: parsed JSON holds lists, which strict mode would not take as tuples.
Visit = Annotated[tuple[Index, NonNegFloat], BeforeValidator(_pair)]


NOT_VISITED = -1.0  # a dense report's value for a state the trajectory did not visit


class ReturnsReport(Strict):
    """Policy evaluation (trusted curator): one user's first-visit returns, sparse (`visits`)
    or dense and fixed-width (`returns`, what `privrl users` sends: its size is a function of
    the run's public S alone, never of how many states the user visited). Exactly one."""

    kind: Literal["returns"]
    ticket: str = Field(pattern=TICKET_PATTERN)
    visits: list[Visit] | None = Field(
        None,
        description="[[s, F_{x,s}], ...]: every state the trajectory visits, once, with its"
        " first-visit discounted return (>= 0; the server clips it to the run's public F_max)"
    )
    returns: PackedFloats | None = Field(
        None,
        description="instead of `visits`: S float64s packed, F_{x,s} for a visited state s and"
        f" {NOT_VISITED:g} for one not visited",
    )

    def pairs(self) -> list[tuple[int, float]]:
        """[(s, F_{x,s})] whichever form came (ValueError: neither or both, or a dense value
        that is neither a return >= 0 nor NOT_VISITED)."""
        if (self.visits is None) == (self.returns is None):
            raise ValueError("give exactly one of visits (sparse) and returns (dense)")
        if self.visits is not None:
            return [(int(s), float(f)) for s, f in self.visits]
        dense = unpack_floats(self.returns)  # type: ignore[arg-type]
        bad = np.flatnonzero(~((dense >= 0) & np.isfinite(dense)) & (dense != NOT_VISITED))
        if bad.size:
            raise ValueError(f"returns[{int(bad[0])}] is neither a return >= 0 nor"
                             f" {NOT_VISITED:g} (not visited)")
        return [(int(s), float(dense[s])) for s in np.flatnonzero(dense != NOT_VISITED)]


Report = Annotated[TrajectoryReport | NoisyReport | ReturnsReport, Field(discriminator="kind")]


class Ack(Strict):
    """The acknowledgement of a report (the same body again for a retried report)."""

    run_id: str
    episode: int
    reported: int = Field(description="reports counted so far, this one included")
    duplicate: bool = False


class Billboard(Strict):
    """The public, privatized statistics a run's learner plans from."""

    run_id: str
    reported: int
    radius: float
    shapes: dict[str, list[int]]
    arrays: dict[str, list[float]]
    noise_std: float = Field(
        0.0,
        description="std of the noise in each released entry at this number of reports (public:"
        " it follows from the calibration alone; 0 without noise); a derived sum of n entries"
        " has sqrt(n) times it",
    )


# the ledger's second delta is the run's divided by this
SMALLER_DELTA_FACTOR = 10.0


class LedgerView(Strict):
    """Privacy spent so far (per user, worst case) and the mechanisms behind it."""

    run_id: str
    epsilon: float | str
    delta: float
    epsilon_pure: float | str
    rho: float | str
    by_mechanism: dict[str, dict]
    charges: list[dict]
    noise: list[str] = Field(
        default_factory=list,
        description="the noise backends that drew the charged releases: 'numpy' (seeded"
        " discrete noise on integer grids), 'opendp' (OS CSPRNG, exact discrete samplers) or"
        " 'float (simulation only: an outsider can remove it (Mironov 2012))'; each charge"
        " names its own",
    )
    epsilon_after: list[float | str] = Field(
        default_factory=list,
        description="the total epsilon (at `delta`) after each charge, in the order of"
        " `charges`: what had been spent when the charge's episode (`at`) was reached",
    )
    smaller_delta: float | None = Field(
        None, description="a second, smaller delta: the run's accounting delta / 10"
    )
    epsilon_at_smaller_delta: float | str | None = Field(
        None, description="the same charges' total epsilon at `smaller_delta` (same noise)"
    )
    budget_epsilon: float | str | None = Field(
        None, description="the run's budget: its filter refuses any release past it (null:"
        " no budget, nothing private is claimed)"
    )
    budget_delta: float | None = Field(None, description="the budget's delta")
    data_dependent: bool = Field(
        False,
        description="whether how much the run spends depends on released data (e.g. switching"
        " LSVI's release rounds, triggered by released Grams): then `epsilon` is the realized"
        " odometer, not a guarantee, and the guarantee is the filter's budget",
    )
    guarantee: Literal["spent", "budget", "none"] = Field(
        "spent",
        description="which numbers are the users' guarantee: 'spent' (epsilon, delta: the"
        " charges follow a public schedule), 'budget' (budget_epsilon, budget_delta: the spend"
        " is data-dependent and only the filter bounds it) or 'none' (nothing is charged)",
    )

    @classmethod
    def of(cls, run_id: str, ledger: Ledger, delta: float) -> LedgerView:
        """The view of a ledger's charges, totals stated at `delta` and at `delta` / 10, beside
        its budget (one home for the format)."""
        totals = ledger.totals(delta)
        smaller = delta / SMALLER_DELTA_FACTOR
        running, so_far = [], Ledger()
        for c in ledger.entries:
            so_far.charge_all([c])
            running.append(so_far.totals(delta).epsilon)
        budget = ledger.budget
        if ledger.data_dependent and budget is not None:
            guarantee = "budget"
        elif budget is None and not ledger.entries:
            guarantee = "none"
        else:
            guarantee = "spent"
        return cls(
            run_id=run_id,
            epsilon=encode_number(totals.epsilon),
            delta=totals.delta,
            epsilon_pure=encode_number(totals.epsilon_pure),
            rho=encode_number(totals.rho),
            by_mechanism={
                name: {k: encode_number(v) if isinstance(v, float) else v for k, v in d.items()}
                for name, d in ledger.by_mechanism().items()
            },
            charges=[c.to_dict() for c in ledger.entries],
            noise=ledger.noise_backends(),
            epsilon_after=[encode_number(e) for e in running],
            smaller_delta=smaller,
            epsilon_at_smaller_delta=encode_number(ledger.totals(smaller).epsilon),
            budget_epsilon=None if budget is None else encode_number(budget.epsilon),
            budget_delta=None if budget is None else budget.delta,
            data_dependent=ledger.data_dependent,
            guarantee=guarantee,
        )

    def spent_text(self) -> str:
        """What the charges total, in one line: at the run's delta and at the smaller one."""
        eps, rho, pure = float(self.epsilon), float(self.rho), float(self.epsilon_pure)
        parts = ([f"pure eps {pure:.4g}"] if pure else []) + ([f"zCDP rho {rho:.4g}"]
                                                             if rho else [])
        how = f" ({' + '.join(parts)})" if parts else ""
        text = f"eps = {eps:.4g}, delta = {self.delta:g}{how} in {len(self.charges)} charge(s)"
        if rho and self.smaller_delta is not None and self.epsilon_at_smaller_delta is not None:
            text += (f"; at delta = {self.smaller_delta:g}: eps ="
                     f" {float(self.epsilon_at_smaller_delta):.4g}")
        return text

    def guarantee_text(self) -> str:
        """Which numbers are the users' guarantee, and what the others are, in one line."""
        if self.guarantee == "budget":
            return (f"guarantee: the budget eps = {float(self.budget_epsilon or 0):.4g}, delta ="
                    f" {self.budget_delta or 0:g} (the filter refuses any release past it);"
                    f" realized odometer: eps = {float(self.epsilon):.4g} (how much is spent"
                    " depends on released data, so the odometer is not a guarantee)")
        if self.guarantee == "none":
            return "guarantee: none claimed (nothing is charged)"
        budget = ("" if self.budget_epsilon is None else
                  f", within the budget eps = {float(self.budget_epsilon):.4g}")
        return (f"guarantee: the spend, eps = {float(self.epsilon):.4g}, delta = {self.delta:g}"
                f" (every charge follows the public release schedule){budget}")


class VersionServed(Strict):
    """The episodes one policy version was served to: a contiguous range of episode indices
    (versions are served in order), and how many of them were reported or lapsed."""

    first_episode: int = Field(ge=0, description="the first episode index served this version")
    claimed: int = Field(ge=0, description="episodes served it: first_episode .. + claimed - 1")
    reported: int = Field(ge=0, description="of them, episodes whose report was counted")
    expired: int = Field(
        ge=0,
        description="of them, claims that lapsed unreported (not part of the run's K episodes);"
        " the rest are still outstanding",
    )


class PolicyLog(Strict):
    """The public policy log, one page of versions: each version's policy and the episodes it
    was served to (O(versions), whatever the number of claims)."""

    run_id: str
    versions: dict[IntKey, list[list[int]]]
    arrays: dict[IntKey, dict[str, ArrayPayload]] = Field(
        default_factory=dict,
        description="each version's other policy-message arrays (when the algorithm has any)",
    )
    served: dict[IntKey, VersionServed] = Field(
        default_factory=dict, description="per version: the episodes it was served to"
    )
    next_after: int | None = Field(
        None,
        description="more versions follow: ask again with ?after= this version (None: the last"
        " page)",
    )

    def merged(self, page: PolicyLog) -> PolicyLog:
        """This log followed by the next page."""
        return PolicyLog(
            run_id=self.run_id,
            versions={**self.versions, **page.versions},
            arrays={**self.arrays, **page.arrays},
            served={**self.served, **page.served},
            next_after=page.next_after,
        )

    def reported_versions(self) -> list[int]:
        """The version served to each reported episode, in episode order."""
        return [v for v in sorted(self.served) for _ in range(self.served[v].reported)]

    def version_of(self, episode: int) -> int:
        """The version served to episode index `episode` (KeyError: not in this log)."""
        for v, s in self.served.items():
            if s.first_episode <= episode < s.first_episode + s.claimed:
                return v
        raise KeyError(f"episode {episode} was not served a version of this log")


class Verdict(Strict):
    """Whether a run learned, by the one rule of `privrl.verdict` (the CLI's and the
    dashboard's): its last 10% of reported episodes against a uniformly random policy."""

    tail_episodes: int = Field(description="the last 10% of the reported episodes (at least 1)")
    tail_regret_per_episode: float = Field(description="their mean regret per episode")
    percent_of_random: float | None = Field(
        description="that mean as a % of the uniformly random policy's regret (0% = optimal);"
        " null when random has no regret")
    windows: list[float] = Field(description="% of random of each consecutive window of them")
    learned: Literal["yes", "partly", "no", "unsteady"] = Field(
        description="every window at or below 25%: yes; at or above 75%: no; between: partly;"
        " windows that disagree: unsteady")
    rule: str = Field(description="the rule in words")


class RegretView(Strict):
    """Exact regret of a run's served policies in a public named world (evaluator's view)."""

    run_id: str
    world: str = Field(description="the public world the regret is computed in")
    horizon: int
    regret: list[float] = Field(description="per reported episode, in episode order:"
                                " V*_1 - V^pi_1 of the policy served at its claim")
    cumulative: float
    optimal_return: float = Field(description="V*_1 of the world (expected return, optimal)")
    random_policy_per_episode: float = Field(
        description="regret per episode of the uniformly random policy (100% of random)"
    )
    verdict: Verdict | None = Field(
        None, description="whether the run learned so far (`privrl.verdict`, the CLI's rule);"
        " null before its first reported episode")


class Health(Strict):
    """Liveness: the process answers."""

    status: Literal["ok"] = "ok"


class Readiness(Strict):
    """Readiness: the store is open and every run has been rebuilt from it."""

    ready: bool
    runs: int = Field(description="runs hosted (rebuilt so far while not ready)")
    detail: str = ""


class Recovery(Strict):
    """An admin's choice for a run held because the server's store went back."""

    action: Literal["continue", "stop"] = Field(
        description="'continue': go on under a new noise epoch (fresh noise for every release"
        " from now on, charged to the ledger as a fresh counter; refused beyond the run's budget);"
        " 'stop': take no more claims or reports (the releases so far stay served)"
    )
