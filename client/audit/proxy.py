"""`privrl audit proxy`: a logging reverse proxy between users and a privrl server.

Point users at the proxy instead of the server (`privrl users --server http://127.0.0.1:PORT`):
every request is forwarded unchanged, and what crosses the wire is recorded per run — sizes,
field paths and value types — so a deployment can be audited without changing it. The proxy
learns each run's privacy mode from the public run info and flags, in an LDP run's reports,
anything raw: a trajectory (states, actions, rewards), an array whose values are all whole
numbers inside the clean range (clean 0/1 counts), a seed, or a report layout that differs
between users (a size or shape side channel), and compares reports pairwise for noise drawn
again (`privrl.audit.reuse`). It reads each noisy entry's clean value off its
float bits where it can (`privrl.audit.float_leaks`) and counts the entries proven exact. In any
run it flags a seed-like field in a server answer.

GET /_privrl/audit on the proxy answers the report so far; on SIGINT/SIGTERM the proxy stops and
prints it (exit code 1 when anything was flagged). `--log FILE` writes one JSON line per
exchange.
"""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import IO, Any

import httpx
import numpy as np
import uvicorn
from privrl import trust
from privrl.algorithms import bind
from privrl.audit.findings import AuditReport, Finding
from privrl.audit.float_leaks import MAX_ENTRIES, LeakReport, count_candidates, float_leaks
from privrl.audit.lower_bound import count_families
from privrl.audit.reuse import ReuseDetector, reuse_verdict
from privrl.client.audit.server_attack import raw_looking, secret_looking, walk
from privrl.config import RunConfig
from privrl.privacy.calibration import Calibration
from privrl.protocol import SERVER_KEEPALIVE_SECONDS
from privrl.seeding import generator
from privrl.wire import unpack_floats
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

REPORT_PATH = "/_privrl/audit"
HOP_HEADERS = {"host", "content-length", "connection", "keep-alive", "transfer-encoding",
               "te", "trailer", "upgrade", "proxy-authorization", "proxy-authenticate",
               "content-encoding"}
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def describe(doc: Any) -> dict[str, str]:
    """Field path -> value type of a JSON document (list items collapsed, arrays summarized)."""
    out: dict[str, str] = {}

    def visit(value: Any, path: str) -> None:
        """Record the type of every leaf below `path`."""
        if isinstance(value, dict):
            for key, sub in value.items():
                visit(sub, f"{path}.{key}" if path else str(key))
        elif isinstance(value, list):
            scalars = [v for v in value if not isinstance(v, dict | list)]
            if len(scalars) == len(value):
                kinds = sorted({type(v).__name__ for v in value}) or ["empty"]
                out[path] = f"list[{'|'.join(kinds)}] x{len(value)}"
            else:
                for item in value:
                    visit(item, f"{path}[]")
        else:
            out[path or "$"] = type(value).__name__
    visit(doc, "")
    return out


def whole_number_arrays(doc: Any) -> list[str]:
    """Paths of number arrays whose values are all whole numbers (a clean count, not noise)."""
    hits = []
    for path, _key, value in walk(doc):
        if isinstance(value, list) and value and all(
            isinstance(v, int | float) and not isinstance(v, bool) and float(v).is_integer()
            for v in value
        ):
            hits.append(path)
    return hits


def unpacked(doc: dict) -> dict:
    """An LDP report with its packed arrays (base64 float64, `privrl.wire`) as lists of numbers,
    so that every check sees the values whichever form carries them."""
    arrays = doc.get("arrays")
    if not isinstance(arrays, dict):
        return doc
    out = {}
    for name, values in arrays.items():
        if isinstance(values, str):
            try:
                values = unpack_floats(values).tolist()
            except ValueError:
                pass
        out[name] = values
    return {**doc, "arrays": out}


@dataclass
class RouteTraffic:
    """Traffic of one route template of one run."""

    requests: int = 0
    request_bytes: list[int] = field(default_factory=lambda: [0, 0])  # min, max
    response_bytes: list[int] = field(default_factory=lambda: [0, 0])
    statuses: dict[int, int] = field(default_factory=dict)
    fields: dict[str, set[str]] = field(default_factory=dict)  # request field path -> types

    def add(self, req_size: int, resp_size: int, status: int, body: Any) -> None:
        """Count one exchange."""
        for sizes, size in ((self.request_bytes, req_size), (self.response_bytes, resp_size)):
            sizes[0] = size if self.requests == 0 else min(sizes[0], size)
            sizes[1] = max(sizes[1], size)
        self.requests += 1
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if body is not None:
            for path, kind in describe(body).items():
                self.fields.setdefault(path, set()).add(kind)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"requests": self.requests, "request_bytes": self.request_bytes,
                "response_bytes": self.response_bytes, "statuses": self.statuses,
                "fields": {k: sorted(v) for k, v in sorted(self.fields.items())}}


@dataclass
class RunTraffic:
    """Everything seen for one run."""

    privacy: str | None = None
    routes: dict[str, RouteTraffic] = field(default_factory=dict)
    layout: tuple | None = None  # the first LDP report's field paths and array lengths
    config: RunConfig | None = None
    calibration: Calibration | None = None
    leaks: LeakReport = field(default_factory=LeakReport)  # LDP report entries, pooled
    leak_reports: int = 0  # reports the float test read (until MAX_ENTRIES entries)
    counts: tuple[str, ...] = ()  # released families whose clean values are counts
    reuse: ReuseDetector | None = None  # LDP: reports compared pairwise for repeated noise

    @property
    def local_noise(self) -> bool:
        """Whether the run's users noise their reports (its trust boundary says so; a boundary
        this auditor does not know: no)."""
        try:
            return self.privacy is not None and trust.get(self.privacy).local_noise
        except ValueError:
            return False

    def learn(self, info: Any) -> None:
        """Keep a run's public config (from its info or creation answer) and calibration."""
        config = info.get("config") if isinstance(info, dict) else None
        if not isinstance(config, dict):
            return
        self.privacy = config.get("privacy")
        try:
            self.config = RunConfig.model_validate(config)
            self.calibration = bind(self.config).calibration()
            self.counts = count_families(self.config, generator(0, "audit", "proxy"))
        except (ValueError, ImportError):  # an algorithm or backend this auditor lacks
            self.config = self.calibration = None
            return
        if self.local_noise and self.calibration.mechanism is not None:
            self.reuse = ReuseDetector(self.calibration, rng=generator(0, "audit", "reuse"))


class WireLog:
    """What crossed the wire, per run, and what was flagged."""

    def __init__(self, upstream: str, sink: IO[str] | None = None) -> None:
        """Record traffic to `upstream`; `sink` gets one JSON line per exchange."""
        self.report = AuditReport("proxy", upstream)
        self.runs: dict[str, RunTraffic] = {}
        self.other: dict[str, RouteTraffic] = {}
        self.sink = sink

    def run(self, run_id: str) -> RunTraffic:
        """The traffic record of a run (created on first sight)."""
        return self.runs.setdefault(run_id, RunTraffic())

    def flag(self, check: str, message: str, run_id: str | None, where: str,
             evidence: dict[str, Any]) -> None:
        """Record one flagged exchange."""
        self.report.find(Finding(check, message, run_id, where, evidence))

    def record(self, method: str, path: str, run_id: str | None, template: str,
               req_body: bytes, status: int, resp_body: bytes) -> list[str]:
        """Account one exchange and check it; the messages of what it flagged."""
        before = len(self.report.findings)
        req_doc, resp_doc = _json(req_body), _json(resp_body)
        if isinstance(req_doc, dict) and template.endswith("/reports"):
            req_doc = unpacked(req_doc)  # packed arrays are checked and described as numbers
        where = f"{method} {template}"
        traffic = self.other.setdefault(where, RouteTraffic()) if run_id is None else \
            self.run(run_id).routes.setdefault(where, RouteTraffic())
        traffic.add(len(req_body), len(resp_body), status, req_doc)
        if run_id is not None and method == "POST" and template.endswith("/reports"):
            self._check_report(run_id, where, req_doc)
        if resp_doc is not None and template != "/openapi.json":
            for fpath, key, value in walk(resp_doc):
                if key is not None and secret_looking(key):
                    self.flag("secret-field", f"the server answered a seed-like field {fpath}",
                              run_id, where, {"path": fpath, "value": repr(value)[:200]})
        flagged = [f.message for f in self.report.findings[before:]]
        if self.sink is not None:
            line = {"at": time.time(), "method": method, "path": path, "run_id": run_id,
                    "route": template, "status": status, "request_bytes": len(req_body),
                    "response_bytes": len(resp_body),
                    "fields": describe(req_doc) if req_doc is not None else {},
                    "flags": flagged}
            self.sink.write(json.dumps(line) + "\n")
            self.sink.flush()
        return flagged

    def _check_report(self, run_id: str, where: str, doc: Any) -> None:
        """An LDP report may carry only the ticket and the noisy arrays: one finding per report
        that carries anything else, naming every reason."""
        traffic = self.run(run_id)
        if not traffic.local_noise or doc is None:
            return
        if not isinstance(doc, dict):
            self.flag("ldp-report", "an LDP report that is not a JSON object", run_id, where, {})
            return
        reasons: list[str] = []
        if doc.get("kind") == "trajectory":
            reasons.append("a raw trajectory (kind 'trajectory')")
        raw = [p for p, k, v in walk(doc) if k is not None and raw_looking(k, v)]
        secret = [p for p, k, v in walk(doc) if k is not None and secret_looking(k)]
        whole = [p for p in whole_number_arrays(doc) if _clean_range(traffic, p, doc)]
        self._float_leaks(traffic, doc)
        self._compare(traffic, doc)
        extra = sorted(set(doc) - {"kind", "ticket", "arrays"})
        if raw:
            reasons.append(f"raw fields {', '.join(raw)}")
        if secret:
            reasons.append(f"seed-like fields {', '.join(secret)}")
        if whole:
            reasons.append(f"arrays of whole numbers (clean counts, not randomized values):"
                           f" {', '.join(whole)}")
        if extra:
            reasons.append(f"fields beyond kind, ticket and arrays: {', '.join(extra)}")
        layout = tuple(sorted(describe(doc).items()))
        if traffic.layout is None:
            traffic.layout = layout
        elif layout != traffic.layout:
            reasons.append("fields or array lengths that differ from the run's first report"
                           " (a side channel)")
        if reasons:
            self.flag("ldp-report", "raw data in an LDP report: " + "; ".join(reasons), run_id,
                      where, {"reasons": reasons, "fields": describe(doc)})

    @staticmethod
    def _compare(traffic: RunTraffic, doc: dict) -> None:
        """Compare a report's noisy arrays with earlier reports' (noise drawn again?)."""
        arrays = doc.get("arrays")
        if traffic.reuse is None or not isinstance(arrays, dict):
            return
        try:
            traffic.reuse.add({name: np.asarray(values, dtype=np.float64)
                               for name, values in arrays.items()})
        except (KeyError, TypeError, ValueError):  # a malformed report: flagged as such
            pass

    @staticmethod
    def _float_leaks(traffic: RunTraffic, doc: dict) -> None:
        """Read what clean values a report's noisy arrays prove (one user: counts 0..max)."""
        cal, cfg = traffic.calibration, traffic.config
        arrays = doc.get("arrays")
        if (cal is None or cfg is None or cal.mechanism is None or not isinstance(arrays, dict)
                or traffic.leaks.total >= MAX_ENTRIES):  # a sample is enough; keep the proxy fast
            return
        kind = cal.mechanism_name if cfg.noise != "opendp" else "opendp"
        for fam in cal.families:
            values = arrays.get(fam.name)
            cands = count_candidates(fam.clean_min, fam.clean_max, 1)
            if cands is None or fam.name not in traffic.counts or not isinstance(values, list):
                continue
            try:
                found = float_leaks(values, fam.scale, kind, cands, getattr(fam, "grid", None))
            except (TypeError, ValueError):
                continue
            found.clean = found.clean[:0]  # the pooled counts are what the report shows
            traffic.leaks.add(found)
        traffic.leak_reports += 1

    def summary(self) -> AuditReport:
        """The report so far: per-run traffic, the flags, and what passed."""
        report = AuditReport("proxy", self.report.target, list(self.report.findings))
        exchanges = sum(r.requests for r in self.other.values()) + sum(
            t.requests for run in self.runs.values() for t in run.routes.values())
        report.summary = {"runs": len(self.runs), "exchanges": exchanges}
        for run_id, run in self.runs.items():
            reports = sum(t.requests for w, t in run.routes.items() if w.endswith("/reports"))
            sizes = [t.request_bytes for w, t in run.routes.items() if w.endswith("/reports")]
            size = ""
            if sizes:
                lo, hi = sizes[0]
                size = f" of {lo} bytes" if lo == hi else f" of {lo}-{hi} bytes"
            noun = "report" if reports == 1 else "reports"
            report.runs[run_id] = f"{run.privacy or 'unknown'} run, {reports} {noun}{size}"
            leaks = run.leaks
            if leaks.proven:
                report.find(Finding(
                    "float-noise", f"{leaks.proven} of {leaks.total} noisy entries"
                    f" ({leaks.proven / leaks.total:.0%}) of {run.leak_reports} reports proven"
                    " exact from the reports alone: the float noise's image admits one clean"
                    " count (Mironov 2012)", run_id, "POST /v1/runs/{run_id}/reports",
                    {"reports": run.leak_reports, **leaks.to_dict()}))
            elif leaks.total:
                report.passed("float-noise", f"no clean value proven from the float bits of"
                              f" {leaks.total} noisy entries", run_id)
            if run.reuse is not None and run.reuse.count >= 2:
                reuse_verdict(report, run_id, run.reuse, "POST /v1/runs/{run_id}/reports",
                              "reports")
            if run.local_noise and reports and not any(
                    f.run_id == run_id and f.check not in ("float-noise", "noise-reuse")
                    for f in report.findings):
                fields = ", ".join(f"{k}: {v}" for k, v in (run.layout or ()))
                report.passed("ldp-report", f"{reports} reports carry only noisy arrays"
                              f" ({fields})", run_id)
        report.summary["traffic"] = {
            "runs": {rid: {"privacy": r.privacy,
                           "routes": {w: t.to_dict() for w, t in r.routes.items()}}
                     for rid, r in self.runs.items()},
            "other": {w: t.to_dict() for w, t in self.other.items()},
        }
        return report


def _json(body: bytes) -> Any:
    """A body as JSON, or None when it is empty or not JSON."""
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def _clean_range(traffic: RunTraffic, path: str, doc: dict) -> bool:
    """Whether the whole-number array at `path` ("arrays.NAME") lies inside its family's clean
    range (integer noise is whole-valued too, and leaves it); True when the family is unknown."""
    cal = traffic.calibration
    name = path.removeprefix("arrays.")
    if cal is None or name not in cal.released:
        return True
    fam = cal.family(name)
    values = doc["arrays"][name]
    return all(fam.clean_min <= v <= fam.clean_max for v in values)


def split_run_path(path: str) -> tuple[str | None, str]:
    """(run id, route template) of a request path: /v1/runs/abc/reports -> (abc, ...)."""
    parts = path.split("/")
    if len(parts) >= 4 and parts[1] == "v1" and parts[2] == "runs" and parts[3]:
        rest = "/".join(parts[4:])
        return parts[3], "/v1/runs/{run_id}" + (f"/{rest}" if rest else "")
    return None, path


Answer = Callable[[httpx.AsyncClient, Request, bytes, httpx.Response], Awaitable[bytes]]


def forwarding_app(upstream: str, answer: Answer, timeout: float = 60.0,
                   routes: Sequence[Route] = ()) -> Starlette:
    """A reverse proxy to `upstream`: every request forwarded (hop-by-hop headers dropped),
    answered with the status and headers upstream gave and the body `answer(client, request,
    body, response)` returns; `routes` are the proxy's own, matched first."""
    state: dict[str, httpx.AsyncClient] = {}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        """One connection pool to the upstream server for the proxy's lifetime."""
        async with httpx.AsyncClient(base_url=upstream, timeout=timeout) as client:
            state["client"] = client
            yield

    async def forward(request: Request) -> Response:
        """Forward one request unchanged; answer as upstream did, with `answer`'s body."""
        body = await request.body()
        path = request.url.path
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        target = path + (f"?{request.url.query}" if request.url.query else "")
        try:
            resp = await state["client"].request(request.method, target, headers=headers,
                                                 content=body)
        except httpx.HTTPError as exc:
            detail = f"the proxy cannot reach the upstream server {upstream}: {exc}"
            return JSONResponse({"detail": detail, "code": "upstream"}, status_code=502)
        content = await answer(state["client"], request, body, resp)
        out_headers = {k: v for k, v in resp.headers.items() if k.lower() not in HOP_HEADERS}
        return Response(content, status_code=resp.status_code, headers=out_headers)

    return Starlette(routes=[*routes, Route("/{path:path}", forward, methods=METHODS)],
                     lifespan=lifespan)


def create_proxy_app(upstream: str, wire: WireLog, timeout: float = 60.0) -> Starlette:
    """The audit proxy as an ASGI app forwarding to `upstream` and recording into `wire`."""

    async def learn_privacy(client: httpx.AsyncClient, run_id: str) -> None:
        """Ask the upstream server (public route) for a run's privacy mode, once."""
        run = wire.run(run_id)
        if run.privacy is not None:
            return
        try:
            resp = await client.get(f"/v1/runs/{run_id}")
            if resp.status_code == 200:
                run.learn(resp.json())
        except (httpx.HTTPError, ValueError):
            pass

    async def report(request: Request) -> Response:
        """The report so far, as JSON."""
        return JSONResponse(wire.summary().to_dict())

    async def record(client: httpx.AsyncClient, request: Request, body: bytes,
                     resp: httpx.Response) -> bytes:
        """Record one exchange (learning the run's mode first); the body unchanged."""
        path = request.url.path
        run_id, template = split_run_path(path)
        if run_id is not None:
            await learn_privacy(client, run_id)
        if run_id is None and request.method == "POST" and path == "/v1/runs":
            created = _json(resp.content)
            if isinstance(created, dict) and "id" in created:
                wire.run(created["id"]).learn(created)
        wire.record(request.method, path, run_id, template, body, resp.status_code,
                    resp.content)
        return resp.content

    return forwarding_app(upstream, record, timeout,
                          [Route(REPORT_PATH, report, methods=["GET"])])


def check_listen(host: str, port: int) -> None:
    """Raise OSError now (a clear message) when the address cannot be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))


def serve_proxy(host: str, port: int, upstream: str, sink: IO[str] | None = None
                ) -> AuditReport:
    """Serve until SIGINT/SIGTERM; the report of everything that crossed the wire."""
    wire = WireLog(upstream, sink)
    app = create_proxy_app(upstream, wire)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            server_header=False, proxy_headers=False,
                            timeout_keep_alive=SERVER_KEEPALIVE_SECONDS)
    server = uvicorn.Server(config)
    # uvicorn re-raises the stop signal once it is done; a no-op handler lets us report first
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT,
                                                                     signal.SIGTERM)}
    try:
        server.run()
    except SystemExit:  # uvicorn exits when it cannot bind (the port was taken meanwhile)
        raise OSError(f"the proxy could not listen on {host}:{port}") from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not server.started:
        raise OSError(f"the proxy could not listen on {host}:{port}")
    return wire.summary()
