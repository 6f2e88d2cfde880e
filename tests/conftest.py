"""Fixtures shared by the server tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import Apps


@pytest.fixture
def apps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Apps]:
    """Apps on one database file (tmp_path/privrl.db), free of PRIVRL_* settings; each client
    is closed at the end."""
    for name in ("ADMIN_TOKEN", "DB", "CLAIM_TIMEOUT", "SEQUENTIAL", "MAX_BODY_BYTES"):
        monkeypatch.delenv(f"PRIVRL_{name}", raising=False)
    factory = Apps(tmp_path / "privrl.db")
    yield factory
    for client in list(factory.opened):
        factory.close(client)
