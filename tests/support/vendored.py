"""Where the tests' vendored data live (tests/data; a clone carries them, nothing beside it)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout the tests run in
DATA = REPO_ROOT / "tests" / "data"
# The official Compose Specification schema, vendored unmodified (see tests/data/README.md).
COMPOSE_SCHEMA = DATA / "compose-spec.json"
