"""`privrl audit server`: attack a privrl server from outside, with public routes only (no token).

1. Read everything a visitor can: the run list, each run's info, billboard, ledger, policy and
   policy log, /metrics, /healthz, /readyz, the OpenAPI document, and every other GET route the
   OpenAPI document lists whose only parameter is the run id.
2. Search it for what re-derives published noise or carries raw data: fields named like seeds,
   generator states or noise values; trajectory fields; released arrays that are exact counts.
3. Try to denoise the billboard as an attacker would: every integer the public data shows (and
   the small seeds people type) is tried as the run's seed with the open library; a candidate is
   confirmed when the billboard minus the noise it re-derives is a clean count everywhere.
4. Poll the billboard over time and test that the increments between releases carry at least
   the declared noise (`privrl.audit.increments`), at a stated false-alarm rate.
5. LDP: compare the billboard increments of one report each pairwise, for noise drawn again
   (`privrl.audit.reuse`).
6. Read clean values off the low-order bits of a reading where each entry is one clean count plus
   one noise draw, and test every reading against its declared grid (`privrl.audit.float_leaks`).

Each phase prints one line to `progress` (the CLI: stderr) as it starts.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import numpy as np
from privrl.algorithms import bind
from privrl.audit.findings import AuditReport, Finding
from privrl.audit.float_leaks import MAX_ENTRIES, LeakReport, count_candidates, float_leaks
from privrl.audit.increments import IncrementTest, increment_test, single_draw
from privrl.audit.lower_bound import count_families
from privrl.audit.reuse import ReuseDetector, reuse_verdict
from privrl.client.api import ApiError, ServerAPI, describe_status, describe_transport_error
from privrl.config import RunConfig
from privrl.privacy.calibration import Calibration, FamilyCalibration
from privrl.privacy.privatizers import Central, from_units, randomize_locally
from privrl.privacy.tree import TreeCounter, levels_released
from privrl.seeding import SEED_BITS, noise_generator, user_generator
from privrl.worlds.rollout import draw_uniforms

RUN_ROUTES = ("", "/billboard", "/ledger", "/policy", "/policies")
SERVER_ROUTES = ("/v1/runs", "/healthz", "/readyz")
NOT_CRAWLED = {"/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect", "/metrics"}
SECRET_TOKENS = {"seed", "seeds", "entropy", "rng", "rngs", "pcg64", "mt19937", "philox", "sfc64"}
SECRET_JOINED = ("bitgenerator", "randomstate", "spawnkey", "nodenoise", "noisevalue",
                 "noisedraw", "generatorstate", "rngstate")
PUBLIC_SEEDS = {"featureseed"}  # seeds of public model information (a world's features)
RAW_KEYS = {"states", "rewards", "trajectory", "trajectories", "rawcounts", "exactcounts",
            "exactsums"}
DEFAULT_GUESSES = 65  # seeds people type: 0, 1, ..., 42, ..., 64
Progress = Callable[[str], None]


@dataclass
class Document:
    """One public answer: where it came from and its body (parsed JSON, or text)."""

    route: str  # "GET /v1/runs/{run_id}/ledger"
    run_id: str | None
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Poll:
    """One reading of a billboard: reports counted and the released families' arrays."""

    at: float
    reported: int
    arrays: dict[str, np.ndarray]


class PublicReader:
    """Plain GETs without a token (the typed client refuses fields it does not know, and a leaky
    server's extra fields are exactly what the audit looks for)."""

    def __init__(self, api: ServerAPI) -> None:
        """Read through `api`'s connection pool (its URL is already checked)."""
        self.api = api

    def get(self, path: str, what: str) -> httpx.Response:
        """GET `path`; a transport failure becomes ApiError, any status is returned."""
        try:
            return self.api.http.get(path)
        except httpx.HTTPError as exc:
            raise ApiError(describe_transport_error(self.api.server, exc)) from None

    def json(self, path: str, what: str) -> Any:
        """GET `path` as JSON; a status >= 400 or a non-JSON body becomes ApiError."""
        resp = self.get(path, what)
        if resp.status_code >= 400:
            raise ApiError(describe_status(resp, what), resp.status_code)
        try:
            return resp.json()
        except ValueError:
            raise ApiError(f"{what}: the server did not answer JSON") from None


# --- walking public documents -------------------------------------------------------------------


def walk(doc: Any, path: str = "") -> Iterator[tuple[str, str | None, Any]]:
    """Every (path, key, value) in a JSON document, depth first; key is None in lists."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            sub = f"{path}.{key}" if path else str(key)
            yield sub, str(key), value
            yield from walk(value, sub)
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            sub = f"{path}[{i}]"
            yield sub, None, value
            yield from walk(value, sub)


def _key_tokens(key: str) -> tuple[set[str], str]:
    """A key's lower-case words (snake, kebab and camel case) and its letters joined."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", key)
    words = {w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w}
    return words, re.sub(r"[^a-z0-9]", "", key.lower())


def secret_looking(key: str) -> bool:
    """Whether a field name suggests a seed, a generator state or noise values (a linear
    world's `feature_seed` draws its public features: public model information, not a secret)."""
    words, joined = _key_tokens(key)
    if joined in PUBLIC_SEEDS:
        return False
    return bool(words & SECRET_TOKENS) or any(j in joined for j in SECRET_JOINED)


def raw_looking(key: str, value: Any) -> bool:
    """Whether a field looks like raw user data: trajectory fields, or a flat action sequence
    (a published policy's actions are a table actions[h][s], not a sequence)."""
    words, joined = _key_tokens(key)
    if joined in RAW_KEYS or words & {"trajectory", "trajectories"}:
        return True
    return joined == "actions" and isinstance(value, list) and bool(value) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value)


def _as_int(value: Any) -> int | None:
    """A non-negative integer a value could be read as (numbers, decimal or hex strings)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        ok = math.isfinite(value) and value.is_integer() and 0 <= value < 2.0**SEED_BITS
        return int(value) if ok else None
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return int(text)
        if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
            return int(text, 16)
        if re.fullmatch(r"[0-9a-fA-F]{16,64}", text):
            return int(text, 16)
    return None


def harvest(docs: Sequence[Document]) -> dict[int, str]:
    """Every integer the documents show (values, keys, numeric and hex strings, metric samples),
    with where it was first seen. Billboard arrays are left out: they are the noisy release."""
    found: dict[int, str] = {}
    for doc in docs:
        if isinstance(doc.body, str):
            for token in re.split(r"[\s{},=\"]+", doc.body):
                value = _as_int(token[:-2] if token.endswith(".0") else token)
                if value is not None:
                    found.setdefault(value, f"{doc.route} (text)")
            continue
        for path, key, value in walk(doc.body):
            if doc.route.endswith("/billboard") and path.startswith("arrays"):
                continue
            for item in (key, value):
                number = _as_int(item) if item is not None else None
                if number is not None and number < 2**SEED_BITS:
                    found.setdefault(number, f"{doc.route} {path}")
        for name, value in doc.headers.items():
            number = _as_int(value)
            if number is not None:
                found.setdefault(number, f"{doc.route} header {name}")
    return found


# --- re-deriving noise with the open library ----------------------------------------------------


def central_noise(calibration: Calibration, seed: int, episodes: int, items: int,
                  families: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """The server's central noise in the release after `items` counter items (releases), were
    its seed `seed`: the counters `Central` builds for a run of `episodes` episodes (tree,
    smoothed tree or matrix counter), fed `items` empty items (`families`: only these)."""
    out = {}
    for name, counter in Central(calibration, [seed], episodes).trees.items():
        if families is not None and name not in families:
            continue
        if isinstance(counter, TreeCounter) and not counter.smooth:
            units = np.zeros_like(counter.exact)  # only the nodes of items' binary form
            for level in range(levels_released(items)):
                if (items >> level) & 1:
                    units += counter.node_noise(level, items >> level)
        else:  # a smoothed tree improves every node below: O(items) draws, as a matrix counter
            zeros = np.zeros_like(counter.exact)
            for _ in range(items):
                counter.add(zeros)
            units = counter.release()
        out[name] = from_units(calibration, name, units)[0]
    return out


def local_noise(calibration: Calibration, horizon: int, seed: int, episodes: Sequence[int],
                bernoulli_rewards: bool = False) -> dict[str, np.ndarray]:
    """The sum of the users' local noise over `episodes`, were the users' seed `seed` and their
    nonce counter fresh (the i-th report noised from noise_generator(seed, i), its grid rounding
    from the rollout stream user_generator(seed, episode) after the rollout's uniforms and the H
    Bernoulli-reward ones when `bernoulli_rewards`: `privrl.run.user_episode`'s order)."""
    total = {f.name: np.zeros(f.shape) for f in calibration.families}
    zeros = {f.name: np.zeros((1, *f.shape)) for f in calibration.families}
    for nonce, k in enumerate(episodes):
        rollout = user_generator(seed, k)
        draw_uniforms([rollout], horizon)
        if bernoulli_rewards:
            rollout.random(horizon)
        noisy = randomize_locally(zeros, calibration, [noise_generator(seed, nonce)],
                                  rounding=[rollout])
        for name, arr in noisy.items():
            total[name] += arr[0]
    return total


def clean_distance(calibration: Calibration, released: dict[str, np.ndarray], t: int,
                   noise: dict[str, np.ndarray]) -> float:
    """How far (max over entries) billboard minus `noise` lies outside the clean range that the
    exact sums of at most t honest users occupy: [t min(clean_min, 0), t max(clean_max, 0)]."""
    worst = 0.0
    for fam in calibration.families:
        if fam.name not in noise:
            continue
        rest = released[fam.name] - noise[fam.name]
        below = t * min(fam.clean_min, 0.0) - rest
        above = rest - t * max(fam.clean_max, 0.0)
        worst = max(worst, float(np.max(np.maximum(0.0, np.maximum(below, above)))))
    return worst


# --- the audit ----------------------------------------------------------------------------------


@dataclass
class RunView:
    """What the audit knows about one run."""

    run_id: str
    info: dict[str, Any]
    config: RunConfig | None
    calibration: Calibration | None
    problem: str = ""  # why the mechanism checks cannot run
    polls: list[Poll] = field(default_factory=list)
    snapshot: Poll | None = None  # the reading the seeds are tried on
    episodes_reported: list[int] = field(default_factory=list)
    hidden: tuple[str, ...] = ()  # declared families the billboard shows only post-processed


class ServerAudit:
    """One audit of one server: collect, search, denoise, test; results in `report`."""

    def __init__(
        self,
        api: ServerAPI,
        run_ids: Sequence[str] | None = None,
        polls: int = 3,
        interval: float = 1.0,
        alpha: float = 1e-3,
        guesses: int = DEFAULT_GUESSES,
        max_candidates: int = 400,
        rng: np.random.Generator | None = None,
        seed_budget: float = 120.0,
        grid: float | None = None,
        progress: Progress | None = None,
    ) -> None:
        """Audit `run_ids` (default: every listed run) on the server `api` talks to; `rng`
        draws the control seeds; `seed_budget` bounds the seconds spent trying seeds per run;
        `grid` is the declared grid step of released values (None: each family's own, if it
        declares one); `progress` gets one line per phase."""
        if (polls < 1 or interval < 0 or not 0 < alpha < 1 or guesses < 0 or max_candidates < 0
                or seed_budget <= 0):
            raise ValueError("polls >= 1, interval >= 0, 0 < alpha < 1, guesses >= 0,"
                             " max_candidates >= 0 and seed_budget > 0 are needed")
        self.reader = PublicReader(api)
        self.wanted = list(run_ids) if run_ids else None
        self.polls, self.interval, self.alpha = polls, interval, alpha
        self.guesses, self.max_candidates = guesses, max_candidates
        self.seed_budget = seed_budget
        self.rng = rng if rng is not None else np.random.default_rng()
        self.grid = grid
        self.progress = progress or (lambda line: None)
        self.report = AuditReport("server", api.server)
        self.docs: list[Document] = []
        self.runs: dict[str, RunView] = {}

    # collecting

    def _fetch(self, path: str, route: str, run_id: str | None) -> Document | None:
        """GET one public document and keep it (an error status is simply not kept)."""
        resp = self.reader.get(path, route)
        if resp.status_code >= 400:
            return None
        try:
            body: Any = resp.json()
        except ValueError:
            body = resp.text
        headers = {k: v for k, v in resp.headers.items()
                   if k.lower() not in ("content-length", "date")}
        doc = Document(route, run_id, body, headers)
        self.docs.append(doc)
        return doc

    def _routes_from_openapi(self, openapi: Any) -> tuple[list[str], list[str]]:
        """GET routes without query parameters: (server-wide paths, per-run path templates)."""
        server, per_run = [], []
        paths = openapi.get("paths", {}) if isinstance(openapi, dict) else {}
        for path, item in paths.items():
            op = item.get("get") if isinstance(item, dict) else None
            if op is None or path in NOT_CRAWLED:
                continue
            params = op.get("parameters", [])
            if any(p.get("required") and p.get("in") != "path" for p in params):
                continue
            names = {p.get("name") for p in params if p.get("in") == "path"}
            if not names:
                server.append(path)
            elif len(names) == 1:
                per_run.append(path.replace("{" + names.pop() + "}", "{run_id}"))
        return server, per_run

    def collect(self) -> None:
        """Read every public document (the OpenAPI document says which routes exist)."""
        self.progress(f"reading the public routes of {self.reader.api.server}")
        openapi = self._fetch("/openapi.json", "GET /openapi.json", None)
        self._fetch("/metrics", "GET /metrics", None)
        extra_server, extra_run = self._routes_from_openapi(openapi.body if openapi else {})
        for path in dict.fromkeys([*SERVER_ROUTES, *extra_server]):
            self._fetch(path, f"GET {path}", None)
        listed = self.reader.json("/v1/runs", "listing runs").get("runs", [])
        ids = [r.get("id") for r in listed if isinstance(r, dict)]
        for run_id in self.wanted or ids:
            what = f"run {run_id!r}"
            info = self.reader.json(f"/v1/runs/{quote(run_id, safe='')}", what)
            self.runs[run_id] = self._view(run_id, info)
        templates = [f"/v1/runs/{{run_id}}{r}" for r in RUN_ROUTES] + extra_run
        for run_id in self.runs:
            for template in dict.fromkeys(templates):
                path = template.replace("{run_id}", quote(run_id, safe=""))
                self._fetch(path, f"GET {template}", run_id)
        self.report.summary = {"runs": len(self.runs), "documents": len(self.docs)}

    def _view(self, run_id: str, info: dict[str, Any]) -> RunView:
        """What the audit can know about a run from its public info (config, calibration)."""
        try:
            config = RunConfig.model_validate(info.get("config"))
            calibration = bind(config).calibration()
        except (ValueError, ImportError) as exc:  # an algorithm or backend this auditor lacks
            return RunView(run_id, info, None, None, f"its config is not understood ({exc})")
        return RunView(run_id, info, config, calibration)

    def _read_board(self, view: RunView) -> Poll | None:
        """One reading of a run's billboard (None, with the reason kept, when it is not usable)."""
        assert view.calibration is not None
        path = f"/v1/runs/{quote(view.run_id, safe='')}/billboard"
        board = self.reader.json(path, f"billboard of run {view.run_id!r}")
        arrays, shown = {}, board.get("arrays") if isinstance(board, dict) else None
        if not isinstance(shown, dict):
            view.problem = "its billboard has no arrays"
            return None
        hidden = tuple(f.name for f in view.calibration.families if f.name not in shown)
        if len(hidden) == len(view.calibration.families):
            view.problem = f"its billboard shows none of its released families {hidden}"
            return None
        view.hidden = hidden  # e.g. LSVI's targets: only through the weights it solves
        for fam in view.calibration.families:
            if fam.name in hidden:
                continue
            try:
                arrays[fam.name] = np.asarray(shown[fam.name],
                                              dtype=np.float64).reshape(fam.shape)
            except (TypeError, ValueError):
                view.problem = f"its billboard's family {fam.name!r} has the wrong shape"
                return None
        return Poll(time.time(), int(board.get("reported", 0)), arrays)

    def _reported_episodes(self, view: RunView) -> list[int] | None:
        """The episode indices the billboard sums, from every page of the public policy log;
        None while a version's episodes are not all reported (the log counts lapsed and
        outstanding claims per version, it does not name them)."""
        path = f"/v1/runs/{quote(view.run_id, safe='')}/policies?after="
        done: list[int] = []
        after: int | None = 0
        while after is not None:
            log = self.reader.json(f"{path}{after}", f"policy log of run {view.run_id!r}")
            for served in log.get("served", {}).values():
                if served["reported"] != served["claimed"]:
                    return None
                done += range(served["first_episode"], served["first_episode"] + served["claimed"])
            after = log.get("next_after")
        return sorted(done)

    def _ldp_snapshot(self, view: RunView, attempts: int = 10) -> None:
        """A billboard and the episodes it sums, read without a report landing in between."""
        for _ in range(attempts):
            poll = self._read_board(view)
            done = self._reported_episodes(view)
            if poll is None or (done is not None and len(done) == poll.reported):
                view.snapshot, view.episodes_reported = poll, done or []
                return
            time.sleep(0.05)

    def _live(self) -> list[RunView]:
        """The runs whose billboards carry declared noise and can be read."""
        return [v for v in self.runs.values() if not v.problem and v.calibration is not None
                and v.calibration.mechanism is not None]

    def poll_once(self) -> None:
        """Read every noisy run's billboard once."""
        for view in self._live():
            if (poll := self._read_board(view)) is not None:
                view.polls.append(poll)

    def finish_polls(self) -> None:
        """Fix the reading each run's seeds are tried on (LDP: with the episodes it sums)."""
        for view in self._live():
            if view.calibration is not None and view.calibration.boundary.local_noise:
                self._ldp_snapshot(view)
            elif view.polls:
                view.snapshot = view.polls[-1]
        self.report.summary["billboard polls"] = max((len(v.polls) for v in self.runs.values()),
                                                     default=0)

    def poll(self) -> None:
        """Read the billboards `polls` times, `interval` seconds apart."""
        self.progress(f"reading {len(self._live())} billboard(s) {self.polls} time(s),"
                      f" {self.interval:g}s apart")
        for i in range(self.polls):
            if i:
                time.sleep(self.interval)
            self.poll_once()
        self.finish_polls()

    # checking

    def run(self) -> AuditReport:
        """Collect, poll and check every run; the report."""
        self.collect()
        self.poll()
        return self.check()

    def check(self) -> AuditReport:
        """Every check on what was collected and polled; the report."""
        self.progress(f"searching {len(self.docs)} documents for seeds and raw data")
        self.check_fields()
        for view in self.runs.values():
            cfg = view.config
            self.report.runs[view.run_id] = (
                f"{cfg.algo} {cfg.privacy} eps={cfg.epsilon:g} {cfg.mechanism} "
                f"K={cfg.episodes}, reported {self._reported(view)}" if cfg else "unknown config")
            if cfg is None or view.problem:
                self.report.skipped("mechanism", f"not checked: {view.problem}", view.run_id)
                continue
            if not cfg.boundary.private:
                self.report.skipped("mechanism", "non-private run: it declares no noise",
                                    view.run_id)
                continue
            if view.hidden:
                self.report.skipped(
                    "seeds", f"the billboard shows {', '.join(view.hidden)} only through what"
                    " the algorithm solves from it, and the rest after public post-processing"
                    " (a shift, an eigenvalue floor) at its own rounds: no clean value to"
                    " re-derive (raw data, seeds, float bits, grid); its increments are tested",
                    view.run_id)
            else:
                self.check_exact_counts(view)
                self.progress(f"run {view.run_id}: reading clean values off the float noise")
                self.check_float_leaks(view)
                self.progress(f"run {view.run_id}: trying seeds (at most {self.seed_budget:g}s)")
                self.check_seeds(view)
            self.check_increments(view)
            self.check_reuse(view)
        return self.report

    @staticmethod
    def _reported(view: RunView) -> str:
        """Reports counted at the first and last reading, for the run's line."""
        seen = sorted({p.reported for p in view.polls})
        if not seen:
            return str(view.info.get("status", {}).get("reported", "?"))
        return str(seen[0]) if len(seen) == 1 else f"{seen[0]} -> {seen[-1]}"

    def check_fields(self) -> None:
        """Secret-looking and raw-data fields in every document but the OpenAPI schema."""
        searched = [d for d in self.docs if d.route != "GET /openapi.json"]
        hits = 0
        for doc in searched:
            if isinstance(doc.body, str):
                names = re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", doc.body, re.M)
                labels = re.findall(r"[{,]([a-zA-Z_][a-zA-Z0-9_]*)=", doc.body)
                for name in dict.fromkeys([*names, *labels]):
                    if secret_looking(name):
                        hits += 1
                        self.report.find(Finding(
                            "secret-field", f"metric or label {name!r} names a seed or noise",
                            doc.run_id, doc.route))
                for name in dict.fromkeys(re.findall(
                        r"^([a-zA-Z_:][a-zA-Z0-9_:]*bytes[a-zA-Z0-9_:]*)\{[^}]*run=", doc.body,
                        re.M)):
                    hits += 1
                    self.report.find(Finding(
                        "side-channel", f"metric {name!r} counts bytes per run: it moves with"
                        " the size of what users send, not only with how many reports came",
                        doc.run_id, doc.route))
                continue
            for name in doc.headers:
                if secret_looking(name):
                    hits += 1
                    self.report.find(Finding("secret-field", f"header {name!r} names a seed",
                                             doc.run_id, doc.route,
                                             {"value": doc.headers[name]}))
            for path, key, value in walk(doc.body):
                if key is None:
                    continue
                if secret_looking(key):
                    hits += 1
                    self.report.find(Finding(
                        "secret-field",
                        f"field {path} = {_short(value)} names a seed, generator state or noise",
                        doc.run_id, doc.route, {"path": path, "value": _short(value, 200)}))
                elif raw_looking(key, value):
                    hits += 1
                    self.report.find(Finding(
                        "raw-data", f"field {path} = {_short(value)} looks like raw user data",
                        doc.run_id, doc.route, {"path": path, "value": _short(value, 200)}))
        if not hits:
            self.report.passed("fields", f"no seed, generator state, noise value or trajectory"
                               f" field in {len(searched)} documents")

    def check_exact_counts(self, view: RunView) -> None:
        """A released family whose values are all whole numbers inside the clean range of the
        reports counted is an exact count: no noise (integer noise leaves that range)."""
        cal = view.calibration
        assert cal is not None
        exact = [
            (p.reported, name) for p in view.polls if p.reported > 0
            for name, arr in p.arrays.items() if np.all(arr == np.round(arr))
            and _inside(arr, cal.family(name), p.reported)
        ]
        if exact:
            t, name = exact[-1]
            self.report.find(Finding(
                "raw-data", f"released family {name!r} is integer-valued after {t} reports: exact"
                f" counts, although {view.config.privacy.upper()} noise is declared",  # type: ignore[union-attr]
                view.run_id, "GET /v1/runs/{run_id}/billboard", {"reported": t, "family": name}))
        elif any(p.reported > 0 for p in view.polls):
            self.report.passed("raw-data", "released families are not integer-valued",
                               view.run_id)

    def _grid(self, fam: FamilyCalibration) -> float | None:
        """The declared grid step of a family's released values (None: none declared)."""
        return self.grid if self.grid is not None else getattr(fam, "grid", None)

    def check_float_leaks(self, view: RunView) -> None:
        """Clean values proven from the float noise's low-order bits (on a reading where each
        entry is one clean count plus one noise draw), and readings off their declared grid."""
        cfg, cal = view.config, view.calibration
        assert cfg is not None and cal is not None
        grids = {f.name: self._grid(f) for f in cal.families}
        declared = {n: g for n, g in grids.items() if g is not None}
        off = [(p.reported, name, found.off_grid, found.total)
               for p in view.polls for name, step in declared.items()
               if (found := float_leaks(p.arrays[name], 0.0, "none", (), step)).off_grid]
        if off:
            t, name, n, total = off[-1]
            self.report.find(Finding(
                "grid", f"{n} of {total} entries of family {name!r} after {t} reports lie off"
                f" their declared grid (step {declared[name]:g}): the noise is not the declared"
                " grid noise", view.run_id, "GET /v1/runs/{run_id}/billboard",
                {"readings": [dict(zip(("reported", "family", "off_grid", "entries"), o,
                                       strict=True)) for o in off]}))
        elif declared:
            self.report.passed("grid", f"every reading lies on its declared grid"
                               f" ({', '.join(f'{n}: {g:g}' for n, g in declared.items())})",
                               view.run_id)
        single = [p for p in view.polls if single_draw(cal, p.reported)]
        if not single:
            if cal.boundary.counters and cal.plan is not None and cal.plan.kind == "matrix":
                why = ("the matrix counter's releases each decode many draws (its noise is"
                       " integer: the grid check covers it)")
            else:
                when = ("1 report" if cal.boundary.local_noise else "1 release" if cal.smooth
                        else "a power-of-two number of releases")
                why = (f"needs a reading after {when}, where each entry is one clean count plus"
                       " one noise draw")
            self.report.skipped("float-noise", why, view.run_id)
            return
        poll = single[0]
        kind = cal.mechanism_name if cfg.noise != "opendp" else "opendp"
        found, families, counts = LeakReport(), [], count_families(cfg, self.rng)
        for fam in cal.families:
            cands = count_candidates(fam.clean_min, fam.clean_max, poll.reported)
            left = MAX_ENTRIES - found.total
            if cands is None or fam.name not in counts or left <= 0:
                continue
            families.append(fam.name)
            values = poll.arrays[fam.name].ravel()[:left]  # the first entries: a fixed sample
            found.add(float_leaks(values, fam.scale, kind, cands, grids[fam.name]))
        if found.proven:
            share = found.proven / found.total
            self.report.find(Finding(
                "float-noise",
                f"{found.proven} of {found.total} released entries read ({share:.0%}) after"
                f" {poll.reported} report(s) proven exact from public values: the"
                f" {cfg.noise} {kind} noise's float image admits one clean count (Mironov 2012;"
                f" count families {', '.join(families)})",
                view.run_id, "GET /v1/runs/{run_id}/billboard",
                {"reported": poll.reported, "families": families, **found.to_dict()}))
        elif families:
            self.report.passed("float-noise", f"no clean value proven from the float bits of"
                               f" {found.total} entries after {poll.reported} report(s)",
                               view.run_id)
        else:
            self.report.skipped("float-noise", "no released family is a count with few enough"
                                " clean values to test", view.run_id)

    def _candidates(self, view: RunView) -> tuple[list[tuple[int, str]], int]:
        """Seeds to try with where each comes from, most suspicious first, and the total:
        values of seed-like fields, then the seeds people type, then big integers (counters
        and versions are small), then every other integer the public data shows."""
        docs = [d for d in self.docs if d.run_id in (None, view.run_id)]
        found = harvest(docs)
        ordered: dict[int, str] = {}
        for doc in docs:
            if isinstance(doc.body, str):
                continue
            for path, key, value in walk(doc.body):
                number = _as_int(value)
                if key is not None and secret_looking(key) and number is not None:
                    ordered.setdefault(number, f"{doc.route} {path}")
        for g in range(self.guesses):
            also = f"; also at {found[g]}" if g in found else ""
            ordered.setdefault(g, f"a seed people type{also}")
        for number in sorted(found, key=lambda n: (n < 2**32, n)):
            ordered.setdefault(number, found[number])
        items = list(ordered.items())
        return items[: self.max_candidates], len(items)

    def check_seeds(self, view: RunView) -> None:
        """Try every harvested integer as the seed behind the billboard's noise."""
        cfg, cal = view.config, view.calibration
        assert cfg is not None and cal is not None
        who = "users'" if cfg.boundary.local_noise else "run's"
        if cfg.noise == "opendp":
            self.report.passed("seeds", f"noise drawn by {cfg.noise} from the OS CSPRNG: no seed"
                               " re-derives it", view.run_id)
            return
        last = view.snapshot
        if last is None:
            self.report.skipped("seeds", "the run kept moving while its billboard and policy log"
                                " were read; audit it again", view.run_id)
            return
        if last.reported == 0:
            self.report.skipped("seeds", "no report yet: nothing to denoise", view.run_id)
            return
        t = last.reported
        tol = self.tolerance(last)
        controls = [self._distance(view, last, int(self.rng.integers(2**63)), t)
                    for _ in range(2)]
        if min(controls) <= tol:
            self.report.skipped("seeds", "not decisive: random seeds also leave billboard minus"
                                " noise in the clean range (the declared noise is small next to"
                                " the counts)", view.run_id)
            return
        candidates, total = self._candidates(view)
        start = time.perf_counter()
        hits, tried = [], 0
        for seed, source in candidates:
            if time.perf_counter() - start > self.seed_budget:
                break
            tried += 1
            distance = self._distance(view, last, seed, t)
            if distance <= tol:
                hits.append((seed, source, distance))
        seconds = time.perf_counter() - start
        for seed, source, distance in hits:
            self.report.find(Finding(
                "seed",
                f"seed {seed} ({source}) re-derives the {who} noise: billboard minus that noise"
                f" is an exact count in all {sum(a.size for a in last.arrays.values())} released"
                " entries",
                view.run_id, source.split(" ", 2)[1] if source.startswith("GET ") else "guess",
                {"seed": str(seed), "source": source, "reported": t,
                 "distance_from_clean_range": distance, "random_seed_distances": controls,
                 "release_std": cal.release_std(t)}))
        if not hits:
            left = []
            if total > len(candidates):
                left.append("raise --max-candidates")
            if tried < len(candidates):
                left.append(f"the {self.seed_budget:g}s budget ran out: raise --seed-budget")
            of = f" (of {total}; {', '.join(left)})" if left else ""
            self.report.passed("seeds", f"{tried} candidate seeds{of} from public data and"
                               f" guesses re-derive none of the {who} noise ({seconds:.1f}s)",
                               view.run_id)

    def _distance(self, view: RunView, poll: Poll, seed: int, t: int) -> float:
        """How far a reading minus the noise of `seed` lies outside the clean range (JDP: one
        family at a time, so a wrong seed is usually rejected after the first)."""
        cfg, cal = view.config, view.calibration
        assert cfg is not None and cal is not None
        if cfg.boundary.local_noise:
            noise = local_noise(cal, cfg.horizon, seed, view.episodes_reported,
                                cal.integer and bind(cfg).integer_rewards)
            return clean_distance(cal, poll.arrays, t, noise)
        worst = 0.0
        items = cal.counter_items(t)  # the counters' items: releases so far
        for fam in sorted(cal.families, key=lambda f: int(np.prod(f.shape))):
            noise = central_noise(cal, seed, cfg.episodes, items, [fam.name])
            worst = max(worst, clean_distance(cal, poll.arrays, t, noise))
            if worst > self.tolerance(poll):
                break
        return worst

    @staticmethod
    def tolerance(poll: Poll) -> float:
        """Rounding slack of 'billboard minus noise': a millionth of the largest entry."""
        return 1e-6 * max(1.0, max(float(np.abs(a).max()) for a in poll.arrays.values()))

    def check_increments(self, view: RunView) -> None:
        """The variance test on each pair of successive polls between which the counters
        released (under a sparse JDP schedule, reports between releases change nothing)."""
        cal = view.calibration
        assert cal is not None
        if view.hidden:
            self._check_rounds(view)
            return
        pairs = [(a, b) for a, b in zip(view.polls, view.polls[1:], strict=False)
                 if cal.counter_items(b.reported) > cal.counter_items(a.reported)]
        self._increment_verdict(view, cal, [(cal.counter_items(a.reported), a,
                                             cal.counter_items(b.reported), b)
                                            for a, b in pairs])

    def _check_rounds(self, view: RunView) -> None:
        """The increment test on a billboard that shows its counters' release at the
        algorithm's own rounds (LSVI: the Gram snapshot its weights were solved against). A
        reading is pinned to the counter items closed so far when its arrays changed since the
        previous reading and exactly one item closed in between (the round happened there);
        successive pinned readings are tested (a public shift cancels in the increment)."""
        cfg, cal = view.config, view.calibration
        assert cfg is not None and cal is not None
        algo = bind(cfg)
        closes = getattr(algo, "leaf_closes", None)  # the algorithm's public leaf rule

        def items(reported: int) -> int:
            if closes is None:
                return cal.counter_items(reported)
            return sum(1 for i in range(1, reported + 1) if closes(i))

        plan = getattr(algo, "counter_plan", cal.plan)
        shown = dataclasses.replace(
            cal, families=tuple(f for f in cal.families if f.name not in view.hidden),
            plan=plan)
        pinned = [(items(b.reported), b)
                  for a, b in zip(view.polls, view.polls[1:], strict=False)
                  if items(b.reported) == items(a.reported) + 1
                  and any(not np.array_equal(a.arrays[n], b.arrays[n]) for n in b.arrays)]
        quads = [(t1, a, t2, b) for (t1, a), (t2, b) in zip(pinned, pinned[1:], strict=False)
                 if t2 > t1]
        self._increment_verdict(view, shown, quads)

    def _increment_verdict(self, view: RunView, cal: Calibration,
                           pairs: list[tuple[int, Poll, int, Poll]]) -> None:
        """The variance test on (items, reading, items, reading) pairs, as one check."""
        if not pairs:
            self.report.skipped("noise", "no new release between polls: poll a run while users"
                                " report (--polls, --interval)", view.run_id)
            return
        alpha = self.alpha / len(pairs)
        names = [f.name for f in cal.families]
        tests: list[IncrementTest] = [  # t: the counters' items (releases; LDP: reports)
            increment_test(cal, t1, [a.arrays[n] for n in names], t2,
                           [b.arrays[n] for n in names], alpha)
            for t1, a, t2, b in pairs
        ]
        decisive = [x for x in tests if x.decisive]
        if not decisive:
            self.report.skipped("noise", f"{len(tests)} increments, each with too few entries"
                                f" for a false-alarm rate of {self.alpha:g}", view.run_id)
            return
        flagged = [x for x in decisive if x.flagged]
        ratios = ", ".join(f"{x.ratio:.2f}" for x in decisive)
        if flagged:
            worst = min(flagged, key=lambda x: x.ratio)
            self.report.find(Finding(
                "noise",
                f"the billboard moved by less noise than declared: from {worst.t1} to {worst.t2}"
                f" releases the increments have std {worst.observed_std:.4g}, declared"
                f" {worst.declared_std:.4g} (flagged below {worst.threshold_std:.4g}; false-alarm"
                f" rate {self.alpha:g})",
                view.run_id, "GET /v1/runs/{run_id}/billboard",
                {"tests": [x.__dict__ for x in tests], "alpha": self.alpha}))
        else:
            self.report.passed("noise", f"{len(decisive)} increment(s), observed/declared noise"
                               f" std {ratios} (false-alarm rate {self.alpha:g})", view.run_id)


    def check_reuse(self, view: RunView) -> None:
        """LDP: the billboard increments of exactly one report each are those reports' noisy
        statistics; pairs of them that differ by less than their declared noise allows show
        noise drawn again (`privrl.audit.reuse`)."""
        cal = view.calibration
        assert cal is not None
        if not cal.boundary.local_noise:
            return
        single = [{n: b.arrays[n] - a.arrays[n] for n in b.arrays}
                  for a, b in zip(view.polls, view.polls[1:], strict=False)
                  if b.reported == a.reported + 1]
        if len(single) < 2:
            self.report.skipped("noise-reuse", f"{len(single)} billboard increment(s) of one"
                                " report each: needs 2, poll faster than users report (--polls,"
                                " --interval)", view.run_id)
            return
        detector = ReuseDetector(cal, self.alpha, rng=self.rng)
        for arrays in single:
            detector.add(arrays)
        reuse_verdict(self.report, view.run_id, detector, "GET /v1/runs/{run_id}/billboard",
                      "billboard increments")


def _inside(arr: np.ndarray, fam: FamilyCalibration, items: int) -> bool:
    """Whether every entry lies in the clean range of `items` reports' summed values."""
    return bool(np.all(arr >= items * fam.clean_min) and np.all(arr <= items * fam.clean_max))


def _short(value: Any, limit: int = 60) -> str:
    """A value's repr, cut to `limit` characters for one-line messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def audit_server(server: str, *args: Any, **options: Any) -> AuditReport:
    """Audit the server at `server` from its public routes (see the module docstring); the rest
    are `ServerAudit`'s arguments after its `api`."""
    with ServerAPI(server) as api:
        return ServerAudit(api, *args, **options).run()
