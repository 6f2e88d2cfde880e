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
from privrl.client.procs import REPO_ROOT, child_env, free_port, stop_process

COMPOSE = REPO_ROOT / "docker-compose.yml"
# The official Compose Specification schema, vendored unmodified (see tests/data/README.md).
SCHEMA = Path(__file__).resolve().parent / "data" / "compose-spec.json"
VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def load() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def validate(doc: dict[str, Any]) -> None:
    """Validate against the official Compose Specification schema (JSON Schema draft 7)."""
    schema = json.loads(SCHEMA.read_text())
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
    validate(interpolate(doc, {}))
    services = doc["services"]
    assert {"server", "setup", "users"} <= set(services)
    server, users = services["server"], services["users"]
    assert "healthz" in " ".join(server["healthcheck"]["test"])
    assert any(str(v).startswith("privrl-data:/data") for v in server["volumes"])
    assert set(doc["volumes"]) >= {"privrl-data", "privrl-run"}
    assert {"PRIVRL_ADMIN_TOKEN", "PRIVRL_DB"} <= set(server["environment"])
    assert users["depends_on"]["server"]["condition"] == "service_healthy"
    assert users["depends_on"]["setup"]["condition"] == "service_completed_successfully"
    assert "replicas" in users["deploy"]
    assert "${PRIVRL_PRIVACY:-ldp}" in services["setup"]["command"]
    assert (REPO_ROOT / "Dockerfile").exists()


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
        return "\n".join(p.read_text(errors="replace")[-2000:]
                         for p in self.tmp.glob(f"{name}-*.log"))

    def stop(self) -> None:
        for proc in reversed(self.procs):
            stop_process(proc)


@pytest.mark.parametrize("privacy", ["ldp", "jdp"])
def test_compose_services_run_as_local_processes(tmp_path: Path, privacy: str) -> None:
    port = free_port()
    env = {
        "PRIVRL_PORT": str(port), "PRIVRL_EPISODES": "40", "PRIVRL_USER_REPLICAS": "2",
        "PRIVRL_PRIVACY": privacy, "PRIVRL_ADMIN_TOKEN": secrets.token_hex(12),
    }
    doc = interpolate(load(), {**{k: v for k, v in os.environ.items()
                                  if not k.startswith("PRIVRL_")}, **env})
    validate(doc)
    local = LocalCompose(doc, tmp_path)
    try:
        local.start("server")
        local.wait_healthy("server")
        setup = local.start("setup")
        assert setup.wait(timeout=60) == 0, local.log("setup")
        run_file = tmp_path / "privrl-run" / "run_id"
        run_id = run_file.read_text().strip()
        replicas = int(doc["services"]["users"]["deploy"]["replicas"])
        users = [local.start("users") for _ in range(replicas)]
        for proc in users:
            assert proc.wait(timeout=90) == 0, local.log("users")
        with ServerAPI(f"http://127.0.0.1:{port}") as api:
            info = api.get_run(run_id)
        assert info.config.privacy == privacy and info.config.episodes == 40
        assert info.status.finished and info.status.reported == 40
        assert (tmp_path / "privrl-data" / "privrl.db").exists()
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    finally:
        local.stop()
