"""What every `privrl` command shares: the error type, argument types, world and run options.

Command modules import this one (never each other, never `privrl.client.cli`), so the command
line has one entry point and no import cycle.
"""

from __future__ import annotations

import argparse
import json
import math

from privrl import algorithms
from privrl.config import RunConfig
from privrl.lab.experiments import WorldSpec
from privrl.worlds.linear_mixture import model_spec_of
from privrl.worlds.tabular import TabularMDP
from pydantic import ValidationError


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
        default=None,
        help="riverswim | garnet | lm-hard | lm-mix | zhou-mix | zhou-tabular | gymnasium:<EnvId>"
        " (e.g. gymnasium:FrozenLake-v1, needs privrl[gym]) | FILE.npz (default: the algorithm's"
        " own world, riverswim without --algo)",
    )
    p.add_argument("--horizon", type=positive_int, default=None,
                   help="H (default: the world's own, 20 for riverswim and garnet;"
                   " `privrl worlds` lists them)")
    p.add_argument("--garnet-states", type=positive_int, default=10)
    p.add_argument("--garnet-actions", type=positive_int, default=3)
    p.add_argument("--world-seed", type=int, default=0, help="seed of the garnet world")
    p.add_argument("--world-param", action="append", default=[], type=knob_value,
                   metavar="NAME=VALUE",
                   help="a parameter of the world (repeatable; VALUE is JSON or a word), e.g."
                   " --world-param is_slippery=false for gymnasium:FrozenLake-v1")


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
        default=None,
        choices=["laplace", "gaussian"],
        help="noise mechanism (default: the algorithm's own; laplace for dp-ucbvi, gaussian for"
        " the linear-mixture algorithms)",
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


def mechanisms_from_args(args: argparse.Namespace) -> list[str]:
    """--mechanism as a list, or the algorithm's default mechanism."""
    if args.mechanism is None:
        return [algorithms.get(args.algo).default_mechanism]
    return args.mechanism if isinstance(args.mechanism, list) else [args.mechanism]


def world_from_args(args: argparse.Namespace) -> WorldSpec:
    """The WorldSpec the arguments describe (garnet's flags, then any --world-param)."""
    params: dict[str, object] = {}
    env = args.env
    if env is None:
        algo = getattr(args, "algo", None)
        env = algorithms.get(algo).default_world if algo else "riverswim"
    if env == "garnet":
        params = {"n_states": args.garnet_states, "n_actions": args.garnet_actions,
                  "seed": args.world_seed}
    params.update(dict(args.world_param))
    return WorldSpec(env, args.horizon, params)


def config_from_args(
    args: argparse.Namespace,
    privacy: str,
    epsilon: float,
    mechanism: str,
    mdp: TabularMDP,
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
        config = RunConfig(
            algo=args.algo,
            n_states=mdp.S,
            n_actions=mdp.A,
            horizon=mdp.H,
            model=model_spec_of(mdp),
            episodes=args.episodes,
            privacy=privacy,
            epsilon=epsilon,
            delta=delta if privacy != "none" else 0.0,
            mechanism=mechanism,
            noise=args.noise,
            preset=args.preset,
            knobs=knobs or None,
        )
        config.algorithm()  # the algorithm's own rules across fields
    except ValidationError as exc:
        raise CliError(_pydantic_message(exc)) from None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return config


def _pydantic_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    return "; ".join(parts)
