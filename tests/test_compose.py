"""docker-compose.yml: valid against the official Compose schema, and its services' exact commands
and environment run as local processes on loopback (no Docker engine here).

Only what Docker itself provides is emulated: `${VAR:-default}` interpolation, the service name
`server` resolving to the server (here 127.0.0.1, bound to loopback instead of 0.0.0.0), named
volumes (here temporary directories), the image's `privrl` / `python` executables, the
healthcheck loop and the order that `depends_on` conditions impose.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import yaml
from privrl.client.api import ServerAPI
from privrl.client.cli import build_parser
from privrl.client.cli_common import world_from_args
from privrl.client.demo import demo_configs
from privrl.client.procs import child_env, free_port, stop_process
from privrl.client.remote_cli import DEMO_COHORT, DEMO_EPSILON, cmd_compare
from privrl.worlds import riverswim
from support.vendored import COMPOSE_SCHEMA, REPO_ROOT

COMPOSE = REPO_ROOT / "docker-compose.yml"
VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def load() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def validate(doc: dict[str, Any]) -> None:
    """Validate against the official Compose Specification schema (JSON Schema draft 7)."""
    schema = json.loads(COMPOSE_SCHEMA.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.Draft7Validator(schema).validate(doc)


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose-style interpolation of every string in a loaded document."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def repl(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, default = m.group(2), m.group(3) or ""
        current = env.get(name)
        if op == ":-" and not current:
            return default
        if op == "-" and current is None:
            return default
        return current or ""

    return VAR.sub(repl, value)


def test_compose_file_is_valid_against_the_official_schema() -> None:
    doc = load()
    validate(doc)
    plain = interpolate(doc, {})
    validate(plain)
    services = doc["services"]
    assert {"server", "setup", "users"} <= set(services)
    server, setup, users = services["server"], services["setup"], services["users"]
    assert "/readyz" in " ".join(server["healthcheck"]["test"])
    assert server.get("restart", "no") == "no"  # a crashed server is a finding, not a loop
    assert any(str(v).startswith("privrl-data:/data") for v in server["volumes"])
    assert set(doc["volumes"]) >= {"privrl-data", "privrl-run"}
    assert {"PRIVRL_ADMIN_TOKEN", "PRIVRL_DB"} <= set(server["environment"])
    for name in ("server", "setup"):  # the token comes from the environment: no default
        assert services[name]["environment"]["PRIVRL_ADMIN_TOKEN"] == "${PRIVRL_ADMIN_TOKEN:-}"
        assert plain["services"][name]["environment"]["PRIVRL_ADMIN_TOKEN"] == ""
    assert [str(p).split(":")[0] for p in plain["services"]["server"]["ports"]] == ["127.0.0.1"]
    assert setup["command"][:3] == ["privrl", "compare", "--create"]
    assert "--dashboard" in setup["command"]
    assert users["depends_on"]["server"]["condition"] == "service_healthy"
    assert users["depends_on"]["setup"]["condition"] == "service_started"
    assert {"--run-file", "--wait-for-file", "--progress-every"} <= set(users["command"])
    assert "replicas" in users["deploy"]
    # the runs require credentials: setup writes them to the shared volume, every user reads them
    keys = setup["command"][setup["command"].index("--credentials") + 1]
    assert users["command"][users["command"].index("--credentials") + 1] == keys
    mount = keys.rsplit("/", 1)[0]
    assert f"privrl-run:{mount}" in setup["volumes"]
    assert f"privrl-run:{mount}:ro" in users["volumes"]


def test_compose_defaults_parse_into_the_demo_runs() -> None:
    """The setup's command with every variable at its default, through the real parser, makes
    `privrl demo`'s runs: the JDP run's budget below 10 with the measured counter and schedule."""
    argv = interpolate(load(), {})["services"]["setup"]["command"]
    assert argv[:2] == ["privrl", "compare"]
    args = build_parser().parse_args(argv[1:])
    assert args.create and args.handler is cmd_compare
    made = demo_configs(args, world_from_args(args).build())
    demo = build_parser().parse_args(["demo"])
    assert made == demo_configs(demo, riverswim(demo.horizon))
    none, jdp, secagg, ldp = made
    assert (jdp.episodes, jdp.horizon, jdp.mechanism, jdp.delta) == (3000, 20, "gaussian", 1e-5)
    assert jdp.epsilon == secagg.epsilon == ldp.epsilon == DEMO_EPSILON
    assert (jdp.counter, jdp.schedule) == ("matrix", "batch:200") and ldp.schedule is None
    # secure aggregation: the demo's cohorts and assumptions, and every users container keeps a
    # whole cohort in flight (its members run the rounds together)
    assert (secagg.schedule, secagg.dropout, secagg.collusion) == (f"batch:{DEMO_COHORT}", 0.1,
                                                                   0.1)
    users = interpolate(load(), {})["services"]["users"]["command"]
    assert int(users[users.index("--concurrency") + 1]) >= DEMO_COHORT


def test_image_is_small_and_quick_to_rebuild() -> None:
    """A .dockerignore keeps the context to what the image needs; the dependencies are installed
    in a layer of their own, before the source is copied."""
    ignored = [ln.strip() for ln in (REPO_ROOT / ".dockerignore").read_text().splitlines()
               if ln.strip() and not ln.startswith("#")]
    assert {".git", ".venv", "tests", "docs", "results", "**/__pycache__"} <= set(ignored)
    assert not {"README.md", "pyproject.toml", "shared", "server", "client"} & set(ignored)
    docker = (REPO_ROOT / "Dockerfile").read_text()
    assert docker.index("pip install -r") < docker.index("COPY shared")
    assert "pip install --no-deps ." in docker


class LocalCompose:
    """Run services of the interpolated compose file as local processes."""

    def __init__(self, doc: dict[str, Any], tmp: Path) -> None:
        self.doc, self.tmp = doc, tmp
        self.procs: list[subprocess.Popen] = []

    def _volumes(self, service: dict[str, Any]) -> dict[str, str]:
        """Container path -> local directory of each named volume the service mounts."""
        out = {}
        for spec in service.get("volumes", []):
            name, target = spec.split(":")[:2]
            assert name in self.doc["volumes"], f"{name} is not a named volume"
            local = self.tmp / name
            local.mkdir(exist_ok=True)
            out[target] = str(local)
        return out

    def _localize(self, text: str, volumes: dict[str, str]) -> str:
        text = text.replace("://server:", "://127.0.0.1:")
        if text == "0.0.0.0":
            return "127.0.0.1"
        for target, local in volumes.items():
            if text == target or text.startswith(target + "/"):
                return local + text[len(target):]
        return text

    def command(self, name: str, argv: list[str]) -> tuple[list[str], dict[str, str]]:
        """The service's argv and environment, ready for a local process."""
        service = self.doc["services"][name]
        volumes = self._volumes(service)
        argv = [self._localize(a, volumes) for a in argv]
        if argv[0] == "privrl":
            argv = [sys.executable, "-m", "privrl.client", *argv[1:]]
        elif argv[0] == "python":
            argv = [sys.executable, *argv[1:]]
        env = {k: self._localize(str(v), volumes) for k, v in service["environment"].items()}
        return argv, child_env(env)

    def start(self, name: str) -> subprocess.Popen:
        argv, env = self.command(name, self.doc["services"][name]["command"])
        log = open(self.tmp / f"{name}-{len(self.procs)}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(argv, env=env, cwd=self.tmp, stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL)
        log.close()
        self.procs.append(proc)
        return proc

    def wait_healthy(self, name: str, timeout: float = 60.0) -> None:
        """Run the service's healthcheck `test` (CMD form) until it succeeds."""
        test = self.doc["services"][name]["healthcheck"]["test"]
        assert test[0] == "CMD"
        argv, env = self.command(name, test[1:])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.procs[0].poll() is None, self.log(name)
            if subprocess.run(argv, env=env, capture_output=True, check=False).returncode == 0:
                return
            time.sleep(0.2)
        raise AssertionError(f"{name} never became healthy: {self.log(name)}")

    def log(self, name: str) -> str:
        return "\n".join(p.read_text(errors="replace")[-8000:]
                         for p in self.tmp.glob(f"{name}-*.log"))

    def stop(self) -> None:
        for proc in reversed(self.procs):
            stop_process(proc)


def compose_env(port: int, **extra: str) -> dict[str, str]:
    """The host environment without PRIVRL_* settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVRL_")}
    return {**env, "PRIVRL_PORT": str(port), **extra}


@pytest.mark.slow
def test_compose_services_run_as_local_processes(tmp_path: Path) -> None:
    port = free_port()
    env = compose_env(port, PRIVRL_EPISODES="40", PRIVRL_SCHEDULE="batch:10",
                      PRIVRL_USER_REPLICAS="2", PRIVRL_ADMIN_TOKEN=secrets.token_hex(12))
    doc = interpolate(load(), env)
    validate(doc)
    local = LocalCompose(doc, tmp_path)
    try:
        local.start("server")
        local.wait_healthy("server")
        setup = local.start("setup")  # users start beside it and wait for the run file
        replicas = int(doc["services"]["users"]["deploy"]["replicas"])
        users = [local.start("users") for _ in range(replicas)]
        assert setup.wait(timeout=180) == 0, local.log("setup")
        for proc in users:
            assert proc.wait(timeout=60) == 0, local.log("users")
        run_ids = (tmp_path / "privrl-run" / "run_ids").read_text().split()
        assert len(run_ids) == 4
        with ServerAPI(f"http://127.0.0.1:{port}") as api:
            infos = [api.get_run(run_id) for run_id in run_ids]
            cohorts = api.cohorts(run_ids[2])
        assert [i.config.privacy for i in infos] == ["none", "jdp", "secagg", "ldp"]
        assert all(i.status.finished and i.status.reported == 40 for i in infos)
        # the users containers ran the secure-aggregation rounds: 4 cohorts of 10, released
        assert cohorts.size == 10 and cohorts.counts["released"] == 4, cohorts
        out = [ln for ln in local.log("setup").splitlines() if ln.strip()]
        assert out[-1].startswith(f"open http://localhost:{port} : the dashboard")
        table = "\n".join(out)
        assert "% of random: " in table and "eps spent" in table and "ep/s" in table
        assert f"ldp eps={DEMO_EPSILON:g} gaussian pooled" in table
        assert f"secagg eps={DEMO_EPSILON:g} gaussian pooled B=10: cohorts of 10, dropout <= 0.1" \
            in table and "cohorts released 4, refused 0, aborted 0" in table
        assert re.search(r"users \w+: \d+ episodes played by this process", local.log("users")) \
            or "run finished" in local.log("users")
        assert (tmp_path / "privrl-data" / "privrl.db").exists()
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
        assert "privrl dashboard" in httpx.get(f"http://127.0.0.1:{port}/", timeout=5).text
    finally:
        local.stop()


@pytest.mark.slow
def test_compose_without_a_token_stops_with_one_line(tmp_path: Path) -> None:
    port = free_port()
    doc = interpolate(load(), compose_env(port))
    local = LocalCompose(doc, tmp_path)
    try:
        local.start("server")
        local.wait_healthy("server")
        setup = local.start("setup")
        assert setup.wait(timeout=60) == 2
        lines = [ln for ln in local.log("setup").splitlines() if ln.strip()]
        assert lines == ["privrl: error: the admin token is missing: set PRIVRL_ADMIN_TOKEN to the"
                         " server's admin token"], lines
    finally:
        local.stop()
