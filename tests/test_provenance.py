"""What a measurement records about itself: the command, the commit and the load."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from privrl.lab import provenance
from privrl.lab.provenance import save_measured


def test_a_measurement_is_saved_after_what_measured_it(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["scripts/x.py", "--json", "out dir/x.json"])
    monkeypatch.setattr(provenance, "commit", lambda: "abc1234+")  # git is a process
    path = tmp_path / "deep" / "x.json"  # parent folders are made
    save_measured(path, {"rows": [[1, 2]], "note": "n"})
    data = json.loads(path.read_text())
    assert list(data) == ["command", "commit", "load_average", "rows", "note"]
    assert data["command"] == "python scripts/x.py --json 'out dir/x.json'"
    assert data["commit"] == "abc1234+" and len(data["load_average"]) == 3
    assert data["rows"] == [[1, 2]]
