"""Figures from results: cumulative regret (mean +- std band) and regret vs epsilon.

Built with matplotlib's object API (`Figure`, no pyplot): no global backend is chosen, so the
same figures work in scripts (saved to files) and in notebooks (returned and displayed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure


def cumulative_figure(results: list[dict[str, Any]], title: str = "") -> Figure:
    """Cumulative regret vs episode, one line per configuration, band = +-1 std over seeds."""
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    for res in results:
        per = np.asarray(res["regret"]["per_episode"])
        cum = np.cumsum(per, axis=1)
        mean, std = cum.mean(axis=0), cum.std(axis=0)
        x = np.arange(1, cum.shape[1] + 1)
        (line,) = ax.plot(x, mean, label=res["label"])
        ax.fill_between(x, mean - std, mean + std, color=line.get_color(), alpha=0.2)
    ax.set_xlabel("episode k")
    ax.set_ylabel("cumulative regret")
    ax.set_title(title or "Cumulative regret (mean ± 1 std over seeds)")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


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
