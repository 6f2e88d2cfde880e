"""Learning metrics of saved runs of any algorithm:
`python scripts/run_metrics.py DIR [DIR ...] [--json OUT]`.

For every configuration in each DIR/summary.json: cumulative regret (mean ± std over seeds), the
tests' sublinearity checks (mean per-episode regret of the last 20% of episodes over the first
20%; log-log slope of the median cumulative regret over k in [K/10, K]), the last-10% per-episode
regret as a share of the uniformly random policy's, whether that is <= 25% (the "learns"
criterion), the epsilon the ledger spent and the policy changes (mean over seeds). `--json OUT`
also saves the table for the docs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from results_table import save_table

COLUMNS = (("algorithm", ""), ("preset", ""), ("knobs", ""), ("world", ""),
           ("configuration", ""), ("K", ","), ("seeds", ""), ("cumulative regret", ".1f"),
           ("last 20% / first 20%", ".3f"), ("log-log slope", ".3f"),
           ("last-10% regret, % of random", ".1f"), ("learns", ""), ("ε spent", "sci"),
           ("policy changes", ",.0f"))


def metrics(record: dict) -> dict:
    """The numbers of one configuration."""
    per = np.asarray(record["regret"]["per_episode"], dtype=np.float64)
    k = per.shape[1]
    cum = per.cumsum(axis=1)
    ks = np.arange(max(k // 10, 1), k + 1)
    med = np.median(cum, axis=0)[ks - 1]
    slope = float(np.polyfit(np.log(ks), np.log(np.maximum(med, 1e-12)), 1)[0])
    first, last = per[:, : k // 5].mean(), per[:, -k // 5:].mean()
    tail = per[:, -max(k // 10, 1):].mean()
    rand = record["regret"]["random_policy_per_episode"]
    eps = record["ledger"]["epsilon"]
    return {
        "algo": record["config"]["algo"], "preset": record["config"]["preset"],
        "knobs": " ".join(f"{k}={v}" for k, v in (record["config"]["knobs"] or {}).items()),
        "world": record["world"]["name"], "seeds": len(record["seeds"]),
        "label": record["label"], "K": k,
        "cumulative": float(cum[:, -1].mean()), "cumulative_std": float(cum[:, -1].std()),
        "last20_over_first20": float(last / first) if first > 0 else float("nan"),
        "slope": slope, "tail10_pct_random": float(100 * tail / rand),
        "learns": bool(tail <= 0.25 * rand), "epsilon_spent": eps,
        "policy_changes": float(np.mean(record["policy_changes"])),
    }


def main(argv: list[str]) -> None:
    """Print one line per configuration (and save them with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", help="directories holding a summary.json")
    parser.add_argument("--json", help="also save the table here (for the docs)")
    args = parser.parse_args(argv)
    rows = []
    print(f"{'algo':<10} {'preset':<9} {'configuration':<24} {'K':>6} {'cum. regret':>16} "
          f"{'last/first':>10} {'slope':>6} {'last-10%':>9} {'learns':>6} {'eps spent':>10}")
    for d in args.dirs:
        for rec in json.loads((Path(d) / "summary.json").read_text())["results"]:
            m = metrics(rec)
            eps = m["epsilon_spent"]
            rows.append([m["algo"], m["preset"], m["knobs"] or None, m["world"], m["label"],
                         m["K"], m["seeds"],
                         [m["cumulative"], m["cumulative_std"]], m["last20_over_first20"],
                         m["slope"], m["tail10_pct_random"], m["learns"],
                         float(eps) if isinstance(eps, str) else eps, m["policy_changes"]])
            eps_txt = eps if isinstance(eps, str) else f"{eps:.4g}"
            print(f"{m['algo']:<10} {m['preset']:<9} {m['label']:<24} {m['K']:>6}"
                  f" {m['cumulative']:>9.1f}"
                  f" ± {m['cumulative_std']:<5.1f} {m['last20_over_first20']:>10.3f}"
                  f" {m['slope']:>6.3f} {m['tail10_pct_random']:>8.1f}% {str(m['learns']):>6}"
                  f" {eps_txt:>10}")
    if args.json:
        save_table(args.json, COLUMNS, rows)


if __name__ == "__main__":
    main(sys.argv[1:])
