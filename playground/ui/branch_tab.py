"""The Branch tab: resample from any point of any sample of the run on screen, with the token of a
person's choice there, and ask "what if" of every likely token at that point.

A point is sample i at token k: picked by a click on a token in the Diff view, on a box of the
divergence tree, or on a token of the samples area's wall (a sample's label or card: token 0), or
typed. The branch is a new run of the same settings (n, output_kind, mode unless changed here)
with its own seeds, whose prompt is the run's rendered prompt's ids, then sample i's first k
tokens, then the chosen token (or the model's own choice). It streams like any run and is shown
with its branch point named. "What if" runs one branch of n samples for each of the top-k tokens
at the point, side by side: each token's probability there and what its samples say (majority
answer and vote share with the Set tab's extractor, distinct-2), and one divergence tree with
each branch under its token.

The point belongs to a run: the tab keeps it (``BranchTab.source``), so a second branch from the
same point, after the first has become the run on screen, still starts from the first run. A new
point (a click, i or k typed) or a run on screen that is not a branch of it moves the tab there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import gradio as gr

from playground import analysis
from playground.analysis import Alternative, BranchPoint
from playground.backends.live import State
from playground.errors import InvalidRequest, PlaygroundError
from playground.request import SampleRequest, is_greedy
from playground.run import Run
from playground.ui import views
from playground.ui.answer_controls import extractor_spec
from playground.ui.markdown import code
from playground.ui.messages import refusal, warn
from playground.ui.page import Page
from playground.ui.running import BUSY, Action, Busy, follow_all, plan_action, refused, run_events, streaming_marks
from playground.ui.showing import join_history
from playground.ui.waiting import SAMPLING

MODEL_CHOOSES = "the model's own choice"
CONTEXT_TOKENS = 12  # tokens shown before the branch point
PICK_JS = """
() => {
  const box = () => document.querySelector('#branch-pick textarea, #branch-pick input');
  const say = (sample, position) => {
    const b = box(); if (!b) return;
    b.value = `${sample},${position}@${Date.now()}`;  // a second click on the same token is a change too
    b.dispatchEvent(new Event('input', {bubbles: true}));
  };
  document.addEventListener('click', (e) => {
    const tok = e.target.closest && e.target.closest('#diff-view .tok[data-s]');
    if (tok) say(tok.dataset.s, tok.dataset.p);
  });
  const attach = () => document.querySelectorAll('#tree-chart .js-plotly-plot').forEach((gd) => {
    if (gd._ev && !gd.__branchPick) {
      gd.__branchPick = true;
      gd.on('plotly_click', (data) => {
        const point = data && data.points && data.points[0];
        if (point && point.customdata) { const [s, p] = String(point.customdata).split(','); say(s, p); }
      });
    }
  });
  new MutationObserver(attach).observe(document.body, {childList: true, subtree: true});
  attach();
}
"""

NO_RUN = "Run something first, or open a saved run: a branch starts from a run on screen."


@dataclass
class BranchTab:
    panel: gr.Tab
    pick: gr.Textbox  # hidden: "sample,position@time", written by a click on a token or a tree box
    sample: gr.Number
    position: gr.Number
    context: gr.Markdown
    choice: gr.Radio
    token_id: gr.Textbox
    n: gr.Number
    branch_btn: gr.Button
    k: gr.Slider
    what_if_btn: gr.Button
    note: gr.Markdown
    table: gr.Dataframe
    tree: gr.Plot
    source: gr.State  # the run the point is read from


def declare(pick: gr.Textbox) -> BranchTab:
    """The tab, declared in the current ``gr.Tabs``; ``pick``: the hidden box a click on a token
    writes, declared outside the tabs (a tab's contents exist in the page only once it is opened)."""
    with gr.Tab("Branch", id="branch", elem_id="tab-branch") as panel:
        gr.Markdown("Resample from a point of a sample: click a token in the **Diff** view, a box of the "
                    "**Tree** or a token of the token wall (or pick a sample in the samples area), choose the "
                    "token to put there, and branch. "
                    "The branch keeps the run's settings and draws its own seeds; its samples hold only the "
                    "new tokens. **What if** runs one branch per likely token and puts them side by side.")
        with gr.Row():
            # No minimum: Gradio would refuse a -1 in words of its own; the point says why it is none
            sample = gr.Number(value=0, precision=0, label="Sample i", elem_id="branch-sample")
            position = gr.Number(value=0, precision=0, label="At token k", elem_id="branch-position")
            n = gr.Textbox(label="n (blank: the run's)", placeholder="the run's n", elem_id="branch-n")
        context = gr.Markdown(elem_id="branch-context")
        with gr.Row():
            choice = gr.Radio([MODEL_CHOOSES], value=MODEL_CHOOSES, label="Token at k", elem_id="branch-choice")
            token_id = gr.Textbox(label="…or a token id", placeholder="e.g. 12", elem_id="branch-token-id")
        with gr.Row():
            branch_btn = gr.Button("Branch", variant="primary", elem_id="branch-run")
            k = gr.Slider(2, analysis.MAX_ALTERNATIVES, value=3, step=1, label="What if: the top k tokens",
                          elem_id="what-if-k")
            what_if_btn = gr.Button("What if", elem_id="what-if-run")
        note = gr.Markdown(elem_id="branch-note")
        # Columns as analysis.WHAT_IF_COLUMNS: the majority answer takes the room it needs.
        table = gr.Dataframe(interactive=False, visible=False, wrap=True, elem_id="what-if-table",
                             column_widths=["8%", "9%", "10%", "8%", "34%", "10%", "9%", "12%"])
        tree = gr.Plot(label="The branches, each under its token", visible=False, elem_id="what-if-tree")
        source = gr.State(None)
    return BranchTab(panel, pick, sample, position, context, choice, token_id, n, branch_btn, k, what_if_btn, note,
                     table, tree, source)


def connect(tab: BranchTab, page: Page, stream, finish, set_tab) -> gr.events.Dependency:
    """Hook up the events; ``stream`` and ``finish`` are the page's run handlers (a branch streams
    like any run). Returns the branch's stream event (Stop cancels it)."""
    place = [tab.context, tab.choice, tab.token_id, tab.source]
    tab.pick.change(partial(picked, tab, page), [page.current, tab.pick],
                    [tab.sample, tab.position, *place, page.tabs, page.selected], api_visibility="private")
    # The point's tokens show as the tab opens and as i or k change (see ``placed`` for which run).
    # always_last: keys typed fast into i or k each fire an event, and by default Gradio drops those
    # that come while one runs, leaving the tokens of a point the boxes no longer say.
    gr.on([tab.panel.select, tab.sample.input, tab.position.input], partial(placed, tab),
          [page.current, tab.source, tab.sample, tab.position], place, trigger_mode="always_last",
          api_visibility="private")

    def on_sample(run: Run | None, evt: gr.SelectData) -> dict:  # Gradio reads evt's type here
        return sample_picked(tab, page, run, evt)

    page.samples.html.select(on_sample, [page.current], [tab.sample, tab.position, *place, page.tabs, page.selected],
                             api_visibility="private")
    started = tab.branch_btn.click(partial(begin, tab, page),
                                   [page.action, tab.source, page.current, tab.sample, tab.position, tab.choice,
                                    tab.token_id, tab.n],
                                   [page.action, page.summary, tab.context, tab.source, tab.note,
                                    *page.streaming_outputs()],
                                   queue=False, show_progress="hidden", api_visibility="private")
    event = run_events(started, page, stream, finish)
    asked = tab.what_if_btn.click(partial(begin_what_if, tab, page),
                                  [page.action, tab.source, page.current, tab.sample, tab.position, tab.k, tab.n],
                                  [page.action, tab.context, tab.source, tab.note, tab.table, tab.tree], queue=False,
                                  show_progress="hidden", api_visibility="private")
    asked.success(partial(what_if, tab, page), [page.action, page.history, page.samples.session, set_tab.extractor,
                                                 set_tab.pattern],
                  [tab.note, tab.table, tab.tree, *page.history_outputs()],
                  concurrency_id=SAMPLING, api_visibility="private")
    return event


# --- choosing the point -------------------------------------------------------------------------

def point_view(tab: BranchTab, run: Run | None, sample, position) -> dict:
    """The context of the point and the tokens that could stand there."""
    try:
        i, k = int(sample), int(position)
        if run is None:
            raise ValueError("no run on screen")
        analysis.branch_prefix(run, i, k)
    except (TypeError, ValueError) as e:
        return {tab.context: f"⚠️ {e}" if run is not None else "Run something first, or open a saved run.",
                tab.choice: gr.update(choices=[MODEL_CHOOSES], value=MODEL_CHOOSES), tab.source: run}
    named = [(analysis.visible(analysis.alternative(a.text, a.token_id), False), a)
             for a in analysis.alternatives(run, i, k)]
    options = [(f"{name}  p={a.probability:.3f}" if a.probability is not None else name, str(a.token_id))
               for name, a in named]
    return {tab.context: _context(run, i, k), tab.choice: gr.update(choices=[MODEL_CHOOSES, *options],
                                                                      value=MODEL_CHOOSES),
            tab.token_id: "", tab.source: run}


def _context(run: Run, i: int, k: int) -> str:
    """The line that names the point: its run, sample and token, the tokens before it and the one
    sampled there (``i``, ``k`` checked)."""
    s = run.samples[i]
    before = "".join(analysis.pieces(s)[max(0, k - CONTEXT_TOKENS):k])
    # The sample's words are the model's (a prompt may ask it for anything): in code type, as text.
    lead = (f"{'…' if k > CONTEXT_TOKENS else ''}{code(analysis.visible(before, False))} ▸" if k else
            "its first token ▸")
    here = analysis.pieces(s)[k] if k < len(s.token_ids) else "⏹ (the sample ended here)"
    known = (f" About the p beside each choice: {analysis.logprob_note(run.engine)}"
             if analysis.alternatives(run, i, k) else
             " No logprobs were recorded there: type a token id, or let the model choose.")
    return (f"Sample **#{i}** (seed {s.seed}) at token **{k}** of `{run.request.get('request_id')}`: "
            f"{lead} {code(analysis.visible(here, False))} (what it sampled).{known}")


def picked(tab: BranchTab, page: Page, run: Run | None, text: str | None) -> dict:
    """A click on a token (Diff view) or a tree box: that point, and the Branch tab opens."""
    try:
        sample, position = (int(v) for v in (text or "").split("@")[0].split(","))
    except ValueError:
        return {}
    return {tab.sample: sample, tab.position: position, **point_view(tab, run, sample, position),
            page.tabs: gr.update(selected="branch"), page.selected: "Branch"}


def point_run(source: Run | None, current: Run | None) -> Run | None:
    """The run a point is read from: the tab's run while the run on screen is that run or a branch
    of it (a second branch from the same point), else the run on screen (a new run, or a saved one
    opened, moves the tab to it)."""
    if source is None or current is None:
        return source if current is None else current
    keep = source.request.get("request_id") in (current.request.get("request_id"), analysis.branched_from(current))
    return source if keep else current


def placed(tab: BranchTab, current: Run | None, source: Run | None, sample, position) -> dict:
    """The tab opened, or i or k typed: the point in the run ``point_run`` names."""
    return point_view(tab, point_run(source, current), sample, position)


def sample_picked(tab: BranchTab, page: Page, run: Run | None, evt: gr.SelectData) -> dict:
    """A sample picked in the samples area: the point is the token clicked in the wall, and the
    Branch tab opens there, as for a token of the Diff; a click on a sample's label or card picks
    the sample (its first token) and leaves the tab on screen as it is."""
    token = evt.value.get("token") if isinstance(evt.value, dict) else None
    position = int(token) if token is not None else 0
    opened = {page.tabs: gr.update(selected="branch"), page.selected: "Branch"} if token is not None else {}
    return {tab.sample: int(evt.index), tab.position: position, **point_view(tab, run, int(evt.index), position),
            **opened}


def checked_point(run: Run, sample, position) -> tuple[int, int]:
    """Sample i and token k as whole numbers within the run, or InvalidRequest naming which is not."""
    try:
        i, k = int(sample), int(position)
    except (TypeError, ValueError):
        raise InvalidRequest("type the sample i and the token k to branch from, as whole numbers") from None
    try:
        analysis.branch_prefix(run, i, k)
    except ValueError as e:
        raise InvalidRequest(str(e)) from None
    return i, k


def branch_request(run: Run, sample, position, forced: int | None, forced_text: str | None,
                   n) -> tuple[SampleRequest, dict]:
    """The branch's request (the run's settings, its own seeds) and its record's label."""
    i, k = int(sample), int(position)
    prefix = analysis.branch_prefix(run, i, k, forced)
    changes = {"seed": None, "prefix_token_ids": prefix or None}
    if n is not None and str(n).strip():
        changes["n"] = SampleRequest.from_user(prompt="", n=str(n).strip()).n  # coerced like any n
    request = SampleRequest.from_record(run.request, **changes)
    if request.n > 1 and is_greedy(request.temperature):
        request.n = 1  # a greedy run of n > 1 is refused: one greedy continuation is what it means
    point = BranchPoint(run.request["request_id"], i, k, forced, forced_text,
                        analysis.branch_lead(run, i, k, forced_text))
    return request, {"branch": point.to_dict()}


def forced_token(run: Run, sample, position, choice: str | None, token_id: str | None,
                 vocab_size: int | None = None) -> tuple[int | None, str | None]:
    """The token a person chose for the point: typed (and named as typed when the model has no such
    token), picked among the alternatives, or none."""
    if token_id and token_id.strip():
        try:
            typed = int(token_id.strip())
        except ValueError:
            raise InvalidRequest(f"a token id is a whole number, got {token_id!r}") from None
        if typed < 0 or (vocab_size is not None and typed >= vocab_size):
            ids = f"0 to {vocab_size - 1}" if vocab_size else "0 or more"
            raise InvalidRequest(f"token id {typed} is not a token of the model: its ids are {ids}")
        return typed, None
    if not choice or choice == MODEL_CHOOSES:
        return None, None
    chosen = int(choice)
    texts = {a.token_id: a.text for a in analysis.alternatives(run, int(sample), int(position))}
    if chosen not in texts:  # picked among another point's tokens: forced here, it would mean nothing
        raise InvalidRequest(f"the token picked (id {chosen}) is not one the model saw at token {position} of "
                             f"sample {sample}: pick among the tokens listed for that point, or type an id")
    return chosen, texts[chosen]


async def begin(tab: BranchTab, page: Page, action: Action | None, source: Run | None, current: Run | None, sample,
                position, choice, token_id, n) -> dict:
    """The branch, checked and planned, becomes this session's action; the run handler streams
    it. It starts from the run ``point_run`` names, which the tab's line then shows."""
    run = point_run(source, current)
    if run is None:
        return {tab.note: f"⚠️ {NO_RUN}"}
    try:
        sample, position = checked_point(run, sample, position)
        forced, text = forced_token(run, sample, position, choice, token_id, page.backend.limits.vocab_size)
        request, labels = branch_request(run, sample, position, forced, text, n)
        ahead = page.waiting.waiting()  # the runs its line says wait before it
        action = await plan_action(page, action, "Branch", [(request, labels)])
    except Busy:  # the going action and the summary stay as they are
        return {tab.note: f"⚠️ {BUSY}"}
    except PlaygroundError as e:  # the summary says what happened to the last press, as for Run
        message = refused(e, "Branch")
        return {page.action: None, page.summary: views.beside_run_on_screen(message, current), tab.note: message}
    note = analysis.branch_label(Run(request={**request.to_dict(), **labels}, samples=[]))
    return {page.action: action, page.summary: views.queued_summary(action.runs[0], ahead),
            **streaming_marks(page, current), tab.context: _context(run, sample, position), tab.source: run,
            tab.note: f"⎇ {note}: in the samples area above, the summary line says how it goes."}


# --- what if ------------------------------------------------------------------------------------

async def begin_what_if(tab: BranchTab, page: Page, action: Action | None, source: Run | None, current: Run | None,
                        sample, position, k, n) -> dict:
    """One branch per top-k token at the point, checked and planned as one action of the session
    (Stop ends them all)."""
    run = point_run(source, current)
    if run is None:
        return {tab.note: f"⚠️ {NO_RUN}"}
    try:
        sample, position = checked_point(run, sample, position)
    except InvalidRequest as e:
        return {page.action: None, tab.note: refused(e, "What if")}
    options = analysis.alternatives(run, sample, position, int(k))
    if not options:
        return {tab.note: f"⚠️ No logprobs were recorded at token {position} of sample {sample}: run with "
                          "logprobs (e.g. 5) to ask what if."}
    try:
        requests = [branch_request(run, sample, position, a.token_id, a.text, n) for a in options]
        action = await plan_action(page, action, "What if", requests)
    except Busy:
        return {tab.note: f"⚠️ {BUSY}"}
    except PlaygroundError as e:
        return {page.action: None, tab.note: refused(e, "What if")}
    action.about = (run, int(sample), int(position), options)
    return {page.action: action, tab.context: _context(run, sample, position), tab.source: run,
            tab.note: f"⏳ running {len(options)} branches of {requests[0][0].n} samples each…",
            tab.table: gr.update(visible=False), tab.tree: gr.update(visible=False)}


async def what_if(tab: BranchTab, page: Page, action: Action | None, history: list | None, session=None,
                  answer=None, pattern=None):
    """The branches run at once (the engine batches them), then the table and the grafted tree;
    every branch that began joins the session's history, stopped ones with what they had."""
    lives = await follow_all(action, page.backend, "What if")
    if lives is None:  # What if was refused (another action goes): its note says so
        return {tab.note: gr.skip()}
    if not lives:
        return {tab.note: "■ What if was stopped before it started: nothing was sent to the engine."}
    branches = [live.run for live in lives if live.run is not None]
    update = join_history(page, history, branches, session)
    failed = [live for live in lives if live.state in (State.REFUSED, State.ERROR)]
    if failed or len(branches) < len(lives):
        reason = failed[0].reason if failed else "stopped before every branch started"
        warn(reason)
        return {**update, tab.note: f"✖ What if did not complete: {reason}. The branches that ran are in History."}
    run, sample, position, options = action.about
    pairs = list(zip(options, branches))
    stopped = (" Stopped: each branch keeps the tokens it had." if any(live.state is State.STOPPED for live in lives)
               else "")
    return {**update, tab.note: _what_if_note(run, sample, position, pairs) + stopped,
            tab.table: gr.update(value=what_if_frame(pairs, extractor_spec(answer, pattern),
                                                     "".join(analysis.pieces(run.samples[sample])[:position])),
                                 visible=True),
            tab.tree: gr.update(value=analysis.what_if_tree(pairs), visible=True)}


def what_if_frame(pairs: list[tuple[Alternative, Run]], extractor: str | None, before: str = ""):
    try:
        return analysis.frame_in_words(analysis.what_if_table(pairs, extractor, before).round(3))
    except analysis.InvalidExtractor as e:
        raise refusal(str(e)) from None


def _what_if_note(run: Run, sample, position, pairs: list[tuple[Alternative, Run]]) -> str:
    ids = ", ".join(f"`{r.request['request_id']}`" for _, r in pairs)
    return (f"**What if**, at token {position} of sample #{sample} of `{run.request['request_id']}`: "
            f"{len(pairs)} branches ({ids}), in History. Each row is one token forced at that point and what "
            "its samples then said.")
