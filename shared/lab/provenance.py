"""Where a measurement came from: the command line, the commit and the machine's load."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the checkout (an editable install's source tree)
CODE = ("shared", "server", "client", "scripts", "pyproject.toml")


def commit(root: Path = ROOT) -> str:
    """The short hash of the checkout's HEAD, with `+` when its code (not its docs) has local
    changes; 'unknown' outside a git checkout."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              check=False).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return "unknown"
    return head + ("+" if git("status", "--porcelain", "--", *CODE) else "")


def provenance(command: str | None = None) -> dict[str, Any]:
    """{"command", "commit", "load_average"}: `command` defaults to this process's argv."""
    if command is None:
        command = shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])
    return {"command": command, "commit": commit(),
            "load_average": [round(x, 1) for x in os.getloadavg()]}
