"""`privrl audit proxy` as a child process, for the tests that put it between users and a
server."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
from privrl.client.audit.proxy import REPORT_PATH
from privrl.client.procs import child_env, free_port, module_cmd, wait_ready


class Proxy:
    """`privrl audit proxy --json` as a child process on a free loopback port."""

    def __init__(self, upstream: str, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        cmd = module_cmd("privrl.client", "audit", "proxy", "--listen", str(self.port),
                         "--upstream", upstream, "--log", str(log), "--json")
        self.proc = subprocess.Popen(cmd, env=child_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        wait_ready(self.url + REPORT_PATH, self.proc, timeout=60)

    def report(self) -> dict[str, Any]:
        """The report so far, from the proxy's own route."""
        return httpx.get(self.url + REPORT_PATH, timeout=30).json()

    def stop(self) -> tuple[int, dict[str, Any], str]:
        """SIGTERM; exit code, the final JSON report and stderr."""
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, json.loads(out), err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=30)
