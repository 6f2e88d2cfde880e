"""The repository carries everything its tests read (a user's clone has nothing beside it).

The real proof is `.ci/run`, which runs the suite from a copy of HEAD in a fresh temporary
directory; these checks catch the vendored data going missing or drifting.
"""

from __future__ import annotations

import hashlib
import json
import re

import jsonschema
from privrl.client.procs import REPO_ROOT
from test_compose import SCHEMA

DATA = REPO_ROOT / "tests" / "data"


def test_compose_schema_is_vendored_inside_the_repository() -> None:
    assert SCHEMA.resolve().is_relative_to(REPO_ROOT), f"{SCHEMA} is outside {REPO_ROOT}"
    assert SCHEMA.resolve() == (DATA / "compose-spec.json").resolve()
    schema = json.loads(SCHEMA.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft-07/schema"
    assert schema["$id"] == "compose_spec.json"
    assert schema["title"] == "Compose Specification"
    assert {"services", "volumes", "networks"} <= set(schema["properties"])
    jsonschema.Draft7Validator.check_schema(schema)


def test_vendored_schema_is_the_unmodified_copy_its_readme_names() -> None:
    readme = (DATA / "README.md").read_text()
    assert "compose-spec/compose-spec" in readme and "Apache License 2.0" in readme
    recorded = re.search(r"SHA-256 `([0-9a-f]{64})`", readme)
    assert recorded, "tests/data/README.md must record the schema's SHA-256"
    assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == recorded.group(1)
    assert "Apache License" in (DATA / "LICENSE-compose-spec").read_text()
