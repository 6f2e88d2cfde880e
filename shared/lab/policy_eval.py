"""Figure 1 of Balle, Gomrokchi & Precup 2016, in-process: private policy evaluation on the chain.

`sweep(spec)` runs, for every run r and batch size m, one batch of m trajectories from the fast
simulator (only its sufficient statistics (n, g) are drawn) and evaluates every estimator x
feature map on that same batch (all algorithms process the same batch). Estimates,
noise scales and the lambda schedule come from the registered plug-ins (`dp-lsw`, `dp-lsl`), so
the figure measures exactly the code a server runs. Each DP release draws its own noise
N(0, sigma_X^2 I) once from `generator(seed, "policy-eval-sweep", "noise", r, m, estimator,
features[, lambda])`; batches come from `generator(seed, "policy-eval-sweep", "batch", r, m)`.

Metrics: RMSE over all N states against the exact values, mean and standard error
over the runs; for DP releases also the excess empirical risk (eta^T Phi^T W Phi eta for DP-LSW,
eta^T (Phi^T Gamma_X Phi + lambda/(2m) I) eta for DP-LSL). Runs execute in parallel processes.

Privacy: each DP release is (eps, delta)-DP for the users of its batch; the sweep releases
several estimates from one batch, and its ledger records every one of them (they compose).

The local-DP extension (`ldp-lsw`, `ldp-lsl`, opt-in) is simulated exactly in law from the same
sufficient statistics: with the Gaussian local randomizer the sum of m users' noise on an entry
is N(0, m sigma_L^2), so the noisy sums are (n, g / F_max) plus that, drawn once per run.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from privrl import trust
from privrl.algorithms.registry import bind
from pydantic import ValidationError
from tqdm import tqdm

from ..algorithms.policy_eval import PolicyEvaluation
from ..algorithms.policy_eval.features import feature_matrix
from ..config import RunConfig
from ..privacy.accountant import Ledger
from ..privacy.mechanisms import Gaussian
from ..privacy.noise import FLOAT_NOISE
from ..privacy.privatizers import Aggregator
from ..protocol import LedgerView
from ..run import Run
from ..seeding import generator
from ..worlds.chain import ChainMRP
from .experiments import read_summary

if TYPE_CHECKING:  # matplotlib is imported when a figure is made (`_figure`): the CLI's every
    from matplotlib.figure import Figure  # process imports this module for its choices

KIND = "policy-eval"
ESTIMATORS = ("lsw", "lsl", "dp-lsw", "dp-lsl")
LOCAL_ESTIMATORS = ("ldp-lsw", "ldp-lsl")  # a local-DP extension (not in the paper)
ALL_ESTIMATORS = ESTIMATORS + LOCAL_ESTIMATORS
FEATURE_SETS = ("tabular", "agg2", "agg4", "agg8")
HALF_DECADES = tuple(int(round(10 ** (2 + k / 2))) for k in range(11))  # 10^2 .. 10^7
PANEL2_LAMBDAS = (1.5, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0)
PANEL2_AT = (10**4, 10**6)


def estimator_boundary(estimator: str) -> trust.TrustBoundary:
    """The trust boundary an estimator's name states, asked of the registry by what it
    declares: dp-lsw is the paper's release by a trusted curator (the central boundary), lsw the
    same without privacy (the non-private one), ldp-lsw its users' local randomizers (the local
    one)."""
    if estimator.startswith("dp-"):
        return trust.central_boundary()
    if estimator.startswith("ldp-"):
        local = trust.local_boundary()
        assert local is not None, "the built-in local boundary is always registered"
        return local
    return trust.baseline()


def estimator_run(estimator: str) -> tuple[str, str]:
    """(registered algorithm, privacy mode) of an estimator name: lsw = dp-lsw without privacy,
    ldp-lsw = dp-lsw with local randomizers."""
    if estimator not in ALL_ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}: use {', '.join(ALL_ESTIMATORS)}")
    algo = "dp-lsw" if estimator.endswith("lsw") else "dp-lsl"
    return algo, estimator_boundary(estimator).name


def round_config(
    world: ChainMRP, estimator: str, features: str, m: int, epsilon: float, delta: float,
    f_max: float, lam_c: float = 1.0, constants: str = "nrs", lam: float | None = None,
    noise: str = "numpy",
) -> RunConfig:
    """The public configuration of one evaluation round: m users of `world`, one estimator
    (lsw = dp-lsw without privacy, ...), its features and budget (a clear ValueError if the
    estimator cannot be calibrated for it)."""
    algo, privacy = estimator_run(estimator)
    knobs: dict[str, Any] = {"features": features, "gamma": world.gamma, "f_max": f_max,
                             "lam_c": lam_c, "constants": constants}
    if lam is not None:
        knobs["lam"] = lam
    try:
        config = RunConfig(algo=algo, n_states=world.S, n_actions=world.A, horizon=world.H,
                           episodes=m, privacy=privacy, epsilon=epsilon,
                           delta=delta if trust.get(privacy).private else 0.0, mechanism="gaussian",
                           noise=noise, knobs=knobs)  # type: ignore[arg-type]
        bind(config)  # the estimator's own rules across fields
        return config
    except ValueError as exc:  # pydantic's ValidationError included
        problems = (
            "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            if isinstance(exc, ValidationError) else str(exc)
        )
        raise ValueError(f"{estimator} with {features} features at m = {m}"
                         f"{'' if lam is None else f', lambda = {lam:g}'}: {problems}") from None


def round_in_process(config: RunConfig, world: ChainMRP, server_seed: int, users_seed: int,
                     first_nonce: int = 0) -> np.ndarray:
    """The theta_hat an evaluation round releases, computed in-process: user k plays with
    `user_generator(users_seed, k)`, the users' local noise uses nonces `first_nonce` on, and
    the server's noise comes from `server_seed`, exactly as over HTTP (where the same seeds and
    nonces give the same numbers whatever the report order: the release is a sum)."""
    run = Run(config, [server_seed])
    message = run.message()
    for k in range(config.episodes):
        run.play_and_ingest(world, [users_seed], k, message, first_nonce)
    return run.billboard()["theta"][0]


def rmse(values: np.ndarray, phi: np.ndarray, theta: np.ndarray) -> float:
    """sqrt(mean_s (phi_s^T theta - V(s))^2) over all states."""
    return float(np.sqrt(np.mean((phi @ theta - values) ** 2)))


@dataclass(frozen=True)
class SweepSpec:
    """Everything a Figure 1 sweep depends on (recorded in summary.json)."""

    estimators: tuple[str, ...] = ESTIMATORS
    features: tuple[str, ...] = FEATURE_SETS
    trajectories: tuple[int, ...] = HALF_DECADES
    runs: int = 20
    seed: int = 0
    epsilon: float = 0.1
    delta: float = 0.1
    f_max: float = 1.0
    lam_c: float = 1.0
    lambdas: tuple[float, ...] = PANEL2_LAMBDAS
    lambda_at: tuple[int, ...] = PANEL2_AT
    constants: str = "nrs"
    chain: dict[str, Any] = field(default_factory=dict)  # ChainMRP parameters

    def __post_init__(self) -> None:
        """Refuse an empty or invalid sweep early (clear messages for the CLI)."""
        for name in self.estimators:
            estimator_run(name)
        for name in self.features:
            feature_matrix(name, self.world.S)
        if self.runs < 1 or not self.trajectories or min(self.trajectories) < 1:
            raise ValueError("a sweep needs runs >= 1 and batch sizes m >= 1")
        if max(self.trajectories + self.lambda_at) > 10**7:
            raise ValueError("batch sizes above m = 10^7 are not supported (RunConfig's limit)")
        for m in {min(self.trajectories), max(self.trajectories), *self.lambda_at}:
            for cell in _cells(self, m):  # every run configuration is valid (calibratable)
                self.config(cell.estimator, cell.features, m, cell.lam)

    @property
    def world(self) -> ChainMRP:
        """The chain the users live in."""
        return ChainMRP(**self.chain)

    def config(self, estimator: str, features: str, m: int, lam: float | None = None
               ) -> RunConfig:
        """The run configuration of one estimator on one batch of m users."""
        return round_config(self.world, estimator, features, m, self.epsilon, self.delta,
                            self.f_max, self.lam_c, self.constants, lam)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {**asdict(self), "chain": repr(self.world), "chain_params": dict(self.chain)}


@dataclass(frozen=True)
class Cell:
    """One estimate to make on every batch: estimator, features, and a fixed lambda (panel 2)."""

    estimator: str
    features: str
    lam: float | None = None

    @property
    def private(self) -> bool:
        """Whether this is a central DP release (it draws noise and is charged)."""
        return self.estimator.startswith("dp-")

    @property
    def local(self) -> bool:
        """Whether the users randomize locally (the LDP extension)."""
        return self.estimator.startswith("ldp-")


def _panel_2(spec: SweepSpec) -> bool:
    """Whether the sweep has panel 2 (tabular LSL or DP-LSL at fixed lambdas)."""
    return bool(spec.lambda_at and spec.lambdas and "tabular" in spec.features
                and any(e.endswith("lsl") for e in spec.estimators))


def batch_sizes(spec: SweepSpec) -> list[int]:
    """Every batch size the sweep draws (panel 2's only when it has a panel 2)."""
    return sorted(set(spec.trajectories) | (set(spec.lambda_at) if _panel_2(spec) else set()))


def _cells(spec: SweepSpec, m: int) -> list[Cell]:
    """Every estimate made on a batch of size m: the schedule cells at the sweep's batch sizes;
    at panel 2's, LSL / DP-LSL at each fixed lambda (and tabular LSW / DP-LSW, its flat lines)."""
    cells = []
    if m in spec.trajectories:
        cells = [Cell(e, f) for f in spec.features for e in spec.estimators]
    if m in spec.lambda_at and _panel_2(spec):
        if m not in spec.trajectories:
            cells += [Cell(e, "tabular") for e in spec.estimators if e.endswith("lsw")]
        cells += [Cell(e, "tabular", lam) for lam in spec.lambdas
                  for e in spec.estimators if e.endswith("lsl")]
    return cells


def _one_run(spec: SweepSpec, run: int) -> dict[tuple, tuple[float, float]]:
    """Every cell at every m for run r: (RMSE, excess risk or NaN)."""
    world = spec.world
    values = world.values()
    out: dict[tuple, tuple[float, float]] = {}
    algorithms: dict[tuple, PolicyEvaluation] = {}
    for m in batch_sizes(spec):
        n, g = world.statistics(m, generator(spec.seed, "policy-eval-sweep", "batch", run, m))
        for cell in _cells(spec, m):
            key = (cell.estimator, cell.features, m, cell.lam)
            algo = algorithms.get(key)
            if algo is None:
                algo = bind(spec.config(cell.estimator, cell.features, m, cell.lam))
                algorithms[key] = algo  # type: ignore[assignment]
            theta = algo.estimate(m, n, g)
            excess = math.nan
            if cell.local:
                theta = _local_estimate(spec, algo, n, g, m, run, cell)
            elif cell.private:
                sigma = float(algo.noise_scale(m, n[None])[0])
                path = ("policy-eval-sweep", "noise", run, m, cell.estimator, cell.features)
                rng = generator(spec.seed, *path, *(() if cell.lam is None else (repr(cell.lam),)))
                # simulated in law, never published: the release's discrete Gaussian on the
                # 2^-30 grid is this continuous law to within its grid step
                eta = Gaussian(sigma, FLOAT_NOISE).sample(rng, (algo.d,))
                theta = theta + eta
                excess = float(_excess(algo, eta, n, m))
            out[key] = (rmse(values, algo.phi, theta), excess)
    return out


def _local_estimate(spec: SweepSpec, algo: PolicyEvaluation, n: np.ndarray, g: np.ndarray,
                    m: int, run: int, cell: Cell) -> np.ndarray:
    """The LDP estimate from the noisy sums: the m users' Gaussian noise summed, exactly in law
    (N(0, m sigma_L^2) per entry; the returns family carries g / F_max)."""
    sigma = algo.calibration().noise_scale
    rng = generator(spec.seed, "policy-eval-sweep", "local", run, m, cell.estimator, cell.features)
    spread = sigma * math.sqrt(m)
    n_noisy = n + spread * rng.standard_normal(n.shape)
    scaled = g / algo.f_max + spread * rng.standard_normal(g.shape)
    return algo.ldp_estimate(n_noisy, scaled * algo.f_max)


def _excess(algo: PolicyEvaluation, eta: np.ndarray, n: np.ndarray, m: int) -> float:
    """The exact excess empirical risk of one noisy release."""
    est = getattr(algo, "lsw", None) or algo.lsl  # type: ignore[attr-defined]
    return float(est.excess_risk(eta, n, m))


def _summary(values: np.ndarray) -> dict[str, Any]:
    """Per-run values, their mean and standard error (std / sqrt(runs))."""
    n = values.size
    return {
        "values": [float(v) for v in values],
        "mean": float(values.mean()),
        "se": float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0,
    }


def batch_ledger(spec: SweepSpec, m: int) -> Ledger:
    """Every DP release made from one batch of size m (what each of its users pays)."""
    ledger = Ledger()
    for cell in _cells(spec, m):
        config = spec.config(cell.estimator, cell.features, m, cell.lam)
        if cell.private:
            bind(config).charge_release(ledger, "numpy")  # type: ignore[attr-defined]
        elif cell.local:  # each user's one local report, charged as the server charges it
            cal = bind(config).calibration()
            zeros = {f.name: np.zeros((1, *f.shape)) for f in cal.families}
            Aggregator(cal, 1).ingest(zeros, ledger)
    return ledger


def sweep(spec: SweepSpec, workers: int | None = None, progress: bool = True) -> dict[str, Any]:
    """Run the sweep; returns the summary.json record."""
    started = time.perf_counter()
    workers = max(1, min(workers or os.cpu_count() or 1, spec.runs))
    per_run: list[dict[tuple, tuple[float, float]]] = [{} for _ in range(spec.runs)]
    bar = tqdm(total=spec.runs, desc="runs", unit="run", disable=not progress)
    if workers == 1:
        for r in range(spec.runs):
            per_run[r] = _one_run(spec, r)
            bar.update()
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(_one_run, spec, r): r for r in range(spec.runs)}
            for fut in as_completed(futures):
                per_run[futures[fut]] = fut.result()
                bar.update()
    bar.close()
    rows = []
    for key in per_run[0]:
        estimator, features, m, lam = key
        rmse = np.array([res[key][0] for res in per_run])
        excess = np.array([res[key][1] for res in per_run])
        algo = bind(spec.config(estimator, features, m, lam))
        row = {"estimator": estimator, "features": features, "d": algo.d, "m": m,
               "lambda": getattr(algo, "lam", None), "lambda_fixed": lam is not None,
               "in_sweep": m in spec.trajectories, "rmse": _summary(rmse)}
        if not np.isnan(excess).all():
            row["excess_risk"] = _summary(excess)
        rows.append(row)
    ledgers = {str(m): LedgerView.of("in-process", batch_ledger(spec, m), spec.delta).model_dump(
        mode="json", exclude={"run_id"}) for m in batch_sizes(spec)}
    return {
        "kind": KIND,
        "spec": spec.to_dict(),
        "values": [float(v) for v in spec.world.values()],
        "rows": rows,
        "ledger": {
            "per_release": {"epsilon": spec.epsilon, "delta": spec.delta},
            "note": "each DP estimate is one smoothed-sensitivity Gaussian release, (epsilon,"
            " delta)-DP for the users of its batch; every release made from one batch composes"
            " (basic composition) into that batch's ledger below",
            "per_batch": ledgers,
        },
        "seconds": time.perf_counter() - started,
        "workers": workers,
    }


def save(summary: dict[str, Any], out: Path) -> Path:
    """Write DIR/summary.json."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "summary.json"
    path.write_text(json.dumps(summary, allow_nan=False))
    return path


def load(path: Path) -> dict[str, Any] | None:
    """A policy-evaluation summary from a summary.json (or its directory); None if another
    kind of summary is there."""
    data = read_summary(path)
    return data if data.get("kind") == KIND else None


# -- figures ---------------------------------------------------------------------------------------


FEATURE_MARKERS = {"tabular": "o", "agg2": "^", "agg4": "s", "agg8": "D"}


def style(estimator: str, features: str = "tabular") -> dict[str, Any]:
    """The colour of its privacy mode (the palette of every figure), LSW solid and LSL dashed, a
    marker per feature map."""
    from .plots import privacy_color

    return {"color": privacy_color(estimator_run(estimator)[1]),
            "ls": "-" if estimator.endswith("lsw") else "--",
            "marker": FEATURE_MARKERS.get(features, "v")}


LABEL = {"lsw": "LSW", "lsl": "LSL", "dp-lsw": "DP-LSW", "dp-lsl": "DP-LSL",
         "ldp-lsw": "LDP-LSW", "ldp-lsl": "LDP-LSL"}


def _series(rows: list[dict], estimator: str, features: str, metric: str = "rmse",
            by: str = "m", **where: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, mean, se) of a metric for one estimator and feature map, sorted by x."""
    pts = sorted(
        (r[by], r[metric]["mean"], r[metric]["se"]) for r in rows
        if r["estimator"] == estimator and r["features"] == features and metric in r
        and all(r.get(k) == v for k, v in where.items())
    )
    if not pts:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    x, mean, se = (np.array(v, dtype=float) for v in zip(*pts, strict=True))
    return x, mean, se


def _errorbar(ax: Any, x: np.ndarray, mean: np.ndarray, se: np.ndarray, **kw: Any) -> None:
    if x.size:
        ax.errorbar(x, mean, yerr=se, capsize=2, ms=4, **kw)


def panel_1(ax: Any, summary: dict[str, Any]) -> None:
    """Non-private LSW vs LSL, tabular and aggregated (pairs), RMSE against m."""
    rows = summary["rows"]
    for features in ("tabular", "agg2"):
        for est in ("lsw", "lsl"):
            x, m, se = _series(rows, est, features, lambda_fixed=False, in_sweep=True)
            _errorbar(ax, x, m, se, **style(est, features), label=f"{LABEL[est]} {features}")
    ax.set(xscale="log", yscale="log", xlabel="batch size m", ylabel="RMSE",
           title="1: non-private LSW (solid) vs LSL (dashed)")


def panel_2(ax: Any, summary: dict[str, Any]) -> None:
    """All four estimators, tabular, RMSE against lambda at two batch sizes."""
    rows, spec = summary["rows"], summary["spec"]
    lambdas = np.array(spec["lambdas"], dtype=float)
    for i, m in enumerate(spec["lambda_at"]):
        marker = ("o", "s", "^", "v")[i % 4]
        for est in ("lsl", "dp-lsl"):
            x, mean, se = _series(rows, est, "tabular", by="lambda", m=m, lambda_fixed=True)
            if x.size:
                _errorbar(ax, x, mean, se, **{**style(est), "marker": marker},
                          label=f"{LABEL[est]} m={m:g}")
        for est in ("lsw", "dp-lsw"):
            flat = [r for r in rows if r["estimator"] == est and r["features"] == "tabular"
                    and r["m"] == m]
            if flat:
                level = flat[0]["rmse"]["mean"]
                ax.plot(lambdas, np.full(lambdas.size, level), **{**style(est), "marker": marker},
                        ms=3, label=f"{LABEL[est]} m={m:g}")
    ax.set(xscale="log", yscale="log", xlabel="λ", ylabel="RMSE",
           title="2: tabular, RMSE vs λ")


def panel_3(ax: Any, summary: dict[str, Any]) -> None:
    """All four estimators with state aggregation (pairs), RMSE against m."""
    rows = summary["rows"]
    features = "agg2" if any(r["features"] == "agg2" for r in rows) else rows[0]["features"]
    for est in ALL_ESTIMATORS:
        x, m, se = _series(rows, est, features, lambda_fixed=False, in_sweep=True)
        _errorbar(ax, x, m, se, **style(est, features), label=LABEL[est])
    ax.set(xscale="log", yscale="log", xlabel="batch size m", ylabel="RMSE",
           title=f"3: {features} features, RMSE vs m")


def panel_4(ax: Any, summary: dict[str, Any]) -> None:
    """Excess empirical risk of DP-LSW and DP-LSL against m for every feature map (every d)."""
    rows = summary["rows"]
    feats = sorted({r["features"] for r in rows}, key=lambda f: -feature_dim(rows, f))
    for features in feats:
        d = feature_dim(rows, features)
        for est in ("dp-lsw", "dp-lsl"):
            x, m, se = _series(rows, est, features, metric="excess_risk", lambda_fixed=False,
                               in_sweep=True)
            _errorbar(ax, x, m, se, **style(est, features),
                      label=f"{LABEL[est]} {features} (d={d})")
    ax.set(xscale="log", yscale="log", xlabel="batch size m", ylabel="excess empirical risk",
           title="4: excess risk vs m, several d (DP-LSW solid, DP-LSL dashed)")


def feature_dim(rows: list[dict], features: str) -> int:
    """d of a feature map, from the rows."""
    return next(r["d"] for r in rows if r["features"] == features)


PANELS = (panel_1, panel_2, panel_3, panel_4)


def drawn(summary: dict[str, Any]) -> list[int]:
    """The indices of the panels the summary has data for (a sweep without fixed lambdas has no
    panel 2: no empty panel is drawn)."""
    keep = []
    for i, panel in enumerate(PANELS):
        ax = _figure().add_subplot()
        panel(ax, summary)
        if ax.lines or ax.containers:
            keep.append(i)
    return keep


def _finish(ax: Any) -> None:
    ax.grid(alpha=0.3, which="both")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def _figure(**kwargs: Any) -> Figure:
    """A matplotlib Figure (object API), matplotlib imported on first use."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def figure(summary: dict[str, Any]) -> Figure:
    """Figure 1's panels that have data, in one figure (2 x 2 when all four do, else a row)."""
    keep = drawn(summary)
    cols = 2 if len(keep) == 4 else max(1, len(keep))
    rows = -(-len(keep) // cols)
    fig = _figure(figsize=(6.5 * cols, 5 * rows))
    for j, i in enumerate(keep):
        ax = fig.add_subplot(rows, cols, j + 1)
        PANELS[i](ax, summary)
        _finish(ax)
    spec = summary["spec"]
    fig.suptitle(f"{spec['chain']}: eps = {spec['epsilon']:g}, delta = {spec['delta']:g},"
                 f" F_max = {spec['f_max']:g}, {spec['runs']} runs (mean ± s.e.)\ncolour:"
                 " green non-private, blue JDP, red LDP; marker: the feature map")
    fig.tight_layout()
    return fig


def plot(summary: dict[str, Any], out: Path) -> list[Path]:
    """figure1.png (every panel with data) and panelN.png of each of them in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "figure1.png"]
    figure(summary).savefig(paths[0], dpi=110)
    for i in drawn(summary):
        fig = _figure(figsize=(6.5, 5))
        ax = fig.add_subplot()
        PANELS[i](ax, summary)
        _finish(ax)
        fig.tight_layout()
        paths.append(out / f"panel{i + 1}.png")
        fig.savefig(paths[-1], dpi=110)
    return paths


def table(summary: dict[str, Any], estimators: Sequence[str] = ALL_ESTIMATORS) -> str:
    """RMSE mean ± s.e. per estimator / features (rows) and m (columns), schedule cells only."""
    rows = [r for r in summary["rows"] if not r["lambda_fixed"]]
    ms = sorted(summary["spec"]["trajectories"])
    lines = [f"RMSE against the exact values (mean ± s.e. over {summary['spec']['runs']} runs),"
             " by batch size m:",
             f"{'estimator':<8} {'features':<8} " + " ".join(f"{f'm={m:.0e}':>17}" for m in ms)]
    for features in summary["spec"]["features"]:
        for est in estimators:
            cells = {r["m"]: r["rmse"] for r in rows
                     if r["estimator"] == est and r["features"] == features}
            if cells:
                text = " ".join(
                    f"{cells[m]['mean']:>9.3g}±{cells[m]['se']:<7.2g}" if m in cells else " " * 17
                    for m in ms
                )
                lines.append(f"{est:<8} {features:<8} {text}")
    return "\n".join(lines)
