"""The dashboard in a real browser: serve ``app.py``, open it in Chromium, check the charts drew, take a
screenshot (into the test's temporary folder; set ``TWIN_DASHBOARD_SCREENSHOT=docs/dashboard.png`` to refresh the
README's picture).

Needs Debian's ``chromium`` at /usr/bin/chromium and the ``playwright`` Python package (its own browser
download is not used); skipped cleanly without them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parent.parent
SCREENSHOT_ENV = "TWIN_DASHBOARD_SCREENSHOT"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} not installed (apt-get install chromium)"),
]
playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed", exc_type=ImportError)
pytest.importorskip("streamlit")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def server():
    port = _free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
           "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
           "--client.toolbarMode", "minimal", "--server.fileWatcherType", "none"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited with {proc.returncode}: {proc.stdout.read().decode()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("streamlit did not answer /_stcore/health within 60 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        proc.stdout.close()


def test_dashboard_renders_charts_in_chromium(server, tmp_path):
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1750}, device_scale_factor=1)
            page.goto(server, wait_until="domcontentloaded")
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=90_000)
            # the script has finished when Streamlit's running indicator is gone
            page.wait_for_function(
                "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=90_000)
            page.wait_for_timeout(800)  # let Plotly finish laying out

            text = page.inner_text("body")
            assert "Traceback" not in text
            assert ("Binding limit" in text or "No limit binds" in text) and "TTFT p99 (ms)" in text
            assert page.locator('[data-testid="stMetric"]').count() >= 12
            assert page.locator('[data-testid="stAlert"]').count() >= 2  # the two verdicts
            plots = page.locator(".js-plotly-plot")
            assert plots.count() >= 1
            # the visible chart drew its curves: SVG paths with real geometry
            n_lines = page.locator(".js-plotly-plot:visible .scatterlayer path.js-line").count()
            assert n_lines >= 6  # TTFT, TPOT and E2E CDFs for the baseline and the what-if
            box = plots.first.bounding_box()
            assert box is not None and box["width"] > 600 and box["height"] > 200

            shot = Path(os.environ.get(SCREENSHOT_ENV) or tmp_path / "dashboard.png")
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=False)
            assert shot.stat().st_size > 50_000
        finally:
            browser.close()
