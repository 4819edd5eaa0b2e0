"""The "Compare" tab.

Pick any two runs of this browser session (History, opened files, the last sweep) or of the
browser's saved runs (the run store: a reload leaves them to compare): both runs'
columns pair by pair with where A's sample first parts from B's (pairing sample i of A with sample i
of B, or the samples that share a seed: *Pair samples by*), the settings that differ, and the
measures of both side by side. Files are opened in the History tab
(history_tab.py), which hands their runs to ``add``. When the run on screen is a branch, the
lists offer it and the run it branched from, A the parent and B the branch. What the seeds make of
the pairs is said in one statement (``analysis.comparison.seed_statement``, the report's too): two
runs that share child seeds are not independent, and the samples that share one are named.

Declared with ``declare()`` inside the page's ``gr.Tabs``; ``connect(tab, history, sweep_runs,
current)`` hooks its events up (the page's History state, the Sweep tab's runs, the run on screen).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import gradio as gr

from playground import analysis
from playground.analysis.comparison import PAIR_BY, PAIRS_HEADING, PairBy, conditions_statement, seed_statement
from playground.run import Run
from playground.ui.answer_controls import optional_controls, with_chosen_answers
from playground.ui.downloads import download_path
from playground.ui.markdown import plain
from playground.ui.messages import said, warned
from playground.ui.saved_runs import label as saved_label
from playground.ui.saved_runs import stored_run
from playground.ui.views import history_label

INTRO = ("Pick two runs of this session (History, files opened in the History tab, the last sweep) or this "
         "browser's saved runs. With the "
         "same base seed, sample i has the same seed in both runs, so where they first part is what the "
         "difference between the runs changed. The lists are brought up to date as the tab opens (or with "
         "*Update the lists*): A and B start as the run on screen's parent and the run, when it is a branch, "
         "else as the newest other run of the same prompt and n (else the newest other run) and the run. Runs "
         "whose base seeds are closer than n share child seeds "
         "at different indices (seed 1 and seed 2: A's sample 1 and B's sample 0 both have seed 2): pair the "
         "samples by seed to set those side by side.")
TWO_RUNS = ("Pick two runs first: Run A and Run B list this tab's runs, the files opened in the History tab, "
            "the last sweep and this browser's saved runs (Update the lists after another run).")
MAX_UPLOADED = 50  # runs kept per session from uploads; the oldest go first
PAIR_COLUMNS = ["sample_a", "sample_b", "seed_a", "seed_b", "tokens_a", "tokens_b", "verdict", "token_a", "token_b",
                "pair_similarity"]
BY_CHOICES = [("index (sample i of A with sample i of B)", "index"), ("seed (the samples that share one)", "seed")]


def pool(history: list[Run] | None, uploads: list[Run] | None, sweep_runs: list[Run] | None,
         files: Sequence[Run] = ()) -> dict[str, tuple[str, Run]]:
    """Every run the session can compare, once each (by request id, the first source that holds it),
    by a key that stays valid while the lists grow and drop their oldest: key -> (label, run).
    ``files``: the runs the app replays (``--replay``), the same for every session and never changed,
    so a replay can be compared with the run it plays."""
    found, seen = {}, set()
    for source, runs in (("history", history), ("upload", uploads), ("sweep", sweep_runs), ("file", files)):
        for run in runs or []:
            rid = run.request.get("request_id")
            if rid not in seen:
                seen.add(rid)
                found[f"{source}:{rid}"] = (label(source, run), run)
    return found


def label(source: str, run: Run) -> str:
    """A run as the lists name it: where it is from, then as History names it (``history_label``:
    its id, settings, status, what it is beside a sampling of the engine, so a replay is never
    taken for a sampling, and its prompt)."""
    return f"{source} · {history_label(run)}"


def comparison(a: Run, b: Run, measures: analysis.Measures | None = None,
               by: PairBy = "index") -> tuple[str, object, object, object, str]:
    """The tab's view of A against B: the headline, the table of pairs (``by`` index or seed), the
    settings that differ, the measures side by side, and both runs' columns with the token diff."""
    shown_a, shown_b, lined_up = analysis.aligned(a, b)  # a branch behind the tokens it was sent after
    pairs = analysis.pair_frame(shown_a, shown_b, by)
    changed = analysis.settings_diff(a, b)
    what = ", ".join(f"{r.setting} {r.A} → {r.B}" for r in changed.itertuples())
    what = f"Differing settings: {plain(what)}" if what else "No setting differs"  # a stop string is anybody's
    headline = (f"**{analysis.identical_pairs(pairs, by)}** between A (`{a.request.get('request_id')}`) and "
                f"B (`{b.request.get('request_id')}`). {what}.")
    for run, name in ((a, "A"), (b, "B")):
        if branch := analysis.branch_label(run):
            headline += f" {name} is {plain(branch)}."
        if origin := analysis.origin_label(run):
            headline += f" {name} is {'a ' if analysis.replayed_from(run) else ''}{plain(origin)}."
        if cut := analysis.cut_short_note(run):
            headline += f" ⚠️ In {name}, {cut}"
    if lined_up:
        headline += f" {lined_up}"
    for statement in (seed_statement(a, b, by), conditions_statement(a, b),  # the report says the same
                      analysis.probabilities_note(a, b)):
        if statement:  # it quotes the records: their settings and engines, as text
            headline += f"\n\n{plain(statement)}"
    side_by_side = analysis.measures_side_by_side(a, b, measures).map(
        lambda v: round(v, 3) if isinstance(v, float) else v)
    return (headline, analysis.frame_in_words(pairs[PAIR_COLUMNS].round(3)), changed.astype(str), side_by_side,
            analysis.comparison_html(shown_a, shown_b, frame=pairs, by=by))


@dataclass
class CompareTab:
    panel: gr.Tab
    a: gr.Dropdown
    b: gr.Dropdown
    refresh_btn: gr.Button
    compare_btn: gr.Button
    answer: gr.Dropdown
    pattern: gr.Textbox
    by: gr.Radio  # pair samples by index or by seed
    headline: gr.Markdown
    changed: gr.Dataframe
    side_by_side: gr.Dataframe
    pairs: gr.Dataframe
    columns: gr.HTML
    report: gr.DownloadButton
    uploads: gr.State
    export_dir: Path
    extra_measures: analysis.Measures | None = None
    graphs_btn: gr.Button | None = None  # both runs' sample graphs, side by side, on demand
    graph_a: gr.Plot | None = None
    graph_b: gr.Plot | None = None
    keeper: object = None  # the run store's keeper (ui/keeping.py): this browser's saved runs join the lists
    files: Sequence[Run] = ()  # the runs the app replays (--replay): every session's lists hold them

    def comparison(self) -> list:
        """What Compare writes (``compare``'s outputs, in this order)."""
        return [self.headline, self.pairs, self.changed, self.side_by_side, self.columns, self.report]

    def result(self) -> list:
        """What shows the comparison of A and B: Compare's outputs, and the graphs drawn on demand
        (``cleared`` empties them)."""
        return [*self.comparison(), self.graph_a, self.graph_b]


def declare(export_dir, measures: analysis.Measures | None = None, files: Sequence[Run] = ()) -> CompareTab:
    """The tab, declared in the current ``gr.Tabs`` (``export_dir``: where the page writes its
    downloads; ``measures``: extra per-run measures, e.g. the set measures; ``files``: the runs the
    app replays)."""
    with gr.Tab("Compare", id="compare", elem_id="tab-compare") as panel:
        gr.Markdown(INTRO)
        with gr.Row():
            a = gr.Dropdown(choices=[], label="Run A", elem_id="compare-a")
            b = gr.Dropdown(choices=[], label="Run B", elem_id="compare-b")
        with gr.Row():
            refresh_btn = gr.Button("Update the lists", elem_id="compare-refresh")
            compare_btn = gr.Button("Compare", variant="primary", elem_id="compare-run")
        with gr.Row():
            by = gr.Radio(BY_CHOICES, value="index", label="Pair samples by", elem_id="compare-by")
            answer, pattern = optional_controls("Compare the majority answers too, read as", "compare")
        headline = gr.Markdown(elem_id="compare-headline")
        with gr.Row():
            changed = gr.Dataframe(label="Settings that differ", interactive=False, visible=False,
                                   elem_id="compare-settings")
            # read down whole (no inner scroll); a long value (the identical samples of n=256) wraps
            # in its column rather than pushing B and B - A off the page
            side_by_side = gr.Dataframe(label="Figures side by side", interactive=False, visible=False,
                                        elem_id="compare-figures", max_height=1200, wrap=True,
                                        column_widths=["28%", "28%", "28%", "16%"])
        pairs = gr.Dataframe(label=PAIRS_HEADING["index"], interactive=False, visible=False, elem_id="compare-pairs")
        columns = gr.HTML(elem_id="compare-columns")
        report = gr.DownloadButton("Comparison report (HTML)", value=None, interactive=False, elem_id="compare-report")
        graphs_btn = gr.Button("Draw both sample graphs side by side", elem_id="compare-graphs")
        with gr.Row():
            graph_a = gr.Plot(label="Sample graph of A", visible=False, elem_id="compare-graph-a")
            graph_b = gr.Plot(label="Sample graph of B", visible=False, elem_id="compare-graph-b")
        uploads = gr.State([])
    return CompareTab(panel, a, b, refresh_btn, compare_btn, answer, pattern, by, headline, changed, side_by_side,
                      pairs, columns, report, uploads, Path(export_dir), measures, graphs_btn, graph_a, graph_b,
                      files=tuple(files))


def connect(tab: CompareTab, history: gr.State, sweep_runs: gr.State, current: gr.State, session=None,
            keeper=None) -> None:
    """Hook up the events: the sources are the page's History state and the Sweep tab's runs, and
    with a run store (``keeper``) the saved runs of the session's browser (``session``), so a
    reload leaves the runs of before it to compare."""
    sources = [history, tab.uploads, sweep_runs]
    tab.keeper = keeper
    inputs = [tab.a, tab.b, *sources, tab.answer, tab.pattern, tab.by]
    outputs = tab.comparison()
    gr.on([tab.panel.select, tab.refresh_btn.click], partial(lists_opened, tab),
          listed(tab, history, sweep_runs, current, session, keeper), [tab.a, tab.b, *tab.result()],
          api_visibility="private")
    # A pick of another run: what is shown below was the pair before's, and goes.
    gr.on([tab.a.input, tab.b.input], partial(cleared, tab), None, tab.result(), api_visibility="private")
    tab.compare_btn.click(partial(compare, tab), inputs, outputs, api_visibility="private")
    tab.by.change(partial(pair_again, tab), inputs, outputs, api_visibility="private")
    tab.graphs_btn.click(partial(graphs, tab), [tab.a, tab.b, *sources], [tab.graph_a, tab.graph_b],
                         api_visibility="private")


def listed(tab: CompareTab, history: gr.State, sweep_runs: gr.State, current: gr.State, session=None,
           keeper=None) -> list:
    """What the lists are made of (``lists_opened``'s inputs): the session's runs, the run on
    screen, A and B, and with a run store the session (its browser's saved runs)."""
    return [history, tab.uploads, sweep_runs, current, tab.a, tab.b] + (
        [session] if keeper is not None and session is not None else [])


def after_run(tab: CompareTab, page, sweep_runs: gr.State, keeper=None) -> tuple:
    """The tab's part at the end of a run that streamed (``page.after_run``): on screen, its lists
    are brought up to date as if it had just been opened (the new run as B, the result before
    cleared), not left naming the pair before; elsewhere nothing, until it is opened."""
    async def refreshed(selected, *lists):
        if selected != "Compare":
            return {tab.a: gr.skip(), tab.b: gr.skip()}  # the rest is left as it is too
        return lists_opened(tab, *lists)

    return (refreshed, [page.selected, *listed(tab, page.history, sweep_runs, page.current, page.samples.session,
                                                keeper)], [tab.a, tab.b, *tab.result()])


# --- handlers -----------------------------------------------------------------------------------

def add(tab: CompareTab, runs: list[Run], history, uploads, sweep_runs) -> dict:
    """An opened file's runs join the session's uploads; with two or more, A and B are its first two."""
    uploads = [*(uploads or []), *runs][-MAX_UPLOADED:]
    choices = _choices(history, uploads, sweep_runs, tab.files)
    opened = {r.request.get("request_id") for r in runs}
    keys = [key for key, (_, run) in pool(history, uploads, sweep_runs, tab.files).items()
            if run.request.get("request_id") in opened]
    a, b = (keys[0], keys[1]) if len(keys) > 1 else (keys[0] if keys else None, None)
    return {tab.uploads: uploads, tab.a: gr.update(choices=choices, value=a),
            tab.b: gr.update(choices=choices, value=b)}


def refresh_lists(tab: CompareTab, history, uploads, sweep_runs, current: Run | None = None, a_key=None, b_key=None,
                  session=None):
    """``refresh``, with this browser's saved runs after the session's own."""
    return refresh(history, uploads, sweep_runs, current, a_key, b_key, saved_choices(tab, session, history, uploads,
                                                                                      sweep_runs), tab.files)


def saved_choices(tab: CompareTab, session, history, uploads, sweep_runs) -> list[tuple[str, str]]:
    """This browser's saved runs that the session does not hold, newest first: read from the
    store when picked (``_runs``), not before."""
    owner = tab.keeper.owner(session) if tab.keeper is not None else None
    if owner is None:
        return []
    held = {run.request.get("request_id") for _, run in pool(history, uploads, sweep_runs, tab.files).values()}
    return [(f"saved · {saved_label(e)}", f"{SAVED}{e.key}")
            for e in tab.keeper.store.entries(owner) if e.request_id not in held]


SAVED = "saved:"  # a key of the lists that names a saved run by its store key


def refresh(history, uploads, sweep_runs, current: Run | None = None, a_key=None, b_key=None,
            saved: list[tuple[str, str]] = (), files: Sequence[Run] = ()):
    """The lists, up to date (``saved``: choices of runs the store holds for this browser, listed
    after the session's). A and B chosen before stay while the run on screen is one of them;
    else, when the run on screen is a branch of a run they hold, A is that parent and B the branch;
    else A is another run (``other_run``) and B the run on screen."""
    runs = pool(history, uploads, sweep_runs, files)
    choices = [(text, key) for key, (text, _) in runs.items()] + list(saved)
    keys = {run.request.get("request_id"): key for key, (_, run) in runs.items()}
    shown_key = keys.get(current.request.get("request_id")) if current is not None else None
    listed = {key for _, key in choices}
    if a_key in listed and b_key in listed and shown_key in (a_key, b_key, None):
        return gr.update(choices=choices), gr.update(choices=choices)
    parent = analysis.branched_from(current)
    if shown_key is not None and parent in keys:
        return gr.update(choices=choices, value=keys[parent]), gr.update(choices=choices, value=shown_key)
    if shown_key is not None:
        return gr.update(choices=choices, value=other_run(runs, shown_key, saved)), gr.update(choices=choices,
                                                                                            value=shown_key)
    return gr.update(choices=choices), gr.update(choices=choices)


def other_run(runs: dict[str, tuple[str, Run]], shown_key: str, saved: list[tuple[str, str]]) -> str | None:
    """A's default beside the run on screen: the run it replays, when it is a replay; else the
    newest other run of the same prompt and n (the run a demo repeats, not a one-sample rerun made
    in between), else the newest other run, else the newest saved one (after a reload the session
    holds only the run on screen), else none."""
    shown = runs[shown_key][1]
    others = [key for key in runs if key != shown_key]
    played = [key for key in others if runs[key][1].request.get("request_id") == analysis.replayed_from(shown)]
    if played:
        return played[0]
    alike = [key for key in others if runs[key][1].request.get("prompt") == shown.request.get("prompt")
             and runs[key][1].n == shown.n]
    if alike or others:
        return (alike or others)[-1]
    return saved[0][1] if saved else None


def lists_opened(tab: CompareTab, history, uploads, sweep_runs, current: Run | None = None, a_key=None, b_key=None,
                 session=None) -> dict:
    """``refresh_lists``, and when it picks other runs for A or B, the pair before's result cleared:
    what the tab shows below A and B is always theirs."""
    a, b = refresh_lists(tab, history, uploads, sweep_runs, current, a_key, b_key, session)
    moved = any("value" in update and update["value"] != key for update, key in ((a, a_key), (b, b_key)))
    return {tab.a: a, tab.b: b, **(cleared(tab) if moved else {})}


def cleared(tab: CompareTab) -> dict:
    """The result's outputs (``CompareTab.result``) emptied, each by name."""
    hidden = gr.update(value=None, visible=False)
    return {tab.headline: "", tab.pairs: hidden, tab.changed: hidden, tab.side_by_side: hidden, tab.columns: "",
            tab.report: gr.update(value=None, interactive=False), tab.graph_a: hidden, tab.graph_b: hidden}


def _runs(tab: CompareTab, keys: tuple, history, uploads, sweep_runs) -> list[Run] | None:
    """The runs the lists' keys name (a saved one read from the store now), or None when one is
    missing (nothing picked, or a saved run deleted meanwhile)."""
    runs, found = pool(history, uploads, sweep_runs, tab.files), []
    for key in keys:
        if key in runs:
            found.append(runs[key][1])
        elif key and key.startswith(SAVED) and tab.keeper is not None:
            if (run := stored_run(tab.keeper.store, key[len(SAVED):])) is None:
                return None
            found.append(run)
        else:
            return None
    return found


def compare(tab: CompareTab, a_key, b_key, history, uploads, sweep_runs, answer=None, pattern=None,
            by: PairBy = "index"):
    picked = _runs(tab, (a_key, b_key), history, uploads, sweep_runs)
    if picked is None:
        return warned(TWO_RUNS)
    a, b = picked
    by = by if by in PAIR_BY else "index"
    try:
        extra = with_chosen_answers(tab.extra_measures, answer, pattern)
    except gr.Error as e:  # a pattern that cannot work: said, and the comparison on screen stays
        return warned(said(e))
    headline, pairs, changed, side_by_side, columns = comparison(a, b, extra, by)
    if a is b or a.request.get("request_id") == b.request.get("request_id"):  # picked twice: say so, not "identical"
        headline = f"ℹ️ A and B are the same run ({a.request.get('request_id')}): pick another for one of them.\n\n" \
                   + headline
    return (headline, gr.update(value=pairs, visible=True, label=PAIRS_HEADING[by]),
            gr.update(value=changed, visible=not changed.empty), gr.update(value=side_by_side, visible=True), columns,
            gr.update(value=export(tab, a, b, extra, by), interactive=True))


def pair_again(tab: CompareTab, a_key, b_key, history, uploads, sweep_runs, answer=None, pattern=None,
               by: PairBy = "index"):
    """*Pair samples by* changed: the comparison again, paired the new way, when two runs are
    picked (else nothing: the choice waits for Compare, with no toast asking for runs)."""
    if not a_key or not b_key:
        return gr.skip()
    return compare(tab, a_key, b_key, history, uploads, sweep_runs, answer, pattern, by)


def graphs(tab: CompareTab, a_key, b_key, history, uploads, sweep_runs):
    """Both runs' sample graphs: where each run's samples part and meet again, side by side."""
    picked = _runs(tab, (a_key, b_key), history, uploads, sweep_runs)
    if picked is None:
        return warned(TWO_RUNS)
    return tuple(gr.update(value=analysis.graph_figure(analysis.sample_graph(run), title=f"{name}: "
                                                       f"{run.request.get('request_id')}"), visible=True)
                 for name, run in zip("AB", picked))


def export(tab: CompareTab, a: Run, b: Run, measures: analysis.Measures | None = None, by: PairBy = "index") -> str:
    path = download_path(tab.export_dir, f"compare-{a.request.get('request_id')}-{b.request.get('request_id')}.html")
    path.write_text(analysis.comparison_report(a, b, measures, by=by), encoding="utf-8")
    return str(path)


def _choices(history, uploads, sweep_runs, files: Sequence[Run] = ()) -> list[tuple[str, str]]:
    return [(text, key) for key, (text, _) in pool(history, uploads, sweep_runs, files).items()]
