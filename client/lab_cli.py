"""`privrl run | plot | bench | worlds | algorithms`: the in-process half of the command line."""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from pathlib import Path

from privrl import algorithms, trust
from privrl.algorithms import bind
from privrl.budget import OverspendingPlan, check_budget
from privrl.client.cli_common import (
    CliError,
    add_executor_options,
    add_learning_options,
    add_world_options,
    config_from_args,
    executor_from_args,
    mechanisms_from_args,
    policy_never_changed_notes,
    positive_int,
    refuse_overwrite,
    tail_header,
    world_from_args,
)
from privrl.client.load.cli import add_bench_http
from privrl.config import RunConfig
from privrl.lab.experiments import TAIL
from privrl.protocol import LedgerView
from privrl.worlds.suites import SUITES, suite_named
from privrl.worlds.tabular import TabularMDP

RUN_OUTPUTS = ("summary.json", "regret.png", "frontier.png")  # what `privrl run` writes to --out
RANDOM_NOTE = ("%random: the last episodes' mean regret as a percentage of a uniformly random"
               " policy's (0% = optimal, 100% = no better than random)")


def sweep_configs(args: argparse.Namespace, mdp: TabularMDP) -> list[RunConfig]:
    """The cartesian product privacy x epsilon x mechanism (non-private once)."""
    configs: list[RunConfig] = []
    seen = set()
    for privacy, eps, mech in ((p, e, m) for p in args.privacy for e, m in itertools.product(
            args.epsilon, mechanisms_from_args(args, p))):
        key = (privacy, None, None) if not trust.get(privacy).private else (privacy, eps, mech)
        if key in seen:
            continue
        seen.add(key)
        configs.append(config_from_args(args, privacy, eps, mech, mdp))
    return configs


def cmd_run(args: argparse.Namespace) -> int:
    """privrl run: in-process runs (a sweep when several values are given)."""
    from privrl.lab.executors import ExecutorError
    from privrl.lab.experiments import run_many, save
    from privrl.lab.plots import plot_cumulative, plot_frontier

    out = Path(args.out)
    refuse_overwrite(out, RUN_OUTPUTS, args.force)
    executor = executor_from_args(args)
    world = world_from_args(args)
    mdp = world.build()
    if not isinstance(mdp, TabularMDP):
        raise CliError(
            f"world {world.name!r} is a {type(mdp).__name__}, not an MDP: `privrl run` measures"
            " regret; evaluate a fixed policy with `privrl policy-eval`"
        )
    configs = sweep_configs(args, mdp)
    for config in configs:  # an overspending calibration is refused before anything runs
        try:
            check_budget(config)
        except OverspendingPlan as exc:
            raise CliError(str(exc)) from None
    print(
        f"world {mdp!r}; {len(configs)} configuration(s) x {args.seeds} seed(s) x "
        f"{args.episodes} episodes",
        file=sys.stderr,
    )
    for config in configs:  # a run's stated assumptions (secure aggregation's cohorts)
        cohort = bind(config).calibration().cohort
        if cohort is not None:
            print(f"{config.privacy} eps={config.epsilon:g}: {cohort.describe()}",
                  file=sys.stderr)
    seeds = [args.seed + i for i in range(args.seeds)]
    try:
        results = run_many(configs, world, seeds, show_progress=not args.quiet,
                           executor=executor, seeds_per_task=args.seeds_per_task,
                           checkpoint=lambda done: save(done, out))
    except ExecutorError as exc:
        raise CliError(str(exc)) from None
    path = save(results, out)
    plot_cumulative(results, out / "regret.png")
    if any(trust.get(r["config"]["privacy"]).private for r in results) and len(results) > 1:
        plot_frontier(results, out / "frontier.png")
    print_table(results)
    print(path)
    return 0


def print_table(results) -> None:
    """One line per configuration: regret and the ledger's spend."""
    print(
        f"{'configuration':<28} {'cum. regret':>14} {tail_header(results):>13} {'%random':>8} "
        f"{'eps spent':>10} {'delta':>8} {'eps@δ/10':>9} {'ms/ep':>7}"
    )
    notes = []
    for r in results:
        reg, led = r["regret"], r["ledger"]
        pct = 100 * reg["tail_per_episode_mean"] / reg["random_policy_per_episode"]
        eps = led["epsilon"]
        eps_txt = eps if isinstance(eps, str) else f"{eps:.4g}"
        small = led.get("epsilon_at_smaller_delta")
        small_txt = "-" if small is None or not led.get("rho") else (
            small if isinstance(small, str) else f"{small:.4g}")
        if led.get("guarantee") == "budget":
            view = LedgerView.model_validate({"run_id": "in-process", **led})
            notes.append(f"{r['label']}: {view.guarantee_text()}")
        print(
            f"{r['label']:<28} {reg['final_cumulative_mean']:>9.1f}"
            f"±{reg['final_cumulative_std']:<5.0f}"
            f"{reg['tail_per_episode_mean']:>12.4f} {pct:>7.1f}% {eps_txt:>10} "
            f"{led['delta']:>8.0e} {small_txt:>9} {r['ms_per_episode']:>7.3f}"
        )
    tails = {r["regret"]["tail_episodes"] for r in results}
    print(RANDOM_NOTE + ("" if len(tails) == 1 else
                         f" (last-n/ep: each configuration's last min({TAIL}, K) episodes)"))
    print("eps@δ/10: the same charges at a tenth of the run's delta (zCDP parts only)")
    for note in [*notes, *policy_never_changed_notes(results)]:
        print(note)


def cmd_plot(args: argparse.Namespace) -> int:
    """privrl plot: redraw figures from saved results (a policy-eval summary: its panels)."""
    from privrl.lab import policy_eval
    from privrl.lab.experiments import load
    from privrl.lab.plots import plot_cumulative, plot_frontier, plot_switches, switch_points

    results = []
    out = Path(args.out)
    for src in args.results:
        try:
            evaluation = policy_eval.load(Path(src))
            if evaluation is not None:
                for path in policy_eval.plot(evaluation, out):
                    print(path)
                continue
            results.extend(load(Path(src)))
        except FileNotFoundError as exc:
            raise CliError(str(exc)) from None
    if results:
        out.mkdir(parents=True, exist_ok=True)
        print(plot_cumulative(results, out / "regret.png"))
        print(plot_frontier(results, out / "frontier.png"))
        switches = plot_switches(results, out / "switches.png")
        if switches is not None:
            print(switches)
            print_switches(switch_points(results))
    return 0


def print_switches(points: dict[str, list[tuple[int, float, float]]]) -> None:
    """The table behind switches.png: policy switches (mean ± std over seeds) per K."""
    ks = sorted({k for pts in points.values() for k, _, _ in pts})
    print(f"{'policy switches':<52}" + "".join(f"{f'K={k:g}':>16}" for k in ks))
    for key, pts in points.items():
        cells = {k: f"{m:.1f}±{s:.1f}" for k, m, s in pts}
        print(f"{key:<52}" + "".join(f"{cells.get(k, '-'):>16}" for k in ks))


def cmd_bench(args: argparse.Namespace) -> int:
    """privrl bench: interleaved rounds of every variant (1 and R replicas, rlberry), medians."""
    import json

    from privrl.lab.bench import RLBERRY, bench_world, measure, report
    from privrl.privacy.noise import SIMULATION_ONLY

    mdp = bench_world(args.env, args.horizon, args.states, args.actions)
    replicas = sorted(set(args.replicas))
    print(f"world {mdp!r}, K = {args.episodes} per run, replicas {replicas}, {args.rounds} "
          f"interleaved round(s), medians; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    rows, peer, warmup = measure(mdp, args.episodes, replicas, args.rounds, args.rlberry)
    result = report(mdp, args.episodes, args.rounds, rows, peer, warmup)
    ratio = "x rlberry" if peer is not None else ""
    print(f"{'variant':<26} {'R':>3} {'ms/episode':>11} {'ms/replica-ep':>14} {'noise only':>11}"
          f" {'int/float':>9} {ratio:>10} {'target' if peer is not None else ''}")
    for entry in result["rows"]:
        noise = entry["noise_ms_per_replica_episode"]
        cost = entry.get("integer_over_float")
        line = (f"{entry['variant']:<26} {entry['replicas']:>3} {entry['ms_per_episode']:>11.4f}"
                f" {entry['ms_per_replica_episode']:>14.4f}"
                f" {f'{noise:.4f}' if noise else '':>11} {f'{cost:.2f}x' if cost else '':>9}")
        if peer is not None:
            x, target = entry["x_faster_than_rlberry"], entry["target"]
            line += f" {x:>9.1f}x  >={target:g}x {'met' if x >= target else 'not met'}"
            if "x_rlberry_noise_bound" in entry:
                line += f" (noise alone allows {entry['x_rlberry_noise_bound']:.0f}x)"
        print(line)
    if peer is not None:
        print(f"{RLBERRY:<26} {1:>3} {peer.ms_per_episode:>11.4f} {peer.ms_per_episode:>14.4f}")
    elif args.rlberry:
        print("rlberry-scool not installed: pip install rlberry-scool to compare (it pins"
              " gymnasium < 1.0: give it its own virtual environment with privrl)")
    print("noise only: ms of drawing just the noise one replica-episode must draw (JDP: the"
          " tree's fresh nodes; LDP: a user's report noise): discrete integers by default,"
          " numpy's Laplace / normal algorithm for the float rows")
    print("int/float: the default integer noise's ms per episode over the same variant with"
          f" noise 'float' ({SIMULATION_ONLY}), in the same rounds")
    print(f"warm-up (first call of each variant: the kernels loaded or compiled) {warmup:.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
        print(f"wrote {args.json}")
    return 0


def cmd_warmup(args: argparse.Namespace) -> int:
    """privrl warmup: compile DP-UCBVI's kernels now, so later processes load them from cache."""
    from privrl.accel.__main__ import main

    return main()


def cmd_worlds(args: argparse.Namespace) -> int:
    """privrl worlds: every world with its parameters and default horizon (--suite: a suite's
    worlds with their split)."""
    from privrl.worlds.registry import list_worlds

    if args.suite:
        return list_suite(args.suite)
    for info in list_worlds():
        params = ", ".join(f"{k}={v!r}" for k, v in info.params.items()) or "-"
        horizon = "-" if info.default_horizon is None else str(info.default_horizon)
        print(f"{info.name:<34} H={horizon:<5} {params}")
        print(f"{'':<34} {info.description}")
    return 0


def list_suite(name: str) -> int:
    """A suite's worlds: split, label, (S, A, H), (s, a, s') cells and the declared support's."""
    suite = suite_named(name)
    print(f"suite {suite.name}: {suite.description}")
    split = suite.split()
    for world in suite.worlds:
        mdp = world.build()
        support = "-" if mdp.support is None else f"{int(mdp.support.sum()):,}"
        print(f"{split[world.label]:<10} {world.label:<44} S={mdp.S:<3} A={mdp.A:<3}"
              f" H={mdp.H:<3} cells={mdp.S * mdp.A * mdp.S:<6,} support={support}"
              + (f"  (tuning: {world.used})" if world.used else ""))
    return 0


def cmd_algorithms(args: argparse.Namespace) -> int:
    """privrl algorithms: every registered algorithm, its privacy modes, default world and the
    release schedule and counter of each preset."""
    width = max(16, *(len(n) for n in algorithms.names()))
    for name in algorithms.names():
        algo = algorithms.get(name)
        knobs = ", ".join(sorted(algo.knobs_model.model_fields)) or "-"
        private = [b for b in algo.boundaries() if trust.get(b).private]
        other = {b: m for b in private
                 if (m := algo.mechanism_for(trust.get(b))) != algo.default_mechanism}
        mechanism = algo.default_mechanism + "".join(f" ({b}: {m})" for b, m in other.items())
        print(f"{name:<{width}} privacy: {', '.join(algo.boundaries()):<16} world: "
              f"{algo.default_world:<12} mechanism: {mechanism:<9} presets: "
              f"{', '.join(sorted(algo.presets))}")
        print(f"{'':<{width}} {algo.summary} (results: {algo.versioned_id()})")
        print(f"{'':<{width}} knobs: {knobs}")
        kind, bands = algo.practical_counter
        counter = f"{kind} ({bands} bands)" if bands else kind
        print(f"{'':<{width}} JDP release: faithful every episode, tree; practical"
              f" {algo.practical_schedule}, {counter}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add run, plot, bench, warmup, worlds and algorithms."""
    p = sub.add_parser("run", help="in-process runs and sweeps (no server)",
                       description="In-process runs and sweeps: every configuration (the cartesian"
                       " product of --privacy, --epsilon and --mechanism) x --seeds replicas;"
                       " writes summary.json, regret.png and frontier.png to --out.")
    add_world_options(p)
    add_learning_options(p, many=True)
    p.add_argument("--seeds", type=positive_int, default=5, help="number of seeds (replicas)")
    p.add_argument("--seed", type=int, default=0,
                   help="first seed (in-process simulation: nothing is published, seeds are"
                   " recorded in summary.json)")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="parallel processes (default: one per task, at most the CPUs); with"
                   " --executor ray, the CPUs of the local Ray instance it starts")
    add_executor_options(p)
    p.add_argument("--seeds-per-task", type=positive_int, default=None,
                   help="seeds per task: split each configuration into seed-blocks, one task"
                   " each (default: all seeds in one task)")
    p.add_argument("--out", default="results", help="output directory")
    p.add_argument("--force", action="store_true",
                   help="overwrite the results already in --out (refused otherwise)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("plot", help="redraw figures from saved results")
    p.add_argument("results", nargs="+", help="summary.json files or directories")
    p.add_argument("--out", default="plots", help="where regret.png, frontier.png and (runs at"
                   " several K) switches.png go")
    p.set_defaults(handler=cmd_plot)

    p = sub.add_parser("bench", help="per-episode cost of UCBVI, JDP and LDP; `bench http`: the"
                       " HTTP path against the server's ceiling")
    p.add_argument("--env", choices=["riverswim", "garnet"], default="riverswim",
                   help="the world to time")
    p.add_argument("--episodes", type=positive_int, default=2000, help="K per timed run")
    p.add_argument("--horizon", type=positive_int, default=20, help="H")
    p.add_argument("--replicas", type=positive_int, nargs="+", default=[1, 20],
                   help="replica counts to time (seeds batched in one run)")
    p.add_argument("--rounds", type=positive_int, default=5,
                   help="interleaved rounds; medians are reported")
    p.add_argument("--json", default=None,
                   help="also write the figures to this JSON file (default: none)")
    p.add_argument("--states", type=positive_int, default=50, help="garnet S")
    p.add_argument("--actions", type=positive_int, default=5, help="garnet A")
    p.add_argument("--rlberry", action="store_true", help="also time rlberry-scool's UCBVIAgent")
    p.set_defaults(handler=cmd_bench)
    add_bench_http(p.add_subparsers(dest="bench_mode", metavar="MODE", required=False,
                                    help="http: the HTTP path against its ceiling (default:"
                                    " none, the in-process per-episode cost)"))

    p = sub.add_parser("warmup", help="compile DP-UCBVI's kernels ahead of time (numba's cache)")
    p.set_defaults(handler=cmd_warmup)

    p = sub.add_parser("worlds", help="every world with its parameters and default horizon")
    p.add_argument("--suite", choices=sorted(SUITES), default=None,
                   help="list this suite's worlds with their split into tuning and evaluation"
                   " worlds and their sizes instead (default: every world)")
    p.set_defaults(handler=cmd_worlds)
    p = sub.add_parser("algorithms", help="every registered algorithm and its privacy modes")
    p.set_defaults(handler=cmd_algorithms)
