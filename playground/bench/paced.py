"""The app at a GPU's pace, on a machine without one: ``python app.py --replay synthetic:NxT
--replay-pace "R tok/s"`` (the replay backend, ``playground.backends.replay``) streams a made-up run
through the real seam (``record()``, the recorder, the samples feed, the live panels, ``/sample``'s
snapshots) as fast as a GPU would make it, and the page and ``/sample`` are measured against it.

Figures, per case and client (``/sample`` over Gradio's HTTP API with a plain client, as the README's
curl call; ``/sample`` through gradio_client; the page in headless Chromium):

- ``end_lag_s``: from the moment the source's last event was due (its schedule: a GPU makes the
  last token then, whatever the app does) to the client having the end: the final value of
  ``/sample``, or the frame in which the page says the run finished (the page's clock,
  ``performance.timeOrigin``, is the machine's wall clock);
- ``source_late_s``: how late the source itself emitted its last event (the replay runs on the
  app's event loop, so a saturated app holds its own source back: then the lag above is partly
  here);
- the page's updates per second, longest frame gap and JS heap (as ``browser`` measures them);
- ``app_ms_per_token``: the app process's CPU time (user + system) over the run, less the
  source's own cost, per sampled token. The source's cost is measured alone first (``source_alone``:
  the same replay with a consumer that drops every observation), in this process's thread.

The schedule and the source's own lateness come from the app's log: the replay backend prints one
line per replay (``Played.line``), which ``played`` reads back.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playground.backends.synthetic import TOP_LOGPROBS
from playground.bench.browser import RUN_TIMEOUT, WATCH, fill, fill_numbers_again
from playground.bench.probes import browser_cpu_seconds, process_cpu

PLAYED = re.compile(r"replay: (?P<rid>run-[0-9a-f]+) (?:played|stopped) \S+ at (?P<pace>.+?): (?P<events>\d+) events, "
                    r"(?P<tokens>\d+) tokens; started at (?P<started>[0-9.]+) \(wall clock\), last event due at "
                    r"\+(?P<due>[0-9.]+) s, emitted at \+(?P<last>[0-9.]+) s \(at most (?P<late>[0-9.]+) s late\)")


@dataclass(frozen=True)
class PacedCase:
    n: int
    tokens: int
    rate: float  # sampled tokens per second
    logprobs: int = TOP_LOGPROBS  # the top-K logprobs of the synthetic run (0: none)

    @property
    def source(self) -> str:
        return f"synthetic:{self.n}x{self.tokens}" + ("" if self.logprobs == TOP_LOGPROBS else f":{self.logprobs}")

    @property
    def pace(self) -> str:
        return f"{self.rate:g} tok/s"

    @property
    def name(self) -> str:  # the top-5 cases keep the names earlier baselines know them by
        said = "" if self.logprobs == TOP_LOGPROBS else \
            (" no logprobs" if self.logprobs == 0 else f" top-{self.logprobs}")
        return f"{self.rate:g} tok/s n={self.n}x{self.tokens}{said}"


CASES = (PacedCase(256, 1000, 10_000), PacedCase(32, 2000, 4_000))  # top-5 logprobs, as synthetic runs have


def source_alone(case: PacedCase) -> dict[str, float]:
    """The replay of ``case`` with a consumer that drops everything: the source's own CPU seconds
    (this thread's), its tokens, and how late its last event was."""
    from playground.backends.base import plan_request
    from playground.backends.pace import Pace
    from playground.backends.replay import ReplayBackend
    from playground.backends.replay_library import Library
    from playground.request import SampleRequest

    played = []
    backend = ReplayBackend(Library.read([case.source]), Pace(rate=case.rate), max_n=case.n, report=played.append)

    async def drop_all() -> float:
        prepared = await plan_request(backend, SampleRequest("synthetic", n=case.n))
        began = time.thread_time()
        async for _ in backend.stream(prepared):
            pass
        return time.thread_time() - began

    cpu = in_thread(lambda: asyncio.run(drop_all()))
    return {"cpu_s": cpu, "tokens": played[0].tokens, "late_s": played[0].late_s,
            "ms_per_token": 1000 * cpu / played[0].tokens}


def in_thread(work):
    """``work()`` on a thread of its own: Playwright's sync API keeps an event loop on this one."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(work).result()


def app_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) of the app process, and of the processes under it (an engine core)."""
    import psutil

    app = psutil.Process(pid)
    own = app.cpu_times()
    return own.user + own.system, sum(process_cpu(child) for child in app.children(recursive=True))


def cpu_from_loaded(pid: int, run: Callable[[Callable[[], None]], Any]
                    ) -> tuple[Any, tuple[float, float], float | None]:
    """``run(loaded)``'s result; the app's CPU over it (app, engine: ``app_cpu``), counted from
    ``loaded()`` on when ``run`` calls it (a page, at its Run click: a page is loaded once and run
    many times); and the app's CPU before that (the page's load), None when ``run`` never calls it."""
    first = app_cpu(pid)
    marks: dict[str, tuple[float, float]] = {}

    def loaded() -> None:
        marks["run"] = app_cpu(pid)

    got = run(loaded)
    after = app_cpu(pid)
    before = marks.get("run", first)
    load = before[0] - first[0] if "run" in marks else None
    return got, (after[0] - before[0], after[1] - before[1]), load


def played(log: Path, request_id: str | None = None) -> dict[str, Any] | None:
    """The replay line the app printed for ``request_id`` (None: its last one), as numbers."""
    found = None
    for match in PLAYED.finditer(log.read_text(errors="replace")):
        if request_id is None or match["rid"] == request_id:
            found = match
    if found is None:
        return None
    return {"request_id": found["rid"], "events": int(found["events"]), "tokens": int(found["tokens"]),
            "started": float(found["started"]), "due_s": float(found["due"]), "last_s": float(found["last"]),
            "late_s": float(found["late"])}


BUNDLE_DATA = 'data: ["{\\"bundle_version\\"'  # an event's data that is the run's bundle, as Gradio writes it


def http_sample_run(url: str, request: dict[str, Any]) -> dict[str, Any]:
    """``sample_run`` over Gradio's HTTP API with a plain streaming client (httpx), as the README's
    curl call: what the app delivers, without gradio_client's own cost of a large final value.
    The bundle arrives as the last ``generating`` message, and ``complete`` repeats it (Gradio
    sends a generator's last value again as its end): it has arrived at the first, as for
    gradio_client, and the stream is read to its end all the same."""
    import json

    import httpx

    from playground.ui.api import SIGNATURE

    data = [request[name] if name in request else p.default for name, p in SIGNATURE.parameters.items()]
    base = url.rstrip("/") + "/gradio_api/call/sample"
    snapshots, final, arrived, name = 0, None, None, None
    with httpx.Client(timeout=RUN_TIMEOUT) as http:
        event_id = http.post(base, json={"data": data}).raise_for_status().json()["event_id"]
        with http.stream("GET", f"{base}/{event_id}") as stream:
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    name = line.removeprefix("event: ")
                elif line.startswith(BUNDLE_DATA) and name in ("generating", "complete"):
                    if final is None:
                        final, arrived = json.loads(line.removeprefix("data: "))[0], time.time()
                elif line.startswith("data: ") and name == "generating":
                    snapshots += 1
                elif line.startswith("data: ") and name == "error":
                    raise RuntimeError(f"/sample failed: {line.removeprefix('data: ')}")
    if final is None:
        raise RuntimeError("/sample's event stream ended without its final value")
    return _final(final, arrived, snapshots)


def _final(final: str, arrived: float, snapshots: int) -> dict[str, Any]:
    """What a client of ``/sample`` measured of its final value (the bundle)."""
    rid = re.search(r'"request_id":"(run-[0-9a-f]+)"', final)
    return {"arrived": arrived, "snapshots": snapshots, "request_id": rid.group(1) if rid else None,
            "bundle_mb": len(final) / 2**20}


def sample_run(url: str, request: dict[str, Any]) -> dict[str, Any]:
    """One ``/sample`` call to its final value through gradio_client: when that arrived (wall
    clock), how many snapshots came before it, and the run's request id. (gradio_client 2.7 joins
    the event stream's bytes as they come, ``buffer += chunk``, and looks for the end of a message
    in the whole buffer each time: a final value of 20 MB costs it seconds, which this row shows.)"""
    from gradio_client import Client

    client = Client(url, verbose=False)
    try:
        job = client.submit(**request, api_name="/sample")
        snapshots, final, arrived = 0, None, None
        for value in job:
            if value.startswith('{"bundle_version"'):
                final, arrived = value, time.time()
                break
            snapshots += 1
        if final is None:
            final, arrived = job.result(), time.time()
    finally:
        client.close()
    return _final(final, arrived, snapshots)


# The frame in which the samples area shows ``want`` tokens (the summary can say "finished" a
# message before the last tokens are painted: the samples area is paced by the browser's acks).
COMPLETE = """(want) => {
  const sa = document.querySelector('#samples-area .sa').__sa;
  window.__complete = null;
  const frame = (now) => { if (sa.tokens >= want) window.__complete = now; else requestAnimationFrame(frame); };
  requestAnimationFrame(frame);
}"""


STOOD = """() => ({summary: (document.querySelector('#run-summary') || {}).innerText,
  tokens: document.querySelector('#samples-area .sa').__sa.tokens, watch_done: window.__watch.done})"""


def page_run(browser, url: str, form: dict[str, Any], tokens: int, timeout: float = RUN_TIMEOUT,
             loaded: Callable[[], None] | None = None) -> dict[str, Any]:
    """One run on a fresh page with ``form`` set (prompt, n, and optionally seed, max_tokens,
    ignore_eos, output_kind, mode, logprobs, use_chat_template): the page's own figures, and the
    wall-clock time it painted the end: the summary said finished and all ``tokens`` showed.
    ``loaded()`` is called once the page is loaded and filled, just before the Run click: a page
    is loaded once and run many times, so what its load costs the app is not a cost of its run."""
    from playground.ui.app import plotly_preload_js

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(url)
        fill(page, form)
        if plotly_preload_js():  # the page's plotly preload is in (a person types for longer than this)
            page.wait_for_function("() => window.__plotlyReady === true || window.__plotlyReady === null",
                                   timeout=60_000)
        fill_numbers_again(page, form)
        page.evaluate(COMPLETE, tokens)
        if loaded is not None:
            loaded()
        drawing = browser_cpu_seconds()
        page.evaluate(WATCH, "summary")
        try:
            page.wait_for_function("() => window.__watch.done && window.__complete !== null",
                                   timeout=timeout * 1000, polling=250)
        except Exception as e:  # what the page showed when it gave up: where a run that never ended stood
            raise TimeoutError(f"the page did not show the run's end in {timeout:.0f} s: {page.evaluate(STOOD)}") \
                from e
        drawing = browser_cpu_seconds() - drawing
        w = page.evaluate("() => window.__watch")
        complete = page.evaluate("() => window.__complete")
        origin = page.evaluate("() => performance.timeOrigin")
    finally:
        page.close()
    changes = [t for t in w["changes"] if w["first"] is not None and t >= w["first"]]
    streaming = (changes[-1] - changes[0]) / 1000 if len(changes) > 1 else 0.0
    end = max(w["end"], complete)
    return {"ended": (origin + end) / 1000, "finished_s": (end - w["click"]) / 1000,
            "updates_per_s": (len(changes) - 1) / streaming if streaming > 0 else float("nan"),
            "longest_frame_gap_ms": w["gap"], "long_tasks_ms": w["longTasks"],
            "heap_mb": w["heap"] / 2**20 if w.get("heap") else float("nan"), "browser_cpu_s": drawing}


def measure_case(case: PacedCase, port: int, out: Path, browser=None) -> list[dict[str, Any]]:
    """Start ``python app.py --replay`` for ``case``, run ``/sample`` once and the page once (when
    ``browser``), and return a row for each, the source's own cost taken out."""
    from playground.bench.browser import start_app, stop_app

    alone = source_alone(case)
    log = out / f"paced-{case.n}x{case.tokens}-app.log"
    proc, start_s = start_app(port, log, ["--replay", case.source, "--replay-pace", case.pace,
                                          "--max-n", str(max(256, case.n))])
    url = f"http://127.0.0.1:{port}/"
    rows = []
    try:
        clients = [("/sample", lambda _: http_sample_run(url, {"prompt": "synthetic", "n": case.n})),
                   ("/sample gradio_client", lambda _: sample_run(url, {"prompt": "synthetic", "n": case.n}))]
        if browser is not None:
            clients.append(("page", lambda loaded: page_run(browser, url, {"prompt": "synthetic", "n": case.n},
                                                            alone["tokens"], loaded=loaded)))
        for client, run in clients:
            seen, (cpu, _), load = cpu_from_loaded(proc.pid, run)
            if load is not None:
                seen["page_load_cpu_s"] = load
            said = played(log, seen.get("request_id"))
            if said is None:
                rows.append({"case": case.name, "client": client, "error": "the app printed no replay line"})
                continue
            end = seen["ended"] if client == "page" else seen["arrived"]
            rows.append({
                "case": case.name, "client": client, "n": case.n, "tokens": said["tokens"], "rate": case.rate,
                "end_lag_s": end - (said["started"] + said["due_s"]),
                # both printed to the millisecond: their difference may round to -0.001 (never early)
                "source_late_s": max(0.0, said["last_s"] - said["due_s"]), "source_most_late_s": said["late_s"],
                "app_cpu_s": cpu, "source_cpu_s": alone["cpu_s"] * said["tokens"] / alone["tokens"],
                "app_ms_per_token": 1000 * (cpu - alone["cpu_s"] * said["tokens"] / alone["tokens"]) / said["tokens"],
                "source_ms_per_token": alone["ms_per_token"], "app_start_s": start_s,
                **{k: v for k, v in seen.items() if k not in ("arrived", "ended", "request_id")},
            })
    finally:
        stop_app(proc)
    return rows
