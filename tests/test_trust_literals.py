"""A trust boundary is not a string (issue 41 part 2): outside `shared/trust/` and the tests, no
code names a boundary by its name; it asks the registry (`privrl.trust`: `default`, `baseline`,
`central_boundary`, `local_boundary`, `find`) or what a boundary declares (`private`,
`counters`, `local_noise`, `cohorts`, its label and colour). The scan reads the package's source
with `ast`: a string constant equal to a built-in boundary's name is a finding, in any file
(even the frontier's rows ask the registry for the boundaries they measure)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from privrl import trust

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("shared", "server", "client")
EXEMPT = "shared/trust/"  # the boundaries themselves and their registry
# boundary names that are also plain words in code ('none': no errors, a CSP source, a stall
# that never ended): a mode only on a line that speaks of privacy, a boundary or a mode
WORDS = {"none"}
MODE_CONTEXT = re.compile(r"privacy|boundary|\bmode\b", re.IGNORECASE)


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are statements (docstrings, comments as strings):
    their examples show a user naming a boundary, which is what users do."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}


def mode_literals(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every string constant in `source` that names a boundary in `names` as
    a mode."""
    tree = ast.parse(source)
    lines = source.splitlines()
    skip = docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and node.value in names and id(node) not in skip):
            line = lines[node.lineno - 1]
            if node.value not in WORDS or MODE_CONTEXT.search(line):
                found.append((node.lineno, node.value))
    return sorted(found)


def package_files() -> list[str]:
    files = [p.relative_to(ROOT).as_posix() for package in PACKAGES
             for p in sorted((ROOT / package).rglob("*.py"))]
    return [f for f in files if not f.startswith(EXEMPT)]


def test_the_scan_finds_a_mode_literal_and_passes_plain_words() -> None:
    names = set(trust.BUILTIN)
    assert mode_literals('if config.privacy == "ldp":\n    pass\n', names) == [(1, "ldp")]
    assert mode_literals('RunConfig(privacy="none")\n', names) == [(1, "none")]
    assert mode_literals('x = cfg.get("privacy", "none")\n', names) == [(1, "none")]
    assert mode_literals('modes = ("jdp", "secagg")\n', names) == [(1, "jdp"), (1, "secagg")]
    assert mode_literals('errors = ", ".join(found) or "none"\n', names) == []
    assert mode_literals('"""privrl.simulate(privacy="jdp")"""\n', names) == []
    assert mode_literals('privacy = trust.central_boundary().name\n', names) == []


def test_no_boundary_is_named_outside_the_trust_package() -> None:
    """No literal is left; a new `if config.privacy == "ldp"` in server/ fails here, naming
    its file and line."""
    names = set(trust.BUILTIN)
    files = package_files()
    assert "server/routes/runs.py" in files and "shared/config.py" in files
    assert not any(f.startswith(EXEMPT) for f in files)
    found = [f"{path}:{line}: {name!r}" for path in files
             for line, name in mode_literals((ROOT / path).read_text(), names)]
    assert not found, ("a trust boundary named by its string; ask `privrl.trust` or what the"
                       " boundary declares:\n" + "\n".join(found))


def test_the_registry_answers_by_what_a_boundary_declares() -> None:
    """The queries the package uses instead of names: each finds the built-in that declares
    what it asks, whatever the names."""
    assert trust.default() is trust.get(trust.DEFAULT) and trust.default().private
    assert not trust.baseline().private
    central = trust.central_boundary()
    assert central.private and central.counters and not central.local_noise
    local = trust.local_boundary()
    assert local is not None and local.private and local.local_noise
    assert local.cohort_size == 1 and not local.cohorts
    cohort = trust.cohort_boundary()  # secure aggregation
    assert cohort is not None and cohort.private and cohort.cohorts and cohort.local_noise
    assert trust.find(private=False, counters=True) is None
    assert len({trust.baseline(), central, local}) == 3
