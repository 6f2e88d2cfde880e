"""Which code measured: privrl's version and the checkout's commit.

An installed wheel has no checkout beside it: `stamp` then names the version alone, and nothing
here ever starts `git` there. In a checkout (an editable install), the commit is read from the
repository's files; `commit` also asks `git status` whether the code has local changes.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import __version__

ROOT = Path(__file__).resolve().parents[1]  # the checkout, when the package is its shared/
CODE = ("shared", "server", "client", "scripts", "pyproject.toml")


def _git_dir(root: Path) -> Path | None:
    """The repository folder of a checkout or a worktree (`.git` may be a `gitdir:` file)."""
    dot = root / ".git"
    if dot.is_dir():
        return dot
    if dot.is_file():
        text = dot.read_text().strip()
        if text.startswith("gitdir:"):
            return (root / text.removeprefix("gitdir:").strip()).resolve()
    return None


def head(root: Path = ROOT) -> str | None:
    """The checkout's HEAD commit (12 hex digits) read from its files, without starting a
    process; None outside a checkout (an installed wheel)."""
    git = _git_dir(root)
    if git is None or not (git / "HEAD").is_file():
        return None
    ref = (git / "HEAD").read_text().strip()
    if not ref.startswith("ref:"):
        return ref[:12]
    name = ref.removeprefix("ref:").strip()
    common = git
    if (git / "commondir").is_file():  # a worktree keeps its branches in the main repository
        common = (git / (git / "commondir").read_text().strip()).resolve()
    for base in (git, common):
        if (base / name).is_file():
            return (base / name).read_text().strip()[:12]
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text().splitlines():
            sha, _, ref_name = line.partition(" ")
            if ref_name == name:
                return sha[:12]
    return None


def stamp(root: Path = ROOT) -> dict[str, str]:
    """What a result file records about the code that made it: the version and, in a
    checkout, its HEAD commit."""
    out = {"privrl": __version__}
    commit_id = head(root)
    if commit_id is not None:
        out["commit"] = commit_id
    return out


def commit(root: Path = ROOT) -> str:
    """The checkout's HEAD, with `+` when its code (not its docs) has local changes (asks
    `git status`); 'unknown' outside a checkout, where no process is started."""
    commit_id = head(root)
    if commit_id is None:
        return "unknown"
    status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", *CODE],
                            capture_output=True, text=True, check=False).stdout.strip()
    return commit_id[:7] + ("+" if status else "")


def save_measured(path: str | Path, data: dict[str, Any]) -> None:
    """Write `data` as JSON after what measured it: the command line (`python` and this
    script's argv), the commit and the load average (parent folders made)."""
    head_fields = {"command": shlex.join(["python", *sys.argv]), "commit": commit(),
                   "load_average": [round(x, 1) for x in os.getloadavg()]}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps({**head_fields, **data}, indent=1) + "\n")
