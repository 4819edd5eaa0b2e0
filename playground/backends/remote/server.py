"""One vLLM server: its addresses, an async HTTP client per operation, its errors in sentences,
what it serves, and whether it answers.

vLLM serves the OpenAI API under /v1 but its own endpoints (/tokenize, /detokenize, /health,
/metrics, /version) at the server root, so one --base-url is split into both. Every failure,
HTTP or OpenAI, becomes a sentence a person understands: which server, what we were doing, the
server's own message (not a traceback), and the innermost cause rather than "Connection error.".

An ``httpx.AsyncClient`` belongs to the event loop it first ran on, and the backend is called
from several (Gradio's, a test's ``asyncio.run``, the QA matrix's), so no client outlives one
operation: each render, health check or run opens its own (``Server.client``) and closes it.

What a server serves is asked once, when the backend connects (``discover``): the backend answers
``info()`` from it without asking again, so the page never waits on the network to describe the
engine, and a server that cannot be used at all (nothing there, a wrong key, no such model) fails
the connection with a sentence.

Whether it answers (``HealthWatch``): a server can accept connections and then answer nothing
(stuck, or swamped). Every request to it would then wait for --request-timeout (60 s by default)
before failing, one person's run after another's. So /health is asked with a short timeout (vLLM
answers it from its API process, at once when the server is well); a request made before a run
starts (rendering the prompt) is sent together with a health check and abandoned, with a sentence
naming the server, when that check fails or any caller's check has gone unanswered for
``HEALTH_TIMEOUT``; and while the last check's failure is recent (``BELIEVED_FOR``), requests are
refused at once. ``up`` is only ever what a health check found (or discovery), so a server whose
API answers but whose engine died (/health answers 503) shows as down.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import openai

from playground.errors import NOT_RUN, SPLIT_PREFILL_CRASH, SPLIT_PREFILL_FIX, RemoteError
from playground.request import Limits


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


# --- what it serves -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ServedModel:
    """The model a backend drives on a server."""

    name: str  # the served model name: what requests put in "model"
    root: str  # the weights it was loaded from (Hugging Face id or folder)
    max_model_len: int
    vllm_version: str
    has_chat_template: bool  # the server can render a chat for it


async def discover(server: Server, http: httpx.AsyncClient, requested: str | None = None) -> ServedModel:
    """Ask the server what it serves, and pick ``requested`` (default: its base model)."""
    try:
        models = (await server.get(http, "/v1/models", "listing its models"))["data"]
    except RemoteError as e:
        if path := urlsplit(server.root).path.strip("/"):  # .../v2, .../v1/completions: a mistyped address
            raise RemoteError(f"{str(e).rstrip('.')}. --base-url is the server's address, with or without /v1 "
                              f"(http://HOST:8000/v1); the rest of an address, here /{path}, is read as the "
                              "prefix of a proxy in front of the server") from None
        raise
    if not models:
        raise RemoteError(f"{server.where} serves no model")
    names = [m["id"] for m in models]
    if requested is None:
        card = models[0]  # the base model comes first; LoRA adapters follow it
    elif requested in names:
        card = models[names.index(requested)]
    else:
        raise RemoteError(f"{server.where} does not serve {requested!r}; it serves: {', '.join(names)}")
    version = (await server.get(http, "/version", "reading its version")).get("version", "unknown")
    return ServedModel(
        name=card["id"],
        root=card.get("root") or card["id"],
        max_model_len=card.get("max_model_len") or Limits().max_model_len,
        vllm_version=version,
        has_chat_template=await can_render_a_chat(server, http, card["id"]),
    )


async def can_render_a_chat(server: Server, http: httpx.AsyncClient, model: str) -> bool:
    """Whether the server renders a chat for ``model``: a /tokenize of one message succeeds.
    vLLM refuses it (HTTP 400) when the model has no chat template and none was given to it."""
    body = {"model": model, "messages": [{"role": "user", "content": "Hello"}], "add_generation_prompt": True}
    try:
        response = await http.post("/tokenize", json=body)
    except httpx.HTTPError as e:
        raise server.error(e, "checking whether it renders a chat template") from e
    if response.status_code in (401, 403):
        server.check(response, "checking whether it renders a chat template")
    return response.status_code == 200


# --- whether it answers ------------------------------------------------------------------------

HEALTH_TIMEOUT = 1.0  # seconds; a well server answers /health in milliseconds
BELIEVED_FOR = 5.0  # seconds a failed check refuses requests at once, before the next one checks again

T = TypeVar("T")


@dataclass(frozen=True)
class Health:
    """One health check's finding: up or not, when (time.monotonic()), and why not."""

    up: bool
    at: float
    problem: str | None = None  # a sentence naming the server, when it is not up


class HealthWatch:
    """The server's last known health, shared by every caller whatever its event loop: plain
    data, replaced whole by each check."""

    def __init__(self, server: Server):
        self.server = server
        self.last = Health(True, time.monotonic())  # discovery has just been answered
        self._unanswered: list[float] = []  # when each check still waiting for its answer was sent

    @property
    def up(self) -> bool:
        return self.last.up

    async def check(self, http: httpx.AsyncClient) -> Health:
        """Ask /health now, with the short timeout, and remember the answer."""
        what = "checking its health"
        sent = time.monotonic()
        self._unanswered.append(sent)
        try:
            response = await http.get("/health", timeout=self.server.timeout(HEALTH_TIMEOUT))
        except httpx.TimeoutException:
            return self._silent()
        except httpx.HTTPError as e:
            problem = str(self.server.error(e, what))
        else:
            ok = response.status_code == 200
            problem = None if ok else self.server.status_message(response.status_code, server_message(response), what)
        finally:
            self._unanswered.remove(sent)
        self.last = Health(problem is None, time.monotonic(), problem)
        return self.last

    def _silent(self) -> Health:
        problem = (f"{self.server.where} did not answer its health check within {HEALTH_TIMEOUT:g} s: "
                   "it is stuck or overloaded")
        self.last = Health(False, time.monotonic(), problem)
        return self.last

    def refuse_if_down(self) -> None:
        """Refuse at once, naming the server, while a failed check is recent enough to believe."""
        last = self.last
        if not last.up and time.monotonic() - last.at < BELIEVED_FOR:
            raise self.refusal(last)

    @staticmethod
    def refusal(health: Health) -> RemoteError:
        problem = health.problem or ""
        return RemoteError(f"{problem}{'' if problem.endswith(('.', '?')) else '.'}{NOT_RUN}")

    async def guard(self, http: httpx.AsyncClient, work: Callable[[], Awaitable[T]]) -> T:
        """``work()``'s result, unless the server is down, or first the health check sent beside
        it fails or a check (this one, or one sent earlier by any caller) goes unanswered for
        ``HEALTH_TIMEOUT``: then a RemoteError at once, rather than after --request-timeout.

        When ``work`` fails, its own error is raised, once the check has finished (it is short),
        so ``up`` says whether the server is still there.
        """
        self.refuse_if_down()
        sent = time.monotonic()
        job = asyncio.ensure_future(work())
        check = asyncio.ensure_future(self.check(http))
        try:
            while not (job.done() or check.done()):
                overdue_at = min([sent, *self._unanswered]) + HEALTH_TIMEOUT  # anyone's check, or ours
                if time.monotonic() >= overdue_at:
                    raise self.refusal(self._silent())
                await asyncio.wait({job, check}, timeout=overdue_at - time.monotonic(),
                                   return_when=asyncio.FIRST_COMPLETED)
            if check.done() and not check.result().up:
                raise self.refusal(check.result())
            if job.done() and job.exception() is not None:
                await asyncio.wait({check})
            return await job
        finally:
            for task in (job, check):
                task.cancel()
            await asyncio.gather(job, check, return_exceptions=True)
