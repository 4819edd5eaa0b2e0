"""The samples area (playground/ui/samples_area.py): the feed's messages, the pacing by acks, and the
component in a real Chromium.

The browser test streams a synthetic run (``backends.synthetic.synthetic_run``, replayed at an engine's
pace) into a minimal gr.Blocks page served on loopback: it tests the component alone, at a pace
a test can set; the page on the real engine is tests/test_browser.py's n=128 test.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from playground.analysis import entropies, prefix_order, visible
from playground.backends.synthetic import synthetic_run
from playground.bench.browser import CHROMIUM_ARGS, WATCH
from playground.bench.samples_demo import demo_app
from playground.run import Run, Sample, TokenLogprob
from playground.ui.samples_area import SamplesSession
from tests.helpers import free_port, wait_until

NEXT_FRAME = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"


def blank(n: int, logprobs: bool = True) -> Run:
    return Run(request={"request_id": "run-test", "n": n}, samples=[
        Sample(index=i, seed=10 + i, logprobs=[] if logprobs else None) for i in range(n)])


def grow(run: Run, index: int, *pieces: str, t: float = 0.5) -> None:
    s = run.samples[index]
    for piece in pieces:
        token = 1000 + sum(map(ord, piece))  # ordered as the pieces are, for one-letter pieces
        s.token_ids.append(token)
        s.token_texts.append(piece)
        s.token_times.append(t)
        if s.logprobs is not None:
            s.logprobs.append(TokenLogprob(token, math.log(0.5), 1, piece, [(token, math.log(0.5), piece),
                                                                                (7, math.log(0.25), "x")]))


# ---- the feed ------------------------------------------------------------------------------------

def test_a_delta_carries_only_the_new_tokens_of_the_samples_that_grew():
    run, session = blank(3), SamplesSession()
    first = json.loads(session.update(run))
    assert first["k"] == "r" and first["n"] == 3 and first["sd"] == [10, 11, 12] and "u" not in first
    grow(run, 0, "Once", " upon")
    grow(run, 2, "Hi")
    delta = json.loads(session.update(run))
    assert delta["k"] == "d" and delta["s"] == first["s"] + 1 and delta["r"] == first["r"]
    assert [(u[0], u[1], u[3]) for u in delta["u"]] == [(0, 0, ["Once", " upon"]), (2, 0, ["Hi"])]
    assert delta["u"][0][4] == [-0.6931, -0.6931] and delta["u"][0][5][0] == ["Once", -0.6931, "x", -1.3863]
    grow(run, 0, " a", " time", t=0.9)
    delta = json.loads(session.update(run))
    assert [(u[0], u[1], u[2], u[3]) for u in delta["u"]] == [(0, 2, 0.9, [" a", " time"])]
    assert len(delta["u"][0]) == 7  # the first token's time went with position 0 only
    assert session.update(run) is None  # nothing new: no message


def test_a_final_only_run_sends_no_arrival_times_for_a_cards_ttft():
    """FINAL_ONLY's first output is its last: the time it arrived is no time to first token, and a
    card says nothing of TTFT or tok/s rather than that (the Timing tab has the engine's own)."""
    run, session = blank(2), SamplesSession()
    run.request["output_kind"] = "FINAL_ONLY"
    session.update(run)
    grow(run, 0, "a", "b", t=0.7)
    entry = json.loads(session.update(run))["u"][0]
    assert entry[2] is None and len(entry) > 7 and entry[7] is None
    timed, session = blank(2), SamplesSession()
    session.update(timed)
    grow(timed, 0, "a", "b", t=0.7)
    assert json.loads(session.update(timed))["u"][0][7] == 0.7


def test_finish_reasons_and_the_status_go_once():
    run, session = blank(2), SamplesSession()
    session.update(run)
    grow(run, 0, "a")
    run.samples[0].add_text("a")
    run.samples[0].finish_reason, run.samples[0].stop_reason = "stop", "\n\n"
    delta = json.loads(session.update(run))
    assert delta["f"] == [[0, "✔ stop string '\\n\\n'"]]
    run.status = "aborted"
    delta = json.loads(session.update(run))
    assert delta == {"k": "d", "s": delta["s"], "r": delta["r"], "st": "aborted"}


def test_what_a_sample_sampled_past_its_text_goes_with_its_finish():
    """The end-of-sequence token (or a stop string) is a token the sample drew that vLLM leaves out
    of its text: the columns show it apart, and only when the pieces spell the text out."""
    run, session = blank(3), SamplesSession()
    session.update(run)
    for i, pieces, text, stop in ((0, ("Hi", ".", "<|im_end|>"), "Hi.", None), (1, ("Yes", ".\n\n"), "Yes.", "\n\n"),
                                  (2, ("Odd", "<|im_end|>"), "Even", None)):
        grow(run, i, *pieces)
        run.samples[i].add_text(text)
        run.samples[i].finish_reason, run.samples[i].stop_reason = "stop", stop
    delta = json.loads(session.update(run))
    assert delta["f"] == [[0, "✔ EOS", "<|im_end|>"], [1, "✔ stop string '\\n\\n'", "\n\n"], [2, "✔ EOS"]]


def test_a_reset_carries_everything_and_follows_a_request_for_one():
    run = synthetic_run(6, 10, seed=3)
    session = SamplesSession()
    reset = json.loads(session.show(run, view="wall"))
    assert reset["k"] == "r" and reset["v"] == "wall" and reset["st"] == "finished"
    by_sample = {u[0]: u for u in reset["u"]}
    for s in run.samples:
        u = by_sample[s.index]
        assert u[1] == 0 and u[3] == s.token_texts and u[7] == round(s.token_times[0], 2)
        assert len(u[4]) == len(u[5]) == len(u[6]) == len(s.token_ids)
        # Each token's entropy is the Logprobs tab's number, in bits: the browser derives none.
        assert u[6] == [round(e, 2) for e in entropies(s.logprobs, len(s.token_ids))]
    assert sorted(reset["f"]) == [[s.index, f"✔ {s.finish_reason}"] for s in run.samples]  # all "length" here
    assert (reset["o"], reset["c"]) == tuple(map(list, prefix_order([s.token_ids for s in run.samples])))
    assert session.update(run) is None
    session.ack({"s": reset["s"], "r": 1})  # the browser lost the run: the next message is a reset
    assert json.loads(session.update(run))["k"] == "r"
    other = synthetic_run(6, 10, seed=4)
    other.request["request_id"] = "another"
    assert json.loads(session.update(other))["k"] == "r"  # another run: a reset, never a delta


def test_a_branchs_samples_come_with_the_start_they_continue():
    """A branch's samples hold only their new tokens: the text they continue (the parent's first
    tokens, then the forced one) goes with the run, its end when long, for each card to show."""
    from playground import analysis

    parent = blank(2)
    grow(parent, 1, "The", " moon", " is")
    point = analysis.BranchPoint("run-test", 1, 2, 7, " a", analysis.branch_lead(parent, 1, 2, " a"))
    branch = Run(request={"request_id": "run-branch", "n": 2, "branch": point.to_dict()},
                 samples=[Sample(index=i, seed=i) for i in range(2)])
    assert point.prefix_text == "The moon a"
    assert json.loads(SamplesSession().show(branch))["pf"] == "The moon a"
    again = analysis.BranchPoint("run-branch", 0, 0, None, None, analysis.branch_lead(branch, 0, 0))
    assert again.prefix_text == "The moon a", "a branch of a branch continues its parent's start too"
    branch.request["branch"]["prefix_text"] = "word " * 40
    assert json.loads(SamplesSession().show(branch))["pf"] == "…" + ("word " * 40)[-80:]
    assert "pf" not in json.loads(SamplesSession().show(parent))


def test_showing_the_run_just_streamed_sends_only_what_is_left():
    import gradio as gr

    from playground.ui.samples_area import SamplesArea

    with gr.Blocks():
        area = SamplesArea()
    run, session = blank(2), SamplesSession()
    area.update(session, run)
    grow(run, 0, "a")
    area.update(session, run)
    run.status = "finished"
    assert json.loads(area.show(session, run)[area.html]) == {"k": "d", "s": session.seq, "r": 1, "st": "finished"}
    assert area.show(session, run) == {}  # nothing left
    assert json.loads(area.show(session, run, force=True)[area.html])["k"] == "r"
    assert json.loads(area.show(session, blank(2))[area.html])["k"] == "r"  # another run: everything


def test_a_browser_that_lost_the_run_gets_it_back_from_its_ack():
    import gradio as gr

    from playground.ui.samples_area import SamplesArea

    run, session = synthetic_run(3, 4), SamplesSession()
    session.show(run)
    painted = asyncio.run(SamplesArea._ack(session, gr.EventData(None, {"s": session.seq})))
    assert isinstance(painted, gr.skip().__class__)  # nothing to send back
    again = asyncio.run(SamplesArea._ack(session, gr.EventData(None, {"s": session.seq, "r": 1})))
    assert json.loads(again)["k"] == "r" and not session.need_reset


def test_an_ack_by_the_server_function_carries_the_streams_next_message_back():
    from playground.ui.samples_area import painted

    run, session = blank(2), SamplesSession()

    async def main():
        reset = json.loads(session.show(run))
        assert reset["ak"] == session.key  # what the browser names its session by
        assert await painted({"k": session.key, "s": reset["s"], "r": 1}) != ""  # no stream: a reset at once
        session._loop = asyncio.get_running_loop()  # a stream runs (paced() sets it so)
        waiting = asyncio.ensure_future(painted({"k": session.key, "s": session.seq}))
        while session._answer is None:  # the ack is noted and waits for the next message
            await asyncio.sleep(0)
        assert session.acked == session.seq
        grow(run, 0, "a")
        assert session.hand_over(session.update(run))
        assert json.loads(await waiting)["u"][0][3] == ["a"] and session.answered == 1
        grow(run, 1, "b")
        assert not session.hand_over(session.update(run))  # no ack waits: it goes by the value
        assert await painted({"k": "another", "s": 1}) == ""

    asyncio.run(main())


def test_wall_rows_follow_the_divergence_tree_and_shared_prefixes():
    sequences = [[1, 2, 3], [1, 2], [0, 5], [1, 2, 3], [1, 4], []]
    order, shared = prefix_order(sequences)
    assert order == [5, 2, 1, 0, 3, 4]  # the empty one first, a stopped prefix before its longer kin
    assert shared == [0, 0, 0, 2, 3, 1]
    run, session = blank(3), SamplesSession()
    session.update(run)
    grow(run, 0, "b")
    grow(run, 1, "a")
    grow(run, 2, "b", "c")
    delta = json.loads(session.update(run))
    assert delta["o"] == [1, 0, 2] and delta["c"] == [0, 0, 1]
    grow(run, 1, "z")
    assert "o" not in json.loads(session.update(run))  # unchanged order: not sent again

    # Admitted in waves, the samples with no token yet are the wall's last rows, not its first.
    run, session = blank(4), SamplesSession()
    session.update(run)
    grow(run, 2, "b", "c")
    grow(run, 3, "b", "a")
    delta = json.loads(session.update(run))
    assert delta["o"] == [3, 2, 0, 1] and delta["c"] == [0, 1, 0, 0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.lists(st.integers(0, 2), max_size=3), min_size=4, max_size=4), min_size=1, max_size=6))
def test_the_order_of_a_run_in_flight_is_the_order_computed_afresh(steps):
    """Samples that grow step by step (few token ids: long shared prefixes, identical samples):
    what the feed computes from the pairs it knew equals the order computed from scratch."""
    sequences: list[list[int]] = [[] for _ in range(4)]
    known: dict = {}
    for step in steps:
        for sequence, new in zip(sequences, step):
            sequence.extend(new)
        assert prefix_order(sequences, known) == prefix_order([list(s) for s in sequences])


def test_messages_stay_small_and_do_not_grow_with_the_text():
    run, session = blank(256), SamplesSession()
    session.update(run)
    sizes = []
    for _ in range(40):
        for i in range(256):
            grow(run, i, " token")
        sizes.append(len(session.update(run)))
    # One token per sample: its text, logprob, a top-2 (logprobs to 4 decimals), its entropy and its time
    # (to the ms); the 40th costs what the 2nd did (the 1st also carries the row order and the first
    # token's times).
    assert sizes[0] < 256 * 92 and sizes[-1] <= 1.05 * sizes[1] < 256 * 84, sizes  # (positions gain a digit)
    plain = blank(256, logprobs=False)
    session.update(plain)
    for i in range(256):
        grow(plain, i, " token")
    grow(plain, 0, " more")
    assert len(session.update(plain)) < 256 * 40  # with the row order, sent as it changed


def test_messages_are_strict_json():
    run, session = blank(2), SamplesSession()
    grow(run, 0, "a")
    grow(run, 1, "b")
    run.samples[0].logprobs[0].logprob = -math.inf
    run.samples[1].logprobs[0].logprob = math.nan
    text = session.show(run)
    assert "Infinity" not in text and "NaN" not in text
    entries = {u[0]: u for u in json.loads(text)["u"]}
    assert entries[0][4][0] == -99.0 and entries[1][4][0] is None


def test_a_state_copy_is_a_fresh_session():
    session = SamplesSession(window=2)
    session.update(blank(2))
    fresh = copy.deepcopy(session)
    assert fresh.window == 2 and fresh.feed is None and fresh.seq == 0


# ---- pacing --------------------------------------------------------------------------------------

def test_paced_waits_for_the_ack_then_sends_everything_accumulated():
    async def main():
        session = SamplesSession()
        run = blank(1)

        async def engine():
            for k in range(60):
                grow(run, 0, f"{k} ")
                yield run
                await asyncio.sleep(0.005)

        sent, waiting = [], []
        async for item in session.paced(engine(), min_interval=0.0, heartbeat=10, ack_timeout=10):
            waiting.append(session.in_flight)
            message = session.update(item)
            if message is not None:
                sent.append(json.loads(message))
                # the browser paints it and acknowledges 50 ms later
                asyncio.get_running_loop().call_later(0.05, session.ack, {"s": session.seq})
        assert set(waiting[:-1]) == {0}  # a message goes once the one before was painted (the last goes anyway)
        return sent

    sent = asyncio.run(main())
    tokens = [len(m["u"][0][3]) for m in sent if "u" in m]
    assert sum(tokens) == 60, tokens  # none lost
    assert max(tokens) >= 4 and len(sent) < 30, tokens  # what came while waiting went together


def test_paced_without_acks_sends_after_the_timeout_and_beats_while_silent():
    async def main():
        session = SamplesSession()
        run = blank(1)

        async def engine():
            for _ in range(3):
                grow(run, 0, "x")
                yield run
                await asyncio.sleep(0.25)

        got = []
        async for item in session.paced(engine(), heartbeat=0.1, ack_timeout=0.2, min_interval=0.0):
            got.append(item)
            if item is not None:
                session.update(item)
        return got

    got = asyncio.run(main())
    assert None in got and got[-1] is not None  # heartbeats, and always the last item
    assert sum(item is not None for item in got) >= 3


# ---- in Chromium ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def served():
    from playground.bench.browser import chromium_location

    if not Path(chromium_location()).exists():
        pytest.fail(f"Chromium not found at {chromium_location()}: install it or set PLAYGROUND_CHROMIUM")
    config = {"n": 128, "tokens": 48}
    demo, record = demo_app(config, make_run=lambda c: synthetic_run(c["n"], c["tokens"], seed=7,
                                                                     logprobs=c.get("logprobs", 5)))
    demo.queue()
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True)
    yield url, config, record
    demo.close()


@pytest.fixture(scope="module")
def page(served):
    from playwright.sync_api import sync_playwright

    from playground.bench.browser import chromium_location

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_location(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(served[0])
        page.locator("#samples-area .sa-bar").wait_for()
        page.errors = errors
        yield page
        browser.close()


RESETS = "() => document.querySelector('#samples-area .sa').__sa.resets"


def stream(page, config: dict, view: str) -> int:
    """Run the replay in ``view`` to its end; how many resets the browser took meanwhile. One: the
    run's first message, then deltas only, none lost or out of order (a lost one costs a reset).
    How smooth it was is the benchmark's to say (``--paced``: frame gaps), not a test's."""
    config["view"] = view
    before = page.evaluate(RESETS)
    page.evaluate(WATCH, "area")
    page.wait_for_function("() => window.__watch.end !== null", timeout=30_000, polling=200)
    return page.evaluate(RESETS) - before


def test_the_wall_and_the_columns_stream_128_samples_in_chromium(served, page):
    _, config, record = served
    assert "The n samples stream here after Run" in page.locator(".sa-columns").inner_text()  # before any run
    resets = stream(page, config, "wall")
    assert page.locator(".sa-empty").count() == 0  # the run took its place
    run = record["runs"][-1]
    session = record["sessions"][-1]
    assert resets == 1, f"{resets} resets while streaming into the wall: a delta was lost or came out of order"
    assert session.acks >= session.seq - 2 > 5, "the browser did not acknowledge its messages"
    assert session.answered > 0, "no message went back as the answer to an ack"

    # Every sample has its row, in the divergence tree's order (rows exist only in view: scroll through).
    seen: dict[int, int] = {}
    height = page.evaluate("document.querySelector('.sa-wall').scrollHeight")
    for top in range(0, height, 300):
        page.evaluate(f"document.querySelector('.sa-wall').scrollTop = {top}")
        page.evaluate(NEXT_FRAME)  # the rows in view are drawn on the frame after a scroll
        for i, y in page.evaluate("""() => [...document.querySelectorAll('.sa-row')]
                                    .map(r => [Number(r.dataset.i), parseFloat(r.style.top)])"""):
            seen[i] = y
    assert sorted(seen) == list(range(128))
    assert sorted(seen, key=seen.get) == prefix_order([s.token_ids for s in run.samples])[0]

    # Hover a token: its probability and the top-k at its position.
    page.evaluate("document.querySelector('.sa-wall').scrollTop = 0")
    page.evaluate(NEXT_FRAME)
    i = prefix_order([s.token_ids for s in run.samples])[0][1]  # the second row
    row = page.locator(f'.sa-row[data-i="{i}"]')
    row.locator(".tk").nth(3).hover()
    tip = page.locator(".sa-tip")
    tip.wait_for(state="visible")
    top = run.samples[i].logprobs[3].top
    assert f"p = {math.exp(run.samples[i].logprobs[3].logprob):.3f}" in tip.inner_text()
    assert tip.locator(".sa-topk tr").count() == len(top) == 5
    alternative = top[-1][2].replace(" ", "·")
    assert alternative in tip.inner_text()
    marked = tip.locator(".sa-topk tr").evaluate_all("rows => rows.map(r => r.classList.contains('mine'))")
    sampled = [token_id for token_id, _, _ in top].index(run.samples[i].token_ids[3])
    assert marked == [k == sampled for k in range(len(top))], marked  # the sampled token's row, and it alone
    bottom = row.evaluate("(r) => r.getBoundingClientRect().bottom")
    page.set_viewport_size({"width": 1400, "height": int(bottom) + 10})  # the row at the window's foot
    try:
        page.mouse.move(0, 0)
        row.locator(".tk").nth(4).hover()
        tip.wait_for(state="visible")
        placed = tip.evaluate("(t) => [t.getBoundingClientRect().top, t.getBoundingClientRect().bottom]")
        assert 0 <= placed[0] and placed[1] <= bottom + 10, f"the tip is drawn off screen: {placed}"
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})
    page.evaluate("() => document.querySelector('.sa-wall').scrollTop = 40")  # a touch has no mouse to leave:
    tip.wait_for(state="hidden")  # a scroll (of the page, or of the wall) closes the tip
    page.evaluate("document.querySelector('.sa-wall').scrollTop = 0")
    page.evaluate(NEXT_FRAME)
    legend = page.locator(".sa-legend")  # the colours' key says its ends in words, for either colouring
    assert legend.inner_text().split() == ["p", "0", "(unlikely)", "p", "1", "(likely)"]
    page.locator(".sa-group button[data-colour=e]").click()
    assert legend.inner_text().split() == ["0", "bits", "≥", "3.15", "bits"]
    page.locator(".sa-group button[data-colour=p]").click()

    # A click on a row reaches the Python listener with that sample's index.
    row.locator(".sa-label").click()
    assert wait_until(lambda: record["picked"] and record["picked"][-1] == i, timeout=5)
    page.wait_for_function("(i) => document.querySelector('#picked textarea').value === i", arg=str(i), timeout=5_000)
    assert session.selected == i and record["tokens"][-1] is None
    row.locator(".tk").nth(3).click()  # a token: its position too (the Branch tab starts there)
    assert wait_until(lambda: record["tokens"] and record["tokens"][-1] == 3, timeout=5)
    assert record["picked"][-1] == i

    resets = stream(page, config, "columns")
    run = record["runs"][-1]
    assert resets == 1, f"{resets} resets while streaming into the columns"
    texts = page.evaluate("() => [...document.querySelectorAll('.sa-card .sa-text')].map(e => e.textContent)")
    assert texts == [s.text or "".join(s.token_texts) for s in run.samples]
    header = page.locator(".sa-card .sa-head").nth(5).inner_text()
    s = run.samples[5]
    assert f"#5 · seed {s.seed} · {len(s.token_ids)} tok · ✔ {s.finish_reason} · TTFT" in header, header
    assert page.errors == []


def test_a_run_without_logprobs_is_shown_at_once_in_neutral_colours(served, page):
    _, config, _ = served
    config.update(view="wall", logprobs=None)
    try:
        page.locator("#show").click()
        page.wait_for_function("() => document.querySelector('.sa-wall .tk.nx')", timeout=10_000)
    finally:
        config.pop("logprobs")
    assert "No logprobs recorded" in page.locator(".sa-note").inner_text()
    assert page.locator(".sa-wall .tk.nx").count() == page.locator(".sa-wall .tk").count() > 0
    page.locator(".sa-group button[data-view=columns]").click()  # switching needs no server
    page.locator(".sa-columns").wait_for(state="visible")
    assert page.locator(".sa-card").count() == config["n"] and page.errors == []
    pressed = page.evaluate("() => Object.fromEntries([...document.querySelectorAll('.sa-group button')]"
                            ".map(b => [b.textContent, b.getAttribute('aria-pressed')]))")
    assert [name for name, on in pressed.items() if on == "true"] == ["Columns", "probability", "text"], pressed


def test_on_a_phone_the_wall_has_the_width_and_a_samples_header_is_read_whole(served, page):
    """At 390 px the minimap gives the wall its width, and a header wraps, its finish reason last."""
    _, config, _ = served
    page.set_viewport_size({"width": 390, "height": 844})
    try:
        stream(page, config, "wall")
        wall = page.evaluate("() => document.querySelector('.sa-wall').getBoundingClientRect().width")
        assert wall > 300, f"the wall is {wall} px wide on a phone"
        page.locator(".sa-group button[data-view=columns]").click()
        head = page.locator(".sa-card .sa-head").first
        assert head.evaluate("(e) => e.scrollWidth <= e.clientWidth"), "a sample's header is cut on a phone"
        assert "✔ length" in head.inner_text() and head.get_attribute("title") == head.inner_text()
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


def test_the_token_wall_draws_a_cell_as_the_python_views_draw_the_token(page):
    """Its ``visible``, taken from the file the page loads, over pieces a reader could not see."""
    from tests.test_display_text import PIECES

    source = (Path(__file__).parent.parent / "assets" / "samples.js").read_text(encoding="utf-8")
    wanted = "\n".join(line for line in source.splitlines() if line.startswith(
        ("const MARKS", "const PARTIAL", "const codePoint", "const visible", "  : piece")))
    drawn = page.evaluate("([source, pieces]) => pieces.map(new Function(source + '; return visible;')())",
                          [wanted, PIECES])
    assert drawn == [visible(p, multiline=False) for p in PIECES]
