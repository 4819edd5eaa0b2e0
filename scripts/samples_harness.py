"""Measure the samples area in Chromium: a minimal page with the component, runs streamed into it.

    python scripts/samples_harness.py                      # n=32,128,256 x 64 tokens, both views, each design
    python scripts/samples_harness.py --n 256 --designs ack1 fixed100 --views wall --repeat 3
    python scripts/samples_harness.py --bundle run.json    # replay a real run at its recorded pace

Each run is replayed at an engine's pace (synthetic: every unfinished sample gets a token per step,
``synthetic.step_for(n)`` s a step, the first token after 0.3 s; a bundle: each token at its
recorded time) into a fresh page served on loopback by this process. Figures, per run:

- ``first_ms``: from the Run click to the first frame showing a token (the page's clock; a
  synthetic run's first token exists 300 ms after the replay starts);
- ``updates_per_s``: frames in which the shown tokens changed, per second from the first to the
  last such frame;
- ``max_gap_ms``: the longest time between two animation frames from the click to the run's end
  (requestAnimationFrame; a busy main thread paints nothing), and ``long_tasks_ms`` summed;
- ``bytes_mean``/``bytes_max``: the JSON length of each message the server sent (``SamplesSession.sent``);
- ``heap_mb``: the tab's JS heap after the run (CDP ``Performance.getMetrics``, JSHeapUsedSize).

Designs: ``ack1``/``ack2``: the next delta goes when fewer than 1 (2) messages are unacknowledged
(at most every 50 ms); ``fixedNNN``: one delta every NNN ms whatever the browser does.
Writes ``artifacts/samples_harness.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playground.backends.synthetic import synthetic_run  # noqa: E402 (after the path)
from playground.bench.browser import CHROMIUM_ARGS, WATCH, chromium_path  # noqa: E402 (after the path)
from playground.bench.probes import free_port  # noqa: E402 (after the path)
from playground.bench.samples_demo import demo_app  # noqa: E402 (after the path)
from playground.run import Run  # noqa: E402 (after the path)


def design_config(design: str) -> dict:
    if design.startswith("ack"):
        return {"window": int(design[3:] or 1), "interval": None}
    if design.startswith("fixed"):
        return {"window": 1, "interval": int(design[5:]) / 1000}
    raise SystemExit(f"unknown design {design!r}: ack1, ack2, fixed100, fixed250, ...")


def measure(browser, url: str, record: dict, timeout: float, throttle: float = 1.0) -> dict:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(url)
        page.locator("#samples-area .sa-bar").wait_for()
        time.sleep(0.5)  # the page settles (fonts, Gradio's own start-up)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        if throttle > 1:  # a slower machine (or a busier tab): the page's main thread runs this many times slower
            cdp.send("Emulation.setCPUThrottlingRate", {"rate": throttle})
        before = len(record["sessions"])
        page.evaluate(WATCH, "area")
        page.wait_for_function("() => window.__watch.end !== null", timeout=timeout * 1000, polling=250)
        w = page.evaluate("window.__watch")
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    finally:
        page.close()
    session = record["sessions"][before]
    sizes = [size for _, size in session.sent]
    streaming = (w["changes"][-1] - w["first"]) / 1000 if len(w["changes"]) > 1 else float("nan")
    first_ms = w["first"] - w["click"]
    return {
        "first_ms": round(first_ms),
        "updates_per_s": round((len(w["changes"]) - 1) / streaming, 1) if streaming > 0 else None,
        "max_gap_ms": round(w["gap"]),
        "max_gap_at_ms": round(w.get("gapAt") or 0),  # when it began, from the click
        "long_tasks_ms": round(w["longTasks"]),
        "messages": len(sizes),
        "bytes_mean": round(statistics.mean(sizes)),
        "bytes_max": max(sizes),
        "bytes_total": sum(sizes),
        "acks": session.acks,
        "heap_mb": round(metrics.get("JSHeapUsedSize", 0) / 2**20, 1),
        "page_errors": errors,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[32, 128, 256])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--views", nargs="+", default=["wall", "columns"], choices=["wall", "columns"])
    parser.add_argument("--designs", nargs="+", default=["ack1", "ack2", "fixed100", "fixed250"])
    parser.add_argument("--speed", type=float, default=1.0, help="replay this many times faster than the engine")
    parser.add_argument("--throttle", type=float, default=1.0,
                        help="slow the page's CPU this many times (CDP), to see each design when the browser lags")
    parser.add_argument("--repeat", type=int, default=1, help="runs per configuration (the median is shown)")
    parser.add_argument("--bundle", type=Path, help="replay this run bundle (its n) instead of synthetic runs")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "artifacts" / "samples_harness.json")
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    chromium = chromium_path()
    if chromium is None:
        raise SystemExit("Chromium not found: set PLAYGROUND_CHROMIUM or install Debian's chromium")
    bundle = Run.from_json(args.bundle.read_text(encoding="utf-8")) if args.bundle else None
    config: dict = {"tokens": args.tokens, "speed": args.speed}
    demo, record = demo_app(config, make_run=(lambda c: bundle) if bundle else
                            (lambda c: synthetic_run(c["n"], c["tokens"], seed=c["n"])))
    demo.queue(default_concurrency_limit=8)
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1",
                            server_port=args.port or free_port(), quiet=True)
    rows = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            for n in ([bundle.n] if bundle else args.n):
                for view in args.views:
                    for design in args.designs:
                        config.update(n=n, view=view, **design_config(design))
                        runs = []
                        for _ in range(args.repeat):
                            timeout = (60 + 0.25 * n) * args.throttle
                            runs.append(measure(browser, url, record, timeout, args.throttle))
                        row = {"n": n, "view": view, "design": design, "runs": runs,
                               **{k: _median([r[k] for r in runs]) for k in runs[0] if k != "page_errors"},
                               "max_gap_ms_worst": max(r["max_gap_ms"] for r in runs),
                               "page_errors": sum(len(r["page_errors"]) for r in runs)}
                        rows.append(row)
                        print(_line(row), flush=True)
            browser.close()
    finally:
        demo.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"source": str(args.bundle or "synthetic"), "tokens": args.tokens,
                                    "speed": args.speed, "throttle": args.throttle, "rows": rows}, indent=1))
    print("\n| n | view | design | first token ms | updates/s | longest gap ms (worst) | bytes/update mean (max) "
          "| heap MB | page errors |\n|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['n']} | {row['view']} | {row['design']} | {row['first_ms']} | {row['updates_per_s']} | "
              f"{row['max_gap_ms']} ({row['max_gap_ms_worst']}) | {row['bytes_mean']} ({row['bytes_max']}) | "
              f"{row['heap_mb']} | {row['page_errors']} |")
    return 0




def _median(values):
    numbers = [v for v in values if isinstance(v, (int, float))]
    return round(statistics.median(numbers), 1) if numbers else None


def _line(row: dict) -> str:
    keys = ["first_ms", "updates_per_s", "max_gap_ms", "max_gap_at_ms", "long_tasks_ms", "messages", "bytes_mean",
            "bytes_max", "heap_mb"]
    return f"n={row['n']} {row['view']} {row['design']}: " + ", ".join(f"{k}={row[k]}" for k in keys)


if __name__ == "__main__":
    raise SystemExit(main())
