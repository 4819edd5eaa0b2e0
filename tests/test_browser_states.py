"""The page's run states in a real headless Chromium on the real engine: a refusal never leaves the
tab stuck, Stop and a double click leave it ready, the samples come into view after Run, and one
entropy is shown for a token everywhere. The handlers' side is tests/test_page_states.py.
"""

from __future__ import annotations

import os
import re
import signal

import pytest

from playground.analysis import entropies
from playground.backends.synthetic import synthetic_run
from tests.helpers import unfinished_after, wait_until
from tests.test_browser import (  # noqa: F401  (browser: the fixture)
    ARTIFACTS,
    browser,
    columns,
    fill_form,
    open_page,
    open_sampler_settings,
    set_slider,
    start_long_run,
)
from tests.test_browser_panels import open_saved_run

HAIKU = "Write a haiku about autumn rain."


def summary(page) -> str:
    return page.locator("#run-summary").inner_text()


def wait_for_summary(page, text: str, timeout: float = 120_000) -> None:
    page.locator("#run-summary").get_by_text(text).first.wait_for(timeout=timeout)


# Everything the page's live regions (role=status) say from now on, in window.__heard
HEARD_JS = """() => {
  window.__heard = [];
  new MutationObserver(() => {
    for (const region of document.querySelectorAll('body > [role=status]')) {
      const text = region.textContent;
      if (text && region.dataset.heard !== text) { region.dataset.heard = text; window.__heard.push(text); }
    }
  }).observe(document.body, {childList: true, subtree: true, characterData: true});
}"""


def heard(page, text: str) -> None:
    """The page's live region (role=status) says ``text``: what a screen reader announces."""
    page.wait_for_function("(t) => (document.querySelector('#page-status[role=status]')?.textContent || '')"
                           ".includes(t)", arg=text, timeout=10_000)


def in_view(page, selector: str) -> bool:
    """Whether the element's top is on screen with room below it (a person sees its first lines)."""
    return page.evaluate("(s) => { const r = document.querySelector(s).getBoundingClientRect(); "
                         "return r.top >= 0 && r.top < window.innerHeight - 120; }", selector)


@pytest.mark.parametrize("viewport", [(1400, 1000), pytest.param((1280, 720), marks=pytest.mark.slow)])
def test_a_refusal_leaves_the_page_ready_and_the_samples_come_into_view(browser, app_url, viewport):  # noqa: F811
    """The prompt box starts empty: Run is refused with the reason, and the next Run (an example,
    picked by a click) streams into a samples area that is in view without scrolling by hand."""
    width, height = viewport
    page = browser.new_page(viewport={"width": width, "height": height})
    try:
        page.goto(app_url)
        page.locator("#prompt textarea").wait_for()
        page.locator("#run").click()
        wait_for_summary(page, "refused", 30_000)
        said = summary(page)
        assert "the prompt is empty" in said and "waiting for a free slot" not in said, said
        heard(page, "refused: the prompt is empty")  # said to a screen reader too, not only shown
        if width == 1400:  # a prompt past the context, refused the same way
            page.locator("#prompt textarea").fill("word " * 3000)
            page.locator("#run").click()
            page.locator("#run-summary").get_by_text("longer than the context").wait_for(timeout=30_000)
            # the other buttons that start runs, with no run on screen: each says so beside itself
            page.get_by_role("tab", name="Branch").click()
            page.locator("#branch-run").click()
            page.locator("#branch-note").get_by_text("a branch starts from a run on screen").wait_for(timeout=10_000)
            page.get_by_role("tab", name="Reproducibility").click()
            for button, said in (("#rerun-alone", "the rerun needs a run"), ("#compare", "the comparison reuses")):
                page.locator(button).click()
                page.locator("#repro-verdict").get_by_text(said).wait_for(timeout=10_000)
        page.locator("#examples").get_by_text(HAIKU).click()
        page.wait_for_function("(want) => document.querySelector('#prompt textarea').value === want", arg=HAIKU)
        page.locator("#store-note").get_by_text("The example set n=4, temperature 0.8 and the chat template on"
                                                ).wait_for(timeout=30_000)  # what it changed in folded settings too
        page.locator("#run").click()
        wait_for_summary(page, "finished")
        heard(page, "✔ finished")
        assert in_view(page, "#samples-area"), "the samples area is out of view after Run"
        assert page.locator("#samples-area .sa-card").count() == 4  # the example's n
        assert all(text.strip() for text in columns(page, 4))
        page.screenshot(path=ARTIFACTS / f"after-run-{width}x{height}.png")
    finally:
        page.close()


def test_stop_then_run_and_a_double_click_start_one_run_each(browser, app_url, backend, host):  # noqa: F811
    page = open_page(browser, app_url)
    try:
        page.evaluate(HEARD_JS)
        start_long_run(page, n=4)
        page.wait_for_function("() => (document.querySelector(\"#samples-area .sa-card[data-i='0'] .sa-text\")"
                               "?.textContent || '').length > 0", timeout=120_000)
        assert in_view(page, "#stop-near")  # Run scrolled the page to the samples, past the form's Stop
        assert page.locator("#stop-near").is_enabled()  # while a run streams there, and the tabs say which follow it
        assert "follow it" in page.locator("#panels-note").inner_text()
        page.evaluate("() => window.scrollTo(0, 0)")
        page.locator("#run").click()  # pressed again at the form: the line there says it started nothing, in view
        page.locator("#store-note").get_by_text("Run was pressed while a run was going").wait_for(timeout=30_000)
        assert in_view(page, "#store-note")
        page.locator("#ignore-eos input").focus()  # Esc, from a checkbox too, presses the Stop by the summary
        page.keyboard.press("Escape")
        wait_for_summary(page, "stopped", 30_000)
        heard(page, "■ stopped")
        # What a screen reader heard: the lines' words, never Gradio's progress timer drawn over them
        said = page.evaluate("() => window.__heard")
        assert any("Run was pressed while a run was going" in line for line in said), said
        assert not any(re.search(r"processing|queue:|\d\.\ds\b", line) for line in said), said
        page.wait_for_function("() => document.querySelector('#stop-near').disabled", timeout=10_000)  # nothing to stop
        assert page.locator("#panels-note").inner_text().strip() == ""
        assert unfinished_after(backend, host, timeout=3) == 0

        page.locator("#prompt textarea").fill("Roses are red,")  # the sampler settings are still open
        set_slider(page, "n", 3)
        set_slider(page, "max-tokens", 30)  # long enough for the second click to land while it runs
        counts: list[int] = []
        page.locator("#run").dblclick()
        while not wait_until(lambda: "finished" in summary(page), timeout=0.2):
            counts.append(host.run(backend.num_unfinished()))
            assert len(counts) < 1000, "the run did not finish"
        assert max(counts) <= 3, f"a double click started two runs: {max(counts)} requests in the engine"
        page.get_by_role("tab", name="History").click()
        page.locator("#history-pick input").click()
        assert page.get_by_role("option").count() == 2  # the stopped run and this one: no third
        page.keyboard.press("Escape")

        first = re.search(r"run-[0-9a-f]{8}", summary(page)).group(0)
        set_slider(page, "max-tokens", 3)
        page.locator("#prompt textarea").press("Control+Enter")  # and the page is ready for the next: Ctrl+Enter runs
        page.wait_for_function("(old) => { const s = document.querySelector('#run-summary').innerText.split('\\n')[0]; "
                               "return s.includes('finished') && !s.includes(old); }", arg=first, timeout=120_000)
    finally:
        page.close()


def test_the_form_by_keyboard_radio_groups_hints_and_focus(browser, app_url):  # noqa: F811
    """A radio group is one Tab stop, its arrows pick the next option; a slider shows where the
    keyboard is; the hints are readable (contrast at least 4.5:1 on their background)."""
    page = open_page(browser, app_url)
    try:
        kinds = page.locator("#output-kind input[type=radio]")
        kinds.first.wait_for()  # the form's controls come after the prompt box: a count must not run ahead
        assert kinds.count() == 3
        page.locator("#output-kind").get_by_label("CUMULATIVE").check()
        kinds.nth(0).focus()
        page.keyboard.press("ArrowRight")
        assert page.locator("#output-kind").get_by_label("DELTA").is_checked()
        assert page.evaluate("() => document.activeElement.value") == "DELTA"
        page.keyboard.press("ArrowLeft")
        page.keyboard.press("ArrowLeft")  # round the end, as a radio group goes
        assert page.locator("#output-kind").get_by_label("FINAL_ONLY").is_checked()
        page.keyboard.press("Tab")  # out of the group in one press, whichever option is picked
        assert page.evaluate("() => !document.activeElement.closest('#output-kind')")
        page.keyboard.press("Shift+Tab")  # and back to the option picked
        assert page.evaluate("() => document.activeElement.value") == "FINAL_ONLY"
        page.locator("#output-kind").get_by_label("CUMULATIVE").check()

        slider = page.locator("#n input[type=range]")
        slider.focus()
        page.keyboard.press("ArrowRight")
        assert page.evaluate("(e) => getComputedStyle(e).outlineStyle", slider.element_handle()) == "solid"
        contrast = page.evaluate(CONTRAST_JS, "#output-kind .info-text, [data-testid='block-info']")
        assert contrast >= 4.5, f"a hint's contrast is {contrast:.2f}:1"

        # Run pressed by keyboard on a projector's screen: the page moves to the run, and so does
        # the focus (Tab goes on from the run's line, not from a button out of view)
        page.set_viewport_size({"width": 1024, "height": 768})
        fill_form(page, "Name a colour.", n=2, seed=1, max_tokens=4)
        page.locator("#run").focus()
        page.keyboard.press("Enter")
        wait_for_summary(page, "finished")
        assert page.evaluate("() => document.activeElement.id") == "run-summary"
        assert in_view(page, "#run-summary")
    finally:
        page.close()


# The lowest contrast of the elements' text against white (the light theme's blocks), WCAG's formula
CONTRAST_JS = """(selector) => {
  const lum = (rgb) => {
    const [r, g, b] = rgb.match(/[\\d.]+/g).slice(0, 3).map((v) => {
      const c = Number(v) / 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const found = [...document.querySelectorAll(selector)];
  if (!found.length) return 0;
  return Math.min(...found.map((e) => 1.05 / (lum(getComputedStyle(e).color) + 0.05)));
}"""


def test_a_sweep_is_the_tabs_action_run_waits_and_the_forms_stop_ends_it(browser, app_url, backend, host):  # noqa: F811
    """While a sweep goes, Run says so and starts nothing; the form's Stop (not only the Sweep tab's)
    ends it, nothing is left in the engine, and the next Run works."""
    page = open_page(browser, app_url)
    try:
        fill_form(page, "The sea is", n=2, seed=3, max_tokens=400, ignore_eos=True)
        page.get_by_role("tab", name="Sweep").click()
        page.locator("#sweep-values textarea, #sweep-values input").first.fill("0.5 1.0 1.5")
        page.locator("#sweep-run").click()
        page.locator("#sweep-status").get_by_text("● temperature=0.5 (value 1 of 3)").wait_for(timeout=120_000)
        page.locator("#run").click()
        wait_for_summary(page, "Run started nothing: the sweep was going on this page. Press Stop (beside Run) first",
                         30_000)
        assert host.run(backend.num_unfinished()) <= 2, "Run started beside the sweep"
        page.locator("#stop").click()
        page.locator("#sweep-status").get_by_text("■ stopped").wait_for(timeout=30_000)
        assert unfinished_after(backend, host, timeout=3) == 0
        set_slider(page, "max-tokens", 3)
        page.locator("#run").click()
        wait_for_summary(page, "finished")
    finally:
        page.close()


def test_a_number_typed_past_a_sliders_bounds_is_said_and_stop_with_nothing_running_is_harmless(
        browser, app_url):  # noqa: F811
    """Gradio's slider takes a typed 0 for n as 1 without a word: the page says so under the
    control, and the run it starts is the run the note names; the end-of-sequence token that
    ended its sample is shown apart from the text. Stop with no run changes nothing
    and fails nothing (it was a server error); Open with nothing picked is a warning, with no
    "Error" badge over the page (a refusal raised marks every output of its event)."""
    page = open_page(browser, app_url)
    failed = []
    page.on("response", lambda r: failed.append(r.url) if r.status >= 500 else None)
    try:
        page.locator("#stop").click()
        page.locator("#store-note").get_by_text("Nothing to stop: no run of this page").wait_for(timeout=30_000)
        page.locator("#prompt textarea").fill(HAIKU)
        box = page.locator("#n input[type=number]")
        box.fill("0")
        box.blur()
        note = page.locator("#n .bounds-note")
        assert note.inner_text() == "n (samples): 0 is outside 1 to 256, so 1 is used."
        page.locator("#seed textarea, #seed input").first.fill("4")  # ends at token 42
        open_sampler_settings(page)
        set_slider(page, "max-tokens", 60)  # a haiku ends before: by the end-of-sequence token
        page.locator("#run").click()
        wait_for_summary(page, "finished")
        assert " n=1 " in summary(page), summary(page)
        echo = page.locator("#bounds-echo")  # Run brought the samples into view: the note comes along above them
        assert echo.inner_text() == "⚠️ n (samples): 0 is outside 1 to 256, so 1 is used."
        assert page.evaluate("() => document.querySelector('#samples-area').getBoundingClientRect().top") \
            < page.viewport_size["height"]
        card = page.locator("#samples-area .sa-card[data-i='0']")
        assert "✔ EOS" in card.locator(".sa-head").inner_text()  # ended by its end-of-sequence token
        assert card.locator(".sa-past").inner_text() == "<|im_end|>"  # sampled, shown apart from the text
        assert "<|im_end|>" not in page.evaluate("() => document.querySelector(\"#samples-area .sa-card[data-i='0'] "
                                                 ".sa-text\").firstChild.data")
        set_slider(page, "n", 2)  # a value within bounds: the note goes
        assert note.count() == 0
        page.get_by_role("tab", name="History").click()
        page.locator("#saved-search textarea, #saved-search input").first.fill("no saved prompt says this")
        page.locator("#saved-note").get_by_text("(0 match)").wait_for(timeout=30_000)
        page.get_by_role("button", name="Open saved run").click()  # nothing picked: a warning, nothing marked
        page.get_by_text("Pick a saved run first.").first.wait_for(timeout=30_000)
        assert page.locator(".error:visible").filter(has_text=re.compile(r"^\s*Error\s*$")).count() == 0
        assert " n=1 " in summary(page)  # and the run on screen stays
        assert not failed, failed
    finally:
        page.close()


def test_the_wall_the_logprobs_tab_and_the_csv_show_one_entropy(browser, app_url, tmp_path):  # noqa: F811
    """The same top-k, three places: the wall's hover, the Logprobs tab's chart and the Python
    function, to the hundredth of a bit."""
    run = synthetic_run(4, 12, seed=9)
    page = open_saved_run(browser, app_url, run, tmp_path / "entropy.json")
    try:
        page.locator("#samples-area .sa-bar").get_by_text("Token wall", exact=True).click()
        cell = page.locator("#samples-area .sa-row[data-i='0'] .tk").nth(3)
        cell.hover()
        tip = page.locator("#samples-area .sa-tip .sa-entropy")
        tip.wait_for(state="visible")
        shown = float(tip.inner_text().split("≥")[1].split("bits")[0])
        expected = round(entropies(run.samples[0].logprobs, 12)[3], 2)
        assert shown == expected
        page.get_by_role("tab", name="Logprobs").click()
        page.wait_for_function("() => document.querySelector('#logprobs-uncertainty .js-plotly-plot')?.data")
        charted = page.evaluate("() => Array.from(document.querySelector('#logprobs-uncertainty .js-plotly-plot')"
                                "._fullData.filter(t => t.name === 'sample 0' && t.yaxis === 'y2')[0].y)[3]")
        assert round(charted, 2) == expected
        cell.click()  # a token of the wall is a point, as one of the Diff is: the Branch tab opens there
        page.wait_for_function("() => document.querySelector('#branch-position input')?.value === '3'",
                               timeout=30_000)
        page.get_by_role("tab", name="Branch", selected=True).wait_for(timeout=30_000)
    finally:
        page.close()


@pytest.mark.destructive
def test_an_engine_that_dies_mid_run_is_reported_and_the_next_run_works(browser, app_url, client, backend, host):  # noqa: F811
    """Kill the engine core while a page and a script both run: both say so, the app stays up,
    a Run while it restarts is refused with the reason, and once it is back Run works."""
    page = open_page(browser, app_url)
    try:
        start_long_run(page, n=2)
        job = client.submit(prompt="Once upon a time", n=2, seed=3, max_tokens=1000, ignore_eos=True,
                            output_kind="DELTA", api_name="/sample")
        assert wait_until(lambda: host.run(backend.num_unfinished()) == 4, timeout=120)
        core = host.engine.engine_core.resources.engine_manager.processes[0]
        os.kill(core.pid, signal.SIGKILL)
        with pytest.raises(Exception) as died:
            job.result(timeout=60)
        assert "engine core has died" in str(died.value) and "unexpected error" not in str(died.value)
        page.locator("#run-summary").get_by_text("engine core has died").wait_for(timeout=60_000)
        assert "error" in summary(page)
        page.locator("#ignore-eos input").uncheck()  # the sampler settings are still open
        page.locator("#prompt textarea").fill(HAIKU)
        set_slider(page, "max-tokens", 8)
        if backend.info()["restarting"]:  # refused while it restarts: the reason, and nothing stored
            page.locator("#run").click()
            page.locator("#run-summary").get_by_text("refused").wait_for(timeout=30_000)
        assert wait_until(lambda: backend.info()["up"], timeout=600, every=0.5), "the engine did not come back"
        assert backend.restarts == 1
        page.locator("#run").click()
        wait_for_summary(page, "finished")
        assert client.predict(prompt=HAIKU, n=2, seed=2, max_tokens=4, api_name="/sample")
    finally:
        page.close()
        wait_until(lambda: backend.info()["up"], timeout=600, every=0.5)  # never tear down a restarting engine


def test_a_sample_picked_from_a_bigger_run_than_the_diff_drew_breaks_nothing(browser, app_url):  # noqa: F811
    """The Diff draws only when it is on screen, so its reference's choices can be an older,
    smaller run's: a sample of the run on screen picked then becomes the reference all the same
    (and the sample the Reproducibility tab runs again alone);
    the Graph's fold box takes a negative number; and the next Run (which reads the panels'
    controls, both of these among them) works, with no "Error" anywhere."""
    page = open_page(browser, app_url)
    try:
        fill_form(page, "The sea is", n=2, seed=1, max_tokens=3)
        page.locator("#run").click()
        wait_for_summary(page, "finished")  # the Diff is on screen: its choices are samples 0 and 1
        page.get_by_role("tab", name="Timing").click()
        first = re.search(r"run-[0-9a-f]{8}", summary(page)).group(0)
        set_slider(page, "n", 4)
        page.locator("#run").click()
        page.wait_for_function("(old) => { const s = document.querySelector('#run-summary').innerText.split('\\n')[0]; "
                               "return s.includes('finished') && !s.includes(old); }", arg=first, timeout=120_000)
        page.locator("#samples-area .sa-card[data-i='3']").click()
        page.wait_for_function("() => document.querySelector('#reference input').value === '3'", timeout=30_000)
        page.get_by_role("tab", name="Reproducibility").click()  # the pick is the sample it runs again alone, too
        page.wait_for_function("() => document.querySelector('#rerun-index input')?.value === '3'", timeout=30_000)
        page.get_by_role("tab", name="Graph").click()  # a panel's box holding a number below what it means
        fold = page.locator("#graph-fold input")
        fold.fill("-3")
        fold.press("Enter")
        page.locator("#graph-chart .js-plotly-plot").wait_for(timeout=30_000)
        second = re.search(r"run-[0-9a-f]{8}", summary(page)).group(0)
        page.locator("#run").click()
        page.wait_for_function("(old) => { const s = document.querySelector('#run-summary').innerText.split('\\n')[0]; "
                               "return s.includes('finished') && !s.includes(old); }", arg=second, timeout=120_000)
        page.get_by_role("tab", name="Diff").click()
        page.locator("#diff-view").get_by_text("sample 3 (seed 4)").first.wait_for(timeout=30_000)
        assert page.locator(".error:visible").filter(has_text=re.compile(r"^\s*Error\s*$")).count() == 0
        assert page.locator(".toast-body.error").count() == 0, page.locator(".toast-body").all_inner_texts()
    finally:
        page.close()
