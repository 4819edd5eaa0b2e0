"""Whether the vLLM server answers, as its last health check found, and the guard that keeps a
server that has stopped answering from holding up the people who use the playground.

A server can accept connections and then answer nothing (stuck, or swamped). Every request to it
would then wait for --request-timeout (60 s by default) before failing, one person's run after
another's. So:

- /health is asked with a short timeout. vLLM answers it from its API process without asking
  the engine, at once when the server is well; one that cannot answer it within
  ``HEALTH_TIMEOUT`` is taken to be down.
- A request made before a run starts (rendering the prompt) is sent together with a health
  check, and is abandoned, with a sentence naming the server, when that check fails, or as soon
  as any caller's check has gone unanswered for ``HEALTH_TIMEOUT``: requests waiting on a server
  that has gone silent are all refused at that moment, not each after a timeout of its own.
- While the last check's failure is recent (``BELIEVED_FOR``), requests are refused at once,
  without waiting on the server again; after that the next request checks anew.

``up`` is only ever what a health check found (or discovery, which has just had answers), so a
server whose API answers but whose engine died (/health answers 503) shows as down.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import httpx

from playground.backends.remote.client import Server, server_message
from playground.errors import RemoteError

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
        end = " " if problem.endswith((".", "?")) else ". "
        return RemoteError(f"{problem}{end}The request was not run; try again once the server answers.")

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
