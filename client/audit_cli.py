"""`privrl audit server | randomizer | proxy`: test a trust boundary as an attacker and an auditor.

Exit codes: 0 nothing found, 1 findings (or a randomizer bound above the declared epsilon),
2 usage errors (one line, never a traceback).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

from privrl import algorithms, trust
from privrl.client.api import check_url
from privrl.client.cli_common import (
    CliError,
    epsilon_value,
    knob_value,
    non_negative_int,
    positive_int,
    run_id_arg,
    unit_interval,
)
from privrl.config import RunConfig
from privrl.privacy.noise import NOISE_NAMES
from privrl.seeding import generator, secret_seed
from pydantic import ValidationError

SERVER_ENV = "PRIVRL_SERVER"
AUDIT_DELTA = 1e-5  # the declared delta of an audited Gaussian randomizer unless --delta says




def _seconds(text: str) -> float:
    """argparse type: a finite number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0.0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text}")
    return value


def _budget(text: str) -> float:
    """argparse type: a finite number of seconds > 0."""
    value = _seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a number of seconds > 0, got 0")
    return value




def _port(text: str) -> int:
    """argparse type: a TCP port 1..65535."""
    value = non_negative_int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be in 1..65535, got {value}")
    return value


def _grid(text: str) -> float:
    """argparse type: a grid step, 1 (integers) or a power of two 2^-b."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a grid step such as 1 or 0.125, got {text!r}"
                                         ) from None
    if not (value > 0 and math.isfinite(value) and math.frexp(value)[0] == 0.5):
        raise argparse.ArgumentTypeError(f"a grid step is a power of two (1, 0.5, 0.25, ...),"
                                         f" got {text}")
    return value


def _progress(kind: str):
    """A progress printer: one line per phase on stderr (stdout keeps the report)."""
    def say(line: str) -> None:
        """Print one progress line."""
        print(f"privrl audit {kind}: {line}", file=sys.stderr, flush=True)
    return say


def _auditor_rng(seed: int | None, role: str):
    """The auditor's own generator (its seed is not a secret: it only makes a run repeatable)."""
    return generator(secret_seed() if seed is None else seed, "audit", role)


def cmd_audit_server(args: argparse.Namespace) -> int:
    """privrl audit server: public routes only; exit 1 when anything is found."""
    from privrl.client.audit.server_attack import audit_server

    server = args.server or os.environ.get(SERVER_ENV, "")
    if not server:
        raise CliError(f"no server given: pass --server URL or set {SERVER_ENV}")
    report = audit_server(server, args.run, args.polls, args.interval, args.alpha,
                          args.guesses, args.max_candidates, _auditor_rng(args.seed, "server"),
                          args.seed_budget, args.grid, _progress("server"))
    print(report.to_json() if args.json else report.text())
    return report.exit_code


def audit_shape(args: argparse.Namespace) -> dict[str, object]:
    """The audited model class: --states/--actions/--horizon for an algorithm whose own world
    is a plain tabular MDP; else its own world's (S, A, H) and public model (linear mixtures,
    policy-evaluation chains), at --horizon when one is given."""
    from privrl.worlds import make
    from privrl.worlds.model_spec import model_spec_of
    from privrl.worlds.tabular import TabularMDP

    default = algorithms.get(args.algo).default_world
    world = make(default, None)
    if isinstance(world, TabularMDP) and model_spec_of(world) is None:
        return {"n_states": args.states or 2, "n_actions": args.actions or 2,
                "horizon": args.horizon or 1}
    if args.states or args.actions:
        raise CliError(f"{args.algo} is audited on its own world ({default}): its S and A are"
                       " the world's, leave --states and --actions out")
    if args.horizon:
        world = make(default, args.horizon)
    return {"n_states": world.S, "n_actions": world.A, "horizon": world.H,
            "model": model_spec_of(world)}


def cmd_audit_randomizer(args: argparse.Namespace) -> int:
    """privrl audit randomizer: an empirical lower bound on the epsilon of the local randomizer
    (or, with --central, of the central release over a run of --episodes users), and the
    float-leak test of its outputs; exit 1 when the bound exceeds epsilon or anything leaks."""
    from privrl.audit.lower_bound import (
        audit_central_release,
        audit_local_randomizer,
    )
    from privrl.audit.matrix_counter import audit_matrix_counter

    if args.episodes is not None and not args.central:
        raise CliError("--episodes only applies to the central release: add --central")
    if args.counter != "tree" and not args.central:
        raise CliError("--counter only applies to the central release: add --central")
    if args.bands is not None and args.counter != "matrix":
        raise CliError("--bands only applies to the matrix counter: add --counter matrix")
    algo = algorithms.get(args.algo)
    boundary = trust.central_boundary() if args.central else trust.local_boundary()
    if boundary is None or algo.refuses(boundary) is not None:
        raise CliError(f"{args.algo} has no {'central' if args.central else 'local'} release to"
                       f" audit: it runs across {', '.join(algo.boundaries())}")
    privacy = boundary.name
    mechanism = args.mechanism or algo.mechanism_for(boundary)
    delta = args.delta if args.delta is not None else (
        AUDIT_DELTA if mechanism == "gaussian" else 0.0)
    shape = audit_shape(args)
    try:
        config = RunConfig(algo=args.algo, **shape, episodes=args.episodes or 1,
                           privacy=privacy, epsilon=args.epsilon, delta=delta,
                           mechanism=mechanism, noise=args.noise, preset=args.preset,
                           knobs=dict(args.knob) or None)
    except ValidationError as exc:
        raise CliError("; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}"
                                 for e in exc.errors())) from None
    try:
        audit = (audit_matrix_counter if args.counter == "matrix" else audit_central_release
                 if args.central else audit_local_randomizer)(
            config, _auditor_rng(args.seed, "randomizer"), args.samples, args.confidence,
            progress=_progress("randomizer"), **({"bands": args.bands} if args.bands else {}))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    code = 1 if audit.exceeded or audit.leaks else 0
    if args.json:
        print(json.dumps(audit.to_dict(), indent=2))
        return code
    s, a, h = audit.shape
    delta_txt = f" delta={audit.delta:g}" if audit.delta else ""
    print(f"privrl audit randomizer: {audit.algo}, {audit.release}, {audit.mechanism}"
          f" eps={audit.epsilon:g}{delta_txt}, S={s} A={a} H={h}, families"
          f" {', '.join(audit.families)} (noise scale {audit.noise_scale:.4g})")
    copies = f" in {audit.noisy_copies} noisy copies" if audit.noisy_copies > 1 else ""
    print(f"worst-case pair: {audit.differing_entries} entries differ{copies}; exact epsilon of"
          f" the pair under the declared mechanism {audit.pair_epsilon:.4g}")
    print(f"test: likelihood-ratio threshold {audit.threshold:.4g} (chosen on {audit.pilot}"
          f" pilot samples); {audit.samples} samples per user: TPR >= {audit.tpr_lower:.4g},"
          f" FPR <= {audit.fpr_upper:.4g} ({audit.seconds:.1f}s)")
    verdict = (f"EXCEEDED: the {audit.release} is less private than declared" if audit.exceeded
               else "consistent")
    print(f"epsilon lower bound {audit.lower_bound:.4g} ({audit.confidence:.0%} confidence)"
          f" vs declared {audit.epsilon:g}: {verdict}")
    n = audit.float_entries
    leak = (f"FOUND: {audit.float_proven} of {n} output entries proven exact from their float"
            f" bits ({audit.float_wrong} wrong), {audit.off_grid} off their declared grid"
            if audit.leaks else f"none of {n} output entries proven exact or off their grid")
    print(f"float noise ({args.noise}): {leak}")
    return code


def proxy_endpoints(args: argparse.Namespace) -> str:
    """A proxy's checked upstream URL, once --host:--listen is known to be free."""
    from privrl.client.audit.proxy import check_listen

    upstream = check_url(args.upstream)
    try:
        check_listen(args.host, args.listen)
    except OSError as exc:
        raise CliError(
            f"cannot listen on {args.host}:{args.listen}: {exc.strerror or exc}") from None
    return upstream


def cmd_audit_proxy(args: argparse.Namespace) -> int:
    """privrl audit proxy: forward and record until stopped; exit 1 when anything was flagged."""
    from privrl.client.audit.proxy import REPORT_PATH, serve_proxy

    upstream = proxy_endpoints(args)
    sink = None
    if args.log:
        try:
            sink = open(Path(args.log), "a", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise CliError(f"cannot write the log {args.log}: {exc.strerror or exc}") from None
    print(f"privrl audit proxy: http://{args.host}:{args.listen} -> {upstream} (report so far:"
          f" GET {REPORT_PATH}); stop with Ctrl-C", file=sys.stderr, flush=True)
    try:
        report = serve_proxy(args.host, args.listen, upstream, sink)
    except OSError as exc:
        raise CliError(str(exc)) from None
    finally:
        if sink is not None:
            sink.close()
    if args.json:
        print(report.to_json())
    else:
        print(report.text())
    return report.exit_code


def cmd_audit_replay_proxy(args: argparse.Namespace) -> int:
    """privrl audit replay-proxy: rewrite every claim's episode index until stopped."""
    from privrl.client.audit.replay import serve_replay_proxy

    upstream = proxy_endpoints(args)
    print(f"privrl audit replay-proxy: http://{args.host}:{args.listen} -> {upstream}, every"
          f" claim's episode index rewritten to {args.episode}; stop with Ctrl-C",
          file=sys.stderr, flush=True)
    serve_replay_proxy(args.host, args.listen, upstream, args.episode)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `audit server | randomizer | proxy | replay-proxy` to the `privrl` parser."""
    audit = sub.add_parser("audit", help="test a trust boundary: server, randomizer, proxy,"
                           " replay-proxy")
    asub = audit.add_subparsers(dest="audit_command", required=True)

    p = asub.add_parser("server", help="audit a server from its public routes (no token)")
    p.add_argument("--server", default=None,
                   help=f"server base URL, e.g. http://127.0.0.1:8000 (default ${SERVER_ENV})")
    p.add_argument("--run", action="append", default=None, metavar="ID", type=run_id_arg,
                   help="audit this run (repeatable; default: every listed run)")
    p.add_argument("--polls", type=positive_int, default=3,
                   help="billboard readings per run, for the noise test (default 3)")
    p.add_argument("--interval", type=_seconds, default=1.0,
                   help="seconds between readings (default 1)")
    p.add_argument("--alpha", type=unit_interval, default=1e-3,
                   help="false-alarm rate of the noise test per run (default 0.001)")
    p.add_argument("--guesses", type=non_negative_int, default=65,
                   help="also try the seeds 0..N-1 people type (default 65)")
    p.add_argument("--max-candidates", type=non_negative_int, default=400,
                   help="most candidate seeds tried per run (default 400)")
    p.add_argument("--seed-budget", type=_budget, default=120.0, metavar="SECONDS",
                   help="most seconds spent trying seeds per run (default 120; the most"
                   " suspicious candidates go first)")
    p.add_argument("--seed", type=non_negative_int, default=None,
                   help="the auditor's own seed (control draws), to repeat an audit exactly"
                   " (default: drawn at random)")
    p.add_argument("--grid", type=_grid, default=None, metavar="STEP",
                   help="the declared grid of released values (1: integers, or 2^-b): a value"
                   " off it is a finding (default: each family's declared grid, if any)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=cmd_audit_server)

    p = asub.add_parser("randomizer",
                        help="empirical lower bound on the epsilon of the local randomizer"
                             " (or, with --central, of the central release)")
    p.add_argument("--algo", default="dp-ucbvi", choices=algorithms.names(),
                   help="the algorithm whose local randomizer is audited (any with a local"
                   " trust boundary; `privrl algorithms` lists them)")
    p.add_argument("--mechanism", default=None, choices=["laplace", "gaussian"],
                   help="the randomizer's mechanism (default: the algorithm's)")
    p.add_argument("--epsilon", type=epsilon_value, default=1.0, help="declared epsilon")
    p.add_argument("--delta", type=float, default=None,
                   help=f"declared delta (default {AUDIT_DELTA:g} with gaussian, else 0)")
    p.add_argument("--states", type=positive_int, default=None,
                   help="S of a tabular algorithm (default 2; others: their own world's)")
    p.add_argument("--actions", type=positive_int, default=None,
                   help="A of a tabular algorithm (default 2; others: their own world's)")
    p.add_argument("--horizon", type=positive_int, default=None,
                   help="H (default 1 for a tabular algorithm: the smallest world gives the"
                   " tightest bound; others: their own world's)")
    p.add_argument("--preset", default="practical", choices=["faithful", "practical"],
                   help="the algorithm's preset (it decides which families are released)")
    p.add_argument("--knob", action="append", default=[], type=knob_value, metavar="NAME=VALUE",
                   help="an algorithm knob that changes the released families (repeatable)")
    p.add_argument("--noise", default="numpy", choices=list(NOISE_NAMES),
                   help="noise backend of the randomizer")
    p.add_argument("--central", action="store_true",
                   help="audit the central (JDP) release instead of the local randomizer: every"
                        " billboard release of a run whose first user is replaced")
    p.add_argument("--episodes", type=positive_int, default=None,
                   help="with --central: users (episodes) in the audited run; the tree spends"
                        " epsilon over floor(log2 K) + 1 levels (default 1: one release)")
    p.add_argument("--counter", default="tree", choices=["tree", "matrix"],
                   help="with --central: the continual counter audited (default tree, the run's"
                        " release; matrix: the square-root matrix-factorization counter on a"
                        " count stream of --episodes users, Gaussian only)")
    p.add_argument("--bands", type=positive_int, default=None,
                   help="with --counter matrix: audit its banded form (the encoder keeps this"
                        " many diagonals; default: all)")
    p.add_argument("--samples", type=positive_int, default=200_000,
                   help="outputs per user (default 200000; more: tighter)")
    p.add_argument("--confidence", type=unit_interval, default=0.95,
                   help="confidence of the bound (default 0.95)")
    p.add_argument("--seed", type=non_negative_int, default=None,
                   help="the auditor's seed, for a repeatable audit (default: drawn at random)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(handler=cmd_audit_randomizer)

    p = asub.add_parser("proxy", help="a logging reverse proxy that flags raw LDP statistics")
    p.add_argument("--listen", type=_port, required=True, metavar="PORT",
                   help="port to listen on")
    p.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    p.add_argument("--upstream", required=True, metavar="URL",
                   help="the server to forward to, e.g. http://127.0.0.1:8000")
    p.add_argument("--log", default=None, metavar="FILE",
                   help="append one JSON line per exchange to FILE (default: no log)")
    p.add_argument("--json", action="store_true", help="print the final report as JSON")
    p.set_defaults(handler=cmd_audit_proxy)

    p = asub.add_parser("replay-proxy",
                        help="an attacker's reverse proxy that hands every claim the same"
                        " episode index (the episode-replay attack on LDP users)")
    p.add_argument("--listen", type=_port, required=True, metavar="PORT",
                   help="port to listen on")
    p.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    p.add_argument("--upstream", required=True, metavar="URL",
                   help="the server to forward to, e.g. http://127.0.0.1:8000")
    p.add_argument("--episode", type=non_negative_int, default=7,
                   help="the episode index every claim is given (default 7)")
    p.set_defaults(handler=cmd_audit_replay_proxy)
