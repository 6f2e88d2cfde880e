"""What every `privrl` command shares: the parser and its help, the error type, argument types,
world and run options.

Command modules import this one (never each other, never `privrl.client.cli`), so the command
line has one entry point and no import cycle.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from privrl import algorithms, trust
from privrl.algorithms import bind
from privrl.argtypes import non_negative_int as non_negative_int  # re-exported for the commands
from privrl.argtypes import positive_float as positive_float
from privrl.argtypes import positive_int as positive_int
from privrl.argtypes import unit_interval as unit_interval
from privrl.argtypes import whole_number as whole_number
from privrl.config import RunConfig
from privrl.lab.experiments import WorldSpec
from privrl.privacy.continual import COUNTERS
from privrl.privacy.noise import NOISE_NAMES, SIMULATION_ONLY
from privrl.wire import error_text
from privrl.worlds.model_spec import model_spec_of
from privrl.worlds.registry import BUILTINS
from privrl.worlds.tabular import TabularMDP
from pydantic import ValidationError


class HelpFormatter(argparse.HelpFormatter):
    """Help that states each option's default, unless its help text already does ('(default'
    or 'default:')."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "(default" in text.lower()
            or "default:" in text.lower()
            or not action.option_strings
            or action.required
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or default == []
        ):
            return text
        shown = " ".join(map(str, default)) if isinstance(default, list | tuple) else str(default)
        return f"{text} (default: {shown.replace('%', '%%')})"


class RawDescriptionFormatter(HelpFormatter):
    """`HelpFormatter` that keeps the description's own line breaks."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line for line in text.splitlines(keepends=True))


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose help shows defaults and whose usage errors are one line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """As ArgumentParser, with `HelpFormatter` unless another formatter is given."""
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """One line on stderr, exit code 2 (argparse would print the whole usage first)."""
        self.exit(2, f"privrl: error: {message} (see `{self.prog} --help`)\n")

    def refuse_extra(self, extra: list[str], hint: str = "") -> NoReturn:
        """Arguments that no option took, as this (sub)command's one-line error."""
        self.error(f"unrecognized arguments: {' '.join(extra)}{hint}")



def run_id_arg(text: str) -> str:
    """argparse type: a run id, one word (an empty or blank id would ask for every run's route,
    or for none)."""
    value = text.strip()
    if not value or any(c.isspace() for c in value):
        raise argparse.ArgumentTypeError(f"expected a run id (e.g. 698c9e3002c39dea, printed by"
                                         f" `privrl runs create`), got {text!r}")
    return value

def all_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """`parser` and every subcommand's parser below it, depth first, each once (aliases share
    one); the CLI reference of the docs is generated from these."""
    yield parser
    seen: set[int] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                if id(child) not in seen:
                    seen.add(id(child))
                    yield from all_parsers(child)


def mark_parsers(parser: argparse.ArgumentParser) -> None:
    """Record in every (sub)parser's defaults which parser it is (`args.parser`), so that errors
    found after parsing name the subcommand they belong to."""
    for each in all_parsers(parser):
        each.set_defaults(parser=each)


class CliError(Exception):
    """A user-facing error: printed as 'privrl: error: ...' with exit code 2."""


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


def json_object(text: str) -> dict[str, Any]:
    """argparse type: a JSON object, e.g. '{"pip": ["privrl"]}'."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def add_world_options(p: argparse.ArgumentParser, of_run: bool = False) -> None:
    """--env and the world's parameters (known to users, not to the server); `of_run`: the
    command plays or evaluates a run, whose own world is the default."""
    own = ("the run's own world, from its public config" if of_run
           else "the algorithm's own world, riverswim without --algo")
    p.add_argument(
        "--env",
        default=None,
        help=f"the users' world: {' | '.join(BUILTINS)} | gymnasium:<EnvId> (e.g."
        f" gymnasium:FrozenLake-v1, needs privrl[gym]) | FILE.npz (default: {own};"
        " `privrl worlds` describes them)",
    )
    p.add_argument("--horizon", type=positive_int, default=None,
                   help="H (default: the run's)" if of_run else
                   "H (default: the world's own, 20 for riverswim and garnet;"
                   " `privrl worlds` lists them)")
    p.add_argument("--garnet-states", type=positive_int, default=10,
                   help="garnet: number of states S")
    p.add_argument("--garnet-actions", type=positive_int, default=3,
                   help="garnet: number of actions A")
    p.add_argument("--world-seed", type=int, default=0,
                   help="garnet: seed of the random world (public: it only picks the MDP)")
    p.add_argument("--world-param", action="append", default=[], type=knob_value,
                   metavar="NAME=VALUE",
                   help="a parameter of the world (repeatable; VALUE is JSON or a word), e.g."
                   " --world-param is_slippery=false for gymnasium:FrozenLake-v1")


def add_learning_options(p: argparse.ArgumentParser, many: bool) -> None:
    """Algorithm, privacy and length options shared by `run` and `runs create`."""
    nargs = "+" if many else None
    several = "; several values make a sweep" if many else " (one value: one run)"
    p.add_argument("--algo", default="dp-ucbvi", choices=algorithms.names(),
                   help="a registered algorithm (`privrl algorithms` lists them)")
    p.add_argument(
        "--privacy", nargs=nargs, default=[trust.DEFAULT] if many else trust.DEFAULT,
        choices=trust.names(),
        help="the trust boundary: " + ", ".join(
            f"{name} ({trust.get(name).summary})" for name in trust.names()) + several,
    )
    p.add_argument(
        "--epsilon",
        nargs=nargs,
        type=epsilon_value,
        default=[1.0] if many else 1.0,
        help=f"privacy budget per user ('inf' allowed){several}",
    )
    p.add_argument(
        "--delta",
        type=float,
        default=None,
        help="delta for the Gaussian mechanism (default: the largest of 1e-n, 2e-n, 5e-n at"
        " most 1/(10 K), e.g. 2e-6 for --episodes 50000; 0 with laplace)",
    )
    p.add_argument(
        "--mechanism",
        nargs=nargs,
        default=None,
        choices=["laplace", "gaussian"],
        help="noise mechanism (default: the algorithm's own; laplace for dp-ucbvi, gaussian for"
        " the linear-mixture and linear-MDP algorithms)",
    )
    p.add_argument("--episodes", type=positive_int, default=10_000,
                   help="K: episodes (= users) of the run")
    p.add_argument("--preset", default="practical", choices=["faithful", "practical"],
                   help="the algorithm's knob preset: faithful (paper constants) or practical")
    p.add_argument(
        "--knob",
        action="append",
        default=[],
        type=knob_value,
        metavar="NAME=VALUE",
        help="override one of the algorithm's public knobs (repeatable; VALUE is JSON or a"
        " word; `privrl algorithms` lists each algorithm's knobs), e.g. --knob pooled=true"
        " --knob bonus_scale=0.05",
    )
    p.add_argument(
        "--noise",
        default="numpy",
        choices=list(NOISE_NAMES),
        help="noise backend: numpy (discrete noise on integer grids, seeded, reproducible),"
        " opendp (OS CSPRNG, exact discrete samplers; needs privrl[secure]) or float"
        f" ({SIMULATION_ONLY})",
    )
    p.add_argument("--counter", default=None, choices=list(COUNTERS),
                   help="JDP continual counter: tree (the papers'), smoothed (Honaker's upward"
                   " pass) or matrix (square-root factorization; needs --mechanism gaussian)."
                   " (default: the preset's; faithful: tree, practical: the algorithm's with"
                   " Gaussian integer noise, else smoothed, as `privrl algorithms` lists)")
    p.add_argument("--schedule", default=None, metavar="every|batch:B|geometric:r",
                   help="JDP release schedule: after every episode, every B episodes or after"
                   " episodes ceil(r^j) (default: the preset's; faithful: every, practical:"
                   " the algorithm's, as `privrl algorithms` lists)")
    p.add_argument("--counter-bands", type=positive_int, default=None,
                   help="the matrix counter's bands (default: the full factorization)")
    p.add_argument("--dropout", type=float, default=None,
                   help="secagg: the fraction of a cohort that may drop out (default 0.1);"
                   " the cohort size is --schedule batch:B (default B = K / 50 within [100, 1000])")
    p.add_argument("--collusion", type=float, default=None,
                   help="secagg: the fraction of a cohort that may collude with the server"
                   " (default 0.1)")
    p.add_argument("--secagg-noise", choices=("skellam", "ddg"), default=None,
                   help="secagg: the users' noise shares, Skellam or the distributed discrete"
                   " Gaussian (default skellam)")


def mechanisms_from_args(args: argparse.Namespace, privacy: str) -> list[str]:
    """--mechanism as a list, or the algorithm's default mechanism across `privacy`."""
    if args.mechanism is None:
        return [algorithms.get(args.algo).mechanism_for(trust.get(privacy))]
    return args.mechanism if isinstance(args.mechanism, list) else [args.mechanism]


def world_from_args(args: argparse.Namespace, run: RunConfig | None = None) -> WorldSpec:
    """The WorldSpec the arguments describe (garnet's flags, then any --world-param); without
    --env, the world of `run` when given (`world_of_run`), else the algorithm's own world."""
    params: dict[str, object] = {}
    env, horizon = args.env, args.horizon
    if env is None and run is not None:
        own = world_of_run(run)
        env, params = own.name, dict(own.params)
        horizon = own.horizon if horizon is None else horizon
    if env is None:
        algo = getattr(args, "algo", None)
        env = algorithms.get(algo).default_world if algo else "riverswim"
    if env == "garnet":
        params = {"n_states": args.garnet_states, "n_actions": args.garnet_actions,
                  "seed": args.world_seed}
    params.update(dict(args.world_param))
    return WorldSpec(env, horizon, params)


def world_of_run(run: RunConfig) -> WorldSpec:
    """The users' world a run is for, from its public config: the world of its public model, else
    its algorithm's own world, at the run's horizon (and S, A where that world takes them).
    A world's secret parameters (e.g. `seed`) keep their defaults."""
    if run.model is not None:
        if run.model.name not in BUILTINS:
            raise CliError(f"the run's world has a {run.model.name!r} model (loaded from a file):"
                           " pass --env FILE.npz")
        takes = BUILTINS[run.model.name].params
        params = {k: v for k, v in run.model.params.items() if k in takes and takes[k] != v}
        return WorldSpec(run.model.name, run.horizon, params)
    name = bind(run).default_world
    takes = BUILTINS[name].params if name in BUILTINS else {}
    params = {k: v for k, v in (("n_states", run.n_states), ("n_actions", run.n_actions))
              if k in takes and takes[k] != v}
    return WorldSpec(name, run.horizon, params)


def world_options(spec: WorldSpec) -> str:
    """The command-line options that describe `spec` (e.g. `--env lm-hard --horizon 5`)."""
    words = [f"--env {spec.name}"] + ([f"--horizon {spec.horizon}"] if spec.horizon else [])
    words += [f"--world-param {k}={json.dumps(v)}" for k, v in spec.params.items()]
    return " ".join(words)


def run_world(args: argparse.Namespace, run: RunConfig) -> TabularMDP:
    """The users' world for `run` (`world_from_args`), refused with the options of the run's own
    world when it does not fit the run."""
    mdp = world_from_args(args, run).build()
    try:
        bind(run).check_world(mdp)
    except ValueError as exc:
        try:
            hint = f"this run is for `{world_options(world_of_run(run))}`"
        except CliError as why:
            hint = str(why)
        raise CliError(f"{exc} ({hint})") from None
    return mdp


def config_from_args(
    args: argparse.Namespace,
    privacy: str,
    epsilon: float,
    mechanism: str,
    mdp: TabularMDP,
) -> RunConfig:
    """One RunConfig from the parsed options (pydantic errors become CliError)."""
    own = trust.get(privacy).mechanisms  # a boundary that releases with some mechanisms only
    if args.mechanism is None and own is not None and mechanism not in own:
        mechanism = own[0]
    # no --delta: RunConfig's (the population rule's for Gaussian noise, 0 for Laplace)
    if not trust.get(privacy).private:
        delta: dict[str, float] = {"delta": 0.0}
    else:
        delta = {} if args.delta is None else {"delta": args.delta}
    knobs = dict(args.knob)
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
            mechanism=mechanism,
            noise=args.noise,
            preset=args.preset,
            knobs=knobs or None,
            schedule=args.schedule,
            counter_bands=args.counter_bands,
            **delta,
            dropout=getattr(args, "dropout", None),
            collusion=getattr(args, "collusion", None),
            secagg_noise=getattr(args, "secagg_noise", None),
            # absent (not null) is the preset's counter
            **({} if args.counter is None else {"counter": args.counter}),
        )
        bind(config)  # the algorithm's own rules across fields
    except ValidationError as exc:
        raise CliError(pydantic_message(exc)) from None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return config


def pydantic_message(exc: ValidationError) -> str:
    """A validation error as one line: 'field: what is wrong' (no framework prefix)."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc}: {error_text(err)}" if loc else error_text(err))
    return "; ".join(parts)


def output_file(path: str | None, flag: str) -> Path | None:
    """The file a command writes at its end (`flag`'s value), checked at its start: its folder
    is made as --out folders are, and must take a file, so a long test never ends in a
    traceback that loses what it measured. None when the flag was not given."""
    if not path:
        return None
    out = Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"{flag} {path}: cannot make its folder ({exc.strerror})") from None
    if out.is_dir() or not os.access(out.parent, os.W_OK):
        raise CliError(f"{flag} {path}: not a file this user can write")
    return out


def refuse_overwrite(out: Path, names: tuple[str, ...], force: bool) -> None:
    """Refuse to write into `out` when it already holds any of `names` (unless `force`)."""
    present = [n for n in names if (out / n).exists()]
    if present and not force:
        raise CliError(
            f"{out} already holds {', '.join(present)} from an earlier run: pass --force to"
            " overwrite, or --out DIR for a new folder"
        )


def warn(message: str) -> None:
    """A note for the person at the terminal (stderr, so stdout stays machine-readable)."""
    print(f"privrl: {message}", file=sys.stderr)


def policy_never_changed_notes(results: list[dict[str, Any]]) -> list[str]:
    """One line for each configuration whose policy never changed: its regret is that of the
    policy it started with, not of anything learned (e.g. a switching rule that never fired)."""
    notes = []
    for r in results:
        changes = r.get("policy_changes")  # per seed (in-process runs)
        if changes:
            frozen = sum(1 for c in changes if c == 0)
            every = " in any seed" if frozen == len(changes) else ""
            seeds = "" if len(changes) == 1 else every or f" in {frozen} of {len(changes)} seeds"
        else:  # a run over HTTP: the versions of its policy log
            frozen = int(r.get("policy_versions", 2) <= 1)
            seeds = ""
        if frozen:
            notes.append(f"note: {r['label']}: the policy never changed{seeds} in"
                         f" {r['config']['episodes']} episodes, so its regret is its first"
                         " policy's, not a learned one")
    return notes


def tail_header(results: list[dict[str, Any]]) -> str:
    """The header of the per-episode regret column: the window the rows actually average."""
    tails = sorted({r["regret"]["tail_episodes"] for r in results})
    return f"last-{tails[0]}/ep" if len(tails) == 1 else "last-n/ep"


def add_executor_options(p: argparse.ArgumentParser) -> None:
    """--executor, --ray-address and --ray-runtime-env: where a sweep's or a study's runs go."""
    from privrl.lab.experiments import EXECUTORS

    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="where tasks run: local processes, or Ray (pip install 'privrl[ray]')")
    p.add_argument("--ray-address", default=None,
                   help="the Ray cluster to join: 'auto' (the one `ray start --head` runs here)"
                   " or HOST:PORT (default: $RAY_ADDRESS, else a new local instance for this"
                   " sweep)")
    p.add_argument("--ray-runtime-env", type=json_object, default=None,
                   help="Ray runtime_env as JSON, e.g. '{\"pip\": [\"privrl @ git+URL\"]}' to"
                   " install privrl on a remote cluster's workers (default: none, the nodes"
                   " have privrl)")


def executor_from_args(args: argparse.Namespace) -> Any:
    """The executor `add_executor_options`' flags name (a CliError for flags that do not fit or
    a missing Ray)."""
    from privrl.lab.executors import ExecutorError
    from privrl.lab.experiments import make_executor

    if args.executor != "ray" and (args.ray_address or args.ray_runtime_env):
        raise CliError("--ray-address and --ray-runtime-env need --executor ray")
    try:
        return make_executor(args.executor, args.workers, args.ray_address, args.ray_runtime_env)
    except ExecutorError as exc:
        raise CliError(str(exc)) from None
