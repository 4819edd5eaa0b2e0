"""The Export tab: the run on screen as a file, written when asked for.

The run bundle (JSON: request, every event, every sample; every view on the page is computed
from it), its tokens (CSV), its set measures per sample (CSV, with the Set tab's extractor), and
its report (one HTML page that opens anywhere, offline). Each is written by its button's handler,
then downloaded by a click on one hidden DownloadButton: writing them all for every run shown
would cost a second or more at n=256 with logprobs (the report inlines plotly.js).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import gradio as gr

from playground import analysis
from playground.analysis import with_reference
from playground.run import Run
from playground.ui.answer_controls import extractor_spec
from playground.ui.downloads import download_path
from playground.ui.messages import refusal, warn

INTRO = ("The run bundle holds the request, every raw event and the samples; every view on this page is "
         "computed from it. The report is one HTML page of the run (samples, diff, tree, charts, set measures) "
         "that opens anywhere, offline.")
DOWNLOAD = "() => document.querySelector('#export-file').click()"


@dataclass
class ExportTab:
    bundle: gr.Button
    tokens: gr.Button
    set_csv: gr.Button
    report: gr.Button
    file: gr.DownloadButton  # hidden: each button's file goes here, then the browser clicks it


def declare() -> ExportTab:
    """The tab, declared in the current ``gr.Tabs``."""
    with gr.Tab("Export", id="export"):
        gr.Markdown(INTRO)
        with gr.Row():
            bundle = gr.Button("Run bundle (JSON)", elem_id="download-json")
            tokens = gr.Button("Tokens (CSV)", elem_id="download-csv")
            set_csv = gr.Button("Set measures (CSV)", elem_id="download-set-csv")
            report = gr.Button("Report (HTML)", elem_id="download-report")
            file = gr.DownloadButton(visible="hidden", elem_id="export-file")
    return ExportTab(bundle, tokens, set_csv, report, file)


def connect(tab: ExportTab, page, set_tab) -> None:
    """Each button writes its file for the run on screen, then the hidden button downloads it."""
    for button, write, extra in ((tab.bundle, bundle_file, []), (tab.tokens, tokens_file, []),
                                 (tab.set_csv, set_file, [set_tab.extractor, set_tab.pattern, set_tab.reference]),
                                 (tab.report, report_file, [set_tab.extractor, set_tab.pattern, set_tab.reference])):
        button.click(partial(written, write, page.export_dir), [page.current, *extra], tab.file,
                     api_visibility="private").success(None, None, None, js=DOWNLOAD)


async def written(write, export_dir: Path, run: Run | None, *args) -> str:
    if run is None:
        raise refusal("Run something first, or open a saved run: the export is of the run on screen.")
    return await asyncio.to_thread(write, export_dir, run, *args)


def _stem(export_dir: Path, run: Run, suffix: str = "") -> Path:
    """The file's name: the run's id, and what it replays when it is a replay (the tokens' times
    in a replay's files are the replay's)."""
    of = analysis.replayed_from(run)
    return download_path(export_dir, str(run.request.get("request_id", "run")) + (f"-replay-of-{of}" if of else "")
                         + suffix)


def bundle_file(export_dir: Path, run: Run) -> str:
    path = _stem(export_dir, run).with_suffix(".json")
    path.write_text(run.to_json(indent=1), encoding="utf-8")
    return str(path)


def tokens_file(export_dir: Path, run: Run) -> str:
    path = _stem(export_dir, run).with_suffix(".csv")
    analysis.tokens_table(run).to_csv(path, index=False)
    return str(path)


def set_file(export_dir: Path, run: Run, answer: str | None = None, pattern: str | None = None,
             reference: str | None = None) -> str:
    """Each sample's answer and group, read with the Set tab's extractor as it stands, and with
    its reference answer whether each is right."""
    run = with_reference(run, reference)
    try:
        measures = analysis.set_measures(run, extractor_spec(answer, pattern))
    except analysis.InvalidExtractor as e:
        raise refusal(f"The Set tab's answers cannot be read: {e}. Change the pattern there, or pick another "
                      "way of reading answers.") from None
    path = _stem(export_dir, run, "-set").with_suffix(".csv")
    analysis.samples_frame(run, measures, run.request.get("reference")).to_csv(path, index=False)
    return str(path)


def report_file(export_dir: Path, run: Run, answer: str | None = None, pattern: str | None = None,
                reference: str | None = None) -> str:
    """The report, its answers read with the Set tab's extractor and reference as they stand; one
    that cannot read them (a pattern being typed) gives way to the whole text, and a warning says so."""
    run = with_reference(run, reference)
    try:
        extractor = analysis.parse_extractor(extractor_spec(answer, pattern))
        report = analysis.report_for([run], analysis.set_measures_hook(extractor), extractor)
    except analysis.InvalidExtractor as e:
        warn(f"The Set tab's answers cannot be read ({e}): the report groups the whole texts instead.")
        report = analysis.report_for([run], analysis.set_measures_hook(), None)
    path = _stem(export_dir, run).with_suffix(".html")
    path.write_text(report, encoding="utf-8")
    return str(path)
