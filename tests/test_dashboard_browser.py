"""The dashboard in a real browser: headless Chromium (Debian's `chromium` + `chromium-driver`,
driven by Selenium) renders the charts from live runs played by real user processes, updates
them as episodes arrive, and reads nothing but this server's public GET routes. Runs are labelled
by algorithm, privacy mode, epsilon and a short id, coloured by privacy mode as in every figure;
heat-maps have colour bars; no axis label is clipped.

The screenshot it takes is the docs' (`PRIVRL_SCREENSHOT=docs/dashboard.png` writes it there;
`PRIVRL_SCREENSHOT_EPISODES` sets K for a longer run): one run per trust boundary, the secure
aggregation run's cohort panel among them. Without Chromium the test is skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
from privrl.client.api import ServerAPI
from privrl.client.procs import ServerProcess
from privrl.config import RunConfig
from privrl.lab.plots import PRIVACY_COLORS
from support.client import MDP, TOKEN, run_cli, start_server

pytestmark = pytest.mark.slow  # every test here starts a real server and a headless Chromium

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
PUBLIC_GETS = ("/", "/dashboard/app.js", "/dashboard/style.css", "/dashboard/favicon.svg",
               "/v1/runs", "/v1/trust")
PUBLIC_RUN_VIEWS = ("ledger", "regret", "billboard", "cohorts")
MODES = ("none", "jdp", "secagg", "ldp")  # the live runs' boundaries, in the page's order
COHORT = 4  # the secure-aggregation run's B: as many users as a process has in flight


def browser():  # noqa: ANN201 (selenium's WebDriver, imported lazily)
    """A headless Chromium, or a skip with a one-line reason."""
    try:
        from selenium import webdriver
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    if not (CHROMIUM and DRIVER):
        pytest.skip("no Chromium here: apt-get install chromium chromium-driver (.ci/run does)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1500,1300", "--force-device-scale-factor=1"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=DRIVER))


def config(privacy: str, episodes: int, **more: object) -> RunConfig:
    """The demo's configurations: pooled DP-UCBVI on RiverSwim, Gaussian, eps = 10."""
    private = privacy != "none"
    return RunConfig(n_states=MDP.S, n_actions=MDP.A, horizon=MDP.H, episodes=episodes,
                     privacy=privacy, epsilon=10.0, mechanism="gaussian",
                     delta=1e-5 if private else 0.0, knobs={"pooled": True}, **more)


def play(server: ServerProcess, run_id: str, users: int | None) -> subprocess.Popen:
    """A real `privrl users` process (None: until the run is finished)."""
    from privrl.client.procs import child_env, module_cmd

    args = ["users", "--server", server.url, "--run", run_id, "--concurrency", "4", "--quiet"]
    if users is not None:
        args += ["--users", str(users)]
    return subprocess.Popen(module_cmd("privrl.client", *args), env=child_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = start_server(tmp_path / "server")
    yield proc
    proc.stop()


def wait_for(driver, script: str, timeout: float = 60.0):  # noqa: ANN001, ANN201
    """Poll a JavaScript expression until it is truthy; its value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(f"return {script}")
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"the page never satisfied: {script}")


# every <text> of the charts and heat-maps that sticks out of its <svg> (in screen pixels)
CLIPPED = """
const bad = [];
for (const svg of document.querySelectorAll(arguments[0])) {
  const box = svg.getBoundingClientRect();
  for (const t of svg.querySelectorAll('text')) {
    const r = t.getBoundingClientRect();
    if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5
        || r.bottom > box.bottom + 0.5) {
      bad.push(`${svg.id || svg.className.baseVal}: ${t.textContent}`);
    }
  }
}
return bad;
"""


def assert_nothing_clipped(driver) -> None:  # noqa: ANN001
    """No label of the drawn charts and heat-maps, nor of a chart with 5-digit episode numbers
    (the widest last x label: K = 30000), is cut off at its SVG's edge."""
    assert driver.execute_script(CLIPPED, "svg.chart, svg.heatmap") == []
    wide = driver.execute_script("""
        const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
        svg.setAttribute("class", "chart probe");
        document.body.append(svg);
        lineChart(svg, [{ id: "p", color: "#000", dash: "", points: [[1, 1e5], [30000, 2e5]] }],
                  { xmax: 30000, ylabel: "cumulative regret" });
        return svg.querySelectorAll("text").length;""")
    assert wide >= 10
    assert driver.execute_script(CLIPPED, "svg.probe") == []
    driver.execute_script("document.querySelector('svg.probe').remove()")


def test_dashboard_renders_live_runs_and_updates(server: ServerProcess, tmp_path: Path) -> None:
    driver = browser()
    episodes = int(os.environ.get("PRIVRL_SCREENSHOT_EPISODES", "300"))
    first = episodes // 3
    try:
        with ServerAPI(server.url, token=TOKEN) as api:
            cohorts = {"schedule": f"batch:{COHORT}"}
            ids = [api.create_run(config(p, episodes, **(cohorts if p == "secagg" else {}))).id
                   for p in MODES]
        for proc in [play(server, run_id, first) for run_id in ids]:
            assert proc.wait(timeout=300) == 0, proc.stderr.read()
        driver.get(server.url + "/")
        rows = "document.querySelectorAll('#runs tbody tr').length"
        assert wait_for(driver, f"{rows} === 4 && document.querySelectorAll("
                        "'#chart-percent path.series').length === 4")
        # each run's curve, its band and its epsilon step function are drawn from live data
        for run_id in ids:
            last = driver.execute_script(
                f"return document.querySelector('#chart-cumulative path[data-run=\"{run_id}\"]')"
                ".getAttribute('data-last-x')")
            assert int(last) == first
        assert driver.execute_script(
            "return document.querySelectorAll('#chart-percent polygon.band').length") == 4
        assert driver.execute_script(
            "return document.querySelectorAll('#chart-epsilon path.series').length") == 3
        cells = "document.querySelectorAll('#heatmaps rect.cell').length"
        assert driver.execute_script(f"return {cells}") == MDP.S * MDP.A  # exact counts only
        from selenium.webdriver.support.ui import Select

        Select(driver.find_element("id", "detail-run")).select_by_value(ids[1])
        wait_for(driver, f"{cells} === {2 * MDP.S * MDP.A}")  # JDP: counts and counts / std
        assert "noise of std" in driver.find_element("id", "detail-text").text
        # every heat-map has its colour bar: a graded scale with three labelled ticks
        bars = driver.execute_script(
            "return [...document.querySelectorAll('#heatmaps svg.heatmap')].map(s => ["
            "s.querySelectorAll('g.colorbar rect').length,"
            "[...s.querySelectorAll('g.colorbar text')].map(t => t.textContent)])")
        assert len(bars) == 2
        for rects, ticks in bars:
            assert rects > 10 and len(ticks) == 3 and all(ticks), bars
        # runs are labelled by algorithm, privacy mode, epsilon and a short id
        rows = driver.execute_script(
            "return [...document.querySelectorAll('#runs tbody tr')].map(tr => "
            "[tr.dataset.run, tr.querySelector('td.run').textContent,"
            " tr.querySelector('td.algo').textContent,"
            " tr.querySelector('td.privacy').textContent])")
        assert [r[0] for r in rows] == ids
        for (run_id, short, algo, privacy), mode in zip(rows, MODES, strict=True):
            assert short == run_id[:6] and algo == "dp-ucbvi", rows
            assert privacy == {"none": "non-private pooled", "jdp": "JDP ε=10 gaussian pooled",
                               "secagg": "SecAgg ε=10 gaussian pooled",
                               "ldp": "LDP ε=10 gaussian pooled"}[mode]
        text = driver.find_element("id", "runs").text
        assert f"{first} / {episodes}" in text and "%" in text and "100" in text
        legend = driver.find_element("id", "legend").text
        assert f"dp-ucbvi · JDP ε=10 gaussian pooled · {ids[1][:6]}" in legend, legend
        options = driver.execute_script(
            "return [...document.querySelectorAll('#detail-run option')].map(o => o.textContent)")
        assert options[3] == f"dp-ucbvi · LDP ε=10 gaussian pooled · {ids[3][:6]}", options
        # one colour per privacy mode, the figures' palette; every curve in its own style
        strokes = driver.execute_script(
            "return [...document.querySelectorAll('#chart-cumulative path.series')]"
            ".map(p => [p.dataset.run, p.getAttribute('stroke'),"
            " p.getAttribute('stroke-dasharray')])")
        colour = {run_id: stroke for run_id, stroke, _ in strokes}
        assert colour == {i: PRIVACY_COLORS[m] for i, m in zip(ids, MODES, strict=True)}
        assert len({(c, d) for _, c, d in strokes}) == 4
        assert_nothing_clipped(driver)

        # more episodes arrive: the page follows by itself (polling)
        for proc in [play(server, run_id, None) for run_id in ids]:
            assert proc.wait(timeout=600) == 0, proc.stderr.read()
        done = " && ".join(
            f"document.querySelector('#chart-cumulative path[data-run=\"{i}\"]')"
            f".getAttribute('data-last-x') === '{episodes}'" for i in ids)
        wait_for(driver, done)
        wait_for(driver, f"document.querySelector('#runs').textContent.includes('{episodes} / "
                 f"{episodes} ✓')")
        # the cohort panel follows the secure-aggregation run to its last cohort
        wait_for(driver, "document.getElementById('cohorts').textContent.includes("
                 f"'{episodes // COHORT} released, 0 refused, 0 aborted, 0 forming')")
        # nothing but this server's public GET routes was read; no script error
        entries = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)")
        for url in entries:
            parts = urlsplit(url)
            assert f"{parts.scheme}://{parts.netloc}" == server.url, url
            path = parts.path
            assert path in PUBLIC_GETS or (
                path.startswith("/v1/runs/") and path.rsplit("/", 1)[1] in PUBLIC_RUN_VIEWS
            ), url
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
        # the screenshot: the whole page, from its top (the window's frame added to its height)
        frame = driver.execute_script("return window.outerHeight - window.innerHeight")
        page = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1500, page + frame)
        driver.execute_script("window.scrollTo(0, 0)")
        shot = tmp_path / "dashboard.png"
        driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 20_000
        if os.environ.get("PRIVRL_SCREENSHOT"):
            shutil.copy(shot, os.environ["PRIVRL_SCREENSHOT"])
    finally:
        driver.quit()


def test_without_a_token_the_page_shows_only_public_data(server: ServerProcess) -> None:
    """The page is served to anyone (no token) and holds no data itself: all of it comes from
    the public routes the script reads."""
    done = run_cli("runs", "list", "--server", server.url, env={"PRIVRL_ADMIN_TOKEN": ""})
    assert done.returncode == 0
    import httpx

    page = httpx.get(server.url + "/", timeout=10)
    assert page.status_code == 200 and "privrl" in page.text and TOKEN not in page.text


def test_the_cohort_panel_shows_cohorts_forming_and_the_assumptions(server: ServerProcess) -> None:
    """A secure-aggregation run: two cohorts of 4 played by a real `privrl users` process, then
    one member of the third joins by hand. The panel shows each cohort (members so far of B, the
    open round, survivors, outcome) and the run's B, dropout and collusion bounds, in the
    boundary's colour and label from the registry; a JDP run beside it has no panel."""
    import httpx
    from privrl.trust.secagg.protocol import CohortSetup, UserSession
    from privrl.trust.secagg.wire import b64

    driver = browser()
    try:
        with ServerAPI(server.url, token=TOKEN) as api:
            run_id = api.create_run(config("secagg", 12, schedule="batch:4", dropout=0.25)).id
            other = api.create_run(config("jdp", 12)).id
        assert play(server, run_id, 8).wait(timeout=300) == 0
        with httpx.Client(base_url=server.url, timeout=30) as http:  # cohort 2's first member
            ticket = http.post(f"/v1/runs/{run_id}/claims").json()["ticket"]
            ad = UserSession(CohortSetup(b"x", 4, 3, 5, 32, 3), 0, np.zeros(5)).advertise()
            joined = http.post(f"/v1/runs/{run_id}/cohorts/2/keys", json={
                "ticket": ticket, "cipher_key": b64(ad.cipher_key), "mask_key": b64(ad.mask_key)})
            assert joined.status_code == 200, joined.text
        driver.get(server.url + "/")
        figure = f"#cohorts figure[data-run=\"{run_id}\"]"
        rows = f"document.querySelectorAll('{figure} tr[data-cohort]')"
        assert wait_for(driver, f"{rows}.length === 3")
        assert driver.execute_script("return document.getElementById('cohorts-section').hidden") \
            is False
        cells = driver.execute_script(
            f"return [...{rows}].map(tr => [...tr.querySelectorAll('td')]"
            ".map(td => td.textContent))")
        assert cells == [["2", "1 / 4", "keys", "0", "forming"],
                         ["1", "4 / 4", "done", "4", "released"],
                         ["0", "4 / 4", "done", "4", "released"]], cells
        panel = driver.find_element("id", "cohorts").text
        assert f"dp-ucbvi · SecAgg ε=10 gaussian pooled · {run_id[:6]}" in panel
        assert "2 released, 0 refused, 0 aborted, 1 forming" in panel
        assert "B = 4 users per cohort; dropout ≤ 0.25, collusion ≤ 0.1 of a cohort" in panel
        assert "≥ 3 inputs to release, ≥ 2 honest skellam noise shares" in panel
        assert driver.execute_script(
            f"return document.querySelectorAll('#cohorts figure[data-run=\"{other}\"]').length"
        ) == 0
        colour = driver.execute_script(
            f"return document.querySelector('{figure} .swatch')"
            ".style.borderTopColor")
        hexed = "#" + "".join(f"{int(v):02x}" for v in colour[4:-1].split(","))
        assert hexed == PRIVACY_COLORS["secagg"], colour
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
    finally:
        driver.quit()
