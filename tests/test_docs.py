"""The documentation site: every `privrl` command in the docs and the README parses with the real
command-line parser, the generated pages render from the code and the measured data, and (slow)
`mkdocs build --strict` passes: no broken link, no missing page."""

from __future__ import annotations

import fnmatch
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import support.toy_algorithm  # noqa: F401  (registers toy-random, which the plug-in guide runs)
from privrl.client.cli import build_parser
from privrl.client.cli_common import all_parsers
from support.docs_hooks import load_hooks
from support.vendored import REPO_ROOT

DOCS = REPO_ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md")) + [REPO_ROOT / "README.md"]
BLOCK = re.compile(r"^```(bash|sh|console|)\n(.*?)^```", re.S | re.M)
LOOP = re.compile(r"for (\w+) in (\S+)")
REDIRECT = re.compile(r"\s(?:\d?>>?|<)\s*\S+|\s\d>&\d")
ENV_VAR = re.compile(r"\$\{?[A-Za-z_]+\}?")


def shell_lines(block: str, shell: bool) -> list[str]:
    """The block's command lines, continuations joined, comments removed, a loop's variable set
    to its first value. In a block of output (no language, or `console`: commands and what they
    print) only prompted lines (`$ `) count."""
    text = re.sub(r"\\\n\s*", " ", block)
    loops = dict(LOOP.findall(text))
    lines = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        elif not shell:
            continue
        for name, value in loops.items():
            line = re.sub(rf"\${name}\b", value, line)
        if line and not line.startswith("#"):
            lines.append(REDIRECT.sub("", line))
    return lines


def privrl_commands(line: str) -> list[list[str]]:
    """Every `privrl ...` invocation in a shell line: plain, after `&&`/`;`/`|`, or in `$(...)`."""
    inner = re.findall(r"\$\((privrl [^)]*)\)", line)
    outer = re.sub(r"\s+#.*$", "", re.sub(r"\$\((privrl [^)]*)\)", "X", line))
    commands = []
    for text in [*inner, outer]:
        for part in re.split(r"&&|\|\||;|\||&(?!\S)", text):
            part = part.strip()
            if part.startswith("privrl ") or re.match(r"^[A-Z_]+=\S* privrl ", part):
                commands.append(part[part.index("privrl "):])
    parsed = []
    for command in commands:
        command = ENV_VAR.sub("1", command)
        words = shlex.split(command)
        if words[:1] == ["privrl"]:
            parsed.append(words[1:])
    return parsed


def documented_commands() -> list[tuple[str, list[str]]]:
    found = []
    for page in PAGES:
        for language, block in BLOCK.findall(page.read_text()):
            for line in shell_lines(block, shell=language not in ("", "console")):
                if "..." in line or "…" in line:  # an elided example, not a command
                    continue
                for argv in privrl_commands(line):
                    found.append((f"{page.relative_to(REPO_ROOT)}: privrl {shlex.join(argv)}",
                                  argv))
    return found


COMMANDS = documented_commands()


def test_the_docs_show_the_main_commands() -> None:
    """The extraction sees the commands (a broken pattern would make the next test vacuous)."""
    subcommands = {argv[0] for _, argv in COMMANDS if argv}
    assert {"demo", "run", "plot", "serve", "runs", "users", "evaluate", "ledger", "audit",
            "policy-eval", "bench"} <= subcommands, subcommands
    assert len(COMMANDS) >= 40


@pytest.mark.parametrize("where,argv", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_every_documented_command_parses(where: str, argv: list[str],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The real parser accepts it: known subcommand, known flags, valid values."""
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{where}: refused (exit {exc.code}): {capsys.readouterr().err.strip()}")
    assert not extra, f"{where}: unknown arguments {extra}"
    assert callable(args.handler)


def test_generated_pages_render_from_the_code_and_the_data() -> None:
    hooks = load_hooks()
    cli = hooks.render("<!-- generated: cli -->")
    progs = [p.prog for p in all_parsers(build_parser())]
    assert {"privrl", "privrl run", "privrl audit server", "privrl runs create"} <= set(progs)
    for prog in progs:  # every command and subcommand: a heading and its usage
        assert f"`{prog}`\n\n```text\nusage: {prog}" in cli, prog
    http = hooks.render("<!-- generated: http-api -->")
    assert "## `POST /v1/runs/{run_id}/claims`" in http and "| 429 |" in http
    settings = hooks.render("<!-- generated: settings -->")
    assert "`PRIVRL_CLAIM_TIMEOUT` | `30.0`" in settings
    for name in ("speed", "http", "swarm", "takeover", "sybil", "policy-eval"):
        table = hooks.render(f"<!-- generated: results-{name} -->")
        assert table.count("\n|") >= 3, name  # a header, a rule and rows
    with pytest.raises(KeyError, match="unknown generated section"):
        hooks.render("<!-- generated: nothing-by-this-name -->")


def test_every_generated_marker_in_the_docs_is_known() -> None:
    hooks = load_hooks()
    used = {name for page in PAGES for name, _ in hooks.MARKER.findall(page.read_text())}
    assert used == set(hooks.RENDERERS)  # none unknown, none unused


TABLES = sorted({path for page in PAGES for path in
                 re.findall(r"<!-- generated: table ([\w./-]+) -->", page.read_text())})


@pytest.mark.parametrize("path", TABLES)
def test_every_saved_table_renders_with_its_command(path: str) -> None:
    """A saved table has rows as wide as its columns and renders with the command that wrote it
    (which saves it where the page reads it)."""
    hooks = load_hooks()
    data = hooks.load(path)
    assert data["rows"] and {len(r) for r in data["rows"]} == {len(data["columns"])}
    assert f"--json docs/results/{path}" in data["command"]
    table = hooks.render(f"<!-- generated: table {path} -->")
    assert table.count("\n|") == 1 + len(data["rows"]) and f"`{data['command']}`" in table


def test_a_saved_table_renders_its_cells_by_their_column_format() -> None:
    hooks = load_hooks()
    data = {"command": "python scripts/x.py --json x.json", "commit": "abc1234",
            "load_average": [1.0, 2.0, 3.0],
            "columns": [{"title": "run", "format": ""}, {"title": "regret", "format": ".1f"},
                        {"title": "learns", "format": ""}, {"title": "ε", "format": "sci"},
                        {"title": "n", "format": ","}],
            "rows": [["jdp | pooled", [3736.04, 51.26], True, 9999.9999, 50000],
                     ["ldp", None, False, 4.627e6, 3]]}
    lines = hooks.table_markdown(data).splitlines()
    assert lines[:4] == ["| run | regret | learns | ε | n |", "|---|---|---|---|---|",
                         "| jdp \\| pooled | 3736.0 ± 51.3 | yes | 10<sup>4</sup> | 50,000 |",
                         "| ldp | — | no | 4.63·10<sup>6</sup> | 3 |"]
    assert "`python scripts/x.py --json x.json`" in lines[5]
    assert "abc1234" in lines[5] and "1.0, 2.0, 3.0" in lines[5]


FIGURE_CELL = re.compile(r"^[*_~≈<>≤≥(]*[-−+]?\d")  # a cell that starts with a number


def typed_figure_rows(markdown: str) -> list[str]:
    """Markdown table rows (outside code blocks) with a cell that is a number: a figure typed
    into the page rather than generated. Tables of words, flags and test names are not."""
    text = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return [line for line in text.splitlines()
            if line.startswith("|") and not re.fullmatch(r"[|\s:-]+", line)
            and any(FIGURE_CELL.match(c.strip()) for c in line.strip().strip("|").split("|"))]


def test_no_page_types_a_table_of_figures() -> None:
    """Tables of measured figures come from a generated marker, never typed into a page."""
    hooks = load_hooks()
    results = DOCS / "results" / "index.md"
    assert typed_figure_rows(hooks.render(results.read_text()))  # the check sees real tables
    assert typed_figure_rows("| LDP ε = 1 | 167,804 ± 505 | 100.1% |\n")
    assert not typed_figure_rows("| claim | `tests/test_x.py::test_1` |\n|---|---|\n")
    assert {str(p.relative_to(REPO_ROOT)): rows for p in PAGES
            if (rows := typed_figure_rows(p.read_text()))} == {}


FENCE = re.compile(r"^```.*?^```", re.S | re.M)
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
PATH = re.compile(r"[\w.*-]+(?:/[\w.*-]+)*/?", re.ASCII)
EXTENSIONS = {"cfg", "css", "csv", "db", "html", "js", "json", "md", "npz", "png", "py", "sh",
              "svg", "toml", "txt", "yaml", "yml"}
OUTPUT_NAMES = {"summary.json", "frontier.json", "frontier.png"}  # what a run or study writes
PLACEHOLDERS = {"DIR", "FILE"}  # `DIR/summary.json`, `FILE.npz`


def named_paths(page: Path) -> list[str]:
    """The file paths a page names in code spans (outside code blocks) and relative links."""
    text = FENCE.sub("", page.read_text())
    names = []
    for span in SPAN.findall(text):
        path, _, test = span.partition("::")  # tests/test_x.py::test_y
        if not PATH.fullmatch(path):
            continue
        last = path.rstrip("/").rsplit("/", 1)[-1]
        a_file = last.rpartition(".")[2] in EXTENSIONS and not last.startswith(".")
        a_folder = "/" in path and (path.endswith("/") or (REPO_ROOT / path.split("/")[0]).exists())
        if a_file or a_folder:
            names.append(span)
    base = page.parent.relative_to(REPO_ROOT)
    names += [str(base / link) for link in LINK.findall(text) if ":" not in link]
    return names


def is_output(path: str) -> bool:
    """Written when a command runs: under a folder the .gitignore anchors at the root
    (`results/`), ignored by name (`*.db`), a run's own file, or a placeholder's."""
    parts = path.rstrip("/").split("/")
    ignored = [(line.strip("/"), parts[:1] if line[0] == "/" else parts)  # anchored: at the root
               for line in (REPO_ROOT / ".gitignore").read_text().split()]
    return (any(fnmatch.fnmatch(part, pattern) for pattern, where in ignored for part in where)
            or "/" not in path and path in OUTPUT_NAMES
            or any(part.split(".")[0] in PLACEHOLDERS for part in parts))


def test_every_file_the_docs_name_exists_in_the_checkout() -> None:
    """The pages, the README and CONTRIBUTING.md name files by their path in the checkout
    (`shared/algorithms/base.py`, never the installed `privrl/algorithms/base.py`), and a
    README read on a forge needs its relative links to exist.

    Checked: each relative link, from the page's folder, and each code span outside code blocks
    that is a path: a file name with one of EXTENSIONS (`pyproject.toml`, `scripts/x.py`), or
    a name with a `/` that ends in `/` or starts at a top-level entry (`docs/results/`); a
    `tests/x.py::test_y` names its test too. Not paths: anything with a space, `=`, `$` or
    `://`, names that start with `/` (routes such as `/healthz`) or `~`, dotted module names
    (`privrl.algorithms.base`), a bare extension (`.npz`). Outputs may be missing (`is_output`).
    """
    missing, checked = [], 0
    for page in [*PAGES, REPO_ROOT / "CONTRIBUTING.md"]:
        for name in named_paths(page):
            path, _, test = name.partition("::")
            checked += 1
            found = any(REPO_ROOT.glob(path.rstrip("/"))) if "*" in path else (
                REPO_ROOT / path).exists()
            if test and found:  # a test's id: its module defines the test (or its class)
                name = re.escape(re.split(r"::|\[", test)[0])
                found = re.search(rf"^\s*(?:async def|def|class) {name}\b",
                                  (REPO_ROOT / path).read_text(), re.M) is not None
            if not found and not is_output(path):
                missing.append(f"{page.relative_to(REPO_ROOT)}: {name}")
    assert checked > 200  # the spans and links are found at all
    assert missing == []


def test_every_docs_path_the_code_names_exists() -> None:
    """A docs page or data file named in code, scripts or tests (`docs/explanation/ledger.md`)
    exists: pages move, and a dangling name points a user nowhere."""
    named = set()
    for folder in ("shared", "server", "client", "scripts", "tests"):
        for path in (REPO_ROOT / folder).rglob("*.py"):
            named |= set(re.findall(r"\bdocs/[\w./-]+\.(?:md|png|json)\b", path.read_text()))
    assert "docs/results/index.md" in named  # the demo names it
    assert sorted(n for n in named if not (REPO_ROOT / n).exists()) == []


HOW_TO_PYTHON = [(f"{page.name}:{i}", code) for page in sorted((DOCS / "how-to").glob("*.md"))
                 for i, code in enumerate(re.findall(r"^```python\n(.*?)^```", page.read_text(),
                                                     re.S | re.M))
                 if "--8<--" not in code]  # an included file is tested where it lives


@pytest.mark.parametrize("where,code", HOW_TO_PYTHON, ids=[w for w, _ in HOW_TO_PYTHON])
def test_the_how_to_python_examples_run(where: str, code: str, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(code, where, "exec"), {})  # noqa: S102


def test_the_npz_example_is_the_world_the_guide_runs(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The guide's ring.npz loads as a valid world of its stated shape."""
    from privrl.worlds.registry import make

    monkeypatch.chdir(tmp_path)
    ring = next(code for where, code in HOW_TO_PYTHON if "ring.npz" in code)
    exec(compile(ring, "worlds.md", "exec"), {})  # noqa: S102
    mdp = make(str(tmp_path / "ring.npz"), horizon=10)
    assert (mdp.S, mdp.A, mdp.H) == (3, 2, 10)


def test_every_page_is_in_the_navigation() -> None:
    nav = (REPO_ROOT / "mkdocs.yml").read_text()
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert {p for p in pages if p not in nav} == set()


@pytest.mark.slow  # runs mkdocs as a process
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a broken link, a missing page or anchor, a docstring that does
    not render, or a generated section that fails is an error. It runs the `mkdocs` console
    script, as the docs say, whose bin/ folder also holds the `privrl` script."""
    mkdocs = Path(sys.executable).parent / "mkdocs"
    done = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()
