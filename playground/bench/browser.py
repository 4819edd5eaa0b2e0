"""What a person sees: the app started as a person starts it, and its page in headless Chromium.

``python app.py`` is started with its default flags (the model already prepared) in a process
group of its own, on a free port. Measures:

- ``start_s``: from launching it to the first HTTP 200 on its port;
- ``rss_gib``: the resident memory of the app's processes (the app and its engine core, every
  process it spawned) after the page's runs, each physical page counted once (``app_memory``);
- per run, in the page's own clock, through Debian's Chromium driven by Playwright (as the
  browser tests do), a fresh page for each run, the default settings but n, a seed and
  ``max_tokens`` with ``ignore_eos``:
  - ``first_visible_s``: from the Run click to the first frame in which a sample column shows text;
  - ``finished_s``: to the frame in which the run summary says it finished;
  - ``updates_per_s``: frames in which the samples area's tokens changed, per second of streaming
    (it cannot exceed the engine's steps: ``steps_per_s``, tokens per sample per second);
  - ``bytes_per_update``: characters of the samples area's messages, per message;
  - ``longest_frame_gap_ms``: the longest the page went without a frame while the run was on
    (a stalled tab paints nothing), and ``long_tasks_ms``, main-thread tasks over 50 ms, summed.
  The first run is the first the app ever served (``first after start``); the others are warm.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from playground.bench.measure import PROMPT

CHROMIUM_ENV = "PLAYGROUND_CHROMIUM"
START_TIMEOUT = 600.0
RUN_TIMEOUT = 300.0

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
                 "--no-first-run", "--disable-component-update", "--disable-sync"]

# The page's own account of a run, shared by the bench, the browser tests and the samples harness.
# ``page.evaluate(WATCH, end_by)`` clicks Run and watches every animation frame until the run ends
# and one second beyond (what the end draws): ``window.__watch``. The end is seen by "summary" (the
# page's run summary says finished, stopped or error, after it said something else: the last run's
# summary stays until the next begins) or by "area" (a samples area alone: a new run in it says
# finished). In the page's clock (ms): click, first (a token shows), end, changes (frames in which
# the shown tokens changed); until the end: gap (the longest time without a frame) and gapAt (when
# it began, after the click), task (the longest task the page ran: its own work) and longTasks
# (their sum); endGap: the longest time without a frame in the second after the end; at the end:
# tokens, bytes and messages received, heap. done: the second after the end is over.
WATCH = """(endBy) => {
  const sa = document.querySelector('#samples-area .sa').__sa;  // the samples area's own counts
  const summary = document.querySelector('#run-summary');
  const w = window.__watch = {click: 0, first: null, end: null, done: false, changes: [], gap: 0, gapAt: 0,
                              task: 0, longTasks: 0, endGap: 0, bytes0: sa.bytes || 0, messages0: sa.messages || 0};
  new PerformanceObserver(list => {
    for (const e of list.getEntries()) {
      if (w.end === null) { w.longTasks += e.duration; w.task = Math.max(w.task, e.duration); }
    }
  }).observe({type: 'longtask'});
  const resets = sa.resets;
  let began = false, shown = sa.tokens, last = null;
  const over = () => {
    if (endBy === 'area') return sa.resets > resets && sa.status() === 'finished';
    const said = /finished|stopped|error/.test(summary.textContent);  // not innerText: no layout at every frame
    began = began || !said;
    return began && said;
  };
  const frame = (now) => {
    if (last !== null && w.end === null && now - last > w.gap) { w.gap = now - last; w.gapAt = last - w.click; }
    if (last !== null && w.end !== null) w.endGap = Math.max(w.endGap, now - last);
    last = now;
    if (w.end === null) {
      if (sa.tokens !== shown) {
        shown = sa.tokens;
        w.changes.push(now);
        if (w.first === null && shown > 0) w.first = now;
      }
      if (over()) {
        w.end = now; w.tokens = sa.tokens;
        w.bytes = (sa.bytes || 0) - w.bytes0; w.messages = (sa.messages || 0) - w.messages0;
        w.heap = performance.memory ? performance.memory.usedJSHeapSize : null;
      }
    } else if (now - w.end > 1000) { w.done = true; return; }
    requestAnimationFrame(frame);
  };
  w.click = performance.now();
  document.querySelector('#run').click();
  requestAnimationFrame(frame);
}"""


def chromium_location() -> str:
    """Where Chromium should be, found or not (the tests name it when it is missing):
    $PLAYGROUND_CHROMIUM, else `chromium` on the PATH, else Debian's place."""
    return os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or "/usr/bin/chromium"


def chromium_path() -> str | None:
    """Chromium's executable, or None when it is not there."""
    path = chromium_location()
    return path if Path(path).exists() else None


def start_app(port: int, log: Path, extra: list[str] | None = None) -> tuple[subprocess.Popen, float]:
    """Launch ``python app.py`` and wait until its port answers; returns it and the seconds it took."""
    import httpx

    root = Path(__file__).resolve().parents[2]
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(root / "app.py"), "--port", str(port), *(extra or [])],
                                cwd=root, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = started + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"python app.py exited with {proc.returncode}: {log.read_text()[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200:
                return proc, time.monotonic() - started
        time.sleep(0.1)  # polling interval
    stop_app(proc)
    raise RuntimeError(f"python app.py did not answer within {START_TIMEOUT:.0f} s")


def stop_app(proc: subprocess.Popen) -> None:
    """Ctrl-C to the app's process group (it shuts its engine down), then kill what is left."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def app_memory(pid: int) -> dict[str, Any]:
    """Resident memory (GiB) of a process and every process it spawned: ``rss_gib`` counts each
    physical page once (shared libraries are mapped by every process of the app; the sum of the
    processes' RSS, ``rss_sum_gib``, counts them once per process), ``pss_gib`` shares them out."""
    import psutil

    root = psutil.Process(pid)
    rss = pss = 0
    each: dict[str, float] = {}
    pages: list | None = []
    for proc in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            info = proc.memory_full_info()
            rss, pss = rss + info.rss, pss + getattr(info, "pss", info.rss)
            name = "app" if proc.pid == pid else proc.name()
            each[name] = each.get(name, 0.0) + info.rss / 2**30
            if pages is not None:
                found = resident_pages(proc.pid)
                pages = None if found is None else [*pages, found]
    unique = _count_once(pages) * PAGE / 2**30 if pages else rss / 2**30
    return {"rss_gib": unique, "rss_sum_gib": rss / 2**30, "pss_gib": pss / 2**30,
            "rss_gib_by_process": each, "pages_counted_once": pages is not None}


PAGE = os.sysconf("SC_PAGE_SIZE")


def _count_once(pages: list) -> int:
    import numpy as np

    return len(np.unique(np.concatenate(pages)))


def resident_pages(pid: int):
    """The physical frames a process has resident (``/proc/PID/pagemap``), or None when the
    kernel hides them (frame numbers need CAP_SYS_ADMIN: then the sum of RSS is reported)."""
    import numpy as np

    frames: list[np.ndarray] = []
    try:
        with open(f"/proc/{pid}/smaps") as smaps, open(f"/proc/{pid}/pagemap", "rb") as pagemap:
            start = end = 0
            for line in smaps:
                if line[0] in "0123456789abcdef" and "-" in line.split(" ", 1)[0]:
                    start, end = (int(x, 16) for x in line.split(" ", 1)[0].split("-"))
                elif line.startswith("Rss:") and int(line.split()[1]) > 0:
                    pagemap.seek(start // PAGE * 8)
                    entries = np.frombuffer(pagemap.read((end - start) // PAGE * 8), dtype=np.uint64)
                    present = entries[(entries >> np.uint64(63)) & np.uint64(1) == 1]
                    frames.append(present & np.uint64((1 << 55) - 1))
    except OSError:
        return None
    found = np.concatenate(frames) if frames else np.array([], dtype=np.uint64)
    if len(found) and not found.any():
        return None  # frame numbers hidden (not root)
    return found


def page_run(browser, url: str, n: int, seed: int, max_tokens: int) -> dict[str, Any]:
    """One run on a fresh page; the measures of the module's docstring."""
    from playground.ui.app import plotly_preload_js

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(url)
        form = {"prompt": PROMPT, "n": n, "seed": seed, "max_tokens": max_tokens, "ignore_eos": True}
        fill(page, form)
        if plotly_preload_js():  # the page's plotly preload is in (a person types for longer than this)
            page.wait_for_function("() => window.__plotlyReady === true || window.__plotlyReady === null",
                                   timeout=60_000)
        fill_numbers_again(page, form)
        page.evaluate(WATCH, "summary")
        page.wait_for_function("() => window.__watch.end !== null", timeout=RUN_TIMEOUT * 1000)
        w = page.evaluate("() => window.__watch")
    finally:
        page.close()
    changes = [t for t in w["changes"] if w["first"] is not None and t >= w["first"]]
    streaming = (changes[-1] - changes[0]) / 1000 if len(changes) > 1 else 0.0
    return {
        "n": n, "max_tokens": max_tokens,
        "first_visible_s": (w["first"] - w["click"]) / 1000 if w["first"] is not None else float("nan"),
        "finished_s": (w["end"] - w["click"]) / 1000,
        "updates_per_s": (len(changes) - 1) / streaming if streaming > 0 else float("nan"),
        "steps_per_s": w.get("tokens", 0) / n / streaming if streaming > 0 else float("nan"),
        "longest_frame_gap_ms": w["gap"], "long_tasks_ms": w["longTasks"],
        "bytes_per_update": w["bytes"] / w["messages"] if w.get("messages") else float("nan"),
        "heap_mb": w["heap"] / 2**20 if w.get("heap") else float("nan"),
    }


def fill(page, form: dict[str, Any]) -> None:
    """Set the page's form as ``form`` says (the settings left out keep the page's defaults)."""
    page.locator("#prompt textarea").fill(form["prompt"])
    if "use_chat_template" in form:
        page.locator("#chat-template input").set_checked(bool(form["use_chat_template"]))
    numbers = _numbers(form)
    _number(page, "n", numbers.pop("n"))
    if "seed" in form:
        page.locator("#seed textarea, #seed input").first.fill(str(form["seed"]))
    for name in ("output_kind", "mode"):
        if name in form:
            page.locator(f"#{name.replace('_', '-')}").get_by_label(form[name], exact=True).check()
    if {"max_tokens", "ignore_eos", "logprobs"} & set(form):
        page.get_by_text("Sampler settings").click()
    for elem_id, value in numbers.items():
        _number(page, elem_id, value)
    if form.get("ignore_eos"):
        page.locator("#ignore-eos input").check()


def fill_numbers_again(page, form: dict[str, Any]) -> None:
    """Fill again the form's numbers that do not read as ``form`` set them; RuntimeError when they
    still do not. Once in a few dozen page runs the maximum tokens read the default again after
    they were filled (the field had just been drawn, by opening its accordion), and the run then
    stopped at the default length while the bench waited for the whole one."""
    for elem_id, value in _unset(page, form).items():
        _number(page, elem_id, value)
    if unset := _unset(page, form):
        raise RuntimeError(f"the page's form would not take {unset}")


def _numbers(form: dict[str, Any]) -> dict[str, int]:
    """The numbers ``form`` sets, by the field's id, in the page's order."""
    numbers = {"n": form["n"]}
    if "max_tokens" in form:
        numbers["max-tokens"] = form["max_tokens"]
    if "logprobs" in form:
        numbers["logprobs"] = form["logprobs"] or 0
    return numbers


def _unset(page, form: dict[str, Any]) -> dict[str, int]:
    return {elem_id: value for elem_id, value in _numbers(form).items()
            if page.locator(f"#{elem_id} input[type=number]").input_value() != str(value)}


def _number(page, elem_id: str, value: int) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def measure_app(port: int, out: Path, ns: tuple[int, ...], max_tokens: int, repetitions: int,
                seed: int) -> dict[str, Any]:
    """Start the app, run the page (the first run first, then ``repetitions`` warm runs of each
    n), measure its memory, stop it. Without Chromium, only the start and the memory."""
    out.mkdir(parents=True, exist_ok=True)
    proc, start_s = start_app(port, out / "app.log", ["--runs-db", str(out / "runs.sqlite3")])  # not the user's store
    result: dict[str, Any] = {"start_s": start_s, "runs": []}
    try:
        result["memory_started"] = app_memory(proc.pid)
        chromium = chromium_path()
        if chromium is None:
            result["browser"] = f"Chromium not found (install it, or set {CHROMIUM_ENV})"
        else:
            from playwright.sync_api import sync_playwright

            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium,
                                            args=[*CHROMIUM_ARGS, "--enable-precise-memory-info"])
                try:
                    order = [("first after start", ns[0], 0)] + [
                        ("warm", n, rep) for rep in range(repetitions) for n in ns]
                    for i, (kind, n, rep) in enumerate(order):
                        row = page_run(browser, f"http://127.0.0.1:{port}/", n, seed + 1000 * i, max_tokens)
                        result["runs"].append({"run": kind, "repetition": rep, **row})
                finally:
                    browser.close()
        result["memory"] = app_memory(proc.pid)
    finally:
        stop_app(proc)
    return result
