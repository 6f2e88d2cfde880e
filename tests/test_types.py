"""The type checker passes over the trust boundaries, the privacy layer and the server (issue 41,
part 8): mypy with pydantic's plugin, configured in pyproject.toml, at zero errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api
from support.server import REPO

pytestmark = pytest.mark.slow  # a type check of 50-odd modules: about half a minute

CHECKED = ("privrl.trust", "privrl.privacy", "privrl.server")


def link_tree(root: Path) -> Path:
    """`privrl` laid out as installed (shared/ with server/ and client/ inside), as links."""
    package = root / "privrl"
    package.mkdir(parents=True)
    for entry in (REPO / "shared").iterdir():
        (package / entry.name).symlink_to(entry)
    for name in ("server", "client"):
        (package / name).symlink_to(REPO / name)
    return root


def test_trust_privacy_and_the_server_type_check(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYPYPATH", str(link_tree(tmp_path / "tree")))
    args = ["--config-file", str(REPO / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache")]
    for package in CHECKED:
        args += ["-p", package]
    out, err, status = api.run(args)
    assert status == 0, out + err
    assert "Success: no issues found" in out
