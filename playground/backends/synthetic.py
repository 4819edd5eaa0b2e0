"""A made-up run of any n x length, shaped like a sampled one, for measuring what consumes runs (the
samples area, the replay backend at GPU pace) without an engine.

A synthetic run looks like a sampled one where its consumers care: samples share prefixes of
varied length (a random tree of continuations), a tenth stop early, and every token has a
log-probability and a top-k whose probabilities add up to at most 1. Token times follow an engine
that gives every unfinished sample one token per step, the first after ``first_s``. With
``events=True`` it also has the events the engine would have yielded for a DELTA run: one per step,
carrying every sample that got a token in it (vLLM's output collector merges a step's children
into one output; recorded native and wrapper DELTA runs look the same), the last one finished.
"""

from __future__ import annotations

import math
import random
from array import array

from playground.logprobs import Logprobs
from playground.run import Event, EventOutput, Run, Sample, TokenLogprob

VOCAB = [" the", " sea", " light", "house", " keeper", ",", ".", "\n", " and", " a", " old", " wind", " night",
         " he", " she", " was", " of", " in", " to", " lamp", " ship", " rock", " storm", " waves", " every",
         " evening", " wrote", " log", " birds", " rail", " salt", " grey", " dark", " bright", " slowly", "\n\n",
         " said", " \"", "\"", " it", " had", " been", " years", " since", " anyone", " came", " there", " but",
         " that", " morning", " a", " small", " boat", " appeared", " on", " horizon", "é", "", " 42", "\t",
         " under", " over", " through", " quiet", " harbour", " village", " children", " stories", " told"]
# Token ids spread over a vocabulary of the default model's size (49,152), not 0 to 68: what is
# written per id (a bundle's typed arrays, the page's messages) is then what a real run's costs.
TOKEN_ID = [11 + 709 * k for k in range(len(VOCAB))]
STEP_S = {32: 0.04, 128: 0.1, 256: 0.17, 1024: 0.6}  # seconds per engine step, roughly, on a 2-core CPU
PROMPT = "synthetic"
TOP_LOGPROBS = 5  # a made-up run's logprobs unless it names others: the top-5
PROMPT_TOKEN_IDS = [0, 1, 2]


def step_for(n: int) -> float:
    """One engine step (a token for every sample) at n samples: about 0.02 s + 0.6 ms a sample, so
    n=256 x 64 tokens takes about 11 s, as the real engine does here (9-16 s)."""
    return STEP_S.get(n, 0.02 + 0.0006 * n)


def synthetic_id(n: int, tokens: int, seed: int = 0) -> str:
    return f"synthetic-{n}x{tokens}-{seed}"


def synthetic_run(n: int, tokens: int = 64, *, seed: int = 0, logprobs: int | None = TOP_LOGPROBS, first_s: float = 0.3,
                  step_s: float | None = None, stop_share: float = 0.1, events: bool = False) -> Run:
    """A finished run of ``n`` samples of up to ``tokens`` tokens (``logprobs=None``: none recorded;
    ``events``: with the DELTA events an engine would have yielded)."""
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
    for i, words in enumerate(sequences):  # each a list of places in VOCAB
        ids = [TOKEN_ID[w] for w in words]
        s = Sample(index=i, seed=1000 + i, token_ids=ids, token_texts=[VOCAB[w] for w in words],
                   token_times=[round(first_s + pos * step_s, 4) for pos in range(len(ids))],
                   finish_reason="length" if len(ids) == tokens else "stop")
        s.text = "".join(s.token_texts)
        if logprobs is not None:  # in arrays, as an engine's are
            made = [_logprob(rng, w, logprobs) for w in words]
            s.logprobs = Logprobs.of(made, texts) or made
        samples.append(s)
    request = {"prompt": PROMPT, "n": n, "seed": 1000, "max_tokens": tokens, "logprobs": logprobs,
               "mode": "wrapper", "output_kind": "DELTA", "use_chat_template": False, "ignore_eos": False,
               "request_id": synthetic_id(n, tokens, seed), "rendered_prompt": PROMPT,
               "prompt_token_ids": list(PROMPT_TOKEN_IDS), "num_prompt_tokens": len(PROMPT_TOKEN_IDS)}
    run = Run(request=request, samples=samples, status="finished",
              engine={"model": "synthetic", "device": "none (a made-up run)"})
    run.wall_time = max((s.token_times[-1] for s in samples if s.token_times), default=0.0)
    if events:
        run.events = step_events(run)
    return run


def step_events(run: Run) -> list[Event]:
    """The DELTA events of a run whose tokens arrived in steps: one event per distinct arrival
    time, with every sample that got tokens then (its last event carries its finish reason)."""
    by_time: dict[float, list[EventOutput]] = {}
    for s in run.samples:
        for pos, t in enumerate(s.token_times):
            last = pos == len(s.token_ids) - 1
            by_time.setdefault(t, []).append(EventOutput(s.index, s.token_texts[pos], [s.token_ids[pos]],
                                                         s.finish_reason if last else None))
    times = sorted(by_time)
    request_id = run.request.get("request_id")
    return [Event(t=t, finished=k == len(times) - 1, outputs=by_time[t], request_id=request_id)
            for k, t in enumerate(times)]


def _logprob(rng: random.Random, token: int, k: int) -> TokenLogprob:
    """The sampled token's logprob and a top-k around it: mostly a likely token, sometimes not
    (``token`` and the alternatives drawn as places in VOCAB)."""
    first = rng.betavariate(4, 1.2)  # a language model is mostly sure of its next token
    rest = [rng.random() ** 2 for _ in range(max(k, 1) - 1)]
    scale = (1 - first) * rng.uniform(0.5, 0.95) / (sum(rest) or 1)  # some mass stays outside the top-k
    probs = [first] + sorted((w * scale for w in rest), reverse=True)
    rank = rng.choices(range(len(probs)), weights=probs)[0]  # sampled as the model would
    others = [t for t in rng.sample(range(len(VOCAB)), k + 1) if t != token][: max(k - 1, 0)]
    ids = others[:rank] + [token] + others[rank:]
    top = [(TOKEN_ID[t], _f32(math.log(p)), VOCAB[t]) for t, p in zip(ids[:k], probs)]
    return TokenLogprob(token_id=TOKEN_ID[token], logprob=top[rank][1], rank=rank + 1, text=VOCAB[token], top=top)


def _f32(value: float) -> float:
    """A float32 value, as vLLM's logprobs are."""
    return array("f", [value])[0]
