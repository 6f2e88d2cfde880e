"""`privrl demo`: a real server and real user processes on loopback, one run per trust boundary.

Starts `python -m privrl.server` on a free loopback port (temporary database, random admin token
passed through the environment), creates one run per registered trust boundary DP-UCBVI runs
across (`privrl.trust.by_exposure`: non-private, JDP, secure aggregation, LDP) on RiverSwim
(practical preset), lets swarms of `python -m privrl.client users` processes play every
episode, evaluates the exact regret from the public policy log, prints a table (regret, epsilon
spent, episodes/s, latencies, report size; a secure-aggregation run's cohort assumptions and
cohorts) and writes a plot. Every child process is stopped on success, error and Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import math
import secrets
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from privrl import accel, algorithms, trust
from privrl.algorithms.registry import bind, effective
from privrl.client.api import ApiError, ServerAPI
from privrl.client.cli_common import (
    CliError,
    policy_never_changed_notes,
    pydantic_message,
    refuse_overwrite,
)
from privrl.client.evaluator import evaluate
from privrl.client.procs import (
    ServerProcess,
    module_cmd,
    sigterm_interrupts,
    spawn,
    stop_process,
)
from privrl.client.user_state import STATE_DIR_ENV
from privrl.client.users import percentile
from privrl.config import RunConfig
from privrl.lab.experiments import label as config_label
from privrl.lab.experiments import regret_summary
from privrl.lab.plots import plot_learning
from privrl.privacy.calibration import counter_plan
from privrl.seeding import derived_seed, secret_seed
from privrl.trust import TrustBoundary
from privrl.trust.secagg.spec import CohortSpec
from privrl.verdict import LEARNED, NOT_LEARNED, WINDOWS, interval, steady, verdict_tail
from privrl.verdict import window_percents as tail_windows
from privrl.worlds import riverswim
from privrl.worlds.tabular import TabularMDP
from pydantic import ValidationError

DEMO_OUTPUTS = ("summary.json", "regret.png")  # what the demo writes to --out
TITLE_WIDTH = 120  # characters of the plot title's lines (the figure fits about 140)
USERS_TIMEOUT = 900.0  # seconds the user processes may take before the demo gives up
PROGRESS_EVERY = 10.0  # seconds between progress lines
SERVER_READY_TIMEOUT = 300.0  # seconds the server may take to be ready (it fails fast if it
# exits; a cold numba cache it would have to compile in: the demo compiles first)


def demo_cohort(episodes: int, most: int) -> int:
    """B of the secure-aggregation run: the largest divisor of K up to `most` (--cohort), so
    that every cohort is full: a last, partial cohort smaller than the survivors a cohort needs
    could never release, and the run would never reach K."""
    size = next((b for b in range(min(most, episodes), 1, -1) if episodes % b == 0), 0)
    if not size:
        raise CliError(f"demo configuration: no cohort of 2 to {most} users divides --episodes"
                       f" {episodes}: pass --cohort B with a divisor of it")
    return size


def demo_boundaries(mechanism: str) -> list[TrustBoundary]:
    """The registered trust boundaries the demo's algorithm runs across with `mechanism`,
    from the one that trusts the server most to the one that trusts it least."""
    algo = algorithms.get(RunConfig.model_fields["algo"].default)
    return [b for b in trust.by_exposure() if algo.refuses(b) is None
            and (not b.private or b.mechanisms is None or mechanism in b.mechanisms)]


def demo_configs(args: argparse.Namespace, mdp: TabularMDP) -> list[RunConfig]:
    """DP-UCBVI on the demo world across every trust boundary it supports (`demo_boundaries`):
    one preset and knobs for all, one budget for every private run; --counter and --schedule
    shape the central counters of a boundary that has them, --cohort, --dropout and
    --collusion the cohorts of one that sums cohorts (the others release every report).
    Refused here, before any run is created, if invalid."""
    knobs = {"pooled": True} if args.pooled else None
    common = dict(n_states=mdp.S, n_actions=mdp.A, horizon=mdp.H, episodes=args.episodes,
                  preset=args.preset, knobs=knobs)
    delta = args.delta if args.mechanism == "gaussian" else 0.0
    private = dict(epsilon=args.epsilon, delta=delta, mechanism=args.mechanism, **common)
    configs = []
    try:
        for b in demo_boundaries(args.mechanism):
            if not b.private:
                config = RunConfig(privacy=b.name, **common)
            elif b.counters:
                config = RunConfig(privacy=b.name, counter=args.counter, schedule=args.schedule,
                                   **private)
            elif b.cohorts:
                size = demo_cohort(args.episodes, args.cohort)
                config = RunConfig(privacy=b.name, schedule=f"batch:{size}",
                                   dropout=args.dropout, collusion=args.collusion, **private)
            else:
                config = RunConfig(privacy=b.name, **private)
            algo = bind(config)
            if b.cohorts:
                algo.calibration()  # its cohort assumptions leave an honest share
            configs.append(config)
    except ValidationError as exc:
        raise CliError(f"demo configuration: {pydantic_message(exc)}") from None
    except ValueError as exc:
        raise CliError(f"demo configuration: {exc}") from None
    for config in configs:
        try:
            if config.boundary.counters:  # its schedule releases within K episodes
                counter_plan(effective(config))
        except ValueError as exc:
            raise CliError(f"demo configuration: {exc}: pass --schedule batch:B with B at most"
                           f" --episodes (e.g. batch:{max(1, args.episodes // 15)})") from None
    return configs


def run_cohorts(config: RunConfig) -> CohortSpec | None:
    """A run's cohort assumptions (None: its boundary sums no cohorts)."""
    return bind(config).calibration().cohort if config.boundary.cohorts else None


def demo_label(config: RunConfig) -> str:
    """A run's label in the tables and the plot: with its cohort size when it has cohorts."""
    spec = run_cohorts(config)
    return config_label(config) + ("" if spec is None else f" B={spec.size}")


def run_record(api: ServerAPI, config: RunConfig, run_id: str) -> dict[str, Any]:
    """The parts of a result record every demo table reads from the server: label, config,
    ledger and, for a run that sums cohorts, its assumptions and its cohorts by outcome."""
    record = {"label": demo_label(config), "config": config.model_dump(mode="json"),
              "run_id": run_id,
              "ledger": api.ledger(run_id).model_dump(mode="json", exclude={"charges"})}
    if config.boundary.cohorts:
        record["cohorts"] = api.cohorts(run_id).model_dump(mode="json", exclude={"cohorts"})
    return record


def demo_seeds(seed: int | None, run: str, index: int = 0) -> tuple[int, int | None]:
    """(server seed, users' seed) of one demo run (`index`: which of --seeds): independent, from
    the CSPRNG unless --seed asks for a reproducible simulation (then both are derived from it
    along different paths; the first of --seeds along the paths of a one-seed demo). Without
    --seed each user process draws its own seed (None)."""
    if seed is None:
        return secret_seed(), None
    path = (run,) if index == 0 else (run, index)
    return derived_seed(seed, "demo", *path, "server"), derived_seed(seed, "demo", *path, "users")


def _tail(path: Path, lines: int = 8) -> str:
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Swarm:
    """One demo run being played: its id, its user processes and where they write."""

    config: RunConfig
    run_id: str
    index: int  # which of --seeds
    procs: list[subprocess.Popen]
    outputs: list[Path]
    logs: list[Path]
    started: float


def user_processes(args: argparse.Namespace) -> int:
    """User processes per run: one for a sequential run, which has one claim out at a time (a
    second process would only race for it, and under a given seed the order in which processes
    take their noise nonces would then decide the numbers), else --users-processes shared by
    the --seeds runs of a configuration (at least one each)."""
    return 1 if args.sequential else max(1, args.users_processes // args.seeds)


def swarm_shape(config: RunConfig, args: argparse.Namespace) -> tuple[int, int, bool | None]:
    """(user processes, concurrent users in each, sequential or not: None for the server's
    default) of one run. A run that sums cohorts of B users has one process with at least B
    users in flight, so that a cohort fills without waiting for its join timeout, and is never
    sequential (its cohort sums and so its numbers do not depend on the order its members
    report in: a seeded demo repeats all the same)."""
    spec = run_cohorts(config)
    if spec is None:
        return min(user_processes(args), config.episodes), args.concurrency, None
    return 1, max(args.concurrency, spec.size), False


def start_swarm(
    api: ServerAPI, url: str, config: RunConfig, args: argparse.Namespace, tmp: Path,
    children: list[subprocess.Popen], index: int = 0,
) -> Swarm:
    """Create one run (the `index`-th of --seeds) and start its user processes (they play until
    the run is finished)."""
    server_seed, users_seed = demo_seeds(args.seed, config.privacy, index)
    procs_n, concurrency, sequential = swarm_shape(config, args)
    info = api.create_run(config, seed=server_seed, sequential=sequential)
    split = [config.episodes // procs_n + (i < config.episodes % procs_n) for i in range(procs_n)]
    swarm = Swarm(config, info.id, index, [], [], [], time.time())
    for i, n in enumerate(split):
        swarm.outputs.append(tmp / f"users-{info.id}-{i}.json")
        swarm.logs.append(tmp / f"users-{info.id}-{i}.log")
        cmd = module_cmd(
            "privrl.client", "users", "--server", url, "--run", info.id, "--users", str(n),
            "--concurrency", str(concurrency),
            "--horizon", str(config.horizon), "--quiet", "--json-out", str(swarm.outputs[-1]),
        )
        # a given users' seed goes through the environment, not the (world-readable) command
        # line; user k plays from (seed, "user", k) whichever process plays episode k, and the
        # processes share the seed's nonce counter (privrl.client.user_state) in this demo's
        # own folder: its server is the demo's own, new each time, so a seeded demo repeats
        seed_env = {} if users_seed is None else {"PRIVRL_CLIENT_SEED": str(users_seed),
                                                  STATE_DIR_ENV: str(tmp / f"users-state-{index}")}
        swarm.procs.append(spawn(cmd, env=seed_env, log_path=swarm.logs[-1]))
        children.append(swarm.procs[-1])
    return swarm


def wait_swarms(api: ServerAPI, swarms: list[Swarm], every: float = PROGRESS_EVERY) -> None:
    """Wait for every user process, printing the runs' progress now and then (from the public
    run status); a failed or stuck user process is a CliError."""
    start, last = time.time(), time.time()
    while any(p.poll() is None for s in swarms for p in s.procs):
        for s in swarms:
            for proc, log in zip(s.procs, s.logs, strict=True):
                if proc.poll() not in (None, 0):
                    raise CliError(f"a user process of run {s.run_id} exited with code "
                                   f"{proc.returncode}: {_tail(log, 3)}")
        if time.time() - start > USERS_TIMEOUT:
            raise CliError(f"the user processes did not finish within {USERS_TIMEOUT:g}s")
        if time.time() - last >= every:
            last = time.time()
            parts = []
            for s in swarms:
                st = api.get_run(s.run_id).status
                tag = f" #{s.index + 1}" if any(w.index for w in swarms) else ""
                parts.append(f"{config_label(s.config)}{tag} {st.reported}/{st.episodes}")
            print(f"  [{last - start:4.0f} s] " + ", ".join(parts), file=sys.stderr)
        time.sleep(0.2)
    for s in swarms:
        for proc, log in zip(s.procs, s.logs, strict=True):
            if proc.returncode != 0:
                raise CliError(f"a user process of run {s.run_id} exited with code "
                               f"{proc.returncode}: {_tail(log, 3)}")


def played(swarm: Swarm) -> dict[str, Any]:
    """The finished swarm's counts and timings (what `collect` reads)."""
    swarms = [json.loads(p.read_text()) for p in swarm.outputs]
    wall = max(s["ended_at"] for s in swarms) - swarm.started
    return {"run_id": swarm.run_id, "swarms": swarms, "wall_seconds": wall}


def collect(config: RunConfig, played: dict[str, Any], api: ServerAPI, url: str,
            mdp: TabularMDP) -> dict[str, Any]:
    """One result record (the shape client.plots expects, plus an 'http' section)."""
    run_id, swarms = played["run_id"], played["swarms"]
    ev = evaluate(url, run_id, mdp, api=api)
    reported = sum(s["reported"] for s in swarms)
    seconds = max(s["ended_at"] for s in swarms) - min(s["started_at"] for s in swarms)
    claims = [x for s in swarms for x in s["claim_seconds"]]
    reports = [x for s in swarms for x in s["report_seconds"]]
    sizes = [x for s in swarms for x in s["report_bytes"]]
    return {
        **run_record(api, config, run_id),
        "world": {"name": "riverswim", "horizon": mdp.H, "params": {}},
        "regret": regret_summary(ev.regret[None, :], mdp, tail=verdict_tail(ev.regret.size)),
        "policy_versions": len(ev.policies),
        "http": {
            "episodes": reported,
            "seconds": seconds,
            "wall_seconds_with_startup": played["wall_seconds"],
            "episodes_per_second": reported / seconds if seconds > 0 else math.nan,
            "claim_ms_p50": 1e3 * percentile(claims, 50),
            "claim_ms_p99": 1e3 * percentile(claims, 99),
            "report_ms_p50": 1e3 * percentile(reports, 50),
            "report_ms_p99": 1e3 * percentile(reports, 99),
            "report_bytes": int(np.median(sizes)) if sizes else 0,
            "report_bytes_range": [min(sizes, default=0), max(sizes, default=0)],
        },
    }


def merge_seeds(records: list[dict[str, Any]], mdp: TabularMDP) -> dict[str, Any]:
    """The records of one configuration's --seeds runs as one record: a regret row per seed
    (the verdict reads their mean, `seed_verdicts` each row), every run's id (`run_ids`;
    `run_id` stays the first's), the HTTP figures of all its runs together."""
    if len(records) == 1:
        return records[0]
    rows = np.vstack([np.asarray(r["regret"]["per_episode"], dtype=np.float64)
                      for r in records])
    merged = dict(records[0])
    merged["run_ids"] = [r["run_id"] for r in records]
    merged["regret"] = regret_summary(rows, mdp, tail=records[0]["regret"]["tail_episodes"])
    merged["policy_versions"] = max(r["policy_versions"] for r in records)  # as in-process
    merged["policy_changes"] = [r["policy_versions"] - 1 for r in records]  # per seed
    https = [r["http"] for r in records]
    if "cohorts" in records[0]:  # every seed's cohorts, by outcome
        merged["cohorts"] = dict(records[0]["cohorts"], counts={
            k: sum(r["cohorts"]["counts"][k] for r in records)
            for k in records[0]["cohorts"]["counts"]})
    merged["http"] = {
        "episodes": sum(h["episodes"] for h in https),
        "seconds": max(h["seconds"] for h in https),
        "episodes_per_second": sum(h["episodes_per_second"] for h in https),
        **{k: float(np.median([h[k] for h in https]))
           for k in ("claim_ms_p50", "claim_ms_p99", "report_ms_p50", "report_ms_p99")},
        "report_bytes": int(np.median([h["report_bytes"] for h in https])),
        "report_bytes_range": [min(h["report_bytes_range"][0] for h in https),
                               max(h["report_bytes_range"][1] for h in https)],
    }
    return merged


OUTCOME = {"yes": "learned", "partly": "partly learned", "no": "did not learn"}
TERMS = {
    "pooled": "the learner pools its statistics over the steps h of an episode (RiverSwim is the"
    " same at every step)",
    "eps spent, delta": "the privacy loss each run's ledger charged every user (every private"
    " run has the same budget; 0 = non-private)",
    "claim / report p50/p99 ms": "median and 99th-percentile time of a user's request to claim"
    " an episode (and get the policy) / to report it",
    "ep/s": "episodes reported per second",
    "report bytes": "median size of one report",
}


def print_terms(*names: str) -> None:
    """What the named terms of the tables mean, on one line."""
    print("; ".join(f"{name}: {TERMS[name]}" for name in names) + ".")


def percent_of_random(result: dict[str, Any]) -> float:
    """The last episodes' mean regret as a percentage of the uniformly random policy's."""
    reg = result["regret"]
    return 100 * reg["tail_per_episode_mean"] / reg["random_policy_per_episode"]


def window_percents(result: dict[str, Any], windows: int = WINDOWS) -> np.ndarray:
    """The verdict's tail (the last `tail_episodes`) cut into up to `windows` consecutive
    windows: each one's mean regret as a % of random (mean over seeds; `privrl.verdict`)."""
    reg = result["regret"]
    per = np.asarray(reg["per_episode"], dtype=np.float64).mean(axis=0)
    return tail_windows(per, reg["tail_episodes"], reg["random_policy_per_episode"], windows)


def steady_verdict(result: dict[str, Any]) -> tuple[str, str]:
    """(verdict of the last 10%, the windows' range of % of random) as table cells: the verdict
    is 'yes', 'partly' or 'no' only when every window of the tail agrees, else 'unsteady'."""
    pcts = window_percents(result)
    return steady(pcts), f"{pcts.min():.0f}-{pcts.max():.0f}%"


def seed_percents(result: dict[str, Any]) -> np.ndarray:
    """Each seed's last-10% mean regret as a % of random."""
    reg = result["regret"]
    per = np.asarray(reg["per_episode"], dtype=np.float64)
    return 100 * per[:, per.shape[1] - reg["tail_episodes"]:].mean(axis=1) / reg[
        "random_policy_per_episode"]


def seed_verdicts(result: dict[str, Any]) -> list[str]:
    """Each seed's own verdict (the same rule on its own regret row)."""
    reg = result["regret"]
    rows = np.asarray(reg["per_episode"], dtype=np.float64)
    return [steady(tail_windows(row, reg["tail_episodes"], reg["random_policy_per_episode"]))
            for row in rows]


def interval_text(result: dict[str, Any]) -> str:
    """'12% [5, 19]' (the mean over seeds and its 95% Student-t interval), or '12%' (one
    seed)."""
    mean, lo, hi = interval(seed_percents(result))
    return f"{mean:.0f}%" if math.isnan(lo) else f"{mean:.0f}% [{lo:.0f}, {hi:.0f}]"


def print_seed_verdicts(results: list[dict[str, Any]]) -> None:
    """Each configuration's runs, one verdict per seed, and the interval over its seeds."""
    seeds = len(results[0]["regret"]["per_episode"]) if results else 0
    if seeds < 2:
        print("one seed per configuration: no interval (--seeds 3 or more gives one)")
        return
    width = label_width(results)
    print(f"each run's verdict ({seeds} seeds per configuration) and % of random over the seeds,"
          f" mean [95% Student-t interval]:")
    for r in results:
        cells = ", ".join(f"{v} ({p:.0f}%)" for v, p in
                          zip(seed_verdicts(r), seed_percents(r), strict=True))
        print(f"  {r['label']:<{width}} {interval_text(r):>16}   runs: {cells}")


def spend_text(record: dict[str, Any]) -> tuple[str, str]:
    """(epsilon, delta) a run's ledger spent per user, as table cells."""
    if not trust.get(record["config"]["privacy"]).private:
        return "0 (none)", "0"
    led = record["ledger"]
    eps = led["epsilon"]
    return (eps if isinstance(eps, str) else f"{eps:.4g}"), f"{led['delta']:.0e}"


def label_width(results: list[dict[str, Any]]) -> int:
    """The tables' first column: 27 characters, or the longest label."""
    return max([27, *(len(r["label"]) for r in results)])


def _tail_episodes(results: list[dict[str, Any]]) -> int:
    return results[0]["regret"]["tail_episodes"] if results else 1


def print_table(results: list[dict[str, Any]]) -> None:
    """What each configuration learned and spent, then its HTTP figures, then the terms."""
    tail, width = _tail_episodes(results), label_width(results)
    print(f"{'configuration':<{width}} {'cum. regret':>11} {f'last-{tail}/ep':>11}"
          f" {'% of random':>11} {'learned':>8} {'windows':>9} {'eps spent':>9} {'delta':>7}")
    for r in results:
        reg = r["regret"]
        eps_txt, delta_txt = spend_text(r)
        learned, spread = steady_verdict(r)
        print(f"{r['label']:<{width}} {reg['final_cumulative_mean']:>11.1f} "
              f"{reg['tail_per_episode_mean']:>11.4f} {percent_of_random(r):>10.1f}% "
              f"{learned:>8} {spread:>9} {eps_txt:>9} {delta_txt:>7}")
    print_legend(results, tail)
    print_cohorts(results)
    print()
    print(f"{'configuration':<{width}} {'episodes':>8} {'ep/s':>6} {'claim p50/p99 ms':>17} "
          f"{'report p50/p99 ms':>18} {'report bytes':>12}")
    for r in results:
        http = r["http"]
        print(f"{r['label']:<{width}} {http['episodes']:>8} {http['episodes_per_second']:>6.0f} "
              f"{http['claim_ms_p50']:>8.2f}/{http['claim_ms_p99']:<8.2f} "
              f"{http['report_ms_p50']:>9.2f}/{http['report_ms_p99']:<8.2f} "
              f"{http['report_bytes']:>12}")
    print_terms(*TERMS)


def print_legend(results: list[dict[str, Any]], tail: int) -> None:
    """What the columns of a results table mean (nothing when there are no results)."""
    if not results:
        return
    rnd = results[0]["regret"]["random_policy_per_episode"]
    windows = min(WINDOWS, tail)
    print(f"% of random: the last {tail} episodes' (10%) mean regret divided by a uniformly random"
          f" policy's ({rnd:.4f} per episode): 0% = optimal, 100% = no better than random."
          f" learned: yes <= {LEARNED:g}%, no >= {NOT_LEARNED:g}%, when all {windows} windows of"
          f" those episodes agree, else unsteady; windows: their lowest and highest % of random.")
    for note in policy_never_changed_notes(results):
        print(note)


def print_comparison(results: list[dict[str, Any]]) -> None:
    """The runs side by side: regret, % of random, what each spent, how fast it was played."""
    tail, width = _tail_episodes(results), label_width(results)
    print(f"{'configuration':<{width}} {'episodes':>8} {'cum. regret':>11} {f'last-{tail}/ep':>11}"
          f" {'% of random':>11} {'learned':>8} {'windows':>9} {'eps spent':>9} {'delta':>7}"
          f" {'ep/s':>6}")
    for r in results:
        reg = r["regret"]
        eps_txt, delta_txt = spend_text(r)
        learned, spread = steady_verdict(r)
        rate = r["http"]["episodes_per_second"]
        print(f"{r['label']:<{width}} {r['http']['episodes']:>8}"
              f" {reg['final_cumulative_mean']:>11.1f} {reg['tail_per_episode_mean']:>11.4f}"
              f" {percent_of_random(r):>10.1f}%"
              f" {learned:>8} {spread:>9} {eps_txt:>9} {delta_txt:>7} {rate:>6.0f}")
    print_legend(results, tail)
    print_cohorts(results)
    print_terms("pooled", "eps spent, delta", "ep/s")


def outcome(steady: str, spread: str) -> str:
    """A steady verdict in words ('learned'; 'unsteady, windows 3-96%')."""
    return f"unsteady, windows {spread}" if steady == "unsteady" else OUTCOME[steady]


def boundary_of(record: dict[str, Any]) -> TrustBoundary:
    """The trust boundary a result record's run used."""
    return trust.get(record["config"]["privacy"])


def why_text(record: dict[str, Any]) -> str:
    """How a private run's boundary noises what it releases, from what the boundary declares
    (a phrase; '' for one the demo has no words for)."""
    b, cfg = boundary_of(record), record["config"]
    if b.counters:
        schedule = cfg.get("schedule") or "every"
        released = "every episode" if schedule == "every" else f"on schedule {schedule}"
        return (f"the {b.label} server adds noise once to sums over all users"
                f" ({cfg['counter']} counters, released {released})")
    if b.cohorts and "cohorts" in record:
        c = record["cohorts"]
        return (f"each {b.label} user adds a share of its cohort's noise and masks its report,"
                f" so the server sees only sums of {c['size']} users, each carrying one"
                f" central-sized noise (calibrated for up to {c['dropout']:g} of a cohort"
                f" dropping out and {c['collusion']:g} colluding with the server): the"
                f" {b.label} billboard adds one such noise per cohort")
    if b.local_noise:
        return (f"every {b.label} user noises its own report, so the noise in the {b.label}"
                " billboard grows with the number of users")
    return ""


def story(results: list[dict[str, Any]]) -> str:
    """What the table shows, in words (from the numbers, not assumed): each private run's
    verdict at the one budget, and how its boundary noises what it releases."""
    private = [r for r in results if boundary_of(r).private]
    if len(private) < 2:
        return ""
    first = private[0]
    eps, delta = first["ledger"]["epsilon"], first["ledger"]["delta"]
    eps_txt = eps if isinstance(eps, str) else f"{eps:.3g}"
    cells = []
    for i, r in enumerate(private):
        verdict_cell, spread = steady_verdict(r)
        where = "is at" if i == 0 else "at"
        of = " of random" if i == 0 else ""
        cells.append(f"{boundary_of(r).label} {where} {interval_text(r)}{of}"
                     f" ({outcome(verdict_cell, spread)})")
    lead = boundary_of(first).label
    more = "" if steady_verdict(first)[0] == "yes" else (
        f" {first['config']['episodes']} episodes were not enough for {lead} to learn steadily"
        " at this budget: give it more episodes (--episodes) or a larger budget (--epsilon).")
    whys = "; ".join(w for w in map(why_text, private) if w)
    why = f" {whys[:1].upper()}{whys[1:]}." if whys else ""
    names = " ".join(boundary_of(r).name for r in private)
    return (
        f"Same budget, eps = {eps_txt} and delta = {delta:g} per user in every private run: over"
        f" the last 10% of episodes {', '.join(cells)}." + more + why +
        f" Over more episodes they learn at smaller budgets: `privrl run --privacy {names}"
        " --knob pooled=true --mechanism gaussian --episodes 50000 --epsilon 0.5 1 5 20`"
        " measures it."
    )


def print_cohorts(results: list[dict[str, Any]]) -> None:
    """The assumptions of every run that sums cohorts, and what its cohorts did."""
    for r in results:
        c = r.get("cohorts")
        if c is not None:
            n = c["counts"]
            print(f"{r['label']}: {c['assumptions']}; cohorts released {n['released']},"
                  f" refused {n['refused']}, aborted {n['aborted']}")


def draw(results: list[dict[str, Any]], horizon: int, episodes: int, path: Path) -> Path:
    """The demo's plot of `results` (regret.png), its title stating every cohort run's
    assumptions, each wrapped to the figure's width."""
    cohorts = "".join("\n" + textwrap.fill(f"{r['label']}: {r['cohorts']['assumptions']}",
                                            TITLE_WIDTH) for r in results if "cohorts" in r)
    return plot_learning(results, path, title=f"RiverSwim (H = {horizon}) over HTTP, K ="
                         f" {episodes} per run: exact regret of every episode's policy" + cohorts)


def report(results: list[dict[str, Any]], args: argparse.Namespace, out: Path) -> None:
    """Write summary.json and regret.png to `out`; print the tables, the story and the files."""
    seeds = ("derived from --seed" if args.seed is not None else "drawn from the OS CSPRNG")
    (out / "summary.json").write_text(json.dumps({"results": results, "seeds": seeds}))
    plot = draw(results, args.horizon, args.episodes, out / "regret.png")
    print_table(results)
    print_seed_verdicts(results)
    text = story(results)
    if text:
        print(text)
    if args.seed is None:
        print("seeds: drawn from the OS CSPRNG, so a rerun gives other numbers; --seed N"
              " --sequential repeats a demo exactly (concurrent users report in a varying order).")
    elif not args.sequential:
        print("seeds: derived from --seed; the users report concurrently, in a varying order, so"
              " a rerun still differs: add --sequential to repeat it exactly.")
    print(f"plot: {plot}")
    print(f"results: {out / 'summary.json'}", flush=True)


def keep_serving(server: ServerProcess) -> None:
    """Leave the server (and its dashboard) up until Ctrl-C or SIGTERM, or until it stops by
    itself."""
    print(f"dashboard: {server.url}/ (the server keeps serving these runs until Ctrl-C)",
          flush=True)
    proc = server.proc
    try:
        while proc is not None and proc.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (`sigterm_interrupts`)
        print("stopping the server", file=sys.stderr)
        return
    # a terminal's Ctrl-C reaches the server too, which may stop first: that is a clean end
    if proc is not None and proc.returncode not in (0, -signal.SIGINT, -signal.SIGTERM):
        raise CliError(f"the server exited with code {proc.returncode}: {server.log_tail(3)}")


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo end to end (with --keep-serving, then serve until Ctrl-C); every child
    process is stopped whatever happens."""
    out = Path(args.out)
    refuse_overwrite(out, DEMO_OUTPUTS, args.force)
    out.mkdir(parents=True, exist_ok=True)
    mdp = riverswim(args.horizon)
    configs = demo_configs(args, mdp)
    accel.load()  # before the server and the users wait on them (a cold cache: ~30 s, shown)
    token = secrets.token_urlsafe(32)
    results: list[dict[str, Any]] = []
    children: list[subprocess.Popen] = []
    with sigterm_interrupts(), tempfile.TemporaryDirectory(prefix="privrl-demo-") as tmp_name:
        tmp = Path(tmp_name)
        # the database is temporary and deleted at the end: a crash-safe commit (FULL) buys
        # nothing here, NORMAL saves an fsync per report
        server = ServerProcess(tmp / "demo.db", token, log_path=tmp / "server.log",
                               sequential=args.sequential,
                               env={"PRIVRL_DB_SYNCHRONOUS": "NORMAL"})
        try:
            try:
                server.start(timeout=SERVER_READY_TIMEOUT)
            except RuntimeError as exc:
                raise CliError(f"{exc}: {server.log_tail(3)}") from None
            after = ("kept after the end: --keep-serving" if args.keep_serving else
                     "until the demo ends; --keep-serving keeps it up")
            print(f"server at {server.url} (pid {server.proc.pid if server.proc else '?'}); "
                  f"{mdp!r}, K = {args.episodes}, {args.seeds} run(s) per configuration, "
                  f"{user_processes(args)} user process(es) per run x "
                  f"{args.concurrency} concurrent users\n"
                  f"dashboard: {server.url}/ (live charts of the runs, {after})",
                  file=sys.stderr, flush=True)
            with ServerAPI(server.url, token=token) as api:
                swarms = [start_swarm(api, server.url, c, args, tmp, children, i)
                          for c in configs for i in range(args.seeds)]
                print("runs side by side: " + ", ".join(
                    f"{config_label(s.config)} = {s.run_id}" for s in swarms), file=sys.stderr)
                wait_swarms(api, swarms)
                for j, config in enumerate(configs):
                    mine = swarms[j * args.seeds:(j + 1) * args.seeds]
                    results.append(merge_seeds([collect(config, played(s), api, server.url, mdp)
                                                for s in mine], mdp))
            report(results, args, out)
            if args.keep_serving:
                keep_serving(server)
        except ApiError as exc:
            raise CliError(f"{exc}; server log: {server.log_tail(3)}") from None
        finally:
            for proc in children:
                stop_process(proc)
            server.stop()
    return 0
