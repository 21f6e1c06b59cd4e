"""The dashboard in a real browser: serve ``app.py`` (as the README says, so ``.streamlit/config.toml``
applies), drive it in Chromium like a user, and check what the runs received.

Stories: the default page draws (and takes a screenshot, into the test's temporary folder; set
``TWIN_DASHBOARD_SCREENSHOT=docs/dashboard.png`` to refresh the README's picture); switch scenario after a
change, change one knob, and the what-if run receives exactly that one change (read from the workers' run log,
``TWIN_DASHBOARD_RUN_LOG``); upload a matching calibrated profile after switching; press Stop during a long run
and the CPU goes idle.

Needs Debian's ``chromium`` at /usr/bin/chromium and the ``playwright`` Python package (its own browser
download is not used); skipped cleanly without them. CPU-heavy: one server for the module.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from twin.dashboard import drive
from twin.dashboard import state as dash

SCREENSHOT_ENV = "TWIN_DASHBOARD_SCREENSHOT"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(drive.CHROMIUM),
                       reason=f"{drive.CHROMIUM} not installed (apt-get install chromium)"),
]
playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed", exc_type=ImportError)
pytest.importorskip("streamlit")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    log = tmp_path_factory.mktemp("runs") / "runs.jsonl"
    port = drive.free_port()
    proc = drive.start_server(port, {"TWIN_DASHBOARD_RUN_LOG": str(log)})
    url = f"http://127.0.0.1:{port}"
    try:
        drive.wait_healthy(proc, url)
        yield {"url": url, "log": log, "proc": proc}
    finally:
        drive.stop_server(proc)


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=drive.CHROMIUM, args=drive.CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _page(browser, url: str):
    page = browser.new_page(viewport={"width": 1440, "height": 1600}, device_scale_factor=1)
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stMetric"]', timeout=120_000)
    drive.wait_idle(page)
    return page


def _runs(log: Path, label: str) -> list[dict]:
    if not log.exists():
        return []
    return [e["scenario"] for e in map(json.loads, log.read_text().splitlines()) if e["label"] == label]


def _leaves(data, prefix=""):
    if isinstance(data, dict):
        out = {}
        for k, v in data.items():
            out.update(_leaves(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: data}


def _diff(a: dict, b: dict) -> dict:
    la, lb = _leaves(a), _leaves(b)
    return {k: (la.get(k), lb.get(k)) for k in set(la) | set(lb) if la.get(k) != lb.get(k)}


def _select(page, label: str, option: str) -> None:
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text=label)
    box.locator("input").click()
    page.get_by_role("option", name=option, exact=True).click()


def _number(page, label: str, value) -> None:
    field = page.locator(f'input[aria-label="{label}"]')
    field.fill(str(value))
    field.press("Enter")


def _no_errors(page) -> None:
    text = page.inner_text("body")
    assert "Traceback" not in text
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0, text[:3000]


def test_dashboard_renders_charts_in_chromium(served, browser, tmp_path):
    page = _page(browser, served["url"])
    try:
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=90_000)
        page.wait_for_timeout(800)  # let Plotly finish laying out
        _no_errors(page)
        text = page.inner_text("body")
        assert ("Binding limit" in text or "No limit binds" in text) and "TTFT p99" in text
        assert "per million output tokens" in text and "Cost model: roofline" in text
        assert page.locator('[data-testid="stMetric"]').count() >= 12
        assert page.locator('[data-testid="stAlert"]').count() >= 2  # the two verdicts
        n_lines = page.locator(".js-plotly-plot:visible .scatterlayer path.js-line").count()
        assert n_lines >= 6  # TTFT, TPOT and E2E CDFs for the baseline and the what-if
        box = page.locator(".js-plotly-plot").first.bounding_box()
        assert box is not None and box["width"] > 600 and box["height"] > 200
        # at 1440 px every card's value is shown whole (no ellipsis: scrollWidth fits clientWidth)
        cut = page.evaluate("""() => [...document.querySelectorAll('[data-testid="stMetricValue"] div')]
                                     .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)""")
        assert cut == []
        assert "scenario=chat_shared_prompt" in page.url  # the what-if is in the address bar
        shot = Path(os.environ.get(SCREENSHOT_ENV) or tmp_path / "dashboard.png")
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot), full_page=False)
        assert shot.stat().st_size > 50_000
    finally:
        page.close()


def test_switch_scenario_then_one_change_runs_exactly_that_change(served, browser):
    page = _page(browser, served["url"])
    try:
        _number(page, "Arrival rate (req/s)", 2)            # a change the next scenario must not inherit
        page.get_by_text("rate (req/s): 8 → 2").wait_for(timeout=60_000)
        drive.wait_idle(page)
        _select(page, "Bundled scenario", "concurrency_cap_trap")
        page.get_by_text("Changes: variant vllm-default", exact=True).wait_for(timeout=120_000)
        drive.wait_idle(page)
        _select(page, "What-if starts from", "baseline")
        page.get_by_text("No changes yet").wait_for(timeout=120_000)
        drive.wait_idle(page)
        before = len(_runs(served["log"], dash.WHATIF_LABEL))
        _number(page, "max_num_seqs", 16)
        page.get_by_text("Changes: max_num_seqs: 4 → 16", exact=True).wait_for(timeout=120_000)
        drive.wait_idle(page)
        _no_errors(page)
        runs = _runs(served["log"], dash.WHATIF_LABEL)
        assert len(runs) == before + 1
        start = dash.with_experiment(dash.load_bundled("concurrency_cap_trap").raw(), seed=0)
        assert _diff(start, runs[-1]) == {"server.max_num_seqs": (4, 16)}
        assert "w.max_num_seqs=16" in page.url and "w.rate_per_s" not in page.url
    finally:
        page.close()


def test_upload_a_matching_profile_after_switching(served, browser):
    profile = drive.ROOT / "calibration" / "profiles" / "tiny-llama-cpu.json"
    if not profile.exists():
        pytest.skip("no committed tiny-llama profile")
    page = _page(browser, served["url"])
    try:
        _select(page, "Bundled scenario", "validate_tiny_cpu")
        page.get_by_text("Changes: variant cap-4", exact=True).wait_for(timeout=120_000)
        drive.wait_idle(page)
        uploader = page.locator('[data-testid="stFileUploader"]').filter(has_text="Calibrated profile")
        uploader.locator('input[type="file"]').set_input_files(str(profile))
        page.get_by_text("(uploaded as tiny-llama-cpu.json)").first.wait_for(timeout=120_000)
        drive.wait_idle(page)
        _no_errors(page)
        run = _runs(served["log"], dash.WHATIF_LABEL)[-1]
        assert run["deployment"]["model"] == "tiny-llama" and run["cost_model"]["kind"] == "profile"
        assert Path(run["cost_model"]["profile"]).read_bytes() == profile.read_bytes()
    finally:
        page.close()


def test_stop_ends_a_long_simulation(served, browser):
    # about 48,000 requests (inside the page's bound): a run of a minute or more on this machine
    url = (f"{served['url']}/?scenario=chat_shared_prompt&start=baseline&seed=0"
           "&w.duration_s=5990.0&w.num_requests=47900")
    page = browser.new_page(viewport={"width": 1440, "height": 1200})
    try:
        page.goto(url, wait_until="domcontentloaded")
        page.get_by_text("Simulating").wait_for(timeout=60_000)
        server = served["proc"].pid
        time.sleep(1.0)
        procs = drive.descendants(server)
        before = {pid: drive.cpu_seconds([pid]) for pid in procs}
        t0 = time.monotonic()
        time.sleep(2.0)
        grew = {pid: drive.cpu_seconds([pid]) - before[pid] for pid in procs}
        busy = sum(grew.values()) / (time.monotonic() - t0)
        workers = [pid for pid, s in grew.items() if s > 0.05]
        assert workers and busy > 0.1  # a worker is simulating (the machine is shared: a fraction of a core)
        page.get_by_role("button", name="Stop the simulation").click()
        page.get_by_text("Stopped: the simulation was ended").wait_for(timeout=20_000)
        drive.wait_idle(page, 20_000)
        time.sleep(1.0)
        alive = [pid for pid in workers if os.path.exists(f"/proc/{pid}") and
                 open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"]
        assert alive == []  # the simulating worker was ended, not left to finish
        pids = drive.descendants(server) + [server]
        idle0, t1 = drive.cpu_seconds(pids), time.monotonic()
        time.sleep(3.0)
        idle = (drive.cpu_seconds(pids) - idle0) / (time.monotonic() - t1)
        print(f"CPU while simulating {busy:.2f} cores, after Stop {idle:.3f} cores")
        assert idle < 0.05
    finally:
        page.close()


# ---- laptop screens: every card's text whole, no exponent; baseline first and blue --------------------------
NO_EXPONENT = r"\d(\.\d+)?e\+\d"
CUT = """() => [...document.querySelectorAll('[data-testid="stMetric"] *')]
           .filter(e => e.scrollWidth > e.clientWidth + 1 && e.textContent.trim())
           .map(e => e.textContent)"""
ROW_LABELS = """() => [...document.querySelectorAll('[data-testid="stMarkdownContainer"] strong')]
           .filter(e => ['Baseline', 'What-if'].includes(e.textContent))
           .map(e => [e.textContent, e.getClientRects().length])"""


@pytest.mark.parametrize("width, height", [(1280, 720), (1366, 768)])
def test_cards_fit_laptop_screens_whole_and_without_exponents(served, browser, width, height):
    """An overloaded what-if (latencies of minutes, six-digit milliseconds) beside the default baseline: every
    card's label, value and change is shown whole (no "…", nothing wider than its box), no number is written
    with an exponent anywhere in the page, and the row labels do not wrap."""
    import re

    url = f"{served['url']}/?scenario=chat_shared_prompt&start=baseline&seed=0&w.rate_per_s=25.0"
    page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
    try:
        page.goto(url, wait_until="domcontentloaded")
        page.get_by_text("Changes: rate (req/s): 8 → 25").wait_for(timeout=120_000)
        page.wait_for_selector('[data-testid="stMetric"]', timeout=180_000)
        drive.wait_idle(page, 180_000)
        _no_errors(page)
        cards = page.locator('[data-testid="stMetric"]').all_inner_texts()
        assert len(cards) >= 12
        for text in cards:
            assert "…" not in text and "..." not in text and not re.search(NO_EXPONENT, text), text
        assert any(re.search(r"\d min\b", t) for t in cards), cards  # E2E p99 of minutes, in minutes
        assert page.evaluate(CUT) == []
        labels = page.evaluate(ROW_LABELS)
        assert labels and all(lines == 1 for _, lines in labels), labels
        body = page.inner_text("body")
        assert not re.search(NO_EXPONENT, body), re.search(NO_EXPONENT, body)
    finally:
        page.close()


def _upload_scenario(page, path: Path) -> None:
    page.get_by_text("Upload scenario YAML", exact=True).click()
    uploader = page.locator('[data-testid="stFileUploader"]').filter(has_text="Scenario YAML")
    uploader.locator('input[type="file"]').set_input_files(str(path))


def _legend_and_first_colour(page) -> tuple[list[str], str]:
    page.wait_for_selector(".js-plotly-plot .legendtext", timeout=120_000)
    page.wait_for_timeout(500)
    names = page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot .legendtext')]
                                     .map(e => e.textContent)""")
    colour = page.evaluate("""() => getComputedStyle(document.querySelector(
                                     '.js-plotly-plot .scatterlayer .trace path.js-line')).stroke""")
    return names, colour


def test_baseline_is_first_and_blue_when_the_whatif_finishes_first(served, browser, tmp_path):
    """Two uploaded scenarios share a variant: after the first, the second's what-if (that variant) comes from
    the run store at once while its baseline is still simulating. The chart still lists the baseline first,
    in blue."""
    common = """description: order check
deployment: {{gpu: H100-SXM, model: llama-3.1-8b}}
workload:
  arrivals: {{process: poisson, rate_per_s: 4}}
  num_requests: {n}
  classes: [{{name: chat, share: 1.0, prompt: {{suffix_tokens: 200}}, output_tokens: 40}}]
variants:
  shared: {{workload: {{num_requests: 90}}}}
"""
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text("name: order-check\n" + common.format(n=60))
    second.write_text("name: order-check\n" + common.format(n=75))
    page = browser.new_page(viewport={"width": 1366, "height": 768}, device_scale_factor=1)
    try:
        page.goto(served["url"], wait_until="domcontentloaded")
        page.wait_for_selector('[data-testid="stMetric"]', timeout=120_000)
        drive.wait_idle(page)
        for path, n in ((first, 60), (second, 75)):
            _upload_scenario(page, path)
            page.get_by_text(f"{n} and 90 requests").wait_for(timeout=120_000)
            page.wait_for_selector('[data-testid="stMetric"]', timeout=120_000)
            drive.wait_idle(page)
            _no_errors(page)
            names, colour = _legend_and_first_colour(page)
            assert names[:2] == [dash.BASELINE_LABEL, dash.WHATIF_LABEL], names
            assert colour == "rgb(31, 119, 180)", colour  # PALETTE[0], blue
    finally:
        page.close()


def test_an_uploaded_traces_error_names_the_file_as_written(served, browser, tmp_path):
    """A trace whose header the page cannot read: the error names the file the user uploaded (not the server's
    temporary copy), shows ``:x:`` as typed (no emoji), and advises what Upload trace lets them do."""
    bad = tmp_path / "my :x: trace.csv"
    bad.write_text("when,:x:,*tokens*\n1,2,3\n")
    page = browser.new_page(viewport={"width": 1366, "height": 768}, device_scale_factor=1)
    try:
        page.goto(served["url"], wait_until="domcontentloaded")
        page.wait_for_selector('[data-testid="stMetric"]', timeout=120_000)
        drive.wait_idle(page)
        page.get_by_text("Upload trace", exact=True).click()
        uploader = page.locator('[data-testid="stFileUploader"]').filter(has_text="Trace")
        uploader.locator('input[type="file"]').set_input_files(str(bad))
        error = page.locator('[data-testid="stAlertContentError"]')
        error.wait_for(timeout=120_000)
        text = error.inner_text().replace("\u2060", "")
        assert text.startswith("my :x: trace.csv:1: cannot tell the trace format"), text
        assert "(when, :x:, *tokens*)" in text and "❌" not in text
        assert dash.UPLOAD_DIR_NAME not in text and "upload a scenario YAML" in text
        assert "set workload.trace.format to one of" not in text
    finally:
        page.close()
