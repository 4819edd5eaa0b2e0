"""The playground page, declared top to bottom, then connected to plain handlers.

The layout comes first, in the order it appears: the form, the run summary, the samples area (one
component for every sample, fed by deltas, in columns or a token wall), and the tabs. What it
declared becomes one ``Page``; only then are events connected, each handler a function over the
page and the session's ``gr.State`` values (running.py: Run and Stop; showing.py: a run on
screen; the tabs' own modules for their buttons). Each analysis tab is a Panel (panels.py), so
every path that shows a run shows it in every tab.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import gradio as gr
from starlette.middleware import Middleware

from playground import analysis
from playground.bundles import PAGE_MAX_MB, ReadLimits
from playground.request import fields
from playground.store import RunStore
from playground.ui import (
    branch_tab,
    compare_tab,
    controls,
    downloads,
    export_tab,
    gradio_costs,
    graph_tab,
    history_tab,
    links,
    panels,
    qa_tab,
    replay_action,
    repro_tab,
    running,
    saved_runs,
    set_tab,
    showing,
    sweep_tab,
    views,
)
from playground.ui.api import EXCEPTION_HANDLERS, PositionalCalls, sample_endpoint
from playground.ui.form import BOUNDS_JS, KEYS_JS, setting_controls
from playground.ui.markdown import GUARD_JS
from playground.ui.page import Page
from playground.ui.panels import panel
from playground.ui.samples_area import SHOW_SAMPLES_JS, SamplesArea
from playground.ui.waiting import SAMPLING, SampleLimit

ASSETS = Path(__file__).resolve().parents[2] / "assets"
# Open-ended starts: seeded samples diverge within a few tokens, and the tree shows where. Each with
# what it needs: the chat template (an instruct model answers questions only inside it), n and a
# temperature.
EXAMPLES = {
    "Once upon a time, in a village at the edge of the sea,": (False, 4, 1.0),
    "Give me a name for a pet dragon and say why.": (True, 8, 0.9),
    "The three most surprising facts about octopuses are": (False, 6, 1.0),
    "Write a haiku about autumn rain.": (True, 4, 0.8),
    "def fibonacci(n):": (False, 4, 0.7),
    "What is 17 * 23? Think step by step, then give the number.": (True, 16, 0.8),
}


def example_settings(prompt: str) -> tuple:
    """An example's chat template, n and temperature, set as its prompt is picked, and a line that
    says so: the temperature sits in the folded sampler settings, where a change goes unseen."""
    if prompt not in EXAMPLES:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    chat, n, temperature = EXAMPLES[prompt]
    return chat, n, temperature, (f"The example set n={n}, temperature {temperature:g} and the chat template "
                                  f"{'on' if chat else 'off'}; change any of them before Run.")


def replayed_files(backend) -> tuple:
    """The runs a replay-only app plays (``--replay``): Compare lists them beside every session's."""
    library = getattr(backend, "library", None)
    return tuple(library.runs) if library is not None else ()


def build_app(backend, sync_runner=None, embedding_model: str | None = None,
              max_file_mb: float = PAGE_MAX_MB, store: RunStore | None = None) -> gr.Blocks:
    """The page on ``backend``; ``embedding_model``: a sentence-embedding model the Set tab may group
    samples by meaning with (None: not offered; the default setup is offline); ``max_file_mb``: the
    largest file the page accepts (``launch_app`` has Gradio refuse bigger uploads); ``store``: where
    runs are kept and links find them (None: in the tab's memory only)."""
    limits = backend.limits
    # An instruct model answers a question only inside its chat template; the examples that are
    # completions (a story's first line, code) switch it off themselves.
    chat_default = bool(backend.info().get("has_chat_template"))
    export_dir = downloads.export_folder()  # the downloads go with the app
    measures = analysis.set_measures_hook()  # the set measures beside a sweep's and a comparison's own

    # Gradio keeps its own copy of every download and upload: emptied by age (a day), checked
    # hourly, and whole when the app stops, so an afternoon of reports does not stay in /tmp.
    with gr.Blocks(title="vLLM parallel-sampling playground", delete_cache=(3600, 86400)) as demo:
        # --- the form -------------------------------------------------------------------------
        gr.Markdown("# vLLM parallel-sampling playground\n"
                    "One prompt, n samples: watch them stream side by side, then see **where** and "
                    "**why** they diverge.", elem_id="title")
        status = gr.Markdown(views.engine_status(backend.info()), elem_id="engine-status")
        # Compact on purpose: the samples are the product, and they stream right under the form
        # (in view after Run at 1280x720); examples are one line of chips, the rest folds away.
        with gr.Row():
            with gr.Column(scale=3):
                form = setting_controls(limits, ["prompt"])
                with gr.Row():
                    form |= setting_controls(limits, ["use_chat_template"], use_chat_template=chat_default)
                    run_btn = gr.Button("Run", variant="primary", elem_id="run")
                    stop_btn = gr.Button("Stop", variant="stop", elem_id="stop")
                examples_slot = gr.Column(elem_id="examples")
                with gr.Accordion("Rendered prompt: what the model receives", open=False):
                    rendered = gr.Markdown(elem_id="rendered-prompt")
                link_row = links.declare()
            with gr.Column(scale=2):
                form |= setting_controls(limits, ["n", "seed", "output_kind", "mode"])
                with gr.Accordion("Sampler settings", open=False):
                    form |= setting_controls(limits, [f.name for f, meta in fields() if meta.sampler])
        with examples_slot:
            examples = gr.Examples([[prompt] for prompt in EXAMPLES], [form["prompt"]],
                        label="Examples that show seeded diversity", fn=example_settings,
                        outputs=[form["use_chat_template"], form["n"], form["temperature"], link_row.note],
                        run_on_click=True,
                        api_visibility="private")

        # --- the samples ----------------------------------------------------------------------
        with gr.Row(equal_height=True, elem_id="summary-row"):
            summary = gr.Markdown(elem_id="run-summary")
            # Run scrolls the page to the samples, past the form's Stop: a second one where the eyes are.
            stop_near = gr.Button("■ Stop", variant="stop", size="sm", scale=0, min_width=90, elem_id="stop-near",
                                  interactive=False)  # while a run streams into the samples area
        samples = SamplesArea()
        branch_pick = gr.Textbox(visible="hidden", elem_id="branch-pick")  # a click on a token writes "i,k"

        # --- the tabs -------------------------------------------------------------------------
        panels_note = gr.Markdown(elem_id="panels-note")  # while a run streams: which tabs follow it
        with gr.Tabs(elem_id="panels") as tabs:
            with gr.Tab("Diff", id="diff", elem_id="tab-diff"):
                with gr.Row():
                    # Any value is taken (and read as a sample of the run shown): a stale one must never
                    # make Gradio refuse the events that read the panels' controls.
                    reference = gr.Dropdown(choices=[0], value=0, label="Reference sample", elem_id="reference",
                                            allow_custom_value=True)
                    diff_samples = gr.Textbox(label=f"Samples to compare (default: {panels.DIFF_ROWS}, those that "
                                                    "share the longest beginnings side by side)",
                                              placeholder="e.g. 0-15, 40", elem_id="diff-samples")
                diff = panel("Diff", panels.diff, controls={"diff_reference": reference, "diff_samples": diff_samples},
                             reference=reference, diff_view=gr.HTML(elem_id="diff-view"),
                             pairwise=gr.Plot(label="Pairwise similarity and divergence"))
            with gr.Tab("Tree", id="tree"):
                tree = panel("Tree", panels.tree, tree=gr.Plot(label="Divergence tree (click a box to branch from it)",
                                                       elem_id="tree-chart"))
            graph = graph_tab.declare(embedding_model)
            set_ = set_tab.declare(embedding_model)
            with gr.Tab("Timing", id="timing"):
                tokens_over_time = gr.Plot(label="Tokens over time")
                with gr.Row():
                    itl, ttft = gr.Plot(label="Inter-token latency"), gr.Plot(label="Time to first token")
                timing = panel("Timing", panels.timing, live=panels.timing_live,
                               tokens_over_time=tokens_over_time,
                               itl=itl, ttft=ttft, child_timeline=gr.Plot(label="What the engine did with each child",
                                                                 elem_id="child-timeline"),
                               table=gr.Dataframe(label="Per sample", interactive=False, visible=False))
            with gr.Tab("Logprobs", id="logprobs"):
                logprobs = panel("Logprobs", panels.logprobs,
                                 uncertainty=gr.Plot(label="Chosen-token probability and entropy "
                                                           "(bits, lower bound from top-k)",
                                                     elem_id="logprobs-uncertainty"),
                                 agreement=gr.Plot(label="Agreement across samples"))
            with gr.Tab("Inspector", id="inspector", elem_id="tab-inspector"):
                inspector = panel("Inspector", panels.inspector, live=panels.inspector_live,
                                  note=gr.Markdown(elem_id="inspector-note"), timeline=gr.Plot(label="Raw events"),
                                  events=gr.Dataframe(label="Every raw event of the run, as it was yielded",
                                                      interactive=False, visible=False, elem_id="events-table"))
            branch = branch_tab.declare(branch_pick)
            repro = repro_tab.declare()
            sweep = sweep_tab.declare(measures)
            compare = compare_tab.declare(export_dir, measures, files=replayed_files(backend))
            export = export_tab.declare()
            history = history_tab.declare(ReadLimits(max_bytes=int(max_file_mb * 2**20), max_samples=limits.max_n),
                                          store)
            qa = qa_tab.declare(backend, sync_runner)

        page = Page(backend, export_dir, status, form, summary, samples, tabs,
                    [diff, tree, graph.panel(set_), set_.panel(), timing, logprobs, inspector], history.pick,
                    history.note,
                    action=gr.State(None), current=gr.State(None), history=gr.State([]), selected=gr.State("Diff"),
                    extra=saved_runs.extra(history.saved), said=link_row.note, stop_near=stop_near,
                    panels_note=panels_note)

        # The Compare tab on screen brings its lists up to date as each run ends (chained to every run's end).
        page.after_run.append(compare_tab.after_run(compare, page, sweep.runs, history.saved.keeper))

        # --- the events -----------------------------------------------------------------------
        prompt, use_chat = form["prompt"], form["use_chat_template"]
        # One listener for both: an example sets both at once, and two listeners could answer out of
        # order, leaving the preview of a state the form is no longer in.
        gr.on([prompt.change, use_chat.change], partial(controls.preview_and_status, page),
              [prompt, use_chat, page.current], [rendered, status], show_progress="hidden", trigger_mode="always_last",
              api_visibility="private")
        # Checked and planned outside the queue: a refusal is shown at once and nothing is stored; else
        # the session holds its action before the run waits for a slot.
        started = run_btn.click(partial(running.begin, page), [page.action, page.current],
                                [page.action, summary, status, link_row.note, *form.values(),
                                 *page.streaming_outputs()],
                                inputs_kwargs=form,
                                queue=False, show_progress="hidden", api_visibility="private")
        shows = page.controls()  # every handler that shows a run takes the panels' own controls too
        stream, finish = partial(running.stream, page), partial(running.finish, page)
        run_event = running.run_events(started, page, stream, finish)
        run_btn.click(None, None, None, js=SHOW_SAMPLES_JS)
        # An example refills the form: a refusal of the form before it no longer speaks of it.
        examples.load_input_event.then(lambda said, run: gr.skip() if (line := views.after_new_settings(said, run))
                                       is None else line, [summary, page.current], summary, queue=False,
                                       show_progress="hidden", api_visibility="private")
        branch_event = branch_tab.connect(branch, page, stream, finish, set_)
        branch.branch_btn.click(None, None, None, js=SHOW_SAMPLES_JS)
        replay_event = replay_action.connect(history.replay, page, history.pick, history.saved)
        history.replay.button.click(None, None, None, js=SHOW_SAMPLES_JS)  # a replay streams where a run does
        # Stop ends the session's action itself (any button's, a sweep's too: its follower draws what
        # finished); cancelling the event also takes a queued run off the queue.
        stopped = gr.on([stop_btn.click, stop_near.click, sweep.stop_btn.click], partial(running.stop, page),
              [page.action, *page.inputs()], [*page.outputs(), *page.said_outputs()], inputs_kwargs=shows,
              cancels=[run_event, branch_event, replay_event], queue=False,
              show_progress="hidden", api_visibility="private")
        # A sample picked in the samples area becomes the Diff tab's reference and the sample the
        # Reproducibility tab runs again alone.
        samples.html.select(picked_sample, page.current, [reference, repro.index], api_visibility="private")
        for trigger in (reference.change, diff_samples.submit):
            trigger(lambda run, ref, chosen: panels.diff_view(run, panels.reference_sample(ref, run.n), chosen)
                    if run is not None else gr.skip(), [page.current, reference, diff_samples],
                    diff.components["diff_view"], api_visibility="private")
        tabs.select(open_tab(page), [page.current, page.action], [page.selected, *[c for p in page.panels
                                                                       for c in p.components.values()]],
                    inputs_kwargs=shows, show_progress="hidden", api_visibility="private")
        set_tab.connect(set_, page.current)
        graph_tab.connect(graph, page, set_)
        repro_tab.connect(repro, page)
        sweep_tab.connect(sweep, page)
        compare_tab.connect(compare, page.history, sweep.runs, page.current, page.samples.session, history.saved.keeper)
        export_tab.connect(export, page, set_)
        history_tab.connect(history, page, sweep, compare)
        saved_runs.connect(history.saved, page, [run_event, branch_event], demo, stopped)
        links.connect(link_row, page, history.saved)
        qa_tab.connect(qa, page)
        demo.load(partial(controls.on_load, page), [prompt, use_chat], [status, rendered], api_visibility="private")
        demo.load(None, None, None, js=GUARD_JS)  # markup a run's words carry past the escaping loses its teeth
        demo.load(None, None, None, js=BOUNDS_JS)  # a number typed past a slider's bounds is said
        demo.load(None, None, None, js=KEYS_JS)  # Ctrl+Enter runs, Esc stops
        demo.load(None, None, None, js=running.SAID_ALOUD_JS)  # a screen reader hears the run's state change
        demo.load(None, None, None, js=set_tab.CLICK_JS)  # a click on an answer group's bar reaches the server
        demo.load(None, None, None, js=branch_tab.PICK_JS)  # a click on a token or a tree box offers a branch
        demo.load(None, None, None, js=graph_tab.CLICK_JS)  # a click on a graph node marks its samples
        if preload := plotly_preload_js():
            demo.load(None, None, None, js=preload)
        demo.load(None, None, None, js=PURGE_PLOTS_JS)  # a chart taken off the page lets go of its memory
        gr.api(sample_endpoint(backend), api_name="sample", concurrency_id=SAMPLING)
    demo.max_file_mb = max_file_mb  # for launch_app: Gradio refuses bigger uploads before they are read
    demo.playground_page = page  # what the handlers are given (tests drive them directly)
    return demo


# Gradio's plot draws a new chart for each value and never purges the one it replaced: the old
# chart's window resize listener (a responsive chart's) keeps it and its nodes alive, about 1.7 MB
# a run with the Timing tab open, until a reload. A chart taken off the page and not put back by
# the next frame is purged.
PURGE_PLOTS_JS = """
() => {
  const purge = (chart) => requestAnimationFrame(() => {
    if (!chart.isConnected && window.Plotly) window.Plotly.purge(chart);
  });
  new MutationObserver((changes) => {
    for (const change of changes) {
      for (const node of change.removedNodes) {
        if (node.nodeType !== 1) continue;
        if (node.classList.contains('js-plotly-plot')) purge(node);
        for (const chart of node.querySelectorAll('.js-plotly-plot')) purge(chart);
      }
    }
  }).observe(document.body, {childList: true, subtree: true});
}
"""


def plotly_preload_js() -> str | None:
    """Gradio loads its plotly renderer (a 4.6 MB script) when the page draws its first figure,
    which is when a run ends: the page then stops painting for 1-1.5 s on a 2-core machine. Load
    it while the page opens instead (``window.__plotlyReady`` says when it is in: the benchmark
    waits for it). None when this Gradio names the file otherwise."""
    found = sorted((Path(gr.__file__).parent / "templates" / "frontend" / "assets").glob("PlotlyPlot-*.js"))
    if not found:
        return None
    return (f"() => {{ window.__plotlyReady = false; import(new URL('assets/{found[0].name}', document.baseURI).href)"
            ".then(() => { window.__plotlyReady = true; }, () => { window.__plotlyReady = null; }); }")


def open_tab(page: Page):
    """The listener of a tab opened (Gradio reads the type of ``evt`` from this function)."""

    async def opened(run, action, evt: gr.SelectData, **settings):
        return await showing.opened(page, run, evt, action, **settings)

    return opened


def picked_sample(run, evt: gr.SelectData):
    """A sample picked in the samples area becomes the Diff tab's reference, with the run's samples
    as its choices (the Diff tab fills them only when it draws, and a value outside a dropdown's
    choices is refused by Gradio in every later event that reads it, Run's among them), and the
    Reproducibility tab's Sample i: one pick, whichever tab it is read in."""
    n = max(run.n if run is not None else 0, int(evt.index) + 1)
    return gr.update(choices=list(range(n)), value=int(evt.index)), int(evt.index)


def launch_app(demo: gr.Blocks, *, concurrency: int = 8, queue_size: int = 64, **launch_kwargs):
    """Launch with the playground's styles and queue settings (shared by the serve command and the tests)."""
    # Unbounded: --queue-size counts runs, refused where they start (ui/waiting.py), never a run's
    # later steps or a page's load.
    demo.queue(default_concurrency_limit=concurrency, max_size=None)
    room = demo.playground_page.waiting
    room.blocks, room.limit, room.action_id = demo, queue_size, demo.playground_page.action._id
    gradio_costs.trim(demo)  # what Gradio does per event, yield and idle moment that the app does not need
    app_kwargs = launch_kwargs.pop("app_kwargs", None) or {}
    app_kwargs["exception_handlers"] = {**EXCEPTION_HANDLERS, **app_kwargs.get("exception_handlers", {})}
    app_kwargs["middleware"] = [Middleware(SampleLimit, room=room), Middleware(PositionalCalls),
                                *app_kwargs.get("middleware", [])]
    return demo.launch(css_paths=[ASSETS / "style.css"], max_file_size=f"{demo.max_file_mb:g}mb",
                       app_kwargs=app_kwargs, **launch_kwargs)

