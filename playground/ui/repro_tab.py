"""The Reproducibility tab: run one sample again alone (a rerun on the engine, not a replay of a
recording), or rerun the shown run through the wrapper
and through vLLM's native n, and say from the token ids whether they came out the same; when they
did not, which condition differed between the two runs, read from their two records."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import gradio as gr

from playground import analysis
from playground.analysis import first_divergence, why_different
from playground.backends.live import State
from playground.errors import PlaygroundError
from playground.request import SampleRequest
from playground.run import Run
from playground.ui.markdown import code
from playground.ui.messages import warn
from playground.ui.running import BUSY, Action, Busy, follow_all, plan_action, refused
from playground.ui.showing import join_history
from playground.ui.waiting import SAMPLING

KEPT = {1: "\n\nThe rerun joined History (marked ↻ rerun), to open whole in every tab.",
        2: "\n\nThe two runs joined History (marked ↻ rerun), to open whole in every tab."}


@dataclass
class ReproTab:
    index: gr.Number
    rerun_btn: gr.Button
    compare_btn: gr.Button
    verdict: gr.Markdown
    table: gr.Dataframe


def declare() -> ReproTab:
    """The tab, declared in the current ``gr.Tabs``."""
    with gr.Tab("Reproducibility", id="repro"):
        gr.Markdown("Is a seeded sample reproducible? **Run sample i again alone** runs it with its own seed "
                    "(seed + i) and n = 1; **Compare** runs the whole request again through the wrapper and "
                    "through vLLM's native n. Each says, from the token ids, *identical* or where the first token "
                    "differs, and when they differ, which condition did: on a CPU the batch a sample shares changes "
                    "its arithmetic, so a sample alone may part from the same sample among n.")
        with gr.Row():
            index = gr.Number(value=0, precision=0, label="Sample i", elem_id="rerun-index")  # checked by the rerun
            rerun_btn = gr.Button("Run sample i again alone (seed+i, n=1)", elem_id="rerun-alone")
            compare_btn = gr.Button("Compare wrapper vs native", elem_id="compare")
        verdict = gr.Markdown(elem_id="repro-verdict")
        # Hidden until the first verdict: an empty Dataframe shows a grid headed "1 2 3".
        table = gr.Dataframe(interactive=False, visible=False, elem_id="repro-table")
    return ReproTab(index, rerun_btn, compare_btn, verdict, table)


def connect(tab: ReproTab, page) -> None:
    """The rerun and Compare are actions of the session like Run (running.py): refused while another
    goes, ended by Stop, their runs checked and planned before they wait for a slot."""
    outputs = [page.action, tab.verdict, tab.table]
    # The runs they make join History and the run store, as What if's do: the native run of a
    # comparison is one to open in every tab, to inspect its events or compare it whole.
    ended = [page.action, page.history, page.samples.session]
    tab.rerun_btn.click(partial(begin_rerun, tab, page), [page.action, page.current, tab.index], outputs,
                         queue=False, show_progress="hidden", api_visibility="private"
                         ).success(partial(rerun, tab, page), ended, [tab.verdict, tab.table, *page.history_outputs()],
                                   concurrency_id=SAMPLING, api_visibility="private")
    tab.compare_btn.click(partial(begin_compare, tab, page), [page.action, page.current], outputs, queue=False,
                          show_progress="hidden", api_visibility="private"
                          ).success(partial(compare, tab, page), ended, [tab.verdict, tab.table,
                                                                         *page.history_outputs()],
                                    concurrency_id=SAMPLING, api_visibility="private")


async def _begin(tab: ReproTab, page, action: Action | None, name: str, requests: list[SampleRequest],
                 about: tuple) -> dict:
    """The action's runs, planned, each marked a rerun of the run it repeats (``request.rerun``:
    that run, and the sample run again alone); a rerun keeps the branch of the run it repeats (it
    starts from the same point)."""
    of = about[0]
    rerun = {"of": of.request.get("request_id"), "sample": about[1] if len(about) > 1 else None}
    labels = {"rerun": rerun, **({"branch": of.request["branch"]} if of.request.get("branch") else {})}
    try:
        action = await plan_action(page, action, name, [(request, labels) for request in requests])
    except Busy:  # the going action stays as it is
        return {tab.verdict: f"⚠️ {BUSY}"}
    except PlaygroundError as e:
        return {page.action: None, tab.verdict: refused(e)}
    action.about = about
    return {page.action: action, tab.verdict: f"⏳ {name}: running…", tab.table: gr.update(visible=False)}


async def begin_rerun(tab: ReproTab, page, action: Action | None, run: Run | None, index) -> dict:
    """Sample i of the run on screen, alone: n=1, its own seed (seed + i)."""
    if run is None:
        return {tab.verdict: "⚠️ Run something first: the rerun needs a run to compare with."}
    if index is None:  # the box left blank
        return {tab.verdict: f"⚠️ Type which sample to run again in Sample i: 0 to {run.n - 1}."}
    i = int(index)
    if not 0 <= i < run.n:
        return {tab.verdict: f"⚠️ Sample i must be between 0 and {run.n - 1}, got {i}."}
    request = SampleRequest.from_record(run.request, n=1, seed=run.samples[i].seed, mode="wrapper",
                                        output_kind="FINAL_ONLY")
    return await _begin(tab, page, action, "Sample alone", [request], (run, i))


async def rerun(tab: ReproTab, page, action: Action | None, history: list | None, session) -> dict:
    """Run sample i alone and say whether it came out the same."""
    ended = await _ended(action, page.backend, "Sample alone")
    if ended is None:  # the rerun was refused: its verdict says why
        return {tab.verdict: gr.skip()}
    joined = join_history(page, history, [live.run for live in action.runs if live.run is not None], session)
    if isinstance(ended, str):
        return {tab.verdict: ended, **joined}
    (run, i), (rerun_run,) = action.about, ended
    original, again = run.samples[i], rerun_run.samples[0]
    said = compare_tokens(original.token_ids, again.token_ids, partial=not original.finished)
    verdict, in_table = said + parted_at(original, again), said + parted_at(original, again, as_text)
    branch = analysis.branch_label(run)
    text = (f"**Sample {i} (seed {original.seed}) run again alone: {verdict}.** "
            + (f"The run was {branch}: the rerun starts from the same point. " if branch else "")
            + batch_note([rerun_run], "it"))
    if not verdict.startswith("identical"):
        text += "\n\n" + why(run, rerun_run, "the run", "the rerun")
    table = [[i, original.seed, len(original.token_ids), len(again.token_ids), in_table, again.text]]
    return {tab.verdict: text + KEPT[1], **joined,
            tab.table: gr.update(value=table, headers=["sample", "seed", "tokens (run)", "tokens (rerun)", "verdict",
                                                       "text of the rerun"], visible=True)}


async def begin_compare(tab: ReproTab, page, action: Action | None, run: Run | None) -> dict:
    """The run on screen again, through the wrapper and through vLLM's native n."""
    if run is None:
        return {tab.verdict: "⚠️ Run something first: the comparison reuses its settings and seed."}
    requests = [SampleRequest.from_record(run.request, mode=mode, output_kind="FINAL_ONLY")
                for mode in ("wrapper", "native")]
    return await _begin(tab, page, action, "Compare", requests, (run,))


async def compare(tab: ReproTab, page, action: Action | None, history: list | None, session) -> dict:
    """The two runs, one after the other, and the verdict per sample."""
    ended = await _ended(action, page.backend, "Compare", together=False)
    if ended is None:
        return {tab.verdict: gr.skip()}
    joined = join_history(page, history, [live.run for live in action.runs if live.run is not None], session)
    if isinstance(ended, str):
        return {tab.verdict: ended, **joined}
    (run,), (wrapper, native) = action.about, ended
    rows = [[w.index, w.seed, len(w.token_ids), len(nat.token_ids), compare_tokens(w.token_ids, nat.token_ids)]
            for w, nat in zip(wrapper.samples, native.samples)]
    same = sum(r[-1] == "identical" for r in rows)
    text = (f"**Wrapper vs native, seed {run.request.get('seed')}: {same} of {len(rows)} samples identical.** "
            "Both ran on the same engine, one after the other. " + batch_note([wrapper, native], "they"))
    if same < len(rows):
        text += "\n\n" + why(wrapper, native, "the wrapper's run", "the native run")
    return {tab.verdict: text + KEPT[2], **joined,
            tab.table: gr.update(value=rows, headers=["sample", "seed", "wrapper tokens", "native tokens", "verdict"],
                                 visible=True)}


async def _ended(action: Action | None, backend, name: str, together: bool = True) -> list[Run] | str | None:
    """The runs of the action ``name``, each finished; else the sentence that says why not
    (stopped, refused, failed); None when the session's action is not this button's."""
    lives = await follow_all(action, backend, name, together=together)
    if lives is None:
        return None
    if not lives:
        return "■ Stopped before it started: nothing was sent to the engine."
    for live in lives:
        if live.state is not State.FINISHED:
            if live.state in (State.REFUSED, State.ERROR):
                warn(live.reason or live.state.value)
            return f"■ {live.state.value}: {live.reason or 'it did not finish'}; no verdict."
    return [live.run for live in lives]


def batch_note(runs: list[Run], they: str) -> str:
    """What the engine held beside the runs a verdict is about, from their records (the engine's
    count of requests at each event): a batch of their own, or others' requests beside them
    (another tab's, another user's), which change the batch and may change a seeded sample."""
    others = [analysis.other_requests(r) for r in runs]
    if any(o is None for o in others):  # a backend that does not count: only the rule can be said
        return (f"Nothing else in the engine's batch: then {they} give the same tokens; others' requests change the "
                "batch (floating-point order), so a divergence names its token.")
    if max(others) == 0:
        return (f"Nothing else was in the engine while {they} ran (its counts say so): the batch was "
                f"{'its' if they == 'it' else 'their'} own.")
    return (f"⚠️ The engine held up to {analysis.counted(max(others), 'other request')} while {they} ran (another "
            "tab's or another user's): a shared batch can change a seeded sample (floating-point order), so a "
            "divergence names its token.")


def why(a: Run, b: Run, a_name: str, b_name: str) -> str:
    """Why two runs of the same seeds may have parted: each condition their records show differed."""
    reasons = why_different(a, b)
    if not reasons:
        return (f"**Why they may differ:** nothing recorded differed between {a_name} and {b_name} (same engine "
                "conditions, prompt, settings and batch as far as the records tell).")
    return f"**Why they may differ** ({a_name} vs {b_name}):\n" + "\n".join(
        f"- {reason[:1].upper()}{reason[1:].rstrip('.')}." for reason in reasons)


def parted_at(a, b, shown=None) -> str:
    """": `·sea` in the run, `·ocean` in the rerun", the two tokens where two samples part (as
    code: a token such as ' **' is shown, never read as Markdown; ``shown=as_text`` for a table,
    which shows Markdown as it is); "" when they do not, or a token's text is not known."""
    shown = shown or as_code
    k = first_divergence(a.token_ids, b.token_ids)
    if k is None or k >= len(a.token_ids) or k >= len(b.token_ids):
        return ""
    texts = [s.token_texts[k] if k < len(s.token_texts) else None for s in (a, b)]
    return "" if None in texts else f": {shown(texts[0])} in the run, {shown(texts[1])} in the rerun"


def as_code(token: str) -> str:
    """A token's text as a Markdown code span, its whitespace drawn (analysis.visible)."""
    return code(analysis.visible(token, False))  # the model's words, whatever characters they hold


def as_text(token: str) -> str:
    """A token's text in quotes, its whitespace drawn: for a table's cell, not Markdown."""
    return f"‘{analysis.visible(token, False)}’"


def compare_tokens(a: list[int], b: list[int], partial: bool = False) -> str:
    """The verdict on two token sequences; ``partial``: ``a`` was stopped, so compare its length."""
    if partial:
        b = b[:len(a)]
    k = first_divergence(a, b)
    if k is None:
        return "identical" + (f" over the {len(a)} tokens the stopped sample had" if partial else "")
    return f"diverged at token {k}"
