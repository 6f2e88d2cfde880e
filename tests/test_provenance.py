"""What a measurement records about itself: the command, the commit and the load."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import privrl
import pytest
from privrl import provenance
from privrl.provenance import save_measured


def test_a_measurement_is_saved_after_what_measured_it(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["scripts/x.py", "--json", "out dir/x.json"])
    monkeypatch.setattr(provenance, "commit", lambda: "abc1234+")  # git is a process
    path = tmp_path / "deep" / "x.json"  # parent folders are made
    save_measured(path, {"rows": [[1, 2]], "note": "n"})
    data = json.loads(path.read_text())
    assert list(data) == ["command", "commit", "load_average", "rows", "note"]
    assert data["command"] == "python scripts/x.py --json 'out dir/x.json'"
    assert data["commit"] == "abc1234+" and len(data["load_average"]) == 3
    assert data["rows"] == [[1, 2]]


def _repo(root: Path, sha: str, *, packed: bool = False) -> None:
    git = root / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    if packed:
        (git / "packed-refs").write_text(f"# pack-refs with: peeled\n{sha} refs/heads/main\n")
    else:
        (git / "refs" / "heads" / "main").write_text(sha + "\n")


@pytest.mark.parametrize("packed", [False, True])
def test_the_head_is_read_from_the_checkouts_files(tmp_path: Path, packed: bool) -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    _repo(tmp_path, sha, packed=packed)
    assert provenance.head(tmp_path) == sha[:12]
    assert provenance.stamp(tmp_path) == {"privrl": privrl.__version__, "commit": sha[:12]}


def test_a_worktree_finds_its_branch_in_the_main_repository(tmp_path: Path) -> None:
    sha = "89abcdef0123456789abcdef0123456789abcdef"
    _repo(tmp_path / "main", sha)
    gitdir = tmp_path / "main" / ".git" / "worktrees" / "wt"
    gitdir.mkdir(parents=True)
    (gitdir / "HEAD").write_text("ref: refs/heads/main\n")
    (gitdir / "commondir").write_text("../..\n")
    (tmp_path / "wt").mkdir()
    (tmp_path / "wt" / ".git").write_text(f"gitdir: {gitdir}\n")
    assert provenance.head(tmp_path / "wt") == sha[:12]


def test_an_installed_copy_names_its_version_and_starts_no_git(tmp_path: Path) -> None:
    # no .git beside the package: nothing to read, and `commit` must not start a process (the
    # fast tier's guard fails a test that does)
    assert provenance.stamp(tmp_path) == {"privrl": privrl.__version__}
    assert provenance.commit(tmp_path) == "unknown"


def test_every_summary_names_the_version_that_made_it(tmp_path: Path) -> None:
    from privrl.lab.experiments import read_summary, save

    save([], tmp_path)
    assert read_summary(tmp_path)["privrl"] == privrl.__version__
