"""Where a server's samples went: `python scripts/load/pyspy_breakdown.py RAW...`.

RAW is `py-spy record -f raw` output (collapsed stacks). Samples of threads parked in epoll,
`Condition.wait` or the COMMIT's fsync are dropped; each remaining sample goes to the first
category whose pattern matches any of its frames (work first, plumbing last). Prints a
Markdown table of shares, one column per file (docs/results/index.md).
"""

from __future__ import annotations

import re
import sys

IDLE = re.compile(r"^(Condition\.wait \(threading|EpollSelector\.select|Queue\.get|_worker|"
                  r"WorkerThread\.run \(anyio|Store\.(write_groups|commit) \(server/store\.py:"
                  r"(218|247)\))")  # the COMMIT line (fsync) before / after this branch
CATEGORIES = [
    ("log lines", r"logging/__init__|uvicorn/logging|Logger\.(info|debug)"),
    ("SQLite", r"Store\.(write_groups|stage_groups|commit|_read|_write)"),
    ("JDP tree counters", r"privacy/tree\.py|privacy/noise\.py|seeding\.py"),
    ("ingest other", r"Accepted\.ingest|ingest_trajectories|ingest_noisy"),
    ("report checks + canonical JSON", r"^accept \(shared|_accept_|digest_of|_canonical"),
    ("planning", r"HostedRun\._plan|Run\.message"),
    ("accountant", r"accountant\.py"),
    ("claim / report bookkeeping", r"server/(hosted|views|service|cohorts)\.py"),
    ("request body", r"request_body_to_args|Request\.json|Request\.body|ModelField\.validate|"
                     r"TypeAdapter\.validate"),
    ("FastAPI params + dependencies", r"solve_dependencies|request_params_to_args|"
                                      r"refuse_unknown_query"),
    ("responses", r"serialize_response|jsonable_encoder|model_dump|dump_json|json_answer|"
                  r"BaseModel\.__init__|policy_payload"),
    ("prometheus", r"prometheus_client"),
    ("worker-thread hops", r"anyio/to_thread|anyio/_backends|Queue\.put|Condition\.notify|"
                           r"_write_to_self|_read_from_self|WorkerThread"),
    ("route handlers", r"server/routes/"),
    ("framework", r"fastapi/|starlette/|server/limits\.py"),
    ("uvicorn + h11 + asyncio", r"uvicorn/|h11/|asyncio/"),
]


def shares(path: str) -> dict[str, float]:
    """Percent of the busy samples of one file per category."""
    counts: dict[str, int] = {}
    for line in open(path):
        stack, _, n = line.rstrip().rpartition(" ")
        frames = stack.split(";")
        if IDLE.match(frames[-1]):
            continue
        name = next((name for name, pattern in CATEGORIES
                     if any(re.search(pattern, f) for f in frames)), "other")
        counts[name] = counts.get(name, 0) + int(n)
    total = sum(counts.values()) or 1
    return {name: 100 * c / total for name, c in counts.items()}


def main() -> None:
    """One column per file."""
    columns = [shares(path) for path in sys.argv[1:]]
    print("| category | " + " | ".join(sys.argv[1:]) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for name in [n for n, _ in CATEGORIES] + ["other"]:
        print(f"| {name} | " + " | ".join(f"{c.get(name, 0):.1f}%" for c in columns) + " |")


if __name__ == "__main__":
    main()
