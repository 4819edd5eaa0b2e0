"""Runs to feed the samples area without an engine: a synthetic run, a replay of any Run at the pace
its tokens arrived, and a minimal page with the component (the harness and its browser test use it).

A synthetic run looks like a sampled one where the samples area cares: samples share prefixes of
varied length (a random tree of continuations), a tenth stop early, and every token has a
log-probability and a top-k whose probabilities add up to at most 1. Token times follow an engine
that gives every unfinished sample one token per step, the first after ``first_s``.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from array import array
from collections.abc import AsyncIterator, Callable
from typing import Any

import gradio as gr

from playground.logprobs import Logprobs
from playground.run import Run, Sample, TokenLogprob
from playground.ui.samples_area import VIEWS, SamplesArea, SamplesSession

VOCAB = [" the", " sea", " light", "house", " keeper", ",", ".", "\n", " and", " a", " old", " wind", " night",
         " he", " she", " was", " of", " in", " to", " lamp", " ship", " rock", " storm", " waves", " every",
         " evening", " wrote", " log", " birds", " rail", " salt", " grey", " dark", " bright", " slowly", "\n\n",
         " said", " \"", "\"", " it", " had", " been", " years", " since", " anyone", " came", " there", " but",
         " that", " morning", " a", " small", " boat", " appeared", " on", " horizon", "é", "", " 42", "\t",
         " under", " over", " through", " quiet", " harbour", " village", " children", " stories", " told"]
STEP_S = {32: 0.04, 128: 0.1, 256: 0.17, 1024: 0.6}  # seconds per engine step, roughly, on this machine


def step_for(n: int) -> float:
    """One engine step (a token for every sample) at n samples: about 0.02 s + 0.6 ms a sample, so
    n=256 x 64 tokens takes about 11 s, as the real engine does here (9-16 s)."""
    return STEP_S.get(n, 0.02 + 0.0006 * n)


def synthetic_run(n: int, tokens: int = 64, *, seed: int = 0, logprobs: int | None = 5, first_s: float = 0.3,
                  step_s: float | None = None, stop_share: float = 0.1) -> Run:
    """A finished run of ``n`` samples of up to ``tokens`` tokens (``logprobs=None``: none recorded)."""
    rng = random.Random(seed)
    step_s = step_for(n) if step_s is None else step_s
    sequences: list[list[int]] = []
    for _ in range(n):
        length = tokens if rng.random() >= stop_share else rng.randint(max(1, tokens // 8), tokens - 1)
        prefix: list[int] = []
        if sequences:
            parent = sequences[rng.randrange(len(sequences))]
            prefix = parent[:min(len(parent), length, int(rng.expovariate(1 / 6)))]
        sequences.append(prefix + [rng.randrange(len(VOCAB)) for _ in range(length - len(prefix))])
    samples, texts = [], {}
    for i, ids in enumerate(sequences):
        s = Sample(index=i, seed=1000 + i, token_ids=list(ids), token_texts=[VOCAB[t] for t in ids],
                   token_times=[round(first_s + pos * step_s, 4) for pos in range(len(ids))],
                   finish_reason="length" if len(ids) == tokens else "stop")
        if logprobs is not None:  # in arrays, as an engine's are
            made = [_logprob(rng, t, logprobs) for t in ids]
            s.logprobs = Logprobs.of(made, texts) or made
        samples.append(s)
    request = {"prompt": "synthetic", "n": n, "seed": 1000, "max_tokens": tokens, "logprobs": logprobs,
               "mode": "wrapper", "output_kind": "DELTA", "request_id": f"synthetic-{n}x{tokens}-{seed}"}
    run = Run(request=request, samples=samples, status="finished")
    run.wall_time = max((s.token_times[-1] for s in samples if s.token_times), default=0.0)
    return run


def _logprob(rng: random.Random, token: int, k: int) -> TokenLogprob:
    """The sampled token's logprob and a top-k around it: mostly a likely token, sometimes not."""
    first = rng.betavariate(4, 1.2)  # a language model is mostly sure of its next token
    rest = [rng.random() ** 2 for _ in range(max(k, 1) - 1)]
    scale = (1 - first) * rng.uniform(0.5, 0.95) / (sum(rest) or 1)  # some mass stays outside the top-k
    probs = [first] + sorted((w * scale for w in rest), reverse=True)
    rank = rng.choices(range(len(probs)), weights=probs)[0]  # sampled as the model would
    others = [t for t in rng.sample(range(len(VOCAB)), k + 1) if t != token][: max(k - 1, 0)]
    ids = others[:rank] + [token] + others[rank:]
    top = [(t, _f32(math.log(p)), VOCAB[t]) for t, p in zip(ids[:k], probs)]
    return TokenLogprob(token_id=token, logprob=top[rank][1], rank=rank + 1, text=VOCAB[token], top=top)


def _f32(value: float) -> float:
    """A float32 value, as vLLM's logprobs are."""
    return array("f", [value])[0]


async def replay(full: Run, speed: float = 1.0) -> AsyncIterator[Run]:
    """Yield a growing copy of ``full`` as record() yields a live run: once empty, then each time
    tokens arrive (every token at its recorded time, divided by ``speed``), then finished."""
    live = Run(request=dict(full.request), samples=[
        Sample(index=s.index, seed=s.seed, logprobs=[] if s.logprobs is not None else None) for s in full.samples])
    arrivals = sorted({t for s in full.samples for t in s.token_times})
    started = time.monotonic()
    next_pos = [0] * full.n
    yield live
    for t in arrivals:
        await asyncio.sleep(max(0.0, started + t / speed - time.monotonic()))
        now = time.monotonic() - started
        for s, dst in zip(full.samples, live.samples):
            pos = next_pos[s.index]
            while pos < len(s.token_ids) and s.token_times[pos] <= t:
                dst.token_ids.append(s.token_ids[pos])
                dst.token_texts.append(s.token_texts[pos])
                dst.token_times.append(round(now, 4))
                if dst.logprobs is not None and s.logprobs:
                    dst.logprobs.append(s.logprobs[pos])
                pos += 1
            next_pos[s.index] = pos
            if pos == len(s.token_ids) and dst.finish_reason is None and pos:
                dst.finish_reason, dst.stop_reason = s.finish_reason, s.stop_reason
        yield live
    live.status, live.wall_time = "finished", time.monotonic() - started
    yield live


def demo_app(config: dict[str, Any], make_run: Callable[[dict], Run] | None = None) -> tuple[gr.Blocks, dict]:
    """A page with only the samples area, a Run button (streams a replay), a Show button (the whole
    run at once), and the selected sample as the Python listener heard it.

    ``config`` is read at each click: ``n``, ``tokens``, ``logprobs``, ``speed``, ``view``,
    ``interval`` (fixed pacing; None: paced by acks), ``window``. Returns the Blocks and a dict the
    handlers fill for measurement: ``sessions`` (each run's SamplesSession) and ``picked``.
    """
    make = make_run or (lambda c: synthetic_run(c.get("n", 32), c.get("tokens", 64), logprobs=c.get("logprobs", 5)))
    record: dict[str, Any] = {"sessions": [], "picked": [], "tokens": [], "runs": []}
    with gr.Blocks(title="samples area") as demo:
        with gr.Row():
            run_btn = gr.Button("Run", elem_id="run")
            show_btn = gr.Button("Show finished", elem_id="show")
            picked = gr.Textbox(label="selected sample (heard by Python)", elem_id="picked")
        area = SamplesArea(view=config.get("view", "auto"), window=config.get("window", 1))

        async def stream(session: SamplesSession):
            full = make(config)
            record["sessions"].append(session)
            record["runs"].append(full)
            if config.get("view") in VIEWS:
                yield area.switch(session, config["view"])
            async for run in session.paced(replay(full, config.get("speed", 1.0)), window=config.get("window"),
                                           interval=config.get("interval")):
                yield area.update(session, run)

        def show(session: SamplesSession):
            full = make(config)
            record["sessions"].append(session)
            return area.show(session, full, config.get("view") if config.get("view") in VIEWS else None)

        def heard(evt: gr.SelectData):
            record["picked"].append(evt.index)
            record["tokens"].append(evt.value.get("token"))
            return str(evt.index)

        run_btn.click(stream, [area.session], [area.html], show_progress="hidden")
        show_btn.click(show, [area.session], [area.html], show_progress="hidden")
        area.html.select(heard, None, picked, show_progress="hidden")
    return demo, record
