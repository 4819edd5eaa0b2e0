"""The Reproducibility tab: replay one sample alone, or rerun the shown run through the wrapper
and through vLLM's native n, and say from the token ids whether they came out the same; when they
did not, which condition differed between the two runs, read from their two records."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import gradio as gr

from playground import analysis
from playground.analysis import first_divergence, why_different
from playground.backends.base import record
from playground.request import SampleRequest
from playground.run import Run
from playground.ui.messages import shown


@dataclass
class ReproTab:
    index: gr.Number
    replay_btn: gr.Button
    compare_btn: gr.Button
    verdict: gr.Markdown
    table: gr.Dataframe


def declare() -> ReproTab:
    """The tab, declared in the current ``gr.Tabs``."""
    with gr.Tab("Reproducibility", id="repro"):
        gr.Markdown("Is a seeded sample reproducible? **Replay** runs sample i alone, with its own seed (seed + i) "
                    "and n = 1; **Compare** runs the whole request again through the wrapper and through vLLM's "
                    "native n. Each says, from the token ids, *identical* or where the first token differs, and "
                    "when they differ, which condition did: on a CPU the batch a sample shares changes its "
                    "arithmetic, so a sample alone may part from the same sample among n.")
        with gr.Row():
            index = gr.Number(value=0, precision=0, label="Sample i", minimum=0, elem_id="replay-index")
            replay_btn = gr.Button("Replay sample i alone (seed+i, n=1)", elem_id="replay")
            compare_btn = gr.Button("Compare wrapper vs native", elem_id="compare")
        verdict = gr.Markdown(elem_id="repro-verdict")
        # Hidden until the first verdict: an empty Dataframe shows a grid headed "1 2 3".
        table = gr.Dataframe(interactive=False, visible=False, elem_id="repro-table")
    return ReproTab(index, replay_btn, compare_btn, verdict, table)


def connect(tab: ReproTab, page) -> None:
    tab.replay_btn.click(partial(replay, page.backend), [page.current, tab.index], [tab.verdict, tab.table],
                         api_visibility="private")
    tab.compare_btn.click(partial(compare, page.backend), [page.current], [tab.verdict, tab.table],
                          api_visibility="private")


async def replay(backend, run: Run | None, index):
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
    request = SampleRequest.from_record(run.request, n=1, seed=original.seed, mode="wrapper", output_kind="FINAL_ONLY")
    replayed_run = await complete(backend, request, run)
    replayed = replayed_run.samples[0]
    verdict = compare_tokens(original.token_ids, replayed.token_ids, partial=not original.finished)
    branch = analysis.branch_label(run)
    text = (f"**Sample {i} (seed {original.seed}) replayed alone: {verdict}.** "
            + (f"The run was {branch}: the replay starts from the same point. " if branch else "")
            + "Alone it runs in a batch of one; seeded sampling can still differ when the batch "
            "composition changes (floating-point order), so a divergence names its token.")
    if not verdict.startswith("identical"):
        text += "\n\n" + why(run, replayed_run, "the run", "the replay")
    table = [[i, original.seed, len(original.token_ids), len(replayed.token_ids), verdict, replayed.text]]
    return text, gr.update(value=table, headers=["sample", "seed", "tokens (run)", "tokens (replay)",
                                                  "verdict", "replayed text"], visible=True)


async def compare(backend, run: Run | None):
    """Run the same request through the wrapper and through vLLM's native n, one after the other."""
    if run is None:
        raise gr.Error("Run something first: the comparison reuses its settings and seed.")
    wrapper, native = [await complete(backend, SampleRequest.from_record(run.request, mode=mode,
                                                                          output_kind="FINAL_ONLY"), run)
                       for mode in ("wrapper", "native")]
    rows = [[w.index, w.seed, len(w.token_ids), len(nat.token_ids), compare_tokens(w.token_ids, nat.token_ids)]
            for w, nat in zip(wrapper.samples, native.samples)]
    same = sum(r[-1] == "identical" for r in rows)
    text = (f"**Wrapper vs native, seed {run.request.get('seed')}: {same} of {len(rows)} samples identical.** "
            "Both ran on the same engine one after the other; other users' requests would change the batch.")
    if same < len(rows):
        text += "\n\n" + why(wrapper, native, "the wrapper's run", "the native run")
    return text, gr.update(value=rows, headers=["sample", "seed", "wrapper tokens", "native tokens", "verdict"],
                            visible=True)


async def complete(backend, request: SampleRequest, of: Run | None = None) -> Run:
    """The request run to its end; ``of``: the run it repeats, whose branch (if any) it keeps."""
    labels = {"branch": of.request["branch"]} if of is not None and of.request.get("branch") else None
    run = None
    try:
        async for run in record(backend, request, labels=labels):  # noqa: B007 (the loop keeps the last)
            pass
    except Exception as e:
        raise shown(e) from None
    return run


def why(a: Run, b: Run, a_name: str, b_name: str) -> str:
    """Why two runs of the same seeds may have parted: each condition their records show differed."""
    reasons = why_different(a, b)
    if not reasons:
        return (f"**Why they may differ:** nothing recorded differed between {a_name} and {b_name} (same engine "
                "conditions, prompt, settings and batch as far as the records tell).")
    return f"**Why they may differ** ({a_name} vs {b_name}):\n" + "\n".join(
        f"- {reason[:1].upper()}{reason[1:].rstrip('.')}." for reason in reasons)


def compare_tokens(a: list[int], b: list[int], partial: bool = False) -> str:
    """The verdict on two token sequences; ``partial``: ``a`` was stopped, so compare its length."""
    if partial:
        b = b[:len(a)]
    k = first_divergence(a, b)
    if k is None:
        return "identical" + (f" over the {len(a)} tokens the stopped sample had" if partial else "")
    return f"diverged at token {k}"
