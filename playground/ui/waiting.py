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

import json

from starlette.responses import JSONResponse

from playground.errors import PlaygroundError

RUN_GROUPS = ("sampling", "sweep", "qa-matrix")  # the concurrency ids of every event that starts a run


class AppFull(PlaygroundError):
    """Too many runs wait for a free slot already: refused before anything was stored or sent."""


class WaitingRoom:
    """How many runs wait in the app's queue, and whether one more may (``limit``: --queue-size;
    None: any number). The Blocks is read when asked, as Gradio's queue exists once launched."""

    def __init__(self, blocks=None, limit: int | None = None):
        self.blocks, self.limit = blocks, limit

    def waiting(self) -> int:
        queue = getattr(self.blocks, "_queue", None)
        groups = getattr(queue, "event_queue_per_concurrency_id", {}) if queue is not None else {}
        return sum(len(groups[name].queue) for name in RUN_GROUPS if name in groups)

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
        if room is None or room.limit is None or not path.endswith(("/gradio_api/call/sample", "/queue/join")):
            return await self.app(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        is_sample = path.endswith("/call/sample")
        if not is_sample:
            try:
                is_sample = json.loads(body).get("fn_index") == room.sample_fn()
            except (ValueError, AttributeError):
                pass
        if is_sample and (waiting := room.waiting()) >= room.limit:
            return await JSONResponse({"detail": room.sentence(waiting)}, status_code=503)(scope, receive, send)
        sent = False

        async def again():  # the body, read once here, given to the app as it came
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, again, send)
