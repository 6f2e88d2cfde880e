"""The distribution installs one import name, `privrl` (Flower's layout), and nothing generic.

A regular (non-editable) install of the wheel: `privrl`, `privrl.server` and `privrl.client` import
from it; `shared`, `server` and `client` do not exist. Sub-packages are discovered below the three
folders of pyproject.toml's package-dir, never listed by hand.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import warnings
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"privrl": "shared", "privrl.server": "server", "privrl.client": "client"}
DASHBOARD_FILES = ("index.html", "app.js", "style.css", "favicon.svg")
APIDOCS_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js")


def discovered(root: Path) -> set[str]:
    """The packages a build of the project at `root` gets from setuptools' discovery."""
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    with warnings.catch_warnings():  # setuptools' notes on its own configuration
        warnings.simplefilter("ignore")
        dist = apply_configuration(Distribution({"src_root": str(root)}), root / "pyproject.toml")
        dist.set_defaults(name=False)
    return set(dist.packages)


def test_every_package_folder_is_discovered() -> None:
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "packages" not in tool and tool["package-dir"] == FOLDERS
    found = discovered(REPO)
    for name, folder in FOLDERS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder).parts
            assert ".".join((name, *rel)) in found, init
    assert set(tool["package-data"]) <= found  # the data folders are packages too
    assert not {n for n in found if n.split(".")[0] != "privrl"}


def test_a_new_folder_is_packaged_without_editing_pyproject(tmp_path: Path) -> None:
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    for folder in (*FOLDERS.values(), "shared/newfamily/kind"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").touch()
    (tmp_path / "shared/newfamily/__pycache__").mkdir()
    assert discovered(tmp_path) == {*FOLDERS, "privrl.newfamily", "privrl.newfamily.kind"}


@pytest.mark.slow
def test_a_regular_install_has_only_privrl(tmp_path: Path) -> None:
    wheels, target, source = tmp_path / "wheels", tmp_path / "site", tmp_path / "source"
    # build from a copy: setuptools writes build/ and *.egg-info/ next to the sources
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", "results"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                    "-q", "-w", str(wheels), str(source)], check=True, capture_output=True)
    (wheel,) = wheels.glob("privrl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"privrl"}
    for asset in DASHBOARD_FILES:  # package data: the dashboard ships with a regular install
        assert f"privrl/server/dashboard/{asset}" in names, asset
    for asset in APIDOCS_FILES:  # /docs and /redoc's scripts: no CDN
        assert f"privrl/server/ops/vendor/{asset}" in names, asset
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)
    code = (
        "import importlib.util as u, privrl, privrl.server.app, privrl.client.cli, privrl.lab;"
        f"assert privrl.__file__.startswith({str(target)!r}), privrl.__file__;"
        "from privrl.server.routes.dashboard import DASHBOARD;"
        f"assert all((DASHBOARD / n).is_file() for n in {DASHBOARD_FILES!r});"
        "assert not any(u.find_spec(m) for m in ('shared', 'server', 'client'));"
        "print(privrl.__version__)"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
