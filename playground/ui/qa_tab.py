"""The "QA matrix" tab: one button runs the page's request under every output_kind × path
(playground.qa), a grid shows each cell green or red with the rule that broke, and clicking a cell
opens that cell's run in the samples area and panels above, like any other run.

The synchronous LLMEngine is only needed here, and it costs a minute to start and a share of the
machine's memory, so it starts on the first matrix run (or comes ready from ``build_app``). The
paths belong to the app, not to a browser session: ``MatrixPaths`` holds them, one per page.
"""

from __future__ import annotations

import asyncio
import atexit
import re
import threading
import time
from dataclasses import dataclass
from functools import partial

import gradio as gr

from playground.errors import InvalidRequest, PlaygroundError
from playground.qa import matrix as qa
from playground.ui.downloads import download_path
from playground.ui.form import form_request
from playground.ui.messages import refusal, shown, warned
from playground.ui.running import BUSY, Action, Busy, open_refusal, plan_action, refused
from playground.ui.showing import show_opened
from playground.ui.waiting import QA_MATRIX

GREEN = "background-color: #dcfce7; color: #14532d"
RED = "background-color: #fee2e2; color: #7f1d1d"
AMBER = "background-color: #fef3c7; color: #78350f"  # no rule broken, but some could not be checked
INTRO = ("Runs the request above under **every output_kind × every path** (our fan-out and vLLM's native "
         "n, on the async AsyncLLM and the sync LLMEngine), **one cell at a time**, and checks each against "
         "the parallel-sampling contract. output_kind and mode above are ignored; keep n and max_tokens small "
         "(12 runs). Click a cell to open its run in the panels.")


class MatrixPaths:
    """The paths the page's matrix runs on: its backend (async, or remote) and, next to a local
    engine, the sync front end, started on first use (a second caller waits for it)."""

    def __init__(self, backend, sync_runner=None):
        self.backend = backend
        self.sync_runner = sync_runner  # a SyncRunner, or None: started on the first matrix run
        self._starting = threading.Lock()
        self._paths: list[qa.SamplingPath] | None = None

    async def get(self, progress=None) -> list[qa.SamplingPath]:
        if self._paths is not None:
            return self._paths
        remote = self.backend.info().get("backend") == "openai"
        paths = qa.backend_paths(self.backend, "remote" if remote else "async")
        if self.sync_runner is None and not remote:
            if progress is not None:
                progress(0, desc="starting the synchronous engine (LLMEngine, ~1 min; only the first matrix waits)")
            try:
                await asyncio.to_thread(self._start_sync, self.backend.info()["model"])
            except Exception as e:
                raise refusal(f"the synchronous engine (LLMEngine) could not start: {e}") from None
        if self.sync_runner is not None:
            paths += qa.sync_paths(self.sync_runner)
        self._paths = paths
        return paths

    def _start_sync(self, model: str) -> None:
        from playground.backends.sync import SyncRunner

        with self._starting:
            if self.sync_runner is not None:
                return
            runner = SyncRunner.start(model, max_n=self.backend.limits.max_n)
            atexit.register(runner.shutdown)  # its engine core runs in a process of its own: it ends with the app
            self.sync_runner = runner


@dataclass
class QATab:
    run_btn: gr.Button
    download: gr.DownloadButton
    grid: gr.Dataframe
    opened: gr.Markdown
    report: gr.Markdown
    matrix: gr.State
    paths: MatrixPaths


def declare(backend, sync_runner=None) -> QATab:
    """The tab, declared in the current ``gr.Tabs``."""
    with gr.Tab("QA matrix", id="qa", elem_id="tab-qa"):
        gr.Markdown(INTRO)
        with gr.Row():
            run_btn = gr.Button("Run the QA matrix", variant="primary", elem_id="qa-run")
            download = gr.DownloadButton("Matrix (JSON)", value=None, interactive=False, elem_id="qa-download")
        grid_ = gr.Dataframe(label="output_kind × path (click a cell to open its run)", interactive=False,
                             wrap=True, elem_id="qa-grid", visible=False)  # shown with the first matrix
        opened = gr.Markdown(elem_id="qa-opened")
        report_ = gr.Markdown(elem_id="qa-report")
        matrix = gr.State(None)
    return QATab(run_btn, download, grid_, opened, report_, matrix, MatrixPaths(backend, sync_runner))


def connect(tab: QATab, page) -> gr.events.Dependency:
    """Hook up the events; the run form and what showing a run updates come from ``page``. The
    matrix is an action of the browser session (``running.Action``) like a run: checked outside the
    queue, refused while another action goes, and ended by Stop between two cells."""
    started = tab.run_btn.click(partial(begin, tab, page), [page.action], [page.action, tab.report],
                                inputs_kwargs=page.form, queue=False, show_progress="hidden", api_visibility="private")
    # One matrix at a time in the app: each cell is meant to run alone on its engine.
    started.success(partial(run, tab, page), [page.action], [tab.grid, tab.report, tab.download, tab.matrix],
                    concurrency_limit=1, concurrency_id=QA_MATRIX, show_progress_on=[tab.opened],
                    api_visibility="private")

    async def on_cell(matrix, history, session, selected, evt: gr.SelectData, **settings):  # Gradio reads evt's type
        return await open_cell(tab, page, matrix, history, session, selected, evt, **settings)

    tab.grid.select(on_cell, [tab.matrix, *page.inputs()], [*page.outputs(), tab.opened],
                    inputs_kwargs=page.opening(), api_visibility="private")


# --- handlers -----------------------------------------------------------------------------------

async def begin(tab: QATab, page, action: Action | None, **settings) -> dict:
    """The Run-the-matrix button: the page's request (the run form, by name), checked before the
    first matrix starts its engine (a minute), becomes the session's action; a refusal is said in
    the tab's line, where the matrix's verdict goes, and nothing is stored."""
    try:
        if no_engine := getattr(tab.paths.backend, "no_engine", None):  # python app.py --replay: nothing to check
            raise no_engine("the QA matrix")
        request = form_request(**settings)
        request.check(tab.paths.backend.limits)
        action = await plan_action(page, action, "QA matrix", [])
    except Busy:
        return {tab.report: f"⚠️ {BUSY}"}
    except PlaygroundError as e:
        return {tab.report: refused(e, "Run the QA matrix")}
    action.about, action.work = request, asyncio.Event()
    return {page.action: action, tab.report: "⏳ The QA matrix runs one cell at a time (one matrix at a time in the "
                                           "app); its progress shows here, and Stop (beside Run) ends it."}


async def run(tab: QATab, page, action: Action | None, progress=gr.Progress()):  # noqa: B008 (Gradio asks so)
    """The session's matrix action, one cell at a time; returns the grid, the report, the JSON file
    and the matrix (for clicks). Stop ends it before the next cell."""
    if action is None or action.work is None or not action.claim("follow", ("QA matrix",)):
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    if action.work.is_set():  # Stop came while it waited in the queue
        return gr.skip(), "■ The QA matrix was stopped before its first cell.", gr.skip(), gr.skip()
    def on_cell(index: int, total: int, label: str) -> None:
        progress((index, total), desc=f"cell {index + 1} of {total}: {label}", unit="cells")

    try:
        paths = await tab.paths.get(progress) if not action.stop_asked else []
        matrix = await qa.run_matrix(action.about, paths, on_cell=on_cell, stop=lambda: action.stop_asked) \
            if paths else None
    except InvalidRequest as e:  # a setting only the engine refuses (the prompt's tokens past its context)
        return gr.skip(), refused(e, "Run the QA matrix"), gr.skip(), gr.skip()
    except gr.Error:
        raise
    except Exception as e:  # a failure to explain
        raise shown(e) from None
    finally:
        action.work.set()
    if matrix is None or not matrix.cells:
        return gr.skip(), "■ The QA matrix was stopped before its first cell.", gr.skip(), gr.skip()
    return (gr.update(value=grid(matrix), column_widths=column_widths(matrix), visible=True), report(matrix),
            gr.update(value=export(page.export_dir, matrix), interactive=True), matrix)


async def open_cell(tab: QATab, page, matrix: qa.Matrix | None, history, session, selected, evt: gr.SelectData,
                    action=None, **settings):
    """Open the clicked cell's run in the samples area and panels (as the History tab does)."""
    cell = cell_at(matrix, evt.index)
    if cell is None:
        return {}  # the output_kind column, or nothing run yet
    if cell.run is None:
        raise refusal(f"{cell.label} did not run: {cell.error}")
    if why := open_refusal(action):
        return warned(why)
    update, said = await show_opened(page, cell.run, history, session, selected, settings)
    update[tab.opened] = f"Showing **{cell.label}** ({cell.engine}) above: {cell.verdict()}. Opened: {said}"
    return update


def export(export_dir, matrix: qa.Matrix) -> str:
    path = download_path(export_dir, f"qa-matrix-{time.strftime('%Y%m%d-%H%M%S')}.json")
    path.write_text(matrix.to_json(indent=1), encoding="utf-8")
    return str(path)


# --- rendering -----------------------------------------------------------------------------------

def grid(matrix: qa.Matrix):
    """The verdict table, each cell green (✔) or red (✖ rule: message)."""
    frame = matrix.table().reset_index()

    def color(value) -> str:
        text = str(value)
        if text.startswith(qa.OK_MARK):
            return AMBER if text.endswith("not checked)") else GREEN
        return RED if text.startswith(qa.BAD_MARK) else ""

    return frame.style.map(color, subset=matrix.path_names)


def column_widths(matrix: qa.Matrix) -> list[str]:
    """Equal path columns, so a long red message wraps in its own column instead of squeezing the rest."""
    return ["12%"] + [f"{88 / len(matrix.paths):.1f}%"] * len(matrix.paths)


def cell_at(matrix: qa.Matrix | None, index) -> qa.Cell | None:
    """The cell under a grid click ``[row, column]``; column 0 is the output_kind label."""
    if matrix is None or not isinstance(index, (list, tuple)) or len(index) != 2:
        return None
    row, column = index
    if not 0 <= row < len(matrix.kinds) or not 1 <= column <= len(matrix.paths):
        return None
    return matrix.cell(matrix.kinds[row], matrix.path_names[column - 1])


def report(matrix: qa.Matrix) -> str:
    """The verdict on the cells that ran (a stopped matrix's too: it says how many did), then the
    matrix's report as a list."""
    count = sum(not c.ok for c in matrix.cells)
    partial = sum(bool(c.unchecked) for c in matrix.cells if c.ok)
    headline = (f"**✔ Every contract rule holds in all {len(matrix.cells)} cells.**" if matrix.ok and not partial else
                f"**✔ No cell breaks a contract rule; in {partial} of {len(matrix.cells)} cells some could not be "
                "checked** (other requests on the engine, say: the report names them; run the matrix again "
                "with the engine to itself)." if matrix.ok else
                f"**✖ {count} of {len(matrix.cells)} cells {'breaks' if count == 1 else 'break'} a contract rule.**")
    broken = [c for c in matrix.cells if not c.ok]
    if broken and all(c.mode == "native" for c in broken):  # whose the break is, before the details
        headline += (" Each is on vLLM's native path (its own fan-out of n), so the break is vLLM's own "
                     "behaviour, which the playground's wrapper does not share.")
    total = len(matrix.kinds) * len(matrix.paths)
    if len(matrix.cells) < total:
        headline = (f"**■ Stopped after {len(matrix.cells)} of {total} cells** (the others are marked not run; "
                    f"press Run the QA matrix for all of them). {headline}")
    lines = [f"{headline} Divergence between cells is reported, not judged: seeded results depend on the batch.", ""]
    for line in matrix.report().splitlines():  # one bullet per line; indented lines nest
        lines.append(("    - " if line.startswith("  ") else "- ") + _escape(line.strip()))
    return "\n".join(lines)


def _escape(text: str) -> str:
    """Markdown-escape report text: sample texts and prompts are quoted in it as they are."""
    return re.sub(r"([\\`*_{}\[\]<>()#+\-.!|~])", r"\\\1", text)
