"""A real headless Chromium (Debian's package) driving the launched app on the real engine."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM = os.environ.get("PLAYGROUND_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run `make test` (it installs it) or set PLAYGROUND_CHROMIUM")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
                  "--no-first-run", "--disable-component-update", "--disable-sync"],
        )
        yield browser
        browser.close()


@pytest.fixture()
def page(browser, app_url):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app_url)
    page.locator("#prompt textarea").wait_for()
    yield page
    page.close()


def set_slider(page, elem_id: str, value: int) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def open_sampler_settings(page) -> None:
    page.get_by_text("Sampler settings").click()


def start_long_run(page) -> None:
    """n=4 samples that run to 1500 tokens unless stopped."""
    page.locator("#prompt textarea").fill("Write a long story about a lighthouse keeper.")
    set_slider(page, "n", 4)
    open_sampler_settings(page)
    set_slider(page, "max-tokens", 1500)
    page.locator("#ignore-eos input").check()
    page.locator("#run").click()


def test_four_columns_fill_and_the_diff_highlights_tokens(page):
    page.locator("#prompt textarea").fill("Once upon a time, in a village at the edge of the sea,")
    set_slider(page, "n", 4)
    page.locator("#seed textarea, #seed input").first.fill("42")
    open_sampler_settings(page)
    set_slider(page, "max-tokens", 24)
    page.locator("#run").click()
    page.locator("#run-summary").get_by_text("finished").wait_for(timeout=120_000)
    texts = [page.locator(f"#sample-{i}-text textarea").input_value() for i in range(4)]
    assert all(t.strip() for t in texts), texts
    assert not page.locator("#sample-4-text").is_visible()
    page.screenshot(path=ARTIFACTS / "run-n4.png", full_page=True)

    page.get_by_role("tab", name="Diff").click()
    marks = page.locator("#diff-view .diff-row .tok-replace, #diff-view .diff-row .tok-insert")
    marks.first.wait_for(timeout=30_000)
    assert marks.count() > 0
    page.screenshot(path=ARTIFACTS / "diff.png", full_page=True)


def test_stop_keeps_the_partial_text(page, backend, host):
    start_long_run(page)
    page.wait_for_function(
        "() => (document.querySelector('#sample-0-text textarea')?.value || '').split(' ').length > 6",
        timeout=120_000)
    page.locator("#stop").click()
    page.locator("#run-summary").get_by_text("stopped").first.wait_for(timeout=30_000)
    partial = page.locator("#sample-0-text textarea").input_value()
    assert len(partial.split()) > 6
    assert host.run(backend.num_unfinished()) == 0
    page.screenshot(path=ARTIFACTS / "stopped.png", full_page=True)


def test_closing_the_tab_aborts_every_child(browser, app_url, backend, host):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app_url)
    start_long_run(page)
    page.wait_for_function("() => (document.querySelector('#sample-0-text textarea')?.value || '').length > 0",
                           timeout=120_000)
    assert host.run(backend.num_unfinished()) == 4
    page.close()
    closed = time.monotonic()
    while host.run(backend.num_unfinished()) and time.monotonic() - closed < 2:
        time.sleep(0.05)
    assert host.run(backend.num_unfinished()) == 0, "children still running 2 s after the tab closed"
