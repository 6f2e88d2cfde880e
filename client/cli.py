"""The `privrl` command: one entry point that every subcommand hangs from.

  in-process (privrl.client.lab_cli): run, plot, bench, worlds, algorithms
  policy evaluation (privrl.client.policy_eval_cli): policy-eval
  client-server (privrl.client.remote_cli): serve, runs, users, evaluate, demo
  trust boundary (privrl.client.audit_cli): audit server, audit randomizer, audit proxy

Every subcommand validates its arguments and reports problems as one clear line (exit code 2),
never as a traceback. Command modules import `cli_common`, never this module.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from privrl import algorithms
from privrl.client import audit_cli, lab_cli, policy_eval_cli, remote_cli
from privrl.client.cli_common import CliError
from privrl.worlds.tabular import WorldError

PLUGINS_ENV = "PRIVRL_PLUGINS"  # modules of third-party algorithms, imported at start


def build_parser() -> argparse.ArgumentParser:
    """All subcommands."""
    parser = argparse.ArgumentParser(prog="privrl", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    lab_cli.register(sub)
    policy_eval_cli.register(sub)
    remote_cli.register(sub)
    audit_cli.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `privrl` console command."""
    try:
        algorithms.load_plugins(os.environ.get(PLUGINS_ENV, ""))
    except ImportError as exc:
        print(f"privrl: error: ${PLUGINS_ENV}: {exc}", file=sys.stderr)
        return 2
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
