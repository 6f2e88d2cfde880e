"""What an audit reports: findings with their evidence, the checks that passed, as text or JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Finding:
    """Something that breaks the trust boundary, with the evidence a reader can re-check."""

    check: str  # e.g. "seed", "secret-field", "raw-data", "noise", "ldp-report"
    message: str  # one line
    run_id: str | None = None
    where: str = ""  # route, field path or request
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    """A check that ran (and found nothing) or could not run, in one line."""

    check: str
    message: str
    run_id: str | None = None
    ran: bool = True  # False: skipped (the reason is the message)
    evidence: dict[str, Any] = field(default_factory=dict)  # the measured figures, if any


@dataclass
class AuditReport:
    """Everything one audit found and checked; `exit_code` is 1 when anything was found."""

    kind: str  # "server" or "proxy"
    target: str
    findings: list[Finding] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    runs: dict[str, str] = field(default_factory=dict)  # run id -> one-line description
    summary: dict[str, Any] = field(default_factory=dict)

    def find(self, finding: Finding) -> None:
        """Record a finding."""
        self.findings.append(finding)

    def passed(self, check: str, message: str, run_id: str | None = None,
               evidence: dict[str, Any] | None = None) -> None:
        """Record a check that found nothing (`evidence`: what it measured)."""
        self.checks.append(Check(check, message, run_id, evidence=evidence or {}))

    def skipped(self, check: str, message: str, run_id: str | None = None) -> None:
        """Record a check that could not run, and why."""
        self.checks.append(Check(check, message, run_id, ran=False))

    @property
    def exit_code(self) -> int:
        """0 when nothing was found, 1 otherwise."""
        return 1 if self.findings else 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "kind": self.kind,
            "target": self.target,
            "summary": self.summary,
            "runs": self.runs,
            "findings": [asdict(f) for f in self.findings],
            "checks": [asdict(c) for c in self.checks],
            "exit_code": self.exit_code,
        }

    def to_json(self) -> str:
        """The report as one JSON document."""
        return json.dumps(self.to_dict(), indent=2, default=str)

    def text(self) -> str:
        """The report as lines a person reads: per run, what passed and what was found."""
        head = ", ".join(f"{k} {v}" for k, v in self.summary.items()
                         if isinstance(v, int | float | str))
        lines = [f"privrl audit {self.kind} {self.target}" + (f": {head}" if head else "")]
        for run_id in [None, *self.runs]:
            checks = [c for c in self.checks if c.run_id == run_id]
            found = [f for f in self.findings if f.run_id == run_id]
            if run_id is None and not checks and not found:
                continue
            lines.append(f"run {run_id}: {self.runs[run_id]}" if run_id else "server:")
            for c in checks:
                lines.append(f"  {'ok' if c.ran else 'skip':<6}{c.check:<13}{c.message}")
            for f in found:
                where = f" [{f.where}]" if f.where else ""
                lines.append(f"  {'FOUND':<6}{f.check:<13}{f.message}{where}")
        n = len(self.findings)
        lines.append("no findings" if n == 0 else f"{n} finding{'s' if n > 1 else ''}")
        return "\n".join(lines)
