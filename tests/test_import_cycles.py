"""No import cycles in privrl, hidden or not: a static import graph of shared/, server/ and
client/ (module-level imports and imports inside functions; not those under TYPE_CHECKING) has
no cycle. Read with `ast`, no module is imported."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOMES = {"shared": "privrl", "server": "privrl.server", "client": "privrl.client"}


def modules(root: Path, homes: Mapping[str, str]) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under each home folder."""
    out = {}
    for folder, package in homes.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((package, *parts))] = path
    return out


def _type_checking(node: ast.If) -> bool:
    """`if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`): never run."""
    test = node.test
    return getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING"


def _imported(node: ast.AST, name: str, is_package: bool, known: set[str]) -> Iterator[str]:
    """The modules an import statement imports (a `from X import Y` of a module Y counts as X.Y)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = name.split(".")[: len(name.split(".")) - node.level + is_package]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            yield sub if sub in known else base


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module of `known` that importing `name` may import, at once or when a function runs:
    the imported module and the packages above it that `name` is not inside of."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    todo: list[ast.AST] = [ast.parse(path.read_text())]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _type_checking(node):
            todo.extend(node.orelse)
            continue
        for module in _imported(node, name, is_package, known):
            parts = module.split(".")
            for i in range(1, len(parts) + 1):
                target = ".".join(parts[:i])
                inside = name == target or name.startswith(target + ".")
                if target in known and not inside:
                    found.add(target)
        todo.extend(ast.iter_child_nodes(node))
    return found


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def import_cycles(root: Path, homes: Mapping[str, str]) -> list[list[str]]:
    """The import cycles among the modules under `root`'s home folders."""
    known = modules(root, homes)
    names = set(known)
    return cycles({name: imports(name, path, names) for name, path in known.items()})


def test_privrl_has_no_import_cycle_hidden_or_not() -> None:
    assert import_cycles(REPO, HOMES) == []


def test_a_cycle_hidden_in_a_function_is_found(tmp_path: Path) -> None:
    """The check sees through function-level imports and `from . import`, not TYPE_CHECKING."""
    pkg = tmp_path / "lib"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import b\n")
    (pkg / "config.py").write_text("def f():\n    from .sub import b\n    return b\n")
    (pkg / "sub" / "b.py").write_text("from ..config import f\n")
    (pkg / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from .config import f\n")
    (pkg / "plain.py").write_text("from .typed import TYPE_CHECKING\n")
    assert import_cycles(tmp_path, {"lib": "lib"}) == [["lib.config", "lib.sub", "lib.sub.b"]]
    (pkg / "config.py").write_text("def f():\n    return 1\n")
    assert import_cycles(tmp_path, {"lib": "lib"}) == []
