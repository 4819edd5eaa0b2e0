"""The remote backend: drive an existing vLLM server through its OpenAI-compatible API.

The embedded AsyncLLM serves one machine; the engine that scales (tensor and pipeline parallel,
several nodes) is a vLLM server, so the playground drives one instead of distributing itself.
This backend mirrors ``EmbeddedBackend`` over HTTP, and the differences are deliberate:

- The server renders and tokenizes the prompt (``/tokenize``, with the chat template when asked),
  and every completion request then sends those token ids, so each mode and each child sees
  exactly the same prompt tokens.
- A streamed completion is always DELTA on the server (``stream=True`` sets it). CUMULATIVE and
  FINAL_ONLY are rebuilt on the client from that stream (``views``), and the run says so
  (``output_kind_source``).
- Token ids come from vLLM's ``return_token_ids``; each chunk's text is the piece of its token,
  so the recorder never has to decode over HTTP. Times are the chunks' arrival on the client.
- Closing the stream closes every HTTP response, which makes the server abort those requests.
- Nothing blocks an event loop: discovery (``connect``), rendering, health and the streams are
  awaited, and ``info()`` answers from what is known (``health`` says how ``up`` is kept).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai

from playground.backends.base import Prepared
from playground.backends.recorder import Observation
from playground.backends.remote import convert
from playground.backends.remote.convert import ClientViews, TokenTexts, Usage
from playground.backends.remote.server import HealthWatch, ServedModel, Server, discover, metric_total
from playground.errors import RemoteError
from playground.request import DEFAULT_MAX_N, VLLM_MAX_LOGPROBS, Limits

OUTPUT_KIND_SOURCE = "client-side (server streams DELTA)"
# The OpenAI API has no abort by id: closing a stream is what makes the server abort its request.
ABORT_SOURCE = ("client-side: the server's streams are closed, which aborts its requests; the last output "
                "(each sample's tokens so far, finish_reason abort) is built on the client")
DEFAULT_MAX_LOGPROBS = VLLM_MAX_LOGPROBS  # the server does not report its own
# Seconds a run's streams may be silent before the server's /health is asked whether it is still
# there: a server shutting down (SIGTERM) keeps open streams open and silent until --request-timeout.
QUIET_FOR = 3.0


class RemoteBackend:
    """The Backend protocol over a vLLM server's HTTP API (see the module docstring).
    Made by ``await RemoteBackend.connect(base_url, ...)``, which asks the server what it serves."""

    def __init__(self, server: Server, served: ServedModel, max_n: int = DEFAULT_MAX_N,
                 max_logprobs: int = DEFAULT_MAX_LOGPROBS):
        self.server = server
        self.model = served.name
        self.max_n = max_n
        self.max_logprobs = max_logprobs
        self.health = HealthWatch(server)
        self.token_texts = TokenTexts()
        self._open_streams = 0
        self._inboxes: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}  # runs in flight, by id
        self.limits = Limits(max_n=max_n, max_model_len=served.max_model_len, max_logprobs=max_logprobs)
        self._info = {
            "backend": "openai",
            "base_url": server.base_url,
            "model": served.root,
            "served_model_name": served.name,
            "vllm_version": served.vllm_version,
            "device": "remote",
            "max_model_len": served.max_model_len,
            "max_logprobs": max_logprobs,
            "max_logprobs_source": (
                "assumed: vLLM's default --max-logprobs (the server does not report its limit)"
                if max_logprobs == DEFAULT_MAX_LOGPROBS else "given to the playground"
            ),
            "has_chat_template": served.has_chat_template,
            "output_kind_source": OUTPUT_KIND_SOURCE,
            "timing_source": "client-side (chunk arrival)",
            "num_unfinished_source": "server /metrics: vllm:num_requests_running + waiting, all clients",
            "server_request_ids": "wrapper and same-seed: cmpl-{i}_{request_id}-0; native: cmpl-{request_id}-0",
            "abort_source": ABORT_SOURCE,
        }

    @classmethod
    async def connect(cls, base_url: str, api_key: str | None = None, max_n: int = DEFAULT_MAX_N,
                      request_timeout: float = 60.0, model: str | None = None,
                      max_logprobs: int = DEFAULT_MAX_LOGPROBS) -> RemoteBackend:
        """Ask the server what it serves; fail now, with a clear message, if it cannot be used."""
        server = Server(base_url, api_key, request_timeout)
        async with server.client() as http:
            served = await discover(server, http, model)
        return cls(server, served, max_n=max_n, max_logprobs=max_logprobs)

    def __enter__(self) -> RemoteBackend:
        return self

    def __exit__(self, *exc) -> None:
        """Nothing to shut down: each operation opens its own HTTP client and closes it."""

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def api_key(self) -> str | None:
        return self.server.api_key

    @property
    def request_timeout(self) -> float:
        return self.server.request_timeout

    # -- description and health -----------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """What is known, without asking the server: ``up`` is the last health check's finding."""
        return {**self._info, "up": self.health.up, "problem": self.health.last.problem}

    async def status(self) -> dict[str, Any]:
        """``info()`` after a health check (short timeout: a silent server shows as down soon)."""
        async with self.server.client() as http:
            await self.health.check(http)
        return self.info()

    # -- prompt and tokens ----------------------------------------------------------------------

    async def render(self, prompt: str, use_chat_template: bool) -> tuple[str, list[int]]:
        """The exact string the model sees, and its token ids, both from the server's tokenizer.

        With the chat template the server renders the messages and tokenizes them without extra
        special tokens (as the embedded backend does); the string is those ids decoded back.
        A server that does not answer its health check meanwhile gets the request refused.
        """
        async with self.server.client() as http:
            return await self.health.guard(http, lambda: self._render(http, prompt, use_chat_template))

    async def _render(self, http: httpx.AsyncClient, prompt: str, use_chat_template: bool) -> tuple[str, list[int]]:
        if use_chat_template:
            body = {"model": self.model, "messages": [{"role": "user", "content": prompt}],
                    "add_generation_prompt": True}
            token_ids = (await self.server.post(http, "/tokenize", body, "rendering the chat template"))["tokens"]
            return await self._detokenize(http, token_ids), token_ids
        body = {"model": self.model, "prompt": prompt, "add_special_tokens": True}
        return prompt, (await self.server.post(http, "/tokenize", body, "tokenizing the prompt"))["tokens"]

    async def detokenize(self, token_ids: list[int]) -> str:
        """The ids as one string, special tokens kept (as the embedded backend decodes)."""
        async with self.server.client() as http:
            return await self._detokenize(http, token_ids)

    async def _detokenize(self, http: httpx.AsyncClient, token_ids: list[int]) -> str:
        body = {"model": self.model, "tokens": list(token_ids)}
        return (await self.server.post(http, "/detokenize", body, "decoding tokens"))["prompt"]

    def decode(self, token_ids: list[int]) -> str:
        """The Backend protocol's synchronous decode, for code that runs off any event loop.
        A remote run never needs it (every observation carries its token texts); on an event
        loop it would block it, so there it is refused: await ``detokenize`` instead."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.detokenize(token_ids))
        raise RuntimeError("RemoteBackend.decode would block the event loop on HTTP; await detokenize()")

    # -- streaming ------------------------------------------------------------------------------

    async def stream(self, prepared: Prepared) -> AsyncIterator[Observation]:
        """Open the completion streams of one parent request and yield its observations.

        wrapper and same-seed: one stream per child of ``prepared.children`` (n=1, the child's id
        and seed); native: one stream with ``n``. Whatever ends this generator (the end, an error,
        close, cancel) every HTTP stream is closed before it returns.
        """
        self.health.refuse_if_down()
        request = prepared.request
        views = ClientViews(request.n, request.output_kind, logprobs=request.logprobs is not None)
        inbox: asyncio.Queue = asyncio.Queue()
        self._inboxes[prepared.request_id] = (asyncio.get_running_loop(), inbox)
        async with self.server.client() as http:
            api = self.server.openai(http)
            pumps = [asyncio.ensure_future(self._pump(api, slot, body, inbox))
                     for slot, body in convert.completion_requests(prepared, self.model)]
            open_streams = len(pumps)
            usage = Usage(requests=len(pumps))
            try:
                while open_streams:
                    try:  # a timer only when there is nothing to read: chunks come thousands a second on a GPU
                        kind, slot, t, item = (inbox.get_nowait() if not inbox.empty() else
                                               await asyncio.wait_for(inbox.get(), QUIET_FOR))
                    except TimeoutError:  # nothing for a while: a server shutting down keeps its streams open
                        health = await self.health.check(http)
                        if not health.up:
                            raise RemoteError(f"{health.problem.rstrip('.')}, while streaming: the server stopped "
                                              "answering, and the run ends with what its samples had") from None
                        continue
                    if kind == "end":
                        open_streams -= 1
                    elif kind == "error":
                        raise item
                    elif kind == "abort":
                        for observation in views.abort(t):
                            yield observation
                        return  # the finally closes every stream: the server aborts them
                    else:
                        usage.add(item.usage)
                        for choice in item.choices:
                            index = choice.index if slot is None else slot
                            observation = await self._observe(http, views, t, index, choice, request.logprobs)
                            if observation is not None:
                                yield observation
                if not views.finished:
                    missing = [i for i, reason in enumerate(views.finish) if reason is None]
                    raise RemoteError(f"{self.server.where} ended the stream before sample(s) "
                                      f"{', '.join(map(str, missing))} finished")
                yield Observation(usage=usage.as_dict())
            finally:
                self._inboxes.pop(prepared.request_id, None)
                for pump in pumps:
                    pump.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)  # their HTTP responses are closed

    async def abort(self, request_id: str) -> None:
        """End a run in flight (see ``ABORT_SOURCE``): its stream yields each unfinished sample's
        tokens so far with finish_reason "abort", then closes the server's streams. Unknown or
        finished ids are ignored. Safe from any event loop."""
        if (found := self._inboxes.get(request_id)) is not None:
            loop, inbox = found
            loop.call_soon_threadsafe(inbox.put_nowait, ("abort", None, time.monotonic(), None))

    async def _pump(self, api: openai.AsyncOpenAI, slot: int | None, body: dict, inbox: asyncio.Queue):
        """Read one HTTP stream into the inbox, stamping each chunk's arrival."""
        what = "streaming the samples" if slot is None else f"streaming sample {slot}"
        self._open_streams += 1
        try:
            stream = await api.completions.create(**body)
            async with stream:  # closing the response is what makes the server abort
                async for chunk in stream:
                    inbox.put_nowait(("chunk", slot, time.monotonic(), chunk))
            inbox.put_nowait(("end", slot, None, None))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # every failure reaches the consumer as a RemoteError
            inbox.put_nowait(("error", slot, None, self.server.error(e, what)))
        finally:
            self._open_streams -= 1

    async def _observe(self, http: httpx.AsyncClient, views: ClientViews, t: float, index: int, choice,
                       logprobs_k: int | None) -> Observation | None:
        where = self.server.where
        token_ids = convert.choice_token_ids(choice, where)
        positions = convert.positions(choice.logprobs, token_ids, where) if logprobs_k is not None else None
        texts = await self.token_texts.texts(convert.ids_needing_text(token_ids, positions),
                                             lambda token_id: self._detokenize(http, [token_id]))
        logprobs = convert.token_logprobs(positions, logprobs_k, texts) if positions is not None else None
        return views.add(
            t, index, choice.text, token_ids, convert.pieces(choice.text, token_ids, texts), logprobs,
            choice.finish_reason, getattr(choice, "stop_reason", None),
        )

    # -- counting -------------------------------------------------------------------------------

    async def metrics(self) -> str:
        """The server's Prometheus metrics, as text."""
        async with self.server.client() as http:
            return (await self.server.send(http.get("/metrics"), "reading its metrics")).text

    async def num_unfinished(self) -> int:
        """Requests running or waiting on the server, from its /metrics (every client's, as the
        embedded engine counts every tab's). A server without those gauges: this client's open
        streams instead."""
        text = await self.metrics()
        running = metric_total(text, "vllm:num_requests_running")
        waiting = metric_total(text, "vllm:num_requests_waiting")
        if running is None and waiting is None:
            return self._open_streams
        return int((running or 0) + (waiting or 0))
