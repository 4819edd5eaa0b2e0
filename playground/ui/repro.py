"""The Reproducibility tab: replay one sample alone, or rerun the shown run through the wrapper
and through vLLM's native n, and say from the token ids whether they came out the same; when they
did not, which condition differed between the two runs, read from their two records."""

from __future__ import annotations

import gradio as gr

from playground.analysis import first_divergence, why_different
from playground.backends.base import record
from playground.request import SampleRequest
from playground.run import Run
from playground.ui.messages import shown


class Repro:
    def __init__(self, backend):
        self.backend = backend

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
        request = SampleRequest.from_record(run.request, n=1, seed=original.seed, mode="wrapper",
                                            output_kind="FINAL_ONLY")
        replay = await complete(self.backend, request)
        replayed = replay.samples[0]
        verdict = compare_tokens(original.token_ids, replayed.token_ids, partial=not original.finished)
        text = (f"**Sample {i} (seed {original.seed}) replayed alone: {verdict}.** "
                "Alone it runs in a batch of one; seeded sampling can still differ when the batch "
                "composition changes (floating-point order), so a divergence names its token.")
        if not verdict.startswith("identical"):
            text += "\n\n" + why(run, replay, "the run", "the replay")
        table = [[i, original.seed, len(original.token_ids), len(replayed.token_ids), verdict, replayed.text]]
        return text, gr.update(value=table, headers=["sample", "seed", "tokens (run)", "tokens (replay)",
                                                      "verdict", "replayed text"], visible=True)

    async def compare(self, run: Run | None):
        """Run the same request through the wrapper and through vLLM's native n, one after the other."""
        if run is None:
            raise gr.Error("Run something first: the comparison reuses its settings and seed.")
        wrapper, native = [await complete(self.backend, SampleRequest.from_record(run.request, mode=mode,
                                                                                   output_kind="FINAL_ONLY"))
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


async def complete(backend, request: SampleRequest) -> Run:
    run = None
    try:
        async for run in record(backend, request):  # noqa: B007 (the loop keeps the last)
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
