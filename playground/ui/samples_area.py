"""The samples area: every sample of a run in one ``gr.HTML``, fed by deltas, in two views.

The page declares a ``SamplesArea`` inside its Blocks. It holds the component (``area.html``) and a
per-session ``gr.State`` (``area.session``: a ``SamplesSession``). The browser side is
``assets/samples.js`` and ``assets/samples_controls.js`` (the component's ``js_on_load``, one body)
and ``assets/samples.css`` (its ``head``).

Messages. The component's value is one compact JSON message at a time (a string: Gradio then sends
it whole, as one "replace"). The browser applies each to its own model of the run and appends to
the DOM; it never rebuilds all samples for an update.

- reset ``{"k":"r","s":seq,"r":run,"id":request_id,"n":n,"sd":[seeds],"u":[...],...}``: a run
  shown at once (opened, finished, or the first message of a run in flight; ``"v"``: in that view);
- delta ``{"k":"d","s":seq,"r":run,"u":[...],"f":[...],"o":[...],"c":[...],"st":status}``: only
  what changed since the previous message of this run;
- view ``{"k":"v","s":seq,"v":"columns"|"wall"}``.

``u`` entries are ``[i, pos, t_last, texts, logprobs|0, tops|0, entropies|0]`` (+ ``t_first`` when
``pos`` is 0): sample i's tokens from position ``pos`` on, their text pieces, the sampled tokens'
logprobs (3 decimals), top-k alternatives as flat ``[text, logprob, ...]`` lists, and each token's
entropy bound in bits (2 decimals; ``analysis.token_entropy``, the one the Logprobs tab shows);
``f``: ``[i, reason]`` for samples that finished (``[i, reason, tail]`` when a stopped sample
sampled past its text: the end-of-sequence token or stop string, which the columns show apart,
``samples_feed.past_text``); ``o``/``c``: the wall's row order (the divergence tree's, see
``analysis.prefix_order``) and each row's prefix shared with the row above, when they changed;
``st``: the run's status when it changed. The browser derives tokens, TTFT and tok/s from these.

Pacing. The browser acknowledges each message after the frame that painted it (the highest
sequence number painted), by the component's server function ``painted`` (a plain request, keyed by
the session's ``ak`` that resets carry: a Gradio event costs the page ~45 ms of its main thread at
this page's size), else by its ``ack`` event. A stream's next message is the answer to that
request when the request is still waiting for one (``SamplesSession.hand_over``): then the stream
yields nothing to Gradio for it. ``SamplesSession.paced`` lets the next update go only when
fewer than ``window`` messages are unacknowledged, carrying everything accumulated meanwhile, with a
heartbeat while nothing changes (Gradio notices a closed tab only when the handler yields). The ack
listener reads the session's State, which is the very object the streaming handler holds (Gradio
deep-copies a State's initial value once per session, then keeps it), so no registry is needed.
A browser that got a delta of a run it lacks says so in its ack; the stream (or, with none
running, the ack's own answer) sends a reset.

Measured (scripts/samples_harness.py, 2-core machine shared with other work): with the browser
keeping up, acks and a fixed 100 ms interval give the same frame gaps and, from n=128 on, the
same update rate (the engine's); acks double the rate at n=32 (20/s, the 50 ms floor, against
10/s). With the page's CPU slowed 4x, acks sent fewer, larger messages and had the shorter gaps.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
import time
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TypeVar

import gradio as gr

from playground.run import Run
from playground.ui.samples_feed import SamplesFeed, encode
from playground.ui.streaming import paced

T = TypeVar("T")
ASSETS = Path(__file__).resolve().parents[2] / "assets"
VIEWS = ("columns", "wall")
COLUMNS_UP_TO = 16  # the "auto" view: columns up to this many samples, the token wall above
SENT_KEPT = 20_000  # per-message records kept for measurement (time, bytes)
ANSWER_WAIT = 1.0  # seconds a browser's ack waits for the stream's next message to carry it back
# After Run, Branch or a run link, the run is shown under the summary: bring it into view when it
# is not, without moving a page whose samples a person can already see. A value typed past a
# slider's range was not used: the note under its control says so, and, as the page moves away
# from it, a line above the summary says it again (it stays with the run it speaks of, until the
# next Run).
SHOW_SAMPLES_JS = """
() => {
  const summary = document.querySelector('#summary-row') || document.querySelector('#run-summary');
  if (!summary) return;
  const notes = [...document.querySelectorAll('.bounds-note')].map((note) => note.textContent);
  let echo = document.querySelector('#bounds-echo');
  if (!echo && notes.length) {
    echo = document.createElement('div');
    echo.id = 'bounds-echo';
    summary.parentNode.insertBefore(echo, summary);
  }
  if (echo) { echo.textContent = notes.length ? `⚠️ ${notes.join(' ')}` : ''; echo.hidden = !notes.length; }
  const top = (echo && !echo.hidden ? echo : summary).getBoundingClientRect().top;
  if (top < 0 || top > window.innerHeight * 0.6) {
    (echo && !echo.hidden ? echo : summary).scrollIntoView({behavior: 'smooth', block: 'start'});
    // A button pressed (Run, Branch) would keep the focus out of view: it follows the page to the
    // run's line, so Tab goes on from there. A text box keeps it (Ctrl+Enter, then edit the prompt).
    const pressed = document.activeElement;
    const line = document.querySelector('#run-summary');
    if (line && pressed && pressed.tagName === 'BUTTON' && !summary.contains(pressed)) {
      line.tabIndex = -1;
      line.focus({preventScroll: true});
    }
  }
}
"""
# A server function is called without the session's State, so an ack names its session by an
# unguessable key: a weak index only (each session lives in its browser's gr.State and leaves this
# index when Gradio drops that State), never a list of one browser's runs for another to read.
QUIET = ""  # a value of the area that says nothing: the browser ignores it (a yield must give every output one)
SESSIONS: weakref.WeakValueDictionary[str, SamplesSession] = weakref.WeakValueDictionary()


class SamplesSession:
    """One browser session's samples area: the feed of the run on screen, the sequence numbers
    of the messages sent and acknowledged, the selected sample, and the pacing of a stream.

    Lives in ``SamplesArea.session`` (a gr.State): the ack and select listeners and the page's
    handlers all receive this same object for a given browser session.
    """

    def __init__(self, window: int = 1):
        self.window = window  # messages allowed unacknowledged while streaming
        self.feed: SamplesFeed | None = None
        self.seq = 0  # the last message's number
        self.acked = 0  # the highest number the browser painted
        self.waiting_since: float | None = None  # since when the browser has a message it has not painted
        self.acks = 0
        self.runs = 0
        self.need_reset = False
        self.selected: int | None = None
        self.sent: list[tuple[float, int]] = []  # (monotonic time, bytes) per message, for measurement
        self.acked_at: list[tuple[float, int]] = []  # (monotonic time, number painted) per ack
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        # Two handlers of one session (a run's stream and Stop, each drawing in a thread) may make
        # messages at once: each is made whole and numbered under this lock, so the browser can
        # drop one that arrives after a newer one (samples.js).
        self._making = threading.RLock()
        self.key = secrets.token_urlsafe(12)  # what the browser's acks name this session by
        SESSIONS[self.key] = self
        self._answer: asyncio.Future | None = None  # a browser's ack waiting for the next message
        self.answered = 0  # messages that went back as the answer to an ack

    def __deepcopy__(self, memo) -> SamplesSession:
        return SamplesSession(self.window)  # each browser session starts afresh

    # --- messages -------------------------------------------------------------------------------

    def show(self, run: Run, view: str | None = None) -> str:
        """A reset: the whole run at once (a finished or opened run, or a stream's first message);
        ``view``: show it in this view (else the one on screen, or "auto" by n)."""
        with self._making:
            return self._show(run, view)

    def _show(self, run: Run, view: str | None) -> str:
        if view is not None and view not in VIEWS:
            raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
        if self.feed is None or not self.feed.matches(run):
            self.runs += 1
            self.feed = SamplesFeed(run, self.runs)
        self.need_reset = False
        message = self.feed.reset(run, self.seq + 1)
        message["ak"] = self.key
        if view is not None:
            message["v"] = view
        return self._send(message)

    def update(self, run: Run) -> str | None:
        """The next message for a run in flight: a delta of what changed since the last message
        (a reset when the browser has another run or asked for one); None when nothing changed."""
        with self._making:
            if self.feed is None or not self.feed.matches(run) or self.need_reset:
                return self._show(run, None)
            message = self.feed.delta(run, self.seq + 1)
            return None if message is None else self._send(message)

    def switch(self, view: str) -> str:
        if view not in VIEWS:
            raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
        with self._making:
            return self._send({"k": "v", "s": self.seq + 1, "v": view})

    def _send(self, message: dict) -> str:
        self.seq = message["s"]
        if self.waiting_since is None:
            self.waiting_since = time.monotonic()
        text = encode(message)
        if len(self.sent) < SENT_KEPT:
            self.sent.append((time.monotonic(), len(text.encode())))
        return text

    # --- acknowledgements and pacing ------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return self.seq - self.acked

    def behind(self) -> float:
        """Seconds the browser has had a message it has not painted (0: it painted them all): a
        slow or busy browser (a small laptop drawing a large chart) falls behind here first."""
        since = self.waiting_since
        return 0.0 if since is None else time.monotonic() - since

    @property
    def streaming(self) -> bool:
        """A ``paced`` stream is running (it sends the reset a browser asks for)."""
        return self._loop is not None

    def ack(self, data: dict | None) -> None:
        """The browser painted every message up to ``data["s"]``; ``data["r"]``: it lacks the run
        (a delta reached it without the reset before) and wants a reset next."""
        data = data or {}
        try:
            painted = int(data.get("s", 0))
        except (TypeError, ValueError):
            return
        self.acks += 1
        if len(self.acked_at) < SENT_KEPT:
            self.acked_at.append((time.monotonic(), painted))
        self.acked = max(self.acked, min(painted, self.seq))
        self.waiting_since = None if self.acked >= self.seq else time.monotonic()  # it painted: not stuck
        if data.get("r"):
            self.need_reset = True
        if self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)  # safe from any thread

    async def answer(self, data: dict | None, wait: float = ANSWER_WAIT) -> str:
        """An ack by the server function: noted, then answered with the stream's next message when
        one comes within ``wait`` s (``hand_over``), a reset when the browser lacks the run and no
        stream runs, else ""."""
        self.ack(data)
        if not self.streaming:
            return self.show(self.feed.run) if self.need_reset and self.feed is not None else ""
        waiting = self._answer = asyncio.get_running_loop().create_future()
        try:
            return await asyncio.wait_for(waiting, wait)
        except TimeoutError:
            return ""
        finally:
            if self._answer is waiting:
                self._answer = None

    def hand_over(self, message: str) -> bool:
        """Give ``message`` to the ack waiting for it, if one is (on this event loop); False: it
        goes by the component's value instead."""
        waiting = self._answer
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:  # a worker thread (a run shown at its end): by the value
            return False
        if waiting is None or waiting.done() or waiting.get_loop() is not here:
            return False
        waiting.set_result(message)
        self._answer = None
        self.answered += 1
        return True

    async def paced(self, items: AsyncIterator[T], *, window: int | None = None, min_interval: float = 0.05,
                    heartbeat: float = 0.5, ack_timeout: float = 2.0,
                    interval: float | None = None) -> AsyncIterator[T | None]:
        """``streaming.paced`` with the browser's readiness as its rule, and a reset the browser asks
        for sent even when nothing new came.

        Ready: fewer than ``window`` messages unacknowledged and ``min_interval`` s since the last
        send (at most 20 updates a second by default), or ``ack_timeout`` s without an ack (a lost
        ack, or a hidden tab that paints nothing). ``interval``: fixed pacing instead, one send
        every ``interval`` s whatever the acks (kept to compare the two by measurement). The
        caller turns each item into a message with ``update`` before the next is asked for.
        """
        window = window or self.window
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()

        def due(last_sent: float) -> float:
            if interval is not None:
                return last_sent + interval
            return last_sent + (min_interval if self.in_flight < window else ack_timeout)

        stream = paced(items, heartbeat=heartbeat, due=due, wake=self._wake, wanted=lambda: self.need_reset)
        try:
            async with contextlib.aclosing(stream) as updates:
                async for item in updates:
                    yield item
        finally:
            self._loop = self._wake = None
            if self._answer is not None and not self._answer.done():
                self._answer.set_result("")  # the stream is over: the waiting ack returns now


async def painted(data: dict | None) -> str:
    """The samples area's server function: the browser painted up to ``data["s"]`` (its session
    named by ``data["k"]``); answers with the next message, or ""."""
    session = SESSIONS.get(str((data or {}).get("k", ""))) if isinstance(data, dict) else None
    return "" if session is None else await session.answer(data)


def _asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


class SamplesArea:
    """The samples area of a page: declare it inside ``gr.Blocks``.

    - ``area.html``: the gr.HTML to put in handlers' outputs; ``area.session``: the per-session
      State to put in their inputs (a ``SamplesSession``).
    - While streaming: ``async for run in session.paced(snapshots): yield area.update(session, run)``
      (a heartbeat ``None`` gives ``{}``).
    - A finished or opened run at once: ``area.show(session, run)``; a view: ``area.switch(session,
      "wall")`` (the page's own buttons switch too, without the server).
    - A click on a sample: ``area.html.select(fn, ...)`` with ``evt: gr.SelectData``, ``evt.index``
      the sample's index, ``evt.value["token"]`` the position of the wall's token clicked (None
      for a label or a card); ``session.selected`` holds the last sample.

    Outputs of handlers that write ``area.html`` should say ``show_progress="hidden"``: a progress
    overlay on every message would cover the samples.
    """

    def __init__(self, *, view: str = "auto", elem_id: str = "samples-area", window: int = 1,
                 columns_up_to: int = COLUMNS_UP_TO, wall_height: str = "70vh", render: bool = True):
        if view not in (*VIEWS, "auto"):
            raise ValueError(f"view must be one of {VIEWS} or 'auto', got {view!r}")
        self.session = gr.State(SamplesSession(window))
        self.html = gr.HTML(
            None, html_template='<div class="sa"></div>',
            js_on_load=_asset("samples.js") + _asset("samples_controls.js"),
            head=f"<style data-samples-area>{_asset('samples.css')}</style>", apply_default_css=False,
            elem_id=elem_id, render=render, view=view, columns_up_to=columns_up_to, wall_height=wall_height,
            server_functions=[painted],
        )
        self.html.ack(self._ack, [self.session], [self.html], queue=False, show_progress="hidden",
                      trigger_mode="multiple", api_visibility="private")
        self.html.select(self._remember, [self.session], None, queue=False, show_progress="hidden",
                         api_visibility="private")

    @staticmethod
    async def _ack(session: SamplesSession | None, evt: gr.EventData):
        """Note what the browser painted. A browser that lacks the run on screen while no stream
        runs (the component was mounted again, after the run ended) gets it again at once."""
        if session is None:
            return gr.skip()
        session.ack(evt._data if isinstance(evt._data, dict) else None)
        if session.need_reset and not session.streaming and session.feed is not None:
            return session.show(session.feed.run)
        return gr.skip()

    @staticmethod
    async def _remember(session: SamplesSession | None, evt: gr.SelectData) -> None:
        if session is not None:
            session.selected = int(evt.index)

    def update(self, session: SamplesSession, run: Run | None) -> dict:
        """The handler's next yield for a run in flight (``{}`` when nothing changed, or when the
        message went back as the answer to the browser's ack)."""
        message = session.update(run) if run is not None else None
        return {} if message is None or session.hand_over(message) else {self.html: message}

    def show(self, session: SamplesSession, run: Run, view: str | None = None, force: bool = False) -> dict:
        """A run at once. The run this session just streamed is already in the browser: it gets
        only what is left (a reset of n=256 x 64 tokens with a top-5 is about 1.4 MB and takes
        ~0.2 s to build, so call this off the event loop for big opened runs); ``force``: a reset."""
        if not force and view is None and session.feed is not None and session.feed.matches(run) \
                and not session.need_reset:
            return self.update(session, run)
        return {self.html: session.show(run, view)}

    def switch(self, session: SamplesSession, view: str) -> dict:
        return {self.html: session.switch(view)}
