"""Runs that last and travel, in a real headless Chromium on the real engine: History across
reloads (and only this browser's), links to the form's settings and to a run (behind a proxy path,
after a restart), and a store that is full."""

from __future__ import annotations

import contextlib
import re
import threading
from pathlib import Path

import pytest

from playground.run import Run
from playground.store import RunStore, StoreLimits
from tests.helpers import free_port, wait_until
from tests.test_browser import (  # noqa: F401  (browser: a fixture)
    browser,
    columns,
    fill_form,
    open_page,
    set_slider,
    start_long_run,
)
from tests.test_browser_states import in_view

RUN_ID = re.compile(r"run-[0-9a-f]{8}")


@contextlib.contextmanager
def served(backend, path: Path, port: int, limits: StoreLimits | None = None, under: str = "/playground"):
    """The app with a store on ``path``, served by uvicorn under a path of its own, as behind a
    proxy (Gradio's root_path is that path): its address and its store."""
    import fastapi
    import gradio as gr
    import uvicorn

    from playground.ui import build_app

    store = RunStore(path, limits or StoreLimits())
    demo = build_app(backend, store=store)
    demo.queue(default_concurrency_limit=8, max_size=64)
    app = gr.mount_gradio_app(fastapi.FastAPI(), demo, path=under)
    # a page left open keeps its event stream: shutting down waits for it no more than 2 s
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: server.started, 120), "the app did not start"
        yield f"http://127.0.0.1:{port}{under}/", store
    finally:
        server.should_exit = True
        thread.join(60)
        store.close()


def summary_id(page) -> str:
    return RUN_ID.search(page.locator("#run-summary").inner_text()).group()


def run_and_wait(page, before: str | None = None) -> str:
    """Press Run and wait for a new run to finish; its request id."""
    page.locator("#run").click()
    page.wait_for_function("(old) => { const s = document.querySelector('#run-summary').innerText.split('\\n')[0]; "
                           "return s.includes('finished') && (!old || !s.includes(old)); }", arg=before,
                           timeout=120_000)
    return summary_id(page)


def link_of(page, button: str) -> str:
    """Press a Copy link button; the link the box then shows (the clipboard may be closed to us)."""
    box = page.locator("#link textarea, #link input").first
    before = box.input_value()
    page.locator(button).click()
    page.wait_for_function("(old) => { const b = document.querySelector('#link textarea, #link input'); "
                           "return b && b.value.startsWith('http') && b.value !== old; }", arg=before, timeout=30_000)
    return box.input_value()


def exported(page) -> Run:
    """The run on screen as the Export tab downloads it."""
    page.get_by_role("tab", name="Export").click()
    with page.expect_download() as download:
        page.locator("#download-json").click()
    return Run.from_json(Path(download.value.path()).read_text(encoding="utf-8"))


def saved_options(page) -> list[str]:
    page.get_by_role("tab", name="History").click()
    page.locator("#saved-pick input").click()
    options = page.get_by_role("option").all_inner_texts()
    page.keyboard.press("Escape")
    return options


def form_settings(page) -> tuple[str, str, str]:
    return (page.locator("#prompt textarea").input_value(), page.locator("#seed textarea, #seed input").first
            .input_value(), page.locator("#n input[type=number]").input_value())


def test_history_keeps_this_browsers_runs_across_reloads_and_only_its_own(browser, app_url, store):  # noqa: F811
    """A stopped run is saved when it ends; a reload lists it, another browser does not; search,
    open and delete."""
    mine = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = mine.new_page()
    page.goto(app_url)
    fill_form(page, "The lighthouse keeper's log, kept for History", n=2, seed=31, max_tokens=1500, ignore_eos=True)
    page.locator("#run").click()
    page.wait_for_function("() => (document.querySelector(\"#samples-area .sa-card[data-i='0'] .sa-text\")"
                           "?.textContent ?? '').length > 10", timeout=120_000)
    page.locator("#stop").click()
    page.locator("#run-summary").get_by_text("stopped").wait_for(timeout=60_000)
    rid = summary_id(page)
    page.get_by_role("tab", name="History").click()  # listed as soon as it is saved, before any reload
    page.locator("#saved-note").get_by_text("1 run of this browser is kept").wait_for(timeout=30_000)
    assert any(rid in option and "· stopped ·" in option for option in saved_options(page)), saved_options(page)
    runs_before = store.totals()[0]
    page.reload()
    page.locator("#prompt textarea").wait_for()
    page.locator("#store-note").get_by_text(f"Your last run, {rid} (stopped").wait_for(timeout=30_000)  # by the form
    page.get_by_role("tab", name="History").click()
    page.locator("#saved-note").get_by_text("1 run of this browser is kept").wait_for(timeout=30_000)
    listed = saved_options(page)
    assert len(listed) == 1 and rid in listed[0] and "· stopped ·" in listed[0], listed
    assert rid in page.locator("#saved-pick input").input_value()  # the newest is picked: the list is not blank

    other = open_page(browser, app_url)  # another browser: its own list, empty
    try:
        other.get_by_role("tab", name="History").click()
        other.locator("#saved-note").get_by_text("0 runs of this browser are kept").wait_for(timeout=30_000)
        assert saved_options(other) == []
    finally:
        other.close()

    search = page.locator("#saved-search textarea, #saved-search input").first
    search.fill("no such words")
    page.locator("#saved-note").get_by_text("(0 match)").wait_for(timeout=30_000)
    assert saved_options(page) == []
    search.fill("LIGHTHOUSE keeper")
    page.locator("#saved-note").get_by_text("(1 match)").wait_for(timeout=30_000)
    page.locator("#saved-pick input").click()
    page.get_by_role("option", name=re.compile(rid)).click()
    page.get_by_role("tab", name="Diff").click()
    page.get_by_role("tab", name="History").click()
    page.locator("#saved-open").click()  # opened again: the samples area shows it, the form its settings
    page.locator("#run-summary").get_by_text(rid).wait_for(timeout=30_000)
    assert page.locator("#prompt textarea").input_value() == "The lighthouse keeper's log, kept for History"
    assert page.locator("#seed textarea, #seed input").first.input_value() == "31"
    page.locator("#store-note").get_by_text(f"Opened saved run {rid}: its settings are in the form").wait_for()
    page.locator("#saved-pick input").click()
    page.get_by_role("option", name=re.compile(rid)).click()
    page.locator("#saved-delete").click()
    page.locator("#saved-note").get_by_text("0 runs of this browser are kept").wait_for(timeout=30_000)
    assert store.totals()[0] == runs_before - 1
    page.locator("#saved-undo").click()  # a Delete pressed by mistake: the run comes back, its link too
    page.locator("#saved-note").get_by_text(f"{rid} is back. 1 run of this browser is kept").wait_for(timeout=30_000)
    assert store.totals()[0] == runs_before and not page.locator("#saved-undo").is_visible()
    page.locator("#saved-pick input").click()
    page.get_by_role("option", name=re.compile(rid)).click()
    page.locator("#saved-delete").click()
    page.locator("#saved-note").get_by_text("0 runs of this browser are kept").wait_for(timeout=30_000)
    mine.close()


def test_a_form_link_fills_the_form_and_its_seeded_run_gives_the_same_tokens(browser, app_url):  # noqa: F811
    prompt = "Q: Name three birds that cannot fly.\nA:"
    first = open_page(browser, app_url)
    fill_form(first, prompt, n=2, seed=4242, max_tokens=6)
    run_and_wait(first)
    ran = exported(first)
    assert ran.request["max_tokens"] == 6, ran.request  # the run had the form's settings
    link = link_of(first, "#copy-form-link")
    first.locator("#seed textarea, #seed input").first.fill("4243")  # the form changed: that link is not its own
    first.wait_for_function("() => document.querySelector('#link textarea, #link input').value === ''",
                            timeout=30_000)
    first.close()
    assert link.startswith(app_url + "?") and "seed=4242" in link and "max_tokens=6" in link, link

    again = open_page(browser, link)  # another browser opens the link: the form is filled, nothing runs
    try:
        again.locator("#store-note").get_by_text("The link set 4 settings of the form").wait_for(timeout=30_000)
        assert form_settings(again) == (prompt, "4242", "2")
        assert again.locator("#run-summary").inner_text().strip() == ""
        run_and_wait(again)
        rerun = exported(again)
        before = link_of(again, "#copy-run-link")
        start_long_run(again, n=2)  # while the next run streams, the run on screen is that one: no link yet
        again.wait_for_function("() => !document.querySelector('#stop-near').disabled", timeout=60_000)
        again.locator("#copy-run-link").click()
        again.locator(".toast-body").filter(has_text="still streaming").wait_for(timeout=30_000)
        assert again.locator("#link textarea, #link input").first.input_value() == "", "the run before's link"
        again.keyboard.press("Escape")
        again.locator("#run-summary").get_by_text("stopped").wait_for(timeout=30_000)
        assert link_of(again, "#copy-run-link") not in ("", before)  # kept as it ended: its own link
    finally:
        again.close()
    assert rerun.request["request_id"] != ran.request["request_id"]
    assert [s.token_ids for s in rerun.samples] == [s.token_ids for s in ran.samples], "same seed, same tokens"

    wrong = open_page(browser, app_url + "?n=0&temperature=hot&colour=red&seed=7&top_p=0.001")
    try:
        note = wrong.locator("#store-note")
        note.get_by_text("Left at their defaults").wait_for(timeout=30_000)
        said = note.inner_text()
        assert "colour is not a setting of the form" in said and "n must be between 1 and" in said, said
        assert "temperature must be a number, got 'hot'" in said
        assert "top_p: 0.001 is outside the form's 0.01 to 1" in said, said  # the server's bound, not the slider's
        assert form_settings(wrong)[1:] == ("7", "4")
        wrong.locator("#run").click()  # the form as the link left it still runs (here: refused, and says why)
        wrong.locator("#run-summary").get_by_text("the prompt is empty").wait_for(timeout=30_000)
        assert link_of(wrong, "#copy-form-link").endswith("?seed=7")
        wrong.locator("#copy-run-link").click()  # no run on screen: refused, and the old link is not left to copy
        wrong.wait_for_function("() => document.querySelector('#link textarea, #link input').value === ''",
                                timeout=30_000)
        toast = wrong.locator(".toast-body").filter(has_text="There is no run on screen yet")
        toast.wait_for(timeout=30_000)
        assert "Warning" in toast.inner_text() and "Error" not in toast.inner_text()  # a refusal, not a failure
    finally:
        wrong.close()


def test_a_run_link_behind_a_proxy_path_opens_the_run_after_a_restart(browser, backend, tmp_path):  # noqa: F811
    """The link is made from the page's own address (under /playground/), names the run by an
    unguessable key, and opens it for another browser after the app restarts on the same store,
    read-only, in every tab, with its settings in the form: Run asks for the same tokens."""
    path, port = tmp_path / "runs.sqlite3", free_port()
    mine = browser.new_context(viewport={"width": 1400, "height": 1000})
    with served(backend, path, port) as (url, _):
        page = mine.new_page()
        page.goto(url)
        page.locator("#prompt textarea").wait_for()
        fill_form(page, "Write one line about the sea.", n=2, seed=99, max_tokens=6)
        rid = run_and_wait(page)
        texts = columns(page, 2)
        link = link_of(page, "#copy-run-link")
        page.locator("#seed textarea, #seed input").first.fill("99")  # a run link stays: its run has not changed
        page.locator("#prompt textarea").fill("another prompt")
        assert page.locator("#link textarea, #link input").first.input_value() == link
        page.close()
    key = link.removeprefix(url + "?run=")
    assert link.startswith(url + "?run=") and re.fullmatch(r"[A-Za-z0-9_-]{22,}", key), link

    with served(backend, path, port) as (url, store):  # the app again, on the same file
        other = browser.new_page(viewport={"width": 1280, "height": 720})  # the run is below the form here
        other.goto(link)
        try:
            other.locator("#run-summary").get_by_text(rid).wait_for(timeout=60_000)
            other.locator("#store-note").get_by_text(f"Opened run {rid} from its link (read-only)").wait_for(
                state="attached")
            assert wait_until(lambda: in_view(other, "#samples-area"), timeout=10), "the linked run is out of view"
            assert columns(other, 2) == texts
            assert form_settings(other) == ("Write one line about the sea.", "99", "2")
            other.get_by_role("tab", name="Inspector").click()  # every tab draws it
            other.locator("#events-table").get_by_text(rid).first.wait_for(state="attached", timeout=30_000)
            rerun_id = run_and_wait(other, rid)
            rerun = exported(other)
        finally:
            other.close()
        original = Run.from_json(store.load(key))
        wrong = open_page(browser, url + "?run=no-such-key")  # a mistyped or expired link says so
        try:
            wrong.locator("#store-note").get_by_text("The run this link names is not in the run store").wait_for()
            assert wrong.locator("#run-summary").inner_text().strip() == ""
        finally:
            wrong.close()
        assert rerun_id != rid and [s.token_ids for s in rerun.samples] == [s.token_ids for s in original.samples]
        page = mine.new_page()  # the browser that made the run still lists it
        page.goto(url)
        page.locator("#prompt textarea").wait_for()
        page.get_by_role("tab", name="History").click()
        page.locator("#saved-note").get_by_text("1 run of this browser is kept").wait_for(timeout=30_000)
        assert any(rid in option for option in saved_options(page))
        mine.close()


@pytest.mark.parametrize("limits", [StoreLimits(max_runs=1)])
def test_a_full_store_says_so_the_run_stays_and_removing_old_runs_is_said(browser, backend, tmp_path,  # noqa: F811
                                                                          limits):
    with served(backend, tmp_path / "runs.sqlite3", free_port(), limits) as (url, store):
        page = open_page(browser, url)
        fill_form(page, "Count to three:", n=1, seed=1, max_tokens=3)
        first = run_and_wait(page)
        assert wait_until(lambda: store.totals()[0] == 1, 30)
        with store._lock:  # SQLite itself answers SQLITE_FULL past this many pages
            pages = store._db.execute("PRAGMA page_count").fetchone()[0]
            store._db.execute(f"PRAGMA max_page_count = {pages}")
        page.locator("#seed textarea, #seed input").first.fill("2")
        set_slider(page, "n", 2)  # a run that needs pages the file may not grow
        set_slider(page, "max-tokens", 48)
        page.locator("#ignore-eos input").check()
        second = run_and_wait(page, first)
        note = page.locator("#store-note")
        note.get_by_text("The run store is full").wait_for(timeout=30_000)
        assert "this run was not saved" in note.inner_text() and "The run stays on screen" in note.inner_text()
        assert summary_id(page) == second and columns(page, 1)[0]
        with store._lock:
            store._db.execute("PRAGMA max_page_count = 1073741823")
        page.locator("#seed textarea, #seed input").first.fill("3")
        set_slider(page, "max-tokens", 3)  # any run: saving it removes the oldest
        run_and_wait(page, second)
        note.get_by_text("the 1 oldest run was removed to keep this one").wait_for(timeout=30_000)
        assert store.totals()[0] == 1
        page.close()


# A full-page SVG whose link runs script at the first click anywhere: what Gradio's sanitizer lets through.
HOSTILE = ('<svg style="position:fixed;inset:0;width:100%;height:100%;z-index:9999"><a href="javascript:'
           'alert(1)"><rect width="100%" height="100%" fill-opacity=".01"/></a></svg>')
MARKUP = ("() => [...document.querySelectorAll('.prose svg, .prose form, .prose img, [href^=\"javascript\"], "
          "[*|href^=\"javascript\"]')].length")


def test_words_from_a_link_a_stop_string_or_a_file_are_shown_as_text_and_run_nothing(browser, app_url,  # noqa: F811
                                                                                      tmp_path):
    """A link's parameter names and values, a run's stop string and error, and an opened file's
    name and fields are anybody's words: the page shows them as text, and a click runs nothing."""
    from urllib.parse import urlencode

    dialogs: list[str] = []
    query = urlencode([("prompt", "Say hi."), ("n", "1"), ("seed", "1"), ("max_tokens", "2"), ("stop", HOSTILE),
                       ("x` " + HOSTILE, "1"), ("n", "<img src=x>"), ("temperature", "[t](javascript:alert(2))")])
    page = open_page(browser, f"{app_url}?{query}")
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        note = page.locator("#store-note")
        note.get_by_text("is not a setting of the form").wait_for(timeout=30_000)
        assert "<svg" in note.inner_text() and "x`" in note.inner_text(), note.inner_text()  # said, as written
        run_and_wait(page)
        assert "<svg" in page.locator("#run-summary").inner_text()  # the stop string, as text
        bad = {"bundle_version": 1, "request": {"prompt": "p", "n": 1, "request_id": "run-hostile1"},
               "status": "error", "error": f"[phish](javascript:alert(3)) {HOSTILE}",
               "samples": [{"index": 0, "seed": 1, "text": "a", "token_ids": [1], "token_texts": ["a"],
                            "finish_reason": "abort"}]}
        path = tmp_path / "a`<img src=x>.json"
        path.write_text(__import__("json").dumps(bad), encoding="utf-8")
        page.get_by_role("tab", name="History").click()
        page.locator("#upload-runs input[type=file]").set_input_files(str(path))
        page.locator("#run-summary").get_by_text("run-hostile1").wait_for(timeout=30_000)
        assert "[phish](javascript:alert(3))" in page.locator("#run-summary").inner_text()
        assert page.evaluate(MARKUP) == 0, "markup from a link, a run or a file reached the page"
        # Behind the escaping, the page's guard: such markup put into a Markdown line anyway loses its teeth.
        page.evaluate("(html) => { const line = document.createElement('div'); line.id = 'planted'; "
                      "line.innerHTML = html + '<form action=\"https://x\"><input></form><input>"
                      "<div style=\"position:f\\\\69xed;inset:0\">over</div><a href=\"javascript:1\">a</a>'; "
                      "document.querySelector('#run-summary .md').appendChild(line); }", HOSTILE)
        page.wait_for_function("() => { const p = document.querySelector('#planted'); return p === null || "
                               "(p.querySelectorAll('svg, form, input, div').length === 0 && "
                               "!p.querySelector('[href]')); }", timeout=10_000)
        page.mouse.click(700, 500)
        page.locator("#prompt textarea").click()
        assert dialogs == [], dialogs
    finally:
        page.close()
