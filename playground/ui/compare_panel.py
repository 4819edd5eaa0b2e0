"""The "Compare" tab, and opening saved runs.

Pick any two runs of this browser session (History, uploaded files, the last sweep): both runs'
columns index by index with where sample i of A first parts from sample i of B, the settings that
differ, and the figures of both side by side. A saved bundle, or a ``batch``/``sweep`` JSONL, can
be uploaded here; a file that is not one is refused with a sentence and changes nothing.

Declared with ``build()`` inside the page's ``gr.Tabs`` and hooked up with
``.wire(history, sweep_runs)`` (the page's History state and the Sweep tab's runs).
"""

from __future__ import annotations

import gradio as gr

from playground import analysis
from playground.bundles import read_runs
from playground.errors import InvalidBundle
from playground.run import Run

INTRO = ("Pick two runs of this session (History, uploaded files, the last sweep). With the same base seed, "
         "sample i has the same seed in both runs, so where they first part is what the difference between "
         "the runs changed. Or upload a run bundle, or the JSONL that `batch` or `sweep` wrote.")
MAX_UPLOADED = 50  # runs kept per session from uploads; the oldest go first
PAIR_COLUMNS = ["sample", "seed_a", "seed_b", "tokens_a", "tokens_b", "verdict", "token_a", "token_b", "similarity"]


def build(export_dir, figures: analysis.Figures | None = None) -> CompareTab:
    """Declare the tab in the current ``gr.Tabs`` (``export_dir``: where the page writes its
    downloads; ``figures``: extra per-run figures, e.g. the set figures); call
    ``.wire(history, sweep_runs)`` afterwards."""
    return CompareTab(export_dir, figures)


def read_upload(path: str | None) -> list[Run]:
    """An uploaded file -> its runs; gr.Error with the reader's sentence (naming the line) for a file
    that is not bundles, so the handler changes nothing."""
    if not path:
        raise gr.Error("Choose a file first: a run bundle (.json) or the JSONL that batch or sweep wrote.")
    try:
        runs = read_runs(path)
    except InvalidBundle as e:
        raise gr.Error(str(e)) from None
    if not runs:
        raise gr.Error("The file holds no run bundle.")
    return runs


def pool(history: list[Run] | None, uploads: list[Run] | None,
         sweep_runs: list[Run] | None) -> dict[str, tuple[str, Run]]:
    """Every run the session can compare, by a key that stays valid while lists grow: key -> (label, run)."""
    found = {}
    for source, runs in (("history", history), ("upload", uploads), ("sweep", sweep_runs)):
        for k, run in enumerate(runs or []):
            found[f"{source}:{k}:{run.request.get('request_id')}"] = (label(source, run), run)
    return found


def label(source: str, run: Run) -> str:
    info = analysis.sweep_info(run)
    what = f"{info['param']}={info['value']}" if info else f"n={run.n} · {run.request.get('mode')}"
    prompt = " ".join(str(run.request.get("prompt", "")).split())
    prompt = prompt[:32] + ("…" if len(prompt) > 32 else "")
    return f"{source} · {run.request.get('request_id')} · {what} · seed {run.request.get('seed')} · “{prompt}”"


def comparison(a: Run, b: Run, figures: analysis.Figures | None = None) -> tuple[str, object, object, object, str]:
    """The tab's view of A against B: the headline, the per-index table, the settings that differ,
    the figures side by side, and both runs' columns with the token diff."""
    pairs = analysis.pair_frame(a, b)
    same = int((pairs["verdict"] == "identical").sum())
    changed = analysis.settings_diff(a, b)
    what = ", ".join(f"{r.setting} {r.A} → {r.B}" for r in changed.itertuples()) or "no setting"
    headline = (f"**{same} of {len(pairs)} samples identical** between A (`{a.request.get('request_id')}`) and "
                f"B (`{b.request.get('request_id')}`). Differing settings: {what}.")
    side_by_side = analysis.figures_side_by_side(a, b, figures).map(
        lambda v: round(v, 3) if isinstance(v, float) else v)
    return headline, pairs[PAIR_COLUMNS].round(3), changed.astype(str), side_by_side, analysis.comparison_html(a, b)


class CompareTab:
    def __init__(self, export_dir, figures: analysis.Figures | None = None):
        self.export_dir, self.extra_figures = export_dir, figures
        with gr.Tab("Compare", id="compare", elem_id="tab-compare"):
            gr.Markdown(INTRO)
            with gr.Row():
                self.upload = gr.File(label="Open saved runs", file_types=[".json", ".jsonl"], type="filepath",
                                      elem_id="upload-runs")
                with gr.Column():
                    self.a = gr.Dropdown(choices=[], label="Run A", elem_id="compare-a")
                    self.b = gr.Dropdown(choices=[], label="Run B", elem_id="compare-b")
                    with gr.Row():
                        self.refresh_btn = gr.Button("Update the lists", elem_id="compare-refresh")
                        self.compare_btn = gr.Button("Compare", variant="primary", elem_id="compare-run")
            self.note = gr.Markdown(elem_id="upload-note")
            self.headline = gr.Markdown(elem_id="compare-headline")
            with gr.Row():
                self.changed = gr.Dataframe(label="Settings that differ", interactive=False, visible=False,
                                            elem_id="compare-settings")
                self.figures = gr.Dataframe(label="Figures side by side", interactive=False, visible=False,
                                            elem_id="compare-figures")
            self.pairs = gr.Dataframe(label="Sample i of A against sample i of B", interactive=False, visible=False,
                                      elem_id="compare-pairs")
            self.columns = gr.HTML(elem_id="compare-columns")
            self.report = gr.DownloadButton("Comparison report (HTML)", value=None, elem_id="compare-report")
            self.uploads = gr.State([])

    def wire(self, history: gr.State, sweep_runs: gr.State) -> None:
        """Hook up the events: the sources are the page's History state and the Sweep tab's runs."""
        sources = [history, self.uploads, sweep_runs]
        # A refused file is a toast; the lists keep their state (no error badge over them).
        self.upload.upload(self.open_upload, [self.upload, *sources], [self.uploads, self.a, self.b, self.note],
                           show_progress="hidden", api_visibility="private")
        self.refresh_btn.click(self.refresh, sources, [self.a, self.b], api_visibility="private")
        self.compare_btn.click(self.compare, [self.a, self.b, *sources],
                               [self.headline, self.pairs, self.changed, self.figures, self.columns, self.report],
                               api_visibility="private")

    # --- handlers -------------------------------------------------------------------------------

    def open_upload(self, path, history, uploads, sweep_runs):
        """Add the file's runs to the session's uploads; with two or more, pick its first two."""
        runs = read_upload(path)  # gr.Error: nothing changes
        uploads = [*(uploads or []), *runs][-MAX_UPLOADED:]
        choices = self._choices(history, uploads, sweep_runs)
        keys = [key for key, (_, run) in pool(history, uploads, sweep_runs).items()
                if key.startswith("upload:") and any(run is r for r in runs)]
        a, b = (keys[0], keys[1]) if len(keys) > 1 else (keys[0], None)
        note = f"Opened {len(runs)} run(s) from the file: they are in the lists as “upload · …”."
        return uploads, gr.update(choices=choices, value=a), gr.update(choices=choices, value=b), note

    def refresh(self, history, uploads, sweep_runs):
        choices = self._choices(history, uploads, sweep_runs)
        return gr.update(choices=choices), gr.update(choices=choices)

    def compare(self, a_key, b_key, history, uploads, sweep_runs):
        runs = pool(history, uploads, sweep_runs)
        if a_key not in runs or b_key not in runs:
            raise gr.Error("Pick two runs first (Update the lists, then choose A and B).")
        a, b = runs[a_key][1], runs[b_key][1]
        headline, pairs, changed, figures, columns = comparison(a, b, self.extra_figures)
        return (headline, gr.update(value=pairs, visible=True), gr.update(value=changed, visible=not changed.empty),
                gr.update(value=figures, visible=True), columns, self.export(a, b))

    def export(self, a: Run, b: Run) -> str:
        path = self.export_dir / f"compare-{a.request.get('request_id')}-{b.request.get('request_id')}.html"
        path.write_text(analysis.comparison_report(a, b, self.extra_figures), encoding="utf-8")
        return str(path)

    @staticmethod
    def _choices(history, uploads, sweep_runs) -> list[tuple[str, str]]:
        return [(text, key) for key, (text, _) in pool(history, uploads, sweep_runs).items()]
