"""The served OpenAPI document states this server's own limits, as configured.

FastAPI derives the document from the routes and models, which know nothing of the settings.
The limits the server enforces (cells of a run, size of a body, how long a claim may wait) are
patched in with their configured values: in the descriptions, as `maximum` where a larger value
is always refused, and as `x-privrl-*` numbers for programs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from privrl import algorithms
from privrl.config import RunConfig
from privrl.server.routes.episodes import WAIT_LIMIT
from privrl.server.settings import Settings


def effective_claim_wait(settings: Settings) -> float:
    """The longest a claim ever waits for a slot on this server (seconds)."""
    return min(WAIT_LIMIT, settings.max_claim_wait)


def _field_maximum(name: str) -> float:
    """The static `le` bound of a RunConfig field."""
    for meta in RunConfig.model_fields[name].metadata:
        if getattr(meta, "le", None) is not None:
            return meta.le
    raise LookupError(f"RunConfig.{name} has no upper bound")


def spec_maxima(settings: Settings) -> dict[str, int]:
    """Per-field maxima of a run spec this server really refuses beyond.

    The cell limit bounds H*S*A*S (S*A*S when pooled); with every other factor at its minimum
    of 1, S > isqrt(max_cells) or A > max_cells is always too large. H is not bounded by it (a
    pooled run's arrays do not grow with H).
    """
    cells = settings.max_cells
    return {
        "n_states": int(min(_field_maximum("n_states"), math.isqrt(cells))),
        "n_actions": int(min(_field_maximum("n_actions"), cells)),
    }


def algorithm_rules() -> dict[str, Any]:
    """What the registered algorithms accept, as JSON Schema: `algo` is one of them, and each
    one's privacy modes and knobs apply when it is chosen (`algo` absent: the default one)."""
    default = RunConfig.model_fields["algo"].default
    rules = []
    for name in algorithms.names():
        algo = algorithms.get(name)
        chosen: dict[str, Any] = {"properties": {"algo": {"const": name}}, "required": ["algo"]}
        if name == default:
            chosen = {"anyOf": [chosen, {"not": {"required": ["algo"]}}]}
        knobs = algo.knobs_model.model_json_schema()
        rules.append({
            "if": chosen,
            "then": {"properties": {
                "privacy": {"enum": list(algo.boundaries())},
                "knobs": {"anyOf": [knobs, {"type": "null"}]},
            }},
        })
    return {"properties": {"algo": {"enum": algorithms.names()}}, "allOf": rules}


def limits_text(settings: Settings) -> str:
    """A Markdown paragraph listing the limits of this server."""
    return (
        "**Limits of this server.** A run's N(s,a,s') array holds at most"
        f" {settings.max_cells} entries (H*S*A*S, S*A*S when pooled; PRIVRL_MAX_CELLS); request"
        f" bodies hold at most {settings.max_body_bytes} bytes (PRIVRL_MAX_BODY_BYTES; a report"
        " at most its run's own bound, 32 bytes a number it carries plus 4096), and a run whose"
        " reports could be larger is refused at creation; a body arrives within"
        f" {settings.body_timeout:g} s of its headers or is answered 408 (PRIVRL_BODY_TIMEOUT),"
        f" and the bodies being received hold at most {settings.max_body_buffer_bytes} bytes at"
        " once, others get 503 (PRIVRL_MAX_BODY_BUFFER_BYTES); a claim waits at most"
        f" {effective_claim_wait(settings):g} s for a slot (PRIVRL_MAX_CLAIM_WAIT; a longer"
        f" ?wait= is capped, not refused); a claim lapses after {settings.claim_timeout:g} s"
        " (PRIVRL_CLAIM_TIMEOUT). Admission control: a run has at most"
        f" {settings.max_outstanding} claims outstanding (PRIVRL_MAX_OUTSTANDING) to start with,"
        " half as many after a report that arrives later than"
        f" {settings.queue_fraction:g} of the claim timeout after its claim or a lapsed claim"
        " (PRIVRL_QUEUE_FRACTION), one more for every timely report, never fewer than"
        f" {min(settings.min_outstanding, settings.max_outstanding)} (PRIVRL_MIN_OUTSTANDING); at"
        " most"
        f" {settings.max_waiting} claims of a run wait for a slot (PRIVRL_MAX_WAITING), others"
        f" get 429; at most {settings.max_in_flight} claims and {2 * settings.max_in_flight}"
        " reports are handled at once (PRIVRL_MAX_IN_FLIGHT), others get 503; a concurrent run"
        f" plans at most once per {settings.plan_interval:g} s (PRIVRL_PLAN_INTERVAL)."
    )


def with_limits(doc: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """Patch the configured limits into a FastAPI-built OpenAPI document (in place)."""
    info = doc.setdefault("info", {})
    info["description"] = f"{info.get('description', '').rstrip()}\n\n{limits_text(settings)}\n"
    paths = doc.get("paths", {})

    create = paths["/v1/runs"]["post"]
    maxima = spec_maxima(settings)
    body = create["requestBody"]["content"]["application/json"]
    body["schema"] = {
        "allOf": [
            body["schema"],
            {"properties": {name: {"maximum": value} for name, value in maxima.items()}},
            algorithm_rules(),
        ],
        "description": (
            f"A run spec this server can host: S <= {maxima['n_states']} and A <="
            f" {maxima['n_actions']}, and H*S*A*S (S*A*S when pooled) <= {settings.max_cells}"
        ),
    }
    create["x-privrl-max-cells"] = settings.max_cells
    create["x-privrl-max-body-bytes"] = settings.max_body_bytes
    create["description"] = (
        f"{create.get('description', '').rstrip()}\n\nRefused with 422 (`code` \"too_large\")"
        f" when H*S*A*S (S*A*S when pooled) exceeds {settings.max_cells} (PRIVRL_MAX_CELLS), or"
        " when a report of the run (an LDP report: every released array; 32 bytes a number"
        f" plus 4096) could exceed {settings.max_body_bytes} bytes (PRIVRL_MAX_BODY_BYTES)."
    )
    _append(
        create["responses"]["422"],
        f" Limits of this server: H*S*A*S <= {settings.max_cells} (PRIVRL_MAX_CELLS); a"
        f" report <= {settings.max_body_bytes} bytes (PRIVRL_MAX_BODY_BYTES).",
    )

    claim = paths["/v1/runs/{run_id}/claims"]["post"]
    wait_s = effective_claim_wait(settings)
    for param in claim.get("parameters", []):
        if param.get("name") == "wait" and param.get("in") == "query":
            note = f" (this server: {wait_s:g} s)"
            _append(param, note)
            _append(param["schema"], note)
            param["x-privrl-max-claim-wait"] = wait_s

    for methods in paths.values():
        for operation in methods.values():
            response = operation.get("responses", {}).get("413")
            if response is not None:
                _append(response, f" (this server: {settings.max_body_bytes} bytes)")
    return doc


def _append(node: dict[str, Any], text: str) -> None:
    """Append `text` to the node's description."""
    node["description"] = node.get("description", "") + text


def install_openapi(app: FastAPI, settings: Settings) -> None:
    """Serve the document with the limits of `settings` (built once, on first use)."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = with_limits(build(), settings)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
