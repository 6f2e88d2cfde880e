"""The `privrl` command: in-process experiments, plots and benchmarks; server and users.

Every subcommand validates its arguments and reports problems as one clear line (exit code 2),
never as a traceback.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import ValidationError

from shared import algorithms
from shared.config import RunConfig
from shared.worlds.tabular import WorldError

Handler = Callable[[argparse.Namespace], int]
PLUGINS_ENV = "PRIVRL_PLUGINS"  # modules of third-party algorithms, imported at start


class CliError(Exception):
    """A user-facing error: printed as 'privrl: error: ...' with exit code 2."""


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def epsilon_value(text: str) -> float:
    """argparse type: epsilon > 0 ('inf' allowed)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"epsilon must be a number or 'inf', got {text!r}"
        ) from None
    if not value > 0 or math.isnan(value):
        raise argparse.ArgumentTypeError(f"epsilon must be > 0, got {text}")
    return value


def knob_value(text: str) -> tuple[str, object]:
    """argparse type: NAME=VALUE, VALUE parsed as JSON when it is JSON (else kept as text)."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return name.strip(), value


def add_world_options(p: argparse.ArgumentParser) -> None:
    """--env and the world's parameters (known to users, not to the server)."""
    p.add_argument(
        "--env",
        default="riverswim",
        help="riverswim | garnet | gymnasium:<EnvId> (e.g. gymnasium:FrozenLake-v1, needs "
        "privrl[gym]) | FILE.npz",
    )
    p.add_argument("--horizon", type=positive_int, default=20, help="H (default 20)")
    p.add_argument("--garnet-states", type=positive_int, default=10)
    p.add_argument("--garnet-actions", type=positive_int, default=3)
    p.add_argument("--world-seed", type=int, default=0, help="seed of the garnet world")


def add_learning_options(p: argparse.ArgumentParser, many: bool) -> None:
    """Algorithm, privacy and length options shared by `run` and `runs create`."""
    nargs = "+" if many else None
    p.add_argument("--algo", default="dp-ucbvi", choices=algorithms.names(),
                   help="a registered algorithm (`privrl algorithms` lists them)")
    p.add_argument(
        "--privacy", nargs=nargs, default=["jdp"] if many else "jdp", choices=["none", "jdp", "ldp"]
    )
    p.add_argument(
        "--epsilon",
        nargs=nargs,
        type=epsilon_value,
        default=[1.0] if many else 1.0,
        help="privacy budget per user; several values make a sweep",
    )
    p.add_argument(
        "--delta",
        type=float,
        default=None,
        help="delta for the Gaussian mechanism (default 1e-5 with --mechanism gaussian)",
    )
    p.add_argument(
        "--mechanism",
        nargs=nargs,
        default=["laplace"] if many else "laplace",
        choices=["laplace", "gaussian"],
    )
    p.add_argument("--episodes", type=positive_int, default=10_000, help="K")
    p.add_argument("--preset", default="practical", choices=["faithful", "practical"])
    p.add_argument(
        "--knob",
        action="append",
        default=[],
        type=knob_value,
        metavar="NAME=VALUE",
        help="override one of the algorithm's public knobs (repeatable; VALUE is JSON or a"
        " word), e.g. --knob bonus_scale=0.05 --knob pair_counts=released",
    )
    p.add_argument("--pooled", action="store_true",
                   help="dp-ucbvi: pool statistics over h (same as --knob pooled=true)")
    p.add_argument("--pair-counts", choices=["released", "derived"], default=None,
                   help="dp-ucbvi: same as --knob pair_counts=...")
    p.add_argument("--bonus-scale", type=float, default=None, help="same as --knob bonus_scale=")
    p.add_argument("--radius-scale", type=float, default=None,
                   help="same as --knob radius_scale=")
    p.add_argument(
        "--noise",
        default="numpy",
        choices=["numpy", "opendp"],
        help="noise backend: numpy (seeded, reproducible) or opendp (OS CSPRNG, exact samplers;"
        " needs privrl[secure])",
    )


def world_from_args(args: argparse.Namespace):
    """The WorldSpec the arguments describe."""
    from client.experiments import WorldSpec

    return WorldSpec(
        args.env, args.horizon, args.garnet_states, args.garnet_actions, args.world_seed
    )


def config_from_args(
    args: argparse.Namespace,
    privacy: str,
    epsilon: float,
    mechanism: str,
    n_states: int,
    n_actions: int,
) -> RunConfig:
    """One RunConfig from the parsed options (pydantic errors become CliError)."""
    delta = args.delta
    if delta is None:
        delta = 1e-5 if mechanism == "gaussian" else 0.0
    knobs = dict(args.knob)
    shortcuts = {"pooled": args.pooled or None, "pair_counts": args.pair_counts,
                 "bonus_scale": args.bonus_scale, "radius_scale": args.radius_scale}
    knobs.update({k: v for k, v in shortcuts.items() if v is not None})
    try:
        return RunConfig(
            algo=args.algo,
            n_states=n_states,
            n_actions=n_actions,
            horizon=args.horizon,
            episodes=args.episodes,
            privacy=privacy,
            epsilon=epsilon,
            delta=delta if privacy != "none" else 0.0,
            mechanism=mechanism,
            noise=args.noise,
            preset=args.preset,
            knobs=knobs or None,
        )
    except ValidationError as exc:
        raise CliError(_pydantic_message(exc)) from None


def _pydantic_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    return "; ".join(parts)


def sweep_configs(args: argparse.Namespace, n_states: int, n_actions: int) -> list[RunConfig]:
    """The cartesian product privacy x epsilon x mechanism (non-private once)."""
    configs: list[RunConfig] = []
    seen = set()
    for privacy, eps, mech in itertools.product(args.privacy, args.epsilon, args.mechanism):
        key = (privacy, None, None) if privacy == "none" else (privacy, eps, mech)
        if key in seen:
            continue
        seen.add(key)
        configs.append(config_from_args(args, privacy, eps, mech, n_states, n_actions))
    return configs


def cmd_run(args: argparse.Namespace) -> int:
    """privrl run: in-process runs (a sweep when several values are given)."""
    from client.experiments import run_many, save
    from client.plots import plot_cumulative, plot_frontier

    world = world_from_args(args)
    mdp = world.build()
    configs = sweep_configs(args, mdp.S, mdp.A)
    print(
        f"world {mdp!r}; {len(configs)} configuration(s) x {args.seeds} seed(s) x "
        f"{args.episodes} episodes",
        file=sys.stderr,
    )
    seeds = [args.seed + i for i in range(args.seeds)]
    results = run_many(configs, world, seeds, workers=args.workers, show_progress=not args.quiet)
    out = Path(args.out)
    path = save(results, out)
    plot_cumulative(results, out / "regret.png")
    if any(r["config"]["privacy"] != "none" for r in results) and len(results) > 1:
        plot_frontier(results, out / "frontier.png")
    print_table(results)
    print(path)
    return 0


def print_table(results) -> None:
    """One line per configuration: regret and the ledger's spend."""
    print(
        f"{'configuration':<28} {'cum. regret':>14} {'last-1000/ep':>13} {'%random':>8} "
        f"{'eps spent':>10} {'delta':>8} {'ms/ep':>7}"
    )
    for r in results:
        reg, led = r["regret"], r["ledger"]
        pct = 100 * reg["tail_per_episode_mean"] / reg["random_policy_per_episode"]
        eps = led["epsilon"]
        eps_txt = eps if isinstance(eps, str) else f"{eps:.4g}"
        print(
            f"{r['label']:<28} {reg['final_cumulative_mean']:>9.1f}"
            f"±{reg['final_cumulative_std']:<5.0f}"
            f"{reg['tail_per_episode_mean']:>12.4f} {pct:>7.1f}% {eps_txt:>10} "
            f"{led['delta']:>8.0e} {r['ms_per_episode']:>7.3f}"
        )


def cmd_plot(args: argparse.Namespace) -> int:
    """privrl plot: redraw figures from saved results."""
    from client.experiments import load
    from client.plots import plot_cumulative, plot_frontier

    results = []
    for src in args.results:
        try:
            results.extend(load(Path(src)))
        except FileNotFoundError as exc:
            raise CliError(str(exc)) from None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(plot_cumulative(results, out / "regret.png"))
    print(plot_frontier(results, out / "frontier.png"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """All subcommands."""
    parser = argparse.ArgumentParser(prog="privrl", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="in-process runs and sweeps (no server)")
    add_world_options(p)
    add_learning_options(p, many=True)
    p.add_argument("--seeds", type=positive_int, default=5, help="number of seeds")
    p.add_argument("--seed", type=int, default=0,
                   help="first seed (in-process simulation: nothing is published, seeds are"
                   " recorded in summary.json)")
    p.add_argument("--workers", type=positive_int, default=None, help="parallel processes")
    p.add_argument("--out", default="results", help="output directory")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("plot", help="redraw figures from saved results")
    p.add_argument("results", nargs="+", help="summary.json files or directories")
    p.add_argument("--out", default="plots")
    p.set_defaults(handler=cmd_plot)

    for register in _extensions():
        register(sub)
    return parser


def _extensions() -> list[Callable[[argparse._SubParsersAction], None]]:
    """Subcommands defined in other client modules (bench, serve, runs, users, demo)."""
    from client import bench

    regs = [bench.register]
    try:
        from client import remote_cli
    except ImportError:
        return regs
    return [*regs, remote_cli.register]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `privrl` console command."""
    algorithms.load_plugins(os.environ.get(PLUGINS_ENV, ""))
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (CliError, WorldError) as exc:
        print(f"privrl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("privrl: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
