"""Figures from results: cumulative regret (mean +- std band), learning curves as a percentage of
the random policy's regret, and regret vs epsilon.

Built with matplotlib's object API (`Figure`, no pyplot): no global backend is chosen, so the
same figures work in scripts (saved to files) and in notebooks (returned and displayed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

# Each configuration gets its own colour, line style and marker, so curves that lie on top of
# each other (two learners that both fail, a learner at the random policy's level) stay visible.
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1)), (0, (3, 1, 1, 1, 1, 1)))
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def line_style(i: int, episodes: int) -> dict[str, Any]:
    """Matplotlib keywords of the i-th curve: colour, dash pattern, sparse markers, width."""
    return {
        "color": f"C{i % 10}",
        "linestyle": LINESTYLES[i % len(LINESTYLES)],
        "marker": MARKERS[i % len(MARKERS)],
        "markevery": max(1, episodes // 8) if episodes > 1 else None,
        "markersize": 5,
        "linewidth": 1.8,
    }


def legend_label(res: dict[str, Any]) -> str:
    """The result's label, with the (epsilon, delta) its ledger spent when it is private."""
    cfg, led = res.get("config", {}), res.get("ledger") or {}
    if cfg.get("privacy", "none") == "none" or "epsilon" not in led:
        return res["label"]
    eps = led["epsilon"]
    eps_txt = eps if isinstance(eps, str) else f"{eps:.3g}"
    return f"{res['label']} (spent ε = {eps_txt}, δ = {led.get('delta', 0):g})"


def _cumulative(ax: Any, results: list[dict[str, Any]], reference: bool) -> None:
    """Cumulative regret, mean ± 1 std over seeds (a band when there are several seeds)."""
    episodes = 0
    for i, res in enumerate(results):
        per = np.asarray(res["regret"]["per_episode"])
        cum = np.cumsum(per, axis=1)
        mean, std = cum.mean(axis=0), cum.std(axis=0)
        x = np.arange(1, cum.shape[1] + 1)
        episodes = max(episodes, cum.shape[1])
        style = line_style(i, cum.shape[1])
        ax.plot(x, mean, label=legend_label(res), zorder=3 + i, **style)
        if cum.shape[0] > 1:
            ax.fill_between(x, mean - std, mean + std, color=style["color"], alpha=0.2, lw=0)
    if reference and results and episodes:
        rnd = results[0]["regret"]["random_policy_per_episode"]
        x = np.arange(1, episodes + 1)
        ax.plot(x, rnd * x, color="0.45", ls=":", lw=1.2, label="uniformly random policy (= 100%)",
                zorder=2)
    ax.set_xlabel("episode k")
    ax.set_ylabel("cumulative regret")
    ax.grid(alpha=0.3)


def cumulative_figure(
    results: list[dict[str, Any]], title: str = "", reference: bool = False
) -> Figure:
    """Cumulative regret vs episode, one line per configuration, band = +-1 std over seeds
    (`reference`: also the uniformly random policy's)."""
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    _cumulative(ax, results, reference)
    ax.set_title(title or "Cumulative regret (mean ± 1 std over seeds)")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def moving(x: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Trailing moving mean and std over `window` points of each row of x (R, K): (R, K) each
    (the first points average over what there is)."""
    x = np.asarray(x, dtype=np.float64)
    c1 = np.cumsum(np.pad(x, ((0, 0), (1, 0))), axis=1)
    c2 = np.cumsum(np.pad(x * x, ((0, 0), (1, 0))), axis=1)
    k = np.arange(1, x.shape[1] + 1)
    lo = np.maximum(0, k - window)
    n = k - lo
    mean = (c1[:, k] - c1[:, lo]) / n
    var = np.maximum((c2[:, k] - c2[:, lo]) / n - mean * mean, 0.0)
    return mean, np.sqrt(var)


def learning_figure(results: list[dict[str, Any]], title: str = "", window: int = 100) -> Figure:
    """Two panels: cumulative regret (with the random policy's), and per-episode regret as a
    percentage of the uniformly random policy's, as a moving mean over `window` episodes with a
    band (± 1 std over seeds; with one seed, ± 1 std of the episodes inside the window)."""
    fig = Figure(figsize=(12, 5.2))
    left, right = fig.subplots(1, 2)
    _cumulative(left, results, reference=True)
    left.set_title("cumulative regret")
    episodes = 0
    for i, res in enumerate(results):
        per = np.asarray(res["regret"]["per_episode"], dtype=np.float64)
        rnd = res["regret"]["random_policy_per_episode"]
        pct = 100.0 * per / rnd if rnd > 0 else per
        mean_rows, std_rows = moving(pct, window)
        mean = mean_rows.mean(axis=0)
        band = mean_rows.std(axis=0) if per.shape[0] > 1 else std_rows[0]
        x = np.arange(1, per.shape[1] + 1)
        episodes = max(episodes, per.shape[1])
        style = line_style(i, per.shape[1])
        right.plot(x, mean, label=legend_label(res), zorder=3 + i, **style)
        right.fill_between(x, np.maximum(mean - band, 0), mean + band, color=style["color"],
                           alpha=0.15, lw=0)
    right.axhline(100, color="0.45", ls=":", lw=1.2, label="_random")
    right.axhline(0, color="k", lw=0.8, label="optimal policy (0%)")
    right.set_xlabel("episode k")
    right.set_ylabel("regret per episode, % of random")
    right.set_title(f"learning: moving mean over {window} episodes, band ± 1 std")
    right.set_ylim(-5, 130)
    right.grid(alpha=0.3)
    handles, labels = left.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    for handle, text in zip(*more, strict=True):
        if text.startswith("optimal"):
            handles.append(handle)
            labels.append(text)
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def plot_learning(
    results: list[dict[str, Any]], path: Path, title: str = "", window: int = 100
) -> Path:
    """`learning_figure`, saved as a PNG at `path`."""
    learning_figure(results, title, window).savefig(path, dpi=110)
    return path


def plot_cumulative(results: list[dict[str, Any]], path: Path, title: str = "") -> Path:
    """`cumulative_figure`, saved as a PNG at `path`."""
    cumulative_figure(results, title).savefig(path, dpi=120)
    return path


def frontier_figure(results: list[dict[str, Any]]) -> Figure:
    """Final per-episode regret (last episodes) vs epsilon for JDP and LDP (log-x)."""
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    groups: dict[str, list[tuple[float, float, float]]] = {}
    random_level = None
    for res in results:
        cfg, reg = res["config"], res["regret"]
        random_level = reg["random_policy_per_episode"]
        if cfg["privacy"] == "none":
            ax.axhline(reg["tail_per_episode_mean"], color="k", ls="--", label="non-private")
            continue
        pooled_h = cfg.get("pooled") or (cfg.get("knobs") or {}).get("pooled")
        pooled = ", pooled over h" if pooled_h else ""
        key = f"{cfg['privacy'].upper()} ({cfg['mechanism']}{pooled})"
        eps = float(cfg["epsilon"])
        if not np.isfinite(eps):  # no privacy: the non-private line stands for it
            continue
        groups.setdefault(key, []).append(
            (eps, reg["tail_per_episode_mean"], reg["tail_per_episode_std"])
        )
    for key, pts in sorted(groups.items()):
        pts.sort()
        e, m, s = (np.array(v) for v in zip(*pts, strict=True))
        ax.errorbar(e, m, yerr=s, marker="o", capsize=3, label=key)
    if random_level is not None:
        ax.axhline(random_level, color="grey", ls=":", label="uniformly random policy")
        ax.axhline(0.25 * random_level, color="grey", ls="-.", lw=0.8, label="25% of random")
    if groups:
        ax.set_xscale("log")
    ax.set_xlabel("ε (per user)")
    ax.set_ylabel("per-episode regret, last episodes")
    ax.set_title("Privacy–utility frontier")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig


def plot_frontier(results: list[dict[str, Any]], path: Path) -> Path:
    """`frontier_figure`, saved as a PNG at `path`."""
    frontier_figure(results).savefig(path, dpi=120)
    return path


def switch_points(results: list[dict[str, Any]]) -> dict[str, list[tuple[int, float, float]]]:
    """Policy switches against K per configuration family ("algo label"): (K, mean, std over
    seeds) sorted by K; only families run at two or more K (one K is not a curve)."""
    groups: dict[str, dict[int, list[int]]] = {}
    for res in results:
        changes = res.get("policy_changes")
        if not changes:
            continue
        cfg = res["config"]
        knobs = cfg.get("knobs") or {}
        extra = f" B={knobs['batches']}" if "batches" in knobs else ""
        key = f"{cfg['algo']}{extra} {res['label']}"
        groups.setdefault(key, {}).setdefault(int(cfg["episodes"]), []).extend(changes)
    return {
        key: [(k, float(np.mean(v)), float(np.std(v))) for k, v in sorted(by_k.items())]
        for key, by_k in sorted(groups.items())
        if len(by_k) >= 2
    }


def switches_figure(results: list[dict[str, Any]]) -> Figure:
    """Number of policy switches vs K (log-log), one line per configuration family, with the
    every-episode reference K - 1."""
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    points = switch_points(results)
    low, top = np.inf, 2
    for i, (key, pts) in enumerate(points.items()):
        k, m, s = (np.array(v) for v in zip(*pts, strict=True))
        low, top = min(low, int(k.min())), max(top, int(k.max()))
        style = line_style(i, len(k))
        style["markevery"] = None
        ax.errorbar(k, np.maximum(m, 0.5), yerr=s, capsize=3, label=key, **style)
    ks = np.geomspace(max(min(low, top), 2), top, 50)
    ax.plot(ks, ks - 1, color="0.45", ls=":", lw=1.2, label="an update every episode (K - 1)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("episodes K")
    ax.set_ylabel("policy switches (mean over seeds; 0 drawn at 0.5)")
    ax.set_title("Policy switches vs K")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig


def plot_switches(results: list[dict[str, Any]], path: Path) -> Path | None:
    """`switches_figure` saved at `path` when some family was run at several K (else None)."""
    if not switch_points(results):
        return None
    switches_figure(results).savefig(path, dpi=120)
    return path
