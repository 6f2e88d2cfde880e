"""Stalled uploads (a load tool for the server's body limits): many connections that each send
the headers of a POST and part of its body, then nothing, on raw asyncio sockets.

`scripts/load/stalled_uploads.py` measures a server under them; the slow tests check that the
server closes them in time.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

CHUNK = b" " * 65536


@dataclass(frozen=True)
class Stalled:
    """How one stalled upload ended: the server's status ("closed": closed without an answer,
    "reset": reset, "none": still open when the caller gave up) and when (seconds after the
    first connection was opened; None for "none")."""

    status: str
    after: float | None


async def stall(host: str, port: int, path: str, declared: int, sent: int, hold: float,
                started: float) -> Stalled:
    """One connection: headers declaring `declared` body bytes, `sent` of them, then silence
    until the server closes the connection or `hold` seconds pass."""
    reader, writer = await asyncio.open_connection(host, port)
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {declared}\r\n\r\n").encode()
    try:
        try:
            writer.write(head)
            left = sent
            while left > 0:
                writer.write(CHUNK[:left])
                left -= min(left, len(CHUNK))
                await writer.drain()
        except ConnectionError:
            pass  # the server answered and closed before the bytes were sent: read it
        answer = await asyncio.wait_for(reader.read(65536), hold)
        while answer and not reader.at_eof():  # the answer came: wait for the close
            await asyncio.wait_for(reader.read(65536), hold)
        status = answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/") else "closed"
        return Stalled(status, time.monotonic() - started)
    except ConnectionError:
        return Stalled("reset", time.monotonic() - started)
    except TimeoutError:
        return Stalled("none", None)
    finally:
        writer.close()


async def stall_many(host: str, port: int, path: str, connections: int, declared: int,
                     sent: int, hold: float, opening: int = 100) -> list[Stalled]:
    """`connections` stalled uploads at once (at most `opening` connecting at a time); bounded:
    every one ends within `hold` seconds of its last byte sent, all within `hold` + 120 s."""
    gate = asyncio.Semaphore(opening)
    started = time.monotonic()

    async def one() -> Stalled:
        async with gate:
            task = asyncio.ensure_future(stall(host, port, path, declared, sent, hold, started))
            await asyncio.sleep(0)  # connected or connecting: let the next one start
        return await task

    return await asyncio.wait_for(asyncio.gather(*(one() for _ in range(connections))),
                                  hold + 120)
