"""The vLLM server's addresses, an async HTTP client per operation, and its errors in sentences.

vLLM serves the OpenAI API under /v1 but its own endpoints (/tokenize, /detokenize, /health,
/metrics, /version) at the server root, so one --base-url is split into both. Every failure,
HTTP or OpenAI, becomes a sentence a person understands: which server, what we were doing, the
server's own message (not a traceback), and the innermost cause rather than "Connection error.".

An ``httpx.AsyncClient`` belongs to the event loop it first ran on, and the backend is called
from several (Gradio's, a test's ``asyncio.run``, the QA matrix's), so no client outlives one
operation: each render, health check or run opens its own (``Server.client``) and closes it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable
from typing import Any

import httpx
import openai

from playground.errors import SPLIT_PREFILL_CRASH, SPLIT_PREFILL_FIX, RemoteError


class Server:
    """How to reach one vLLM server, and how to say what went wrong there."""

    def __init__(self, base_url: str, api_key: str | None = None, request_timeout: float = 60.0):
        self.base_url, self.root = split_base_url(base_url)
        self.api_key = api_key
        self.request_timeout = request_timeout
        self.where = f"the vLLM server at {self.base_url}"

    def timeout(self, total: float | None = None) -> httpx.Timeout:
        total = self.request_timeout if total is None else total
        return httpx.Timeout(total, connect=min(10.0, total))

    def client(self) -> httpx.AsyncClient:
        """A client for one operation, to be closed by its caller (``async with``)."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.AsyncClient(base_url=self.root, headers=headers, timeout=self.timeout())

    def openai(self, http: httpx.AsyncClient) -> openai.AsyncOpenAI:
        """The OpenAI client over ``http``'s connections (closing ``http`` closes it)."""
        return openai.AsyncOpenAI(base_url=self.base_url, api_key=self.api_key or "EMPTY", max_retries=0,
                                  timeout=self.timeout(), http_client=http)

    async def get(self, http: httpx.AsyncClient, path: str, what: str) -> Any:
        return (await self.send(http.get(path), what)).json()

    async def post(self, http: httpx.AsyncClient, path: str, body: dict[str, Any], what: str) -> Any:
        return (await self.send(http.post(path, json=body), what)).json()

    async def send(self, sending: Awaitable[httpx.Response], what: str) -> httpx.Response:
        """The answer to ``sending`` (a request not yet awaited); a transport failure or an HTTP
        error status becomes a RemoteError that says what we were doing. Callers read the body
        as JSON or, for /metrics, as text."""
        try:
            response = await sending
        except httpx.HTTPError as e:
            raise self.error(e, what) from e
        self.check(response, what)
        return response

    def check(self, response: httpx.Response, what: str) -> None:
        if response.status_code >= 400:
            raise RemoteError(self.status_message(response.status_code, server_message(response), what))

    def status_message(self, status: int, message: str, what: str) -> str:
        hint = " (check --api-key)" if status in (401, 403) else ""
        return f"{self.where} answered HTTP {status} while {what}{hint}: {message}{engine_death_hint(message)}"

    def error(self, error: Exception, what: str) -> RemoteError:
        """A message a person understands: which server, what we were doing, what happened."""
        where = self.where
        if isinstance(error, RemoteError):
            return error
        if isinstance(error, openai.APIStatusError):
            return RemoteError(self.status_message(error.status_code, openai_message(error), what))
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
            return RemoteError(f"{where} reported an error while {what}: {error.message}"
                               f"{engine_death_hint(str(error.message))}")
        return RemoteError(f"unexpected error from {where} while {what}: {type(error).__name__}: {error}")


def engine_death_hint(message: str) -> str:
    """What a server's engine death may have come from, when its message tells: a seeded run's
    prompt prefilled in part on a CPU server (the server's log has the root cause)."""
    if "CPU Generator does not use offset" in message:
        return f". {SPLIT_PREFILL_CRASH}: start the server with {SPLIT_PREFILL_FIX}"
    if "EngineCore encountered an issue" in message or "EngineDeadError" in message:
        return (f". Its engine core died. If the server runs vLLM on a CPU: {SPLIT_PREFILL_CRASH}; start it with "
                f"{SPLIT_PREFILL_FIX}")
    return ""


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


def server_message(response: httpx.Response) -> str:
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


def openai_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    if isinstance(body, str) and body:
        return body
    return error.message


def connection_refused(error: BaseException) -> bool:
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ConnectionRefusedError) or "connection refused" in str(error).lower():
            return True
        if type(error).__name__ == "ConnectError" and "refused" in repr(error).lower():
            return True
        error = error.__cause__ or error.__context__
    return False


def innermost_cause(error: BaseException) -> str:
    """The innermost cause's message: 'peer closed connection...' says more than 'Connection error.'"""
    while (error.__cause__ or error.__context__) is not None:
        error = error.__cause__ or error.__context__
    return str(error) or type(error).__name__
