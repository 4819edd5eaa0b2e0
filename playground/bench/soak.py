"""A soak of the app: several clients call ``/sample`` at once for a bounded time, with the requests
people make (prompts of 5 to 1,500 tokens, with and without the chat template, n from 1 to the
app's ``--max-n``, every mode and output_kind), and some cancel their call mid-stream.

    python -m playground.bench --soak 600 [--soak-clients 3] [--max-n 256]

Traffic goes only to an app this process started on loopback, and it stops by itself. What it
reports, and the goals: runs finished and cancelled; engine deaths (0: the engine core never had to
be rebuilt); requests left unfinished in the engine once the clients stopped (0); every cancelled
run kept its partial text (the server aborted it by its parent id, and its last output holds at
least the tokens the client had seen, finish_reason "abort"); no call failed for another reason
than a refusal; and the longest wait for a first output and for a whole run.

The server side is watched through ``WatchedBackend``, which sees every observation the app's
backend yields, so a cancelled call (whose client is gone) can still be checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from playground.request import MODES, OUTPUT_KINDS

WORDS = ["the", "lighthouse", "keeper", "wrote", "in", "his", "log", "every", "evening", "about", "the", "wind",
         "and", "the", "colour", "of", "the", "sea,", "the", "ships", "that", "passed", "and", "the", "birds",
         "that", "rested", "on", "the", "rail"]
IDLE_WAIT_S = 10.0  # how long the engine may take to count 0 once the clients stopped
POLL_S = 0.05


@dataclass(frozen=True)
class SoakPlan:
    """What the clients send, and for how long (seconds of new calls; calls in flight then end)."""

    seconds: float
    clients: int = 3
    max_n: int = 32
    max_tokens: int = 48
    prompt_words: tuple[int, int] = (5, 1500)
    cancel_every: int = 3  # each client cancels its 1st, 4th, 7th... call: a third, and from the start
    seed: int = 0  # the clients' choices are reproducible

    def request(self, rng: random.Random) -> dict[str, Any]:
        """One call's settings: n log-uniform in [1, max_n], a prompt of log-uniform length."""
        low, high = self.prompt_words
        words = round(low * (high / low) ** rng.random())
        prompt = " ".join(rng.choice(WORDS) for _ in range(words))
        return {"prompt": prompt, "n": max(1, round(self.max_n ** rng.random())), "seed": rng.randrange(2**31),
                "mode": rng.choice(MODES), "output_kind": rng.choice(OUTPUT_KINDS),
                "temperature": rng.choice((0.7, 1.0, 1.3)), "max_tokens": rng.randint(4, self.max_tokens),
                "use_chat_template": rng.random() < 0.5, "ignore_eos": rng.random() < 0.5}


@dataclass
class Tally:
    """What the server's backend yielded for one run: tokens and finish reason per sample."""

    n: int
    delta: bool
    tokens: list[int] = field(default_factory=list)
    finish: list[str | None] = field(default_factory=list)
    ended: bool = False  # the stream ended by itself (its last output arrived), not cut off

    def __post_init__(self):
        self.tokens, self.finish = [0] * self.n, [None] * self.n

    def observe(self, observation) -> None:
        """A DELTA output holds its new tokens; a CUMULATIVE one all of them, or (when noted in
        ``observation.additions``) what it added to the ``before`` tokens of its index."""
        for out in observation.event.outputs if observation.event is not None else []:
            before = self.tokens[out.index] if self.delta else observation.additions.get(out.index, (0, 0))[0]
            self.tokens[out.index] = before + len(out.token_ids)
            self.finish[out.index] = out.finish_reason or self.finish[out.index]


class WatchedBackend:
    """The app's backend, with a Tally of every run it streams (by parent request id)."""

    def __init__(self, backend):
        self.inner = backend
        self.runs: dict[str, Tally] = {}

    # What it watches is ``stream``: its runs are recorded through it, on the caller's loop, not
    # on the engine's thread by the inner backend's own ``recorded`` (``base.follow_planned``).
    recorded = None

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    async def stream(self, prepared) -> AsyncIterator:
        tally = self.runs[prepared.request_id] = Tally(prepared.request.n, prepared.request.output_kind == "DELTA")
        async with contextlib.aclosing(self.inner.stream(prepared)) as observations:
            async for observation in observations:
                tally.observe(observation)
                yield observation
        tally.ended = True


@dataclass
class Call:
    """One client call and how it went."""

    settings: dict[str, Any]
    outcome: str = "failed"  # finished | cancelled | refused | failed
    request_id: str | None = None
    seen: list[int] = field(default_factory=list)  # tokens per sample in the last snapshot the client had
    first_output_s: float | None = None
    seconds: float = 0.0
    prompt_tokens: int | None = None
    error: str | None = None


def call_once(client, settings: dict[str, Any], cancel_at: int | None) -> Call:
    """Submit one /sample call; cancel it once a sample has shown ``cancel_at`` tokens (mid-stream,
    whatever the machine's speed), or run it to its end (None)."""
    call = Call(settings)
    started = time.monotonic()
    job = client.submit(**settings, api_name="/sample")
    seen: dict[int, int] = {}
    read = 0  # the snapshots read so far: each says what changed, so the counts add up over all of them

    def follow() -> None:
        nonlocal read
        outputs = job.outputs()
        for text in outputs[read:]:
            data = json.loads(text)
            if "request" in data:  # the final value: the whole bundle
                call.request_id = data["request"]["request_id"]
                call.prompt_tokens = data["request"].get("num_prompt_tokens")
                continue
            call.request_id = data.get("request_id") or call.request_id
            for s in data.get("samples", []):
                seen[s["index"]] = s["num_tokens"]
        read = len(outputs)
        call.seen = [seen.get(i, 0) for i in range(settings["n"])]
        if call.first_output_s is None and any(call.seen):
            call.first_output_s = time.monotonic() - started

    try:
        while not job.done():
            follow()
            if cancel_at is not None and max(call.seen, default=0) >= cancel_at:
                job.cancel()
                call.outcome = "cancelled"
                return call
            time.sleep(POLL_S)  # polling the job's state, not waiting for a guessed duration
        job.result()
        follow()
        call.outcome = "finished"
        if call.first_output_s is None:
            call.first_output_s = time.monotonic() - started
    except Exception as e:  # a refusal names a limit; anything else is a failure the report shows
        text = str(e)
        call.outcome = "refused" if _is_refusal(text) else "failed"
        call.error = text
    finally:
        call.seconds = time.monotonic() - started
    return call


def _is_refusal(text: str) -> bool:
    """Refusals a random request can meet by design: a prompt and max_tokens over the context."""
    return "too big" in text or "longer than the context" in text


@dataclass
class SoakReport:
    plan: SoakPlan
    calls: list[Call]
    deaths: int
    unfinished: int
    lost: list[str]  # cancelled runs whose partial text the server did not keep, each said why
    seconds: float

    def count(self, outcome: str) -> int:
        return sum(c.outcome == outcome for c in self.calls)

    @property
    def ok(self) -> bool:
        return not (self.deaths or self.unfinished or self.lost or self.count("failed"))

    def longest(self, name: str) -> float:
        values = [getattr(c, name) for c in self.calls if getattr(c, name) is not None and c.outcome == "finished"]
        return max(values, default=0.0)

    def lines(self) -> list[str]:
        prompt = [c.prompt_tokens for c in self.calls if c.prompt_tokens is not None]
        ns = [c.settings["n"] for c in self.calls]
        lines = [
            f"soak: {len(self.calls)} calls from {self.plan.clients} clients in {self.seconds:.0f} s "
            f"(n {min(ns, default=0)}-{max(ns, default=0)}, prompts of {min(prompt, default=0)}-"
            f"{max(prompt, default=0)} tokens)",
            f"  finished {self.count('finished')} · cancelled {self.count('cancelled')} · refused "
            f"{self.count('refused')} · failed {self.count('failed')}",
            f"  engine deaths {self.deaths} · unfinished requests left {self.unfinished} · cancelled runs that lost "
            f"their partial text {len(self.lost)}",
            f"  longest wait for a first output {self.longest('first_output_s'):.1f} s · longest run "
            f"{self.longest('seconds'):.1f} s",
        ]
        lines += [f"  lost: {why}" for why in self.lost[:5]]
        lines += [f"  failed: {c.error}" for c in self.calls if c.outcome == "failed"][:5]
        lines.append("soak: " + ("every goal met" if self.ok else "GOALS MISSED"))
        return lines


def check_cancelled(call: Call, watched: WatchedBackend) -> str | None:
    """Why a cancelled call's run did not keep its partial text on the server, or None if it did."""
    if call.request_id is None:
        return None  # cancelled before its run began: nothing to keep
    tally = watched.runs.get(call.request_id)
    if tally is None:
        return f"{call.request_id}: the server never streamed it"
    if not tally.ended:
        return f"{call.request_id}: its stream was cut off instead of ending with the abort's last output"
    if None in tally.finish:
        return f"{call.request_id}: samples {[i for i, f in enumerate(tally.finish) if f is None]} never ended"
    short = [i for i, seen in enumerate(call.seen) if tally.tokens[i] < seen]
    if short:
        return f"{call.request_id}: samples {short} kept fewer tokens than the client had seen"
    return None


def run_soak(url: str, watched: WatchedBackend, plan: SoakPlan) -> SoakReport:
    """Drive the app at ``url`` (started by this process on ``watched``) with ``plan.clients``
    clients until ``plan.seconds`` have passed, then wait for the engine to go idle and judge."""
    from gradio_client import Client

    restarts = watched.info().get("restarts", 0)
    deadline = time.monotonic() + plan.seconds
    calls: list[Call] = []
    lock = threading.Lock()

    def client_loop(number: int) -> None:
        rng = random.Random(plan.seed * 1000 + number)
        client = Client(url, verbose=False)
        made = 0
        while time.monotonic() < deadline:
            settings = plan.request(rng)
            # cancelled at most halfway through its tokens, so the cancel lands while it streams
            cancel_at = rng.randint(1, max(1, settings["max_tokens"] // 2))
            call = call_once(client, settings, cancel_at if made % plan.cancel_every == 0 else None)
            made += 1
            with lock:
                calls.append(call)

    started = time.monotonic()
    threads = [threading.Thread(target=client_loop, args=(k,), daemon=True) for k in range(plan.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    unfinished = _idle_count(watched)
    lost = [why for call in calls if call.outcome == "cancelled" and (why := check_cancelled(call, watched))]
    deaths = watched.info().get("restarts", 0) - restarts + (0 if watched.info().get("up", True) else 1)
    return SoakReport(plan, calls, deaths, unfinished, lost, time.monotonic() - started)


def _idle_count(backend) -> int:
    """Requests unfinished in the engine once it went idle, or after IDLE_WAIT_S."""
    deadline = time.monotonic() + IDLE_WAIT_S
    while (count := asyncio.run(backend.num_unfinished())) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    return count
