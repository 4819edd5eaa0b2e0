"""Regenerate assets/screenshot.png: a real run of n=4 in the real app, shot by headless Chromium.

    .venv/bin/python scripts/screenshot.py [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "screenshot.png")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from playground.backends.embedded import EmbeddedBackend
    from playground.ui import build_app, launch_app

    backend = EmbeddedBackend.start(max_n=32)
    demo = build_app(backend)
    _, url, _ = launch_app(demo, prevent_thread_lock=True, server_name="127.0.0.1", quiet=True)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium,
                                        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            page = browser.new_page(viewport={"width": 1280, "height": 1560})
            page.goto(url)
            page.locator("#prompt textarea").fill("Once upon a time, in a village at the edge of the sea,")
            page.locator("#chat-template input").uncheck()  # a story's first line: a completion, not a chat
            page.locator("#seed textarea, #seed input").first.fill("7")
            page.get_by_text("Sampler settings").click()
            box = page.locator("#max-tokens input[type=number]")
            box.fill("40")
            box.press("Enter")
            page.get_by_text("Sampler settings").click()  # fold it again for the picture
            page.locator("#run").click()
            page.locator("#run-summary").get_by_text("finished").wait_for(timeout=300_000)
            page.get_by_role("tab", name="Diff").click()
            page.locator("#diff-view .diff-row").first.wait_for()
            page.locator("#run-summary").scroll_into_view_if_needed()
            page.screenshot(path=args.out, full_page=False)
            browser.close()
    finally:
        demo.close()
        backend.shutdown()
    print(args.out)


if __name__ == "__main__":
    main()
