"""Measure the Graph tab's draw at n=256 in Chromium, on a running app (``python app.py``).

    python scripts/graph_draw.py --url http://127.0.0.1:7860                 # a synthetic n=256 x 128 run
    python scripts/graph_draw.py --url http://127.0.0.1:7860 --bundle run.json --repeat 5

Each repeat opens a fresh page, opens the run in the History tab (no engine), then clicks the
Graph tab and times, on the wall clock, until the tab's values arrived (its summary line) and until
the figure is drawn (its nodes in Plotly's data, then two animation frames). On a machine that other
jobs load, the wall clock says more about them than about the page, so it also gives the CPU
seconds spent: by the app's process until the values arrived (the graph, the figure, Gradio) and by
all Chromium processes until the figure was drawn. A synthetic run's words are random (the worst
case for chance meetings); a real run's bundle is the page's Export.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playground.bench.browser import CHROMIUM_ARGS, chromium_location  # noqa: E402 (after the path)

DRAWN = ("() => { const gd = document.querySelector('#graph-chart .js-plotly-plot'); return !!gd && !!gd._fullData "
         "&& gd._fullData.some((t) => t.customdata && t.customdata.length); }")
ARRIVED = "() => (document.querySelector('#graph-summary')?.innerText || '').includes('samples')"


def cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def browser_cpu() -> float:
    return sum(cpu(p) for p in psutil.Process().children(recursive=True) if "chrom" in p.name().lower())


def app_process(url: str) -> psutil.Process | None:
    """The process listening on the URL's port, if this user can see it."""
    port = int(url.rstrip("/").rsplit(":", 1)[-1])
    for conn in psutil.net_connections("tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
            return psutil.Process(conn.pid)
    return None


def synthetic_bundle() -> Path:
    from playground.backends.synthetic import synthetic_run

    run = synthetic_run(256, 128, seed=2)
    for s in run.samples:
        s.text = "".join(s.token_texts)
    path = Path(tempfile.mkdtemp()) / "synthetic-256x128.json"
    path.write_text(run.to_json(indent=1), encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="The running app.")
    parser.add_argument("--bundle", type=Path, help="A run bundle (default: a synthetic run of n=256 x 128).")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    bundle = args.bundle or synthetic_bundle()
    app = app_process(args.url)
    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_location(), args=CHROMIUM_ARGS)
        for _ in range(args.repeat):
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(args.url)
            page.locator("#prompt textarea").wait_for()
            page.get_by_role("tab", name="History").click()
            page.locator("#upload-runs input[type=file]").set_input_files(str(bundle))
            page.locator("#upload-note").get_by_text("Opened").wait_for(timeout=120_000)
            app0, browser0, started = cpu(app) if app else 0.0, browser_cpu(), time.perf_counter()
            page.get_by_role("tab", name="Graph").click()
            page.wait_for_function(ARRIVED, timeout=120_000, polling="raf")
            arrived, app1 = time.perf_counter() - started, cpu(app) if app else 0.0
            page.wait_for_function(DRAWN, timeout=120_000, polling="raf")
            page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
            drawn, browser1 = time.perf_counter() - started, browser_cpu()
            rows.append((arrived, drawn, app1 - app0, browser1 - browser0, psutil.getloadavg()[0]))
            print(f"values after {arrived:.2f} s, drawn after {drawn:.2f} s; CPU: app {app1 - app0:.2f} s, "
                  f"Chromium {browser1 - browser0:.2f} s; load average {rows[-1][4]:.1f}", flush=True)
            page.close()
        browser.close()
    medians = [statistics.median(column) for column in zip(*rows)]
    print(f"median: values {medians[0]:.2f} s, drawn {medians[1]:.2f} s; CPU app {medians[2]:.2f} s, "
          f"Chromium {medians[3]:.2f} s (load {medians[4]:.1f})")


if __name__ == "__main__":
    main()
