"""Which code measured: the checkout's commit, marked when its code has local changes."""

from __future__ import annotations

import subprocess
from pathlib import Path

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

