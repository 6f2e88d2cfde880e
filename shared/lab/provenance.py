"""Which code measured: the checkout's commit, marked when its code has local changes."""

from __future__ import annotations

import json
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



def save_measured(path: str | Path, data: dict[str, Any]) -> None:
    """Write `data` as JSON after what measured it: the command line (`python` and this
    script's argv), the commit and the load average (parent folders made)."""
    head = {"command": shlex.join(["python", *sys.argv]), "commit": commit(),
            "load_average": [round(x, 1) for x in os.getloadavg()]}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps({**head, **data}, indent=1) + "\n")
