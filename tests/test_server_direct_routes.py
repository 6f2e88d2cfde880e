"""The claim and report routes' direct path: a well-formed request skips FastAPI's parameter
solving, and every other request gets exactly FastAPI's own parsing and answers."""

from __future__ import annotations

import json
from typing import Any

import fastapi.routing
import pytest
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient
from privrl.server.errors import install_error_handlers
from privrl.server.routes.episodes import REPORT
from pydantic import ValidationError
from support.server import Apps, create, spec, user_report, world

JSON = {"Content-Type": "application/json"}


@pytest.fixture
def client(apps: Apps) -> TestClient:
    """One app with the default settings."""
    return apps()


@pytest.fixture
def solved(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the requests FastAPI solved the parameters of."""
    paths: list[str] = []
    solve = fastapi.routing.solve_dependencies

    async def counted(*args: Any, **kwargs: Any) -> Any:
        paths.append(kwargs["request"].url.path)
        return await solve(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", counted)
    return paths


@pytest.mark.parametrize("privacy", ["jdp", "ldp"])
def test_well_formed_claims_and_reports_skip_parameter_solving(
    client: TestClient, solved: list[str], privacy: str
) -> None:
    config = spec(privacy)
    run_id = create(client, config)
    solved.clear()
    for query in ("", "?wait=0", "?wait=2.5", "?wait=600"):
        resp = client.post(f"/v1/runs/{run_id}/claims{query}")
        assert resp.status_code == 200, resp.text
        body = json.dumps(user_report(resp.json(), config, world(config))).encode()
        resp = client.post(f"/v1/runs/{run_id}/reports", content=body, headers=JSON)
        assert resp.status_code == 200, resp.text
    assert solved == []
    assert client.get(f"/v1/runs/{run_id}").json()["status"]["reported"] == 4
    assert solved == [f"/v1/runs/{run_id}"]  # the other routes still go through FastAPI


def test_other_valid_requests_are_served_by_fastapi(client: TestClient, solved: list[str]
                                                    ) -> None:
    """Forms the direct path does not read (an exponent, a vendor JSON type) are still valid."""
    config = spec("jdp")
    run_id = create(client, config)
    solved.clear()
    resp = client.post(f"/v1/runs/{run_id}/claims?wait=1e0")
    assert resp.status_code == 200, resp.text
    report = user_report(resp.json(), config, world(config))
    resp = client.post(f"/v1/runs/{run_id}/reports", content=json.dumps(report),
                       headers={"Content-Type": "application/vnd.privrl+json"})
    assert resp.status_code == 200, resp.text
    assert len(solved) == 2


@pytest.mark.parametrize(
    ("query", "status"),
    [("?wait=600.5", 422), ("?wait=-1", 422), ("?wait=abc", 422), ("?wait=nan", 422),
     ("?wait=1&wait=2", 200), ("?wiat=1", 422)],
)
def test_unusual_claim_queries_get_fastapis_answer(
    client: TestClient, query: str, status: int
) -> None:
    run_id = create(client, spec("jdp"))
    resp = client.post(f"/v1/runs/{run_id}/claims{query}")
    assert resp.status_code == status, resp.text
    if status == 422:
        assert resp.json()["code"] == "schema"


@pytest.mark.parametrize(
    ("body", "headers", "status", "code", "detail"),
    [(b"{not json", JSON, 400, "malformed", "malformed JSON body at character 1:"),
     (b"", JSON, 422, "schema", ""),
     (b'{"kind": "trajectory"}', JSON, 422, "schema", ""),
     (b'{"kind": "trajectory"}', {"Content-Type": "text/plain"}, 422, "schema", ""),
     # json.loads raised RecursionError in the direct path: it was a 500
     pytest.param(b"[" * 5000 + b"]" * 5000, JSON, 400, "malformed",
                  "malformed request body: JSON nested too deeply to read", id="nested-too-deep"),
     (b'{"kind": "\xff"}', JSON, 400, "malformed",
      "malformed request body: not UTF-8 text (byte 10 is 0xff)")],
)
def test_invalid_reports_get_fastapis_answer(
    client: TestClient, body: bytes, headers: dict[str, str], status: int,
    code: str, detail: str
) -> None:
    run_id = create(client, spec("jdp"))
    resp = client.post(f"/v1/runs/{run_id}/reports", content=body, headers=headers)
    assert resp.status_code == status, resp.text
    assert resp.json()["code"] == code
    assert resp.json()["detail"].startswith(detail)
    assert client.get(f"/v1/runs/{run_id}").json()["status"]["reported"] == 0
    assert f'privrl_reports_refused_total{{reason="{code}"}} 1.0' in client.get("/metrics").text


def test_a_400_a_route_raises_itself_keeps_its_own_detail() -> None:
    """Only the 400 FastAPI raises from its body parser's error is rewritten as 'malformed'."""
    refused: list[str] = []
    app = FastAPI()
    install_error_handlers(app, refused.append)

    @app.post("/v1/runs/{run_id}/reports")
    async def own_400(run_id: str) -> None:
        raise HTTPException(400, "the route's own reason")

    resp = TestClient(app).post("/v1/runs/x/reports", content=b"{}", headers=JSON)
    assert resp.status_code == 400 and resp.json()["detail"] == "the route's own reason"
    assert refused == []


_TRAJ = ('"states":[' + ",".join(["1"] * 21) + '],"actions":[' + ",".join(["0"] * 20)
         + '],"rewards":[' + ",".join(["0.5"] * 20) + "]")
_T = '"ticket":"' + "A" * 20 + '"'


@pytest.mark.parametrize(("text", "outcome"), [
    ("{" + '"kind":"trajectory",' + _T + "," + _TRAJ + "}", "same"),
    ('{"kind":"trajectory",' + _T + ',"ticket":"' + "B" * 20 + '",' + _TRAJ + "}", "same"),
    ('{"kind":"noisy","kind":"trajectory",' + _T + "," + _TRAJ + "}", "same"),  # last wins
    ('{"kind":"trajectory",' + _T + "," + _TRAJ.replace("[1,", "[1.0,").replace("1,1]", "1e0,1]")
     + "}", "same"),
    ('{"kind":"trajectory",' + _T + "," + _TRAJ.replace("[1,", "[100000000000000000000000,")
     + "}", "same"),
    ('{"kind":"trajectory",' + _T + "," + _TRAJ.replace("[0.5,", "[1,") + "} \n", "same"),
    ('{"kind":"noisy",' + _T + ',"arrays":{"\\u0062":[0.1000000000000000055511151231257827,'
     " 2.2250738585072011e-308, 4.9e-324, 1.7976931348623157e308, 0.30000000000000004441,"
     ' -0.0],"a":[1.5],"a":[2.5],"c":"AAAAAAAA8D8="}}', "same"),
    ('{"kind":"returns",' + _T + ',"returns":{"3":0.5}}', "refused"),
    ('{"kind":"trajectory",' + _T + "," + _TRAJ.replace("[0.5,", "[NaN,") + "}", "refused"),
    ('{"kind":"trajectory",' + _T + "," + _TRAJ.replace("[0.5,", "[true,") + "}", "refused"),
    ('{"kind":"noisy",' + _T + ',"arrays":{"a":[1e400]}}', "refused"),
    ('{"kind":"noisy",' + _T + ',"arrays":{"a":[Infinity]}}', "refused"),
    ('{"kind":"noisy",' + _T + ',"arrays":{"a\tb":[1.5]}}', "refused"),  # a raw tab
    ('{"kind":"noisy",' + _T + ',"arrays":{"a":[01.5]}}', "refused"),
    ("[" * 5000 + "]" * 5000, "refused"),
    ("\ufeff{" + '"kind":"trajectory",' + _T + "," + _TRAJ + "}", "fastapi"),  # a BOM
])
def test_the_direct_path_reads_a_report_as_fastapi_would(text: str, outcome: str) -> None:
    """The direct path (pydantic's JSON parser) reads a report into what FastAPI's `json.loads`
    plus the schema read ("same"), or leaves it to FastAPI: bodies both refuse ("refused"),
    and a UTF-8 BOM, which only `json.loads` reads ("fastapi")."""
    body = text.encode()

    def by_fastapi() -> object:
        try:
            return REPORT.validate_python(json.loads(body))
        except (ValueError, RecursionError):  # ValidationError and JSONDecodeError are too
            return None

    try:
        direct = REPORT.validate_json(body)
    except ValidationError:
        direct = None
    if outcome == "same":
        assert direct is not None and by_fastapi() == direct
    elif outcome == "refused":
        assert direct is None and by_fastapi() is None
    else:
        assert direct is None and by_fastapi() is not None


def test_a_direct_route_cannot_have_dependencies() -> None:
    """A dependency (an admin check, say) would be skipped by the direct path, so declaring one
    on a direct route fails at once instead of being bypassed on every well-formed request."""
    from fastapi import Depends
    from privrl.server.routes.common import direct, v1_router

    async def no_args(request: Any) -> None:
        return None

    def guard() -> None:
        return None

    async def endpoint(run_id: str) -> None:
        return None

    router = v1_router(["test"])
    with pytest.raises(TypeError, match="cannot have dependencies"):
        router.post("/{run_id}/guarded", dependencies=[Depends(guard)])(direct(no_args)(endpoint))

    async def with_param(run_id: str, checked: None = Depends(guard)) -> None:
        return None

    with pytest.raises(TypeError, match="cannot have dependencies"):
        router.post("/{run_id}/param")(direct(no_args)(with_param))
    router.post("/{run_id}/plain")(direct(no_args)(endpoint))  # no dependency: fine
