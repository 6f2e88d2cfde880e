"""`privrl bench http`: one short run per generator against its own embedded server; the JSON
holds the ceiling, the privacy modes, ratios that are what they say, and no lost report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.client import run_cli


@pytest.mark.slow
@pytest.mark.parametrize(("generator", "modes"), [("locust", ["jdp", "ldp"]), ("swarm", ["ldp"])])
def test_bench_http_measures_the_ceiling_and_the_modes_side_by_side(
        tmp_path: Path, generator: str, modes: list[str]) -> None:
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    done = run_cli("bench", "http", "--users", "2", "--seconds", "3", "--processes", "2",
                   "--generator", generator, "--privacy", *modes, "--json", str(out),
                   "--plot", str(png), timeout=240)
    assert done.returncode == 0, done.stderr
    body = json.loads(out.read_text())
    assert body["generator"] == generator and body["machine"]["cpus"] >= 1
    assert body["acknowledged_total"] == body["server_reported_total"] > 0
    (ceiling,) = body["ceiling"]  # the median of the ceiling phases at C = 2, one per mode
    assert ceiling["concurrency"] == 2 and ceiling["errors"] == 0
    assert ceiling["requests_per_second"] > 0 and ceiling["latency_ms"]["healthz"]["count"] > 0
    assert ceiling["server_cpu_cores"] is not None and ceiling["server_cpu_cores"] > 0
    assert len(ceiling["requests_per_second_runs"]) == len(modes)
    assert [row["privacy"] for row in body["episodes"]] == modes
    for row in body["episodes"]:
        assert row["acknowledged"] > 0 and row["errors"] == 0, row["errors_by_kind"]
        assert row["acknowledged"] == row["server_reported"]  # nothing lost, nothing twice
        # each mode's ratio is over the ceiling phase measured just before it
        top = row["ceiling_requests_per_second"]
        assert top in ceiling["requests_per_second_runs"]
        assert row["ratio_runs"] == [row["ratio"]]
        assert row["ratio"] == pytest.approx(row["requests_per_second"] / top)
        # the server's CPU per request, the ceiling's over the episode path's (one pair)
        assert row["server_cpu_ms_per_request"] > 0 and ceiling["server_cpu_ms_per_request"] > 0
        assert row["cpu_ratio_runs"] == [row["cpu_ratio"]]
        assert row["cpu_ratio"] == pytest.approx(row["ceiling_server_cpu_ms_per_request"]
                                                 / row["server_cpu_ms_per_request"])
        for name in ("claim", "report"):
            lat = row["latency_ms"][name]
            assert 0 < lat["p50_ms"] <= lat["p95_ms"] <= lat["p99_ms"] <= lat["max_ms"]
        assert f"{row['privacy']} x 2:" in done.stdout
        assert f"server CPU per request: {row['cpu_ratio']:.0%} of the ceiling's" in done.stdout
    assert "ceiling /healthz x 2:" in done.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_median_repetition_is_kept_with_every_rate() -> None:
    from privrl.client.load.bench import median_row

    rows = [{"requests_per_second": v, "episodes_per_second": v / 2, "tag": t}
            for v, t in ((30.0, "a"), (10.0, "b"), (20.0, "c"), (40.0, "d"))]
    row = median_row(rows)
    assert row["tag"] == "c"  # the lower median of 10, 20, 30, 40
    assert row["requests_per_second_runs"] == [30.0, 10.0, 20.0, 40.0]
    assert row["episodes_per_second_runs"] == [15.0, 5.0, 10.0, 20.0]


def test_refused_requests_are_errors_never_throughput(tmp_path: Path) -> None:
    """A Locust process's samples: three answered claims, two refused (429) and one 503 report;
    the rates count the answered ones only, the refusals are errors by kind."""
    from privrl.client.load.locust_run import read_samples

    rows = [[10.0, "claim", 5.0, ""], [10.5, "claim", 5.0, ""], [11.0, "claim", 5.0, ""],
            [11.0, "claim", 1.0, "CatchResponseError: claim: HTTP 429"],
            [11.0, "claim", 1.0, "CatchResponseError: claim: HTTP 429"],
            [11.0, "report", 2.0, "CatchResponseError: report: HTTP 503"],
            [11.0, "report", 2.0, ""]]
    path = tmp_path / "samples.json"
    path.write_text(json.dumps(rows))
    out = read_samples([path])
    window = 11.0 - (10.0 - 0.005)
    assert out["requests_per_second"]["claim"] == pytest.approx(3 / window)
    assert out["requests_per_second"]["report"] == pytest.approx(1 / window)
    assert out["requests_per_second"]["all"] == pytest.approx(4 / window)
    assert out["latency_ms"]["claim"]["count"] == 5  # the refused ones still have a latency
    assert out["errors_by_kind"] == {"claim CatchResponseError: claim: HTTP 429": 2,
                                     "report CatchResponseError: report: HTTP 503": 1}


def test_the_embedded_server_admits_every_user_of_one_address() -> None:
    from privrl.client.load.bench import embedded_settings

    assert embedded_settings(1000)["PRIVRL_MAX_CLAIMS_PER_ADDRESS"] == "1000"
    assert embedded_settings(1)["PRIVRL_MAX_CLAIMS_PER_ADDRESS"] == "256"  # never below default
    assert embedded_settings(3000)["PRIVRL_MAX_OUTSTANDING"] == "3000"


def test_the_bench_figure_shows_episodes_per_second(tmp_path: Path) -> None:
    from privrl.client.load.bench import plot_bench

    def row(rps: float, eps: float, errors: int, privacy: str | None = None) -> dict:
        return {"concurrency": 8, "requests_per_second": rps, "episodes_per_second": eps,
                "errors": errors, **({"privacy": privacy} if privacy else {})}

    out = {"ceiling": [row(900.0, 0.0, 0)],
           "episodes": [row(300.0, 150.0, 12, "jdp"), row(200.0, 100.0, 0, "ldp")]}
    png = plot_bench(out, tmp_path / "b.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
