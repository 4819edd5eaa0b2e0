"""The remote backend: drive an existing vLLM server through its OpenAI-compatible API.

The embedded AsyncLLM serves one machine; the engine that scales (tensor and pipeline parallel,
several nodes) is a vLLM server, so the playground drives one instead of distributing itself.
This backend mirrors ``EmbeddedBackend`` over HTTP, and the differences are deliberate:

- The server renders and tokenizes the prompt (``/tokenize``, with the chat template when asked),
  and every completion request then sends those token ids, so each mode and each child sees
  exactly the same prompt tokens.
- A streamed completion is always DELTA on the server (``stream=True`` sets it). CUMULATIVE and
  FINAL_ONLY are rebuilt on the client from that stream (``remote_views``), and the run says so
  (``output_kind_source``).
- Token ids come from vLLM's ``return_token_ids``; each chunk's text is the piece of its token,
  so the recorder never has to decode over HTTP. Times are the chunks' arrival on the client.
- Closing the stream closes every HTTP response, which makes the server abort those requests.
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
from playground.backends.remote.client import (
    connection_refused,
    innermost_cause,
    metric_total,
    openai_message,
    parse_token_id,
    server_message,
    split_base_url,
)
from playground.backends.remote.views import ClientViews, Usage
from playground.errors import RemoteError
from playground.run import TokenLogprob
from playground.sampling.request import Limits

OUTPUT_KIND_SOURCE = "client-side (server streams DELTA)"
DEFAULT_MAX_LOGPROBS = 20  # vLLM's default --max-logprobs; the server does not report its own
HEALTH_TIMEOUT = 3.0  # the status line must not wait long for a server that is gone
DECODE_CONCURRENCY = 8


class RemoteBackend:
    """The Backend protocol over a vLLM server's HTTP API (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        max_n: int = 32,
        request_timeout: float = 60.0,
        model: str | None = None,
        max_logprobs: int = DEFAULT_MAX_LOGPROBS,
    ):
        self.base_url, self.root = split_base_url(base_url)
        self.api_key = api_key
        self.max_n = max_n
        self.request_timeout = request_timeout
        self.max_logprobs = max_logprobs
        self._requested_model = model
        self._http = httpx.Client(base_url=self.root, headers=self._headers(), timeout=self._timeout())
        self._token_text: dict[int, str] = {}  # id -> the token decoded alone (logprob texts)
        self._open_streams = 0
        self._describe()

    # -- discovery ----------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _timeout(self, total: float | None = None) -> httpx.Timeout:
        total = self.request_timeout if total is None else total
        return httpx.Timeout(total, connect=min(10.0, total))

    def _describe(self) -> None:
        """Ask the server what it serves; fail now, with a clear message, if it cannot answer."""
        models = self._get("/v1/models", "listing its models")["data"]
        if not models:
            raise RemoteError(f"the vLLM server at {self.base_url} serves no model")
        names = [m["id"] for m in models]
        if self._requested_model is None:
            card = models[0]  # the base model comes first; LoRA adapters follow it
        elif self._requested_model in names:
            card = models[names.index(self._requested_model)]
        else:
            raise RemoteError(
                f"the vLLM server at {self.base_url} does not serve {self._requested_model!r}; "
                f"it serves: {', '.join(names)}"
            )
        self.model = card["id"]
        self.model_root = card.get("root") or card["id"]
        max_model_len = card.get("max_model_len") or Limits().max_model_len
        version = self._get("/version", "reading its version").get("version", "unknown")
        self._info = {
            "backend": "openai",
            "base_url": self.base_url,
            "model": self.model_root,
            "served_model_name": self.model,
            "vllm_version": version,
            "device": "remote",
            "max_model_len": max_model_len,
            "max_logprobs": self.max_logprobs,
            "max_logprobs_source": (
                "assumed: vLLM's default --max-logprobs (the server does not report its limit)"
                if self.max_logprobs == DEFAULT_MAX_LOGPROBS else "given to the playground"
            ),
            "output_kind_source": OUTPUT_KIND_SOURCE,
            "timing_source": "client-side (chunk arrival)",
            "num_unfinished_source": "server /metrics: vllm:num_requests_running + waiting, all clients",
            "server_request_ids": "wrapper and same-seed: cmpl-{i}_{request_id}-0; native: cmpl-{request_id}-0",
        }
        self.limits = Limits(max_n=self.max_n, max_model_len=max_model_len, max_logprobs=self.max_logprobs)

    def info(self) -> dict[str, Any]:
        try:
            up = self._http.get("/health", timeout=self._timeout(HEALTH_TIMEOUT)).status_code == 200
        except httpx.HTTPError:
            up = False
        return {**self._info, "up": up}

    # -- prompt and tokens --------------------------------------------------------------------

    async def status(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.info)

    async def render(self, prompt: str, use_chat_template: bool) -> tuple[str, list[int]]:
        return await asyncio.to_thread(self.render_prompt, prompt, use_chat_template)

    def render_prompt(self, prompt: str, use_chat_template: bool) -> tuple[str, list[int]]:
        """The exact string the model sees, and its token ids, both from the server's tokenizer.

        With the chat template the server renders the messages and tokenizes them without extra
        special tokens (as the embedded backend does); the string is those ids decoded back.
        """
        if use_chat_template:
            body = {"model": self.model, "messages": [{"role": "user", "content": prompt}],
                    "add_generation_prompt": True}
            token_ids = self._post("/tokenize", body, "rendering the chat template")["tokens"]
            return self.decode(token_ids), token_ids
        body = {"model": self.model, "prompt": prompt, "add_special_tokens": True}
        return prompt, self._post("/tokenize", body, "tokenizing the prompt")["tokens"]

    def decode(self, token_ids: list[int]) -> str:
        """Special tokens kept, as the embedded backend decodes. One HTTP call: not for hot paths
        (streamed runs carry their token texts, so the recorder does not call this)."""
        body = {"model": self.model, "tokens": list(token_ids)}
        return self._post("/detokenize", body, "decoding tokens")["prompt"]

    # -- streaming ----------------------------------------------------------------------------

    async def stream(self, prepared: Prepared) -> AsyncIterator[Observation]:
        """Open the completion streams of one parent request and yield its observations.

        wrapper and same-seed: n concurrent streams with n=1, sample i's seed from
        ``prepared.seeds``; native: one stream with ``n``. Whatever ends this generator (the end,
        an error, close, cancel) every HTTP stream is closed before it returns.
        """
        request = prepared.request
        views = ClientViews(request.n, request.output_kind)
        inbox: asyncio.Queue = asyncio.Queue()
        client = openai.AsyncOpenAI(
            base_url=self.base_url, api_key=self.api_key or "EMPTY", max_retries=0,
            timeout=openai.Timeout(self.request_timeout, connect=min(10.0, self.request_timeout)),
        )
        http = httpx.AsyncClient(base_url=self.root, headers=self._headers(), timeout=self._timeout())
        pumps = [
            asyncio.ensure_future(self._pump(client, slot, body, inbox))
            for slot, body in self._requests(prepared)
        ]
        open_streams = len(pumps)
        usage = Usage(requests=len(pumps))
        try:
            while open_streams:
                kind, slot, t, item = await inbox.get()
                if kind == "end":
                    open_streams -= 1
                elif kind == "error":
                    raise item
                else:
                    usage.add(item.usage)
                    for choice in item.choices:
                        index = choice.index if slot is None else slot
                        observation = await self._observe(http, views, t, index, choice, request.logprobs)
                        if observation is not None:
                            yield observation
            if not views.finished:
                missing = [i for i, reason in enumerate(views.finish) if reason is None]
                raise RemoteError(
                    f"the vLLM server at {self.base_url} ended the stream before sample(s) "
                    f"{', '.join(map(str, missing))} finished"
                )
            yield Observation(usage=usage.as_dict())
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)  # their HTTP responses are closed
            await client.close()
            await http.aclose()

    def _requests(self, prepared: Prepared) -> list[tuple[int | None, dict[str, Any]]]:
        """(sample index or None for native, request body) for each HTTP stream."""
        request = prepared.request
        if request.mode == "native":
            return [(None, self._body(prepared, request.n, prepared.seeds[0], prepared.request_id))]
        return [(child.index, self._body(prepared, 1, child.seed, child.request_id)) for child in prepared.children]

    def _body(self, prepared: Prepared, n: int, seed: int | None, request_id: str) -> dict[str, Any]:
        """Every sampler setting is sent explicitly, so the server's defaults (a model's
        generation_config, say) cannot change what the request means."""
        r = prepared.request
        extra: dict[str, Any] = {
            "top_k": r.top_k, "min_p": r.min_p, "repetition_penalty": r.repetition_penalty,
            "ignore_eos": r.ignore_eos, "return_token_ids": True, "request_id": request_id,
        }
        body: dict[str, Any] = {
            "model": self.model, "prompt": prepared.prompt_token_ids, "n": n, "seed": seed,
            "max_tokens": r.max_tokens, "temperature": r.temperature, "top_p": r.top_p,
            "presence_penalty": r.presence_penalty, "frequency_penalty": r.frequency_penalty,
            "stream": True, "stream_options": {"include_usage": True}, "extra_body": extra,
        }
        if r.stop:
            body["stop"] = list(r.stop)
        if r.logprobs is not None:
            body["logprobs"] = r.logprobs
            extra["return_tokens_as_token_ids"] = True  # alternatives keyed by id: exact, no clashes
        return body

    async def _pump(self, client: openai.AsyncOpenAI, slot: int | None, body: dict, inbox: asyncio.Queue):
        """Read one HTTP stream into the inbox, stamping each chunk's arrival."""
        what = "streaming the samples" if slot is None else f"streaming sample {slot}"
        self._open_streams += 1
        try:
            stream = await client.completions.create(**body)
            async with stream:  # closing the response is what makes the server abort
                async for chunk in stream:
                    inbox.put_nowait(("chunk", slot, time.monotonic(), chunk))
            inbox.put_nowait(("end", slot, None, None))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # every failure reaches the consumer as a RemoteError
            inbox.put_nowait(("error", slot, None, self._remote_error(e, what)))
        finally:
            self._open_streams -= 1

    async def _observe(self, http, views: ClientViews, t: float, index: int, choice, logprobs_k: int | None):
        token_ids = getattr(choice, "token_ids", None)
        if token_ids is None:
            raise RemoteError(
                f"the server at {self.base_url} did not return token ids; the playground needs a "
                "vLLM server that supports return_token_ids"
            )
        pieces = await self._pieces(http, choice.text, token_ids)
        logprobs = None
        if logprobs_k is not None:
            logprobs = await self._logprobs(http, choice.logprobs, token_ids, logprobs_k)
        return views.add(
            t, index, choice.text, token_ids, pieces, logprobs,
            choice.finish_reason, getattr(choice, "stop_reason", None),
        )

    async def _pieces(self, http, text: str, token_ids: list[int]) -> list[str]:
        """One text piece per token. A chunk usually holds one token and its text is that
        token's piece as vLLM's detokenizer produced it. When the server merged several tokens
        into one chunk, the tokens decoded alone are used if they add up to the chunk's text;
        otherwise the whole text goes with the chunk's last token."""
        if len(token_ids) <= 1:
            return [text] * len(token_ids)
        texts = await self._texts(http, token_ids)
        pieces = [texts[t] for t in token_ids]
        return pieces if "".join(pieces) == text else [""] * (len(token_ids) - 1) + [text]

    async def _logprobs(self, http, logprobs, token_ids: list[int], k: int) -> list[TokenLogprob]:
        """The completions API's logprobs as TokenLogprobs.

        The API gives no ranks: a sampled token's rank is exact when it is among the top k, and
        None when it is not (its rank is then above k)."""
        if logprobs is None or len(logprobs.token_logprobs or []) != len(token_ids):
            raise RemoteError(f"the server at {self.base_url} did not return logprobs for every token")
        positions = []
        for token_id, chosen, top in zip(token_ids, logprobs.token_logprobs, logprobs.top_logprobs or []):
            entries = sorted(((parse_token_id(key), value) for key, value in (top or {}).items()), key=lambda e: -e[1])
            positions.append((token_id, chosen, entries))
        texts = await self._texts(http, [tid for p in positions for tid in [p[0], *(e[0] for e in p[2])]])
        result = []
        for token_id, chosen, entries in positions:
            ids = [tid for tid, _ in entries]
            rank = ids.index(token_id) + 1 if 0 < len(entries) <= k and token_id in ids else None
            result.append(TokenLogprob(
                token_id=token_id, logprob=chosen, rank=rank, text=texts[token_id],
                top=[(tid, value, texts[tid]) for tid, value in entries],
            ))
        return result

    async def _texts(self, http, token_ids: list[int]) -> dict[int, str]:
        """Each token decoded alone, as vLLM decodes logprob tokens; cached for the session
        (at most the vocabulary), so a run pays one small request per token it has not seen."""
        missing = {t for t in token_ids if t not in self._token_text}
        if missing:
            gate = asyncio.Semaphore(DECODE_CONCURRENCY)

            async def decode(token_id: int):
                async with gate:
                    body = {"model": self.model, "tokens": [token_id]}
                    answer = await self._apost(http, "/detokenize", body, "decoding tokens")
                    self._token_text[token_id] = answer["prompt"]

            await asyncio.gather(*(decode(t) for t in missing))
        return {t: self._token_text[t] for t in token_ids}

    def close(self) -> None:
        """Release the connection pool of the side endpoints (streams close with their runs)."""
        self._http.close()

    # -- counting -----------------------------------------------------------------------------

    async def metrics(self) -> str:
        """The server's Prometheus metrics, as text."""
        async with httpx.AsyncClient(base_url=self.root, headers=self._headers(), timeout=self._timeout()) as http:
            try:
                response = await http.get("/metrics")
            except httpx.HTTPError as e:
                raise self._remote_error(e, "reading its metrics") from e
            self._check(response, "reading its metrics")
            return response.text

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

    # -- HTTP and errors ----------------------------------------------------------------------

    def _get(self, path: str, what: str) -> dict[str, Any]:
        try:
            response = self._http.get(path)
        except httpx.HTTPError as e:
            raise self._remote_error(e, what) from e
        self._check(response, what)
        return response.json()

    def _post(self, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        try:
            response = self._http.post(path, json=body)
        except httpx.HTTPError as e:
            raise self._remote_error(e, what) from e
        self._check(response, what)
        return response.json()

    async def _apost(self, http: httpx.AsyncClient, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        try:
            response = await http.post(path, json=body)
        except httpx.HTTPError as e:
            raise self._remote_error(e, what) from e
        self._check(response, what)
        return response.json()

    def _check(self, response: httpx.Response, what: str) -> None:
        if response.status_code >= 400:
            raise RemoteError(self._status_message(response.status_code, server_message(response), what))

    def _status_message(self, status: int, message: str, what: str) -> str:
        hint = " (check --api-key)" if status in (401, 403) else ""
        return f"the vLLM server at {self.base_url} answered HTTP {status} while {what}{hint}: {message}"

    def _remote_error(self, error: Exception, what: str) -> RemoteError:
        """A message a person understands: which server, what we were doing, what happened."""
        where = f"the vLLM server at {self.base_url}"
        if isinstance(error, RemoteError):
            return error
        if isinstance(error, openai.APIStatusError):
            return RemoteError(self._status_message(error.status_code, openai_message(error), what))
        if isinstance(error, (openai.APITimeoutError, httpx.TimeoutException)):
            return RemoteError(
                f"{where} did not answer within {self.request_timeout:g} s while {what} (--request-timeout)"
            )
        if connection_refused(error):
            return RemoteError(
                f"cannot connect to {where} while {what}: connection refused. Is `vllm serve` running there?"
            )
        if isinstance(error, (openai.APIConnectionError, httpx.TransportError)):
            return RemoteError(
                f"lost the connection to {where} while {what} (has it stopped?): {innermost_cause(error)}"
            )
        if isinstance(error, openai.APIError):
            return RemoteError(f"{where} reported an error while {what}: {error.message}")
        return RemoteError(f"unexpected error from {where} while {what}: {type(error).__name__}: {error}")
