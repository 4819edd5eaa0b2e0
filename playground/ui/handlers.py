"""Plain handler functions for the page, holding the backend and the per-session live run.

Every handler turns a Run into component values through views.py and panels.py, so the live
columns, the panels, the exports and the API all read the same record.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import gradio as gr

from playground.analysis import first_divergence
from playground.backends.base import record
from playground.errors import InvalidRequest, PlaygroundError
from playground.sampling.request import SampleRequest
from playground.run import Run
from playground.ui import panels, views
from playground.ui.streaming import paced

log = logging.getLogger(__name__)
HISTORY_SIZE = 10
COLUMNS_PER_ROW = 4
FIGURE_EVERY = 1.0  # seconds between figure refreshes while streaming (figures travel whole)
SETTING_NAMES = ("prompt", "use_chat_template", "n", "seed", "output_kind", "mode", "temperature", "top_p",
                 "top_k", "min_p", "max_tokens", "presence_penalty", "frequency_penalty", "repetition_penalty",
                 "stop", "logprobs", "ignore_eos")


class Handlers:
    def __init__(self, backend):
        self.backend = backend
        # Exports are written here only: a folder of the app's own under the system temp dir.
        self.export_dir = Path(tempfile.mkdtemp(prefix="vllm-playground-exports-"))
        self.live: dict[str, Run] = {}  # session -> its latest run, so Stop can finish it
        self.last_run: Run | None = None
        self.c = SimpleNamespace()

    def bind(self, **components) -> None:
        self.c = SimpleNamespace(**components)
        self.max_n = len(self.c.groups)

    def outputs(self) -> list:
        c = self.c
        return [c.status, c.summary, *c.rows, *c.groups, *c.headers, *c.texts, *panels.components(c), c.current,
                c.history, c.history_pick, c.bundle_file, c.tokens_file]

    # --- controls -------------------------------------------------------------------------------

    async def render_prompt(self, prompt: str, use_chat_template: bool) -> str:
        if not prompt or not prompt.strip():
            return "The rendered prompt appears here as you type."
        try:
            rendered, token_ids = await self.backend.render(prompt, bool(use_chat_template))
        except Exception as e:  # shown in place; the run itself reports errors properly
            return f"⚠️ {e}"
        return views.rendered_prompt(rendered, len(token_ids))

    def show_columns(self, n) -> list:
        try:
            n = int(n)
        except (TypeError, ValueError):
            return [gr.skip()] * (len(self.c.rows) + self.max_n)
        return list(self._visibility(n).values())

    def _visibility(self, n: int) -> dict:
        """Show the first n columns, and only the rows that hold them (hidden rows keep their gap)."""
        return {**{r: gr.update(visible=k * COLUMNS_PER_ROW < n) for k, r in enumerate(self.c.rows)},
                **{g: gr.update(visible=i < n) for i, g in enumerate(self.c.groups)}}

    async def refresh_status(self) -> str:
        return views.engine_status(await self.backend.status(), self.last_run)

    # --- running --------------------------------------------------------------------------------

    async def run(self, prompt, use_chat_template, n, seed, output_kind, mode, temperature, top_p, top_k, min_p,
                  max_tokens, presence_penalty, frequency_penalty, repetition_penalty, stop, logprobs, ignore_eos,
                  history, request: gr.Request):
        """Stream one run into the columns; panels refresh about once a second and at the end."""
        settings = dict(zip(SETTING_NAMES, (prompt, use_chat_template, n, seed, output_kind, mode, temperature,
                                            top_p, top_k, min_p, max_tokens, presence_penalty, frequency_penalty,
                                            repetition_penalty, stop, logprobs, ignore_eos)))
        sample_request = _from_ui(settings)
        session = request.session_hash if request else ""
        c = self.c
        shown = sample_request.n
        yield {
            **self._visibility(shown),
            **{t: "" for t in c.texts[:shown]},
            **{h: f"**#{i}** · waiting" for i, h in enumerate(c.headers[:shown])},
            c.summary: "⏳ starting…",
        }
        sent: list[tuple[int, str | None]] = [(-1, None)] * shown
        started, figures_at = time.monotonic(), time.monotonic()
        run: Run | None = None
        try:
            async for snapshot in paced(record(self.backend, sample_request)):
                if snapshot is None:  # heartbeat: nothing new, but keep the connection checked
                    if run is None:
                        yield {c.summary: f"⏳ waiting for the first output… {time.monotonic() - started:.1f} s"}
                    else:
                        yield {c.summary: views.run_summary(run)}
                    continue
                run = snapshot
                self.live[session] = run
                if run.finished:
                    continue  # the stream ends here; the final render follows
                update = self._columns(run, sent)
                update[c.summary] = views.run_summary(run)
                if time.monotonic() - figures_at >= FIGURE_EVERY:
                    update.update(panels.live(c, run))
                    figures_at = time.monotonic()
                yield update
        except Exception as e:
            raise _shown(e) from None
        if run is not None:
            yield await self._final_async(run, history)

    async def stop(self, current, history, request: gr.Request):
        """Stop aborts every child (the run event is cancelled); then show the partial run."""
        run = self.live.get(request.session_hash if request else "")
        if run is None or (current is not None and current.request.get("request_id") == run.request["request_id"]):
            return {}
        deadline = time.monotonic() + 5
        while run.status == "running" and time.monotonic() < deadline:
            await _tick()  # the cancelled run handler finishes the record as "aborted"
        return await self._final_async(run, history)

    def _columns(self, run: Run, sent: list) -> dict:
        """Only the columns whose text or state changed since they were last sent."""
        c, update = self.c, {}
        for s in run.samples:
            state = (len(s.token_ids), s.finish_reason)
            if state != sent[s.index]:
                sent[s.index] = state
                update[c.headers[s.index]] = views.column_header(s, run)
                update[c.texts[s.index]] = s.text
        return update

    async def _final_async(self, run: Run, history: list | None) -> dict:
        """Panels for a long run at n=32 take a moment: build them off the event loop, so other
        sessions keep streaming meanwhile."""
        return await asyncio.to_thread(self._final, run, history)

    def _final(self, run: Run, history: list | None) -> dict:
        c = self.c
        self.last_run = run
        history = _remember(history or [], run)
        bundle, tokens = self._export(run)
        update = {
            **self._visibility(run.n),
            **{c.headers[s.index]: views.column_header(s, run) for s in run.samples},
            **{c.texts[s.index]: s.text for s in run.samples},
            c.summary: views.run_summary(run),
            c.status: views.engine_status(self.backend.info(), run),
            c.current: run,
            c.history: history,
            c.history_pick: gr.update(choices=[(views.history_label(r), i) for i, r in enumerate(history)],
                                      value=len(history) - 1),
            c.bundle_file: bundle,
            c.tokens_file: tokens,
        }
        update.update(panels.final(c, run, reference=0))
        return update

    def _export(self, run: Run) -> tuple[str, str]:
        stem = self.export_dir / run.request.get("request_id", "run")
        bundle, tokens = stem.with_suffix(".json"), stem.with_suffix(".csv")
        bundle.write_text(run.to_json(indent=1))
        run.tokens_frame().to_csv(tokens, index=False)
        return str(bundle), str(tokens)

    # --- panels and history ---------------------------------------------------------------------

    def rediff(self, run: Run | None, reference) -> str:
        if run is None:
            return gr.skip()
        return panels.diff_view(run, int(reference or 0))

    async def reopen(self, history: list, index):
        if not history or index is None or not 0 <= int(index) < len(history):
            raise gr.Error("Pick a run from the list first.")
        return await self._final_async(history[int(index)], history)

    async def replay(self, run: Run | None, index):
        """Run sample i alone (n=1, its own seed) and say whether it came out the same."""
        if run is None:
            raise gr.Error("Run something first: replay needs a run to compare with.")
        try:
            i = int(index)
        except (TypeError, ValueError):
            raise gr.Error(f"Sample i must be a whole number, got {index!r}") from None
        if not 0 <= i < run.n:
            raise gr.Error(f"Sample i must be between 0 and {run.n - 1}, got {i}")
        original = run.samples[i]
        request = _rerun(run, n=1, seed=original.seed, mode="wrapper", output_kind="FINAL_ONLY")
        replayed = (await _complete(self.backend, request)).samples[0]
        verdict = _verdict(original.token_ids, replayed.token_ids, partial=not original.finished)
        text = (f"**Sample {i} (seed {original.seed}) replayed alone: {verdict}.** "
                "Alone it runs in a batch of one; seeded sampling can still differ when the batch "
                "composition changes (floating-point order), so a divergence names its token.")
        table = [[i, original.seed, len(original.token_ids), len(replayed.token_ids), verdict, replayed.text]]
        return text, gr.update(value=table, headers=["sample", "seed", "tokens (run)", "tokens (replay)",
                                                      "verdict", "replayed text"], visible=True)

    async def compare(self, run: Run | None):
        """Run the same request through the wrapper and through vLLM's native n, one after the other."""
        if run is None:
            raise gr.Error("Run something first: the comparison reuses its settings and seed.")
        wrapper = await _complete(self.backend, _rerun(run, mode="wrapper", output_kind="FINAL_ONLY"))
        native = await _complete(self.backend, _rerun(run, mode="native", output_kind="FINAL_ONLY"))
        rows = []
        for w, nat in zip(wrapper.samples, native.samples):
            rows.append([w.index, w.seed, len(w.token_ids), len(nat.token_ids), _verdict(w.token_ids, nat.token_ids)])
        same = sum(r[-1] == "identical" for r in rows)
        text = (f"**Wrapper vs native, seed {run.request.get('seed')}: {same} of {len(rows)} samples identical.** "
                "Both ran on the same engine one after the other; other users' requests would change the batch.")
        return text, gr.update(value=rows, headers=["sample", "seed", "wrapper tokens", "native tokens", "verdict"],
                                visible=True)

    # --- the public API -------------------------------------------------------------------------

    async def sample_api(self, prompt: str, n: int = 4, seed: int | None = None, output_kind: str = "CUMULATIVE",
                         mode: str = "wrapper", temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                         max_tokens: int = 64, stop: list[str] | None = None, logprobs: int | None = None,
                         use_chat_template: bool = False, ignore_eos: bool = False) -> str:
        """Sample n completions. Streams progress snapshots as JSON; the final value is the run bundle."""
        try:
            sample_request = SampleRequest.from_user(
                prompt=prompt, n=n, seed=seed, output_kind=output_kind, mode=mode, temperature=temperature,
                top_p=top_p, top_k=top_k, max_tokens=max_tokens, stop=stop, logprobs=logprobs,
                use_chat_template=use_chat_template, ignore_eos=ignore_eos)
            latest = None
            async for run in paced(record(self.backend, sample_request), interval=0.25):
                latest = run or latest  # a heartbeat (None) repeats the last progress
                if latest is not None and latest.finished:
                    self.last_run = latest
                    yield latest.to_json()
                    return
                yield json.dumps(_progress(latest))
        except Exception as e:
            raise _shown(e) from None


def _shown(error: Exception) -> gr.Error:
    """Every failure reaches the person as a sentence: ours as written, anything else (a check
    vLLM makes that we do not, a bug) with its type, and logged with its traceback."""
    if isinstance(error, gr.Error):
        return error
    if isinstance(error, PlaygroundError):
        return gr.Error(str(error))
    log.error("unexpected error in a run", exc_info=error)
    return gr.Error(f"unexpected error ({type(error).__name__}): {error}")


def _from_ui(settings: dict) -> SampleRequest:
    """UI values -> a checked SampleRequest (numbers arrive as floats, stop strings as lines)."""
    settings = dict(settings)
    stop = settings.pop("stop") or ""
    settings["stop"] = [_unescape(line) for line in stop.splitlines() if line != ""]
    settings["logprobs"] = int(settings["logprobs"] or 0) or None
    try:
        return SampleRequest.from_user(**settings)
    except InvalidRequest as e:
        raise gr.Error(str(e)) from None


def _unescape(line: str) -> str:
    return line.replace("\\n", "\n").replace("\\t", "\t")


def _rerun(run: Run, **changes) -> SampleRequest:
    fields = SampleRequest.__dataclass_fields__
    return SampleRequest(**{**{k: v for k, v in run.request.items() if k in fields}, **changes})


async def _complete(backend, request: SampleRequest) -> Run:
    run = None
    try:
        async for run in record(backend, request):
            pass
    except Exception as e:
        raise _shown(e) from None
    return run


def _verdict(a: list[int], b: list[int], partial: bool = False) -> str:
    if partial:
        b = b[:len(a)]
    k = first_divergence(a, b)
    if k is None:
        return "identical" + (f" over the {len(a)} tokens the stopped sample had" if partial else "")
    return f"diverged at token {k}"


def _remember(history: list, run: Run) -> list:
    rid = run.request.get("request_id")
    history = [r for r in history if r.request.get("request_id") != rid] + [run]
    return history[-HISTORY_SIZE:]


def _progress(run: Run | None) -> dict:
    if run is None:
        return {"status": "running", "samples": []}
    return {"status": run.status, "request_id": run.request.get("request_id"),
            "samples": [{"index": s.index, "seed": s.seed, "text": s.text, "num_tokens": len(s.token_ids),
                         "finish_reason": s.finish_reason} for s in run.samples]}


async def _tick() -> None:
    await asyncio.sleep(0.02)
