"""The app's own CPU per sampled token on every real path: the figure that predicts a GPU.

On a GPU the engine stops being the bound and the app's one Python process (vLLM's front end,
Gradio and the playground, one GIL) becomes it: the CPU seconds that process spends per sampled
token say how many tokens a second it can keep up with. Measured per path on the same request
(a prompt, n, ``max_tokens`` with ``ignore_eos``, DELTA, seed, temperature 1, no chat template; with
and without top-5 logprobs), as process CPU time (user + system, ``psutil``) of the process that
runs vLLM's front end, with the engine core's (a child process) beside it:

- ``vllm``: vLLM's own ``AsyncLLM.generate`` with native n, consumed by a plain loop, in this
  process: what vLLM itself costs (logprobs as ``flat_logprobs``, its cheaper form, as the app asks);
- ``wrapper``: our fan-out (``ParallelSampler``, n children of n=1) over the same AsyncLLM;
- ``record``: ``record()`` through the embedded backend (native n): the run record the app keeps,
  without the UI;
- ``/sample``: a gradio_client call to ``python app.py`` (native n), the app's own process only;
- ``page``: the page in headless Chromium on that app (native n), the app's own process only, from
  the Run click (the page is loaded once and run many times: its load, ``page_load_cpu_s``, is
  printed beside, not counted); Chromium's own CPU per token (``browser_ms_per_token``) beside it.

With ``--paced-core TOKENS_PER_S`` there is no engine core: every path's vLLM front end is fed by
a paced source at a GPU's pace (``playground.backends.paced_core``), and the source's own CPU is
taken out of every figure (``without_source``).

``ratio`` is each path's CPU per token over ``vllm``'s for the same n and logprobs. One request
each (CPU time is steady where wall time is not); the in-process paths run first, on an engine of
their own. That engine is kept while the app runs, and vLLM's own path is measured on it again
just before each of the app's requests (``vllm_beside_ms_per_token``): an app path's ratio is over
that one. This machine's pace drifts by a fifth and more over the minutes between the in-process
paths and the app's; two requests measured back to back drift far less.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from playground.bench.measure import PROMPT
from playground.bench.paced import in_thread
from playground.bench.probes import cpu_seconds

IN_PROCESS = ("vllm", "wrapper", "record")
APP_PATHS = ("/sample", "page")
PATHS = (*IN_PROCESS, *APP_PATHS)
SEED = 4321


def request_of(n: int, tokens: int, logprobs: int | None) -> dict[str, Any]:
    return {"prompt": PROMPT, "n": n, "seed": SEED, "max_tokens": tokens, "ignore_eos": True, "output_kind": "DELTA",
            "mode": "native", "logprobs": logprobs, "use_chat_template": False, "temperature": 1.0}


def in_process(backend, n: int, tokens: int, logprobs: int | None) -> list[dict[str, Any]]:
    """The three in-process paths on ``backend``'s engine (an EmbeddedBackend), one request each."""
    from vllm import TokensPrompt

    from playground.backends.base import record_to_end
    from playground.request import SampleRequest
    from playground.sampling.async_sampler import ParallelSampler

    host, engine = backend.host, backend.host.engine
    ids, params = engine.tokenizer.encode(PROMPT), sampling_params(n, tokens, logprobs)

    async def wrapper() -> int:
        made = 0
        sampler = ParallelSampler(engine, max_n=n)
        async for output in sampler.generate(TokensPrompt(prompt_token_ids=ids), params, f"cpu-{time.monotonic_ns()}",
                                             "wrapper"):
            made += sum(len(c.token_ids) for c in output.outputs)
        return made

    async def recorded() -> int:
        run = await record_to_end(backend, SampleRequest(**request_of(n, tokens, logprobs)))
        return sum(len(s.token_ids) for s in run.samples)

    own = vllm_own(backend, n, tokens, logprobs)
    beside = {"vllm_beside_ms_per_token": own["app_ms_per_token"]}  # the ratios over this very round's
    return [own, {**measured(backend, "wrapper", n, tokens, logprobs, lambda: host.run(wrapper())), **beside},
            # from another loop, as the app records
            {**measured(backend, "record", n, tokens, logprobs, lambda: in_thread(lambda: asyncio.run(recorded()))),
             **beside}]


def sampling_params(n: int, tokens: int, logprobs: int | None):
    """``request_of``'s request as vLLM's own SamplingParams."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    # flat_logprobs: vLLM's own at its cheapest (no object per alternative), as the app asks for it
    return SamplingParams(n=n, seed=SEED, max_tokens=tokens, ignore_eos=True, temperature=1.0, top_p=1.0, top_k=0,
                          logprobs=logprobs, flat_logprobs=logprobs is not None,
                          output_kind=RequestOutputKind.DELTA)


def vllm_own(backend, n: int, tokens: int, logprobs: int | None) -> dict[str, Any]:
    """vLLM's own ``AsyncLLM.generate`` with native n on ``backend``'s engine, consumed by a plain loop."""
    from vllm import TokensPrompt

    engine = backend.host.engine
    prompt = TokensPrompt(prompt_token_ids=engine.tokenizer.encode(PROMPT))
    params = sampling_params(n, tokens, logprobs)

    async def generate() -> int:
        made = 0
        async for output in engine.generate(prompt, params, f"cpu-{time.monotonic_ns()}"):
            made += sum(len(c.token_ids) for c in output.outputs)
        return made

    return measured(backend, "vllm", n, tokens, logprobs, lambda: backend.host.run(generate()))


def measured(backend, path: str, n: int, tokens: int, logprobs: int | None, make) -> dict[str, Any]:
    """The row of one request that ``make()`` runs to its end (it returns the tokens made)."""
    core = backend.host.engine.engine_core  # a paced core (--paced-core) counts its own CPU
    before, source = cpu_seconds(), getattr(core, "cpu_s", None)
    made = make()
    after = cpu_seconds()
    return row(path, n, tokens, logprobs, made, after[0] - before[0], after[1] - before[1],
               None if source is None else core.cpu_s - source)


def through_app(port: int, out: Path, sizes: list[tuple[int, int, int | None]], browser=None,
                 engine: list[str] = (), beside=None, repeat: int = 1) -> list[dict[str, Any]]:
    """``/sample`` and the page on ``python app.py`` (its own engine, started with the flags
    ``engine``: the in-process paths' own), ``repeat`` requests per size each. ``beside(n, tokens,
    logprobs)``: vLLM's own path's row, measured just before each of them."""
    from playground.bench.browser import start_app, stop_app
    from playground.bench.paced import cpu_from_loaded, http_sample_run, page_run

    proc, _ = start_app(port, out / "cpu-app.log", ["--max-n", str(max(256, *(n for n, _, _ in sizes))), *engine])
    url = f"http://127.0.0.1:{port}/"
    rows = []
    try:
        for n, tokens, logprobs in sizes:
            request = request_of(n, tokens, logprobs)
            clients = [("/sample", lambda _, r=request: http_sample_run(url, r))]
            if browser is not None:
                clients.append(("page", lambda loaded, r=request: page_run(browser, url, r, r["n"] * r["max_tokens"],
                                                                           loaded=loaded)))
            for path, run in [client for client in clients for _ in range(repeat)]:
                own = beside(n, tokens, logprobs) if beside is not None else None
                started = time.time()
                try:
                    got, (app_s, engine_s), load = cpu_from_loaded(proc.pid, run)
                except Exception as e:  # one client that fails (a timeout on a busy machine) costs its row only
                    print(f"cpu per token: {path} n={n} logprobs={logprobs}: {type(e).__name__}: {e}", file=sys.stderr)
                    continue
                # the run as its client saw it: the call to its final value, the Run click to the page's end
                wall = got["finished_s"] if "finished_s" in got else got["arrived"] - started
                source = own.get("source_cpu_s") if own is not None else None  # the paced source's, counted beside
                rows.append({**row(path, n, tokens, logprobs, n * tokens, app_s, engine_s, source),
                             "wall_s": wall, "tok_per_s": n * tokens / wall,
                             **({"page_load_cpu_s": load} if load is not None else {}),
                             **({"vllm_beside_ms_per_token": own["app_ms_per_token"]} if own is not None else {}),
                             **({"browser_ms_per_token": 1000 * got["browser_cpu_s"] / (n * tokens)}
                                if "browser_cpu_s" in got else {})})
    finally:
        stop_app(proc)
    return rows


def engine_flags(model: str | None, engine_kwargs: dict[str, Any]) -> list[str]:
    """The engine flags given to the bench, written back for ``python app.py``: its engine must be
    the in-process paths' (``--cpu-threads 1`` on both, say), or the ratios compare two engines."""
    flags = ["--model", model] if model else []
    for name, value in sorted(engine_kwargs.items()):
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, list | tuple):
            flags += [flag, *map(str, value)]
        elif isinstance(value, dict):
            flags += [flag, json.dumps(value)]
        elif value is not None:
            flags += [flag, str(value)]
    return flags


def row(path: str, n: int, tokens: int, logprobs: int | None, made: int, app_s: float, engine_s: float,
        source_s: float | None = None) -> dict:
    """``source_s``: a paced core's own CPU in ``app_s`` (--paced-core), not the app's: taken out."""
    return {"path": path, "n": n, "max_tokens": tokens, "logprobs": logprobs or 0, "tokens": made,
            "app_cpu_s": app_s, "engine_cpu_s": engine_s,
            **({"source_cpu_s": source_s} if source_s is not None else {}),
            "app_ms_per_token": app_ms_per_token(app_s, source_s, made),
            "engine_ms_per_token": 1000 * engine_s / made if made else None}


def app_ms_per_token(app_s: float, source_s: float | None, made: int) -> float | None:
    """The app's ms of CPU per sampled token, a paced core's own CPU (``source_s``) taken out."""
    return 1000 * (app_s - (source_s or 0)) / made if made else None


def without_source(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At a GPU's pace (--paced-core) the source's own CPU is taken out of every path: the app's
    paths (another process) are given the one counted on vLLM's own path for the same request,
    which the source answers with the same tokens in the same steps."""
    counted = {(r["n"], r["logprobs"]): r["source_cpu_s"] for r in rows if r["path"] == "vllm" and "source_cpu_s" in r}
    given = []
    for r in rows:
        source = counted.get((r["n"], r["logprobs"]))
        if "source_cpu_s" not in r and source is not None:
            r = {**r, "source_cpu_s": source, "app_ms_per_token": app_ms_per_token(r["app_cpu_s"], source, r["tokens"])}
        given.append(r)
    return given


def with_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row with its app CPU per token over vLLM's own path's, for the same n and logprobs:
    the one measured just before it where there is one (``vllm_beside_ms_per_token``)."""
    own = {(r["n"], r["logprobs"]): r["app_ms_per_token"] for r in rows if r["path"] == "vllm"}
    ratios = []
    for r in rows:
        mine = r["app_ms_per_token"] if r["path"] == "vllm" else \
            r.get("vllm_beside_ms_per_token") or own.get((r["n"], r["logprobs"]))
        ratios.append({**r, "ratio": r["app_ms_per_token"] / mine if mine and r["app_ms_per_token"] is not None
                       else None})
    return ratios


def _ratio(r: dict[str, Any]) -> str:
    """``(1.3x)``, or with several measurements ``(1.3x 1.2-1.4)``: the median and the range."""
    if r["path"] == "vllm" or not r.get("ratio"):  # the denominator: 1 by definition
        return ""
    ratios = r.get("ratios") or []
    spread = f" {ratios[0]:.2f}-{ratios[-1]:.2f}" if len(ratios) > 1 else ""
    return f"({r['ratio']:.2f}x{spread})" if spread else f"({r['ratio']:.1f}x)"


def medians(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per path and size: a path measured several times (``--cpu-repeat``) gives the
    median of each figure, and the range of its ratios (``ratios``)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["path"], r["n"], r["max_tokens"], r["logprobs"]), []).append(r)
    merged = []
    for group in groups.values():
        if len(group) == 1:
            merged.append(group[0])
            continue
        row = dict(group[len(group) // 2])
        for name in {name for r in group for name, value in r.items() if isinstance(value, int | float)
                     and not isinstance(value, bool)} - {"n", "max_tokens", "logprobs", "tokens"}:
            values = [r[name] for r in group if isinstance(r.get(name), int | float)]
            row[name] = statistics.median(values)
        ratios = sorted(r["ratio"] for r in group if r.get("ratio") is not None)
        merged.append({**row, "repeats": len(group), **({"ratios": ratios} if ratios else {})})
    return merged


def summary(rows: list[dict[str, Any]]) -> str:
    """One line: per size, each path's app ms per sampled token and its ratio to vLLM's own."""
    parts = []
    for (n, logprobs) in sorted({(r["n"], r["logprobs"]) for r in rows}):
        here = {r["path"]: r for r in rows if (r["n"], r["logprobs"]) == (n, logprobs)}
        figures = [f"{path}={here[path]['app_ms_per_token']:.3f}" + _ratio(here[path])
                   for path in PATHS if path in here]
        if here.get("page", {}).get("tok_per_s") and here.get("/sample", {}).get("tok_per_s"):
            figures.append(f"page/sample_tok_s={here['page']['tok_per_s'] / here['/sample']['tok_per_s']:.2f}")
        if here.get("page", {}).get("page_load_cpu_s") is not None:  # apart: a page loads once, runs many times
            figures.append(f"page_load_cpu_s={here['page']['page_load_cpu_s']:.2f}")
        if here.get("page", {}).get("browser_ms_per_token") is not None:  # Chromium's, on the engine's cores here
            figures.append(f"page_browser={here['page']['browser_ms_per_token']:.3f}")
        parts.append(f"n{n}{'+top' + str(logprobs) if logprobs else ''}: " + " ".join(figures))
    pace = next((r["paced_core"] for r in rows if r.get("paced_core")), None)
    return f"app_cpu_ms_per_token{f'[paced_core={pace:g}]' if pace else ''} " + "; ".join(parts)
