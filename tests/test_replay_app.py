"""Replay as a person uses it: ``python app.py --replay FILE`` serves a saved run of the real engine
with no engine of its own, and History's Replay streams a run of the page again, in Chromium."""

from __future__ import annotations

import json
import re

import psutil
import pytest

from playground.bench.browser import start_app, stop_app
from playground.request import SampleRequest
from playground.run import Run
from tests.helpers import free_port, record_to_end
from tests.test_browser import ARTIFACTS, browser, columns, fill_form, open_page  # noqa: F401  (browser: the fixture)


@pytest.fixture(scope="module")
def saved(backend, tmp_path_factory) -> tuple[Run, str]:
    """A real run of the session's engine, saved as the page exports it."""
    run = record_to_end(backend, SampleRequest("The old lighthouse", n=3, seed=4, max_tokens=12, output_kind="DELTA",
                                               logprobs=2, use_chat_template=False))
    path = tmp_path_factory.mktemp("replay") / "run.json"
    path.write_text(run.to_json(indent=1), encoding="utf-8")
    return run, str(path)


@pytest.mark.slow
def test_app_replay_serves_a_saved_run_without_an_engine(saved, tmp_path):
    """The app answers with no engine process under it, and /sample plays the file's run: the
    snapshots and the final bundle give back its samples, and the bundle says it is a replay."""
    from gradio_client import Client

    source, path = saved
    port = free_port()
    proc, _ = start_app(port, tmp_path / "app.log", ["--replay", path, "--replay-pace", "x4"])
    try:
        children = [p.name() for p in psutil.Process(proc.pid).children(recursive=True)]
        assert not [name for name in children if "EngineCore" in name or "VLLM" in name], children
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        job = client.submit(prompt="a prompt the file does not have", n=2, api_name="/sample")
        texts: dict[int, str] = {}
        for value in job:
            progress = json.loads(value)
            if "bundle_version" in progress:
                break
            for s in progress["samples"]:
                texts[s["index"]] = texts.get(s["index"], "") + s["new_text"]
        run = Run.from_json(job.result())
        client.close()
    finally:
        stop_app(proc)
    assert run.status == "finished" and run.n == source.n
    assert run.request["replay"]["of"] == source.request["request_id"] and run.request["replay"]["pace"] == "x4"
    assert "no run of this prompt" in run.request["replay"]["note"]
    assert [s.token_ids for s in run.samples] == [s.token_ids for s in source.samples]
    assert [texts[i] for i in range(run.n)] == ["".join(s.token_texts) for s in source.samples]
    # Its record names the engine that made the tokens it plays, whole (what Compare and the notes read).
    assert run.engine == json.loads(json.dumps(source.engine)) and run.engine.get("logprobs_mode")
    log = (tmp_path / "app.log").read_text()
    assert "no engine" in log and re.search(rf"replay: {run.request['request_id']} played", log), log[-2000:]


def test_history_replays_a_run_of_the_page_at_the_speed_chosen(browser, app_url):  # noqa: F811
    """A real run on the page, then History's Replay at x4: the replay streams into the samples
    area with the run's texts, and the summary and the History list say what it replays."""
    page = open_page(browser, app_url)
    try:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        fill_form(page, "Tell me about the tides.", n=2, seed=8, max_tokens=10)
        page.locator("#run").click()
        page.locator("#run-summary").get_by_text("finished").wait_for(timeout=120_000)
        original = re.search(r"run-[0-9a-f]{8}", page.locator("#run-summary").inner_text()).group(0)
        texts = columns(page, 2)
        page.get_by_role("tab", name="History").click()
        page.locator("#history-pick input").click()
        page.get_by_role("option", name=re.compile(original)).click()
        page.locator("#replay-pace input").fill("x4")
        page.locator("#replay-pace input").press("Enter")
        page.locator("#replay").click()
        page.wait_for_function(
            "(of) => { const s = document.querySelector('#run-summary').innerText.split('\\n')[0];"
            " return s.includes('finished') && s.includes('replay of ' + of + ' at x4'); }",
            arg=original, timeout=60_000)
        assert columns(page, 2) == texts
        # The note beside the button says how it ended, once it has: in the past tense.
        page.locator("#replay-note").get_by_text(f"Replay of {original} at x4 played to its end").wait_for(
            timeout=30_000)
        status = page.locator("#engine-status").inner_text()  # the app's engine's line, which a replay leaves alone
        assert "engine up" in status and "a replay: no engine samples it" not in status, status
        page.locator("#history-pick input").click()
        options = [o.inner_text() for o in page.get_by_role("option").all()]
        assert any(f"⟲ replay of {original} at x4" in option for option in options), options
        page.keyboard.press("Escape")
        page.locator("#replay-pace input").fill("soon")
        page.locator("#replay-pace input").press("Enter")
        page.locator("#replay").click()
        page.locator("#replay-note").get_by_text("got 'soon'").wait_for(timeout=10_000)  # said beside the button
        assert "replay of" in page.locator("#run-summary").inner_text()  # and the replay stays on screen
        page.screenshot(path=ARTIFACTS / "replay-history.png", full_page=False)
        assert errors == []
    finally:
        page.close()
