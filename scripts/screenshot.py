"""Regenerate the README's pictures from real runs in the real app, shot by headless Chromium:

- assets/screenshot.png: a run of n=32 streaming into the token wall;
- assets/convergence.png: the Set tab's curves for a question with one right answer (n=64);
- assets/branch.png: the Branch tab's "what if" at the token a yes/no answer turns on;
- assets/graph.png: the Graph tab for 16 one-sentence descriptions that part and meet again.

    .venv/bin/python scripts/screenshot.py [--chromium /usr/bin/chromium] [--only screenshot convergence branch graph]

One engine for the four (about 3 minutes on a 2-core CPU). Every run is seeded, so the pictures
come out the same on the same machine, but for the branches of "what if": a branch draws seeds of
its own, so that picture (and the README's words on it) changes with each shot.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STORY = "Once upon a time, in a village at the edge of the sea,"
QUESTION = "How many days are in a week? Answer with a number."
QUESTION_ANSWER = "7"
MOON = "Describe the moon in one sentence."
YES_NO = "Is the Pacific Ocean larger than the Atlantic Ocean? Answer yes or no."


def fill_form(page, prompt: str, n: int, seed: int, max_tokens: int, chat: bool) -> None:
    page.locator("#prompt textarea").fill(prompt)
    chat_box = page.locator("#chat-template input")
    chat_box.check() if chat else chat_box.uncheck()
    box = page.locator("#n input[type=number]")
    box.fill(str(n))
    box.press("Enter")
    page.locator("#seed textarea, #seed input").first.fill(str(seed))
    page.get_by_text("Sampler settings").click()
    box = page.locator("#max-tokens input[type=number]")
    box.fill(str(max_tokens))
    box.press("Enter")
    page.get_by_text("Sampler settings").click()  # fold it again for the picture


def run(page) -> None:
    page.locator("#run").click()
    page.locator("#run-summary").get_by_text("finished").wait_for(timeout=300_000)


def screenshot(page, out: Path) -> None:
    fill_form(page, STORY, n=32, seed=7, max_tokens=40, chat=False)
    run(page)
    page.locator("#run-summary").scroll_into_view_if_needed()
    page.screenshot(path=out, full_page=False)


def convergence(page, out: Path) -> None:
    fill_form(page, QUESTION, n=64, seed=1, max_tokens=16, chat=True)
    run(page)
    page.get_by_role("tab", name="Set").click()
    page.locator("#set-extractor").get_by_label("last number").check()
    box = page.locator("#set-reference textarea, #set-reference input").first
    box.fill(QUESTION_ANSWER)
    box.press("Enter")
    page.locator("#set-headline").get_by_text("Against the reference").wait_for(timeout=60_000)
    page.wait_for_function("() => document.querySelectorAll('#set-convergence .legendtext').length >= 3")
    print(page.locator("#set-headline").inner_text())
    page.locator("#set-convergence").screenshot(path=out)


def branch(page, out: Path) -> None:
    fill_form(page, YES_NO, n=16, seed=3, max_tokens=12, chat=True)
    run(page)
    page.get_by_role("tab", name="Diff").click()
    page.locator("#diff-view .tok[data-s='0'][data-p='0']").first.click()
    page.locator("#branch-context").get_by_text("at token 0").wait_for(timeout=60_000)
    page.locator("#what-if-run").click()
    page.locator("#what-if-table").wait_for(state="visible", timeout=300_000)
    page.locator("#what-if-tree .js-plotly-plot").wait_for(timeout=60_000)
    print(page.locator("#branch-note").inner_text())
    page.locator("#tab-branch").screenshot(path=out)


def graph(page, out: Path) -> None:
    fill_form(page, MOON, n=16, seed=1, max_tokens=24, chat=True)
    run(page)
    page.get_by_role("tab", name="Graph").click()
    page.locator("#graph-chart .js-plotly-plot").wait_for(timeout=60_000)
    page.wait_for_function("() => document.querySelector('#graph-chart .js-plotly-plot')?.data?.length > 0")
    print(page.locator("#graph-summary").inner_text())
    page.locator("#tab-graph").screenshot(path=out)


def main() -> None:
    from playground.bench.browser import chromium_location

    parser = argparse.ArgumentParser()
    parser.add_argument("--chromium", default=chromium_location())
    parser.add_argument("--only", nargs="+", choices=PICTURES, default=list(PICTURES))
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from playground.backends.embedded import EmbeddedBackend
    from playground.request import DEFAULT_MAX_N
    from playground.ui import build_app, launch_app

    with EmbeddedBackend.start(max_n=DEFAULT_MAX_N) as backend:
        demo = build_app(backend)
        _, url, _ = launch_app(demo, prevent_thread_lock=True, server_name="127.0.0.1", quiet=True)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=args.chromium,
                                            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
                for name in args.only:
                    page = browser.new_page(viewport={"width": 1280, "height": 1400})
                    page.goto(url)
                    page.locator("#prompt textarea").wait_for()
                    out = ROOT / "assets" / f"{name}.png"
                    PICTURES[name](page, out)
                    page.close()
                    print(f"wrote {out}")
                browser.close()
        finally:
            demo.close()


PICTURES = {"screenshot": screenshot, "convergence": convergence, "branch": branch, "graph": graph}

if __name__ == "__main__":
    main()
