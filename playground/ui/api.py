"""``/sample``: the app's API for scripts (gradio_client). Streams progress snapshots as JSON; its
final value is the run bundle. It belongs to no browser session, so it touches no page state.
Each snapshot carries only what changed since the one before (per sample: the tokens added, their
text, how many it has, its finish reason): at n=256 a snapshot of every sample's whole text would
grow with the square of the run.
A call that is cancelled (or whose client goes away) stops its run as the page's Stop does: the
run is aborted by its parent id, so nothing of it is left running in the engine.

Its parameters are the request schema's fields (``playground.request``), with the schema's
defaults: every setting the page has, and nothing written out a second time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import logging
import re
from collections.abc import AsyncIterator

from starlette.responses import JSONResponse, PlainTextResponse

from playground.backends.live import LiveRun, log_refused
from playground.request import SampleRequest, did_you_mean, fields
from playground.run import Run
from playground.ui.messages import shown
from playground.ui.samples_feed import Told
from playground.ui.streaming import paced
from playground.ui.waiting import given_again, read_body

PROGRESS_EVERY = 0.25  # seconds between progress snapshots
log = logging.getLogger(__name__)
# How Gradio's named-parameter route (``/gradio_api/call/v2/...``) says a call does not fit the
# endpoint's parameters: with a TypeError, which the server answers with a bare 500.
_NOT_A_PARAMETER = re.compile(r"Parameter `(?P<name>[^`]*)` is not a valid key-word argument")
_MISSING = re.compile(r"No value provided for required argument: (?P<name>.+)")
_TWICE = re.compile(r"Parameter `(?P<name>[^`]*)` is already set as a positional argument")


def sample_endpoint(backend):
    """The ``/sample`` function for ``gr.api``: its signature and type hints are the schema's, so
    gradio_client and the API page list every setting with its default."""

    async def sample(*values) -> AsyncIterator[str]:
        """Sample n completions. Streams progress snapshots as JSON; the final value is the run bundle."""
        try:
            request = SampleRequest.from_user(**dict(zip(NAMES, values)))
            live = await LiveRun.plan(backend, request, caller="/sample")
            latest, told = None, Progress()
            # aclosing: a cancelled call aborts its run now, not when the generator is collected.
            stream = paced(_with_tokens(live.follow(backend, every=PROGRESS_EVERY)), interval=PROGRESS_EVERY)
            async with contextlib.aclosing(stream) as snapshots:
                async for run in snapshots:
                    latest = run or latest  # a heartbeat (None): a snapshot with nothing new
                    if live.error is not None:  # refused or failed on the way: the caller gets the sentence
                        raise live.error
                    if latest is not None and latest.finished:
                        last = told.snapshot(latest)  # what came since the last snapshot, finish reasons
                        if last["samples"]:  # included: followed alone, the snapshots add up to the run
                            yield json.dumps(last)
                        # Off the event loop, and only what was not written while it streamed
                        # (LiveBundle): at n=256 x 1,000 tokens the whole bundle takes a second.
                        yield await asyncio.to_thread(latest.to_json)
                        return
                    yield json.dumps(told.snapshot(latest))
        except Exception as e:
            raise shown(e) from None

    sample.__signature__ = SIGNATURE
    sample.__annotations__ = {**ANNOTATIONS, "return": str}
    return sample


async def call_not_fitting(request, error: TypeError):
    """A call by name whose names do not fit the endpoint (one it does not have, the prompt left
    out) is the caller's mistake: a 400 with the sentence, not Gradio's bare 500. Any other
    TypeError is a bug, answered and logged as one."""
    said = str(error)

    def refused(sentence: str) -> JSONResponse:
        log_refused("/sample", sentence)
        return JSONResponse({"error": sentence}, status_code=400)

    if "/call/v2/" in request.url.path:
        if (found := _NOT_A_PARAMETER.search(said)) and found["name"] == "data":  # a positional call, sent by name
            return refused("data is not a parameter of this endpoint: a list of values in order goes to "
                           "/gradio_api/call/sample; /gradio_api/call/v2/sample takes the parameters by name")
        for pattern, sentence in ((_NOT_A_PARAMETER, "{name} is not a parameter of this endpoint"),
                                  (_MISSING, "{name} is required"), (_TWICE, "{name} is given twice")):
            if found := pattern.search(said):
                close = did_you_mean(found["name"], NAMES) if pattern is _NOT_A_PARAMETER else ""
                return refused(sentence.format(name=found["name"]) + close + ": /gradio_api/info lists the "
                               "parameters, with their defaults")
    log.error("unexpected error in %s", request.url.path, exc_info=error)
    return PlainTextResponse("Internal Server Error", status_code=500)


EXCEPTION_HANDLERS = {TypeError: call_not_fitting}  # for the app's FastAPI (launch's app_kwargs)


class PositionalCalls:
    """A call of ``/sample`` by position (``POST /gradio_api/call/sample``, ``{"data": [...]}``) may
    end its list early: the values left out take their defaults, as gradio_client fills them in.
    Gradio would fail such a call with no message at all (``{"error": null}`` in its event stream);
    a call without even the prompt is a 400 that says so. An ASGI middleware, for the app's
    FastAPI (launch's ``app_kwargs``)."""

    PATH = "/gradio_api/call/sample"

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].endswith(self.PATH):
            return await self.app(scope, receive, send)
        body = await read_body(receive)
        with contextlib.suppress(ValueError, AttributeError):
            call = json.loads(body)
            data = call.get("data")
            if isinstance(data, list) and not data:
                return await JSONResponse({"error": "the prompt is required: data's first value is the prompt, "
                                                    "then the parameters in the order /gradio_api/info lists them"},
                                          status_code=400)(scope, receive, send)
            if isinstance(data, list) and len(data) > len(DEFAULTS):  # Gradio would drop the rest unsaid
                return await JSONResponse({"error": f"data has {len(data)} values, and /sample takes at most "
                                                    f"{len(DEFAULTS)}: /gradio_api/info lists them in order"},
                                          status_code=400)(scope, receive, send)
            if isinstance(data, list) and len(data) < len(DEFAULTS):
                body = json.dumps({**call, "data": data + DEFAULTS[len(data):]}).encode()
        await self.app(scope, given_again(body, receive), send)


async def _with_tokens(runs: AsyncIterator[Run]) -> AsyncIterator[Run]:
    """The run's snapshots from its first token on (and its end): a snapshot before any token
    would start the pacing clock, and the first tokens would then wait a whole interval."""
    async with contextlib.aclosing(runs) as snapshots:
        async for run in snapshots:
            if run.finished or any(s.token_ids for s in run.samples):
                yield run


def _parameters() -> list[inspect.Parameter]:
    return [inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=_default(f),
                              annotation=_ANNOTATION[f.type]) for f, _ in fields()]


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return None  # a list (stop strings): none
    return inspect.Parameter.empty  # the prompt


# The API's types: a list may also come as None (no stop strings).
_ANNOTATION = {"str": str, "int": int, "int | None": int | None, "float": float, "list[str]": list[str] | None,
               "bool": bool, "bool | None": bool | None, "list[int] | None": list[int] | None}
NAMES = [f.name for f, _ in fields()]
SIGNATURE = inspect.Signature(_parameters(), return_annotation=str)
ANNOTATIONS = {p.name: p.annotation for p in SIGNATURE.parameters.values()}
DEFAULTS = [None if p.default is inspect.Parameter.empty else p.default for p in SIGNATURE.parameters.values()]


class Progress:
    """What a caller has been told of its run so far, so each snapshot says only what is new."""

    def __init__(self):
        self.told = Told()

    def snapshot(self, run: Run | None) -> dict:
        if run is None:
            return {"status": "running", "samples": []}
        with run.changing:  # no output half recorded (the recording may run on another thread)
            samples = [{"index": s.index, "seed": s.seed, "new_text": "".join(s.token_texts[before:]),
                        "new_token_ids": s.token_ids[before:], "num_tokens": len(s.token_ids),
                        "finish_reason": s.finish_reason} for s, before, _ in self.told.news(run)]
        return {"status": run.status, "request_id": run.request.get("request_id"), "samples": samples}
