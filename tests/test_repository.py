"""The repository carries everything its tests read (a user's clone has nothing beside it), and
its tests' layout: no test module imports another (shared helpers live in tests/support/).

The real proof is `.ci/run`, which runs the suite from a copy of HEAD in a fresh temporary
directory; these checks catch the vendored data going missing or drifting.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest
from support.vendored import COMPOSE_SCHEMA, REPO_ROOT

TESTS = REPO_ROOT / "tests"
DATA = TESTS / "data"


def test_compose_schema_is_vendored_inside_the_repository() -> None:
    schema_path = COMPOSE_SCHEMA.resolve()
    assert schema_path.is_relative_to(REPO_ROOT), f"{COMPOSE_SCHEMA} is outside {REPO_ROOT}"
    assert COMPOSE_SCHEMA.resolve() == (DATA / "compose-spec.json").resolve()
    schema = json.loads(COMPOSE_SCHEMA.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft-07/schema"
    assert schema["$id"] == "compose_spec.json"
    assert schema["title"] == "Compose Specification"
    assert {"services", "volumes", "networks"} <= set(schema["properties"])
    jsonschema.Draft7Validator.check_schema(schema)


def test_vendored_schema_is_the_unmodified_copy_its_readme_names() -> None:
    readme = (DATA / "README.md").read_text()
    assert "compose-spec/compose-spec" in readme and "Apache License 2.0" in readme
    recorded = re.search(r"SHA-256 `([0-9a-f]{64})`", readme)
    assert recorded, "tests/data/README.md must record the schema's SHA-256"
    assert hashlib.sha256(COMPOSE_SCHEMA.read_bytes()).hexdigest() == recorded.group(1)
    assert "Apache License" in (DATA / "LICENSE-compose-spec").read_text()


def imported_modules(path: Path) -> set[str]:
    """The top-level names of every absolute import in a Python file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_test_module_imports_another() -> None:
    """Every module directly in tests/ (test_*.py, conftest.py) is imported by pytest alone;
    helpers that several tests share live in the tests/support/ package."""
    test_modules = {path.stem for path in TESTS.glob("*.py")}
    assert {"conftest", "test_repository"} <= test_modules
    assert (TESTS / "support" / "__init__.py").is_file()
    offenders = {
        str(path.relative_to(TESTS)): sorted(imported_modules(path) & test_modules)
        for path in sorted(TESTS.rglob("*.py"))
    }
    assert {name: mods for name, mods in offenders.items() if mods} == {}
    assert "support" in imported_modules(TESTS / "conftest.py")  # the check sees imports


GUARDED = '''
import multiprocessing, os, subprocess, sys
import pytest

def test_popen():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_caught():
    try:
        os.system("true")
    except Exception:
        pass

def test_spawn():
    process = multiprocessing.get_context("spawn").Process(target=print)
    process.start()
    process.join()

def test_fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)

@pytest.mark.slow
def test_marked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_in_process():
    assert sum([1, 2]) == 3
'''


@pytest.mark.slow  # runs pytest (and its xdist workers) as processes
@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_test_not_marked_slow_that_starts_a_process_fails(
        pytester: pytest.Pytester, workers: list[str]) -> None:
    """The guard in conftest.py, on this repository's conftest and support package: every way to
    start a process fails a test not marked slow (even when the test catches the error); a
    marked test and an in-process one pass, under xdist too."""
    shutil.copy(TESTS / "conftest.py", pytester.path / "conftest.py")
    shutil.copytree(TESTS / "support", pytester.path / "support")
    pytester.makeini("[pytest]\nmarkers =\n    slow: starts a process\n")
    pytester.makepyfile(test_probe=GUARDED)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rf", "-vv", *workers)
    result.assert_outcomes(passed=2, failed=4)
    failed = [ln for ln in result.outlines if ln.startswith("FAILED")]
    assert sorted(ln.split("::")[1].split()[0] for ln in failed) == [
        "test_caught", "test_fork", "test_popen", "test_spawn"]
    assert all("mark this test slow" in ln for ln in failed), failed


# a path out of the repository, or a spec file that lives beside it (not in it), or a section of
# such a file or of a design document outside the repository: the papers are cited by title,
# authors and year instead, and the design is docs/explanation/architecture.md
OUTSIDE = re.compile(r"\.\./shared|shared/tools/|/work/|shared/spec|\b(?:linear-luyo|linear-mdp-ngo"
                     r"|linear-mixture-zhou|policy-evaluation-balle|tabular-dp-ucbvi)\.md\b"
                     r"|\b[Ss]pecs?\b[^.\n]{0,3}§|\bspec's\b|\bspecs'\s"
                     # a bare section sign: a section of a paper names its authors or year
                     r"|(?<!al\. )(?<!\d\d\d\d )(?<!paper's )§"
                     r"|ARCHITECTURE|\bpapers/|the design's")


def test_nothing_in_the_repository_refers_to_files_outside_it() -> None:
    texts = [REPO_ROOT / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md",
                                           "Dockerfile", "docker-compose.yml", "mkdocs.yml")]
    texts += [p for p in (REPO_ROOT / "scripts").rglob("*") if p.is_file()
              and "__pycache__" not in p.parts]
    texts += sorted((REPO_ROOT / "docs").rglob("*.md"))
    for folder in ("shared", "server", "client", "tests", ".ci"):
        texts += [p for p in (REPO_ROOT / folder).rglob("*") if p.suffix in {".py", ""}
                  and p.is_file() and "__pycache__" not in p.parts]
    hits = [f"{p.relative_to(REPO_ROOT)}:{n}: {line.strip()}"
            for p in texts if p.exists() and p != Path(__file__)
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
            if OUTSIDE.search(line)]
    assert not hits, "\n".join(hits)


def test_the_licence_is_mit_and_the_package_says_so() -> None:
    licence = (REPO_ROOT / "LICENSE").read_text()
    assert licence.startswith("MIT License") and "the privrl authors" in licence
    assert re.search(r'^license = (\{text = )?"MIT"', (REPO_ROOT / "pyproject.toml").read_text(),
                     re.M)


# the story of a development machine, and changelog wording, belong in git and CHANGELOG.md
STORY = re.compile(r"development machine|other engineers|installed here|on this machine|this "
                   r"branch|\bas before\b|the old (?:fixed )?bound|\bissue \d+|^#+ Later\b",
                   re.I | re.M)


def test_the_readme_is_short_and_the_docs_tell_no_story_of_a_machine() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
    hits = [f"{p.relative_to(REPO_ROOT)}: {m.group(0)!r}" for p in pages
            for m in STORY.finditer(p.read_text())]
    assert not hits, "\n".join(hits)
