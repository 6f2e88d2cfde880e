"""`python -m privrl.server --host H --port P --db PATH [--claim-timeout S] [--sequential]`.

`privrl serve` executes exactly this module. Flags override the PRIVRL_* environment variables;
the admin token is only ever read from PRIVRL_ADMIN_TOKEN (never a flag: it would show in `ps`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

import uvicorn
from privrl.argtypes import positive_float
from privrl.protocol import SERVER_KEEPALIVE_SECONDS
from privrl.server.app import create_app
from privrl.server.settings import Settings
from privrl.wire import error_text
from pydantic import ValidationError


def port_number(text: str) -> int:
    """argparse type: a TCP port 0..65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be in 0..65535, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command-line flags."""
    p = argparse.ArgumentParser(
        prog="python -m privrl.server",
        description="privrl billboard server (admin token from PRIVRL_ADMIN_TOKEN)",
    )
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=8000, help="TCP port (default 8000)")
    p.add_argument("--db", default=None, help="SQLite file (default $PRIVRL_DB or privrl.db)")
    p.add_argument(
        "--claim-timeout",
        type=positive_float,
        default=None,
        help="seconds before an unreported claim lapses (default $PRIVRL_CLAIM_TIMEOUT or 30)",
    )
    p.add_argument(
        "--sequential",
        action="store_true",
        default=None,
        help="new runs are strictly sequential by default: one outstanding claim at a time",
    )
    p.add_argument(
        "--access-log",
        action="store_true",
        default=None,
        help="log one line per HTTP request (default $PRIVRL_ACCESS_LOG, else off)",
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="log level (default info)",
    )
    return p


def settings_from(args: argparse.Namespace) -> Settings:
    """Environment settings with the given flags on top."""
    overrides = {
        "db": args.db,
        "claim_timeout": args.claim_timeout,
        "sequential": args.sequential,
        "access_log": args.access_log,
    }
    return Settings(**{k: v for k, v in overrides.items() if v is not None})


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags, build the app and serve it until SIGINT/SIGTERM."""
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from(args)
    except ValidationError as exc:
        errors = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'settings'}: {error_text(e)}" for e in exc.errors()
        )
        print(f"python -m privrl.server: error: invalid settings: {errors}", file=sys.stderr)
        return 2
    if not settings.db.parent.exists():
        print(f"python -m privrl.server: error: directory {settings.db.parent} does not exist",
              file=sys.stderr)
        return 2
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    uvicorn.run(
        create_app(settings),
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=settings.access_log,
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=5,
        timeout_keep_alive=SERVER_KEEPALIVE_SECONDS,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
