"""Regenerate assets/sweep-chart.png: the README's sweep, run for real, its chart shot by headless Chromium.

    .venv/bin/python scripts/sweep_chart.py [--runs sweep.jsonl] [--chromium /usr/bin/chromium]

Without ``--runs`` it runs the README's ``python app.py sweep`` command (an engine of its own, about
a minute on a 2-core CPU) and keeps its bundles beside the picture's temporary page.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The README's command (section "Sweeps and reports"), less its --out.
SWEEP = ["sweep", "--prompt", "Name one colour. Answer with one word.", "--use-chat-template",
         "--param", "temperature", "--values", "0.2", "0.5", "0.8", "1.1", "1.4", "--n", "8", "--seed", "1",
         "--max-tokens", "24", "--logprobs", "1", "--answer", "normalized"]
ANSWER = "normalized"
MEASURES = ["mean_tokens", "mean_prob", "distinct_2", "effective_samples", "vote_share"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=Path, help="A sweep's JSONL; default: run the README's sweep now.")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "sweep-chart.png")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from playground import analysis
    from playground.bundles import read_runs

    with tempfile.TemporaryDirectory() as tmp:
        runs_path = args.runs
        if runs_path is None:
            runs_path = Path(tmp) / "sweep.jsonl"
            subprocess.run([sys.executable, "app.py", *SWEEP, "--out", str(runs_path)], cwd=ROOT, check=True)
        runs = read_runs(runs_path)
        measures = analysis.with_answers(analysis.set_measures_hook(), ANSWER)
        fig = analysis.sweep_chart(runs, measures, MEASURES)
        fig.update_layout(width=1040, margin={"t": 70, "b": 50})
        page_path = Path(tmp) / "chart.html"
        page_path.write_text(fig.to_html(include_plotlyjs=True, full_html=True), encoding="utf-8")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1080, "height": int(fig.layout.height) + 40})
            page.goto(page_path.as_uri())
            page.locator(".js-plotly-plot .main-svg").first.wait_for()
            page.locator(".js-plotly-plot").first.screenshot(path=str(args.out))
            browser.close()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
