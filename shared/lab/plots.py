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
from privrl import trust

# One colour per trust boundary in every figure, its own (`privrl.trust`; the dashboard reads the
# same from GET /v1/trust): green non-private, blue JDP, red LDP. Curves of one boundary differ by
# line style and marker, so curves that lie on top of each other (two learners that both fail, a
# learner at the random policy's level) stay visible.
PRIVACY_COLORS = {name: trust.get(name).colour for name in trust.names()}
PRIVACY_NAMES = {name: trust.get(name).label for name in trust.names()}
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1)), (0, (3, 1, 1, 1, 1, 1)))
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def privacy_color(privacy: str) -> str:
    """The colour of a trust boundary (`RunConfig.privacy`) in every figure."""
    return trust.get(privacy).colour


def line_style(i: int, episodes: int, privacy: str) -> dict[str, Any]:
    """Matplotlib keywords of the i-th curve: its mode's colour, the i-th dash pattern and
    marker (sparse), width."""
    return {
        "color": privacy_color(privacy),
        "linestyle": LINESTYLES[i % len(LINESTYLES)],
        "marker": MARKERS[i % len(MARKERS)],
        "markevery": max(1, episodes // 8) if episodes > 1 else None,
        "markersize": 5,
        "linewidth": 1.8,
    }


def setting(res: dict[str, Any]) -> str:
    """The algorithm and world of a result: 'dp-ucbvi on riverswim H=20' (what is recorded)."""
    cfg = res.get("config", {})
    world = res.get("world") or {}
    where = world.get("name", "")
    if where and "horizon" in cfg:
        where += f" H={cfg['horizon']}"
    where += "".join(f" {k}={v}" for k, v in sorted((world.get("params") or {}).items()))
    algo = cfg.get("algo", "")
    return f"{algo} on {where}" if algo and where else algo or where


def legend_label(res: dict[str, Any]) -> str:
    """'ALGO on WORLD: LABEL', with the (epsilon, delta) its ledger spent when it is private."""
    cfg, led = res.get("config", {}), res.get("ledger") or {}
    head = setting(res)
    text = f"{head}: {res['label']}" if head else res["label"]
    privacy = cfg.get("privacy")  # none stated: nothing spent to show
    if privacy is None or not trust.get(privacy).private or "epsilon" not in led:
        return text
    eps = led["epsilon"]
    eps_txt = eps if isinstance(eps, str) else f"{eps:.3g}"
    return f"{text} (spent ε = {eps_txt}, δ = {led.get('delta', 0):g})"


def legend_below(fig: Figure, handles: list, labels: list[str], top: float = 1.0) -> None:
    """The figure's legend under its axes, in two columns when there are many entries and two
    fit in the figure's width (about 4.5 points a character at 8 points), with room made for it."""
    column = (0.6 + 4.5 * max((len(t) for t in labels), default=0) / 72)  # inches
    ncol = 2 if len(labels) > 4 and 2 * column < fig.get_figwidth() else 1
    rows = -(-len(labels) // ncol)
    height = fig.get_figheight()
    fig.set_figheight(height + 0.18 * rows)
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, (0.18 * rows + 0.1) / fig.get_figheight(), 1, top))


def _cumulative(ax: Any, results: list[dict[str, Any]], reference: bool) -> None:
    """Cumulative regret, mean ± 1 std over seeds (a band when there are several seeds)."""
    episodes = 0
    for i, res in enumerate(results):
        per = np.asarray(res["regret"]["per_episode"])
        cum = np.cumsum(per, axis=1)
        mean, std = cum.mean(axis=0), cum.std(axis=0)
        x = np.arange(1, cum.shape[1] + 1)
        episodes = max(episodes, cum.shape[1])
        style = line_style(i, cum.shape[1], res["config"]["privacy"])
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
    legend_below(fig, *ax.get_legend_handles_labels())
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
        style = line_style(i, per.shape[1], res["config"]["privacy"])
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
    if title:
        fig.suptitle(title)
    legend_below(fig, handles, labels)
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
    """Final per-episode regret (last episodes) vs epsilon for JDP and LDP (log-x), one line per
    algorithm, world and mechanism, in its privacy mode's colour."""
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    groups: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    random_levels: dict[str, float] = {}
    for res in results:
        cfg, reg = res["config"], res["regret"]
        head = setting(res)
        random_levels[head] = reg["random_policy_per_episode"]
        where = f"{head}: " if head else ""
        boundary = trust.get(cfg["privacy"])
        if not boundary.private:  # one level: its regret spends nothing
            ax.axhline(reg["tail_per_episode_mean"], color=boundary.colour, ls="--",
                       label=f"{where}{boundary.label}")
            continue
        pooled_h = cfg.get("pooled") or (cfg.get("knobs") or {}).get("pooled")
        pooled = ", pooled over h" if pooled_h else ""
        key = f"{where}{trust.get(cfg['privacy']).label} ({cfg['mechanism']}{pooled})"
        eps = float(cfg["epsilon"])
        if not np.isfinite(eps):  # no privacy: the non-private line stands for it
            continue
        groups.setdefault((key, cfg["privacy"]), []).append(
            (eps, reg["tail_per_episode_mean"], reg["tail_per_episode_std"])
        )
    for i, ((key, privacy), pts) in enumerate(sorted(groups.items())):
        pts.sort()
        e, m, s = (np.array(v) for v in zip(*pts, strict=True))
        ax.errorbar(e, m, yerr=s, capsize=3, label=key, color=privacy_color(privacy),
                    ls=LINESTYLES[i % len(LINESTYLES)], marker=MARKERS[i % len(MARKERS)])
    for j, (head, level) in enumerate(random_levels.items()):
        of = f" ({head})" if len(random_levels) > 1 and head else ""
        ls = LINESTYLES[(j + 3) % len(LINESTYLES)]
        ax.axhline(level, color="grey", ls=":" if not of else ls,
                   label=f"uniformly random policy{of}")
        ax.axhline(0.25 * level, color="grey", ls="-.", lw=0.8, label=f"25% of random{of}")
    if groups:
        ax.set_xscale("log")
    ax.set_xlabel("ε (per user)")
    ax.set_ylabel("per-episode regret, last episodes")
    ax.set_title("Privacy–utility frontier")
    ax.grid(alpha=0.3, which="both")
    legend_below(fig, *ax.get_legend_handles_labels())
    return fig


def plot_frontier(results: list[dict[str, Any]], path: Path) -> Path:
    """`frontier_figure`, saved as a PNG at `path`."""
    frontier_figure(results).savefig(path, dpi=120)
    return path


def family(res: dict[str, Any]) -> str:
    """The configuration family of a result in the switches figure: 'algo[ B=..] on WORLD: LABEL'
    (the same configuration at every K)."""
    cfg = res["config"]
    knobs = cfg.get("knobs") or {}
    extra = f" B={knobs['batches']}" if "batches" in knobs else ""
    where = (res.get("world") or {}).get("name")
    return f"{cfg['algo']}{extra}{f' on {where}' if where else ''}: {res['label']}"


def switch_points(results: list[dict[str, Any]]) -> dict[str, list[tuple[int, float, float]]]:
    """Policy switches against K per configuration family ("algo label"): (K, mean, std over
    seeds) sorted by K; only families run at two or more K (one K is not a curve)."""
    groups: dict[str, dict[int, list[int]]] = {}
    for res in results:
        changes = res.get("policy_changes")
        if not changes:
            continue
        episodes = int(res["config"]["episodes"])
        groups.setdefault(family(res), {}).setdefault(episodes, []).extend(changes)
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
    privacy = {family(res): res["config"]["privacy"] for res in results}
    low, top = np.inf, 2
    for i, (key, pts) in enumerate(points.items()):
        k, m, s = (np.array(v) for v in zip(*pts, strict=True))
        low, top = min(low, int(k.min())), max(top, int(k.max()))
        style = line_style(i, len(k), privacy[key])
        style["markevery"] = None
        ax.errorbar(k, np.maximum(m, 0.5), yerr=s, capsize=3, label=key, **style)
    ks = np.geomspace(max(min(low, top), 2), top, 50)
    ax.plot(ks, ks - 1, color="0.45", ls=":", lw=1.2, label="an update every episode (K - 1)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("episodes K")
    ax.set_ylabel("policy switches (mean over seeds; 0 drawn at 0.5)")
    ax.set_title("Policy switches vs K")
    ax.grid(alpha=0.3, which="both")
    legend_below(fig, *ax.get_legend_handles_labels())
    return fig


def plot_switches(results: list[dict[str, Any]], path: Path) -> Path | None:
    """`switches_figure` saved at `path` when some family was run at several K (else None)."""
    if not switch_points(results):
        return None
    switches_figure(results).savefig(path, dpi=120)
    return path


PRESET_STYLES = {"faithful": {"linestyle": "--", "marker": "s"},
                 "practical": {"linestyle": "-", "marker": "o"}}


def frontier_panels_figure(panels: list[dict[str, Any]], learns_below: float = 25.0,
                           title: str = "") -> Figure:
    """`privrl frontier`'s figure: one panel per case (log ε), the final regret as % of the
    uniform policy's per preset (faithful dashed, practical solid, in the case's privacy colour),
    a band for the seeds' 95% interval, and the learning line at `learns_below` %."""
    cols = min(3, max(1, len(panels)))
    rows = -(-len(panels) // cols) if panels else 1
    fig = Figure(figsize=(4.2 * cols, 3.2 * rows + 0.6))
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    for ax, panel in zip(axes, panels, strict=False):
        colour = privacy_color(panel["privacy"])
        top = 130.0
        for preset, points in panel["presets"].items():
            if not points:
                continue
            e, m, lo, hi = (np.array(v, dtype=float) for v in zip(*points, strict=True))
            top = max(top, float(m.max()) + 10.0)
            style = PRESET_STYLES.get(preset, {"linestyle": ":", "marker": "^"})
            ax.plot(e, m, color=colour, label=preset, markersize=5, linewidth=1.6, **style)
            ax.fill_between(e, lo, hi, color=colour, alpha=0.15 if preset == "practical" else 0.08,
                            lw=0)
        ax.axhline(learns_below, color="0.45", ls=":", lw=1.2, label=f"learns ({learns_below:g}%)")
        ax.axhline(100, color="0.7", lw=0.8, label="_random")
        ax.set_xscale("log")
        ax.set_ylim(-5, top)
        ax.set_title(panel["title"], fontsize=10)
        ax.set_xlabel("ε (per user)")
        ax.set_ylabel("final regret, % of uniform")
        ax.grid(alpha=0.3, which="both")
    for ax in axes[len(panels):]:
        ax.set_axis_off()
    handles, labels = axes[0].get_legend_handles_labels() if panels else ([], [])
    fig.suptitle(title or "Privacy–utility frontier: last 10% of episodes, mean and 95% band")
    legend_below(fig, handles, labels, top=0.95)
    return fig


def plot_frontier_panels(panels: list[dict[str, Any]], path: Path, learns_below: float = 25.0,
                         title: str = "") -> Path:
    """`frontier_panels_figure`, saved as a PNG at `path`."""
    frontier_panels_figure(panels, learns_below, title).savefig(path, dpi=110)
    return path
