"""Where the linear-mixture families start to learn: last-10% regret as % of the uniform
policy's, per epsilon, on held-out worlds (secret parameters from seed 1, not the default 0).

`python scripts/linear/threshold.py --out results/linear/threshold.json [--episodes 50000]
[--seeds 3] [--epsilon 0.3 1 3 10 30 100 1000] [--cases ucrl-vtr:jdp ...] [--knob NAME=VALUE]
[--schedule batch:10]`; `--from A.json B.json --json docs/results/linear/threshold.json` turns
saved sweeps into the docs' table (rows of every file, thresholds per case and knobs).

Each case runs its seeds as one vectorized in-process run (replica axis R), practical preset,
Gaussian, delta = 1e-5. Learning: the mean over seeds of the last 10% of episodes' regret is at
most 25% of the uniform policy's. The JSON is rewritten after every run (partial results
survive an interrupted sweep); each row has the ledger's total epsilon (<= the budget).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from privrl.config import RunConfig
from privrl.run import run_in_process
from privrl.worlds import make
from privrl.worlds.model_spec import model_spec_of
from privrl.worlds.values import optimal_return, uniform_random_return

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from results_table import save_table  # noqa: E402

WORLDS = {"ucrl-vtr": ("lm-hard", {"seed": 1}), "ucrl-vtr-plus": ("lm-hard", {"seed": 1}),
          "linopt-vi": ("zhou-mix", {"seed": 1, "feature_seed": 1}),
          "linopt-po": ("zhou-mix", {"seed": 1, "feature_seed": 1})}
CASES = ("ucrl-vtr:jdp", "ucrl-vtr:ldp", "linopt-vi:jdp", "linopt-po:jdp")
LEARNS = 25.0  # % of uniform
COLUMNS = (("case", ""), ("learner", ""), ("schedule", ""), ("ε", "g"), ("episodes", ","),
           ("seeds", ""), ("last 10% regret, % of uniform", ".1f"), ("learns", ""),
           ("ledger ε", ".4g"), ("s / 1000 episodes (wall, shared machine)", ".1f"))


def knob_value(text: str) -> object:
    """A knob's value: JSON where it parses (numbers, true/false), else the word."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def run_case(algo: str, privacy: str, eps: float, args: argparse.Namespace) -> dict:
    """One (algorithm, mode, epsilon) over all seeds at once."""
    world, params = WORLDS[algo]
    mdp = make(world, None, **params)
    knobs = {k: knob_value(v) for k, v in (kv.split("=", 1) for kv in args.knob)}
    extra = {"schedule": args.schedule} if args.schedule and privacy == "jdp" else {}
    config = RunConfig(algo=algo, n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H,
                       model=model_spec_of(mdp), episodes=args.episodes, privacy=privacy,
                       epsilon=eps, delta=1e-5, mechanism="gaussian", preset=args.preset,
                       knobs=knobs, **extra)
    start = time.perf_counter()
    res = run_in_process(config, mdp, list(range(args.seeds)))
    wall = time.perf_counter() - start
    tail = res.regret[:, -max(1, args.episodes // 10):].mean(axis=1)
    uniform = optimal_return(mdp) - uniform_random_return(mdp)
    pct = 100.0 * tail / uniform
    return {"algo": algo, "privacy": privacy, "epsilon": eps, "episodes": args.episodes,
            "seeds": args.seeds, "last10_pct_uniform": float(np.mean(pct)),
            "per_seed_pct": pct.tolist(), "ledger_epsilon": res.ledger.totals(1e-5).epsilon,
            "wall_s": wall, "s_per_1000_episodes": 1e3 * wall / args.episodes,
            "knobs": knobs, "schedule": res.config.schedule, "world": world,
            "world_params": params}


def thresholds(rows: list[dict]) -> dict[str, float | None]:
    """Per case: the smallest epsilon from which every larger measured epsilon learns."""
    out: dict[str, float | None] = {}
    for case in sorted({f"{r['algo']}:{r['privacy']}" for r in rows}):
        mine = sorted((r for r in rows if f"{r['algo']}:{r['privacy']}" == case),
                      key=lambda r: r["epsilon"])
        best = None
        for r in reversed(mine):
            if r["last10_pct_uniform"] > LEARNS:
                break
            best = r["epsilon"]
        out[case] = best
    return out


def learner_label(knobs: dict) -> str:
    """'variance' (today's practical) or the knob overrides that made a run differ."""
    return ", ".join(f"{k}={v}" for k, v in sorted(knobs.items())) or "practical"


def save_docs_table(files: list[str], path: str) -> None:
    """The rows of saved sweeps as the docs' table (`results_table.save_table`)."""
    rows = [r for f in files for r in json.loads(Path(f).read_text())["rows"]]
    rows.sort(key=lambda r: (r["algo"], r["privacy"], learner_label(r["knobs"]), r["schedule"],
                             r["epsilon"]))
    table = [[f"{r['algo']} {r['privacy'].upper()}", learner_label(r["knobs"]), r["schedule"],
              r["epsilon"], r["episodes"], r["seeds"],
              [r["last10_pct_uniform"], float(np.std(r["per_seed_pct"]))],
              r["last10_pct_uniform"] <= LEARNS, r["ledger_epsilon"], r["s_per_1000_episodes"]]
             for r in rows]
    save_table(path, COLUMNS, table, sources=files)


def main() -> None:
    """Run the sweep, printing one line per run and rewriting --out after each."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", help="the sweep's JSON (rewritten after every run)")
    parser.add_argument("--from", dest="sources", nargs="+", help="saved sweeps: no run")
    parser.add_argument("--json", help="save the docs' table of --from (or of this sweep)")
    parser.add_argument("--episodes", type=int, default=50_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epsilon", type=float, nargs="+",
                        default=[0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 1000.0])
    parser.add_argument("--cases", nargs="+", default=list(CASES))
    parser.add_argument("--knob", action="append", default=[])
    parser.add_argument("--preset", default="practical")
    parser.add_argument("--schedule", default=None,
                        help="JDP release schedule (default: the preset's)")
    args = parser.parse_args()
    if args.sources:
        save_docs_table(args.sources, args.json)
        return
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for case in args.cases:
        algo, privacy = case.split(":")
        for eps in sorted(args.epsilon, reverse=True):
            row = run_case(algo, privacy, eps, args)
            rows.append(row)
            print(f"{case:<14} eps={eps:<8g} last10={row['last10_pct_uniform']:6.1f}% "
                  f"ledger={row['ledger_epsilon']:.4g} {row['s_per_1000_episodes']:.2f}"
                  " s/1000 ep", flush=True)
            out.write_text(json.dumps({"rows": rows, "thresholds": thresholds(rows),
                                       "args": vars(args)}, indent=1))
    if args.json:
        save_docs_table([str(out)], args.json)


if __name__ == "__main__":
    main()
