"""MkDocs hooks (mkdocs.yml `hooks:`): pages generated from the code and the measured data.

A page holds a marker such as `<!-- generated: cli -->`; at build time the marker is replaced
by what the code says now: the CLI reference from the real argparse parsers, the HTTP reference
from the server's OpenAPI document, the server settings from their pydantic model, and the
results' tables from the JSON their measurements wrote (`<!-- generated: table PATH -->`: any
table saved by scripts/results_table.py). Nothing generated is committed, so nothing can go
stale. tests/test_docs.py calls `render` directly.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority
from results_table import table_markdown  # scripts/ is on sys.path while MkDocs loads a hook

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
MARKER = re.compile(r"<!-- generated: ([a-z0-9-]+)(?: ([\w./-]+))? -->")
WIDTH = "100"  # argparse wraps help text at $COLUMNS


@contextmanager
def clean_environment() -> Iterator[None]:
    """Defaults only: no PRIVRL_* setting of the machine building the docs leaks into them."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("PRIVRL_") or k == "COLUMNS"}
    for key in saved:
        del os.environ[key]
    os.environ["COLUMNS"] = WIDTH
    try:
        yield
    finally:
        del os.environ["COLUMNS"]
        os.environ.update(saved)


def cli_reference() -> str:
    """Every `privrl` command's --help, from the parsers the command line really uses."""
    from privrl.client.cli import build_parser
    from privrl.client.cli_common import all_parsers

    with clean_environment():
        parsers = list(all_parsers(build_parser()))
        blocks = []
        for parser in parsers:
            level = "#" * min(2 + parser.prog.count(" ") - 1, 4) if " " in parser.prog else "##"
            blocks.append(f"{level} `{parser.prog}`\n\n```text\n{parser.format_help().rstrip()}"
                          "\n```\n")
    return "\n".join(blocks)


def openapi() -> dict[str, Any]:
    """The server's OpenAPI document with the default settings."""
    from privrl.server.app import create_app
    from privrl.server.settings import Settings

    with clean_environment():
        return create_app(Settings()).openapi()


def schema_name(schema: dict[str, Any]) -> str:
    """A short name for a request or response body's schema."""
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(schema_name(s) for s in schema[key])
    return schema.get("type", "object")


def prose(text: str) -> str:
    """A docstring as Markdown: brackets that are not a link's (`actions[h][s]`) stay literal."""
    return re.sub(r"\[([^\]]*)\](?!\()", r"\\[\1\\]", text.strip())


def http_reference() -> str:
    """Every route of the OpenAPI document: what it does, its parameters, body and answers."""
    doc = openapi()
    out = [f"API version {doc['info']['version']}.\n"]
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            out.append(f"## `{method.upper()} {path}`\n")
            if op.get("summary"):
                out.append(f"**{op['summary']}**\n")
            if op.get("description"):
                out.append(prose(op["description"]) + "\n")
            params = op.get("parameters", [])
            if params:
                out.append("| parameter | in | type | required | what |\n|---|---|---|---|---|")
                for p in params:
                    what = " ".join(p.get("description", "").split()).replace("|", "\\|")
                    out.append(f"| `{p['name']}` | {p['in']} | {schema_name(p.get('schema', {}))}"
                               f" | {'yes' if p.get('required') else 'no'} | {what} |")
                out.append("")
            body = op.get("requestBody", {}).get("content", {})
            for media, content in body.items():
                out.append(f"Body ({media}): `{schema_name(content.get('schema', {}))}`\n")
            answers = op.get("responses", {})
            if answers:
                out.append("| status | meaning |\n|---|---|")
                for status, answer in answers.items():
                    meaning = " ".join(answer.get("description", "").split()).replace("|", "\\|")
                    out.append(f"| {status} | {meaning} |")
                out.append("")
    schemas = doc.get("components", {}).get("schemas", {})
    out.append(f"## Schemas\n\nThe document defines {len(schemas)} schemas; a running server serves"
               " it at `/openapi.json`, with Swagger UI at `/docs` and ReDoc at `/redoc`.\n")
    for name, schema in schemas.items():
        props = schema.get("properties", {})
        fields = ", ".join(f"`{p}`" for p in props) or "—"
        out.append(f"- **{name}**: {fields}")
    return "\n".join(out) + "\n"


def settings_reference() -> str:
    """Every PRIVRL_* setting of the server, with its default and description."""
    from privrl.server.settings import Settings

    rows = ["| variable | default | what |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        default = "unset" if default is None else f"`{default}`"
        what = " ".join((field.description or "").split()).replace("|", "\\|")
        rows.append(f"| `PRIVRL_{name.upper()}` | {default} | {what} |")
    return "\n".join(rows) + "\n"


def load(name: str) -> Any:
    return json.loads((RESULTS / name).read_text())


def results_table(name: str) -> str:
    """A table that a script saved with `results_table.save_table` (PATH under docs/results)."""
    return table_markdown(load(name))


def speed_table() -> str:
    """`privrl bench --rlberry`: ms per replica-episode and the ratio to rlberry-scool."""
    data = load("bench.json")
    rlberry = data["rlberry"]["ms_per_episode"]
    rows = ["| variant | replicas | ms per replica-episode | × faster than rlberry-scool |"
            " noise alone would allow |", "|---|---|---|---|---|"]
    for row in data["rows"]:
        bound = row.get("x_rlberry_noise_bound")
        rows.append(f"| {row['variant']} | {row['replicas']} | {row['ms_per_replica_episode']:.4f}"
                    f" | {row['x_faster_than_rlberry']:.1f} | "
                    f"{'—' if bound is None else f'{bound:.1f}'} |")
    load_avg = ", ".join(f"{x:.1f}" for x in data["machine"]["load_average"])
    rows.append(f"\nrlberry-scool's `UCBVIAgent`: {rlberry:.3f} ms per episode. {data['world']},"
                f" {data['episodes']} episodes per timed run, {data['rounds']} interleaved rounds"
                f" (medians; each ratio is the median of the rounds' paired ratios),"
                f" {data['machine']['cpus']} CPUs, load average {load_avg}.")
    return "\n".join(rows) + "\n"


def http_table() -> str:
    """`privrl bench http`: the episode path against the /healthz ceiling."""
    data = load("bench-http.json")
    rows = ["| users | privacy | episodes/s | requests/s | errors | ceiling requests/s | ratio |"
            " server CPU ratio | claim p50/p99 ms | report p50/p99 ms |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for e in data["episodes"]:  # errors (refused or failed requests) are never in requests/s
        lat = e["latency_ms"]
        rows.append(
            f"| {e['concurrency']} | {e['privacy'].upper()} | {e['episodes_per_second']:.0f} |"
            f" {e['requests_per_second']:.0f} | {e['errors']:,} |"
            f" {e['ceiling_requests_per_second']:.0f} |"
            f" {e['ratio']:.0%} | {e['cpu_ratio']:.0%} |"
            f" {lat['claim']['p50_ms']:.1f}/{lat['claim']['p99_ms']:.1f} |"
            f" {lat['report']['p50_ms']:.1f}/{lat['report']['p99_ms']:.1f} |")
    rows.append(f"\n{data['generator_detail']}; {data['processes']} generator processes,"
                f" {data['seconds_per_phase']:g} s per phase, medians of {data['repeat']}"
                f" repetitions; the server counted {data['server_reported_total']:,} episodes,"
                f" the users were acknowledged {data['acknowledged_total']:,}.")
    return "\n".join(rows) + "\n"


def swarm_table() -> str:
    """1,000 concurrent users, 3,000 episodes per run (`privrl users --processes 4`)."""
    data = load("swarm-1000.json")
    rows = ["| run | acknowledged | refused | episodes/s | claim p50/p99 ms | report p50/p99 ms |"
            " `/healthz` p50/p99 ms | bytes per report | server peak RSS |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in data["runs"]:
        rows.append(
            f"| {r['privacy'].upper()} | {r['users_acked']:,} of {r['episodes']:,} |"
            f" {r['users_refused']} | {r['episodes_per_s']:.0f} |"
            f" {r['claim_ms_p50']:.0f}/{r['claim_ms_p99']:.0f} |"
            f" {r['report_ms_p50']:.0f}/{r['report_ms_p99']:.0f} |"
            f" {r['healthz_ms_p50']:.1f}/{r['healthz_ms_p99']:.1f} |"
            f" {r['bytes_per_report']:.0f} | {r['server_rss_peak_mb']:.0f} MB |")
    rows.append(f"\nMeasured at commit {data['commit']}: `{data['command']}`.")
    return "\n".join(rows) + "\n"


def policy_eval_table(path: str = "policy-eval/summary.json") -> str:
    """A `privrl policy-eval` sweep's summary.json: RMSE (mean over runs) per estimator and
    feature map, against m (the λ panel's fixed-λ cells left out)."""
    data = load(path)
    cells: dict[tuple[str, str], dict[int, float]] = {}
    for row in data["rows"]:
        if row.get("in_sweep") and not row.get("lambda_fixed"):
            cells.setdefault((row["estimator"], row["features"]), {})[row["m"]] = (
                row["rmse"]["mean"])
    ms = sorted({m for by_m in cells.values() for m in by_m})
    shown = [m for m in ms if float(m).is_integer() and str(m).rstrip("0") == "1"]
    head = ("| estimator, features | " + " | ".join(f"m = 10<sup>{len(str(m)) - 1}</sup>"
                                                     for m in shown) + " |")
    rows = [head, "|---" * (len(shown) + 1) + "|"]
    for (estimator, features), by_m in cells.items():
        values = " | ".join(f"{by_m[m]:.3g}" if m in by_m else "—" for m in shown)
        rows.append(f"| {estimator.upper()}, {features} | {values} |")
    spec = data["spec"]
    rows.append(f"\nRMSE against the exact values, mean over {spec['runs']} runs; ε = "
                f"{spec['epsilon']:g}, δ = {spec['delta']:g}, F_max = {spec['f_max']:g};"
                f" {spec['chain']}; {data['seconds']:.0f} s with {data['workers']} workers.")
    return "\n".join(rows) + "\n"


def attacker_outcome(counts: dict[str, Any]) -> Iterator[str]:
    """`{"claims": 256, "refused": {"429": 200}}` as "256 claims", "200 × 429"."""
    for key, value in counts.items():
        if isinstance(value, dict):
            yield from (f"{n} × {status}" for status, n in value.items())
        elif key.isdigit():
            yield f"{value} answers ({key})"
        elif value:
            yield f"{value} {key}"


def takeover_table() -> str:
    """An anonymous client trying to take a run over: the honest users' rate beside it."""
    data = load("takeover.json")
    rows = ["| attack | credentials | honest episodes/s: alone → beside → after | beside / alone |"
            " what the attacker got |", "|---|---|---|---|---|"]
    for measurement in data["measurements"]:
        for r in measurement["result"]["runs"]:
            got = ", ".join(attacker_outcome(r["attacker"]))
            rows.append(f"| {r['attack']} ({measurement['label']}) |"
                        f" {'yes' if r['credentials'] else 'no'} |"
                        f" {r['alone_eps']:.1f} → {r['beside_eps']:.1f} → {r['after_eps']:.1f} |"
                        f" {r['ratio']:.2f} | {got} |")
    rows.append(f"\nCommit {data['commit']}: `{data['command']}`. {data['what']}.")
    return "\n".join(rows) + "\n"


def stalled_table() -> str:
    """Stalled uploads (`scripts/load/stalled_uploads.py`): memory and closes, before and after."""
    rows = ["| target | code | RSS growth, MB: peak → after close → after gc → after trim |"
            " closed by the server (answers) | last close | `/healthz` p50 / p99 |",
            "|---|---|---|---|---|---|"]
    for r in load("stalled-uploads.json"):
        answers = ", ".join(f"{n} × {status}" for status, n in sorted(r["answers"].items()))
        last = "never" if r["closed_within_s"] is None else f"{r['closed_within_s']:g} s"
        rows.append(f"| {r['target']} | {r['code']} | {r['rss_peak_growth_mb']:,.0f} →"
                    f" {r['rss_growth_after_close_mb']:,.0f} → {r['rss_growth_after_gc_mb']:,.0f}"
                    f" → {r['rss_growth_after_trim_mb']:,.1f} | {r['closed_by_server']:,} of"
                    f" {r['connections']:,} ({answers}) | {last} | {r['healthz_p50_ms']:g} /"
                    f" {r['healthz_p99_ms']:g} ms |")
    return "\n".join(rows) + "\n"


def sybil_table() -> str:
    """Many addresses with one credential, and an address stalling a sequential run."""
    data = load("sybil.json")
    rows = ["| attack | run | attacker addresses | honest episodes/s: alone → beside → after |"
            " beside / mean of alone and after | what the attacker got |",
            "|---|---|---|---|---|---|"]
    for r in data["runs"]:
        run = ("credentials" if r["credentials"] else "anonymous") + (
            f", sequential, {r['claim_timeout']:g} s claims" if r["sequential"] else "")
        got = ", ".join(attacker_outcome(r["attacker"]))
        rows.append(f"| {r['attack']} | {run} | {r['attacker_addresses']} |"
                    f" {r['alone_eps']:.1f} → {r['beside_eps']:.1f} → {r['after_eps']:.1f} |"
                    f" {r['ratio_to_mean_of_alone_and_after']:.2f} | {got} |")
    rows.append(f"\nCommit {data['commit']}: `{data['command']}`. {data['what']}.")
    return "\n".join(rows) + "\n"


def frontier_thresholds(path: str = "frontier/frontier.json") -> str:
    """`privrl frontier`: each case's smallest ε that learns, per preset, with its interval."""
    from privrl.studies.frontier import threshold_table

    return table_markdown(threshold_table(load(path)))


def frontier_ablation(path: str = "frontier/frontier.json") -> str:
    """`privrl frontier`: each lever alone and together, one case per family at one ε."""
    from privrl.studies.frontier import ablation_table

    return table_markdown(ablation_table(load(path)))


def frontier_timing(path: str = "frontier/frontier.json") -> str:
    """`privrl frontier`: seconds per run and per replica-episode, and the full study's."""
    from privrl.studies.frontier import timing_table

    return table_markdown(timing_table(load(path)))


def suites_listing() -> str:
    """Every suite's worlds with their split, (S, A, H), cells and declared support (from
    `privrl.worlds.suites`, so the page shows the split the code uses)."""
    from privrl.worlds.suites import SUITES

    parts = []
    for suite in SUITES.values():
        split = suite.split()
        lines = [f"**`{suite.name}`**: {suite.description}.\n",
                 "| split | world | S | A | H | (s, a, s') cells | support cells | why tuning |",
                 "|---|---|---|---|---|---|---|---|"]
        for world in suite.worlds:
            mdp = world.build()
            support = "—" if mdp.support is None else f"{int(mdp.support.sum()):,}"
            lines.append(f"| {split[world.label]} | `{world.label}` | {mdp.S} | {mdp.A} |"
                         f" {mdp.H} | {mdp.S * mdp.A * mdp.S:,} | {support} |"
                         f" {world.used or '—'} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def suite_results(path: str) -> str:
    """`privrl frontier --suite`'s summary (its suite.json under docs/results)."""
    return table_markdown(load(path))


RENDERERS: dict[str, Callable[..., str]] = {
    "table": results_table,
    "cli": cli_reference,
    "http-api": http_reference,
    "settings": settings_reference,
    "results-speed": speed_table,
    "results-http": http_table,
    "results-swarm": swarm_table,
    "results-policy-eval": policy_eval_table,
    "results-takeover": takeover_table,
    "results-stalled": stalled_table,
    "results-sybil": sybil_table,
    "results-frontier": frontier_thresholds,
    "results-frontier-ablation": frontier_ablation,
    "results-frontier-timing": frontier_timing,
    "suites": suites_listing,
    "results-suite": suite_results,
}


def render(markdown: str) -> str:
    """`markdown` with every marker replaced by what it names; an unknown marker is an error."""
    def replace(match: re.Match[str]) -> str:
        name, argument = match.groups()
        if name not in RENDERERS:
            raise KeyError(f"unknown generated section {name!r} (known: {sorted(RENDERERS)})")
        return RENDERERS[name](*([argument] if argument else []))

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs event: fill the generated sections of a page."""
    return render(markdown)


@event_priority(100)  # before mkdocstrings' own `on_config`, which sets up griffe's search paths
def on_config(config: Any) -> Any:
    """Drop the `mkdocs` console script's bin/ folder from sys.path before the API reference is
    collected: bin/ also holds the `privrl` script, which griffe would take for the package
    (`python -m mkdocs` never has bin/ there). MkDocs restores sys.path after importing a hook,
    so this cannot happen at import."""
    scripts = os.path.dirname(os.path.abspath(sys.argv[0]))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != scripts]
    return config
