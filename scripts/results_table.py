"""A measured table as JSON, and that JSON as Markdown: the one format of the docs' results.

A script that measures saves `{"command", "commit", "load_average", "columns", "rows"}` with
`save_table`; a page shows it with the marker `<!-- generated: table PATH -->` (PATH under
docs/results/), which scripts/docs_hooks.py fills with `table_markdown`. A column is a title and
a format spec (Python's, or `sci`: 4 significant digits, powers of ten from 10⁴ on); a cell is
a string, a number, a [mean, std] pair, a bool or null.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privrl.provenance import save_measured


def save_table(path: str | Path, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]],
               **about: Any) -> None:
    """Write the table with the command line that measured it, the commit and the load average."""
    save_measured(path, {**about,
                         "columns": [{"title": title, "format": spec} for title, spec in columns],
                         "rows": [list(row) for row in rows]})


def scientific(value: float) -> str:
    """4 significant digits; from 10⁴ on as 3·10⁴ (mantissa dropped when it is 1)."""
    if not math.isfinite(value) or value == 0:
        return format(value, ".4g")
    mantissa, exponent = f"{value:.2e}".split("e")  # 9999.99999 is 1.00e+04: rounded first
    if int(exponent) < 4:
        return format(value, ".4g")
    mantissa = mantissa.rstrip("0").rstrip(".")
    power = f"10<sup>{int(exponent)}</sup>"
    return power if mantissa == "1" else f"{mantissa}·{power}"


def cell(value: Any, spec: str) -> str:
    """One cell: a [mean, std] pair as "mean ± std", a bool as yes/no, null as a dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return " ± ".join(cell(v, spec) for v in value)
    if isinstance(value, float | int):
        return scientific(value) if spec == "sci" else format(value, spec)
    return str(value).replace("|", "\\|")


def table_markdown(data: dict[str, Any]) -> str:
    """The table, then the command that measured it, its commit and the machine's load."""
    specs = [c["format"] for c in data["columns"]]
    lines = ["| " + " | ".join(c["title"] for c in data["columns"]) + " |",
             "|" + "---|" * len(specs)]
    lines += ["| " + " | ".join(cell(v, s) for v, s in zip(row, specs, strict=True)) + " |"
              for row in data["rows"]]
    load = ("load average " + ", ".join(f"{x:.1f}" for x in data["load_average"])
            if data.get("load_average") else "load average not recorded")
    lines.append(f"\n*Generated* from the JSON that `{data['command']}` wrote (commit"
                 f" {data['commit']}, {load}).")
    if data.get("note"):
        lines.append(data["note"])
    return "\n".join(lines) + "\n"
