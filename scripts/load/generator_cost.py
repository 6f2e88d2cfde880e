"""What the Locust generator itself spends per request, with the server taken out of the picture.

    python scripts/load/generator_cost.py [--greenlets 32] [--requests 3000] [--rounds 3]

A real privrl server (temporary database) gives one real ticket, the report of its episode and
the server's acknowledgement; it then stops. A canned HTTP server in another process answers
every request with those same bytes at once, so the measuring process (gevent, Locust's
FastHttpSession, as `locustfile.py`) pays only for its own side. Per flow it prints the
process's CPU microseconds per request: `/healthz` (the ceiling's user), an episode with a fixed
report body (claim, read the ticket, report, read the ack: the HTTP side of an episode) and a
real episode (the same with `play()`, the user's rollout and report). Besides, `play()` alone in
a tight loop, microseconds per episode. One JSON line per round.
"""

from gevent import monkey

monkey.patch_all()  # before anything imports socket, as under Locust

import argparse  # noqa: E402
import json  # noqa: E402
import secrets  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402
from locust.contrib.fasthttp import FastHttpSession  # noqa: E402
from locust.event import EventHook  # noqa: E402
from privrl import algorithms  # noqa: E402
from privrl.client.api import ServerAPI, run_path  # noqa: E402
from privrl.client.load.bench import bench_config  # noqa: E402
from privrl.client.procs import ServerProcess, free_port, wait_ready  # noqa: E402
from privrl.client.users import UserContext, play  # noqa: E402
from privrl.protocol import API_VERSION, Ack, Ticket  # noqa: E402
from privrl.worlds.registry import make  # noqa: E402

JSON = {"Content-Type": "application/json"}
SEED = 1234  # the measured users' seed: nothing here is published

CANNED = r"""
import asyncio, json, sys
answers = {k: v.encode() for k, v in json.loads(sys.stdin.read()).items()}
def reply(body):
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(body), body)
REPLY = {k: reply(v) for k, v in answers.items()}
class Canned(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buf = transport, b""
    def data_received(self, data):
        self.buf += data
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            head, length = self.buf[:end], 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            path, self.buf = head.split(b" ")[1], self.buf[end + 4 + length:]
            kind = next((k for k in ("claims", "reports") if k.encode() in path), "healthz")
            self.transport.write(REPLY[kind])
async def main():
    server = await asyncio.get_running_loop().create_server(Canned, "127.0.0.1", int(sys.argv[1]))
    await server.serve_forever()
asyncio.run(main())
"""


def real_answers(tmp: Path) -> tuple[UserContext, dict[str, str]]:
    """One real ticket, its report and the acknowledgement, from a real server (then stopped)."""
    token = secrets.token_urlsafe(16)
    with ServerProcess(tmp / "real.db", token) as server, ServerAPI(server.url, token) as api:
        info = api.create_run(bench_config("jdp", 10.0))
        world = make(algorithms.get(info.config.algo).default_world, info.config.horizon)
        ctx = UserContext.create(info, world)
        path = f"/{API_VERSION}{run_path(info.id)}"
        claim = api.http.post(f"{path}/claims", json={}).raise_for_status().content
        _, body = play(ctx, Ticket.model_validate_json(claim), SEED)
        ack = api.http.post(f"{path}/reports", content=body, headers=JSON).raise_for_status()
    return ctx, {"healthz": '{"status":"ok"}', "claims": claim.decode(),
                 "reports": ack.content.decode(), "body": body.decode()}


def main() -> None:
    """Start the canned server, measure each flow per round, print one JSON line a round."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--greenlets", type=int, default=32, help="users in this process")
    parser.add_argument("--requests", type=int, default=3000,
                        help="loops of each flow per round, all users together (an episode"
                        " is 2 requests)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ctx, answers = real_answers(Path(tmp))
    fixed_body = answers.pop("body").encode()
    port = free_port()
    canned = subprocess.Popen([sys.executable, "-c", CANNED, str(port)], stdin=subprocess.PIPE)
    assert canned.stdin is not None
    canned.stdin.write(json.dumps(answers).encode())
    canned.stdin.close()
    try:
        wait_ready(f"http://127.0.0.1:{port}/healthz", canned, 30)
        measure(ctx, port, Ticket.model_validate_json(answers["claims"]), fixed_body,
                args.greenlets, args.requests, args.rounds)
    finally:
        canned.kill()
        canned.wait()


def play_alone(ctx: UserContext, ticket: Ticket, times: int) -> float:
    """CPU microseconds of one `play()` in a tight loop (no I/O between episodes)."""
    start = time.process_time()
    for _ in range(times):
        play(ctx, ticket, SEED)
    return 1e6 * (time.process_time() - start) / times


def measure(ctx: UserContext, port: int, ticket: Ticket, fixed_body: bytes, greenlets: int,
            requests: int, rounds: int) -> None:
    """The flows, in turn, `rounds` times: CPU microseconds per request of this process."""
    hook = EventHook()
    hook.add_listener(lambda **_kw: None)
    claim_path = f"/{API_VERSION}{run_path(ctx.run_id)}/claims?wait=2"
    report_path = f"/{API_VERSION}{run_path(ctx.run_id)}/reports"

    def session() -> FastHttpSession:
        made = FastHttpSession(f"http://127.0.0.1:{port}", request_event=hook, user=None)
        made.client.cookiejar = None  # as locust_common.without_cookies
        return made

    def healthz(http: FastHttpSession) -> int:
        http.get("/healthz", name="healthz")
        return 1

    def episode(http: FastHttpSession, played: bool = True) -> int:
        with http.post(claim_path, data=b"{}", headers=JSON, name="claim",
                       catch_response=True) as resp:
            served = Ticket.model_validate_json(resp.content)
        body = play(ctx, served, SEED)[1] if played else fixed_body
        with http.post(report_path, data=body, headers=JSON, name="report",
                       catch_response=True) as resp:
            Ack.model_validate_json(resp.content)
        return 2

    flows: dict[str, Callable[[FastHttpSession], int]] = {
        "healthz": healthz, "episode_fixed_body": lambda h: episode(h, False), "episode": episode,
    }
    for rnd in range(rounds):
        row: dict[str, object] = {"round": rnd, "greenlets": greenlets}
        for name, flow in flows.items():
            users = [session() for _ in range(greenlets)]
            per_user = max(requests // greenlets, 10)

            def loop(http: FastHttpSession, times: int, flow=flow) -> int:
                return sum(flow(http) for _ in range(times))

            gevent.joinall([gevent.spawn(loop, u, 3) for u in users])  # connect, warm up
            start = time.process_time()
            jobs = [gevent.spawn(loop, u, per_user) for u in users]
            gevent.joinall(jobs, raise_error=True)
            done = sum(job.value for job in jobs)
            row[f"{name}_us_per_request"] = round(1e6 * (time.process_time() - start) / done, 1)
        row["play_alone_us_per_episode"] = round(play_alone(ctx, ticket, requests), 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
