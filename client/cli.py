"""The `privrl` command: one entry point that every subcommand hangs from.

  in-process (privrl.client.lab_cli): run, plot, bench, worlds, algorithms
  policy evaluation (privrl.client.policy_eval_cli): policy-eval
  client-server (privrl.client.remote_cli): serve, runs, ledger, users, evaluate, demo
  trust boundary (privrl.client.audit_cli): audit server, audit randomizer, audit proxy
  load testing (privrl.client.load.cli): locustfile (and users --processes, bench http)

Every subcommand validates its arguments and reports problems as one clear line (exit code 2),
never as a traceback; `privrl COMMAND --help` lists its options with their defaults. Command
modules import `cli_common`, never this module.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
from collections.abc import Sequence

from privrl import __version__, algorithms
from privrl.client import audit_cli, frontier_cli, lab_cli, policy_eval_cli, remote_cli
from privrl.client.api import ApiError
from privrl.client.cli_common import CliError, Parser, RawDescriptionFormatter, mark_parsers
from privrl.client.load import cli as load_cli
from privrl.worlds.tabular import WorldError

PLUGINS_ENV = "PRIVRL_PLUGINS"  # modules of third-party algorithms, imported at start
DESCRIPTION = """\
privrl: differentially private exploration in episodic reinforcement learning.

Start with `privrl demo`: a real server and simulated users play RiverSwim non-privately, with
joint DP (JDP: a trusted server noises what it publishes) and with local DP (LDP: users noise
before sending), at the same epsilon, and print what each learned and spent.
`privrl COMMAND --help` lists a command's options with their defaults.
"""


def build_parser() -> argparse.ArgumentParser:
    """All subcommands."""
    parser = Parser(prog="privrl", description=DESCRIPTION,
                    formatter_class=RawDescriptionFormatter)
    parser.add_argument("--version", action="version", version=f"privrl {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    lab_cli.register(sub)
    frontier_cli.register(sub)
    policy_eval_cli.register(sub)
    remote_cli.register(sub)
    audit_cli.register(sub)
    load_cli.register(sub)
    mark_parsers(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `privrl` console command."""
    try:
        algorithms.load_plugins(os.environ.get(PLUGINS_ENV, ""))
    except ImportError as exc:
        print(f"privrl: error: ${PLUGINS_ENV}: {exc}", file=sys.stderr)
        return 2
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        hint = ""
        if args.parser.prog == "privrl runs create" and any(not x.startswith("-") for x in extra):
            hint = ("; a run has one privacy mode, epsilon and mechanism: create one run per"
                    " value, or sweep several in-process with `privrl run`")
        args.parser.refuse_extra(extra, hint)
    try:
        return int(args.handler(args) or 0)
    except (CliError, WorldError, ApiError) as exc:  # each explained in one line
        print(f"privrl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("privrl: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if not _stdout_gone():  # some other pipe (a subprocess, a socket): a real error
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # quiet exit flush
        return 141  # 128 + SIGPIPE, what a shell reports for a command whose reader left


def _stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader has left (`privrl algorithms | head`)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


if __name__ == "__main__":
    raise SystemExit(main())
