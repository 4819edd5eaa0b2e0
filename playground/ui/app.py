"""The playground page: declared top to bottom, then wired to plain handlers over per-session
gr.State (running.py and live.py: Run and Stop; handlers.py: showing a run, History; repro.py;
opening.py: a saved run; api.py: /sample; controls.py; the tabs with handlers of their own:
set_panel.py, sweep_panel.py, compare_panel.py, qa_panel.py). Each analysis tab is a Panel
(panels.py; the Set tab's is ``SetTab.panel()``), so every path that shows a run shows it.

Sample columns are prebuilt up to max-n and shown or hidden by n: one async generator can then
feed them all, and the API endpoints stay static for gradio_client (listeners made inside
gr.render are invisible to it).
"""

from __future__ import annotations

import math
from pathlib import Path

import gradio as gr

from playground import analysis
from playground.bundles import PAGE_MAX_MB, ReadLimits
from playground.request import fields
from playground.ui import compare_panel, panels, qa_panel, set_panel, sweep_panel, views
from playground.ui.api import sample_endpoint
from playground.ui.controls import Controls
from playground.ui.form import setting_controls
from playground.ui.handlers import COLUMN_CLASS, COLUMNS_PER_ROW, Handlers
from playground.ui.opening import Opener
from playground.ui.panels import panel
from playground.ui.repro import Repro
from playground.ui.running import Running

ASSETS = Path(__file__).resolve().parents[2] / "assets"
EXAMPLES = [
    # Open-ended starts: seeded samples diverge within a few tokens, and the tree shows where.
    ["Once upon a time, in a village at the edge of the sea,", False, 4, 1.0],
    ["Give me a name for a pet dragon and say why.", True, 8, 0.9],
    ["The three most surprising facts about octopuses are", False, 6, 1.0],
    ["Write a haiku about autumn rain.", True, 4, 0.8],
    ["def fibonacci(n):", False, 4, 0.7],
]


def build_app(backend, sync_runner=None, embedding_model: str | None = None,
              max_file_mb: float = PAGE_MAX_MB) -> gr.Blocks:
    """The page on ``backend``; ``embedding_model``: a sentence-embedding model the Set tab may group
    samples by meaning with (None: not offered; the default setup is offline); ``max_file_mb``: the
    largest file the page accepts (``launch_app`` has Gradio refuse bigger uploads)."""
    limits = backend.limits
    max_n = limits.max_n
    # An instruct model answers a question only inside its chat template; the examples that are
    # completions (a story's first line, code) switch it off themselves.
    chat_default = bool(backend.info().get("has_chat_template"))
    h = Handlers(backend)

    with gr.Blocks(title="vLLM parallel-sampling playground") as demo:
        gr.Markdown("# vLLM parallel-sampling playground\n"
                    "One prompt, n samples: watch them stream side by side, then see **where** and "
                    "**why** they diverge.", elem_id="title")
        status = gr.Markdown(views.engine_status(backend.info()), elem_id="engine-status")

        with gr.Row():
            with gr.Column(scale=3):
                form = setting_controls(limits, ["prompt"])
                with gr.Row():
                    form |= setting_controls(limits, ["use_chat_template"], use_chat_template=chat_default)
                    run_btn = gr.Button("Run", variant="primary", elem_id="run")
                    stop_btn = gr.Button("Stop", variant="stop", elem_id="stop")
                with gr.Accordion("Rendered prompt: what the model receives", open=False):
                    rendered = gr.Markdown(elem_id="rendered-prompt")
                examples_slot = gr.Column()
            with gr.Column(scale=2):
                form |= setting_controls(limits, ["n", "seed", "output_kind", "mode"], n=min(4, max_n))
                with gr.Accordion("Sampler settings", open=False):
                    form |= setting_controls(limits, [f.name for f, meta in fields() if meta.sampler])
        prompt, use_chat, n = form["prompt"], form["use_chat_template"], form["n"]

        with examples_slot:
            gr.Examples(EXAMPLES, [prompt, use_chat, n, form["temperature"]],
                        label="Examples that show seeded diversity")
        summary = gr.Markdown(elem_id="run-summary")

        rows, groups, headers, texts = [], [], [], []
        for row in range(math.ceil(max_n / COLUMNS_PER_ROW)):
            with gr.Row(equal_height=False, visible=row * COLUMNS_PER_ROW < n.value) as row_block:
                rows.append(row_block)
                for i in range(row * COLUMNS_PER_ROW, min(max_n, (row + 1) * COLUMNS_PER_ROW)):
                    with gr.Column(visible=i < n.value, min_width=220, elem_classes=COLUMN_CLASS) as group:
                        headers.append(gr.Markdown(f"**#{i}**", elem_id=f"sample-{i}-header"))
                        texts.append(gr.Textbox(show_label=False, lines=5, max_lines=14, interactive=False,
                                                elem_id=f"sample-{i}-text", elem_classes="sample-text"))
                    groups.append(group)

        measures = analysis.set_measures_hook()  # the set measures beside a sweep's and a comparison's own
        with gr.Tabs(elem_id="panels") as tabs:
            with gr.Tab("Diff", id="diff", elem_id="tab-diff"):
                diff = panel(panels.diff,
                             reference=gr.Dropdown(choices=[0], value=0, label="Reference sample", elem_id="reference"),
                             diff_view=gr.HTML(elem_id="diff-view"),
                             pairwise=gr.Plot(label="Pairwise similarity and divergence"))
            with gr.Tab("Tree", id="tree"):
                tree = panel(panels.tree, tree=gr.Plot(label="Divergence tree"))
            set_tab = set_panel.SetTab(embedding_model)
            with gr.Tab("Timing", id="timing"):
                tokens_over_time = gr.Plot(label="Tokens over time")
                with gr.Row():
                    itl, ttft = gr.Plot(label="Inter-token latency"), gr.Plot(label="Time to first token")
                timing = panel(panels.timing, live=panels.timing_live, tokens_over_time=tokens_over_time, itl=itl,
                               ttft=ttft, child_timeline=gr.Plot(label="What the engine did with each child",
                                                                 elem_id="child-timeline"),
                               table=gr.Dataframe(label="Per sample", interactive=False))
            with gr.Tab("Logprobs", id="logprobs"):
                logprobs = panel(panels.logprobs,
                                 uncertainty=gr.Plot(label="Chosen-token probability and entropy "
                                                           "(lower bound from top-k)"),
                                 agreement=gr.Plot(label="Agreement across samples"))
            with gr.Tab("Inspector", id="inspector", elem_id="tab-inspector"):
                inspector = panel(panels.inspector, live=panels.inspector_live,
                                  note=gr.Markdown(elem_id="inspector-note"), timeline=gr.Plot(label="Raw events"),
                                  events=gr.Dataframe(label="Every raw event the engine yielded", interactive=False,
                                                      elem_id="events-table"))
            with gr.Tab("Reproducibility", id="repro"):
                with gr.Row():
                    replay_index = gr.Number(value=0, precision=0, label="Sample i", minimum=0, elem_id="replay-index")
                    replay_btn = gr.Button("Replay sample i alone (seed+i, n=1)", elem_id="replay")
                    compare_btn = gr.Button("Compare wrapper vs native", elem_id="compare")
                repro_verdict = gr.Markdown(elem_id="repro-verdict")
                # Hidden until the first verdict: an empty Dataframe shows a grid headed "1 2 3".
                repro_table = gr.Dataframe(interactive=False, visible=False, elem_id="repro-table")
            sweep_tab = sweep_panel.build(h, measures)
            compare_tab = compare_panel.build(h.export_dir, measures)
            with gr.Tab("Export", id="export"):
                gr.Markdown("The run bundle holds the request, every raw event and the samples; every view "
                            "on this page is computed from it. The report is one HTML page of the run (columns, "
                            "diff, tree, charts, set figures) that opens anywhere, offline.")
                with gr.Row():
                    bundle_file = gr.DownloadButton("Run bundle (JSON)", value=None, elem_id="download-json")
                    tokens_file = gr.DownloadButton("Tokens (CSV)", value=None, elem_id="download-csv")
                    set_tab.export_to(gr.DownloadButton("Set figures (CSV)", value=None, elem_id="download-set-csv"),
                                      h.export_dir)
                    report_btn = gr.Button("Report (HTML)", elem_id="download-report")
                    # Written on demand (it inlines plotly.js), then downloaded by a click on this hidden one.
                    report_file = gr.DownloadButton(visible="hidden", elem_id="report-file")
            with gr.Tab("History", id="history"):
                history_pick = gr.Dropdown(choices=[], label="Runs of this browser session", type="index",
                                           elem_id="history-pick")
                reopen_btn = gr.Button("Open", elem_id="reopen")
                opener = Opener(h, sweep_tab, compare_tab, tabs,
                                ReadLimits(max_bytes=int(max_file_mb * 2**20), max_samples=max_n))
            qa_tab = qa_panel.build(h, sync_runner)  # sync_runner: a SyncRunner, else started on first use

        # This browser session's runs: the one in flight, the one on screen, the last few.
        live, current, history = gr.State(None), gr.State(None), gr.State([])

        h.bind(panels=[diff, tree, set_tab.panel(), timing, logprobs, inspector], status=status, summary=summary,
               n=n, rows=rows, groups=groups, headers=headers, texts=texts, live=live, current=current,
               history=history, history_pick=history_pick, bundle_file=bundle_file, tokens_file=tokens_file)
        controls, running, repro = Controls(h), Running(h), Repro(backend)
        shows = h.controls()  # every handler that shows a run takes the panels' own controls too
        qa_tab.wire(form)
        set_tab.wire(current, groups, h.highlight)
        sweep_tab.wire(form)
        compare_tab.wire(history, sweep_tab.runs)
        opener.wire()

        for trigger in (prompt.change, use_chat.change):
            trigger(controls.render_prompt, [prompt, use_chat], rendered, show_progress="hidden",
                    trigger_mode="always_last", api_visibility="private")
        n.change(controls.show_columns, n, [*rows, *groups], show_progress="hidden", api_visibility="private")
        # Checked outside the queue: the session holds its LiveRun before the run waits for a slot.
        started = run_btn.click(running.begin, [live], [live, summary, *headers, *texts, *groups], inputs_kwargs=form,
                                queue=False, show_progress="hidden", api_visibility="private")
        run_event = started.success(running.run, [live, history], h.outputs(), inputs_kwargs=shows,
                                    concurrency_id="sampling", show_progress_on=[summary], api_visibility="private")
        # Stop ends the session's LiveRun itself; cancelling the event also takes a queued run off the queue.
        stop_btn.click(running.stop, [live, current, history], h.outputs(), inputs_kwargs=shows, cancels=[run_event],
                       queue=False, show_progress="hidden", api_visibility="private")
        diff.components["reference"].change(h.rediff, [current, diff.components["reference"]],
                                            [diff.components["diff_view"]], api_visibility="private")
        replay_btn.click(repro.replay, [current, replay_index], [repro_verdict, repro_table], api_visibility="private")
        compare_btn.click(repro.compare, [current], [repro_verdict, repro_table], api_visibility="private")
        reopen_btn.click(h.reopen, [history, history_pick], h.outputs(), inputs_kwargs=shows, api_visibility="private")
        report_btn.click(h.report, [current], report_file, api_visibility="private").success(
            None, None, None, js="() => document.querySelector('#report-file').click()")
        demo.load(controls.on_load, [prompt, use_chat], [status, rendered], api_visibility="private")
        demo.load(None, None, None, js=set_panel.CLICK_JS)  # a click on an answer group's bar reaches the server
        gr.api(sample_endpoint(backend), api_name="sample", concurrency_id="sampling")
    demo.max_file_mb = max_file_mb  # for launch_app: Gradio refuses bigger uploads before they are read
    return demo


def launch_app(demo: gr.Blocks, *, concurrency: int = 8, queue_size: int = 64, **launch_kwargs):
    """Launch with the playground's styles and queue settings (shared by app.py and the tests)."""
    demo.queue(default_concurrency_limit=concurrency, max_size=queue_size)
    return demo.launch(css_paths=[ASSETS / "style.css"], max_file_size=f"{demo.max_file_mb:g}mb", **launch_kwargs)
