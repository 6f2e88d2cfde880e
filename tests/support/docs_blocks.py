"""The code blocks of a docs page as one shell session, which `tests/test_docs_commands.py` runs.

Conventions (CONTRIBUTING.md, "Docs commands are tests"):

* ```` ```bash ````, ```` ```sh ```` and ```` ```python ```` blocks run as written, in page order,
  in one bash session (a Python block through `python -`, in the session's folder);
* a ```` ```console ```` block holds commands after `$ ` (a line ending in `\\` continues on the
  next) and, under each, what it prints on stdout: the test runs the command and compares, ids
  and numbers aside (a command given `--seed` prints the same numbers: only durations aside);
* `<!-- docs-test: skip REASON -->` on the line before a block keeps it from running;
  `<!-- docs-test: live REASON -->` before a console block of `privrl audit` output compares its
  check lines by name only (ok or skip: a run that moves between readings), never a finding,
  and masks what is in parentheses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(r"(?:^<!-- docs-test: (?P<mark>skip|live) (?P<why>[^\n]+?) -->\n)?"
                   r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```[ \t]*$", re.S | re.M)
RUNS = {"bash", "sh", "console", "python"}
DOCKER = re.compile(r"^\s*(?:\$ )?(?:[A-Z_]+=\S*\s+)*docker\b", re.M)
ELISION = "..."  # a line of shown output that stands for any number of lines


@dataclass
class Command:
    """One `$ ` command of a console block and the stdout lines the page shows under it."""

    text: str
    shown: list[str] = field(default_factory=list)


@dataclass
class Block:
    """A fenced block of a page: where it is, what it holds, and why it is not run (if so)."""

    page: Path
    line: int
    lang: str
    body: str
    span: tuple[int, int]  # the body's offsets in the page
    skip: str | None = None
    live: str | None = None  # why its checks' status varies (an audit of a run that moves)

    @property
    def runs(self) -> bool:
        return self.lang in RUNS and self.skip is None and "--8<--" not in self.body

    @property
    def docker(self) -> bool:
        return self.lang in RUNS and DOCKER.search(self.body) is not None

    def commands(self) -> list[Command]:
        """A console block's commands, each with the output shown under it."""
        commands: list[Command] = []
        continued = False
        for line in self.body.splitlines():
            if continued:
                commands[-1].text += "\n" + line
            elif line.startswith("$ "):
                commands.append(Command(line[2:]))
            elif commands:
                commands[-1].shown.append(line)
            elif line.strip():
                raise ValueError(f"{self.where}: output before the first `$ ` command")
            continued = (line.startswith("$ ") or continued) and line.endswith("\\")
        return commands

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of the page, in order."""
    text = page.read_text()
    return [Block(page, text.count("\n", 0, m.start("lang")) + 1, m["lang"], m["body"],
                  m.span("body"), *((m["why"], None) if m["mark"] == "skip" else
                                    (None, m["why"])))
            for m in FENCE.finditer(text)]


NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
HEX_ID = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b")


DURATION = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms)\b")
CHECK = re.compile(r"^(\s+)(?:ok|skip)\s+(\S+)\s.*$")  # an audit's check line, not a finding


def normalise(line: str, seeded: bool = False, live: bool = False) -> str:
    """A line with what varies from run to run masked: ids, numbers (a seeded command's: only
    durations), column padding; in a live audit, whether a check passed or was skipped (a
    finding still differs) and what is in parentheses (where else a value shows up)."""
    if live:
        line = CHECK.sub(r"\1check \2", line)
        while (inner := re.sub(r"\([^()]*\)", "<>", line)) != line:  # nested ones too
            line = inner
    line = HEX_ID.sub("ID", line)
    line = DURATION.sub("T", line) if seeded else NUMBER.sub("N", line)
    return " ".join(line.split())


def matches(shown: list[str], actual: list[str], seeded: bool = False, live: bool = False
            ) -> bool:
    """The shown lines equal the actual ones once normalised; a shown `...` line stands for any
    number of actual lines."""
    shown = [normalise(s, seeded, live) for s in shown]
    actual = [normalise(a, seeded, live) for a in actual]
    while shown and not shown[-1]:
        shown.pop()
    while actual and not actual[-1]:
        actual.pop()

    def match(i: int, j: int) -> bool:
        if i == len(shown):
            return j == len(actual)
        if shown[i] == ELISION:
            return any(match(i + 1, k) for k in range(j, len(actual) + 1))
        return j < len(actual) and shown[i] == actual[j] and match(i + 1, j + 1)

    return match(0, 0)


def script(page_blocks: list[Block], outputs: Path) -> str:
    """The page's runnable blocks as one bash script: console commands write their stdout to
    `outputs/B-C` (block B, command C), and a failing command names its block and stops."""
    parts = ["set -euo pipefail",
             "trap 'echo \"docs-test: block at line $DOCS_TEST_LINE failed (exit $?):"
             " $BASH_COMMAND\" >&2' ERR"]
    for b, block in enumerate(page_blocks):
        if not block.runs:
            continue
        parts.append(f"DOCS_TEST_LINE={block.line}; echo '### docs-test: line {block.line}' >&2")
        if block.lang == "python":
            parts.append(f"python - <<'DOCS_TEST_PYTHON'\n{block.body}DOCS_TEST_PYTHON")
        elif block.lang == "console":
            for c, command in enumerate(block.commands()):
                parts.append(f"{{ {command.text}\n}} > {outputs / f'{b}-{c}'}")
        else:
            parts.append(block.body)
    return "\n".join(parts) + "\n"


def with_output(block: Block, outputs: Path, b: int) -> str:
    """The console block's body with each command's shown output replaced by what it printed."""
    lines = []
    for c, command in enumerate(block.commands()):
        lines.append("$ " + command.text)
        lines += (outputs / f"{b}-{c}").read_text().rstrip("\n").splitlines()
    return "\n".join(lines) + "\n"
