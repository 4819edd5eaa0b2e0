"""The Sweep, Set and Branch tabs and opening saved runs, in a real headless Chromium on the real
engine.

One small sweep (2 values, n=2, a few tokens) and one small run with its branch are the engine
time: the sweep's JSONL download is then opened in a fresh page, alone and one line of it, so the
page shows saved runs without running anything, and a malformed file is refused with a sentence
while the page stays as it was. The Set tab's tests open saved runs whose answers are known.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from playground.run import Run, Sample
from tests.test_browser import (  # noqa: F401  (browser: the fixture)
    ARTIFACTS,
    browser,
    columns,
    fill_form,
    open_page,
    open_sampler_settings,
)


def open_file(page, path: Path) -> None:
    page.get_by_role("tab", name="History").click()
    page.locator("#upload-runs input[type=file]").set_input_files(str(path))


def open_saved_run(browser, app_url, run: Run, path: Path):  # noqa: F811
    """A new page showing ``run``, saved to ``path`` as the page exports one (the caller closes it)."""
    path.write_text(run.to_json(indent=1), encoding="utf-8")
    page = open_page(browser, app_url)
    open_file(page, path)
    page.locator("#upload-note").get_by_text(f"Opened {path.name}").wait_for(timeout=30_000)
    return page


@pytest.mark.slow
def test_a_sweep_fills_its_grid_and_chart_and_its_file_opens_without_the_engine(
        browser, app_url, backend, host, tmp_path):  # noqa: F811
    page = open_page(browser, app_url)
    try:
        fill_form(page, "The sea is", n=2, seed=3, max_tokens=6)
        page.get_by_role("tab", name="Sweep").click()
        page.locator("#sweep-values textarea, #sweep-values input").first.fill("0.5 1.5")
        page.locator("#sweep-run").click()
        page.locator("#sweep-status").get_by_text("✔ finished · 2 of 2 temperature values").wait_for(timeout=120_000)
        grid = page.locator("#sweep-grid").inner_text()
        assert "temperature=0.5" in grid and "temperature=1.5" in grid and "seed 4" in grid, grid
        page.locator("#sweep-chart .js-plotly-plot").wait_for(timeout=30_000)
        charted = page.evaluate("() => document.querySelector('#sweep-chart .js-plotly-plot').data"
                                ".map(t => [t.name, t.x.length])")
        names = [name for name, _ in charted]
        assert {"distinct_2", "effective_samples", "similarity"} <= set(names), names  # the set measures
        assert all(points == 2 for _, points in charted), charted  # one point per value
        # Answers read by first line: the chart gains the majority's vote share, without running again.
        page.locator("#sweep-answer input").click()
        page.get_by_role("option", name="first line", exact=True).click()
        page.wait_for_function("() => { const gd = document.querySelector('#sweep-chart .js-plotly-plot'); "
                               "return gd && gd.data.some(t => t.name === 'vote_share'); }", timeout=30_000)
        shares = page.evaluate("() => Array.from(document.querySelector('#sweep-chart .js-plotly-plot')"
                               "._fullData.find(t => t.name === 'vote_share').y)")  # decoded (data: base64)
        assert len(shares) == 2 and all(0.5 <= share <= 1.0 for share in shares), shares  # n=2: 1 or 2 agree
        page.screenshot(path=ARTIFACTS / "sweep.png", full_page=True)
        # Each value's run joins History, to be opened whole in every tab, and the run store (after a reload).
        page.get_by_role("tab", name="History").click()
        for pick in ("#history-pick", "#saved-pick"):
            page.locator(f"{pick} input").click()
            listed = page.locator(pick).get_by_role("option")
            listed.filter(has_text="⇶ sweep temperature=1.5").wait_for(timeout=30_000)
            options = listed.all_inner_texts()
            page.keyboard.press("Escape")
            assert [value for o in options for value in re.findall(r"⇶ sweep temperature=(\S+)", o)] == [
                "0.5", "1.5"] if pick == "#history-pick" else ["1.5", "0.5"], options  # saved: newest first
        page.get_by_role("tab", name="Sweep").click()
        with page.expect_download() as download:
            page.locator("#sweep-bundles").click()
        lines = Path(download.value.path()).read_text(encoding="utf-8").splitlines()
    finally:
        page.close()
    runs = [Run.from_json(line) for line in lines]
    assert [r.request["temperature"] for r in runs] == [0.5, 1.5]
    sweep_file, one_file, bad_file = tmp_path / "sweep.jsonl", tmp_path / "one.json", tmp_path / "bad.jsonl"
    sweep_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    one_file.write_text(json.dumps(json.loads(lines[1]), indent=1), encoding="utf-8")  # as the page exports one
    bad_file.write_text(lines[0] + "\n" + json.dumps({"prompt": "hi"}) + "\n", encoding="utf-8")

    page = open_page(browser, app_url)
    try:
        # A file with one line that is not a bundle: a sentence naming it, and nothing on the page changes.
        open_file(page, bad_file)
        page.locator(".toast-body").get_by_text("bad.jsonl, line 2: this is not a run bundle").wait_for(timeout=30_000)
        page.locator("#upload-runs input[type=file]").wait_for(state="attached", timeout=10_000)  # emptied
        assert columns(page, 2) == ["", ""]
        assert page.locator("#run-summary [data-testid=markdown]").inner_text().strip() == ""
        assert page.locator("#n input[type=number]").input_value() == "4"

        # One saved run: the columns and every panel show it, and the engine ran nothing.
        open_file(page, one_file)
        page.locator("#upload-note").get_by_text("Opened one.json").wait_for(timeout=30_000)
        assert columns(page, 2) == [s.text for s in runs[1].samples]
        assert runs[1].request["request_id"] in page.locator("#run-summary").inner_text()
        open_file(page, bad_file)  # refused with a run on screen: the run stays, and nothing is marked "Error"
        page.locator("#upload-note").get_by_text("Not opened: bad.jsonl, line 2").wait_for(timeout=30_000)
        assert runs[1].request["request_id"] in page.locator("#run-summary").inner_text()
        assert page.locator(".error:visible").filter(has_text=re.compile(r"^\s*Error\s*$")).count() == 0
        page.get_by_role("tab", name="Set").click()
        page.locator("#set-headline").get_by_text(re.compile("Majority answer|No majority")).wait_for(timeout=10_000)
        page.get_by_role("tab", name="Timing").click()
        page.wait_for_function("() => (document.querySelector('#child-timeline .gtitle')?.textContent || '')"
                               ".includes('Per-child timeline')", timeout=30_000)
        page.get_by_role("tab", name="Diff").click()
        page.locator("#diff-view .diff-row").first.wait_for(timeout=10_000)
        assert host.run(backend.num_unfinished()) == 0

        # The whole sweep: the Sweep tab draws it, and the Compare tab can pick its runs.
        open_file(page, sweep_file)
        page.locator("#sweep-status").get_by_text("✔ finished · 2 of 2 temperature values").wait_for(timeout=30_000)
        assert "temperature=1.5" in page.locator("#sweep-grid").inner_text()
        if not page.locator("#temperature").is_visible():
            open_sampler_settings(page)  # the run on screen (the last value's) is in the form
        page.wait_for_function("() => document.querySelector('#temperature input[type=number]')?.value === '1.5'",
                               timeout=10_000)
        page.get_by_role("tab", name="Compare").click()
        page.locator("#compare-run").click()
        page.locator("#compare-headline").get_by_text("samples identical").wait_for(timeout=30_000)
        assert "temperature 0.5 → 1.5" in page.locator("#compare-headline").inner_text()
    finally:
        page.close()


@pytest.mark.slow
def test_a_pattern_that_backtracks_ends_within_seconds_in_the_set_tab(browser, app_url, tmp_path):  # noqa: F811
    """A saved run whose samples are long runs of 'a': the pattern that never returned with Python's
    re answers at once (no sample has an answer), one too slow even for the regex package ends
    within 5 s with a sentence naming it, and the page goes on working."""
    from tests.test_robustness import CATASTROPHIC, TOO_SLOW

    run = Run(request={"request_id": "run-patterns", "prompt": "p", "mode": "wrapper", "output_kind": "FINAL_ONLY",
                       "seed": 0}, samples=[Sample(i, i, text="a" * 400 + "!") for i in range(3)], status="finished")
    page = open_saved_run(browser, app_url, run, tmp_path / "patterns.json")
    try:
        page.get_by_role("tab", name="Set").click()
        page.locator("#set-extractor").get_by_label("regular expression").check()
        for pattern, says in ((CATASTROPHIC, "No sample has an answer"), (TOO_SLOW, "took more than 2 s")):
            box = page.locator("#set-pattern textarea, #set-pattern input").first
            box.fill(pattern)
            started = time.monotonic()
            box.press("Enter")
            page.locator("#set-headline").get_by_text(says).wait_for(timeout=10_000)
            assert time.monotonic() - started < 5, pattern
        assert "sample 0" in page.locator("#set-headline").inner_text()
        page.get_by_role("tab", name="Diff").click()  # the page still answers
        page.locator("#diff-view .diff-row").first.wait_for(timeout=10_000)
    finally:
        page.close()


def test_a_reference_answer_draws_the_curves_and_says_where_the_majority_settled(browser, app_url,  # noqa: F811
                                                                                  tmp_path):
    """A saved run of 16 samples, 13 saying 391 and 3 saying 390: with the last number as the answer
    and 391 as the reference, the Set tab says where the majority settled (before the last sample)
    and pass@1, and the convergence chart draws agreement@k, pass@k and maj@k."""
    from playground.analysis import settled_at, settled_sentence

    answers = ["391"] * 5 + ["390"] + ["391"] * 6 + ["390"] * 2 + ["391"] * 2
    run = Run(request={"request_id": "run-sums", "prompt": "17 * 23 =", "mode": "wrapper",
                       "output_kind": "FINAL_ONLY", "seed": 0},
              samples=[Sample(i, i, text=f"17 * 23 is {a}") for i, a in enumerate(answers)], status="finished")
    page = open_saved_run(browser, app_url, run, tmp_path / "sums.json")
    try:
        page.get_by_role("tab", name="Set").click()
        page.locator("#set-extractor").get_by_label("last number").check()
        box = page.locator("#set-reference textarea, #set-reference input").first
        box.fill("391")
        box.press("Enter")
        page.locator("#set-headline").get_by_text("Against the reference").wait_for(timeout=30_000)
        headline = page.locator("#set-headline").inner_text()
        settled = settled_at(answers)
        assert settled.at < 16 and settled_sentence(settled, 16).lower() in headline.lower(), headline
        assert "pass@1 0.812" in headline and "pass@16 1.000" in headline
        page.wait_for_function("() => document.querySelectorAll('#set-convergence .legendtext').length >= 3",
                               timeout=30_000)
        legend = page.evaluate("[...document.querySelectorAll('#set-convergence .legendtext')].map(t => t.textContent)")
        assert {"agreement@k", "pass@k", "maj@k"} <= set(legend), legend
    finally:
        page.close()


@pytest.mark.slow
def test_a_token_clicked_in_the_diff_branches_the_run_with_the_token_chosen_there(browser, app_url):  # noqa: F811
    """A run of 3 samples; the Branch tab opened as it is offers the tokens at sample 0's first
    token; a click on sample 1's fourth token in the Diff view opens the Branch tab
    at that point with the tokens the model saw there; forcing one of them streams a new run whose
    summary names the point, the token and the parent run, and the samples area shows it; the
    Branch tab keeps its point in the parent, and the Compare tab opens with the parent as A and
    the branch as B."""
    page = open_page(browser, app_url)
    try:
        fill_form(page, "Once upon a time, in a village at the edge of the sea,", n=3, seed=7, max_tokens=10,
                  ignore_eos=True)
        page.locator("#run").click()
        page.locator("#run-summary").get_by_text("finished").wait_for(timeout=120_000)
        parent = page.locator("#run-summary code").first.inner_text()
        parent_texts = columns(page, 3)
        page.get_by_role("tab", name="Branch").click()  # opened as it is: the tokens at sample 0's first token
        page.locator("#branch-context").get_by_text("Sample #0").wait_for(timeout=30_000)
        assert page.locator("#branch-choice label").count() >= 3
        page.get_by_role("tab", name="Diff").click()
        page.locator("#diff-view .tok[data-s='1'][data-p='3']").first.click()
        page.locator("#branch-context").get_by_text("at token 3").wait_for(timeout=30_000)
        assert "Sample #1" in page.locator("#branch-context").inner_text()
        options = page.locator("#branch-choice label")
        assert options.count() >= 3  # the model's own choice and the top-k it saw there
        options.nth(2).click()
        page.locator("#branch-run").click()
        page.locator("#run-summary").get_by_text("branched from #1 at token 3").wait_for(timeout=120_000)
        page.locator("#run-summary").get_by_text("finished").wait_for(timeout=120_000)
        summary = page.locator("#run-summary").inner_text()
        assert f"of {parent}" in summary and "forced" in summary, summary
        branch = page.locator("#run-summary code").first.inner_text()
        assert parent != branch
        assert len(columns(page, 3)) == 3 and all(columns(page, 3))
        # Each sample continues the start the branch was sent after: shown above its new text.
        leads = page.locator("#samples-area .sa-card .sa-lead").all_inner_texts()
        assert len(leads) == 3 and len(set(leads)) == 1 and leads[0].endswith(" ▸"), leads
        assert parent_texts[1].startswith(leads[0][:3]), (parent_texts[1], leads[0])
        page.get_by_role("tab", name="Diff").click()
        page.get_by_role("tab", name="Branch").click()  # the point stays in the parent: a second branch starts there
        page.locator("#branch-context").get_by_text(f"at token 3 of {parent}").wait_for(timeout=30_000)
        page.get_by_role("tab", name="Compare").click()  # opens with the parent as A and the branch as B
        page.wait_for_function("([a, b]) => document.querySelector('#compare-a input')?.value.includes(a) && "
                               "document.querySelector('#compare-b input')?.value.includes(b)", arg=[parent, branch],
                               timeout=30_000)
    finally:
        page.close()


def test_the_charts_a_run_replaces_let_go_of_their_memory(browser, app_url):  # noqa: F811
    """Gradio's plot draws a new chart for each value and leaves the old one's resize listener on
    the window, which keeps the old chart alive (1.7 MB a run with the Timing tab open, until a
    reload); the page purges a chart taken off it. Runs with the Timing tab open leave no more
    resize listeners than there are charts on the page."""
    from tests.helpers import wait_until

    page = open_page(browser, app_url)
    try:
        cdp = page.context.new_cdp_session(page)

        def unheld() -> int:  # the window's resize listeners that no chart on the page owns
            window = cdp.send("Runtime.evaluate", {"expression": "window"})["result"]["objectId"]
            listeners = cdp.send("DOMDebugger.getEventListeners", {"objectId": window})["listeners"]
            charts = page.evaluate("() => document.querySelectorAll('.js-plotly-plot').length")
            return sum(listener["type"] == "resize" for listener in listeners) - charts

        def settled() -> int:  # once every chart is drawn: the same reading twice, a second apart
            readings = [unheld()]
            assert wait_until(lambda: readings.append(unheld()) or readings[-1] == readings[-2], timeout=15,
                              every=1.0)
            return readings[-1]

        page.get_by_role("tab", name="Timing").click()
        fill_form(page, "Name a colour.", n=2, seed=1, max_tokens=4)
        shown: list[str] = []
        for _ in range(3):
            page.locator("#run").click()
            page.wait_for_function(
                "(seen) => { const line = document.querySelector('#run-summary').innerText.split('\\n')[0]; "
                "const id = (line.match(/run-[0-9a-f]{8}/) || [''])[0]; "
                "return line.includes('✔ finished') && id && !seen.includes(id); }", arg=shown, timeout=120_000)
            shown.append(re.search(r"run-[0-9a-f]{8}", page.locator("#run-summary").inner_text()).group(0))
            page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 4")
            if len(shown) == 1:
                before = settled()
        assert wait_until(lambda: unheld() <= before, timeout=10), (
            f"{unheld() - before} more resize listeners than charts after two more runs: old charts kept")
    finally:
        page.close()
