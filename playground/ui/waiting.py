"""The runs that wait for a free slot: one limit, --queue-size, counted in runs.

Gradio's own queue limit counts events, and a run of the page is three or four of them (its
stream, its live panels, its end, the tabs' part) beside every page's load steps: a full queue
refused a run's later steps and a new page's load as well as new runs, which left pages at
"queued" or "running" for good and runs unsaved. So Gradio's queue is unbounded here, and a run is
refused where it starts: a button's first step (outside the queue, ``running.plan_action``) and a
call of ``/sample`` (``SampleLimit``, before Gradio queues it), each with a sentence. What is
counted is Gradio's own queue of the run groups, so a call that left it (done, cancelled, a closed
tab) no longer counts."""

from __future__ import annotations

import collections
import json
import re
import time
from typing import Any

from starlette.responses import JSONResponse

from playground.backends.live import State
from playground.errors import PlaygroundError

# The concurrency ids of every event that starts a run: each such event names its group from here,
# so that none escapes the count.
SAMPLING, SWEEP, QA_MATRIX = "sampling", "sweep", "qa-matrix"
RUN_GROUPS = (SAMPLING, SWEEP, QA_MATRIX)


class AppFull(PlaygroundError):
    """Too many runs wait for a free slot already: refused before anything was stored or sent."""


RECENT_S = 1.5  # runs admitted this recently may not have reached Gradio's queue yet: counted as waiting


class WaitingRoom:
    """How many runs wait in the app's queue, and whether one more may (``limit``: --queue-size;
    None: any number). The Blocks is read when asked, as Gradio's queue exists once launched;
    ``action_id``: the page's session state that holds a session's action (``Page.action``)."""

    def __init__(self, blocks=None, limit: int | None = None, action_id: int | None = None):
        self.blocks, self.limit, self.action_id = blocks, limit, action_id
        # (when, its LiveRun): admitted runs not yet in Gradio's queue; a page's run counts while
        # it is queued (a quick one may be over within the window), a /sample call's (None) until then
        self._admitted: collections.deque[tuple[float, Any]] = collections.deque()

    def waiting(self) -> int:
        """The runs in Gradio's queue of the run groups: each /sample call, each sweep or matrix, and
        each page's run whose session's action is still queued (the follower of a press that was
        refused, or stopped, waits there too, and is no run). Or, when more were admitted in the
        last moments (presses and calls that came together), that many."""
        queue = getattr(self.blocks, "_queue", None)
        groups = getattr(queue, "event_queue_per_concurrency_id", {}) if queue is not None else {}
        queued = sum(self._a_run(event) for name in RUN_GROUPS if name in groups for event in groups[name].queue)
        now = time.monotonic()
        while self._admitted and now - self._admitted[0][0] > RECENT_S:
            self._admitted.popleft()
        recent = sum(run is None or run.state is State.QUEUED for _, run in self._admitted)
        return max(queued, recent)

    def _a_run(self, event) -> bool:
        if self.action_id is None or getattr(event.fn, "api_name", None) == "sample":
            return True
        holder = getattr(self.blocks, "state_holder", None)
        session = holder.session_data.get(event.session_hash) if holder is not None else None
        action = session.state_data.get(self.action_id) if session is not None else None
        runs = getattr(action, "runs", None)
        return action is not None and (not runs or runs[0].state is State.QUEUED)

    def admitted(self, runs: list | int = 1) -> None:
        """``runs`` more admitted (``check`` came first): they count until they are in Gradio's queue
        (a list of LiveRuns: while they are queued too; a number: that many calls of ``/sample``)."""
        now = time.monotonic()
        self._admitted.extend([(now, run) for run in runs] if isinstance(runs, list) else [(now, None)] * runs)

    def admit(self) -> None:
        """``check``, then one more admitted."""
        self.check()
        self.admitted()

    def sentence(self, waiting: int) -> str:
        runs = "1 run waits" if waiting == 1 else f"{waiting} runs wait"
        return f"the app is full: {runs} for a free slot already (at most {self.limit}, --queue-size); try again in " \
               "a moment"

    def sample_fn(self) -> int | None:
        """The function index of ``/sample`` in the app's Blocks (how gradio_client names it)."""
        for index, fn in getattr(self.blocks, "fns", {}).items():
            if getattr(fn, "api_name", None) == "sample":
                return index
        return None

    def check(self) -> None:
        """AppFull when ``limit`` runs wait already."""
        if self.limit is not None and (waiting := self.waiting()) >= self.limit:
            raise AppFull(self.sentence(waiting))


class SampleLimit:
    """``/sample`` calls refused at the door when the app is full (an HTTP 503 with the sentence),
    as Gradio refused them with a full queue: plain HTTP (``/gradio_api/call/sample``) and
    gradio_client (``/gradio_api/queue/join`` with the endpoint's function). An ASGI middleware
    for the app's FastAPI (``launch_app``)."""

    def __init__(self, app, room: WaitingRoom):
        self.app, self.room = app, room

    async def __call__(self, scope, receive, send):
        room = self.room
        path = scope.get("path", "") if scope["type"] == "http" and scope.get("method") == "POST" else ""
        # /call/sample and /call/v2/sample (by name), with or without a trailing slash; gradio_client's join
        is_sample = re.fullmatch(r".*/gradio_api/call/(v2/)?sample/?", path) is not None
        if room.limit is None or not (is_sample or path.endswith("/queue/join")):
            return await self.app(scope, receive, send)
        body = await read_body(receive)
        if not is_sample:
            try:
                is_sample = json.loads(body).get("fn_index") == room.sample_fn()
            except (ValueError, AttributeError):
                pass
        if is_sample:
            try:
                room.admit()
            except AppFull as e:
                return await JSONResponse({"detail": str(e)}, status_code=503)(scope, receive, send)
        await self.app(scope, given_again(body, receive), send)


async def read_body(receive) -> bytes:
    """An ASGI request's whole body, for a middleware that reads it before the app does."""
    body, more = b"", True
    while more:
        message = await receive()
        body, more = body + message.get("body", b""), message.get("more_body", False)
    return body


def given_again(body: bytes, receive):
    """The ``receive`` an app gets after a middleware read ``body``: the body once, as it came
    (perhaps rewritten), then whatever the connection says next."""
    sent = False

    async def again():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
