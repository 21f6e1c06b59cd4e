"""How fast the dashboard answers in a real browser: serve ``app.py`` as the README says, open it in Debian's
Chromium (Playwright) and time, from navigation,

* ``first useful render``: the sidebar with the scenario's settings and the list of changes the what-if runs;
* ``baseline shown``: the baseline's verdict (its run finishes first and is drawn at once);
* ``results``: every metric card (both runs simulated, in parallel worker processes);

for a cold server (nothing cached) and again after a reload (both runs from the per-scenario cache).

    PYTHONPATH=. python benchmarks/dashboard_first_render.py [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402
from twin.dashboard import drive  # noqa: E402


def measure(page, url: str) -> dict[str, float]:
    t0 = time.perf_counter()
    page.goto(url, wait_until="commit")
    marks = {}
    page.get_by_text("Changes:").first.wait_for(timeout=120_000)
    page.locator('input[aria-label="Seed"]').wait_for(timeout=120_000)
    marks["first useful render"] = time.perf_counter() - t0
    page.get_by_text("Binding limit").or_(page.get_by_text("No limit binds")).first.wait_for(timeout=120_000)
    marks["baseline shown"] = time.perf_counter() - t0
    page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stMetric\"]').length >= 12",
                           timeout=120_000)
    marks["results"] = time.perf_counter() - t0
    return marks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=positive_int, default=1, help="cold-server measurements (each on a fresh server)")
    args = ap.parse_args()
    if not os.path.exists(drive.CHROMIUM):
        print(f"{drive.CHROMIUM} not installed (apt-get install chromium)")
        return 2
    from playwright.sync_api import sync_playwright

    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=drive.CHROMIUM, args=drive.CHROMIUM_ARGS)
        try:
            for _ in range(args.repeat):
                port = drive.free_port()
                proc = drive.start_server(port)
                url = f"http://127.0.0.1:{port}"
                try:
                    drive.wait_healthy(proc, url)
                    page = browser.new_page(viewport={"width": 1440, "height": 1200})
                    rows.append(("cold server", measure(page, url)))
                    drive.wait_idle(page)
                    rows.append(("reload (cached)", measure(page, url)))
                    page.close()
                finally:
                    drive.stop_server(proc)
        finally:
            browser.close()
    print(f"dashboard, default scenario, {os.cpu_count()} CPUs (load average {os.getloadavg()[0]:.1f})")
    print(f"{'':18} {'first useful render':>20} {'baseline shown':>15} {'results':>8}")
    for name, m in rows:
        print(f"{name:18} {m['first useful render']:>19.2f}s {m['baseline shown']:>14.2f}s {m['results']:>7.2f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
