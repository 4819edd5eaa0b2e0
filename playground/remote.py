"""The remote backend: drive an existing vLLM server through its OpenAI-compatible API.

The embedded AsyncLLM serves one machine; the engine that scales (tensor and pipeline parallel,
several nodes) is a vLLM server, so the playground drives one instead of distributing itself.
This backend mirrors ``EmbeddedBackend`` over HTTP, and the differences are deliberate:

- The server renders and tokenizes the prompt (``/tokenize``, with the chat template when asked),
  and every completion request then sends those token ids, so each mode and each child sees
  exactly the same prompt tokens.
- A streamed completion is always DELTA on the server (``stream=True`` sets it). CUMULATIVE and
  FINAL_ONLY are rebuilt here from that stream, and the run says so (``output_kind_source``).
- Token ids come from vLLM's ``return_token_ids``; each chunk's text is the piece of its token,
  so the recorder never has to decode over HTTP. Times are the chunks' arrival on the client.
- Closing the stream closes every HTTP response, which makes the server abort those requests.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai

from playground import fanout
from playground.backend import Prepared
from playground.errors import RemoteError
from playground.request import Limits
from playground.run import Event, EventOutput, Observation, TokenLogprob

OUTPUT_KIND_SOURCE = "client-side (server streams DELTA)"
DEFAULT_MAX_LOGPROBS = 20  # vLLM's default --max-logprobs; the server does not report its own
API_KEY_ENV = ("VLLM_API_KEY", "OPENAI_API_KEY")
HEALTH_TIMEOUT = 3.0  # the status line must not wait long for a server that is gone
DECODE_CONCURRENCY = 8


def split_base_url(url: str) -> tuple[str, str]:
    """``(api_base, server_root)``: the OpenAI API lives under /v1, vLLM's own endpoints
    (/tokenize, /health, /metrics, /version) at the root. Either form may be given."""
    url = url.strip().rstrip("/")
    if not re.match(r"^https?://", url):
        raise RemoteError(f"--base-url must start with http:// or https://, got {url!r}")
    if url.endswith("/v1"):
        return url, url[: -len("/v1")]
    return url + "/v1", url


def metric_total(text: str, name: str, **labels: str) -> float | None:
    """Sum a Prometheus metric over its series (one per engine), optionally filtered by labels."""
    total, seen = 0.0, False
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        match = re.match(rf"^{re.escape(name)}(?:\{{(.*)\}})?\s+(\S+)$", line)
        if not match:
            continue
        series = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(1) or ""))
        if all(series.get(k) == v for k, v in labels.items()):
            total += float(match.group(2))
            seen = True
    return total if seen else None


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
        views = _Views(request.n, request.output_kind)
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
        usage = _Usage(requests=len(pumps))
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
        return [
            (i, self._body(prepared, 1, seed, fanout.child_request_id(i, prepared.request_id)))
            for i, seed in enumerate(prepared.seeds)
        ]

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

    async def _observe(self, http, views: _Views, t: float, index: int, choice, logprobs_k: int | None):
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
            entries = sorted(((_token_id(key), value) for key, value in (top or {}).items()), key=lambda e: -e[1])
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
            raise RemoteError(self._status_message(response.status_code, _server_message(response), what))

    def _status_message(self, status: int, message: str, what: str) -> str:
        hint = " (check --api-key)" if status in (401, 403) else ""
        return f"the vLLM server at {self.base_url} answered HTTP {status} while {what}{hint}: {message}"

    def _remote_error(self, error: Exception, what: str) -> RemoteError:
        """A message a person understands: which server, what we were doing, what happened."""
        where = f"the vLLM server at {self.base_url}"
        if isinstance(error, RemoteError):
            return error
        if isinstance(error, openai.APIStatusError):
            return RemoteError(self._status_message(error.status_code, _openai_message(error), what))
        if isinstance(error, (openai.APITimeoutError, httpx.TimeoutException)):
            return RemoteError(
                f"{where} did not answer within {self.request_timeout:g} s while {what} (--request-timeout)"
            )
        if _refused(error):
            return RemoteError(
                f"cannot connect to {where} while {what}: connection refused. Is `vllm serve` running there?"
            )
        if isinstance(error, (openai.APIConnectionError, httpx.TransportError)):
            return RemoteError(f"lost the connection to {where} while {what} (has it stopped?): {_cause(error)}")
        if isinstance(error, openai.APIError):
            return RemoteError(f"{where} reported an error while {what}: {error.message}")
        return RemoteError(f"unexpected error from {where} while {what}: {type(error).__name__}: {error}")


class _Views:
    """Rebuilds the run's events from the server's DELTA chunks, for the asked output_kind.

    The rules are vLLM's (see the output_kind contract): DELTA passes each chunk on; CUMULATIVE
    carries the index's whole text and tokens so far; FINAL_ONLY yields one event, after the last
    sample finishes, with all n in index order. ``finished`` is true on the last event only, and
    a finished sample is never returned again.
    """

    def __init__(self, n: int, output_kind: str):
        self.n = n
        self.kind = output_kind
        self.text = [""] * n
        self.ids: list[list[int]] = [[] for _ in range(n)]
        self.pieces: list[list[str]] = [[] for _ in range(n)]
        self.logprobs: list[list[TokenLogprob]] = [[] for _ in range(n)]
        self.finish: list[str | None] = [None] * n
        self.stop: list[str | int | None] = [None] * n

    @property
    def finished(self) -> bool:
        return all(reason is not None for reason in self.finish)

    def add(self, t, index, text, token_ids, pieces, logprobs, finish_reason, stop_reason) -> Observation | None:
        if not 0 <= index < self.n or self.finish[index] is not None:
            return None
        self.text[index] += text
        self.ids[index].extend(token_ids)
        self.pieces[index].extend(pieces)
        if logprobs is not None:
            self.logprobs[index].extend(logprobs)
        self.finish[index], self.stop[index] = finish_reason, stop_reason
        if self.kind == "FINAL_ONLY":
            if not self.finished:
                return None
            indices = list(range(self.n))
            event = Event(t=t, finished=True, outputs=[self._full(i) for i in indices])
            texts = {i: list(self.pieces[i]) for i in indices}
        elif self.kind == "CUMULATIVE":
            indices = [index]
            event = Event(t=t, finished=self.finished, outputs=[self._full(index)])
            texts = {index: list(pieces)}
        else:
            indices = [index]
            out = EventOutput(index, text, list(token_ids), finish_reason, stop_reason)
            event = Event(t=t, finished=self.finished, outputs=[out])
            texts = {index: list(pieces)}
        observation = Observation(event=event, token_texts=texts)
        if logprobs is not None:
            for i in indices:
                observation.logprobs[i] = list(logprobs) if self.kind == "DELTA" else list(self.logprobs[i])
        return observation

    def _full(self, i: int) -> EventOutput:
        return EventOutput(i, self.text[i], list(self.ids[i]), self.finish[i], self.stop[i])


@dataclass
class _Usage:
    """The server's token counts, summed over the run's HTTP streams. A wrapper run is n
    requests, so the server counts its prompt n times; a native run counts it once."""

    requests: int
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, usage) -> None:
        if usage is None:
            return
        for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
            self.counts[name] = self.counts.get(name, 0) + (getattr(usage, name, 0) or 0)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) if details is not None else None
        if cached is not None:
            self.counts["cached_tokens"] = self.counts.get("cached_tokens", 0) + cached

    def as_dict(self) -> dict[str, Any]:
        return {**self.counts, "requests": self.requests, "source": "server"}


def _token_id(key: str) -> int:
    """``token_id:123`` (return_tokens_as_token_ids) -> 123."""
    try:
        return int(key.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        raise RemoteError(f"the server returned a logprob key {key!r}, not token_id:N") from None


def _server_message(response: httpx.Response) -> str:
    """vLLM answers errors as {"error": {"message": ...}}; anything else is shown as sent."""
    try:
        data = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str) and error:  # vLLM's --api-key check answers {"error": "Unauthorized"}
        return error
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])
    return str(data)[:500]


def _openai_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    if isinstance(body, str) and body:
        return body
    return error.message


def _refused(error: BaseException) -> bool:
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ConnectionRefusedError) or "connection refused" in str(error).lower():
            return True
        if type(error).__name__ == "ConnectError" and "refused" in repr(error).lower():
            return True
        error = error.__cause__ or error.__context__
    return False


def _cause(error: BaseException) -> str:
    """The innermost cause's message: 'peer closed connection...' says more than 'Connection error.'"""
    while (error.__cause__ or error.__context__) is not None:
        error = error.__cause__ or error.__context__
    return str(error) or type(error).__name__


# -- command line ---------------------------------------------------------------------------------

def add_remote_flags(group) -> None:
    """The flags that choose and reach a remote vLLM server (``--backend openai``)."""
    group.add_argument("--backend", choices=("embedded", "openai"), default="embedded",
                       help="embedded: run vLLM in this process (default). openai: drive an existing "
                            "vLLM server (vllm serve) through its OpenAI-compatible API.")
    group.add_argument("--base-url", default=None,
                       help="The server's API address with --backend openai, e.g. http://HOST:8000/v1.")
    group.add_argument("--api-key", default=None,
                       help=f"The server's API key (vllm serve --api-key); default: ${API_KEY_ENV[0]}, "
                            f"else ${API_KEY_ENV[1]}.")
    group.add_argument("--request-timeout", type=_positive_seconds, default=60.0,
                       help="Seconds to wait for the server to connect, answer, or send the next "
                            "chunk of a stream (default 60).")


def create_remote_backend(args, max_n: int) -> RemoteBackend:
    """The RemoteBackend the parsed flags ask for; RemoteError if the server cannot be used."""
    if not args.base_url:
        raise RemoteError("--backend openai needs --base-url, the server's address, e.g. http://HOST:8000/v1")
    api_key = args.api_key or next((os.environ[n] for n in API_KEY_ENV if os.environ.get(n)), None)
    return RemoteBackend(args.base_url, api_key=api_key, max_n=max_n, request_timeout=args.request_timeout,
                         model=getattr(args, "model", None))


def _positive_seconds(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--request-timeout must be a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"--request-timeout must be more than 0 seconds, got {text!r}")
    return value
