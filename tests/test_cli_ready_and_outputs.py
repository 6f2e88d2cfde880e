"""`privrl wait`: a line after `privrl serve ... &` that returns once the server is ready, and
says why when it is not (issue 45, part 2); `privrl users` checks its output files first."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from privrl.client.cli import main as cli_main


class Ready(BaseHTTPRequestHandler):
    """/readyz answers `status` (200 ready, 503 held); nothing else is served."""

    status = 200

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(self.status if self.path == "/readyz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def probe(request: pytest.FixtureRequest) -> Iterator[str]:
    """A loopback HTTP server in a thread of this process (no process is started)."""
    handler = type("Handler", (Ready,), {"status": request.param})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("probe", [200], indirect=True)
def test_wait_returns_once_the_server_is_ready(probe: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["wait", "--server", probe, "--timeout", "5"]) == 0
    assert capsys.readouterr().out == f"server at {probe} is ready\n"


@pytest.mark.parametrize("probe", [503], indirect=True)
def test_a_server_that_stays_unready_is_an_error_that_says_why(
        probe: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["wait", "--server", probe, "--timeout", "0.3"]) == 2
    err = capsys.readouterr().err
    assert "was not ready after 0.3s (HTTP 503)" in err and "privrl runs continue" in err


def test_users_check_their_output_files_before_the_test(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A missing folder is made at the start; a path that cannot take a file is refused before
    any user plays (here before the unreachable server is even asked)."""
    report = tmp_path / "results" / "load" / "report.json"
    code = cli_main(["users", "--server", "http://127.0.0.1:9", "--run", "r", "--report",
                     str(report), "--attempts", "1", "--quiet"])
    assert code == 2 and report.parent.is_dir()  # made first; the server then refused
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    capsys.readouterr()
    code = cli_main(["users", "--server", "http://127.0.0.1:9", "--run", "r", "--plot",
                     str(blocker / "plot.png")])
    err = capsys.readouterr().err
    assert code == 2 and f"--plot {blocker / 'plot.png'}: cannot make its folder" in err
    assert "127.0.0.1:9" not in err  # refused before the server was asked
