"""A real headless Chromium (Debian's package) driving the launched app on the real engine."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pandas as pd
import pytest
from playwright.sync_api import expect

from playground.bench.browser import CHROMIUM_ARGS, WATCH, chromium_location
from playground.run import Run
from tests.helpers import unfinished_after, wait_until

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM = chromium_location()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run `make test` (it installs it) or set PLAYGROUND_CHROMIUM")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def open_page(browser, url: str):
    """A new page on the app, once its form is there (the caller closes it)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    page.locator("#prompt textarea").wait_for()
    return page


@pytest.fixture()
def page(browser, app_url):
    page = open_page(browser, app_url)
    yield page
    page.close()


def set_slider(page, elem_id: str, value: int) -> None:
    """Type the value into the slider's box and leave the box, until its range shows it. Under load
    (about once in a hundred pages, with both cores busy) a slider just opened in the sampler
    settings took back its starting value after it was typed; typing it again then holds."""
    box, track = (page.locator(f"#{elem_id} input[type={kind}]") for kind in ("number", "range"))
    for attempt in range(3):
        box.fill(str(value))
        box.press("Enter")
        box.blur()
        try:
            expect(track).to_have_value(str(value), timeout=5_000)
            return
        except AssertionError:
            if attempt == 2:
                raise


def open_sampler_settings(page) -> None:
    page.get_by_text("Sampler settings").click()


def start_long_run(page, output_kind: str = "CUMULATIVE", n: int = 4) -> None:
    """n samples that run to 1500 tokens unless stopped."""
    page.locator("#prompt textarea").fill("Write a long story about a lighthouse keeper.")
    set_slider(page, "n", n)
    page.locator("#output-kind").get_by_label(output_kind).check()
    open_sampler_settings(page)
    set_slider(page, "max-tokens", 1500)
    page.locator("#ignore-eos input").check()
    page.locator("#run").click()


def fill_form(page, prompt: str, n: int, seed: int, max_tokens: int, ignore_eos: bool = False) -> None:
    """The settings the browser tests change: prompt, n, seed, max_tokens and ignore_eos."""
    page.locator("#prompt textarea").fill(prompt)
    set_slider(page, "n", n)
    page.locator("#seed textarea, #seed input").first.fill(str(seed))
    open_sampler_settings(page)
    set_slider(page, "max-tokens", max_tokens)
    if ignore_eos:
        page.locator("#ignore-eos input").check()


def run_to_the_end(page, prompt: str, n: int, seed: int, max_tokens: int) -> list[str]:
    """Fill the form, run, wait for the finish, and return the n columns' texts."""
    fill_form(page, prompt, n, seed, max_tokens)
    page.locator("#run").click()
    page.locator("#run-summary").get_by_text("finished").wait_for(timeout=120_000)
    return columns(page, n)


CARD = "#samples-area .sa-card[data-i='{}']"  # sample i's card in the samples area's columns view


def columns(page, n: int) -> list[str]:
    """The first ``n`` samples' texts, as the samples area's cards show them (each token's piece:
    an end-of-turn token is shown too). Read after the next animation frame: a message the area
    has taken (a reset clears the cards at once) is drawn in that frame, before the browser paints."""
    return page.evaluate("async (n) => { await new Promise((r) => requestAnimationFrame(() => r()));"
                         " return Array.from({length: n}, (_, i) => document.querySelector("
                         "`#samples-area .sa-card[data-i='${i}'] .sa-text`)?.textContent ?? ''); }", n)


def header(page, i: int) -> str:
    return page.locator(CARD.format(i) + " .sa-head").inner_text()


def shown_text(sample) -> str:
    """A sample's text as the samples area shows it: its tokens' pieces."""
    return "".join(sample.token_texts)


def click_bar(page, bar, hover: str) -> None:
    """Click a Set-tab bar as a person does: point at it until Plotly's hover shows ``hover``, then
    click (Plotly's drag layer takes the click and reports the hovered point)."""
    box = bar.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.locator("#set-groups-chart .hoverlayer").get_by_text(hover).wait_for(timeout=10_000)
    page.mouse.down()
    page.mouse.up()


def test_four_columns_fill_and_the_panels_draw_them(page):
    """One run, then the panels that read it: the token diff, the Set tab (a click on an answer
    group's bar names that group's samples) and the Timing tab's per-child timeline."""
    texts = run_to_the_end(page, "Once upon a time, in a village at the edge of the sea,", n=4, seed=42, max_tokens=24)
    assert all(t.strip() for t in texts), texts
    assert page.locator("#samples-area .sa-card").count() == 4
    page.screenshot(path=ARTIFACTS / "run-n4.png", full_page=True)

    page.get_by_role("tab", name="Diff").click()
    marks = page.locator("#diff-view .diff-row .tok-replace, #diff-view .diff-row .tok-insert")
    marks.first.wait_for(timeout=30_000)
    assert marks.count() > 0
    page.screenshot(path=ARTIFACTS / "diff.png", full_page=True)

    page.get_by_role("tab", name="Set").click()
    page.locator("#set-headline").get_by_text(re.compile("Majority answer|No majority")).wait_for(timeout=30_000)
    assert re.search(r"Majority answer: .+ given by \d of 4 samples|No majority: (all 4 answers differ|\d answers tie)",
                     page.locator("#set-headline").inner_text())  # four whole texts rarely agree
    assert "Vendi score" in page.locator("#set-figures").inner_text()
    bars = page.locator("#set-groups-chart g.point path")
    bars.first.wait_for(timeout=30_000)
    groups = page.evaluate("() => document.querySelector('#set-groups-chart .js-plotly-plot').data[0].customdata")
    assert sorted(int(i) for g in groups for i in str(g).split(",")) == [0, 1, 2, 3], groups  # each sample once
    last = len(groups) - 1
    page.locator("#set-groups-chart").scroll_into_view_if_needed()
    click_bar(page, bars.nth(last), "samples:")
    want = sorted(int(i) for i in str(groups[last]).split(","))
    page.locator("#set-picked-note").get_by_text("in this group").wait_for(timeout=10_000)
    assert all(f"#{i} (seed" in page.locator("#set-picked-note").inner_text() for i in want)
    # the samples area marks the group's samples, and only them
    page.wait_for_function("(n) => document.querySelectorAll('#samples-area .sa-card.mk').length === n",
                           arg=len(want), timeout=10_000)
    marked = page.eval_on_selector_all("#samples-area .sa-card.mk", "cards => cards.map(c => Number(c.dataset.i))")
    assert sorted(marked) == want
    page.screenshot(path=ARTIFACTS / "set.png", full_page=True)

    page.get_by_role("tab", name="Timing").click()
    page.wait_for_function("() => (document.querySelector('#child-timeline .gtitle')?.textContent || '')"
                           ".includes('Per-child timeline')", timeout=30_000)
    rows, decoded = page.evaluate("() => { const t = document.querySelector('#child-timeline .js-plotly-plot').data"
                                  ".find(t => t.name === 'decode'); "
                                  "return [Array.from(t.y), Array.from(t.x).every(x => x > 0)]; }")
    assert rows == ["#0", "#1", "#2", "#3"] and decoded, rows  # a row per child, and every child decoded
    page.locator("#child-timeline").scroll_into_view_if_needed()
    page.screenshot(path=ARTIFACTS / "timing.png", full_page=True)


def test_stop_keeps_the_partial_text(page, backend, host):
    start_long_run(page)
    page.wait_for_function(
        "() => (document.querySelector(\"#samples-area .sa-card[data-i='0'] .sa-text\")?.textContent || '')"
        ".trim().split(/\\s+/).length > 6", timeout=120_000)  # as Python's split() counts words
    # The engine's own count, from the latest event: vLLM counts each of the 4 children, not the parent.
    held = re.compile(r"1 parent → 4 child requests · \d+ requests? in the engine now")
    page.locator("#run-summary").get_by_text(held).wait_for(timeout=10_000)
    # The summary says the run's state; no progress tracker pulses beside it (an animation that has
    # the browser composite the page at every frame, on the engine's cores on a CPU machine)
    assert page.locator('#run-summary [data-testid="status-tracker"].generating').count() == 0
    page.locator("#stop").click()
    page.locator("#run-summary").get_by_text("stopped").first.wait_for(timeout=30_000)
    partial = columns(page, 1)[0]
    assert len(partial.split()) > 6
    assert host.run(backend.num_unfinished()) == 0
    page.screenshot(path=ARTIFACTS / "stopped.png", full_page=True)


def test_stop_before_the_first_event_keeps_what_final_only_made(page, backend, host):
    """FINAL_ONLY yields nothing until every sample is done: Stop must not wait for an event, and it
    aborts the run by its parent id, so the engine's last output (each sample's tokens so far,
    finish_reason abort) is shown and saved rather than lost. The Inspector, on screen, says the run
    has no event yet while it waits (not what the run before yielded), and then what its one event was."""
    page.get_by_role("tab", name="Inspector").click()
    start_long_run(page, output_kind="FINAL_ONLY", n=8)
    assert wait_until(lambda: host.run(backend.num_unfinished()) == 8, timeout=60), "the run never reached the engine"
    page.locator("#run-summary").get_by_text("waiting for the first output").wait_for(timeout=10_000)
    page.locator("#inspector-note").get_by_text("No event yet").wait_for(timeout=30_000)
    assert not page.locator("#events-table").is_visible()  # every raw event's table is drawn at the end

    async def every_sample_has_tokens() -> bool:  # past its prefill in the engine: it has made a token
        states = list(host.engine.output_processor.request_states.values())
        return len(states) == 8 and not any(state.is_prefilling for state in states)

    assert wait_until(lambda: host.run(every_sample_has_tokens()), timeout=60)
    started = time.monotonic()
    page.locator("#stop").click()
    page.locator("#run-summary").get_by_text("stopped").wait_for(timeout=5_000)
    assert time.monotonic() - started < 10
    assert host.run(backend.num_unfinished()) == 0
    # every sample kept its partial text (the cards are drawn at the next animation frame)
    assert wait_until(lambda: all(t.strip() for t in columns(page, 8)), timeout=10), columns(page, 8)
    texts = columns(page, 8)
    for i in range(8):
        assert "■ stopped (abort)" in header(page, i)
    page.locator("#inspector-note").get_by_text("This run was stopped: its one event is the stop's").wait_for(
        timeout=30_000)
    page.get_by_role("tab", name="Export").click()
    with page.expect_download() as download:
        page.locator("#download-json").click()
    run = Run.from_json(Path(download.value.path()).read_text(encoding="utf-8"))
    assert run.status == "aborted" and [shown_text(s) for s in run.samples] == texts
    assert all(s.finish_reason == "abort" and s.token_ids for s in run.samples)
    assert len(run.events) == 1 and run.events[0].finished  # FINAL_ONLY's one output: the abort's


def test_stop_ends_a_queued_run_before_it_starts(page, client, backend, host):
    """Eight long /sample calls fill every sampling slot; the page's run waits behind them."""
    jobs = [client.submit(prompt="Count to a thousand:", n=1, seed=k, max_tokens=1500, ignore_eos=True,
                          output_kind="DELTA", api_name="/sample") for k in range(8)]
    try:
        assert wait_until(lambda: host.run(backend.num_unfinished()) == 8, timeout=60), "the eight calls never all ran"
        page.locator("#prompt textarea").fill("Write a haiku about autumn rain.")
        page.locator("#run").click()
        page.locator("#run-summary").get_by_text("waiting for a free slot").wait_for(timeout=10_000)
        page.locator("#stop").click()
        page.locator("#run-summary").get_by_text("stopped before it started").wait_for(timeout=2_000)
        assert host.run(backend.num_unfinished()) == 8, "the queued run reached the engine"
    finally:
        for job in jobs:
            job.cancel()
    assert unfinished_after(backend, host, timeout=5) == 0


def test_closing_the_tab_aborts_every_child(browser, app_url, backend, host):
    page = open_page(browser, app_url)
    start_long_run(page)
    page.wait_for_function("() => (document.querySelector(\"#samples-area .sa-card[data-i='0'] .sa-text\")"
                           "?.textContent || '').length > 0", timeout=120_000)
    assert host.run(backend.num_unfinished()) == 4
    page.close()
    assert unfinished_after(backend, host, timeout=2) == 0, "children still running 2 s after the tab closed"
    fresh = open_page(browser, app_url)  # and a new tab runs at once
    try:
        assert run_to_the_end(fresh, "Roses are red,", n=2, seed=1, max_tokens=4)
    finally:
        fresh.close()


def test_the_first_run_starts_in_the_chat_template_and_the_preview_shows_it(page):
    """The default model is an instruct model: the template is on at first, the preview shows what
    is sent before anything is typed, and a completion-style example switches it off."""
    assert page.locator("#chat-template input").is_checked()
    page.get_by_text("Rendered prompt").click()
    preview = page.locator("#rendered-prompt")
    preview.get_by_text("The chat template is on").wait_for(timeout=30_000)
    assert "<|im_start|>user" in preview.inner_text() and "your prompt" in preview.inner_text()
    page.get_by_text("Once upon a time, in a village").first.click()
    page.wait_for_function("() => !document.querySelector('#chat-template input').checked", timeout=10_000)
    # the preview is drawn again for the prompt, then for the template: wait for the last one
    page.wait_for_function("() => { const t = document.querySelector('#rendered-prompt').innerText; "
                           "return t.includes('Once upon') && !t.includes('<|im_start|>'); }", timeout=30_000)


def test_each_session_shows_its_own_last_run_only(browser, app_url, page, client):
    """Two pages and a script: a run shows in the status line of its own page only."""
    run_to_the_end(page, "Roses are red,", n=2, seed=1, max_tokens=4)
    own = page.locator("#engine-status").inner_text()
    assert "the run on screen" in own
    client.predict(prompt="Dear Sir or Madam, " * 30, n=2, seed=2, max_tokens=2, api_name="/sample")

    other = open_page(browser, app_url)
    try:
        other.get_by_text("Rendered prompt").click()  # filled by the page's load event, like the status line
        other.locator("#rendered-prompt").get_by_text("The chat template is on").wait_for(timeout=30_000)
        assert "the run on screen" not in other.locator("#engine-status").inner_text()
        run_to_the_end(other, "Q: What colour is the sky? Answer in one long sentence please.", n=2, seed=3,
                       max_tokens=4)
        mine = other.locator("#engine-status").inner_text()
        assert "the run on screen" in mine and mine != own
        assert page.locator("#engine-status").inner_text() == own
    finally:
        other.close()


@pytest.mark.slow
def test_reproducibility_export_and_history_work_on_the_shown_run(page, tmp_path):
    """The panels after a run: replay and compare give verdicts, the downloads hold the very run
    on screen, and History reopens an earlier run."""
    texts = run_to_the_end(page, "The three most surprising facts about octopuses are", n=3, seed=7, max_tokens=12)

    page.get_by_role("tab", name="Export").click()
    with page.expect_download() as download:
        page.locator("#download-json").click()
    run = Run.from_json(Path(download.value.path()).read_text(encoding="utf-8"))
    assert [shown_text(s) for s in run.samples] == texts and [s.seed for s in run.samples] == [7, 8, 9]
    with page.expect_download() as download:
        page.locator("#download-csv").click()
    tokens = pd.read_csv(download.value.path())
    assert len(tokens) == sum(len(s.token_ids) for s in run.samples)
    with page.expect_download() as download:
        page.locator("#download-set-csv").click()
    answers = pd.read_csv(download.value.path())
    assert answers["sample"].tolist() == [0, 1, 2] and answers["seed"].tolist() == [7, 8, 9]
    assert answers["group"].notna().all()  # the whole text, normalised, is every sample's answer
    with page.expect_download() as download:
        page.locator("#download-report").click()
    report = Path(download.value.path()).read_text(encoding="utf-8")
    assert report.startswith("<!DOCTYPE html>") and run.request["request_id"] in report
    assert "Plotly.newPlot(" in report and "effective samples (Vendi)" in report  # the set measures, too

    page.get_by_role("tab", name="Reproducibility").click()
    assert not page.locator("#repro-table").is_visible()
    page.locator("#rerun-index input").fill("2")
    page.locator("#rerun-alone").click()
    verdict = page.locator("#repro-verdict").get_by_text("Sample 2 (seed 9) run again alone")
    verdict.wait_for(timeout=60_000)
    said = page.locator("#repro-verdict").inner_text()
    assert re.search(r"run again alone: (identical\.|diverged at token \d+: .+ in the run, .+ in the rerun\.)", said)
    if "diverged" in said:  # the two records say why: a batch of 3 children against a batch of one
        assert "Why they may differ" in said and "3 vs 1 samples shared a batch" in said, said
    else:
        assert "Why they may differ" not in said
    page.locator("#repro-table").wait_for()
    page.locator("#compare").click()
    verdict = page.locator("#repro-verdict").get_by_text("Wrapper vs native, seed 7")
    verdict.wait_for(timeout=60_000)
    said = page.locator("#repro-verdict").inner_text()
    same = int(re.search(r"(\d) of 3 samples identical", said).group(1))
    if same < 3:
        assert "the wrapper's fan-out vs vLLM's own fan-out" in said, said
    else:
        assert "Why they may differ" not in said
    table = page.locator("#repro-table").inner_text()
    assert len(re.findall(r"identical|diverged at token \d+", table)) == 3, table  # a verdict per sample
    # The three runs it made joined History, each marked with the run it repeats.
    page.get_by_role("tab", name="History").click()
    page.locator("#history-pick input").click()
    of = run.request["request_id"]
    for mark in (f"↻ rerun of {of} #2 alone", f"↻ wrapper rerun of {of}", f"↻ native rerun of {of}"):
        page.locator("#history-pick").get_by_role("option").filter(has_text=mark).wait_for(timeout=30_000)
    page.keyboard.press("Escape")
    page.get_by_role("tab", name="Reproducibility").click()
    page.screenshot(path=ARTIFACTS / "reproducibility.png", full_page=True)

    page.locator("#prompt textarea").fill("Write a haiku about autumn rain.")
    page.locator("#run").click()
    page.wait_for_function(  # the new run, finished
        "(old) => { const s = document.querySelector('#run-summary').innerText.split('\\n')[0]; "
        "return s.includes('finished') && !s.includes(old); }", arg=run.request["request_id"], timeout=120_000)
    page.get_by_role("tab", name="History").click()
    page.locator("#history-pick input").click()
    page.get_by_role("option", name=re.compile(rf"^{run.request['request_id']} ")).click()  # not one of its reruns
    page.locator("#reopen").click()
    page.wait_for_function("(want) => document.querySelector(\"#samples-area .sa-card[data-i='0'] .sa-text\")"
                           "?.textContent === want", arg=texts[0], timeout=30_000)
    assert columns(page, 3) == texts
    page.locator("#store-note").get_by_text("its settings are in the form").wait_for(timeout=30_000)
    assert page.locator("#prompt textarea").input_value() == run.request["prompt"]  # Run asks for it again


@pytest.mark.slow
def test_n128_streams_in_the_wall_and_in_columns_without_stalling_the_tab(page):
    """n=128 on the real engine, into the token wall and then into columns: every sample shows, no
    task of the page takes 600 ms while the run streams, the tab never goes a second without a frame
    (requestAnimationFrame; with a textbox per sample it went 1.0-1.25 s), nothing throws, and a
    hover over a token shows the alternatives the model saw there. The bounds are twice and more the
    benchmark's goal (300 ms) because here the engine's threads, the server and the browser share
    two cores: measured with one more busy process, the page's tasks and gaps grew from 110 ms to
    360 and 420 ms. The 250-300 ms goal is the benchmark's, on a quiet machine."""
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    fill_form(page, "Write one sentence about the sea.", n=128, seed=21, max_tokens=12, ignore_eos=True)
    for view in ("Token wall", "Columns"):
        page.locator("#samples-area .sa-bar").get_by_text(view, exact=True).click()
        page.evaluate(WATCH, "summary")
        page.wait_for_function("() => window.__watch.done", timeout=180_000, polling=200)
        w = page.evaluate("window.__watch")
        assert "finished" in page.locator("#run-summary").inner_text()
        seen = f"{view}: the longest task {w['task']:.0f} ms, the longest frame gap {w['gap']:.0f} ms " \
               f"({w['gapAt']:.0f} ms after the click) while streaming"
        assert w["task"] < 600 and w["gap"] < 1000, seen
        assert w["endGap"] < 1000, f"{view}: the finished run took the tab {w['endGap']:.0f} ms without a frame"
        if view == "Token wall":
            rows: set[int] = set()
            height = page.evaluate("document.querySelector('#samples-area .sa-wall').scrollHeight")
            for top in range(0, height + 300, 300):  # the wall draws the rows in view: scroll through
                page.evaluate(f"document.querySelector('#samples-area .sa-wall').scrollTop = {top}")
                page.wait_for_function("(top) => document.querySelector('#samples-area .sa-wall').scrollTop >= "
                                       "Math.min(top, document.querySelector('#samples-area .sa-wall').scrollHeight"
                                       " - document.querySelector('#samples-area .sa-wall').clientHeight) - 1",
                                       arg=top)
                page.wait_for_function("() => document.querySelectorAll('#samples-area .sa-row').length > 0")
                rows |= set(page.evaluate("() => [...document.querySelectorAll('#samples-area .sa-row')]"
                                          ".map(r => Number(r.dataset.i))"))
            assert rows == set(range(128))
            page.evaluate("document.querySelector('#samples-area .sa-wall').scrollTop = 0")
            page.locator("#samples-area .sa-row .tk").nth(3).hover()
            tip = page.locator("#samples-area .sa-tip")
            tip.wait_for(state="visible")
            assert "p = " in tip.inner_text() and tip.locator(".sa-topk tr").count() == 5  # logprobs 5: top-5
        else:
            assert page.locator("#samples-area .sa-card").count() == 128
            assert all(t.strip() for t in columns(page, 128))
    assert errors == []
