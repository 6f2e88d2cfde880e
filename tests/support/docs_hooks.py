"""The docs site's build hooks, loaded the way MkDocs loads them."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from support.vendored import REPO_ROOT


def load_hooks() -> ModuleType:
    """scripts/docs_hooks.py loaded as MkDocs loads a hook: with its folder on sys.path."""
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO_ROOT / "scripts" /
                                                  "docs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    saved = sys.path.copy()
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module
